//! The provider's own accounting of each request, where a session log keeps it: Claude Code on
//! the assistant line itself (`message.usage`, Anthropic's terms), Codex on a line of its own
//! after each response (`token_usage_record`, OpenAI's terms; `token_count` events in older
//! logs). Read here once, in one shape, for the trigger's calibration and for replays.

use condense_core::{Conversation, Role, SideKind};
use serde_json::Value;

/// One request's accounting as a log kept it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedUsage {
    /// The last message of the answer it accounts for: the assistant message that carries it
    /// (Claude Code), or the last assistant message before the line that holds it (Codex).
    pub answer: usize,
    /// The first message of that answer: a Responses answer is several items (reasoning, text,
    /// calls), each read as a message, and Codex accounts for them together; Claude Code's
    /// is for its one message (the lines of one reply that follow each other are read as one),
    /// or for the messages of one reply whose calls' results came between its lines, from the
    /// first of them.
    pub first: usize,
    /// All the input the provider counted, what was read from and written to its cache
    /// included.
    pub input: u64,
    /// Of the input, what was read from the provider's cache.
    pub cache_read: u64,
    /// Of the input, what was written to the cache.
    pub cache_write: u64,
    /// The answer's tokens.
    pub output: u64,
}

impl LoggedUsage {
    /// The input at the full price: neither read from the cache nor written to it (Anthropic's
    /// `input_tokens`).
    pub fn uncached(&self) -> u64 {
        self.input
            .saturating_sub(self.cache_read.saturating_add(self.cache_write))
    }
}

/// Every request's accounting that the log of `conversation` keeps, in the order of the
/// answers; empty for a conversation whose format keeps none (request bodies). A request that
/// reports no input is left out: no provider answers one, so the figure is not one.
pub fn logged_usage(conversation: &Conversation) -> Vec<LoggedUsage> {
    let mut usage: Vec<LoggedUsage> = on_messages(conversation)
        .into_iter()
        .chain(beside_messages(conversation))
        .filter(|usage| usage.input > 0)
        .collect();
    usage.sort_by_key(|usage| usage.answer);
    usage
}

/// Anthropic's `usage` on the lines of each reply (Claude Code's), once a reply: a reply over
/// several lines carries its usage on each, and the last is complete. Its lines read as one
/// message where they follow each other; where its calls' results come between them (Claude
/// Code 2 writes each call of a reply, then its result), they read as several messages that
/// share the reply's id ([`crate::reply_id`]), and the usage is theirs together: `first` the
/// first of them, `answer` the last.
fn on_messages(conversation: &Conversation) -> Vec<LoggedUsage> {
    let mut usage: Vec<LoggedUsage> = Vec::new();
    // The reply the last assistant message was part of: its id, its first message, and its
    // usage's place in `usage` once one of its lines reported one.
    let mut open: Option<(&str, usize, Option<usize>)> = None;
    for (index, message) in conversation.messages.iter().enumerate() {
        if message.role != Role::Assistant {
            continue;
        }
        let reported = message
            .wire
            .iter()
            .rev()
            .find_map(|record| record.fields.get("message")?.get("usage"));
        let reply = crate::reply_id(message);
        let (first, at) = match open {
            Some((id, first, at)) if reply == Some(id) => (first, at),
            _ => (index, None),
        };
        let at = match (at, reported) {
            (Some(at), Some(reported)) => {
                usage[at] = LoggedUsage {
                    first,
                    ..anthropic_usage(reported, index)
                };
                Some(at)
            }
            (Some(at), None) => {
                usage[at].answer = index;
                Some(at)
            }
            (None, Some(reported)) => {
                usage.push(LoggedUsage {
                    first,
                    ..anthropic_usage(reported, index)
                });
                Some(usage.len() - 1)
            }
            (None, None) => None,
        };
        open = reply.map(|id| (id, first, at));
    }
    usage
}

