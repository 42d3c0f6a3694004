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
//! `replacement_history` instead of what came before (Codex rebuilds a resumed session the same
//! way). So at such a line everything read so far goes beside the conversation, written back
//! as it came, and the replacement history's items become the first messages; writing puts them
//! back into that line (with the per-item `replacement_history_metadata`, kept in step), so a
//! replacement item condense pruned or summarized away is pruned or gone there too. A log of an
//! older Codex, whose `compacted` line has only the summary `message`, is read with that summary
//! as a user message (Codex sends it so), which the line keeps as it was.
//! A replay reads the log whole instead ([`read_as`]): what came before each compaction, and
//! Codex's summarizer answer (an item flagged `compaction_output`), are messages too.
//!
//! Writing keeps every line's keys in the order they came, so a session read and written back
//! unchanged is the same bytes.

use condense_core::{Conversation, JsonMap, Message, Part, SideKind, SideRecord, WireRecord};
use serde_json::Value;

use crate::blocks::kind_of;
use crate::jsonl::{self, push_line};
use crate::order::{ORDER, ordered_like, skeleton};
use crate::reading::{RESTATES, Reading};
use crate::{FormatError, Location, responses, text};

/// The wire field of a message read from a `compacted` line: the index of its item in the
/// line's `replacement_history` (or `"message"` for the summary of a line that has none). Such
/// a message is written inside that line, not as a line of its own.
pub(crate) const REPLACEMENT: &str = "condense_replacement_item";

/// The line types that open a Codex session log: what tells it apart from other JSONL.
pub(crate) const LINE_TYPES: [&str; 5] = [
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
];

pub(crate) fn read(bytes: &[u8]) -> Result<Conversation, FormatError> {
    read_as(bytes, Reading::AsTheModelSeesIt)
}

