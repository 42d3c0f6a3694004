//! Given a conversation and a decision to compact, the next conversation.
//!
//! One crate owns the whole rebuild: when compaction is due, where the conversation is cut,
//! what must outlive the summary besides the tail (carried messages), and how the summary, the
//! tail and the continuation message are put back together. The prompts and the parsing of the
//! summarizer's answer live in `condense-template`; running the phases in order lives in the host.
//!
//! Compaction is due when the conversation no longer leaves room for the model's reply:
//! `tokens >= usable`, `usable = context_window - reserved`, `reserved = min(20,000,
//! max_output_tokens)` (`>=`: the next call must still fit). The cut keeps a tail of recent whole
//! user turns within a budget and hands everything before it, the head, to the summarizer. The
//! leading System messages (the agent's instructions) are pinned: never summarized, kept in front;
//! so is an autonomous run's task once a compaction has kept it in front of its summary
//! ([`leads_the_summary`]).

#![warn(missing_docs)]
mod budget;
mod carried;
mod reassemble;
mod split;

pub use budget::{
    CompactionRules, EarlyCompaction, TailSettings, is_due, pays_at_a_cold_cache, pays_to_compact,
    tail_budget, usable, wider_tail_pays,
};
pub use carried::{carried, newest_within};
pub use reassemble::{
    OPENCODE_CONTINUATION, previous_summary, reassemble, reposition_side, summary_message,
    summary_message_continued,
};
pub use split::{Split, TailPreviews, TailRule, leads_the_summary, pinned, split, split_counted};
