//! An agent's own compactions, in the logs that keep them (Claude Code's, Codex's).
//!
//! Both agents compact on their own and keep writing the same log: Claude Code writes a
//! `compact_boundary` line (a new root of its `parentUuid` chain) and its summary after it;
//! Codex writes a `compacted` line holding the history it sends from there on. What the model
//! sees is what follows the last such point, and that is how [`crate::read`] reads them (the
//! lines before are kept beside the conversation, written back unchanged). A replay needs the
//! whole session instead, with what the agent wrote when it compacted told apart: that is
//! [`crate::read_whole`], and [`harness_compaction`] tells.

use condense_core::Message;
use serde_json::Value;

use crate::reading::RESTATES;
use crate::{claude_code, codex};

/// A message a harness wrote when it compacted on its own, in a log read whole
/// ([`crate::read_whole`]), which keeps the history it stands in for. A replay sends what the
/// harness sent from such a message on, and leaves these messages out when it asks what a
/// policy of its own would have sent instead. condense's own summary is never one: the history
/// it replaced is gone from the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HarnessCompaction {
    /// Claude Code's summary (its `isCompactSummary` line): from here on it sent its system
    /// prompt, this summary and what followed.
    Summary,
    /// The first item of a Codex replacement history: from here on Codex sent this history
    /// and what followed, and nothing from before (the history has its own instructions).
    Replacement,
    /// A later item of a Codex replacement history.
    ReplacementItem,
    /// The answer of the harness's own summarizer, logged as an item of the history (Codex
    /// flags it `compaction_output`): the request it answered was the harness's compaction,
    /// not one of the agent's.
    SummarizerAnswer,
}

/// The wire fields [`harness_compaction`] reads: whoever strips messages' wire records and
/// still asks must keep these.
pub const HARNESS_COMPACTION_FIELDS: [&str; 4] = [
    RESTATES,
    claude_code::COMPACT_SUMMARY,
    codex::REPLACEMENT,
    "metadata",
];

/// What `message` stands for, if a harness wrote it when it compacted on its own.
pub fn harness_compaction(message: &Message) -> Option<HarnessCompaction> {
    if codex::is_compaction_output(message) {
        return Some(HarnessCompaction::SummarizerAnswer);
    }
    let fields = &message.wire.first()?.fields;
    if fields.get(RESTATES) != Some(&Value::Bool(true)) {
        return None;
    }
    Some(match fields.get(codex::REPLACEMENT) {
        Some(Value::Number(index)) if index.as_u64() != Some(0) => {
            HarnessCompaction::ReplacementItem
        }
        // The first item, or the summary of an older Codex's line, which is the whole history.
        Some(_) => HarnessCompaction::Replacement,
        None if claude_code::is_compact_summary(message) => HarnessCompaction::Summary,
        None => return None,
    })
}
