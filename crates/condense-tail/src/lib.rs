//! When to compact, and where to cut.
//!
//! Compaction is due when the conversation no longer leaves room for the model's reply:
//! `tokens >= usable`, `usable = context_window - reserved`, `reserved = min(20,000,
//! max_output_tokens)` (`>=`: the next call must still fit). The cut keeps a tail of recent whole
//! user turns within a budget and hands everything before it, the head, to the summarizer. The
//! leading System messages (the agent's instructions) are pinned: never summarized, kept in front.

#![warn(missing_docs)]
mod budget;
mod split;

pub use budget::{TailSettings, is_due, tail_budget, usable};
pub use split::{Split, TailRule, split};
