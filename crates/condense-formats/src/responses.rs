//! OpenAI Responses API request bodies (`POST /v1/responses`, what Codex sends): `instructions`
//! plus an `input` list of typed items instead of messages.
//!
//! Each item is one message of the model: a `message` item (or a bare `{role, content}`) is a
//! message of its role; a call item (`function_call`, `custom_tool_call`, and the built-in
//! tools' `local_shell_call`, `shell_call` and `apply_patch_call`) is an assistant message
//! holding that call; its output item (`function_call_output`, …) is a tool message holding
//! that result. Any other item is kept as an opaque part, written back as it came: in an
//! assistant message when the model made it (`reasoning` with its encrypted content,
//! `web_search_call`, a `computer_call`, an `item_reference` to what the provider stored of it,
//! …), in a user message that is no person's turn when the client did (`computer_call_output`,
//! `mcp_approval_response`). `instructions`, when a
//! string, is the first message (a system one), as Anthropic's `system` is. A string `input` is
//! the API's shorthand for one user message, and is read as that message (written back as a
//! one-item list, which the API reads the same).

use condense_core::{
    ContentShape, Conversation, JsonMap, Message, Part, Role, Text, ToolCall, ToolOutput,
    ToolResult, WireRecord,
};
use serde_json::Value;

use crate::blocks::{content_with, kind_of, take_string};
use crate::placement::{self, Joining};
use crate::{FormatError, Location};

/// An item type that holds a call: where its arguments are, and how.
struct CallKind {
    /// The item's `type`.
    kind: &'static str,
    /// The key its arguments are under.
    arguments: &'static str,
    /// How they are written there.
    form: Arguments,
    /// The tool's name, for the built-in tools whose items name none (the engine's rules and
    /// the files a call touched go by a tool's name and input).
    builtin: Option<&'static str>,
}

/// How a call item carries its arguments.
#[derive(Clone, Copy)]
enum Arguments {
    /// A JSON text (`function_call`'s `arguments`).
    Json,
    /// Free text (a custom tool's `input`, Codex's apply_patch).
    Text,
    /// A JSON object (a built-in tool's `action` or `operation`).
    Object,
}

/// The item types that hold a call. `local_shell_call` is the local shell tool's (codex-mini,
/// the AI SDK's `localShell`: `action.command` as a word list, as Codex's `shell` function
/// has it); `shell_call` the shell tool's (GPT-5.1's, the Agents SDK's `ShellTool`:
/// `action.commands`, each a whole command line); `apply_patch_call` the apply_patch tool's
/// (`operation.path`, `operation.diff`).
const CALLS: [CallKind; 5] = [
    CallKind {
        kind: "function_call",
        arguments: "arguments",
        form: Arguments::Json,
        builtin: None,
    },
    CallKind {
        kind: "custom_tool_call",
        arguments: "input",
        form: Arguments::Text,
        builtin: None,
    },
    CallKind {
        kind: "local_shell_call",
        arguments: "action",
        form: Arguments::Object,
        builtin: Some("local_shell"),
    },
    CallKind {
        kind: "shell_call",
        arguments: "action",
        form: Arguments::Object,
        builtin: Some("shell"),
    },
    CallKind {
        kind: "apply_patch_call",
        arguments: "operation",
        form: Arguments::Object,
        builtin: Some("apply_patch"),
    },
];

/// The item types that hold a call's output (a string, or for the first two a list of
/// content parts too; the shell tool's, a list of [`SHELL_OUTPUT`] chunks).
const OUTPUTS: [&str; 5] = [
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "shell_call_output",
    "apply_patch_call_output",
];

/// The shell tool's output: a list of chunks, one per command, each `{stdout, stderr,
/// outcome}` (`outcome` an exit with its code, or a timeout), which the API takes in no other
/// shape. Read as the text of its streams, one part each; the rest of each chunk stays among
/// the item's fields under `output` with the streams left `null`, to be filled in again.
const SHELL_OUTPUT: &str = "shell_call_output";

/// The streams of a [`SHELL_OUTPUT`] chunk, in the order they are read.
const SHELL_STREAMS: [&str; 2] = ["stdout", "stderr"];

/// The output item that may name its call by `id` where the others have `call_id`: the API
/// reference's `local_shell_call_output` (the AI SDK and Codex send `call_id`, which is read
/// first). Written back as it came: without `call_id` where its `id` is the call's.
const OUTPUT_NAMED_BY_ID: &str = "local_shell_call_output";

fn call_kind(kind: &str) -> Option<&'static CallKind> {
    CALLS.iter().find(|call| call.kind == kind)
}

pub(crate) fn from_value(value: Value) -> Result<Conversation, FormatError> {
    let Value::Object(mut body) = value else {
        return Err(FormatError::malformed(
            Location::TopLevel,
            format!("a Responses request is an object, not {}", kind_of(&value)),
        ));
    };
    let items = match body.shift_remove("input") {
        Some(Value::Array(items)) => items,
        Some(Value::String(text)) => vec![serde_json::json!({"role": "user", "content": text})],
        _ => {
            return Err(FormatError::malformed(
                Location::TopLevel,
                "a Responses request needs an `input` list",
            ));
        }
    };
    let mut messages = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        messages.push(message_from_value(index, item)?);
    }
    Ok(assemble(body, messages).0)
}