/// Reads the log as the model sees it now, or whole: then each compaction's replacement
/// history follows the items it replaced, its items flagged, and Codex's summarizer answer (an
/// item flagged `compaction_output`) is a message too.
pub(crate) fn read_as(bytes: &[u8], reading: Reading) -> Result<Conversation, FormatError> {
    let input = text::utf8(bytes)?;
    let mut conversation = Conversation::default();
    for record in jsonl::records(input) {
        let (at, mut record) = record?;
        match record.get("type").and_then(Value::as_str) {
            Some("response_item") => {}
            Some("compacted") => {
                if reading == Reading::AsTheModelSeesIt {
                    // An item of an earlier compaction's history is inside that line already.
                    let mut timestamp = None;
                    jsonl::set_aside(&mut conversation, |message| {
                        if is_replacement(message) {
                            Vec::new()
                        } else {
                            message_lines(message, &mut timestamp)
                        }
                    });
                }
                conversation.side.push(SideRecord {
                    kind: SideKind::Other,
                    before_message: conversation.messages.len(),
                    value: Value::Object(record.clone()),
                });
                replacement(&mut conversation, &record, at, reading)?;
                continue;
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

/// The history the model saw from the `compacted` line `record` on, as messages: the items of
/// its `replacement_history`, or the summary of an older Codex's line that has none.
fn replacement(
    conversation: &mut Conversation,
    record: &JsonMap,
    at: Location,
    reading: Reading,
) -> Result<(), FormatError> {
    let timestamp = record.get("timestamp");
    let payload = record.get("payload");
    let history = payload
        .and_then(|payload| payload.get("replacement_history"))
        .and_then(Value::as_array);
    let summary = payload
        .and_then(|payload| payload.get("message"))
        .and_then(Value::as_str);
    let stamped = |marker: Value| {
        let mut fields = JsonMap::new();
        if let Some(timestamp) = timestamp {
            fields.insert("timestamp".into(), timestamp.clone());
        }
        if reading == Reading::Whole {
            fields.insert(RESTATES.into(), Value::Bool(true));
        }
        fields.insert(REPLACEMENT.into(), marker);
        fields
    };
    match (history, summary) {
        (Some(items), _) => {
            for (index, item) in items.iter().enumerate() {
                let order = skeleton(item);
                let mut message = responses::message_from_value(index, item.clone())
                    .map_err(|error| error.at(at))?;
                let item = std::mem::take(&mut message.wire[0].fields);
                let mut fields = stamped(index.into());
                fields.insert("payload".into(), Value::Object(item));
                fields.insert(ORDER.into(), order);
                message.wire[0].fields = fields;
                conversation.messages.push(message);
            }
        }
        (None, Some(summary)) => {
            let mut message = Message::text(condense_core::Role::User, summary);
            message.wire = vec![WireRecord {
                fields: stamped("message".into()),
                parts: 1,
                shape: condense_core::ContentShape::String,
            }];
            conversation.messages.push(message);
        }
        (None, None) => {}
    }
    Ok(())
}

/// Whether `message` is the answer of Codex's own summarizer: Codex 0.169 logs it as an item
/// of the history, its line's `metadata` flagged `compaction_output`, before the `compacted`
/// line that puts it to use.
pub(crate) fn is_compaction_output(message: &Message) -> bool {
    message.wire.first().is_some_and(|record| {
        record
            .fields
            .get("metadata")
            .and_then(|metadata| metadata.get("compaction_output"))
            == Some(&Value::Bool(true))
    })
}

fn is_replacement(message: &Message) -> bool {
    message
        .wire
        .first()
        .is_some_and(|record| record.fields.contains_key(REPLACEMENT))
}

pub(crate) fn write(conversation: &Conversation) -> Result<Vec<u8>, FormatError> {
    let replaced = replaced_outputs(conversation);
    let live = conversation
        .side
        .iter()
        .rposition(|record| record.value.get("type").and_then(Value::as_str) == Some("compacted"));
    let history = replacement_history(conversation);
    // The line a side record goes back as: the live compaction with the history as it is now,
    // an event without its copies of replaced outputs, anything else as it came.
    let side_line = |index: usize, record: &SideRecord| -> Option<Value> {
        if Some(index) == live {
            return with_history(&record.value, &history);
        }
        forget_replaced_copies(&record.value, &replaced)
    };
    let mut out = Vec::new();
    let mut side = conversation.side.iter().enumerate().peekable();
    let mut timestamp: Option<Value> = None;
    for (index, message) in conversation.messages.iter().enumerate() {
        while let Some((at, record)) = side.next_if(|(_, record)| record.before_message <= index) {
            if let Some(stamp) = record.value.get("timestamp") {
                timestamp = Some(stamp.clone());
            }
            push_line(
                &mut out,
                side_line(at, record).as_ref().unwrap_or(&record.value),
            )?;
        }
        if is_replacement(message) {
            continue;
        }
        for line in message_lines(message, &mut timestamp) {
            push_line(&mut out, &line)?;
        }
    }
    for (at, record) in side {
        push_line(
            &mut out,
            side_line(at, record).as_ref().unwrap_or(&record.value),
        )?;
    }
    Ok(out)
}

/// The items of the last compaction's history that are still in the conversation, each with
/// its index in the line's `replacement_history`, written as items again.
fn replacement_history(conversation: &Conversation) -> Vec<(usize, Value)> {
    conversation
        .messages
        .iter()
        .filter_map(|message| {
            let index = message.wire.first()?.fields.get(REPLACEMENT)?.as_u64()?;
            let item = message_lines(message, &mut None)
                .into_iter()
                .next()?
                .get_mut("payload")?
                .take();
            Some((usize::try_from(index).ok()?, item))
        })
        .collect()
}

/// The `compacted` line `value` with `history` in place of its replacement history, and the
/// metadata of the items kept; `None` when the line has no such history.
fn with_history(value: &Value, history: &[(usize, Value)]) -> Option<Value> {
    let mut line = value.clone();
    let payload = line.get_mut("payload")?.as_object_mut()?;
    let original = payload.get("replacement_history")?.as_array()?.len();
    payload.insert(
        "replacement_history".into(),
        Value::Array(history.iter().map(|(_, item)| item.clone()).collect()),
    );
    if let Some(Value::Array(metadata)) = payload.get_mut("replacement_history_metadata")
        && metadata.len() == original
    {
        let kept = history
            .iter()
            .filter_map(|(index, _)| metadata.get(*index).cloned())
            .collect();
        *metadata = kept;
    }
    Some(line)
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
    // condense's summary speaks as the person's message, as Codex's own compaction leaves its
    // summary: in the `developer` role, what it quotes of tool outputs would carry the
    // instructions' authority in every request of the resumed session.
    if message.is_summary_written_here() {
        item_message.role = condense_core::Role::User;
    }
    item_message.wire = match message.wire.first() {
        Some(record) => vec![WireRecord {
            fields: item_fields,
            parts: record.parts,
            shape: record.shape,
        }],
        None => Vec::new(),
    };
    let mut items = Vec::with_capacity(1);
    responses::write_message(&item_message, None, &mut items);
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
/// (it drops `system` messages when it resumes a session, so another message condense made at
/// that level goes in as `developer`, the role of its own instructions; a summary is the
/// user's, [`message_lines`]). Other items go as they are.
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
