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
    let messages = rest.iter().map(message_to_value).collect();
    body.insert("messages".into(), Value::Array(messages));
    Value::Object(body)
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
