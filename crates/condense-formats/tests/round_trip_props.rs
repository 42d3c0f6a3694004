//! Generated conversations: whatever the model holds, an OpenAI or Anthropic writer's output reads
//! back to the same model, and no input, however broken, makes a reader panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_core::testing::{tool_call, tool_result};
use condense_core::{Conversation, Message, Part, Role, ToolCall};
use condense_formats::{Format, read, write};
use proptest::prelude::*;
use serde_json::json;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![".{0,40}", "[a-z ]{0,12}", Just(String::new()), "\\PC{0,20}"]
}

/// An assistant step: what it said and the (command, output) of each tool call it made.
type Step = (String, Vec<(String, String)>);
/// A person's message and the assistant's steps after it.
type Turn = (String, Vec<Step>);

/// A conversation of turns: a person's message, then assistant steps that call tools and get
/// their results, in the shape every wire format can express.
fn conversation() -> impl Strategy<Value = Vec<Turn>> {
    prop::collection::vec(
        (
            text(),
            prop::collection::vec(
                (text(), prop::collection::vec((text(), text()), 0..3)),
                0..3,
            ),
        ),
        0..4,
    )
}

fn build(turns: &[Turn], tool_role: Role) -> Conversation {
    let mut messages = vec![Message::text(Role::System, "be helpful")];
    let mut next_id = 0;
    for (person, steps) in turns {
        messages.push(Message::text(Role::User, person.clone()));
        for (said, calls) in steps {
            let mut parts = vec![Part::text(said.clone())];
            let mut results = Vec::new();
            for (command, output) in calls {
                next_id += 1;
                let id = format!("call_{next_id}");
                parts.push(tool_call(id.clone(), "bash", json!({ "command": command })));
                results.push(tool_result(id, output.clone()));
            }
            messages.push(Message::new(Role::Assistant, parts));
            if tool_role == Role::Tool {
                messages.extend(
                    results
                        .into_iter()
                        .map(|r| Message::new(Role::Tool, vec![r])),
                );
            } else if !results.is_empty() {
                messages.push(Message::new(Role::User, results));
            }
        }
    }
    Conversation::new(messages)
}

/// The places in a written request body where a strict chat template (Gemma's, Mistral's)
/// refuses its roles: a first message (after the instructions) not the person's, a system-level
/// message after that, and two messages of one role in a row (tool results aside, where they
/// have a role of their own).
fn breaks(format: Format, bytes: &[u8]) -> usize {
    let value: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    // A Chat Completions conversation without a body is a bare list.
    let list = match format {
        Format::Responses => &value["input"],
        _ => value.get("messages").unwrap_or(&value),
    };
    let roles: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| message["role"].as_str())
        .filter(|role| !matches!(*role, "tool" | "function"))
        .collect();
    let start = usize::from(matches!(roles.first(), Some(&("system" | "developer"))));
    let roles = &roles[start..];
    usize::from(roles.first().is_some_and(|role| *role != "user"))
        + roles
            .iter()
            .filter(|role| matches!(**role, "system" | "developer"))
            .count()
        + roles.windows(2).filter(|pair| pair[0] == pair[1]).count()
}

/// What survives a write and a read: roles, and the parts with wire-only details cleared.
fn essence(conversation: &Conversation) -> Vec<(Role, Vec<Part>)> {
    conversation
        .messages
        .iter()
        .map(|message| {
            let parts = message
                .parts
                .iter()
                .map(|part| match part {
                    Part::ToolCall(call) => Part::ToolCall(ToolCall {
                        raw_input: None,
                        ..call.clone()
                    }),
                    // The type Responses names text by (`input_text`) is kept with a part
                    // read from a list of parts.
                    Part::Text(text) => {
                        let mut text = text.clone();
                        text.extra.shift_remove("type");
                        Part::Text(text)
                    }
                    other => other.clone(),
                })
                .collect();
            (message.role, parts)
        })
        .collect()
}