/// Anthropic's `usage` object, for the answer at `answer`.
fn anthropic_usage(usage: &Value, answer: usize) -> LoggedUsage {
    let field = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
    let cache_read = field("cache_read_input_tokens");
    let cache_write = field("cache_creation_input_tokens");
    LoggedUsage {
        answer,
        first: answer,
        input: field("input_tokens") + cache_read + cache_write,
        cache_read,
        cache_write,
        output: field("output_tokens"),
    }
}

/// Where a request that a log accounts for ran, when not in the session's main thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SideThread {
    /// A subagent's (Claude Code's `isSidechain` lines): its own context, not the session's.
    Subagent,
    /// A branch the person left (rewound, or ran a command from an earlier point): paid for,
    /// but no longer part of what the session sends.
    LeftBranch,
}

/// The accounting of the requests a log keeps beside its main thread, one per reply (the
/// lines of one `message.id` carry its usage each; the last is complete), in the order of the
/// log, `answer` and `first` being the main-thread message the reply's line came before.
///
/// Meant for a log read whole ([`crate::read_whole`]): read as the model sees it, the history
/// before the harness's own compaction is beside the conversation too, and its replies would
/// count as a branch left.
pub fn side_usage(conversation: &Conversation) -> Vec<(SideThread, LoggedUsage)> {
    let mut usage: Vec<(SideThread, LoggedUsage)> = Vec::new();
    let mut by_reply: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for record in &conversation.side {
        let value = &record.value;
        if value.get("type").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        let thread = match record.kind {
            SideKind::Sidechain => SideThread::Subagent,
            SideKind::Other => SideThread::LeftBranch,
            _ => continue,
        };
        let Some(reported) = value
            .get("message")
            .and_then(|message| message.get("usage"))
        else {
            continue;
        };
        let logged = anthropic_usage(reported, record.before_message);
        if logged.input == 0 {
            continue;
        }
        let reply = value
            .get("message")
            .and_then(|message| message.get("id"))
            .and_then(Value::as_str);
        match reply.and_then(|id| by_reply.get(id)) {
            Some(&at) => usage[at] = (thread, logged),
            None => {
                if let Some(id) = reply {
                    by_reply.insert(id, usage.len());
                }
                usage.push((thread, logged));
            }
        }
    }
    usage
}

/// The usage lines a Codex log keeps beside its messages: a `token_usage_record` after each
/// response (Codex 0.169), or, in logs without those, the `last_token_usage` of each
/// `token_count` event.
fn beside_messages(conversation: &Conversation) -> impl Iterator<Item = LoggedUsage> + '_ {
    let messages = &conversation.messages;
    let read = |kind: &'static str| {
        conversation.side.iter().filter_map(move |record| {
            let value = &record.value;
            let usage = match value.get("type")?.as_str()? {
                "token_usage_record" if kind == "token_usage_record" => {
                    value.get("payload")?.get("usage")?
                }
                "event_msg"
                    if kind == "token_count" && value["payload"]["type"] == "token_count" =>
                {
                    value.get("payload")?.get("info")?.get("last_token_usage")?
                }
                _ => return None,
            };
            let field = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
            let before = record.before_message.min(messages.len());
            let answer = messages[..before]
                .iter()
                .rposition(|message| message.role == Role::Assistant)?;
            let mut first = answer;
            while first > 0 && messages[first - 1].role == Role::Assistant {
                first -= 1;
            }
            Some(LoggedUsage {
                answer,
                first,
                input: field("input_tokens"),
                cache_read: field("cached_input_tokens"),
                cache_write: field("cache_write_input_tokens"),
                output: field("output_tokens"),
            })
        })
    };
    let has_records = conversation.side.iter().any(|record| {
        record.value.get("type").and_then(Value::as_str) == Some("token_usage_record")
    });
    read(if has_records {
        "token_usage_record"
    } else {
        "token_count"
    })
}
