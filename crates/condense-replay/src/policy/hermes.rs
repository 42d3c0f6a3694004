//! `hermes`: hermes-agent's two-phase proposal (`../shared/seeds/004`, issue #513).
//!
//! When a request would exceed [`THRESHOLD`] of the window: first prune (walking back from the
//! newest tool output, the newest [`PRUNE_PROTECT`] estimated tokens stay, older outputs are
//! pruned if together more than [`PRUNE_MINIMUM`]; the tools in [`NEVER_PRUNE`] never are); if the
//! request is still over, summarize the middle: the first [`PROTECT_FIRST`] and the last
//! [`PROTECT_LAST`] messages stay (moved to keep tool calls with their results), the rest becomes
//! one `[CONTEXT SUMMARY]` message. Its summarizer sees the middle flattened into one prompt of
//! its own, sharing no cached prefix.

use std::sync::Arc;

use condense_core::{Message, Role, ToolPairs};
use condense_tokenizer::TokenCounter;

use super::{
    Live, Model, Policy, Prepared, SummarizerCall, SummarizerInput, WalkLimits, pair_safe_start,
};
use crate::ReplayError;
use crate::stand_in::stand_in;

/// Compression starts at this share of the window (85 %).
pub const THRESHOLD: f64 = 0.85;
/// `PRUNE_PROTECT_TOKENS`.
pub const PRUNE_PROTECT: usize = 40_000;
/// `PRUNE_MINIMUM_TOKENS`.
pub const PRUNE_MINIMUM: usize = 20_000;
/// `NEVER_PRUNE_TOOLS`.
pub const NEVER_PRUNE: &[&str] = &["clarify", "memory", "skill_view", "todo"];
/// The first messages that compression keeps.
pub const PROTECT_FIRST: usize = 3;
/// The last messages that compression keeps.
pub const PROTECT_LAST: usize = 4;

/// hermes-agent's rules.
pub struct Hermes {
    live: Live,
    counter: Arc<dyn TokenCounter>,
}

impl std::fmt::Debug for Hermes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hermes").finish_non_exhaustive()
    }
}

impl Hermes {
    /// The policy, counting summaries with `counter`.
    pub fn new(counter: Arc<dyn TokenCounter>) -> Self {
        Hermes {
            live: Live::new(),
            counter,
        }
    }

    fn prune(&mut self, history: &[Message]) -> usize {
        let walk = WalkLimits {
            skip_user_turns: 0,
            protect: PRUNE_PROTECT,
            minimum: PRUNE_MINIMUM,
            protected: NEVER_PRUNE,
        };
        self.live.prune(history, walk, |chars| {
            format!("[Tool output pruned — was {chars} chars]")
        })
    }

    /// Summarizes the middle of the current input, the summary sized as `length` measures a
    /// model's ([`crate::SummaryLength`]); `None` when there is no middle.
    fn compress(
        &mut self,
        history: &[Message],
        length: Option<&crate::SummaryLength>,
    ) -> Result<Option<SummarizerCall>, ReplayError> {
        let input = self.live.input(history);
        let front = self.live.front.len();
        let tail = pair_safe_start(&input, input.len().saturating_sub(PROTECT_LAST));
        let pairs = ToolPairs::index(&input);
        let mut head = PROTECT_FIRST.min(input.len());
        // The kept front must not end with a call whose result would be summarized.
        while head < tail
            && input[head].parts.iter().any(|part| {
                part.as_tool_result().is_some_and(|result| {
                    pairs
                        .call_site(&result.call_id)
                        .is_some_and(|call| call.message < head)
                })
            })
        {
            head += 1;
        }
        if head >= tail || tail < front {
            return Ok(None);
        }
        let middle = &input[head..tail];
        let Some(summary) = stand_in(middle, "structured", &self.counter, length)? else {
            return Ok(None);
        };
        let summary = Message::text(Role::User, format!("[CONTEXT SUMMARY]: {summary}"));
        let call = SummarizerCall {
            input: SummarizerInput::Separate(self.counter.count_each(middle).iter().sum()),
            output_tokens: self.counter.count_message(&summary),
        };
        let mut kept = input[..head].to_vec();
        kept.push(summary);
        self.live.front = kept;
        self.live.from += tail - front;
        Ok(Some(call))
    }
}

impl Policy for Hermes {
    fn name(&self) -> &str {
        "hermes"
    }

    fn prepare<'h>(
        &mut self,
        history: &'h [Message],
        _now_ms: Option<u64>,
        model: &Model<'_>,
    ) -> Result<Prepared<'h>, ReplayError> {
        let threshold = (model.context_window as f64 * THRESHOLD) as usize;
        let mut pruned_outputs = 0;
        let mut summarizer = None;
        if model.tokens(&self.live.input(history)) >= threshold {
            pruned_outputs = self.prune(history);
            if model.tokens(&self.live.input(history)) >= threshold {
                summarizer = self.compress(history, model.summary_length)?;
            }
        }
        Ok(Prepared {
            reply_limit: None,
            input: self.live.input(history),
            summarizer,
            pruned_outputs,
        })
    }
}
