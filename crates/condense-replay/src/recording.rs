//! The requests a harness made, read back from its saved session.
//!
//! Every assistant message (or run of them: a Responses answer is several items) is the answer
//! to one request, and that request's input was everything before it. Claude Code logs add the time of every line and the provider's own accounting of
//! every request (`message.usage`, one per `message.id`: the reader already merged the lines of
//! one reply into one message, so one message carries one usage); Codex logs the time of every
//! line and a usage record after each answer.

use condense_core::{Conversation, Message, Role};
use serde::Serialize;
use serde_json::Value;

/// The wire fields of a record that the replay and its policies read (`cwd`: condense's
/// superseded-read rule resolves relative paths with it).
const KEPT_FIELDS: &[&str] = &[
    "type",
    "timestamp",
    "cwd",
    "message",
    "isMeta",
    "isSidechain",
    "isCompactSummary",
];

/// One request of the recorded session: the assistant message (or messages) it produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The index of the assistant message that answered it; its input was the messages before.
    pub answer: usize,
    /// The end (exclusive) of its answer: one message, or the run of assistant messages one
    /// answer became (a Responses answer is a list of items: reasoning, a message, calls, each
    /// read as a message of its own).
    pub answer_end: usize,
    /// When it was sent, in milliseconds since the epoch: the time of the last message of its
    /// input (the tool result or the person's message that prompted it), else of the answer.
    /// `None` when the format records no time (the cache then never expires between requests).
    pub time_ms: Option<u64>,
    /// What the provider reported for it, where the log has it.
    pub recorded: Option<RecordedUsage>,
    /// The model that answered, where the log names it (`message.model`). A provider keeps one
    /// cache per model, so a switch (Claude Code falls back from Opus to Sonnet) starts cold.
    pub model: Option<String>,
}

/// The provider's accounting of one request (Anthropic's `usage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RecordedUsage {
    /// `input_tokens`: input after the last cache breakpoint, at the full price.
    pub uncached: u64,
    /// `cache_creation_input_tokens`.
    pub cache_write: u64,
    /// `cache_read_input_tokens`.
    pub cache_read: u64,
    /// `output_tokens`.
    pub output: u64,
}

impl RecordedUsage {
    /// All the input the provider counted.
    pub fn input(&self) -> u64 {
        self.uncached + self.cache_write + self.cache_read
    }

    fn of(message: &Message) -> Option<RecordedUsage> {
        let usage = message
            .wire
            .iter()
            .rev()
            .find_map(|record| record.fields.get("message")?.get("usage"))?;
        let field = |name: &str| usage.get(name).and_then(Value::as_u64);
        let recorded = RecordedUsage {
            uncached: field("input_tokens")?,
            cache_write: field("cache_creation_input_tokens").unwrap_or(0),
            cache_read: field("cache_read_input_tokens").unwrap_or(0),
            output: field("output_tokens").unwrap_or(0),
        };
        (recorded.input() > 0).then_some(recorded)
    }
}

/// The provider's accounting of each request that a log keeps beside the messages (Codex's,
/// [`condense_formats::logged_usage`]), by the index of the first message of the answer it
/// accounts for. OpenAI counts cached tokens inside `input_tokens`; here they are taken out, as
/// Anthropic's accounting has them.
fn logged_usage(conversation: &Conversation) -> std::collections::HashMap<usize, RecordedUsage> {
    let messages = &conversation.messages;
    let mut usage = std::collections::HashMap::new();
    for logged in condense_formats::logged_usage(conversation) {
        let mut first = logged.answer;
        while first > 0 && messages[first - 1].role == Role::Assistant {
            first -= 1;
        }
        usage.entry(first).or_insert(RecordedUsage {
            uncached: logged
                .input
                .saturating_sub(logged.cache_read + logged.cache_write),
            cache_write: logged.cache_write,
            cache_read: logged.cache_read,
            output: logged.output,
        });
    }
    usage
}

/// A saved session and the requests that made it.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The session as read.
    pub conversation: Conversation,
    /// Its requests, in order.
    pub steps: Vec<Step>,
}

impl Recording {
    /// The requests of `conversation`: one per run of assistant messages that has something
    /// before it. A run is one answer, unless a later message in it carries the provider's own
    /// accounting of another request (Claude Code logs one usage per request).
    ///
    /// Each message's wire records keep only what a policy reads (the time, the provider's
    /// usage and model, the harness's own flags): every policy copies the history for every
    /// request, and a Claude Code line's other fields (a second copy of each tool result in
    /// `toolUseResult`, ids, paths) would be copied hundreds of times for nothing.
    pub fn of(mut conversation: Conversation) -> Recording {
        for message in &mut conversation.messages {
            for record in &mut message.wire {
                record
                    .fields
                    .retain(|key, _| KEPT_FIELDS.contains(&key.as_str()));
            }
        }
        let logged = logged_usage(&conversation);
        let messages = &conversation.messages;
        let mut steps: Vec<Step> = Vec::new();
        for (answer, message) in messages.iter().enumerate().skip(1) {
            if message.role != Role::Assistant {
                continue;
            }
            let recorded = RecordedUsage::of(message).or_else(|| logged.get(&answer).copied());
            if let Some(last) = steps.last_mut()
                && last.answer_end == answer
                && recorded.is_none()
            {
                last.answer_end = answer + 1;
                continue;
            }
            steps.push(Step {
                answer,
                answer_end: answer + 1,
                time_ms: messages[answer - 1]
                    .timestamp_ms()
                    .or_else(|| message.timestamp_ms()),
                recorded,
                model: message
                    .wire
                    .iter()
                    .rev()
                    .find_map(|record| record.fields.get("message")?.get("model")?.as_str())
                    .map(str::to_owned),
            });
        }
        Recording {
            conversation,
            steps,
        }
    }

    /// The steps that carry the provider's accounting.
    pub fn recorded_steps(&self) -> usize {
        self.steps
            .iter()
            .filter(|step| step.recorded.is_some())
            .count()
    }
}
