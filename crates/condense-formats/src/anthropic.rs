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
    assemble(body, messages).map(|(conversation, _)| conversation)
}

/// The conversation of a request whose `messages` are read already (`body` without them): its
/// `system` becomes the first message, the rest of the body the envelope; and whether
/// condense's summary was taken out of the message it was written into
/// ([`crate::placement::split_summaries`]), which changes the messages as read.
pub(crate) fn assemble(
    mut body: JsonMap,
    mut messages: Vec<Message>,
) -> Result<(Conversation, bool), FormatError> {
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
    let split = crate::placement::split_summaries(&mut messages);
    let conversation = Conversation {
        messages,
        envelope: Some(body),
        side: Vec::new(),
    };
    Ok((conversation, split))
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
    // A summary condense made is not the system prompt: it goes into the person's message
    // beside it, or is a user message of its own before the agent's answer
    // ([`crate::placement::placed`]), which also keeps the rule that a conversation starts with
    // the user when the tail starts with the assistant. A `system` the body came with stays
    // `system`, whatever its text starts with (one that opened with the summary marker once came
    // back as a user message).
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
    let placed = crate::placement::placed(rest, crate::placement::Joining::Blocks);
    let mut messages: Vec<Value> = placed
        .iter()
        .map(|message| message_to_value(message))
        .collect();
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
    match value {
        Value::Array(blocks) => marks_in(blocks),
        Value::Object(_) => marks_in(std::slice::from_ref(value)),
        _ => Vec::new(),
    }
}

