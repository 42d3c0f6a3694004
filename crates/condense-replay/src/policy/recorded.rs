//! `recorded`: the session exactly as it happened.
//!
//! A harness that compacted on its own left its summary in the log (Claude Code: a user line
//! marked `isCompactSummary`; condense: its summary message). From there on it sent the summary
//! and what followed, not the history before it; the leading System messages stay in front.
//! Codex replaced its history with one of its own (its instructions, the person's messages,
//! its summary), which is all it sent from there on.

use std::borrow::Cow;

use condense_core::{Message, Role};
use condense_formats::HarnessCompaction;

use super::{Model, Policy, Prepared};
use crate::ReplayError;

/// The session as recorded.
#[derive(Debug, Clone, Copy, Default)]
pub struct Recorded;

impl Recorded {
    /// The input the harness sent before the answer at `history.len()`.
    pub fn input(history: &[Message]) -> Cow<'_, [Message]> {
        match history
            .iter()
            .rposition(|message| compaction(message).is_some())
        {
            None | Some(0) => Cow::Borrowed(history),
            Some(_) => Cow::Owned(
                Recorded::sent(history)
                    .map(|index| history[index].clone())
                    .collect(),
            ),
        }
    }

    /// The indexes of the messages of `history` that the harness sent: the leading System
    /// messages, then everything from its latest summary on (from its latest replacement
    /// history on, alone, for Codex).
    pub fn sent(history: &[Message]) -> impl Iterator<Item = usize> + '_ {
        let latest = history
            .iter()
            .enumerate()
            .rev()
            .find_map(|(index, message)| Some((index, compaction(message)?)));
        let (start, system) = match latest {
            None => (0, 0),
            Some((start, Compaction::Replacement)) => (start, 0),
            Some((start, Compaction::Summary)) => (
                start,
                history[..start]
                    .iter()
                    .take_while(|message| message.role == Role::System)
                    .count(),
            ),
        };
        (0..system).chain(start..history.len())
    }
}

/// How a harness's compaction message stands in for what came before it.
enum Compaction {
    /// After the leading System messages (Claude Code's summary, condense's).
    Summary,
    /// Alone (Codex's replacement history).
    Replacement,
}

/// Where a harness's compaction starts, if `message` is one: a summary (its own, condense's or
/// the provider's), or the first item of a replacement history.
fn compaction(message: &Message) -> Option<Compaction> {
    match condense_formats::harness_compaction(message) {
        Some(HarnessCompaction::Replacement) => Some(Compaction::Replacement),
        Some(HarnessCompaction::Summary) => Some(Compaction::Summary),
        // A provider's own compaction (OpenAI's item, Anthropic's block): the provider reads
        // the leading System messages and everything from it on, and prices only that.
        _ => (message.is_compaction_summary() || condense_core::has_native_compaction(message))
            .then_some(Compaction::Summary),
    }
}

impl Policy for Recorded {
    fn name(&self) -> &str {
        "recorded"
    }

    fn follows_the_harness(&self) -> bool {
        true
    }

    fn prepare<'h>(
        &mut self,
        history: &'h [Message],
        _now_ms: Option<u64>,
        _model: &Model<'_>,
    ) -> Result<Prepared<'h>, ReplayError> {
        Ok(Prepared {
            reply_limit: None,
            input: Recorded::input(history),
            ..Prepared::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_core::Part;

    /// After a provider's compaction the recorded request is what the provider read: the
    /// instructions, then the compaction and what follows it.
    #[test]
    fn a_provider_compaction_is_where_the_recorded_input_starts() {
        let compaction = Message::new(
            Role::Assistant,
            vec![Part::Opaque {
                value: serde_json::json!({"type": "compaction", "encrypted_content": "gAAAAB"}),
            }],
        );
        let history = vec![
            Message::text(Role::System, "be brief"),
            Message::text(Role::User, "old task"),
            Message::text(Role::Assistant, "old answer"),
            compaction.clone(),
            Message::text(Role::User, "new task"),
        ];
        let input = Recorded::input(&history);
        assert_eq!(
            input.as_ref(),
            [history[0].clone(), compaction, history[4].clone()]
        );
    }
}
