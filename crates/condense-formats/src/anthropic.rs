//! Anthropic Messages request bodies: `system` plus `messages` of `user` / `assistant` with typed
//! blocks. Tool results arrive inside `user` messages; the model keeps them there (a user message
//! holding only tool results is not a user turn).

use condense_core::{Conversation, JsonMap, Message, Role, WireRecord};
use serde_json::Value;

use crate::blocks::{content_from_parts, kind_of, parts_from_content};
use crate::{FormatError, Location};

pub(crate) fn from_value(value: Value) -> Result<Conversation, FormatError> {
    let Value::Object(mut body) = value else {
        return Err(FormatError::malformed(
            Location::TopLevel,
            format!("an Anthropic request is an object, not {}", kind_of(&value)),
        ));
    };
    let raw_messages = match body.shift_remove("messages") {
        Some(Value::Array(messages)) => messages,
        _ => {
            return Err(FormatError::malformed(
                Location::TopLevel,
                "an Anthropic request needs a `messages` list",
            ));
        }
    };
    let mut messages = Vec::with_capacity(raw_messages.len());
    for (index, raw) in raw_messages.into_iter().enumerate() {
        messages.push(message_from_value(index, raw)?);
    }
    assemble(body, messages)
}

/// The conversation of a request whose `messages` are read already (`body` without them): its
/// `system` becomes the first message, the rest of the body the envelope.
pub(crate) fn assemble(
    mut body: JsonMap,
    mut messages: Vec<Message>,
) -> Result<Conversation, FormatError> {
    if let Some(system) = body.shift_remove("system") {
        let (parts, shape) = parts_from_content(Some(system)).map_err(|problem| {
            FormatError::malformed(Location::TopLevel, format!("`system`: {problem}"))
        })?;
        messages.insert(
            0,
            Message {
                role: Role::System,
                parts,
                generated: false,
                wire: vec![WireRecord {
                    fields: JsonMap::new(),
                    parts: 0,
                    shape,
                }],
            },
        );
    }
    Ok(Conversation {
        messages,
        envelope: Some(body),
        side: Vec::new(),
    })
}

pub(crate) fn message_from_value(index: usize, raw: Value) -> Result<Message, FormatError> {
    let at = Location::Message(index);
    let Value::Object(mut fields) = raw else {
        return Err(FormatError::malformed(
            at,
            format!("a message is an object, not {}", kind_of(&raw)),
        ));
    };
    let role = match fields.shift_remove("role") {
        Some(Value::String(role)) => match role.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            // Claude Code 2 sends notes of its own as `system` messages among the others (the
            // agent types its Agent tool can start): kept among the wire fields, the role goes
            // back as it came, and the message stays where it was.
            "system" => {
                fields.insert("role".into(), role.into());
                Role::System
            }
            _ => return Err(FormatError::UnknownRole { at, role }),
        },
        Some(other) => {
            return Err(FormatError::malformed(
                at,
                format!("`role` must be a string, not {}", kind_of(&other)),
            ));
        }
        None => return Err(FormatError::malformed(at, "the message has no `role`")),
    };
    let (parts, shape) = parts_from_content(fields.shift_remove("content"))
        .map_err(|problem| FormatError::malformed(at, problem))?;
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

pub(crate) fn to_value(conversation: &Conversation) -> Value {
    let mut body = conversation.envelope.clone().unwrap_or_default();
    // A summary condense made is not the system prompt: it goes out as the first user message,
    // which also keeps the rule that a conversation starts with the user when the tail starts
    // with the assistant. A `system` the body came with stays `system`, whatever its text
    // starts with (one that opened with the summary marker once came back as a user message).
    let leading_system = conversation
        .messages
        .iter()
        .take_while(|message| {
            message.role == Role::System
                && !message.is_summary_written_here()
                && !is_system_message(message)
        })
        .count();
    let (system, rest) = conversation.messages.split_at(leading_system);
    if let Some(value) = system_value(system) {
        body.insert("system".into(), value);
    }
    let mut messages: Vec<Value> = rest.iter().map(message_to_value).collect();
    if condense_core::task_leads_a_summary_written_here(rest) {
        mark_the_task(&body, &mut messages);
    }
    body.insert("messages".into(), Value::Array(messages));
    Value::Object(body)
}

