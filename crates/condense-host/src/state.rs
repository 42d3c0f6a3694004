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
    /// The caches the session's latest requests went to, the most recent last: a provider keeps
    /// one per model and prompt prefix, so a request to a model or with a system prompt or
    /// tools the session has not sent within the cache's lifetime is written whole, as after a
    /// pause (Claude Code falls back from Opus to Sonnet; a harness may rewrite its system
    /// prompt or tools mid-session). Absent from states saved before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caches: Vec<CacheUse>,
    /// The longest reply the agent has written in the session, in condense's tokens: where a
    /// system prompt and tools leave the conversation little, the least left to the reply. A
    /// summary takes the reply out of the requests after it, not out of the agent's habits.
    /// Absent from states saved before it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub longest_reply: usize,
    /// The least room left to the reply, in the provider's tokens, after a reply stopped at a
    /// limit condense had lowered ([`SessionState::record_cut_reply`]) and until one goes
    /// through: twice that limit, up to the reserve the window keeps for it. The agent wrote a
    /// longer reply than the room condense judged enough, and the client sends its request
    /// again, or asks the agent to go on: in the same room it would be cut again. Once a reply
    /// goes through, it is in the history, and [`SessionState::longest_reply`] holds its
    /// length. Absent from states saved before it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reply_floor: usize,
    /// How many messages the request last prepared from this state carried as it went out
    /// (condense's summary and continuation among them): where the provider refuses that
    /// request as longer than its window, its count covers all of them
    /// ([`SessionState::record_refusal`]). Absent from states saved before it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sent_messages: usize,
    /// The reply limit the request last prepared from this state went out with, where condense
    /// lowered it (the report's `reply_limit`); 0 where it did not. A reply cut at it is
    /// condense's doing ([`SessionState::record_cut_short`]). Absent from states saved before
    /// it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sent_reply_limit: usize,
}

/// Whether `value` is 0 (serde's `skip_serializing_if` takes a function).
fn is_zero(value: &usize) -> bool {
    *value == 0
}

/// One cache a session's request went to ([`SessionState::caches`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheUse {
    /// A hash of the model the request named and its prefix (the system prompt and tools).
    pub key: u64,
    /// When the request was prepared (milliseconds since the epoch).
    pub at_ms: u64,
}

impl CacheUse {
    /// How many caches a state remembers: a session goes back to one of a few models at most,
    /// and an entry older than the cache's lifetime tells nothing.
    pub const KEPT: usize = 4;

    /// `caches` with a request to `key` at `at_ms` taken in: that key's entry moved last, the
    /// oldest dropped past [`CacheUse::KEPT`].
    pub fn record(caches: &mut Vec<CacheUse>, key: u64, at_ms: u64) {
        caches.retain(|used| used.key != key);
        caches.push(CacheUse { key, at_ms });
        let excess = caches.len().saturating_sub(CacheUse::KEPT);
        caches.drain(..excess);
    }
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
/// plus that reply. Or, `unanswered`, of a request whose answer the client cannot go on from
/// (refused as longer than the model's window, or cut short at a limit condense lowered): its
/// input alone, `message` the last message that request carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedUsage {
    /// The message whose usage it is.
    pub message: usize,
    /// The tokens the provider counted.
    pub tokens: usize,
    /// Nothing the client can go on from answered the request: the provider refused it as too
    /// long, saying how long it counted it, or its reply stopped at a limit condense had
    /// lowered. The client sends the same messages again with no answer among them (or goes on
    /// after them), so the figure, its input alone, stands at the request's last message. (A
    /// figure for an answer stands at the answer, which the next request carries.) Saved as
    /// `refused` before a cut reply was one.
    #[serde(default, alias = "refused", skip_serializing_if = "std::ops::Not::not")]
    pub unanswered: bool,
}

impl ReportedUsage {
    /// The provider's count of a request it answered: `tokens`, its input and the answer, which
    /// stands at `message`.
    pub fn answered(message: usize, tokens: usize) -> Self {
        ReportedUsage {
            message,
            tokens,
            unanswered: false,
        }
    }

