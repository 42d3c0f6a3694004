//! Frozen decisions: once condense has seen a tool output, its fate is fixed.
//!
//! A provider's prompt cache holds the prefix of the previous request. If an output that was kept
//! yesterday is replaced today, or replaced by a different text, the prefix changes and the cache
//! is lost from there on. So a replaced output gets the byte-identical replacement on every later
//! call, and an output the per-turn budget kept is never cut by that rule later (Claude Code does
//! the same). The log is keyed by tool-call id and can be saved between calls.

use std::collections::BTreeMap;

use condense_core::Compacted;
use serde::{Deserialize, Serialize};

/// The version of the saved log's layout; a log of another version is refused, not misread.
const LOG_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fate", rename_all = "snake_case")]
/// What was decided for one output.
pub enum Decision {
    /// Seen fresh and kept by the per-turn budget.
    Kept,
    /// Replaced by `content`, every time.
    Replaced {
        /// The replacement text.
        content: String,
        /// What the replacement records.
        marker: Compacted,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
/// Every decision of a session, by call id.
pub struct DecisionLog {
    version: u32,
    decisions: BTreeMap<String, Decision>,
}

#[derive(Debug, thiserror::Error)]
/// A saved log that cannot be read back.
#[non_exhaustive]
pub enum DecisionLogError {
    #[error("the decision log is not valid JSON (line {line}, column {column}): {message}")]
    /// Not JSON of a log.
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    #[error("the decision log has version {found}; this condense reads version {LOG_VERSION}")]
    /// Written by another version of condense.
    Version {
        /// The version found.
        found: u32,
    },
}

impl DecisionLog {
    /// An empty log.
    pub fn new() -> Self {
        DecisionLog {
            version: LOG_VERSION,
            decisions: BTreeMap::new(),
        }
    }

    /// The decision for this call id, if any.
    pub fn get(&self, call_id: &str) -> Option<&Decision> {
        self.decisions.get(call_id)
    }

    /// How many decisions it holds.
    pub fn len(&self) -> usize {
        self.decisions.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.decisions.is_empty()
    }

    pub(crate) fn record(&mut self, call_id: String, decision: Decision) {
        self.decisions.insert(call_id, decision);
    }

    /// The log as JSON, keys sorted so the same log is always the same bytes.
    pub fn to_json(&self) -> String {
        let log = DecisionLog {
            version: LOG_VERSION,
            decisions: self.decisions.clone(),
        };
        serde_json::to_string_pretty(&log).unwrap_or_default()
    }

    /// A log saved with [`DecisionLog::to_json`].
    pub fn from_json(text: &str) -> Result<Self, DecisionLogError> {
        let log: DecisionLog =
            serde_json::from_str(text).map_err(|error| DecisionLogError::Json {
                line: error.line(),
                column: error.column(),
                message: error.to_string(),
            })?;
        if log.version != LOG_VERSION {
            return Err(DecisionLogError::Version { found: log.version });
        }
        Ok(log)
    }
}

#[cfg(test)]
mod tests {
    use condense_core::Phase;

    use super::*;

    #[test]
    fn a_log_saved_and_loaded_is_the_same_log() {
        let mut log = DecisionLog::new();
        log.record("a".into(), Decision::Kept);
        log.record(
            "b".into(),
            Decision::Replaced {
                content: "[pruned]".into(),
                marker: Compacted {
                    at_ms: 1_700_000_000_000,
                    phase: Phase::Prune,
                    original_tokens: 1200,
                    original_chars: 4800,
                    handle: "0123456789abcdef0123456789abcdef".into(),
                },
            },
        );
        let loaded = DecisionLog::from_json(&log.to_json()).unwrap();
        assert_eq!(loaded, log);
        assert_eq!(loaded.to_json(), log.to_json());
    }

    #[test]
    fn a_bad_log_is_a_clear_error() {
        let error = DecisionLog::from_json("{\"version\": 1, \"decisions\": [").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("the decision log is not valid JSON (line 1")
        );
        let error = DecisionLog::from_json("{\"version\": 7, \"decisions\": {}}").unwrap_err();
        assert_eq!(
            error.to_string(),
            "the decision log has version 7; this condense reads version 1"
        );
    }
}