proptest! {
    #[test]
    fn openai_written_conversations_read_back_the_same(turns in conversation()) {
        let conversation = build(&turns, Role::Tool);
        let bytes = write(Format::OpenAi, &conversation).unwrap();
        let (_, back) = read(&bytes, Some(Format::OpenAi)).unwrap();
        prop_assert_eq!(essence(&back), essence(&conversation));
        prop_assert!(back.validate().is_empty());
    }

    #[test]
    fn anthropic_written_conversations_read_back_the_same(turns in conversation()) {
        let conversation = build(&turns, Role::User);
        let bytes = write(Format::Anthropic, &conversation).unwrap();
        let (_, back) = read(&bytes, Some(Format::Anthropic)).unwrap();
        prop_assert_eq!(essence(&back), essence(&conversation));
    }

    #[test]
    fn claude_code_written_conversations_read_back_the_same(turns in conversation()) {
        let mut conversation = build(&turns, Role::User);
        conversation.messages.remove(0); // Claude Code logs carry no system prompt.
        let bytes = write(Format::ClaudeCode, &conversation).unwrap();
        if conversation.messages.is_empty() {
            prop_assert!(bytes.is_empty());
        } else {
            let (_, back) = read(&bytes, Some(Format::ClaudeCode)).unwrap();
            prop_assert_eq!(essence(&back), essence(&conversation));
        }
    }

    /// condense's summary, where a compaction puts it (after the system prompt, the run's task
    /// kept in front of it or not), adds nothing a strict chat template refuses to any request
    /// body it is written into; read back, it is one summary beside the client's messages as
    /// they were, and written again, the same bytes.
    #[test]
    fn a_summary_written_into_a_request_adds_no_break_and_reads_back_out(
        turns in conversation(),
        keep_task in any::<bool>(),
        format in prop_oneof![Just(Format::OpenAi), Just(Format::Responses), Just(Format::Anthropic)],
    ) {
        let tool_role = if format == Format::Anthropic { Role::User } else { Role::Tool };
        let mut conversation = build(&turns, tool_role);
        let task = conversation.messages.get(1).is_some_and(Message::is_user_turn);
        let at = if keep_task && task { 2 } else { 1 };
        // Alone at the end, a summary stands at the instructions' level; and a person's message
        // after the task joins it only with text to join. Neither is this property's.
        let Some(next) = conversation.messages.get(at) else {
            return Ok(());
        };
        if next.role == Role::User && next.plain_text().is_empty() {
            return Ok(());
        }
        let without = write(format, &conversation).unwrap();
        let summary = format!(
            "{}\nwork so far\n{}\n\nContinue.",
            condense_core::SUMMARY_OPEN,
            condense_core::SUMMARY_CLOSE
        );
        conversation.messages.insert(at, Message::text(Role::System, summary));
        let with = write(format, &conversation).unwrap();
        prop_assert!(breaks(format, &with) <= breaks(format, &without));
        let (_, back) = read(&with, Some(format)).unwrap();
        let summaries = |conversation: &Conversation| {
            conversation.messages.iter().filter(|m| m.is_compaction_summary()).count()
        };
        prop_assert_eq!(summaries(&back), 1);
        // The client's messages, without the `cache_control` mark an Anthropic writer puts on
        // a task kept in front of a summary.
        let theirs = |conversation: &Conversation| {
            let mut messages: Vec<Message> = conversation
                .messages
                .iter()
                .filter(|m| !m.is_compaction_summary())
                .cloned()
                .collect();
            for part in messages.iter_mut().flat_map(|m| m.parts.iter_mut()) {
                if let Part::Text(text) = part {
                    text.extra.shift_remove("cache_control");
                }
            }
            essence(&Conversation::new(messages))
        };
        // As the format reads them back without a summary (a Responses body parts an answer
        // into its items).
        let (_, plain) = read(&without, Some(format)).unwrap();
        prop_assert_eq!(theirs(&back), theirs(&plain));
        prop_assert_eq!(write(format, &back).unwrap(), with);
    }

    #[test]
    fn no_input_makes_a_reader_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        for format in [None, Some(Format::OpenAi), Some(Format::Anthropic), Some(Format::ClaudeCode)] {
            let _ = read(&bytes, format);
        }
    }

    #[test]
    fn no_json_shape_makes_a_reader_panic(value in json_value()) {
        let bytes = serde_json::to_vec(&value).unwrap();
        for format in [None, Some(Format::OpenAi), Some(Format::Anthropic), Some(Format::ClaudeCode)] {
            let _ = read(&bytes, format);
        }
    }
}

/// JSON built from the words the readers look for, so that near-miss shapes are common.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let key = prop_oneof![
        Just("role"),
        Just("content"),
        Just("messages"),
        Just("type"),
        Just("tool_calls"),
        Just("tool_call_id"),
        Just("function"),
        Just("arguments"),
        Just("id"),
        Just("name"),
        Just("text"),
        Just("tool_use_id"),
        Just("source"),
        Just("system"),
        Just("message"),
        Just("isSidechain"),
        Just("is_error"),
        Just("input")
    ];
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i32>().prop_map(serde_json::Value::from),
        prop_oneof![
            Just("user"),
            Just("assistant"),
            Just("tool"),
            Just("system"),
            Just("text"),
            Just("tool_use"),
            Just("tool_result"),
            Just("image"),
            Just("thinking"),
            Just("x")
        ]
        .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::vec((key.clone(), inner), 0..5).prop_map(|pairs| {
                serde_json::Value::Object(
                    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
                )
            }),
        ]
    })
}
