use condense_pruner::DecisionLog;
use serde::{Deserialize, Serialize};

/// What a harness keeps between requests of one session: the frozen decisions (so the prompt
/// cache keeps its prefix), the circuit breaker's count, the provider's last reported usage and
/// the time of the last request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    /// Every decision made so far, replayed on each request.
    pub log: DecisionLog,
    /// Summarizer failures in a row; at `compaction.max_failures` automatic compaction stops.
    pub consecutive_failures: u32,
    /// Usage the provider reported, when the harness has it and the conversation does not carry
    /// it (Claude Code logs carry it on every assistant message).
    pub reported_usage: Option<ReportedUsage>,
    /// When the previous request was prepared (milliseconds since the epoch): time-based
    /// microcompact measures the idle gap from it when the conversation carries no timestamps.
    /// Absent from states saved before it existed.
    #[serde(default)]
    pub last_request_ms: Option<u64>,
    /// The last summary and the client's messages it stands for: a harness or proxy that resends
    /// the whole history gets the same summary in their place on every later request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<crate::FrozenHead>,
    /// The smallest and the largest of the session's requests the provider counted, each
    /// beside condense's count of the same messages: the line through them parts the provider's
    /// count into what every request carries beyond its messages (a system prompt, tool
    /// definitions) and a tokenizer's scale, which size the room a compaction leaves. Absent
    /// until the harness has reported usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted: Option<Counted>,
}

/// Two of a session's requests as the provider and condense counted them ([`SessionState::counted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counted {
    /// The request with the fewest tokens by condense's count.
    pub smallest: Sample,
    /// The request with the most.
    pub largest: Sample,
    /// A hash of what the requests carried beside their conversation (the system prompt, the
    /// tool definitions): a request whose prefix differs starts the two afresh, since the line
    /// through requests of two prefixes is neither's. 0 in states saved before it existed.
    #[serde(default)]
    pub prefix: u64,
}

/// One request's size, as condense counted its messages and as the provider counted all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// condense's count of the messages the provider's figure covers.
    pub ours: usize,
    /// The provider's figure.
    pub provider: usize,
}

impl Counted {
    /// With `sample`, a request of `prefix`, taken in: it replaces the smallest or the largest
    /// it is beyond, or both where the prefix changed.
    pub fn with(counted: Option<Counted>, sample: Sample, prefix: u64) -> Counted {
        match counted.filter(|counted| counted.prefix == prefix) {
            None => Counted {
                smallest: sample,
                largest: sample,
                prefix,
            },
            Some(mut counted) => {
                if sample.ours < counted.smallest.ours {
                    counted.smallest = sample;
                }
                if sample.ours > counted.largest.ours {
                    counted.largest = sample;
                }
                counted
            }
        }
    }
}

/// The provider's count of the request that produced the message at `message`: its whole input
/// plus that reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedUsage {
    /// The message whose usage it is.
    pub message: usize,
    /// The tokens the provider counted.
    pub tokens: usize,
}

#[derive(Debug, thiserror::Error)]
/// A saved state that cannot be read back.
#[non_exhaustive]
pub enum StateError {
    #[error("the session state is not valid JSON (line {line}, column {column}): {message}")]
    /// Not JSON of a state.
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
}

impl SessionState {
    /// The state as JSON, to keep between requests.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// A state saved with [`SessionState::to_json`].
    pub fn from_json(text: &str) -> Result<SessionState, StateError> {
        serde_json::from_str(text).map_err(|error| StateError::Json {
            line: error.line(),
            column: error.column(),
            message: error.to_string(),
        })
    }
}
