//! OpenAI Chat Completions: a bare array of messages, or an object with `messages` and other keys
//! (kept in the envelope). Tool calls are `tool_calls` on assistant messages, results are
//! `role: tool` messages; the older `function_call` and `role: function` are read too
//! ([`legacy`]).

use condense_core::{
    ContentShape, Conversation, Image, JsonMap, Message, Part, Role, Text, ToolCall, ToolOutput,
    ToolResult, WireRecord,
};
use serde_json::Value;

use crate::blocks::{content_with, kind_of, take_string};
use crate::legacy::{self, FUNCTION_CALL, FUNCTION_ROLE};
use crate::placement::{self, Joining};
use crate::{FormatError, Location, embedded};

pub(crate) fn from_value(value: Value) -> Result<Conversation, FormatError> {
    let (raw_messages, envelope) = match value {
        Value::Array(messages) => (messages, None),
        Value::Object(mut object) => match object.shift_remove("messages") {
            Some(Value::Array(messages)) => (messages, Some(object)),
            _ => {
                return Err(FormatError::malformed(
                    Location::TopLevel,
                    "expected a `messages` list in the object",
                ));
            }
        },
        other => {
            return Err(FormatError::malformed(
                Location::TopLevel,
                format!("expected a list of messages, not {}", kind_of(&other)),
            ));
        }
    };
    let messages = raw_messages
        .into_iter()
        .enumerate()
        .map(|(index, raw)| message_from_value(index, raw))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(assemble(envelope, messages))
}

/// The conversation of a request whose `messages` are read already: mini-swe-agent's embedded
/// calls and results are linked across them.
pub(crate) fn assemble(envelope: Option<JsonMap>, messages: Vec<Message>) -> Conversation {
    assemble_linked(envelope, messages).0
}

/// [`assemble`], and whether it linked tool calls written in text, or functions to their
/// answers, or took condense's summary out of the message it was written into (which changes
/// messages as read, depending on their neighbours: see [`embedded::link`], [`legacy::link`],
/// [`placement::split_summaries`]).
pub(crate) fn assemble_linked(
    envelope: Option<JsonMap>,
    mut messages: Vec<Message>,
) -> (Conversation, bool) {
    let split = placement::split_summaries(&mut messages);
    let in_text = embedded::link(&mut messages, envelope.as_ref());
    let functions = legacy::link(&mut messages);
    let linked = split || in_text || functions;
    let conversation = Conversation {
        messages,
        envelope,
        side: Vec::new(),
    };
    (conversation, linked)
}

pub(crate) fn message_from_value(index: usize, raw: Value) -> Result<Message, FormatError> {
    let at = Location::Message(index);
    let Value::Object(mut fields) = raw else {
        return Err(FormatError::malformed(
            at,
            format!("a message is an object, not {}", kind_of(&raw)),
        ));
    };
    let role = role_of(at, &fields, true)?;
    // The original role string stays in `fields` so that `developer` goes back as `developer`.
    let content = fields.shift_remove("content");
    let mut parts = Vec::new();
    let shape;
    if role == Role::Tool {
        // A function's answer names no call: linking gives it the call before it.
        let call_id = if legacy::is_function_answer(&fields) {
            String::new()
        } else {
            let Some(call_id) = take_string(&mut fields, "tool_call_id") else {
                return Err(FormatError::malformed(
                    at,
                    "a tool message has no `tool_call_id`",
                ));
            };
            call_id
        };
        let (output, output_shape) =
            tool_output(content).map_err(|problem| FormatError::malformed(at, problem))?;
        shape = output_shape;
        parts.push(Part::ToolResult(ToolResult {
            call_id,
            content: output,
            is_error: None,
            embedded: false,
            compacted: None,
            extra: JsonMap::new(),
        }));
    } else {
        let (content_parts, content_shape) =
            content_parts(content).map_err(|problem| FormatError::malformed(at, problem))?;
        parts = content_parts;
        shape = content_shape;
    }
    // Only an assistant calls tools. `tool_calls` on any other message (a broken or spliced
    // file) stays an opaque field and is written back as it came, never dropped.
    if role == Role::Assistant
        && let Some(Value::Array(calls)) = fields.get("tool_calls")
        && !calls.is_empty()
    {
        let Some(Value::Array(calls)) = fields.shift_remove("tool_calls") else {
            return Err(FormatError::malformed(
                at,
                "`tool_calls` vanished while reading",
            ));
        };
        for call in calls {
            parts.push(tool_call(call).map_err(|problem| FormatError::malformed(at, problem))?);
        }
    }
    // The older form: one call, no id (`function_call: null` beside `tool_calls`, as some
    // clients send, stays a field).
    if role == Role::Assistant
        && let Some(Value::Object(_)) = fields.get("function_call")
        && let Some(Value::Object(function)) = fields.shift_remove("function_call")
    {
        parts.push(function_call(function).map_err(|problem| FormatError::malformed(at, problem))?);
    }
    let wire = vec![WireRecord {
        fields,
        parts: parts.len(),
        shape,
    }];
    Ok(Message {
        role,
        parts,
        generated: false,
        wire,
    })
}

