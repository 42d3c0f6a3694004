use condense_pruner::PruneReport;
use condense_tail::Split;
use serde::Serialize;

use crate::usage::Measure;

/// What phase 2 did, or why it did not run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CompactionOutcome {
    /// Only phase 1 was asked for.
    PruneOnly,
    /// After pruning the conversation is under the threshold.
    NotDue,
    /// Due, but the tail is everything after the pinned messages: there is no head.
    NothingToCompact,
    /// Due, but automatic compaction stopped for this session after repeated failures.
    CircuitOpen { consecutive_failures: u32 },
    /// The summarizer failed; the conversation is the pruned one.
    Failed {
        summarizer: String,
        error: String,
        consecutive_failures: u32,
    },
    Summarized {
        summarizer: String,
        split: Split,
        /// Protected outputs and recent user turns from the head, kept verbatim after the summary.
        carried_messages: usize,
        /// Outputs of the last exchange cut to previews because each alone was over the tail
        /// budget (the tail always holds the last exchange).
        #[serde(skip_serializing_if = "is_zero")]
        previewed_outputs: usize,
        summary_tokens: usize,
        missing_sections: Vec<String>,
    },
}

/// Everything one call did, with the tokens before and after each phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactReport {
    /// The trigger's count before anything was done, and where it came from.
    pub measured: Measure,
    /// Compaction is due at this many tokens (`context_window - reserved`).
    pub usable: usize,
    pub tokens_before: usize,
    pub prune: PruneReport,
    pub tokens_after_prune: usize,
    pub compaction: CompactionOutcome,
    pub tokens_after: usize,
    /// Whether the result is under the threshold; when it is not, `note` says why. A compaction
    /// that does not get under is reported, never retried in a loop.
    pub under_threshold: bool,
    pub note: Option<String>,
    pub elapsed_ms: u64,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}
