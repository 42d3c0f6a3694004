use serde::Serialize;

use crate::Thresholds;

/// Why an output was kept or replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    /// Its tool is protected.
    Protected,
    /// At or after the skip boundary.
    InsideBoundary,
    /// Among the newest outputs that fit the protect window.
    InsideWindow,
    /// Replaced by a placeholder.
    Pruned,
    /// Old enough to prune, but no larger than its placeholder would be.
    SmallerThanPlaceholder,
    /// Would have been pruned, but the whole batch would have freed no more than the minimum.
    BelowMinimum,
    /// Replaced by a preview: its turn's fresh results were over the per-turn budget.
    OverTurnBudget,
    /// Replaced by a pointer to a newer identical output.
    Duplicate {
        /// The call id of the newer output.
        newer: String,
    },
    /// Replaced again, byte for byte, as the decision log says.
    Frozen,
    /// Already replaced before this call.
    AlreadyReplaced,
    /// Older than a compaction summary or a pruned output, where the walk stops.
    BehindEarlierCompaction,
    /// Replaced by the agent's own summary (`trim_tool_result`).
    TrimmedByAgent,
    /// A read made stale by a later call on the same path, replaced by a placeholder naming it.
    Superseded {
        /// The later call's tool.
        by: String,
        /// The later call's message.
        at: usize,
    },
    /// Cleared by time-based microcompact: the provider's cache had expired.
    Microcompacted,
    /// Kept by time-based microcompact: among the most recent results of its tools.
    KeptRecent,
    /// Not judged: microcompact fired and short-circuits the other rules, and its tool is not
    /// one it clears.
    NotCompactable,
}

impl Reason {
    /// Whether the output was replaced (by a placeholder, a preview or the agent's summary),
    /// as opposed to kept and why.
    pub fn replaces(&self) -> bool {
        matches!(
            self,
            Reason::Pruned
                | Reason::OverTurnBudget
                | Reason::Duplicate { .. }
                | Reason::Frozen
                | Reason::TrimmedByAgent
                | Reason::Superseded { .. }
                | Reason::Microcompacted
        )
    }
}

/// What happened to one tool output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutputReport {
    /// The message holding the output.
    pub message: usize,
    /// The call it answers.
    pub call_id: String,
    /// The tool that produced it.
    pub tool: String,
    #[serde(flatten)]
    /// What was decided, and why.
    pub reason: Reason,
    /// Its tokens before.
    pub tokens_before: usize,
    /// Its tokens after.
    pub tokens_after: usize,
}

/// A call's input cut again as the decision log says ([`crate::Pruner::prune`]): an earlier
/// request sent it cut so that it fit the window, and the client resent it whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputReport {
    /// The message holding the call.
    pub message: usize,
    /// The call.
    pub call_id: String,
    /// The input's tokens whole.
    pub tokens_before: usize,
    /// Cut.
    pub tokens_after: usize,
}

/// A message of the person's cut again as the decision log says
/// ([`crate::Pruner::preview_person_to_fit`] made the cut).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MessageReport {
    /// The message.
    pub message: usize,
    /// Its tokens whole.
    pub tokens_before: usize,
    /// Cut.
    pub tokens_after: usize,
}

/// Every decision of one pruning call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// The first message that nothing may touch: the user turn `skip_user_turns` from the end
    /// (`0` when there are fewer), or in an autonomous run the call `skip_tool_calls` from the
    /// end (see [`crate::boundary_for`]). Only an output larger than the whole window is
    /// touched after it.
    pub boundary: usize,
    /// The protect window and minimum in force.
    pub thresholds: Thresholds,
    /// Where the walk stopped early, if it did: an earlier summary or pruned output.
    pub walk_stopped_at: Option<usize>,
    /// Tokens the walk's candidates (pruned and duplicate outputs) would free together.
    pub reclaimable_tokens: usize,
    /// Whether those candidates were replaced (they are only when they free more than the
    /// minimum).
    pub batch_applied: bool,
    /// Tokens freed by this call, all rules together.
    pub tokens_freed: usize,
    /// One entry per tool output, in conversation order.
    pub outputs: Vec<OutputReport>,
    /// One entry per `trim_tool_result` call, in conversation order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trims: Vec<crate::TrimReport>,
    /// The calls whose inputs were cut again, as frozen as the outputs replaced again.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputReport>,
    /// The person's messages cut again, as frozen as the rest.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<MessageReport>,
    /// What time-based microcompact saw and did; absent when it is off or no previous request
    /// time is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub microcompact: Option<crate::MicrocompactReport>,
}

impl PruneReport {
    /// Tokens freed by replacing again, from the decision log, outputs (and cutting again
    /// inputs and the person's messages) in messages up to `message`: a request before this one
    /// already sent them as placeholders and previews, so a count the provider made of that
    /// request never included them.
    pub fn frozen_tokens_up_to(&self, message: usize) -> usize {
        let inputs = self
            .inputs
            .iter()
            .map(|input| (input.message, input.tokens_before, input.tokens_after));
        let messages = self
            .messages
            .iter()
            .map(|cut| (cut.message, cut.tokens_before, cut.tokens_after));
        self.tokens_freed_up_to(message, |reason| *reason == Reason::Frozen)
            + inputs
                .chain(messages)
                .filter(|(at, _, _)| *at <= message)
                .map(|(_, before, after)| before.saturating_sub(after))
                .sum::<usize>()
    }