/// The conversation of a request whose `input` items are read already (`body` without them):
/// a string `instructions` becomes the first message, the rest of the body the envelope; and
/// whether condense's summary was taken out of the message it was written into
/// ([`placement::split_summaries`]), which changes the messages as read.
pub(crate) fn assemble(mut body: JsonMap, mut messages: Vec<Message>) -> (Conversation, bool) {
    if let Some(Value::String(instructions)) = body.get("instructions") {
        let instructions = instructions.clone();
        body.shift_remove("instructions");
        messages.insert(
            0,
            Message {
                role: Role::System,
                parts: vec![Part::text(instructions)],
                generated: false,
                // No fields: what tells the instructions from an input item, which always
                // keeps its `role` or `type`.
                wire: vec![WireRecord {
                    fields: JsonMap::new(),
                    parts: 0,
                    shape: ContentShape::String,
                }],
            },
        );
    }
    let split = placement::split_summaries(&mut messages);
    let conversation = Conversation {
        messages,
        envelope: Some(body),
        side: Vec::new(),
    };
    (conversation, split)
}

/// One `input` item as a message.
pub(crate) fn message_from_value(index: usize, raw: Value) -> Result<Message, FormatError> {
    let at = Location::Message(index);
    let Value::Object(mut fields) = raw else {
        return Err(FormatError::malformed(
            at,
            format!("an input item is an object, not {}", kind_of(&raw)),
        ));
    };
    let kind = match fields.get("type") {
        None => None,
        Some(Value::String(kind)) => Some(kind.clone()),
        Some(other) => {
            return Err(FormatError::malformed(
                at,
                format!("`type` must be a string, not {}", kind_of(other)),
            ));
        }
    };
    let item = |role, part| Message {
        role,
        parts: vec![part],
        generated: false,
        wire: vec![WireRecord {
            fields: JsonMap::new(),
            parts: 1,
            shape: ContentShape::Absent,
        }],
    };
    match kind.as_deref() {
        None | Some("message") => message_item(at, fields),
        Some(kind) if let Some(spec) = call_kind(kind) => {
            let call =
                call(spec, &mut fields).map_err(|problem| FormatError::malformed(at, problem))?;
            Ok(item(Role::Assistant, call))
        }
        Some(kind) if OUTPUTS.contains(&kind) => {
            let (result, shape) =
                output(kind, &mut fields).map_err(|problem| FormatError::malformed(at, problem))?;
            let mut message = item(Role::Tool, result);
            message.wire[0].shape = shape;
            Ok(message)
        }
        Some(kind) => {
            // An `item_reference` stands for an item the provider stores: the model's own, as
            // the AI SDK sends every earlier answer back with `store` on (its reasoning, its
            // calls, its text), so it is read as the model's.
            let by_client = kind.ends_with("_output") || kind.ends_with("_response");
            let value = Part::Opaque {
                value: Value::Object(fields),
            };
            Ok(if by_client {
                // What the client sends back (a computer call's screenshot, an approval): a
                // program wrote it, so it is no person's turn.
                Message {
                    generated: true,
                    ..item(Role::User, value)
                }
            } else {
                item(Role::Assistant, value)
            })
        }
    }
}

/// A `message` item: its role kept among the wire fields, so `developer` goes back as
/// `developer`.
fn message_item(at: Location, mut fields: JsonMap) -> Result<Message, FormatError> {
    let role = crate::openai::role_of(at, &fields, false)?;
    let (parts, shape) = content_parts(fields.shift_remove("content"))
        .map_err(|problem| FormatError::malformed(at, problem))?;
    let generated = role == Role::User && is_context(&parts);
    Ok(Message {
        role,
        wire: vec![WireRecord {
            fields,
            parts: parts.len(),
            shape,
        }],
        parts,
        generated,
    })
}

/// What Codex puts in the user's role that no person typed: the environment it runs in, the
/// project's AGENTS.md, a note that a turn was interrupted. Such a message is not a user turn,
/// or a one-prompt run would count two and the skip boundary would cover all of it. (The
/// summary Codex's own compaction leaves there stays a user turn: it carries the task, and a
/// summary of condense's keeps what the person asked, not what a program wrote.)
const CONTEXT_OPENINGS: [&str; 4] = [
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<turn_aborted>",
];

fn is_context(parts: &[Part]) -> bool {
    !parts.is_empty()
        && parts.iter().all(|part| {
            matches!(part, Part::Text(text)
                if CONTEXT_OPENINGS.iter().any(|opening| text.text.trim_start().starts_with(opening)))
        })
}

fn content_parts(content: Option<Value>) -> Result<(Vec<Part>, ContentShape), String> {
    content_with(content, content_part, "a list")
}

/// A text part keeps its `type` (`input_text`, `output_text`) among its wire fields; any other
/// part (an image, a file, a refusal) is kept whole.
fn content_part(item: Value) -> Result<Part, String> {
    let Value::Object(mut fields) = item else {
        return Err(format!(
            "a content part must be an object, not {}",
            kind_of(&item)
        ));
    };
    let text = matches!(
        fields.get("type").and_then(Value::as_str),
        Some("input_text" | "output_text")
    );
    if text {
        return match take_string(&mut fields, "text") {
            Some(text) => Ok(Part::Text(Text {
                text,
                extra: fields,
            })),
            None => Err("a text part has no `text` string".into()),
        };
    }
    Ok(Part::Opaque {
        value: Value::Object(fields),
    })
}