/// The `cache_control` marks of `value` (a `system`, `tools` or a message's `content`: a block,
/// a list of blocks, or text), in order, those of the blocks a tool result holds among them:
/// Anthropic counts every one.
fn marks(value: &Value) -> Vec<Value> {
    let blocks: Vec<&Value> = match value {
        Value::Array(blocks) => blocks.iter().collect(),
        Value::Object(_) => vec![value],
        _ => Vec::new(),
    };
    let mut found = Vec::new();
    for block in blocks {
        if let Some(mark) = block.get("cache_control").filter(|mark| !mark.is_null()) {
            found.push(mark.clone());
        }
        if let Some(inner @ Value::Array(_)) = block.get("content") {
            found.extend(marks(inner));
        }
    }
    found
}

/// The most `cache_control` marks Anthropic takes in one request.
const MOST_MARKS: usize = 4;

/// A `cache_control` mark on the task's last block, where the request has room for one more.
///
/// Anthropic reads a cached prefix only where a request marks one (or within 20 blocks before a
/// mark). A client marks its system prompt and its latest messages; after a summary, nothing it
/// marks ends where the task does, so each compaction would write the task to the cache again
/// behind the system prompt, though every request since the run began has sent it there. Marked,
/// it is read instead. The mark is the client's own next one (its `ttl` with it: a mark may not
/// outlive one before it), else its system prompt's, else the default five-minute one.
fn mark_the_task(body: &JsonMap, messages: &mut [Value]) {
    let before: Vec<Value> = ["tools", "system"]
        .iter()
        .filter_map(|key| body.get(*key))
        .flat_map(marks)
        .collect();
    let after: Vec<Value> = messages
        .iter()
        .skip(1)
        .filter_map(|message| message.get("content"))
        .flat_map(marks)
        .collect();
    let Some(task) = messages.first_mut() else {
        return;
    };
    let own = task.get("content").map(marks).unwrap_or_default();
    if !own.is_empty() || before.len() + after.len() >= MOST_MARKS {
        return;
    }
    let mark = after
        .first()
        .or(before.last())
        .cloned()
        .unwrap_or_else(|| serde_json::json!({"type": "ephemeral"}));
    let Some(content) = task.get_mut("content") else {
        return;
    };
    if let Value::String(text) = content {
        *content = serde_json::json!([{"type": "text", "text": text}]);
    }
    if let Some(Value::Object(last)) = content.as_array_mut().and_then(|blocks| blocks.last_mut()) {
        last.insert("cache_control".into(), mark);
    }
}

/// The leading System messages as `system`: one message keeps its own shape, several become one
/// list of blocks (Anthropic has a single system prompt).
fn system_value(system: &[Message]) -> Option<Value> {
    match system {
        [] => None,
        [only] => content_from_parts(&only.parts, shape_of(only)),
        several => content_from_parts(
            several.iter().flat_map(|message| &message.parts),
            condense_core::ContentShape::Blocks,
        ),
    }
}

/// A `system` message the body had among its messages (not its `system` prompt).
fn is_system_message(message: &Message) -> bool {
    message
        .wire
        .first()
        .is_some_and(|record| record.fields.get("role").and_then(Value::as_str) == Some("system"))
}

/// A System message after the start that did not come as a `system` message goes out as a
/// `user` message, which is how Anthropic's own clients carry such notes; one that came as a
/// `system` message keeps that role (its wire fields hold it).
fn message_to_value(message: &Message) -> Value {
    let mut fields = message
        .wire
        .first()
        .map(|record| record.fields.clone())
        .unwrap_or_default();
    let role = match message.role {
        Role::Assistant => "assistant",
        Role::User | Role::Tool | Role::System => "user",
    };
    let mut object = JsonMap::new();
    object.insert("role".into(), role.into());
    if let Some(content) = content_from_parts(&message.parts, shape_of(message)) {
        object.insert("content".into(), content);
    }
    object.append(&mut fields);
    Value::Object(object)
}