/// A message's `role` in OpenAI's APIs: `system` or `developer`, `user`, `assistant`, and with
/// `tool_role` Chat Completions' `tool` and `function` (the Responses API carries results as
/// items instead).
pub(crate) fn role_of(
    at: Location,
    fields: &JsonMap,
    tool_role: bool,
) -> Result<Role, FormatError> {
    match fields.get("role") {
        Some(Value::String(role)) => match role.as_str() {
            "system" | "developer" => Ok(Role::System),
            "user" => Ok(Role::User),
            "assistant" => Ok(Role::Assistant),
            "tool" | FUNCTION_ROLE if tool_role => Ok(Role::Tool),
            _ => Err(FormatError::UnknownRole {
                at,
                role: role.clone(),
            }),
        },
        Some(other) => Err(FormatError::malformed(
            at,
            format!("`role` must be a string, not {}", kind_of(other)),
        )),
        None => Err(FormatError::malformed(at, "the message has no `role`")),
    }
}

fn content_parts(content: Option<Value>) -> Result<(Vec<Part>, ContentShape), String> {
    content_with(content, content_part, "a list")
}

fn content_part(item: Value) -> Result<Part, String> {
    let Value::Object(mut fields) = item else {
        return Err(format!(
            "a content part must be an object, not {}",
            kind_of(&item)
        ));
    };
    let part = match fields.get("type").and_then(Value::as_str) {
        Some("text") => match take_string(&mut fields, "text") {
            Some(text) => {
                fields.shift_remove("type");
                Part::Text(Text {
                    text,
                    extra: fields,
                })
            }
            None => return Err("a text part has no `text` string".into()),
        },
        Some("image_url") => match fields.shift_remove("image_url") {
            Some(source) => {
                fields.shift_remove("type");
                Part::Image(Image {
                    source,
                    extra: fields,
                })
            }
            None => return Err("an image_url part has no `image_url`".into()),
        },
        _ => Part::Opaque {
            value: Value::Object(fields),
        },
    };
    Ok(part)
}

fn tool_output(content: Option<Value>) -> Result<(ToolOutput, ContentShape), String> {
    match content {
        Some(Value::String(text)) => Ok((ToolOutput::Text(text), ContentShape::String)),
        Some(Value::Array(items)) => Ok((
            ToolOutput::Parts(
                items
                    .into_iter()
                    .map(content_part)
                    .collect::<Result<_, _>>()?,
            ),
            ContentShape::Blocks,
        )),
        Some(Value::Null) => Ok((ToolOutput::Text(String::new()), ContentShape::Null)),
        None => Ok((ToolOutput::Text(String::new()), ContentShape::Absent)),
        Some(other) => Err(format!(
            "a tool message's `content` must be a string or a list, not {}",
            kind_of(&other)
        )),
    }
}

