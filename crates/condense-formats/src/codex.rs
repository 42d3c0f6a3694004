//! Codex CLI's session logs ("rollouts", `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): one
//! JSON object per line, `{"timestamp", "type", "payload"}` (Codex 0.169 adds an `ordinal` and a
//! line-level `metadata`).
//!
//! A `response_item` line is one item of the model's history, its payload a Responses API item:
//! it is read as the Responses reader reads an `input` item, and the rest of the line stays its
//! wire record. Every other line (`session_meta`, `turn_context`, `event_msg`,
//! `token_usage_record`, `world_state`, …) is kept beside the conversation and written back
//! unchanged, except that a copy of a tool output that condense replaced (the `item_completed`
//! and `exec_command_end` events hold the command's output a second time, for Codex's display)
//! is replaced by the same placeholder: a pruned session must not keep the output on disk.
//!
//! A `compacted` line is Codex's own compaction: from there on the model saw its
//! `replacement_history` instead of what came before. Such a session is refused for now, with
//! the line named: reading on past it would count what the model no longer saw.
//!
//! Writing keeps every line's keys in the order they came, so a session read and written back
//! unchanged is the same bytes.

use condense_core::{Conversation, JsonMap, Message, Part, SideKind, SideRecord, WireRecord};
use serde_json::Value;

use crate::blocks::kind_of;
use crate::error::strip_position;
use crate::{FormatError, Location, responses, text};

/// The wire field of a `response_item` line's record that holds its payload's key order (the
/// payload with every string emptied), so that the item goes back with its keys where they
/// were. Removed again on writing.
const ORDER: &str = "condense_key_order";

/// The line types that open a Codex session log: what tells it apart from other JSONL.
pub(crate) const LINE_TYPES: [&str; 5] = [
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
];

pub(crate) fn read(bytes: &[u8]) -> Result<Conversation, FormatError> {
    let input = text::utf8(bytes)?;
    let mut conversation = Conversation::default();
    for (line_index, line) in input.lines().enumerate() {
        let line_number = line_index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let at = Location::Line(line_number);
        let value: Value = serde_json::from_str(line).map_err(|error| FormatError::JsonLine {
            line: line_number,
            column: error.column(),
            message: strip_position(&error),
        })?;
        let Value::Object(mut record) = value else {
            return Err(FormatError::malformed(
                at,
                format!("a session line is an object, not {}", kind_of(&value)),
            ));
        };
        match record.get("type").and_then(Value::as_str) {
            Some("response_item") => {}
            Some("compacted") => {
                return Err(FormatError::malformed(
                    at,
                    "Codex compacted this session itself here (a `compacted` line); condense \
                     reads Codex sessions that Codex has not compacted",
                ));
            }
            _ => {
                conversation.side.push(SideRecord {
                    kind: SideKind::Other,
                    before_message: conversation.messages.len(),
                    value: Value::Object(record),
                });
                continue;
            }
        }
        // The payload is taken, but its place is kept, so the line comes back in its order.
        let payload = match record.get_mut("payload") {
            Some(payload @ Value::Object(_)) => payload.take(),
            Some(other) => {
                return Err(FormatError::malformed(
                    at,
                    format!("`payload` must be an object, not {}", kind_of(other)),
                ));
            }
            None => {
                return Err(FormatError::malformed(
                    at,
                    "a `response_item` has no `payload`",
                ));
            }
        };
        let order = skeleton(&payload);
        let mut message = responses::message_from_value(conversation.messages.len(), payload)
            .map_err(|error| error.at(at))?;
        // An item is one record: the item's own fields (those the parts do not hold) go back
        // under `payload`, the line's around them.
        let item = std::mem::take(&mut message.wire[0].fields);
        record.insert("payload".into(), Value::Object(item));
        record.insert(ORDER.into(), order);
        message.wire[0].fields = record;
        conversation.messages.push(message);
    }
    Ok(conversation)
}

pub(crate) fn write(conversation: &Conversation) -> Result<Vec<u8>, FormatError> {
    let replaced = replaced_outputs(conversation);
    let mut out = Vec::new();
    let mut side = conversation.side.iter().peekable();
    let mut timestamp: Option<Value> = None;
    for (index, message) in conversation.messages.iter().enumerate() {
        while let Some(record) = side.next_if(|record| record.before_message <= index) {
            push_side(&mut out, record, &replaced, &mut timestamp)?;
        }
        for line in message_lines(message, &mut timestamp) {
            push_line(&mut out, &line)?;
        }
    }
    for record in side {
        push_side(&mut out, record, &replaced, &mut timestamp)?;
    }
    Ok(out)
}

/// The lines a message is written as: one per item. A message read from the log has one item
/// and goes back as its line; one condense made becomes `response_item` lines stamped with the
/// time of the line before.
fn message_lines(message: &Message, timestamp: &mut Option<Value>) -> Vec<Value> {
    let (mut line, order) = match message.wire.first() {
        Some(record) if message.wire.len() == 1 && record.fields.contains_key("payload") => {
            let mut line = record.fields.clone();
            let order = line.shift_remove(ORDER).unwrap_or(Value::Null);
            (line, order)
        }
        _ => {
            let mut line = JsonMap::new();
            if let Some(timestamp) = timestamp.clone() {
                line.insert("timestamp".into(), timestamp);
            }
            line.insert("type".into(), "response_item".into());
            line.insert("payload".into(), Value::Object(JsonMap::new()));
            (line, Value::Null)
        }
    };
    if let Some(stamp) = line.get("timestamp") {
        *timestamp = Some(stamp.clone());
    }
    let item_fields = match line.get_mut("payload").map(Value::take) {
        Some(Value::Object(fields)) => fields,
        _ => JsonMap::new(),
    };
    let mut item_message = message.clone();
    item_message.wire = match message.wire.first() {
        Some(record) => vec![WireRecord {
            fields: item_fields,
            parts: record.parts,
            shape: record.shape,
        }],
        None => Vec::new(),
    };
    let mut items = Vec::with_capacity(1);
    responses::write_message(&item_message, &mut items);
    if message.wire.is_empty() {
        items = items.into_iter().map(codex_item).collect();
    }
    items
        .into_iter()
        .map(|item| {
            let mut line = line.clone();
            line.insert("payload".into(), ordered_like(item, &order));
            Value::Object(line)
        })
        .collect()
}

