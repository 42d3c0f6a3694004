//! Frozen decisions: once condense has seen a tool output, its fate is fixed.
//!
//! A provider's prompt cache holds the prefix of the previous request. If an output that was kept
//! yesterday is replaced today, or replaced by a different text, the prefix changes and the cache
//! is lost from there on. So a replaced output gets the byte-identical replacement on every later
//! call, and an output the per-turn budget kept is never cut by that rule later (Claude Code does
//! the same). The log is keyed by tool-call id and can be saved between calls. A call's input
//! cut for a request to fit the window ([`crate::Pruner::preview_inputs`]) is frozen the same
//! way: the client resends it whole, and the next request carries the same cut. So is a message
//! of the person's cut as the very last resort ([`crate::Pruner::preview_person_to_fit`]),
//! logged by what it says and shows.

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

/// A call's input as a request that had to fit the window sent it: the texts cut to previews
/// ([`crate::Pruner::preview_inputs`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputCut {
    /// Where the whole input is stored: also what tells the call it was made for from another
    /// under the same id (SWE-agent reuses ids), whose whole input has another handle.
    pub handle: String,
    /// The input as it was sent.
    pub input: serde_json::Value,
}

/// A message of the person's as a request that had to fit the window sent it
/// ([`crate::Pruner::preview_person_to_fit`]): which of its parts were cut, and to what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageCut {
    /// Where the whole message is stored.
    pub handle: String,
    /// Each part cut, in order.
    pub parts: Vec<PartCut>,
}

/// One part of a [`MessageCut`]: an image left out, or a text cut to a preview, for the text
/// sent in its place. Only the text is kept: a part's wire fields (the `cache_control` a client
/// moves to its latest message on every request) are taken from the request it is sent in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartCut {
    /// The part's place in the message.
    pub part: usize,
    /// What is sent in its place.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
/// Every decision of a session, by call id.
pub struct DecisionLog {
    version: u32,
    decisions: BTreeMap<String, Decision>,
    /// Inputs cut, by call id. Absent from logs that have none (and from those written before
    /// inputs were cut, which read as having none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    inputs: BTreeMap<String, InputCut>,
    /// Messages of the person's cut, by what they say and show ([`crate::person_key`]).
    /// Absent from logs that have none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    messages: BTreeMap<String, MessageCut>,
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
            inputs: BTreeMap::new(),
            messages: BTreeMap::new(),
        }
    }

    /// The decision for this call id, if any.
    pub fn get(&self, call_id: &str) -> Option<&Decision> {
        self.decisions.get(call_id)
    }

    /// The input cut for this call id, if any.
    pub fn input_cut(&self, call_id: &str) -> Option<&InputCut> {
        self.inputs.get(call_id)
    }

    /// The cut of the person's message whose key ([`crate::person_key`]) is `key`, if any.
    pub fn message_cut(&self, key: &str) -> Option<&MessageCut> {
        self.messages.get(key)
    }

    /// Whether it holds a cut of a message of the person's: only then are messages looked up.
    pub fn has_message_cuts(&self) -> bool {
        !self.messages.is_empty()
    }

    /// How many decisions it holds, on outputs, inputs and the person's messages.
    pub fn len(&self) -> usize {
        self.decisions.len() + self.inputs.len() + self.messages.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.decisions.is_empty() && self.inputs.is_empty() && self.messages.is_empty()
    }

    pub(crate) fn record(&mut self, call_id: String, decision: Decision) {
        self.decisions.insert(call_id, decision);
    }

    pub(crate) fn record_input(&mut self, call_id: String, cut: InputCut) {
        self.inputs.insert(call_id, cut);
    }

    pub(crate) fn record_message(&mut self, key: String, cut: MessageCut) {
        self.messages.insert(key, cut);
    }

    /// The log as JSON, keys sorted so the same log is always the same bytes.
    pub fn to_json(&self) -> String {
        let log = DecisionLog {
            version: LOG_VERSION,
            decisions: self.decisions.clone(),
            inputs: self.inputs.clone(),
            messages: self.messages.clone(),
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
        let without_inputs = log.to_json();
        assert!(!without_inputs.contains("inputs"), "{without_inputs}");
        log.record_input(
            "c".into(),
            InputCut {
                handle: "fedcba9876543210fedcba9876543210".into(),
                input: serde_json::json!({"file_path": "/a.rs", "content": "fn main() {}\n[cut]"}),
            },
        );
        assert_eq!(log.len(), 3);
        let without_messages = log.to_json();
        assert!(!without_messages.contains("messages"), "{without_messages}");
        log.record_message(
            "d".into(),
            MessageCut {
                handle: "00112233445566778899aabbccddeeff".into(),
                parts: vec![PartCut {
                    part: 1,
                    text: "[an image left out]".into(),
                }],
            },
        );
        assert_eq!(log.len(), 4);
        let loaded = DecisionLog::from_json(&log.to_json()).unwrap();
        assert_eq!(loaded, log);
        assert_eq!(loaded.to_json(), log.to_json());
        // A log written before inputs were cut reads as having none.
        let older = DecisionLog::from_json(&without_inputs).unwrap();
        assert_eq!(older.input_cut("c"), None);
        assert_eq!(older.len(), 2);
        let older = DecisionLog::from_json(&without_messages).unwrap();
        assert!(!older.has_message_cuts());
        assert_eq!(older.message_cut("d"), None);
        assert_eq!(loaded.message_cut("d").unwrap().parts[0].part, 1);
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
