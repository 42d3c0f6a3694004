//! `opencode`: opencode's pruning and its compaction on overflow (`../shared/seeds/000` and
//! `004`; the overflow rule from opencode's `session/compaction.ts`).
//!
//! - Prune, when the agent's loop ends and the next user turn begins: walking back from the
//!   newest tool output, skipping the last [`SKIP_USER_TURNS`] user turns, the newest
//!   [`PRUNE_PROTECT`] tokens of outputs stay; older ones are cleared if together they come to
//!   more than [`PRUNE_MINIMUM`]. Tokens are opencode's estimate, characters ÷ 4. `skill` outputs
//!   are never pruned; an output already cleared ends the walk.
//! - Compact, when the previous request's input plus its answer exceeded `window −
//!   min(max_output, 32,000)`: the compaction agent (its own system prompt, so it shares no cached
//!   prefix) summarizes everything, and the session goes on from the summary and the continuation
//!   message. The summary is sent as opencode sends it: the assistant's answer to "What did we do
//!   so far?" (so a later summary carries it whole, as opencode's own compaction has it in its
//!   context).

use std::sync::Arc;

use condense_compact::OPENCODE_CONTINUATION;
use condense_core::{Message, OPENCODE_SUMMARY_REQUEST, Role};
use condense_tokenizer::TokenCounter;

use super::{Live, Model, Policy, Prepared, SummarizerCall, SummarizerInput, WalkLimits};
use crate::ReplayError;
use crate::stand_in::stand_in;

/// `PRUNE_PROTECT`.
pub const PRUNE_PROTECT: usize = 40_000;
/// `PRUNE_MINIMUM`.
pub const PRUNE_MINIMUM: usize = 20_000;
/// The last user turns that are never pruned.
pub const SKIP_USER_TURNS: usize = 2;
/// `PRUNE_PROTECTED_TOOLS`.
pub const PROTECTED_TOOLS: &[&str] = &["skill"];
/// What a pruned output becomes in the model's input.
pub const CLEARED: &str = "[Old tool result content cleared]";
/// `OUTPUT_TOKEN_MAX`: the reply reserve is `min(max_output, this)`.
pub const OUTPUT_RESERVE_CAP: usize = 32_000;

/// opencode's rules.
pub struct OpenCode {
    live: Live,
    counter: Arc<dyn TokenCounter>,
    /// The previous request's input, as the provider counted it (0 before the first).
    last_input: usize,
}

impl std::fmt::Debug for OpenCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenCode").finish_non_exhaustive()
    }
}

impl OpenCode {
    /// The policy, counting summaries with `counter`.
    pub fn new(counter: Arc<dyn TokenCounter>) -> Self {
        OpenCode {
            live: Live::new(),
            counter,
            last_input: 0,
        }
    }

    fn prune(&mut self, history: &[Message]) -> usize {
        let walk = WalkLimits {
            skip_user_turns: SKIP_USER_TURNS,
            protect: PRUNE_PROTECT,
            minimum: PRUNE_MINIMUM,
            protected: PROTECTED_TOOLS,
        };
        self.live.prune(history, walk, |_| CLEARED.to_owned())
    }
}

impl Policy for OpenCode {
    fn name(&self) -> &str {
        "opencode"
    }

    fn prepare<'h>(
        &mut self,
        history: &'h [Message],
        _now_ms: Option<u64>,
        model: &Model<'_>,
    ) -> Result<Prepared<'h>, ReplayError> {
        let first = self.last_input == 0;
        let new_turn = history.last().is_some_and(Message::is_user_turn);
        let pruned_outputs = if new_turn && !first {
            self.prune(history)
        } else {
            0
        };
        let answered = history
            .iter()
            .rev()
            .find(|message| message.role == Role::Assistant)
            .map_or(0, |answer| model.tokens(std::slice::from_ref(answer)));
        let usable = model
            .context_window
            .saturating_sub(model.max_output_tokens.min(OUTPUT_RESERVE_CAP));
        let overflow = !first && self.last_input + answered > usable;
        let mut summarizer = None;
        if overflow {
            let input = self.live.input(history);
            if let Some(summary) =
                stand_in(&input, "structured", &self.counter, model.summary_length)?
            {
                let summary = Message::text(Role::Assistant, summary);
                let output_tokens = self.counter.count_message(&summary);
                summarizer = Some(SummarizerCall {
                    input: SummarizerInput::Separate(self.counter.count_each(&input).iter().sum()),
                    output_tokens,
                });
                // As opencode sends it: its summary is the answer to its own question.
                self.live.summarized(
                    history,
                    vec![
                        Message::text(Role::User, OPENCODE_SUMMARY_REQUEST),
                        summary,
                        Message::text(Role::User, OPENCODE_CONTINUATION),
                    ],
                );
            }
        }
        let input = self.live.input(history);
        self.last_input = model.tokens(&input);
        Ok(Prepared {
            reply_limit: None,
            input,
            summarizer,
            pruned_outputs,
        })
    }
}
