//! The markers a summary is laid out with: written by the summarizer and the ledger, read back
//! by [`super::previous`] when a later compaction folds the summary in. One place, so the writer
//! and the reader cannot drift apart (and so neither module imports the other for them).

/// The heading the ledger starts with.
pub const LEDGER_HEADING: &str = "## Ledger";
/// What follows a path in the ledger: the last tool that touched it.
pub(crate) const LAST_TOOL: &str = " (last: ";
/// How the line before a quoted summary of an agent's own compaction opens; the agent's name
/// and how it is quoted follow.
pub(crate) const EARLIER_BY: &str = "Earlier summary by ";
/// How a whole quoted summary is said to be quoted.
pub(crate) const IN_FULL: &str = "quoted in full";
/// Where a quote was cut.
pub(crate) const CUT_MARK: &str = " […]";
/// What follows the start of a request that the compaction keeps whole beside the summary (after
/// it, or, an autonomous run's task, before it): the summary quotes only enough of it to say
/// which request it is.
pub(crate) const KEPT_WHOLE: &str = " (kept whole in the conversation)";
/// [`KEPT_WHOLE`] as summaries said it before the task could come first, still read in theirs.
pub(crate) const KEPT_WHOLE_AFTER: &str = " (kept whole after this summary)";
/// The line the agent's plan follows, one `- [status] step` line a step.
pub(crate) const PLAN: &str = "Plan:";