fn tool_call(call: Value) -> Result<Part, String> {
    let Value::Object(mut fields) = call else {
        return Err(format!(
            "a tool call must be an object, not {}",
            kind_of(&call)
        ));
    };
    let Some(id) = take_string(&mut fields, "id") else {
        return Err("a tool call has no `id`".into());
    };
    let custom = match fields.get_mut(CUSTOM) {
        Some(Value::Object(custom)) => Some(custom_call(&id, custom)?),
        _ => None,
    };
    if let Some((name, raw)) = custom {
        return Ok(Part::ToolCall(ToolCall {
            id,
            name,
            input: Value::String(raw.clone()),
            raw_input: Some(raw),
            embedded: false,
            extra: fields,
        }));
    }
    let Some(Value::Object(mut function)) = fields.shift_remove("function") else {
        return Err(format!(
            "tool call `{id}` has no `function` object (nor a `custom` one)"
        ));
    };
    let Some(name) = take_string(&mut function, "name") else {
        return Err(format!("tool call `{id}` has no function `name`"));
    };
    let raw = match function.shift_remove("arguments") {
        Some(Value::String(raw)) => raw,
        None => String::new(),
        Some(other) => {
            return Err(format!(
                "tool call `{id}`: `arguments` must be a string, not {}",
                kind_of(&other)
            ));
        }
    };
    let input = serde_json::from_str(&raw).unwrap_or_else(|_| Value::String(raw.clone()));
    if !function.is_empty() {
        fields.insert("function".into(), Value::Object(function));
    }
    Ok(Part::ToolCall(ToolCall {
        id,
        name,
        input,
        raw_input: Some(raw),
        embedded: false,
        extra: fields,
    }))
}

/// The key of a custom tool's call (`{"type": "custom", "custom": {"name", "input"}}`): its
/// input is free text, not JSON arguments (OpenAI's custom tools, Codex's `apply_patch`).
const CUSTOM: &str = "custom";

/// A custom call's name and input, taken out of its `custom` object, which stays (with
/// whatever else it holds) in its place among the call's fields so the writer puts it back
/// there.
fn custom_call(id: &str, custom: &mut JsonMap) -> Result<(String, String), String> {
    let Some(name) = take_string(custom, "name") else {
        return Err(format!("custom tool call `{id}` has no `name`"));
    };
    let raw = match custom.shift_remove("input") {
        Some(Value::String(raw)) => raw,
        None => String::new(),
        Some(other) => {
            return Err(format!(
                "custom tool call `{id}`: `input` must be a string, not {}",
                kind_of(&other)
            ));
        }
    };
    Ok((name, raw))
}

/// A call in the older form: `function_call`'s `name` and `arguments`; its id comes from
/// [`legacy::link`].
fn function_call(mut function: JsonMap) -> Result<Part, String> {
    let Some(name) = take_string(&mut function, "name") else {
        return Err("`function_call` has no `name`".into());
    };
    let raw = match function.shift_remove("arguments") {
        Some(Value::String(raw)) => raw,
        None => String::new(),
        Some(other) => {
            return Err(format!(
                "`function_call` `{name}`: `arguments` must be a string, not {}",
                kind_of(&other)
            ));
        }
    };
    let input = serde_json::from_str(&raw).unwrap_or_else(|_| Value::String(raw.clone()));
    function.insert(FUNCTION_CALL.into(), Value::Bool(true));
    Ok(Part::ToolCall(ToolCall {
        id: String::new(),
        name,
        input,
        raw_input: Some(raw),
        embedded: false,
        extra: function,
    }))
}

pub(crate) fn to_value(conversation: &Conversation) -> Value {
    let mut messages = Vec::with_capacity(conversation.messages.len());
    let instructions = instructions_role(&conversation.messages);
    for message in placement::placed(&conversation.messages, Joining::Text) {
        write_message(&message, instructions, &mut messages);
    }
    match &conversation.envelope {
        None => Value::Array(messages),
        Some(envelope) => {
            let mut object = envelope.clone();
            object.insert("messages".into(), Value::Array(messages));
            Value::Object(object)
        }
    }
}

