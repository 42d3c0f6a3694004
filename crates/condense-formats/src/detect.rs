//! Telling the formats apart from their content.
//!
//! Claude Code and Codex logs are JSONL whose lines carry a `type` (a Codex line's is one of its
//! own, around a `payload`; a Claude Code log's first message line may follow lines of other
//! kinds). A Responses body has an `input` list.
//! OpenAI Chat Completions and Anthropic bodies are both `messages` lists; OpenAI is recognised by what only it has (`system`/`tool`/`developer` roles,
//! `tool_calls`), Anthropic by what only it has (a top-level `system`, typed tool and thinking
//! blocks). A plain-text chat that has neither reads the same either way, and is read as OpenAI.

use serde_json::Value;

use crate::{Format, FormatError, text};

const SESSION_LINE_TYPES: [&str; 4] = ["user", "assistant", "summary", "system"];

/// The format of `bytes`, without building a conversation.
pub fn detect(bytes: &[u8]) -> Result<Format, FormatError> {
    let input = text::utf8(bytes)?;
    if input.trim().is_empty() {
        return Err(FormatError::Empty);
    }
    if let Some(format) = jsonl_format(input) {
        return Ok(format);
    }
    let value: Value = serde_json::from_str(input).map_err(|error| FormatError::json(&error))?;
    detect_value(&value)
}

/// How many leading lines of a log detection reads for one that tells its format: a Claude Code
/// log can open with lines of other kinds (queue operations, file-history snapshots, titles)
/// before its first message.
const LINES_TO_DECIDE: usize = 64;

/// The log format of `input` when it is several non-empty lines, the first of which is a log
/// record (an object with a `type`, not a request body), and one of the first
/// [`LINES_TO_DECIDE`] tells whose log it is. A Claude Code log none of whose first lines does
/// is still known by the `sessionId` its lines carry.
pub(crate) fn jsonl_format(input: &str) -> Option<Format> {
    let mut lines = input.lines().filter(|line| !line.trim().is_empty());
    let first: Value = serde_json::from_str(lines.next()?).ok()?;
    let Value::Object(object) = &first else {
        return None;
    };
    if object.contains_key("messages") || !object.get("type").is_some_and(Value::is_string) {
        return None;
    }
    let mut rest = lines.peekable();
    rest.peek()?;
    session_record_format(&first)
        .or_else(|| {
            rest.take(LINES_TO_DECIDE)
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .find_map(|value| session_record_format(&value))
        })
        .or_else(|| first.get("sessionId").map(|_| Format::ClaudeCode))
}

/// Claude Code's or Codex's, when `value` is a line of its log.
fn session_record_format(value: &Value) -> Option<Format> {
    let Value::Object(object) = value else {
        return None;
    };
    if object.contains_key("messages") {
        return None;
    }
    let kind = object.get("type").and_then(Value::as_str)?;
    if SESSION_LINE_TYPES.contains(&kind) {
        Some(Format::ClaudeCode)
    } else if crate::codex::LINE_TYPES.contains(&kind) && object.get("payload").is_some() {
        Some(Format::Codex)
    } else {
        None
    }
}

pub(crate) fn detect_value(value: &Value) -> Result<Format, FormatError> {
    match value {
        Value::Array(messages) => Ok(openai_or_anthropic(messages, false)),
        Value::Object(object) => match object.get("messages") {
            Some(Value::Array(messages)) => {
                Ok(openai_or_anthropic(messages, object.contains_key("system")))
            }
            _ if is_responses(object) => Ok(Format::Responses),
            _ => match session_record_format(value) {
                Some(format) => Ok(format),
                None => Err(FormatError::Unrecognized(
                    "an object with no `messages` list".into(),
                )),
            },
        },
        other => Err(FormatError::Unrecognized(format!(
            "the document is {}",
            crate::blocks::kind_of(other)
        ))),
    }
}

/// A Responses request body: an `input` list and no `messages` (only the Responses API has
/// `input`).
fn is_responses(object: &serde_json::Map<String, Value>) -> bool {
    matches!(object.get("input"), Some(Value::Array(_))) && !object.contains_key("messages")
}

fn openai_or_anthropic(messages: &[Value], has_system_key: bool) -> Format {
    evidence(messages, has_system_key).unwrap_or(Format::OpenAi)
}

/// The format `bytes` can only be, or `None` when they could be read as more than one (a plain
/// text chat) or are not a session at all. A caller that was told the format checks it against
/// this: a forced format the content contradicts would be read wrong.
pub fn detect_confidently(bytes: &[u8]) -> Option<Format> {
    let input = text::utf8(bytes).ok()?;
    if let Some(format) = jsonl_format(input) {
        return Some(format);
    }
    let value: Value = serde_json::from_str(input).ok()?;
    match &value {
        Value::Array(messages) => evidence(messages, false),
        Value::Object(object) => match object.get("messages") {
            Some(Value::Array(messages)) => evidence(messages, object.contains_key("system")),
            _ if is_responses(object) => Some(Format::Responses),
            _ => session_record_format(&value),
        },
        _ => None,
    }
}

/// What only one of the two formats has: OpenAI's roles and tool fields, Anthropic's top-level
/// `system` and typed blocks.
fn evidence(messages: &[Value], has_system_key: bool) -> Option<Format> {
    // Only Anthropic's bodies have a top-level `system`; their messages may then be `system`
    // ones too (Claude Code 2 sends some), which alone would look like OpenAI's.
    if has_system_key {
        return Some(Format::Anthropic);
    }
    let mut anthropic = false;
    for message in messages {
        let role = message.get("role").and_then(Value::as_str);
        if matches!(role, Some("system" | "tool" | "developer"))
            || message.get("tool_calls").is_some()
            || message.get("tool_call_id").is_some()
        {
            return Some(Format::OpenAi);
        }
        if let Some(Value::Array(blocks)) = message.get("content") {
            anthropic |= blocks.iter().any(|block| {
                matches!(
                    block.get("type").and_then(Value::as_str),
                    Some("tool_use" | "tool_result" | "thinking" | "redacted_thinking")
                ) || (block.get("type").and_then(Value::as_str) == Some("image")
                    && block.get("source").is_some())
            });
        }
    }
    anthropic.then_some(Format::Anthropic)
}
