//! `recorded`: the session exactly as it happened.
//!
//! A harness that compacted on its own left its summary in the log (Claude Code: a user line
//! marked `isCompactSummary`; condense: its summary message). From there on it sent the summary
//! and what followed, not the history before it; the leading System messages stay in front.

use std::borrow::Cow;

use condense_core::{Message, Role};
use serde_json::Value;

use super::{Model, Policy, Prepared};
use crate::ReplayError;

/// The session as recorded.
#[derive(Debug, Clone, Copy, Default)]
pub struct Recorded;

impl Recorded {
    /// The input the harness sent before the answer at `history.len()`.
    pub fn input(history: &[Message]) -> Cow<'_, [Message]> {
        match history.iter().rposition(is_harness_summary) {
            None | Some(0) => Cow::Borrowed(history),
            Some(_) => Cow::Owned(
                Recorded::sent(history)
                    .map(|index| history[index].clone())
                    .collect(),
            ),
        }
    }

    /// The indexes of the messages of `history` that the harness sent: the leading System
    /// messages, then everything from its latest summary on.
    pub fn sent(history: &[Message]) -> impl Iterator<Item = usize> + '_ {
        let start = history.iter().rposition(is_harness_summary).unwrap_or(0);
        let system = history[..start]
            .iter()
            .take_while(|message| message.role == Role::System)
            .count();
        (0..system).chain(start..history.len())
    }
}

/// A summary a harness put in place of what came before it.
fn is_harness_summary(message: &Message) -> bool {
    message.is_compaction_summary()
        || message
            .wire
            .iter()
            .any(|record| record.fields.get("isCompactSummary") == Some(&Value::Bool(true)))
}

impl Policy for Recorded {
    fn name(&self) -> &str {
        "recorded"
    }

    fn prepare<'h>(
        &mut self,
        history: &'h [Message],
        _now_ms: Option<u64>,
        _model: &Model<'_>,
    ) -> Result<Prepared<'h>, ReplayError> {
        Ok(Prepared {
            input: Recorded::input(history),
            ..Prepared::default()
        })
    }
}