fn shape_of(message: &Message) -> condense_core::ContentShape {
    message
        .wire
        .first()
        .map(|record| record.shape)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An autonomous run's task kept in front of condense's summary gets a `cache_control` mark
    /// of its own, the same as the client's next one, so Anthropic reads it from its cache after
    /// each compaction; never where the request has four marks already, where the task has one,
    /// or where no summary written for this request follows it.
    #[test]
    fn a_task_kept_in_front_of_a_summary_is_marked_for_the_cache() {
        let hour = serde_json::json!({"type": "ephemeral", "ttl": "1h"});
        let body = |last_mark: Value, tools: usize| {
            let tool = serde_json::json!({"name": "bash", "input_schema": {},
                "cache_control": {"type": "ephemeral"}});
            serde_json::json!({
                "model": "claude-sonnet-4-5",
                "system": [{"type": "text", "text": "Solve the task.",
                    "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
                "tools": vec![tool; tools],
                "messages": [
                    {"role": "user", "content": "Fix the parser."},
                    {"role": "assistant", "content": [{"type": "text", "text": "Looking."}]},
                    {"role": "user", "content": [{"type": "text", "text": "go on",
                        "cache_control": last_mark}]},
                ],
            })
        };
        let compacted = |value: Value| {
            let mut conversation = from_value(value).unwrap();
            let summary = Message::text(
                Role::System,
                format!(
                    "{}\nwork so far\n{}",
                    condense_core::SUMMARY_OPEN,
                    condense_core::SUMMARY_CLOSE
                ),
            );
            conversation.messages.insert(2, summary);
            to_value(&conversation)
        };
        let out = compacted(body(hour.clone(), 0));
        assert_eq!(
            out["messages"][0]["content"],
            serde_json::json!([{"type": "text", "text": "Fix the parser.", "cache_control": hour}])
        );
        assert!(
            out["messages"][1]["content"]
                .to_string()
                .contains(condense_core::SUMMARY_OPEN)
        );
        // No client mark after it: the system prompt's.
        let unmarked = compacted(body(Value::Null, 0));
        assert_eq!(unmarked["messages"][0]["content"][0]["cache_control"], hour);
        // Four marks already (the system prompt's, two tools', the last message's): none added.
        let full = compacted(body(hour.clone(), 2));
        assert_eq!(full["messages"][0]["content"], "Fix the parser.");
        // A mark inside a tool result's blocks counts as well.
        let mut nested = body(hour.clone(), 1);
        nested["messages"][2]["content"] = serde_json::json!([{"type": "tool_result",
            "tool_use_id": "t1", "content": [{"type": "text", "text": "ok",
                "cache_control": {"type": "ephemeral"}}]},
            {"type": "text", "text": "go on", "cache_control": hour.clone()}]);
        let nested = compacted(nested);
        assert_eq!(nested["messages"][0]["content"], "Fix the parser.");
        // Without a summary after it, the body is the client's own.
        let plain = body(hour, 0);
        assert_eq!(to_value(&from_value(plain.clone()).unwrap()), plain);
    }

    /// What Claude Code 2 sends: a `system` prompt, and a `system` message of its own among the
    /// others (here at the end, as it puts the agent types its Agent tool can start).
    #[test]
    fn a_system_message_among_the_messages_stays_one_where_it_was() {
        let body = serde_json::json!({
            "model": "claude-opus-4-8",
            "system": [{"type": "text", "text": "You are Claude Code."}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "count"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
                {"role": "system", "content": "Available agent types: claude."},
            ],
        });
        let bytes = body.to_string();
        assert_eq!(
            crate::detect(bytes.as_bytes()).unwrap(),
            crate::Format::Anthropic
        );
        let conversation = from_value(body.clone()).unwrap();
        let roles: Vec<Role> = conversation.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [Role::System, Role::User, Role::Assistant, Role::System]
        );
        assert_eq!(to_value(&conversation), body);
        // First among the messages, it is still not the `system` prompt.
        let mut first = body.clone();
        first["messages"].as_array_mut().unwrap().rotate_right(1);
        assert_eq!(to_value(&from_value(first.clone()).unwrap()), first);
    }
}
