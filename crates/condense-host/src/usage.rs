//! What the conversation costs, as the trigger should see it.
//!
//! Another model family tokenizes differently: on one real Claude Code session o200k counts 79K
//! tokens of text where Anthropic reported 119K of input. When the provider's usage is known, the
//! trigger uses the last reported total plus the exact count of what came after it (as opencode,
//! pi and Codex do); otherwise the tokenizer's count. A reported figure that our count of the same
//! messages contradicts by more than a factor of two is stale and ignored.

use condense_core::{Conversation, Role};
use condense_tokenizer::TokenCounter;
use serde::Serialize;
use serde_json::Value;

use crate::state::ReportedUsage;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
/// How the trigger measured the conversation.
pub enum Measure {
    /// With condense's tokenizer.
    Tokenizer {
        /// The count.
        tokens: usize,
    },
    /// With the provider's own count from the session's last reported usage.
    ProviderUsage {
        /// The provider's count plus condense's count of what came after.
        tokens: usize,
        /// What the provider reported.
        reported: usize,
        /// The message that carried it.
        at_message: usize,
        /// Condense's count of the messages after it.
        counted_after: usize,
    },
}

impl Measure {
    /// The count the trigger uses.
    pub fn tokens(&self) -> usize {
        match self {
            Measure::Tokenizer { tokens } | Measure::ProviderUsage { tokens, .. } => *tokens,
        }
    }
}

pub(crate) fn measure(
    conversation: &Conversation,
    reported: Option<ReportedUsage>,
    counter: &dyn TokenCounter,
) -> Measure {
    let counts = counter.count_each(&conversation.messages);
    let usage = reported
        .filter(|usage| usage.message < conversation.messages.len())
        .or_else(|| last_reported(conversation))
        .filter(|usage| {
            let ours: usize = counts[..=usage.message].iter().sum();
            plausible(usage.tokens, ours)
        });
    match usage {
        Some(usage) => {
            let counted_after: usize = counts[usage.message + 1..].iter().sum();
            Measure::ProviderUsage {
                tokens: usage.tokens + counted_after,
                reported: usage.tokens,
                at_message: usage.message,
                counted_after,
            }
        }
        None => Measure::Tokenizer {
            tokens: counts.iter().sum::<usize>() + condense_tokenizer::overhead::REPLY_PRIMING,
        },
    }
}

/// A reported count more than twice ours (or under half) for the same messages is not a
/// tokenizer difference but a stale figure: the conversation was compacted since the provider
/// counted it (the tail keeps the messages, and their usage, from before).
fn plausible(reported: usize, ours: usize) -> bool {
    reported <= ours.saturating_mul(2) && reported.saturating_mul(2) >= ours
}

/// The last assistant message whose wire record carries Anthropic usage (`message.usage` on a
/// Claude Code line): input, cache reads and writes, and the reply itself.
fn last_reported(conversation: &Conversation) -> Option<ReportedUsage> {
    conversation
        .messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.role == Role::Assistant)
        .find_map(|(index, message)| {
            let usage = message
                .wire
                .iter()
                .rev()
                .find_map(|record| record.fields.get("message")?.get("usage"))?;
            let field = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
            let tokens = field("input_tokens")
                + field("cache_creation_input_tokens")
                + field("cache_read_input_tokens")
                + field("output_tokens");
            (tokens > 0).then(|| ReportedUsage {
                message: index,
                tokens: usize::try_from(tokens).unwrap_or(usize::MAX),
            })
        })
}
