//! Time-based microcompact (Claude Code): when the session has been idle longer than the
//! provider keeps its prompt cache, the cached prefix is gone and the next request rewrites it in
//! full anyway. Clearing old tool results then costs no extra cache write and shrinks what is
//! rewritten, so it is done at once, before the other rules, without their minimum reclaim.
//!
//! Claude Code replaces each result of a compactable tool (file read, shell, grep, glob, web
//! search, web fetch, file edit, file write), except the most recent `keepRecent` (at least one),
//! with `[Old tool result content cleared]`, and the rest of its micro-compaction is skipped for
//! that request. condense does the same with two differences: its placeholder keeps the recall
//! handle (Claude Code's loses the content), and the skip boundary still holds (nothing in the
//! agent's latest turns is touched, whatever the clock says).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::Note;

/// `[microcompact]`: when and what time-based microcompact clears. The defaults and their
/// reasons are in `config/condense.toml`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MicrocompactSettings {
    /// Whether the rule runs at all.
    pub enabled: bool,
    /// The rule fires when more than this many minutes passed since the previous request: past
    /// the provider's cache lifetime, so that clearing costs no cache write a warm cache would
    /// have saved.
    pub idle_minutes: u64,
    /// The most recent results of these tools that stay (at least one is always kept, as in
    /// Claude Code: clearing all of them would leave the agent nothing of its latest work).
    pub keep_recent: usize,
    /// The tools whose results may be cleared.
    pub tools: BTreeSet<String>,
    /// What stands in for a cleared result.
    #[serde(deserialize_with = "crate::settings::plain_note")]
    pub note: Note,
}

/// Where the time of the previous request came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PreviousRequest {
    /// The timestamp of the conversation's last assistant message (formats that record one).
    LastAssistantMessage,
    /// What the harness remembered of its previous request (the session state).
    State,
}

/// What microcompact saw and did in one call. Absent from a report when the rule is off or no
/// time of a previous request is known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MicrocompactReport {
    /// Where the previous request's time came from.
    pub previous: PreviousRequest,
    /// Whole minutes since then.
    pub idle_minutes: u64,
    /// The threshold in force.
    pub threshold_minutes: u64,
    /// Whether the gap was over the threshold.
    pub cache_cold: bool,
    /// Results cleared by this call (0 when the cache was warm).
    pub cleared: usize,
}

impl MicrocompactSettings {
    /// Whether `gap_ms` is longer than the provider keeps a cache.
    pub(crate) fn is_cold(&self, gap_ms: u64) -> bool {
        gap_ms > self.idle_minutes.saturating_mul(60_000)
    }

    /// At least one result is always kept.
    pub(crate) fn keep(&self) -> usize {
        self.keep_recent.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_note_is_valid_and_keeps_claude_codes_words() {
        let settings: MicrocompactSettings = condense_defaults::section("microcompact").unwrap();
        assert!(
            settings
                .note
                .text()
                .starts_with("[Old tool result content cleared")
        );
    }

    #[test]
    fn the_gap_must_exceed_the_threshold_and_one_result_is_always_kept() {
        let mut settings: MicrocompactSettings =
            condense_defaults::section("microcompact").unwrap();
        settings.keep_recent = 0;
        assert!(!settings.is_cold(60 * 60_000));
        assert!(settings.is_cold(60 * 60_000 + 1));
        assert_eq!(settings.keep(), 1);
    }
}