/// The role the client gives its own instructions: that of the first of its system-level
/// messages (`developer`, which OpenAI asks for with its reasoning models, or `system`). A
/// message condense made at that level and sent as one (a summary with nothing after it, in a
/// Chat Completions or Responses body: [`placement::placed`]) is written in it, so that a request
/// never mixes the two where the client used one.
pub(crate) fn instructions_role(messages: &[Message]) -> Option<&str> {
    messages
        .iter()
        .filter(|message| message.role == Role::System)
        .find_map(|message| {
            let role = message.wire.first()?.fields.get("role")?.as_str()?;
            matches!(role, "system" | "developer").then_some(role)
        })
}

/// `message` as a Chat Completions message; `instructions`, the role of a system-level message
/// condense made ([`instructions_role`]).
fn write_message(message: &Message, instructions: Option<&str>, out: &mut Vec<Value>) {
    let record = message.wire.first();
    let mut fields = record
        .map(|record| record.fields.clone())
        .unwrap_or_default();
    // A message condense made (a summary, a continuation) has no wire record: a plain string
    // when it is text alone, the form every Chat Completions server accepts (llama.cpp's server,
    // for one, refuses a list of blocks in a system message).
    let shape = record
        .map(|record| record.shape)
        .unwrap_or(ContentShape::String);
    let role = role_string(message.role, &fields, instructions);
    fields.shift_remove("role");

    let results: Vec<&ToolResult> = message
        .parts
        .iter()
        .filter_map(Part::as_tool_result)
        .collect();
    if message.role == Role::Tool {
        // One wire message per result: OpenAI has no way to answer two calls in one message.
        for result in results {
            let mut object = JsonMap::new();
            object.insert("role".into(), role.clone().into());
            if let Some(content) = output_value(&result.content, shape) {
                object.insert("content".into(), content);
            }
            if role != FUNCTION_ROLE {
                object.insert("tool_call_id".into(), result.call_id.clone().into());
            }
            object.extend(fields.clone());
            out.push(Value::Object(object));
        }
        return;
    }

    let mut object = JsonMap::new();
    object.insert("role".into(), role.into());
    let content: Vec<&Part> = message
        .parts
        .iter()
        .filter(|part| !matches!(part, Part::ToolCall(_)))
        .collect();
    if let Some(value) = content_value(&content, shape) {
        object.insert("content".into(), value);
    }
    let calls: Vec<Value> = message
        .parts
        .iter()
        .filter_map(Part::as_tool_call)
        .filter(|call| !call.embedded && !legacy::is_function_call(&call.extra))
        .map(call_value)
        .collect();
    if !calls.is_empty() {
        object.insert("tool_calls".into(), Value::Array(calls));
    }
    for call in message.parts.iter().filter_map(Part::as_tool_call) {
        if legacy::is_function_call(&call.extra) {
            object.insert("function_call".into(), function_call_value(call));
        }
    }
    object.extend(fields);
    out.push(Value::Object(object));
}

fn role_string(role: Role, fields: &JsonMap, instructions: Option<&str>) -> String {
    let original = fields.get("role").and_then(Value::as_str);
    match (role, original) {
        (Role::System, Some(original @ ("system" | "developer")))
        | (Role::Tool, Some(original @ FUNCTION_ROLE)) => original.to_owned(),
        (Role::System, None) => instructions.unwrap_or("system").to_owned(),
        _ => role.as_str().to_owned(),
    }
}

/// A message's non-call parts as `content`. Embedded tool results (mini-swe-agent) are plain text
/// on the wire, so they are written as text.
fn content_value(parts: &[&Part], shape: ContentShape) -> Option<Value> {
    match (shape, parts) {
        (ContentShape::Absent, []) => None,
        (ContentShape::Null, []) => Some(Value::Null),
        (ContentShape::String, [Part::Text(text)]) if text.extra.is_empty() => {
            Some(text.text.clone().into())
        }
        (ContentShape::String, [Part::ToolResult(result)]) if result.embedded => {
            Some(result.content.text().into())
        }
        _ => Some(Value::Array(
            parts.iter().map(|part| part_value(part)).collect(),
        )),
    }
}