    /// Tokens freed by outputs replaced for the first time by this call, in messages up to
    /// `message`.
    pub fn fresh_tokens_up_to(&self, message: usize) -> usize {
        self.tokens_freed_up_to(message, |reason| *reason != Reason::Frozen)
    }

    fn tokens_freed_up_to(&self, message: usize, counted: impl Fn(&Reason) -> bool) -> usize {
        self.outputs
            .iter()
            .filter(|output| output.message <= message && counted(&output.reason))
            .map(|output| output.tokens_before.saturating_sub(output.tokens_after))
            .sum()
    }

    /// Whether this call changed the request at all: an output replaced, an input or a message
    /// cut again.
    pub fn changed(&self) -> bool {
        self.replaced() > 0 || !self.inputs.is_empty() || !self.messages.is_empty()
    }

    /// How many outputs were replaced by this call.
    pub fn replaced(&self) -> usize {
        self.outputs
            .iter()
            .filter(|output| output.reason.replaces())
            .count()
    }

    /// The first message with an output replaced for the first time by this call: where this
    /// request stops repeating the one before it, and so the provider's cached prefix ends.
    pub fn first_fresh_message(&self) -> Option<usize> {
        self.outputs
            .iter()
            .filter(|output| output.reason.replaces() && output.reason != Reason::Frozen)
            .map(|output| output.message)
            .min()
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Protected => f.write_str("protected tool"),
            Reason::InsideBoundary => f.write_str("inside the boundary"),
            Reason::InsideWindow => f.write_str("inside the protect window"),
            Reason::Pruned => f.write_str("pruned"),
            Reason::SmallerThanPlaceholder => f.write_str("kept: smaller than a placeholder"),
            Reason::BelowMinimum => f.write_str("kept: batch below the minimum"),
            Reason::OverTurnBudget => f.write_str("over the turn budget: preview"),
            Reason::Duplicate { newer } => write!(f, "duplicate of {newer}"),
            Reason::Frozen => f.write_str("replaced again (frozen)"),
            Reason::AlreadyReplaced => f.write_str("already replaced"),
            Reason::BehindEarlierCompaction => f.write_str("behind an earlier compaction"),
            Reason::TrimmedByAgent => f.write_str("trimmed by the agent"),
            Reason::Superseded { by, at } => write!(f, "superseded by {by} at message {at}"),
            Reason::Microcompacted => f.write_str("cleared: the cache had expired"),
            Reason::KeptRecent => f.write_str("kept: among the most recent (microcompact)"),
            Reason::NotCompactable => f.write_str("kept: not a tool microcompact clears"),
        }
    }
}

/// One line per output, after a header with the totals: what `condense prune -v` prints and what
/// the snapshot tests lock down.
impl std::fmt::Display for PruneReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "boundary: message {}; protect window {} tokens; minimum {} tokens",
            self.boundary, self.thresholds.protect_tokens, self.thresholds.minimum_tokens
        )?;
        // A warm cache changes nothing; the JSON report still says what was measured.
        if let Some(micro) = self.microcompact.as_ref().filter(|micro| micro.cache_cold) {
            writeln!(
                f,
                "microcompact: idle {} min since the previous request (over {}): {} outputs cleared{}",
                micro.idle_minutes,
                micro.threshold_minutes,
                micro.cleared,
                if micro.cleared > 0 {
                    "; the budget and the walk wait for the next request"
                } else {
                    ""
                }
            )?;
        }
        if let Some(stop) = self.walk_stopped_at {
            writeln!(f, "walk stopped at message {stop}")?;
        }
        writeln!(
            f,
            "reclaimable {} tokens, batch {}; freed {} tokens; {} of {} outputs replaced",
            self.reclaimable_tokens,
            if self.batch_applied {
                "applied"
            } else {
                "not applied"
            },
            self.tokens_freed,
            self.replaced(),
            self.outputs.len()
        )?;
        for output in &self.outputs {
            writeln!(
                f,
                "  #{:<4} {:<16} {:>6} -> {:>6}  {}  [{}]",
                output.message,
                output.tool,
                output.tokens_before,
                output.tokens_after,
                output.reason,
                output.call_id
            )?;
        }
        for input in &self.inputs {
            writeln!(
                f,
                "  #{:<4} {:<16} {:>6} -> {:>6}  input cut again, as the log says  [{}]",
                input.message,
                "(call input)",
                input.tokens_before,
                input.tokens_after,
                input.call_id
            )?;
        }
        for cut in &self.messages {
            writeln!(
                f,
                "  #{:<4} {:<16} {:>6} -> {:>6}  the person's message cut again, as the log says",
                cut.message, "(message)", cut.tokens_before, cut.tokens_after
            )?;
        }
        Ok(())
    }
}
