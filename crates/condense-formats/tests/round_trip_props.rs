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