fn output_value(output: &ToolOutput, shape: ContentShape) -> Option<Value> {
    match (output, shape) {
        (ToolOutput::Text(text), ContentShape::Absent) if text.is_empty() => None,
        (ToolOutput::Text(text), ContentShape::Null) if text.is_empty() => Some(Value::Null),
        (ToolOutput::Text(text), _) => Some(text.clone().into()),
        (ToolOutput::Parts(parts), _) => Some(Value::Array(parts.iter().map(part_value).collect())),
    }
}

pub(crate) fn part_value(part: &Part) -> Value {
    let mut object = JsonMap::new();
    match part {
        Part::Text(text) => {
            object.insert("type".into(), "text".into());
            object.insert("text".into(), text.text.clone().into());
            object.extend(text.extra.clone());
        }
        Part::Image(image) => {
            object.insert("type".into(), "image_url".into());
            object.insert(
                "image_url".into(),
                crate::image::openai_image_url(&image.source),
            );
            object.extend(image.extra.clone());
        }
        Part::Thinking(thinking) => {
            object.insert("type".into(), "text".into());
            object.insert("text".into(), thinking.text.clone().into());
        }
        Part::ToolResult(result) => {
            object.insert("type".into(), "text".into());
            object.insert("text".into(), result.content.text().into());
        }
        Part::ToolCall(call) => return call_value(call),
        Part::Opaque { value } => return value.clone(),
    }
    Value::Object(object)
}

/// A call read from `function_call`, as it came: `name`, `arguments`, and whatever else it had.
fn function_call_value(call: &ToolCall) -> Value {
    let mut object = JsonMap::new();
    object.insert("name".into(), call.name.clone().into());
    object.insert(
        "arguments".into(),
        call.raw_input
            .clone()
            .unwrap_or_else(|| call.input.to_string())
            .into(),
    );
    object.extend(
        call.extra
            .iter()
            .filter(|(key, _)| key.as_str() != FUNCTION_CALL)
            .map(|(key, value)| (key.clone(), value.clone())),
    );
    Value::Object(object)
}

