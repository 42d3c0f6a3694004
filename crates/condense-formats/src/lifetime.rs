//! How long the provider keeps a request's prompt cache, where the request says.
//!
//! A request after a longer pause is written to the cache whole whatever it holds, which makes
//! a compaction free of the rewrite it otherwise costs (`condense-compact`'s
//! `pays_at_a_cold_cache`). Anthropic's cache lives 5 minutes unless a breakpoint asks for an
//! hour (`cache_control: {"type": "ephemeral", "ttl": "1h"}`), and a longer lifetime must come
//! before a shorter one, so the conversation after the system prompt and tools lives no longer
//! than the shortest of theirs. OpenAI's lives 5 to 10 minutes idle unless the request asks for
//! `prompt_cache_retention: "24h"`.

use condense_core::{Conversation, Part};
use serde_json::Value;

/// Minutes in Anthropic's `"1h"` lifetime.
const HOUR: u64 = 60;
/// Minutes in Anthropic's default lifetime (a breakpoint without `ttl`, or `"5m"`).
const FIVE_MINUTES: u64 = 5;
/// Minutes in OpenAI's extended retention (`"24h"`).
const DAY: u64 = 24 * 60;

/// The cache lifetime, in minutes, that `conversation`'s request asks for: OpenAI's
/// `prompt_cache_retention = "24h"`, or the shortest `ttl` of an Anthropic request's cache
/// breakpoints (its tools', its system prompt's, its messages'). `None` where it names none (the
/// caller's configured lifetime stands), including a Claude Code log, which records no request
/// body.
pub fn cache_lifetime_minutes(conversation: &Conversation) -> Option<u64> {
    let envelope = conversation.envelope.as_ref();
    if envelope
        .and_then(|envelope| envelope.get("prompt_cache_retention"))
        .and_then(Value::as_str)
        == Some("24h")
    {
        return Some(DAY);
    }
    let tools = envelope
        .and_then(|envelope| envelope.get("tools"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|tool| tool.get("cache_control"));
    let parts = conversation
        .messages
        .iter()
        .flat_map(|message| &message.parts)
        .filter_map(breakpoint);
    tools.chain(parts).map(minutes).min()
}

/// A part's `cache_control`, where it carries one.
fn breakpoint(part: &Part) -> Option<&Value> {
    let extra = match part {
        Part::Text(text) => &text.extra,
        Part::ToolCall(call) => &call.extra,
        Part::ToolResult(result) => &result.extra,
        Part::Image(image) => &image.extra,
        Part::Thinking(thinking) => &thinking.extra,
        Part::Opaque { value } => return value.get("cache_control"),
    };
    extra.get("cache_control")
}

/// A breakpoint's lifetime: an hour where it asks for one, else Anthropic's default.
fn minutes(control: &Value) -> u64 {
    match control.get("ttl").and_then(Value::as_str) {
        Some("1h") => HOUR,
        _ => FIVE_MINUTES,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The conversation of an Anthropic request body.
    fn read(body: Value) -> Conversation {
        crate::read_json(crate::Format::Anthropic, body).unwrap()
    }

    #[test]
    fn the_request_names_its_lifetime_or_leaves_it_to_the_configuration() {
        let block =
            |control: Value| json!([{"type": "text", "text": "You are", "cache_control": control}]);
        let hour = json!({"type": "ephemeral", "ttl": "1h"});
        let five = json!({"type": "ephemeral"});
        let request = |system: Value, tools: Value, last: Value| {
            read(json!({
                "model": "claude-sonnet-4",
                "max_tokens": 1024,
                "system": system,
                "tools": tools,
                "messages": [{"role": "user", "content": last}],
            }))
        };
        let tool = |control: Value| json!([{"name": "Read", "input_schema": {}, "cache_control": control}]);
        assert_eq!(
            cache_lifetime_minutes(&request(
                block(hour.clone()),
                tool(hour.clone()),
                block(hour.clone())
            )),
            Some(60)
        );
        assert_eq!(
            cache_lifetime_minutes(&request(block(five.clone()), json!([]), json!("Hi"))),
            Some(5)
        );
        // The conversation lives no longer than its shortest breakpoint.
        assert_eq!(
            cache_lifetime_minutes(&request(block(hour.clone()), tool(hour), block(five))),
            Some(5)
        );
        // No breakpoint at all: the configuration's.
        assert_eq!(
            cache_lifetime_minutes(&request(json!("You are"), json!([]), json!("Hi"))),
            None
        );
        let chat = |body: Value| crate::read_json(crate::Format::OpenAi, body).unwrap();
        let messages = json!([{"role": "user", "content": "Hi"}]);
        assert_eq!(
            cache_lifetime_minutes(&chat(
                json!({"model": "gpt-5", "prompt_cache_retention": "24h", "messages": messages})
            )),
            Some(24 * 60)
        );
        assert_eq!(
            cache_lifetime_minutes(&chat(
                json!({"model": "gpt-5", "prompt_cache_retention": "in_memory", "messages": messages})
            )),
            None
        );
        assert_eq!(cache_lifetime_minutes(&Conversation::new(Vec::new())), None);
    }
}
