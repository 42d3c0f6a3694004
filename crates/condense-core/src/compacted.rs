use serde::{Deserialize, Serialize};

/// Which phase replaced a tool output; the audit trail says it so a reader can tell a pruned output
/// (the original is in the store) from one that a summary absorbed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Phase {
    /// Phase 1's walk back over old outputs.
    Prune,
    /// Phase 1's per-turn budget: a preview was kept, the rest stored.
    TurnBudget,
    /// Phase 1's duplicate rule: replaced by a pointer to a newer identical output.
    Duplicate,
    /// The agent replaced it with its own summary (`trim_tool_result`).
    AgentTrim,
    /// A read made stale by a later call on the same path.
    Superseded,
    /// Time-based microcompact: cleared because the provider's cache had expired.
    Microcompact,
}

/// The audit marker left on a tool result that condense replaced.
///
/// It is what makes a replacement reversible and what stops the pruner's walk: an output that
/// carries it has been dealt with and is never measured or replaced again.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Compacted {
    /// When the replacement was made, in milliseconds since the Unix epoch (from an injectable
    /// clock, so tests can fix it).
    pub at_ms: u64,
    /// Which rule replaced the output.
    pub phase: Phase,
    /// Size of the original output in tokens, as counted when it was replaced.
    pub original_tokens: usize,
    /// Size of the original output in characters (Unicode scalar values).
    pub original_chars: usize,
    /// Where the original is kept; `condense recall HANDLE` gives it back.
    pub handle: String,
}