fn call_value(call: &ToolCall) -> Value {
    let mut object = JsonMap::new();
    object.insert("id".into(), call.id.clone().into());
    if let Some(Value::Object(custom)) = call.extra.get(CUSTOM) {
        let raw = call.raw_input.clone().unwrap_or_else(|| match &call.input {
            Value::String(text) => text.clone(),
            input => input.to_string(),
        });
        for (key, value) in &call.extra {
            if key == CUSTOM {
                let mut head = JsonMap::new();
                head.insert("name".into(), call.name.clone().into());
                head.insert("input".into(), raw.clone().into());
                head.extend(custom.iter().map(|(k, v)| (k.clone(), v.clone())));
                object.insert(key.clone(), Value::Object(head));
            } else {
                object.insert(key.clone(), value.clone());
            }
        }
        return Value::Object(object);
    }
    let mut extra = call.extra.clone();
    let mut function = match extra.shift_remove("function") {
        Some(Value::Object(function)) => function,
        _ => JsonMap::new(),
    };
    let arguments = call
        .raw_input
        .clone()
        .unwrap_or_else(|| call.input.to_string());
    let mut head = JsonMap::new();
    head.insert("name".into(), call.name.clone().into());
    head.insert("arguments".into(), arguments.into());
    head.append(&mut function);
    object.append(&mut extra);
    object.insert("function".into(), Value::Object(head));
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A custom tool's call (free-text input) is read as a call with its text as the input,
    /// paired with its result, and written back byte for byte, `custom` object and all.
    #[test]
    fn a_custom_tool_call_round_trips() {
        let body = r#"{"messages":[{"role":"user","content":"patch it"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_3","type":"custom","custom":{"name":"apply_patch","input":"*** Begin Patch\n*** End Patch","x":1}}]},{"role":"tool","content":"done","tool_call_id":"call_3"}]}"#;
        let conversation = from_value(serde_json::from_str(body).unwrap()).unwrap();
        let Part::ToolCall(call) = &conversation.messages[1].parts[0] else {
            panic!("{:?}", conversation.messages[1].parts)
        };
        assert_eq!(call.name, "apply_patch");
        assert_eq!(
            call.input,
            Value::String("*** Begin Patch\n*** End Patch".into())
        );
        assert!(conversation.validate().is_empty());
        assert_eq!(to_value(&conversation).to_string(), body);
        let broken = r#"{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"custom","custom":{"input":"x"}}]}]}"#;
        let error = from_value(serde_json::from_str(broken).unwrap()).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("custom tool call `c` has no `name`"),
            "{error}"
        );
    }

    /// A system-level message condense makes (a summary) takes the role the client gives its
    /// own instructions: `developer` beside a client's `developer` message, `system` beside a
    /// `system` one or where the client sent none.
    #[test]
    fn a_summary_speaks_in_the_role_of_the_client_s_instructions() {
        for (instructions, expected) in [
            (Some("developer"), "developer"),
            (Some("system"), "system"),
            (None, "system"),
        ] {
            let mut messages = Vec::new();
            if let Some(role) = instructions {
                messages.push(serde_json::json!({"role": role, "content": "Be terse."}));
            }
            messages.push(serde_json::json!({"role": "user", "content": "fix it"}));
            let mut conversation =
                from_value(serde_json::json!({"model": "m", "messages": messages})).unwrap();
            let at = conversation.messages.len();
            conversation.messages.insert(
                at,
                Message::text(Role::System, "<summary>earlier</summary>"),
            );
            let value = to_value(&conversation);
            let sent = value["messages"].as_array().unwrap();
            assert_eq!(sent[at]["role"], expected, "{instructions:?}");
            if let Some(role) = instructions {
                assert_eq!(sent[0]["role"], role);
            }
        }
    }

    /// condense's summary goes into the person's message beside it, or is a user message of its
    /// own before the agent's answer, so that no system message follows the conversation's
    /// start, no two user messages meet and no answer comes first (what strict chat templates
    /// refuse); read back, it is the message condense made again, and written again, the same
    /// bytes.
    #[test]
    fn a_summary_is_written_where_the_roles_still_alternate_and_read_back_out() {
        let (summary, continued) = crate::placement::testing::summary();
        let body = |messages: Value| serde_json::json!({"model": "m", "messages": messages});
        let parts = |text: &str| serde_json::json!([{"type": "text", "text": text}]);
        for (messages, at, expected) in [
            // An autonomous run: after the task kept in front of it.
            (
                serde_json::json!([{"role": "developer", "content": "Be terse."},
                    {"role": "user", "content": "fix it"},
                    {"role": "assistant", "content": "Looking."}]),
                2,
                serde_json::json!([{"role": "developer", "content": "Be terse."},
                    {"role": "user", "content": format!("fix it\n\n{summary}")},
                    {"role": "assistant", "content": "Looking."}]),
            ),
            // The same, the task in parts.
            (
                serde_json::json!([{"role": "user", "content": parts("fix it")},
                    {"role": "assistant", "content": "Looking."}]),
                1,
                serde_json::json!([{"role": "user", "content": [
                        {"type": "text", "text": "fix it"},
                        {"type": "text", "text": summary}]},
                    {"role": "assistant", "content": "Looking."}]),
            ),
            // A tail that starts with a message of the person's (a harness's reminder) joins
            // the task and the summary.
            (
                serde_json::json!([{"role": "system", "content": "Be terse."},
                    {"role": "user", "content": "fix it"},
                    {"role": "user", "content": "One action, please."},
                    {"role": "assistant", "content": "Looking."}]),
                2,
                serde_json::json!([{"role": "system", "content": "Be terse."},
                    {"role": "user", "content": format!("fix it\n\n{summary}\n\nOne action, please.")},
                    {"role": "assistant", "content": "Looking."}]),
            ),
            (
                serde_json::json!([{"role": "user", "content": parts("fix it")},
                    {"role": "user", "content": parts("One action, please.")}]),
                1,
                serde_json::json!([{"role": "user", "content": [
                    {"type": "text", "text": "fix it"},
                    {"type": "text", "text": summary},
                    {"type": "text", "text": "One action, please."}]}]),
            ),
            // An interactive session: before the person's request that comes next.
            (
                serde_json::json!([{"role": "system", "content": "Be terse."},
                    {"role": "user", "content": "and now?"}]),
                1,
                serde_json::json!([{"role": "system", "content": "Be terse."},
                    {"role": "user", "content": format!("{summary}\n\nand now?")}]),
            ),
            (
                serde_json::json!([{"role": "user", "content": parts("and now?")}]),
                0,
                serde_json::json!([{"role": "user", "content": [
                    {"type": "text", "text": summary},
                    {"type": "text", "text": "and now?"}]}]),
            ),
            // Before the agent's answer, after the instructions: a user message of its own.
            (
                serde_json::json!([{"role": "system", "content": "Be terse."},
                    {"role": "assistant", "content": "Looking."}]),
                1,
                serde_json::json!([{"role": "system", "content": "Be terse."},
                    {"role": "user", "content": summary},
                    {"role": "assistant", "content": "Looking."}]),
            ),
        ] {
            let mut conversation = from_value(body(messages.clone())).unwrap();
            conversation
                .messages
                .insert(at, Message::text(Role::System, continued.clone()));
            let value = to_value(&conversation);
            assert_eq!(value["messages"], expected);

            let read = from_value(value.clone()).unwrap();
            assert_eq!(read.messages.len(), conversation.messages.len(), "{value}");
            assert!(read.messages[at].is_compaction_summary(), "{value}");
            assert!(!read.messages[at].is_user_turn());
            let theirs: Vec<String> = conversation
                .messages
                .iter()
                .filter(|message| !message.is_compaction_summary())
                .map(Message::plain_text)
                .collect();
            let read_theirs: Vec<String> = read
                .messages
                .iter()
                .filter(|message| !message.is_compaction_summary())
                .map(Message::plain_text)
                .collect();
            assert_eq!(read_theirs, theirs, "the client's messages as they were");
            assert_eq!(to_value(&read), value, "the same bytes again");
        }

        // Alone in the request, it is a message at the instructions' level.
        let alone = Conversation::new(vec![Message::text(Role::System, continued.clone())]);
        assert_eq!(
            to_value(&alone),
            serde_json::json!([{"role": "system", "content": continued}])
        );
        // A tool's output that quotes the tags, later in the session, stays as it came.
        let quoted = serde_json::json!([{"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "cat notes"},
            {"role": "user", "content": format!("notes:\n\n{continued}")},
            {"role": "user", "content": format!("{summary}\n\nmore notes")}]);
        let read = from_value(quoted.clone()).unwrap();
        assert_eq!(read.messages.len(), 4);
        assert_eq!(to_value(&read), quoted);
    }

    /// A message condense adds (a summary, a continuation) is written as a plain string, which
    /// every Chat Completions server accepts; a message read from the wire keeps the shape it
    /// came in.
    #[test]
    fn messages_condense_makes_are_plain_strings() {
        let mut conversation = Conversation::new(vec![
            Message::text(Role::System, "Be terse."),
            Message::text(Role::User, "Continue."),
        ]);
        let value = to_value(&conversation);
        assert_eq!(value[0]["content"], "Be terse.");
        assert_eq!(value[1]["content"], "Continue.");

        conversation.messages[1].wire = vec![condense_core::WireRecord {
            fields: JsonMap::new(),
            parts: 1,
            shape: ContentShape::Blocks,
        }];
        let value = to_value(&conversation);
        assert_eq!(value[1]["content"][0]["text"], "Continue.");
    }
}
