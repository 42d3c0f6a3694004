//! How an agent's log is read: as the model sees it now, or whole. The log readers
//! ([`crate::claude_code`], [`crate::codex`]) take it; [`crate::harness`] reads back what they
//! flag, so it lives apart from both.

/// How a session log is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// From the agent's last compaction on, as the model sees it now.
    AsTheModelSeesIt,
    /// Everything the log holds, what the agent wrote when it compacted flagged
    /// ([`RESTATES`]).
    Whole,
}

/// The wire field that flags, in a log read whole, a message an agent wrote when it compacted:
/// it restates history that the log also holds as it first happened.
pub(crate) const RESTATES: &str = "condense_restates";
