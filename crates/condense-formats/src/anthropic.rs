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
                && !(message.is_compaction_summary() && message.wire.is_empty())
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

/// A System message after the start has no place in the Messages API; it goes out as a `user`
/// message, which is how Anthropic's own clients carry such notes.
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