/// A call item: its `call_id` is the id its output names; the item's other fields (`type`, the
/// item's own `id`, `status`) stay with the call.
fn call(spec: &CallKind, fields: &mut JsonMap) -> Result<Part, String> {
    let kind = spec.kind;
    let Some(id) = take_string(fields, "call_id") else {
        return Err(format!("a {kind} item has no `call_id`"));
    };
    let name = match spec.builtin {
        Some(name) => name.to_owned(),
        None => {
            take_string(fields, "name").ok_or_else(|| format!("{kind} `{id}` has no `name`"))?
        }
    };
    let key = spec.arguments;
    let (input, raw_input) = match (spec.form, fields.shift_remove(key)) {
        (Arguments::Object, Some(value @ Value::Object(_))) => (value, None),
        (Arguments::Object, other) => {
            return Err(format!(
                "{kind} `{id}`: `{key}` must be an object, not {}",
                other.as_ref().map_or("nothing", kind_of)
            ));
        }
        (form, Some(Value::String(raw))) => {
            // Only function arguments are JSON; a custom tool's input is free text.
            let input = match form {
                Arguments::Json => {
                    serde_json::from_str(&raw).unwrap_or_else(|_| Value::String(raw.clone()))
                }
                _ => Value::String(raw.clone()),
            };
            (input, Some(raw))
        }
        (_, None) => (Value::String(String::new()), Some(String::new())),
        (_, Some(other)) => {
            return Err(format!(
                "{kind} `{id}`: `{key}` must be a string, not {}",
                kind_of(&other)
            ));
        }
    };
    Ok(Part::ToolCall(ToolCall {
        id,
        name,
        input,
        raw_input,
        embedded: false,
        extra: std::mem::take(fields),
    }))
}

/// An output item: a string, or a list of content parts.
fn output(kind: &str, fields: &mut JsonMap) -> Result<(Part, ContentShape), String> {
    // An output named by its `id` keeps the `id` among its fields, and is written back so.
    let named = take_string(fields, "call_id").or_else(|| {
        (kind == OUTPUT_NAMED_BY_ID)
            .then(|| fields.get("id").and_then(Value::as_str).map(str::to_owned))
            .flatten()
    });
    let Some(call_id) = named else {
        return Err(format!("a {kind} item has no `call_id`"));
    };
    let (content, shape) = match fields.shift_remove("output") {
        Some(Value::Array(chunks)) if kind == SHELL_OUTPUT => {
            let (parts, skeleton) = shell_streams(&call_id, chunks)?;
            fields.insert("output".into(), Value::Array(skeleton));
            (ToolOutput::Parts(parts), ContentShape::Blocks)
        }
        Some(Value::String(text)) => (ToolOutput::Text(text), ContentShape::String),
        Some(Value::Array(items)) => (
            ToolOutput::Parts(
                items
                    .into_iter()
                    .map(content_part)
                    .collect::<Result<_, _>>()?,
            ),
            ContentShape::Blocks,
        ),
        None => (ToolOutput::Text(String::new()), ContentShape::Absent),
        Some(other) => {
            return Err(format!(
                "output `{call_id}`: `output` must be a string or a list, not {}",
                kind_of(&other)
            ));
        }
    };
    let result = ToolResult {
        call_id,
        content,
        is_error: None,
        embedded: false,
        compacted: None,
        extra: std::mem::take(fields),
    };
    Ok((Part::ToolResult(result), shape))
}

/// A shell output's chunks as the text of their streams (a part for each that is not empty:
/// what the agent read) and the chunks with those streams left `null` (what they came in).
fn shell_streams(call_id: &str, chunks: Vec<Value>) -> Result<(Vec<Part>, Vec<Value>), String> {
    let mut parts = Vec::new();
    let mut skeleton = Vec::with_capacity(chunks.len());
    for chunk in chunks {
        let Value::Object(mut chunk) = chunk else {
            return Err(format!(
                "shell output `{call_id}`: a chunk of `output` must be an object, not {}",
                kind_of(&chunk)
            ));
        };
        for stream in SHELL_STREAMS {
            if let Some(Value::String(text)) = chunk.get_mut(stream)
                && !text.is_empty()
            {
                parts.push(Part::text(std::mem::take(text)));
                chunk.insert(stream.into(), Value::Null);
            }
        }
        skeleton.push(Value::Object(chunk));
    }
    Ok((parts, skeleton))
}

/// A shell output's chunks again: `skeleton`'s streams filled from `content` where it still
/// has a text for each, as it came; else (an output condense replaced or cut) one chunk of
/// its text, with the last command's outcome, which says how the commands ended.
fn shell_chunks(content: &ToolOutput, skeleton: Vec<Value>) -> Vec<Value> {
    let holes = |chunk: &Value| {
        SHELL_STREAMS
            .iter()
            .filter(|stream| chunk.get(**stream).is_some_and(Value::is_null))
            .count()
    };
    let texts: Option<Vec<&str>> = match content {
        ToolOutput::Parts(parts) => parts
            .iter()
            .map(|part| match part {
                Part::Text(text) if text.extra.is_empty() => Some(text.text.as_str()),
                _ => None,
            })
            .collect(),
        ToolOutput::Text(_) => None,
    };
    if let Some(texts) = texts
        && texts.len() == skeleton.iter().map(holes).sum::<usize>()
    {
        let mut texts = texts.into_iter();
        return skeleton
            .into_iter()
            .map(|mut chunk| {
                for stream in SHELL_STREAMS {
                    if let Some(slot) = chunk.get_mut(stream).filter(|slot| slot.is_null()) {
                        *slot = texts.next().unwrap_or_default().into();
                    }
                }
                chunk
            })
            .collect();
    }
    let mut chunk = match skeleton.into_iter().last() {
        Some(Value::Object(chunk)) => chunk,
        _ => JsonMap::new(),
    };
    chunk.insert("stdout".into(), content.text().into_owned().into());
    chunk.insert("stderr".into(), String::new().into());
    vec![Value::Object(chunk)]
}

