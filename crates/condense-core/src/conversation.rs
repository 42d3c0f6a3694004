use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{JsonMap, Message, ToolPairs};

/// What a wire record that is not part of the main thread is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideKind {
    /// A subagent's line (Claude Code's `isSidechain: true`): never mixed into the main thread.
    Sidechain,
    /// A session title line (Claude Code's `type: summary`).
    Summary,
    /// A notice from the client (Claude Code's `type: system`).
    System,
    /// Anything else the reader did not recognise.
    Other,
}

/// A wire record kept beside the conversation so that writing the session back loses nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideRecord {
    /// What kind of record it is.
    pub kind: SideKind,
    /// How many main-thread messages came before this record on the wire; a writer puts it back
    /// at that point.
    pub before_message: usize,
    /// The record as it came, written back unchanged.
    pub value: Value,
}

/// A session: the main thread as messages, plus what a writer needs to put it back on the wire.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Conversation {
    /// The messages, in order.
    pub messages: Vec<Message>,
    /// The top-level object the messages were found in, without them (OpenAI's other keys,
    /// Anthropic's `model` and `max_tokens`). `None` when the file was a bare array of messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<JsonMap>,
    /// Records that are not main-thread messages: sidechains, titles, client notices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub side: Vec<SideRecord>,
}

impl Conversation {
    /// A conversation of these messages, with no envelope or side records.
    pub fn new(messages: Vec<Message>) -> Self {
        Conversation {
            messages,
            envelope: None,
            side: Vec::new(),
        }
    }

    /// How many messages it has.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether it has no message.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Indices of the messages that are user turns, oldest first.
    pub fn user_turns(&self) -> Vec<usize> {
        crate::user_turns(&self.messages)
    }

    /// The index of calls and results by id.
    pub fn tool_pairs(&self) -> ToolPairs<'_> {
        ToolPairs::index(&self.messages)
    }

    /// Every problem with the conversation's tool pairs, each with the message it is in.
    pub fn validate(&self) -> Vec<crate::Finding> {
        crate::validate(&self.messages)
    }

    /// The provider's accounting that a log keeps beside the messages, one per request, in
    /// order: Codex writes a `token_usage_record` line after each response (Codex 0.169), or,
    /// in logs without those, an `event_msg` `token_count` with the `last_token_usage`. (Claude
    /// Code's is on the assistant line itself, `message.usage`.)
    pub fn logged_usage(&self) -> Vec<LoggedUsage> {
        let read = |kind: &str| -> Vec<LoggedUsage> {
            self.side
                .iter()
                .filter_map(|record| {
                    let value = &record.value;
                    let usage = match value.get("type")?.as_str()? {
                        "token_usage_record" if kind == "token_usage_record" => {
                            value.get("payload")?.get("usage")?
                        }
                        "event_msg"
                            if kind == "token_count"
                                && value["payload"]["type"] == "token_count" =>
                        {
                            value.get("payload")?.get("info")?.get("last_token_usage")?
                        }
                        _ => return None,
                    };
                    let field = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
                    let answer = self.messages[..record.before_message.min(self.messages.len())]
                        .iter()
                        .rposition(|message| message.role == crate::Role::Assistant)?;
                    Some(LoggedUsage {
                        answer,
                        input: field("input_tokens"),
                        cache_read: field("cached_input_tokens"),
                        cache_write: field("cache_write_input_tokens"),
                        output: field("output_tokens"),
                    })
                })
                .filter(|usage| usage.input > 0)
                .collect()
        };
        let records = read("token_usage_record");
        if records.is_empty() {
            read("token_count")
        } else {
            records
        }
    }
}

/// One request's accounting as a log kept it beside the messages (OpenAI's terms: `input`
/// includes what was read from the cache and written to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedUsage {
    /// The last message of the answer it accounts for: the last assistant message before it.
    pub answer: usize,
    /// All the input the provider counted.
    pub input: u64,
    /// Of the input, what was read from the provider's cache.
    pub cache_read: u64,
    /// Of the input, what was written to the cache.
    pub cache_write: u64,
    /// The answer's tokens.
    pub output: u64,
}