    /// The provider's count of the input of a request nothing the client can go on from
    /// answered (refused as longer than the window, or its reply cut short at a limit condense
    /// lowered), whose last message was at `message`.
    pub fn unanswered(message: usize, tokens: usize) -> Self {
        ReportedUsage {
            message,
            tokens,
            unanswered: true,
        }
    }

    /// [`ReportedUsage::unanswered`] for a request of `sent` messages, as prepared: the count
    /// stands at its last message. `None` for a request of none, which nothing prepared.
    pub fn unanswered_request(sent: usize, tokens: usize) -> Option<Self> {
        Some(ReportedUsage::unanswered(sent.checked_sub(1)?, tokens))
    }
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

    /// The provider answered the request last prepared from this state and counted `tokens`
    /// for it: its whole input (cache reads and writes included) and the answer's output.
    /// Recorded at the answer, which the next history holds right after what was sent (after a
    /// summary, the client's own history is longer than that), so that the trigger counts from
    /// the provider's figure as the proxy's does. `false`, and nothing recorded, where no
    /// request was prepared from this state.
    pub fn record_answer(&mut self, tokens: usize) -> bool {
        if self.sent_messages == 0 {
            return false;
        }
        self.reply_went_through();
        self.reported_usage = Some(ReportedUsage::answered(self.sent_messages, tokens));
        true
    }

    /// The provider refused the request last prepared from this state as longer than the
    /// model's window, and counted its input `tokens` (its error says how many:
    /// [`crate::refusal::too_long`]). Recorded as that request's figure, so that the same history
    /// prepared again is measured by the provider's count and compacted to fit. Prepare it again
    /// once: refused again, with the provider's own count in hand, the compaction could not fit,
    /// and the harness should see the provider's error. `false`, and nothing recorded, where no
    /// request was prepared from this state.
    pub fn record_refusal(&mut self, tokens: usize) -> bool {
        let Some(refused) = ReportedUsage::unanswered_request(self.sent_messages, tokens) else {
            return false;
        };
        self.reported_usage = Some(refused);
        true
    }

    /// The reply to the request last prepared from this state stopped at `limit`, a limit
    /// condense had lowered the request's to (the report's `reply_limit`; Anthropic's
    /// `stop_reason: "max_tokens"`, Chat Completions' `finish_reason: "length"`). Until a reply
    /// goes through, the reply keeps twice that room, up to the reserve the window keeps for
    /// it, and the conversation is compacted to leave it: doubling finds a reply of any length
    /// in as many cuts as it takes to double past it, and takes from the conversation no more
    /// than twice the room that reply needed. `input_tokens`, the provider's count of the
    /// request's input where the answer gave it, is recorded as the figure of a request
    /// nothing answered ([`ReportedUsage::unanswered`]): the client sends it again, or goes on
    /// after it.
    pub fn record_cut_reply(&mut self, limit: usize, input_tokens: Option<usize>) {
        self.reply_floor = self.reply_floor.max(limit.saturating_mul(2));
        if let Some(usage) = input_tokens
            .and_then(|tokens| ReportedUsage::unanswered_request(self.sent_messages, tokens))
        {
            self.reported_usage = Some(usage);
        }
    }

    /// The reply to the request last prepared from this state stopped at the limit condense
    /// lowered it to ([`SessionState::sent_reply_limit`]): [`SessionState::record_cut_reply`]
    /// with that limit. `false`, and nothing recorded, where condense did not lower the
    /// request's limit: a reply cut at the limit the harness asked is the harness's to handle.
    pub fn record_cut_short(&mut self, input_tokens: Option<usize>) -> bool {
        if self.sent_reply_limit == 0 {
            return false;
        }
        self.record_cut_reply(self.sent_reply_limit, input_tokens);
        true
    }

    /// What the request `sent` was prepared into: how many messages it carried as it went out,
    /// and the reply limit condense lowered, for what the provider answers to it.
    pub(crate) fn record_sent(&mut self, sent: &crate::Compaction) {
        self.sent_messages = sent.conversation.messages.len();
        self.sent_reply_limit = sent
            .report
            .reply_limit
            .map_or(0, |limit| usize::try_from(limit.sent).unwrap_or(usize::MAX));
    }