pub(crate) fn to_value(conversation: &Conversation) -> Value {
    let mut body = conversation.envelope.clone().unwrap_or_default();
    let mut messages = conversation.messages.as_slice();
    if let Some((first, rest)) = messages.split_first()
        && is_instructions(first)
    {
        let text: String = first
            .parts
            .iter()
            .filter_map(|part| match part {
                Part::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect();
        body.insert("instructions".into(), Value::String(text));
        messages = rest;
    }
    let mut items = Vec::with_capacity(messages.len());
    let instructions = crate::openai::instructions_role(messages);
    for message in placement::placed(messages, Joining::Text) {
        write_message(&message, instructions, &mut items);
    }
    body.insert("input".into(), Value::Array(items));
    Value::Object(body)
}

/// The message read from `instructions`: a system message whose wire record has no fields.
fn is_instructions(message: &Message) -> bool {
    message.role == Role::System
        && message
            .wire
            .first()
            .is_some_and(|record| record.fields.is_empty() && record.parts == 0)
}

/// `message` as the Responses API's input items; `instructions`, the role of a system-level
/// message condense made ([`crate::openai::instructions_role`]).
pub(crate) fn write_message(message: &Message, instructions: Option<&str>, out: &mut Vec<Value>) {
    let record = message.wire.first();
    let fields = record
        .map(|record| record.fields.clone())
        .unwrap_or_default();
    // An item read as a call, an output or an opaque item kept no fields of its own: each of
    // its parts is an item. A message item keeps its `role`; a message condense made has no
    // record and is written as a plain message.
    let is_message = record.is_none() || fields.contains_key("role");
    if !is_message {
        for part in &message.parts {
            out.push(part_item(message, part, record.map(|record| record.shape)));
        }
        return;
    }
    let content: Vec<&Part> = message
        .parts
        .iter()
        .filter(|part| !matches!(part, Part::ToolCall(_) | Part::ToolResult(_)))
        .collect();
    let shape = record.map_or(ContentShape::String, |record| record.shape);
    let mut object = JsonMap::new();
    let role = match (message.role, fields.get("role").and_then(Value::as_str)) {
        (Role::System, Some(original @ ("system" | "developer"))) => original.to_owned(),
        (Role::System, None) => instructions.unwrap_or("system").to_owned(),
        (Role::Tool, _) => "user".to_owned(),
        (role, _) => role.as_str().to_owned(),
    };
    object.insert("role".into(), role.into());
    if let Some(value) = content_value(message.role, &content, shape) {
        object.insert("content".into(), value);
    }
    for (key, value) in fields {
        if key != "role" {
            object.insert(key, value);
        }
    }
    out.push(Value::Object(object));
    // Calls and results in a message condense made (none today): items of their own.
    for part in &message.parts {
        if matches!(part, Part::ToolCall(_) | Part::ToolResult(_)) {
            out.push(part_item(message, part, None));
        }
    }
}

/// A part that is an item of its own.
fn part_item(message: &Message, part: &Part, shape: Option<ContentShape>) -> Value {
    match part {
        Part::ToolCall(call) => call_item(call),
        Part::ToolResult(result) => output_item(result, shape.unwrap_or(ContentShape::String)),
        Part::Opaque { value } => value.clone(),
        other => {
            let mut object = JsonMap::new();
            object.insert("role".into(), message.role.as_str().into());
            if let Some(content) = content_value(message.role, &[other], ContentShape::Blocks) {
                object.insert("content".into(), content);
            }
            Value::Object(object)
        }
    }
}

fn call_item(call: &ToolCall) -> Value {
    let mut extra = call.extra.clone();
    let kind = match extra.shift_remove("type") {
        Some(Value::String(kind)) => kind,
        _ => "function_call".to_owned(),
    };
    let spec = call_kind(&kind);
    let mut object = JsonMap::new();
    object.insert("type".into(), kind.clone().into());
    object.insert("call_id".into(), call.id.clone().into());
    if spec.is_none_or(|spec| spec.builtin.is_none()) {
        object.insert("name".into(), call.name.clone().into());
    }
    let arguments = match (spec.map(|spec| spec.form), &call.raw_input) {
        (Some(Arguments::Object), _) => call.input.clone(),
        (_, Some(raw)) => raw.clone().into(),
        (_, None) => match &call.input {
            Value::String(text) if kind != "function_call" => text.clone().into(),
            input => input.to_string().into(),
        },
    };
    object.insert(
        spec.map_or("arguments", |spec| spec.arguments).into(),
        arguments,
    );
    object.append(&mut extra);
    Value::Object(object)
}

fn output_item(result: &ToolResult, shape: ContentShape) -> Value {
    let mut extra = result.extra.clone();
    let kind = match extra.shift_remove("type") {
        Some(Value::String(kind)) => kind,
        _ => "function_call_output".to_owned(),
    };
    let named_by_id = kind == OUTPUT_NAMED_BY_ID
        && extra.get("id").and_then(Value::as_str) == Some(result.call_id.as_str());
    // A shell output's chunks, their streams taken out when it was read.
    let skeleton = (kind == SHELL_OUTPUT).then(|| match extra.shift_remove("output") {
        Some(Value::Array(chunks)) => chunks,
        _ => Vec::new(),
    });
    let mut object = JsonMap::new();
    object.insert("type".into(), kind.into());
    if !named_by_id {
        object.insert("call_id".into(), result.call_id.clone().into());
    }
    match (&result.content, shape) {
        _ if let Some(skeleton) = skeleton => {
            let chunks = shell_chunks(&result.content, skeleton);
            object.insert("output".into(), Value::Array(chunks));
        }
        (ToolOutput::Text(text), ContentShape::Absent) if text.is_empty() => {}
        (ToolOutput::Text(text), _) => {
            object.insert("output".into(), text.clone().into());
        }
        (ToolOutput::Parts(parts), _) => {
            let parts = parts
                .iter()
                .map(|part| part_value(Role::Tool, part))
                .collect();
            object.insert("output".into(), Value::Array(parts));
        }
    }
    object.append(&mut extra);
    Value::Object(object)
}

/// A message's content: one string when it came as one (or condense made it), else a list.
fn content_value(role: Role, parts: &[&Part], shape: ContentShape) -> Option<Value> {
    match (shape, parts) {
        (ContentShape::Absent, []) => None,
        (ContentShape::Null, []) => Some(Value::Null),
        (ContentShape::String, [Part::Text(text)]) if text.extra.is_empty() => {
            Some(text.text.clone().into())
        }
        _ => Some(Value::Array(
            parts.iter().map(|part| part_value(role, part)).collect(),
        )),
    }
}

/// A part as a Responses content part: text keeps the `type` it came with; text condense made
/// is `output_text` from the assistant and `input_text` from anyone else, as the API requires.
pub(crate) fn part_value(role: Role, part: &Part) -> Value {
    let text_type = match role {
        Role::Assistant => "output_text",
        _ => "input_text",
    };
    let text = |text: &str, extra: &JsonMap| {
        let mut object = JsonMap::new();
        object.insert("type".into(), text_type.into());
        object.insert("text".into(), text.into());
        // A `type` read with the part replaces the default in place.
        for (key, value) in extra {
            object.insert(key.clone(), value.clone());
        }
        Value::Object(object)
    };
    match part {
        Part::Text(part) => text(&part.text, &part.extra),
        Part::Thinking(thinking) => text(&thinking.text, &JsonMap::new()),
        Part::ToolResult(result) => text(&result.content.text(), &JsonMap::new()),
        Part::ToolCall(call) => call_item(call),
        Part::Image(image) => {
            let mut object = JsonMap::new();
            object.insert("type".into(), "input_image".into());
            object.insert(
                "image_url".into(),
                crate::image::responses_image_url(&image.source),
            );
            object.extend(image.extra.clone());
            Value::Object(object)
        }
        Part::Opaque { value } => value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Codex-like request: instructions, a developer message, a user turn, reasoning with
    /// encrypted content, a function call and its output, a custom tool call (free-text input)
    /// and its output, an assistant message, and top-level settings.
    fn codex_request() -> Value {
        serde_json::json!({
            "model": "gpt-5-codex",
            "instructions": "You are Codex, a coding agent.",
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>workspace-write</permissions>"}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]},
                {"type": "reasoning", "summary": [], "content": null, "encrypted_content": "gAAAAB..."},
                {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"bash\",\"-lc\",\"cargo test\"]}", "call_id": "call_1"},
                {"type": "function_call_output", "call_id": "call_1", "output": "test result: FAILED. 1 failed"},
                {"type": "custom_tool_call", "status": "completed", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"},
                {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done!"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed."}]},
                {"role": "user", "content": "Thanks, now commit."}
            ],
            "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
            "store": false,
            "stream": true,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "0199-session"
        })
    }

    #[test]
    fn a_codex_request_reads_into_the_model_and_back_unchanged() {
        let conversation = from_value(codex_request()).unwrap();
        let roles: Vec<Role> = conversation.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::System,
                Role::System,
                Role::User,
                Role::Assistant,
                Role::Assistant,
                Role::Tool,
                Role::Assistant,
                Role::Tool,
                Role::Assistant,
                Role::User,
            ]
        );
        assert_eq!(
            conversation.messages[0].plain_text(),
            "You are Codex, a coding agent."
        );
        let call = conversation.messages[4].parts[0].as_tool_call().unwrap();
        assert_eq!((call.id.as_str(), call.name.as_str()), ("call_1", "shell"));
        assert_eq!(call.input["command"][2], "cargo test");
        let patch = conversation.messages[6].parts[0].as_tool_call().unwrap();
        assert_eq!(patch.input, "*** Begin Patch\n*** End Patch");
        let result = conversation.messages[7].parts[0].as_tool_result().unwrap();
        assert_eq!(result.call_id, "call_2");
        assert_eq!(result.content.text(), "Done!");
        assert!(matches!(
            conversation.messages[3].parts[0],
            Part::Opaque { .. }
        ));
        assert_eq!(to_value(&conversation), codex_request());
    }

    /// A replaced output goes back as a string under the same item; a summary condense adds is a
    /// plain message; a string `input` is one user message.
    #[test]
    fn what_condense_changes_is_written_as_the_api_expects() {
        let mut conversation = from_value(codex_request()).unwrap();
        if let Part::ToolResult(result) = &mut conversation.messages[5].parts[0] {
            result.content = ToolOutput::Text("[output pruned]".into());
        }
        conversation.messages.insert(
            1,
            Message::text(Role::User, "<summary>earlier work</summary>"),
        );
        let value = to_value(&conversation);
        assert_eq!(
            value["input"][0],
            serde_json::json!({"role": "user", "content": "<summary>earlier work</summary>"})
        );
        assert_eq!(
            value["input"][5],
            serde_json::json!({"type": "function_call_output", "call_id": "call_1", "output": "[output pruned]"})
        );
        assert_eq!(value["instructions"], "You are Codex, a coding agent.");

        let short = from_value(serde_json::json!({"model": "m", "input": "Hello"})).unwrap();
        assert_eq!(short.messages.len(), 1);
        assert_eq!(short.messages[0].role, Role::User);
        assert_eq!(
            to_value(&short)["input"],
            serde_json::json!([{"role": "user", "content": "Hello"}])
        );
    }

    /// condense's summary goes into the person's message beside it, never at the instructions'
    /// level after the conversation began: after the task's text (a part of its own where the
    /// task is a list of parts), before the person's next request, or a user message of its own
    /// before the agent's answer; read back, it is condense's own again, and written again, the
    /// same bytes.
    #[test]
    fn a_summary_is_written_into_the_person_s_message_and_read_back_out() {
        let (summary, continued) = crate::placement::testing::summary();
        // The request with the messages `keep` keeps, the summary inserted at `at`.
        let compacted = |keep: &dyn Fn(usize) -> bool, at: usize| {
            let mut conversation = from_value(codex_request()).unwrap();
            let mut index = 0;
            conversation.messages.retain(|_| {
                index += 1;
                keep(index - 1)
            });
            conversation
                .messages
                .insert(at, Message::text(Role::System, continued.clone()));
            conversation
        };
        let task = serde_json::json!({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "Fix the failing test."},
            {"type": "input_text", "text": summary}]});
        for (conversation, at, written) in [
            // An autonomous run: the task kept in front of it, the rest after.
            (compacted(&|_| true, 3), 1, task),
            // An interactive turn: before the person's next request.
            (
                compacted(&|index| index < 2 || index == 9, 2),
                1,
                serde_json::json!({"role": "user",
                    "content": format!("{summary}\n\nThanks, now commit.")}),
            ),
            // Before the agent's answer: a user message of its own.
            (
                compacted(&|index| index != 2, 2),
                1,
                serde_json::json!({"role": "user", "content": summary}),
            ),
        ] {
            let value = to_value(&conversation);
            assert_eq!(value["input"][at], written, "{value}");
            let roles: Vec<&str> = value["input"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|item| item["role"].as_str())
                .collect();
            assert_eq!(roles.iter().filter(|role| **role == "developer").count(), 1);
            assert!(!roles.contains(&"system"));
            let read = from_value(value.clone()).unwrap();
            assert_eq!(to_value(&read), value, "the same bytes again");
            assert!(read.messages.iter().any(Message::is_compaction_summary));
        }
        // Read back where it went into a message, it is a message of condense's again.
        let read = from_value(to_value(&compacted(&|_| true, 3))).unwrap();
        assert_eq!(read.messages.len(), 11);
        assert!(read.messages[3].is_summary_written_here());
        assert_eq!(read.messages[2].plain_text(), "Fix the failing test.");
    }

    /// A summary condense adds beside a client's `developer` message (Codex's) is a `developer`
    /// message too; beside the `instructions` alone, a `system` one.
    #[test]
    fn a_summary_speaks_in_the_role_of_the_client_s_instructions() {
        let mut conversation = from_value(codex_request()).unwrap();
        conversation.messages.insert(
            2,
            Message::text(Role::System, "<summary>earlier work</summary>"),
        );
        assert_eq!(to_value(&conversation)["input"][1]["role"], "developer");

        let mut plain = from_value(serde_json::json!({
            "instructions": "You are terse.", "input": [{"role": "user", "content": "fix it"}]
        }))
        .unwrap();
        plain.messages.insert(
            1,
            Message::text(Role::System, "<summary>earlier work</summary>"),
        );
        let value = to_value(&plain);
        assert_eq!(value["instructions"], "You are terse.");
        assert_eq!(value["input"][0]["role"], "system");
    }

    /// The built-in tools' calls are calls like a function's, with the tool's name where the
    /// item has none, and their outputs answer them, whichever key names the call; all of it
    /// goes back as it came.
    #[test]
    fn built_in_tool_calls_are_calls_and_their_outputs_results() {
        let action = |script: &str| {
            serde_json::json!({"type": "exec", "command": ["bash", "-lc", script],
                "timeout_ms": 10000, "working_directory": "/repo", "env": {}, "user": null})
        };
        let body = serde_json::json!({"model": "codex-mini-latest", "input": [
            {"role": "user", "content": "fix the parser"},
            // Codex answers a local shell call with a function call's output.
            {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_1", "status": "completed", "action": action("cat src/parser.rs")},
            {"type": "function_call_output", "call_id": "call_1", "output": "{\"output\":\"fn parse() {}\",\"metadata\":{\"exit_code\":0}}"},
            // The AI SDK with `call_id`; the API reference with the call's id as `id`.
            {"type": "local_shell_call", "id": "lsh_2", "call_id": "call_2", "status": "completed", "action": action("grep -n parse src/lib.rs")},
            {"type": "local_shell_call_output", "call_id": "call_2", "output": "3:mod parser;"},
            {"type": "local_shell_call", "id": "lsh_3", "call_id": "call_3", "status": "completed", "action": action("ls src")},
            {"type": "local_shell_call_output", "id": "call_3", "output": "lib.rs parser.rs", "status": "completed"},
            {"type": "apply_patch_call", "id": "apc_4", "call_id": "call_4", "status": "completed",
                "operation": {"type": "update_file", "path": "src/parser.rs", "diff": "@@\n-fn parse() {}\n+fn parse() -> Tree {}\n"}},
            {"type": "apply_patch_call_output", "call_id": "call_4", "status": "completed"}
        ]});
        let conversation = from_value(body.clone()).unwrap();
        let calls: Vec<(&str, &str)> = conversation
            .messages
            .iter()
            .flat_map(|message| &message.parts)
            .filter_map(Part::as_tool_call)
            .map(|call| (call.id.as_str(), call.name.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                ("call_1", "local_shell"),
                ("call_2", "local_shell"),
                ("call_3", "local_shell"),
                ("call_4", "apply_patch")
            ]
        );
        let answered: Vec<&str> = conversation
            .messages
            .iter()
            .filter(|message| message.role == Role::Tool)
            .flat_map(|message| &message.parts)
            .filter_map(|part| match part {
                Part::ToolResult(result) => Some(result.call_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(answered, ["call_1", "call_2", "call_3", "call_4"]);
        // What the engine reads of them: the files a call touched, and whether it wrote them.
        let call = |at: usize| conversation.messages[at].parts[0].as_tool_call().unwrap();
        assert_eq!(
            condense_core::tool_paths::touched(&call(1).name, &call(1).input),
            (vec!["src/parser.rs"], false)
        );
        assert_eq!(
            condense_core::tool_paths::touched(&call(7).name, &call(7).input),
            (vec!["src/parser.rs"], true)
        );
        assert_eq!(to_value(&conversation), body);
        assert_eq!(
            to_value(&conversation).to_string(),
            to_value(&from_value(to_value(&conversation)).unwrap()).to_string(),
            "the same bytes again"
        );
    }

    /// The shell tool's output is read as what the agent saw of it, the text of its streams,
    /// and goes back in the chunks it came in; replaced, it is one chunk of the new text with
    /// the last command's outcome, the only shape the API takes.
    #[test]
    fn a_shell_output_is_the_text_of_its_streams_in_its_chunks() {
        let body = serde_json::json!({"model": "gpt-5.1", "input": [
            {"role": "user", "content": "fix the parser"},
            {"type": "shell_call", "id": "sh_1", "call_id": "call_1", "status": "completed",
                "action": {"commands": ["cat src/parser.rs", "cargo test"], "timeout_ms": 60000, "max_output_length": null}},
            {"type": "shell_call_output", "id": "sho_1", "call_id": "call_1", "max_output_length": 4096, "output": [
                {"stdout": "fn parse() {}", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}},
                {"stdout": "", "stderr": "error[E0308]: mismatched types", "outcome": {"type": "exit", "exit_code": 101}, "created_by": "agent"}
            ]}
        ]});
        let mut conversation = from_value(body.clone()).unwrap();
        let call = conversation.messages[1].parts[0].as_tool_call().unwrap();
        assert_eq!((call.id.as_str(), call.name.as_str()), ("call_1", "shell"));
        assert_eq!(
            condense_core::tool_paths::touched(&call.name, &call.input),
            (vec!["src/parser.rs"], false)
        );
        let result = |conversation: &Conversation| match &conversation.messages[2].parts[0] {
            Part::ToolResult(result) => result.clone(),
            other => panic!("the shell output is a result, not {other:?}"),
        };
        assert_eq!(result(&conversation).call_id, "call_1");
        assert_eq!(
            result(&conversation).content.text(),
            "fn parse() {}\nerror[E0308]: mismatched types"
        );
        assert_eq!(to_value(&conversation), body);
        assert_eq!(
            to_value(&conversation).to_string(),
            to_value(&from_value(to_value(&conversation)).unwrap()).to_string(),
            "the same bytes again"
        );
        // Pruned: one chunk, ended as the last command ended.
        let mut pruned = result(&conversation);
        pruned.content = ToolOutput::Text("[output pruned: 2 commands]".into());
        conversation.messages[2].parts[0] = Part::ToolResult(pruned);
        let written = to_value(&conversation);
        assert_eq!(
            written["input"][2],
            serde_json::json!({"type": "shell_call_output", "call_id": "call_1", "output": [
                {"stdout": "[output pruned: 2 commands]", "stderr": "", "outcome": {"type": "exit", "exit_code": 101}, "created_by": "agent"}
            ], "id": "sho_1", "max_output_length": 4096})
        );
        assert_eq!(
            to_value(&from_value(written.clone()).unwrap()),
            written,
            "read back as written"
        );
    }

    proptest::proptest! {
        /// Whatever a shell output's chunks hold (empty streams, a timeout, fields the API may
        /// add), it reads into the text of its streams and goes back byte for byte; replaced,
        /// it goes back as one chunk with the last chunk's outcome.
        #[test]
        fn any_shell_output_goes_back_as_it_came(
            chunks in proptest::collection::vec(
                (
                    proptest::option::of("[a-z \n]{0,12}"),
                    proptest::option::of("[a-z \n]{0,12}"),
                    proptest::option::of(proptest::prelude::any::<i32>()),
                    proptest::prelude::any::<bool>(),
                ),
                0..5,
            )
        ) {
            let output: Vec<Value> = chunks
                .iter()
                .map(|(stdout, stderr, exit, created)| {
                    let mut chunk = JsonMap::new();
                    if let Some(stdout) = stdout {
                        chunk.insert("stdout".into(), stdout.clone().into());
                    }
                    if let Some(stderr) = stderr {
                        chunk.insert("stderr".into(), stderr.clone().into());
                    }
                    let outcome = match exit {
                        Some(code) => serde_json::json!({"type": "exit", "exit_code": code}),
                        None => serde_json::json!({"type": "timeout"}),
                    };
                    chunk.insert("outcome".into(), outcome);
                    if *created {
                        chunk.insert("created_by".into(), "agent".into());
                    }
                    Value::Object(chunk)
                })
                .collect();
            let body = serde_json::json!({"input": [
                {"type": "shell_call", "call_id": "c", "action": {"commands": ["ls"]}},
                {"type": "shell_call_output", "call_id": "c", "output": output}
            ]});
            let conversation = from_value(body.clone()).unwrap();
            proptest::prop_assert_eq!(&to_value(&conversation), &body);
            let Part::ToolResult(result) = &conversation.messages[1].parts[0] else {
                panic!("a result");
            };
            let streams: Vec<&str> = chunks
                .iter()
                .flat_map(|(stdout, stderr, _, _)| [stdout, stderr])
                .filter_map(|stream| stream.as_deref())
                .filter(|stream| !stream.is_empty())
                .collect();
            proptest::prop_assert_eq!(result.content.text(), streams.join("\n"));
            let mut replaced = conversation.clone();
            if let Part::ToolResult(result) = &mut replaced.messages[1].parts[0] {
                result.content = ToolOutput::Text("[pruned]".into());
            }
            let written = to_value(&replaced);
            let chunks = written["input"][1]["output"].as_array().unwrap();
            proptest::prop_assert_eq!(chunks.len(), 1);
            proptest::prop_assert_eq!(&chunks[0]["stdout"], "[pruned]");
            proptest::prop_assert_eq!(&chunks[0]["stderr"], "");
            proptest::prop_assert_eq!(
                &chunks[0]["outcome"],
                output.last().map_or(&Value::Null, |chunk| &chunk["outcome"])
            );
        }
    }

    #[test]
    fn a_shell_output_chunk_that_is_no_object_is_named() {
        let error = from_value(serde_json::json!({"input": [
            {"type": "shell_call_output", "call_id": "call_1", "output": ["ok"]}
        ]}))
        .unwrap_err()
        .to_string();
        assert!(error.contains("message 0"), "{error}");
        assert!(
            error.contains("`call_1`: a chunk of `output` must be an object"),
            "{error}"
        );
    }

    #[test]
    fn a_built_in_call_without_its_arguments_object_is_named() {
        let error = from_value(serde_json::json!({"input": [
            {"type": "local_shell_call", "call_id": "call_1", "action": "ls"}
        ]}))
        .unwrap_err()
        .to_string();
        assert!(error.contains("message 0"), "{error}");
        assert!(error.contains("`action` must be an object"), "{error}");
    }

    /// Items the model made are its answers; items the client sends back are not a person's
    /// turn. Both go back as they came.
    #[test]
    fn other_items_are_the_model_s_or_the_client_s() {
        let body = serde_json::json!({"input": [
            {"role": "user", "content": "open the page"},
            {"type": "computer_call", "call_id": "c1", "action": {"type": "screenshot"}},
            {"type": "computer_call_output", "call_id": "c1", "output": {"type": "input_image", "image_url": "data:"}},
            {"type": "item_reference", "id": "msg_7"},
            {"role": "assistant", "content": null}
        ]});
        let conversation = from_value(body.clone()).unwrap();
        let who: Vec<(Role, bool)> = conversation
            .messages
            .iter()
            .map(|m| (m.role, m.generated))
            .collect();
        assert_eq!(
            who,
            [
                (Role::User, false),
                (Role::Assistant, false),
                (Role::User, true),
                (Role::Assistant, false),
                (Role::Assistant, false)
            ]
        );
        assert_eq!(to_value(&conversation), body);
    }

    #[test]
    fn malformed_items_name_the_item() {
        let error = |input: Value| {
            from_value(serde_json::json!({"input": input}))
                .unwrap_err()
                .to_string()
        };
        assert!(
            error(serde_json::json!([{"role": "user", "content": "a"}, 3])).contains("message 1")
        );
        assert!(
            error(serde_json::json!([{"type": "function_call", "name": "x"}])).contains("call_id")
        );
        assert!(error(serde_json::json!([{"role": "wizard", "content": "a"}])).contains("wizard"));
        assert!(error(serde_json::json!(7)).contains("`input` list"));
    }
}