/// The `cache_control` marks of `blocks`, in order, those of the blocks a tool result holds
/// among them.
fn marks_in(blocks: &[Value]) -> Vec<Value> {
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
/// outlive one before it), else its system prompt's, else the default five-minute one. The
/// summary is written into the task's message as a block of its own after the task's
/// ([`crate::placement::Joining::Blocks`]), so the mark goes on the block before it.
fn mark_the_task(body: &JsonMap, messages: &mut [Value]) {
    let Some((task, later)) = messages.split_first_mut() else {
        return;
    };
    let Some(content) = task.get_mut("content") else {
        return;
    };
    let blocks: &[Value] = content.as_array().map_or(&[], Vec::as_slice);
    // The task's blocks: those before the summary's, all of them where it has its own message.
    let end = blocks
        .iter()
        .position(|block| {
            block
                .get("text")
                .and_then(Value::as_str)
                .is_some_and(|text| text.starts_with(condense_core::SUMMARY_OPEN))
        })
        .unwrap_or(blocks.len());
    let own = marks_in(&blocks[..end]);
    let before: Vec<Value> = ["tools", "system"]
        .iter()
        .filter_map(|key| body.get(*key))
        .flat_map(marks)
        .collect();
    let after: Vec<Value> = marks_in(&blocks[end..])
        .into_iter()
        .chain(
            later
                .iter()
                .filter_map(|message| message.get("content"))
                .flat_map(marks),
        )
        .collect();
    if !own.is_empty() || before.len() + after.len() >= MOST_MARKS {
        return;
    }
    let mark = after
        .first()
        .or(before.last())
        .cloned()
        .unwrap_or_else(|| serde_json::json!({"type": "ephemeral"}));
    let end = match content {
        Value::String(text) => {
            *content = serde_json::json!([{"type": "text", "text": text}]);
            1
        }
        _ => end,
    };
    let last = end
        .checked_sub(1)
        .and_then(|at| content.as_array_mut()?.get_mut(at));
    if let Some(Value::Object(last)) = last {
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
        let (summary, _) = crate::placement::testing::summary();
        let compacted = |value: Value| {
            let mut conversation = from_value(value).unwrap();
            conversation
                .messages
                .insert(2, Message::text(Role::System, summary.clone()));
            to_value(&conversation)
        };
        // The summary is a block of its own after the task's, in the task's message; the mark
        // ends where the task does.
        let out = compacted(body(hour.clone(), 0));
        assert_eq!(
            out["messages"][0]["content"],
            serde_json::json!([{"type": "text", "text": "Fix the parser.", "cache_control": hour},
                {"type": "text", "text": summary}])
        );
        assert_eq!(out["messages"].as_array().unwrap().len(), 3);
        // Read back, the summary is condense's own again, and written again, the same bytes.
        let read = from_value(out.clone()).unwrap();
        assert_eq!(read.messages.len(), 5);
        assert!(read.messages[2].is_summary_written_here());
        assert!(read.messages[1].is_user_turn());
        assert_eq!(to_value(&read), out);
        // No client mark after it: the system prompt's.
        let unmarked = compacted(body(Value::Null, 0));
        assert_eq!(unmarked["messages"][0]["content"][0]["cache_control"], hour);
        // Four marks already (the system prompt's, two tools', the last message's): none added.
        let unmarked_task = serde_json::json!([{"type": "text", "text": "Fix the parser."},
            {"type": "text", "text": summary}]);
        let full = compacted(body(hour.clone(), 2));
        assert_eq!(full["messages"][0]["content"], unmarked_task);
        // A mark inside a tool result's blocks counts as well.
        let mut nested = body(hour.clone(), 1);
        nested["messages"][2]["content"] = serde_json::json!([{"type": "tool_result",
            "tool_use_id": "t1", "content": [{"type": "text", "text": "ok",
                "cache_control": {"type": "ephemeral"}}]},
            {"type": "text", "text": "go on", "cache_control": hour.clone()}]);
        let nested = compacted(nested);
        assert_eq!(nested["messages"][0]["content"], unmarked_task);
        // Without a summary after it, the body is the client's own.
        let plain = body(hour, 0);
        assert_eq!(to_value(&from_value(plain.clone()).unwrap()), plain);
    }

    /// condense's summary never stands as a second user message beside the person's: it goes
    /// before the text of the person's next request (a block of its own), the person's message
    /// that starts a tail joins the task it went into, and before the agent's answer it is a
    /// user message of its own; read back, it is condense's own again, the same bytes.
    #[test]
    fn a_summary_is_written_where_the_roles_still_alternate_and_read_back_out() {
        let (summary, continued) = crate::placement::testing::summary();
        let block = |text: &str| serde_json::json!({"type": "text", "text": text});
        for (messages, at, expected) in [
            // An interactive session: before the person's request.
            (
                serde_json::json!([{"role": "user", "content": "and now?"}]),
                1,
                serde_json::json!([{"role": "user", "content": [block(&summary), block("and now?")]}]),
            ),
            // A tail that starts with a message of the person's joins the task and the summary.
            (
                serde_json::json!([{"role": "user", "content": "fix it"},
                    {"role": "user", "content": [block("one step at a time")]},
                    {"role": "assistant", "content": [block("Looking.")]}]),
                2,
                // (The task marked for the cache, where it ends: before the summary.)
                serde_json::json!([{"role": "user", "content": [
                        {"type": "text", "text": "fix it", "cache_control": {"type": "ephemeral"}},
                        block(&summary), block("one step at a time")]},
                    {"role": "assistant", "content": [block("Looking.")]}]),
            ),
            // Before the agent's answer: a user message of its own.
            (
                serde_json::json!([{"role": "assistant", "content": [block("Looking.")]}]),
                1,
                serde_json::json!([{"role": "user", "content": [block(&summary)]},
                    {"role": "assistant", "content": [block("Looking.")]}]),
            ),
        ] {
            let body = serde_json::json!({"system": "Be terse.", "messages": messages});
            let mut conversation = from_value(body).unwrap();
            conversation
                .messages
                .insert(at, Message::text(Role::System, continued.clone()));
            let value = to_value(&conversation);
            assert_eq!(value["messages"], expected);
            let read = from_value(value.clone()).unwrap();
            assert_eq!(to_value(&read), value, "the same bytes again");
            assert!(read.messages.iter().any(Message::is_compaction_summary));
            assert!(
                !read
                    .messages
                    .iter()
                    .any(|m| m.is_user_turn() && m.is_compaction_summary())
            );
        }
    }

    /// A client that keeps condense's request as its history and marks the last block of a
    /// message for its cache (here the summary, written after the task) sends the summary back
    /// with a `cache_control` mark: read, it is still condense's summary, apart from the
    /// person's task, and not a request of the person's.
    #[test]
    fn a_summary_a_client_marked_for_its_cache_is_read_back_as_condense_s() {
        let (summary, _) = crate::placement::testing::summary();
        let body = serde_json::json!({"system": "Be terse.", "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "fix it"},
                {"type": "text", "text": summary, "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Looking."}]},
        ]});
        let read = from_value(body).unwrap();
        let summaries: Vec<&Message> = read
            .messages
            .iter()
            .filter(|message| message.is_compaction_summary())
            .collect();
        assert_eq!(summaries.len(), 1, "{:?}", read.messages);
        assert_eq!(summaries[0].role, Role::System);
        assert_eq!(summaries[0].plain_text(), summary);
        let task = read
            .messages
            .iter()
            .find(|message| message.is_user_turn())
            .unwrap();
        assert_eq!(task.plain_text(), "fix it");
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
