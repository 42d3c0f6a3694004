//! Building conversations by hand for the rule tests.
#![allow(dead_code, clippy::unwrap_used)]

use condense_core::testing::{tool_call, tool_result};
use condense_core::{Message, Part, Role, ToolOutput};
use serde_json::json;

pub fn system(text: &str) -> Message {
    Message::text(Role::System, text)
}

pub fn user(text: &str) -> Message {
    Message::text(Role::User, text)
}

pub fn assistant(text: &str) -> Message {
    Message::text(Role::Assistant, text)
}

pub fn call(id: &str, tool: &str) -> Message {
    Message::new(Role::Assistant, vec![call_part(id, tool)])
}

pub fn call_part(id: &str, tool: &str) -> Part {
    tool_call(id, tool, json!({"path": format!("src/{id}.rs")}))
}

pub fn result_part(id: &str, output: &str) -> Part {
    tool_result(id, output)
}

pub fn result(id: &str, output: &str) -> Message {
    Message::new(Role::Tool, vec![result_part(id, output)])
}

/// Text of about `tokens` o200k tokens ("word " is one token).
pub fn words(tokens: usize, seed: &str) -> String {
    let mut text = format!("{seed}\n");
    for line in 0..tokens / 10 {
        text.push_str(&format!("line {line} of {seed} has some words in it\n"));
    }
    text
}

pub fn output_text(message: &Message) -> String {
    match &message
        .parts
        .iter()
        .find_map(Part::as_tool_result)
        .unwrap()
        .content
    {
        ToolOutput::Text(text) => text.clone(),
        ToolOutput::Parts(_) => panic!("not a text output"),
    }
}