    /// A reply went through, not cut: the room a cut reply asked for is no longer needed
    /// ([`SessionState::reply_floor`]).
    pub fn reply_went_through(&mut self) {
        self.reply_floor = 0;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each cut doubles the room of the limit that cut it, a shorter cut lowering nothing, and
    /// the input's count, where there is one, stands at the cut request's last message, until a
    /// reply goes through; a state saved before the floor existed reads with none, and one
    /// without a cut saves none.
    #[test]
    fn a_cut_reply_s_floor_doubles_and_never_falls() {
        let mut state = SessionState::default();
        state.record_cut_reply(1_200, None);
        assert_eq!(state.reply_floor, 2_400);
        state.record_cut_reply(800, None);
        assert_eq!(state.reply_floor, 2_400);
        state.record_cut_reply(2_400, None);
        assert_eq!(state.reply_floor, 4_800);
        assert_eq!(state.reported_usage, None, "nothing prepared, no figure");
        // Where condense lowered no limit, a cut is not its doing.
        assert!(!state.clone().record_cut_short(Some(14_000)));
        // The input's count stands at the last message of the request prepared.
        state.sent_messages = 9;
        state.record_cut_reply(2_000, Some(14_000));
        assert_eq!(state.reply_floor, 4_800);
        assert_eq!(
            state.reported_usage,
            Some(ReportedUsage::unanswered(8, 14_000))
        );
        let saved = state.to_json();
        assert_eq!(SessionState::from_json(&saved).unwrap().reply_floor, 4_800);
        // Saved as `unanswered`; a state saved before, as `refused`, reads the same.
        assert!(saved.contains("\"unanswered\": true"), "{saved}");
        let before = SessionState::from_json(&saved.replace("\"unanswered\"", "\"refused\""));
        assert_eq!(before.unwrap().reported_usage, state.reported_usage);
        // A reply that goes through ends it.
        assert!(state.record_answer(20_000));
        assert_eq!(state.reply_floor, 0);
        let fresh = SessionState::default().to_json();
        assert!(!fresh.contains("reply_floor"), "{fresh}");
        assert_eq!(SessionState::from_json(&fresh).unwrap().reply_floor, 0);
    }

    /// A cache used again moves last with its new time; past [`CacheUse::KEPT`] the one used
    /// longest ago goes; a state saved before the list existed reads with none.
    #[test]
    fn the_caches_a_session_used_are_kept_latest_last_and_few() {
        let mut caches = Vec::new();
        for (key, at_ms) in [(1, 10), (2, 20), (1, 30), (3, 40), (4, 50), (5, 60)] {
            CacheUse::record(&mut caches, key, at_ms);
        }
        let kept: Vec<(u64, u64)> = caches.iter().map(|used| (used.key, used.at_ms)).collect();
        assert_eq!(kept, [(1, 30), (3, 40), (4, 50), (5, 60)]);
        let mut state = SessionState {
            caches,
            ..SessionState::default()
        };
        let saved = state.to_json();
        assert_eq!(SessionState::from_json(&saved).unwrap(), state);
        state.caches.clear();
        let before = state.to_json();
        assert!(!before.contains("caches"), "{before}");
        assert!(SessionState::from_json(&before).unwrap().caches.is_empty());
    }

    /// A refusal's count stands at the refused request's last message, for the proxy (which
    /// has the request's length) as for a state it was prepared from; a state nothing was
    /// prepared from records none.
    #[test]
    fn a_refusal_stands_at_the_refused_request_s_last_message() {
        assert_eq!(
            ReportedUsage::unanswered_request(5, 40_000),
            Some(ReportedUsage::unanswered(4, 40_000))
        );
        assert_eq!(ReportedUsage::unanswered_request(0, 40_000), None);
        let mut state = SessionState::default();
        assert!(!state.record_refusal(40_000));
        assert_eq!(state.reported_usage, None);
        state.sent_messages = 5;
        assert!(state.record_refusal(40_000));
        assert_eq!(
            state.reported_usage,
            Some(ReportedUsage::unanswered(4, 40_000))
        );
    }
}
