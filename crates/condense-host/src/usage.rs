//! What the conversation costs, as the trigger should see it.
//!
//! Another model family tokenizes differently: on one real Claude Code session o200k counts 79K
//! tokens of text where Anthropic reported 119K of input. When the provider's usage is known, the
//! trigger uses the last reported total plus the exact count of what came after it (as opencode,
//! pi and Codex do); otherwise the tokenizer's count. A reported figure that our count of the same
//! messages contradicts by more than a factor of two is stale and ignored.

use condense_core::{Conversation, Role};
use serde::Serialize;

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

/// `counts` are the conversation's messages' counts, in order, before pruning; `replaced_before`
/// gives the tokens of outputs up to a message that earlier requests replaced (frozen
/// decisions), which the harness's figure never counted. The flag says the figure is the
/// harness's own report (`reported`), not one found in the log.
pub(crate) fn measure(
    conversation: &Conversation,
    reported: Option<ReportedUsage>,
    counts: &[usize],
    replaced_before: impl Fn(usize) -> usize,
) -> (Measure, bool) {
    let ours_to = |usage: &ReportedUsage| counts[..=usage.message].iter().sum::<usize>();
    // The harness's figure is for the request it sent, which may carry much the conversation
    // does not (tool definitions, a system prompt): only one far below our count is wrong.
    // The log's own figure may be from before a compaction: stale in both directions.
    let harness = reported
        .filter(|usage| usage.message < conversation.messages.len())
        .map(|usage| ReportedUsage {
            message: answer_at(conversation, usage.message),
            ..usage
        })
        .filter(|usage| {
            usage.tokens.saturating_mul(2)
                >= ours_to(usage).saturating_sub(replaced_before(usage.message))
        });
    let from_harness = harness.is_some();
    let usage = harness.or_else(|| {
        last_reported(conversation).filter(|usage| plausible(usage.tokens, ours_to(usage)))
    });
    let measure = match usage {
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
            tokens: condense_tokenizer::conversation_total(counts),
        },
    };
    (measure, from_harness)
}

/// Where the answer a harness reported usage for sits in this history. The harness gives the
/// length of the request it sent, where the answer follows it; but a request that made a summary
/// also carried the continuation message condense appended, which the client's next history
/// does not hold, so there the answer is one earlier. Counting from the wrong place left the
/// message after the answer (often a large tool result) out of the trigger's measure.
fn answer_at(conversation: &Conversation, message: usize) -> usize {
    let role = |index: usize| conversation.messages.get(index).map(|m| m.role);
    if role(message) != Some(Role::Assistant)
        && message > 0
        && role(message - 1) == Some(Role::Assistant)
    {
        message - 1
    } else {
        message
    }
}

/// A count a log recorded more than twice ours (or under half) for the same messages is not a
/// tokenizer difference but a stale figure: the conversation was compacted since the provider
/// counted it (the tail keeps the messages, and their usage, from before).
fn plausible(reported: usize, ours: usize) -> bool {
    reported <= ours.saturating_mul(2) && reported.saturating_mul(2) >= ours
}

/// The last figure the log holds ([`condense_formats::logged_usage`]: Claude Code's on the
/// assistant line, Codex's beside it): the request's whole input, cache reads and writes
/// included, and the reply, which the next request sends too.
fn last_reported(conversation: &Conversation) -> Option<ReportedUsage> {
    condense_formats::logged_usage(conversation)
        .last()
        .map(|usage| ReportedUsage {
            message: usage.answer,
            tokens: usize::try_from(usage.input + usage.output).unwrap_or(usize::MAX),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_core::Message;
    use condense_tokenizer::{Tiktoken, TokenCounter};

    fn conversation() -> Conversation {
        Conversation::new(vec![
            Message::text(Role::User, "fix the parser ".repeat(200)),
            Message::text(Role::Assistant, "done ".repeat(100)),
            Message::text(Role::User, "thanks"),
        ])
    }

    /// A harness's figure far above our count is the request's tool definitions and system
    /// prompt, not a stale figure: it is used.
    #[test]
    fn a_harness_figure_above_twice_ours_is_the_request_s_overhead_and_is_used() {
        let counter = Tiktoken::default();
        let conversation = conversation();
        let ours: usize = counter.count_each(&conversation.messages)[..=1]
            .iter()
            .sum();
        let reported = ReportedUsage {
            message: 1,
            tokens: ours * 3 + 15_000,
        };
        let (measured, from_harness) = measure(
            &conversation,
            Some(reported),
            &counter.count_each(&conversation.messages),
            |_| 0,
        );
        assert!(from_harness);
        assert!(
            matches!(measured, Measure::ProviderUsage { reported: r, .. } if r == reported.tokens),
            "{measured:?}"
        );
        // One far below ours is not a count of these messages.
        let low = ReportedUsage {
            message: 1,
            tokens: ours / 3,
        };
        assert!(matches!(
            measure(
                &conversation,
                Some(low),
                &counter.count_each(&conversation.messages),
                |_| 0,
            ),
            (Measure::Tokenizer { .. }, false)
        ));
    }

    /// A Codex log's usage sits beside the messages, after the answer it accounts for; the
    /// trigger counts from there, as from a Claude Code line's.
    #[test]
    fn a_usage_record_beside_the_messages_is_the_providers_count() {
        let counter = Tiktoken::default();
        let mut conversation = conversation();
        let ours: usize = counter.count_each(&conversation.messages)[..=1]
            .iter()
            .sum();
        let input = ours as u64 + 300;
        conversation.side.push(condense_core::SideRecord {
            kind: condense_core::SideKind::Other,
            before_message: 2,
            value: serde_json::json!({"type": "token_usage_record", "payload": {"usage": {
                "input_tokens": input, "cached_input_tokens": 100, "output_tokens": 20,
            }}}),
        });
        let counts = counter.count_each(&conversation.messages);
        let (measured, from_harness) = measure(&conversation, None, &counts, |_| 0);
        assert!(!from_harness);
        assert_eq!(
            measured,
            Measure::ProviderUsage {
                tokens: input as usize + 20 + counts[2],
                reported: input as usize + 20,
                at_message: 1,
                counted_after: counts[2],
            }
        );
    }
}