/// A message item condense made, in the form Codex keeps in its log: Codex reads its history
/// back with types of its own, which need `type`, a list of content parts, and a role it keeps
/// (it drops `system` messages when it resumes a session, so a summary goes in as `developer`,
/// the role of its own instructions). Other items go as they are.
fn codex_item(item: Value) -> Value {
    let Value::Object(mut fields) = item else {
        return item;
    };
    if !fields.contains_key("role") {
        return Value::Object(fields);
    }
    if fields.get("role").and_then(Value::as_str) == Some("system") {
        fields.insert("role".into(), "developer".into());
    }
    let text_type = match fields.get("role").and_then(Value::as_str) {
        Some("assistant") => "output_text",
        _ => "input_text",
    };
    if let Some(content @ Value::String(_)) = fields.get_mut("content") {
        let text = content.take();
        *content = serde_json::json!([{"type": text_type, "text": text}]);
    }
    let mut item = JsonMap::with_capacity(fields.len() + 1);
    item.insert("type".into(), "message".into());
    item.append(&mut fields);
    Value::Object(item)
}

fn push_side(
    out: &mut Vec<u8>,
    record: &SideRecord,
    replaced: &[(String, String)],
    timestamp: &mut Option<Value>,
) -> Result<(), FormatError> {
    if let Some(stamp) = record.value.get("timestamp") {
        *timestamp = Some(stamp.clone());
    }
    match forget_replaced_copies(&record.value, replaced) {
        Some(scrubbed) => push_line(out, &scrubbed),
        None => push_line(out, &record.value),
    }
}

fn push_line(out: &mut Vec<u8>, value: &Value) -> Result<(), FormatError> {
    serde_json::to_writer(&mut *out, value)
        .map_err(|error| FormatError::Write(error.to_string()))?;
    out.push(b'\n');
    Ok(())
}

/// The call id and placeholder text of every tool output condense replaced.
fn replaced_outputs(conversation: &Conversation) -> Vec<(String, String)> {
    conversation
        .messages
        .iter()
        .flat_map(|message| &message.parts)
        .filter_map(|part| match part {
            Part::ToolResult(result) if result.compacted.is_some() => {
                Some((result.call_id.clone(), result.content.text().into_owned()))
            }
            _ => None,
        })
        .collect()
}

/// The keys under which Codex's events keep a second copy of a command's output: the
/// `item_completed` event's `CommandExecution` item (Codex 0.169), and `exec_command_end`
/// (earlier versions).
const OUTPUT_COPIES: [&str; 4] = ["aggregated_output", "formatted_output", "stdout", "stderr"];

/// An event line that copies the output of a call whose output condense replaced, with each
/// copy replaced by the same placeholder; `None` when the line copies none.
fn forget_replaced_copies(value: &Value, replaced: &[(String, String)]) -> Option<Value> {
    if replaced.is_empty() || value.get("type").and_then(Value::as_str) != Some("event_msg") {
        return None;
    }
    let payload = value.get("payload")?;
    let (holder, id) = match payload.get("item") {
        Some(item) => (vec!["payload", "item"], item.get("id")?.as_str()?),
        None => (vec!["payload"], payload.get("call_id")?.as_str()?),
    };
    let (_, placeholder) = replaced.iter().find(|(call_id, _)| call_id == id)?;
    let mut scrubbed = value.clone();
    let mut object = &mut scrubbed;
    for key in holder {
        object = object.get_mut(key)?;
    }
    let Value::Object(fields) = object else {
        return None;
    };
    for key in OUTPUT_COPIES {
        if let Some(Value::String(copy)) = fields.get_mut(key)
            && !copy.is_empty()
        {
            *copy = placeholder.clone();
        }
    }
    Some(scrubbed)
}

/// `value` with its strings emptied: the shape of an item (its keys, in order, at every level),
/// without its text.
fn skeleton(value: &Value) -> Value {
    match value {
        Value::String(_) => Value::String(String::new()),
        Value::Array(items) => Value::Array(items.iter().map(skeleton).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, value)| (key.clone(), skeleton(value)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `value` with the keys of each object in the order `like` has them (at every level where the
/// two have the same shape); keys `like` lacks come after, in their own order.
fn ordered_like(value: Value, like: &Value) -> Value {
    match (value, like) {
        (Value::Object(mut fields), Value::Object(model)) => {
            let mut ordered = JsonMap::with_capacity(fields.len());
            for (key, model_value) in model {
                if let Some(value) = fields.shift_remove(key) {
                    ordered.insert(key.clone(), ordered_like(value, model_value));
                }
            }
            ordered.append(&mut fields);
            Value::Object(ordered)
        }
        (Value::Array(items), Value::Array(model)) if items.len() == model.len() => Value::Array(
            items
                .into_iter()
                .zip(model)
                .map(|(item, model)| ordered_like(item, model))
                .collect(),
        ),
        (value, _) => value,
    }
}
