//! The conversation model that every phase of condense works on.
//!
//! The model is deliberately wire-agnostic: the formats crate maps OpenAI, Anthropic and Claude Code
//! sessions onto it, and the phases (prune, split, summarize) only ever see these types. What a
//! format needs to write a message back exactly as it came (unknown fields, whether content was a
//! string or a list of blocks) travels along in [`WireRecord`]s that the phases never look into.

#![warn(missing_docs)]
mod compacted;
mod content_hash;
mod conversation;
mod memo;
mod message;
mod native;
mod pairs;
mod part;
#[cfg(test)]
mod test_parts;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;
pub mod tool_paths;
mod turns;
mod validate;

pub use compacted::{Compacted, Phase};
pub use content_hash::{Prehashed, hash_value};
pub use conversation::{Conversation, SideKind, SideRecord};
pub use memo::{Memos, MessageMemo};
pub use message::{
    ContentShape, HARNESS_SUMMARY_OPENINGS, HarnessSummary, Message, OPENCODE_SUMMARY_REQUEST,
    Role, SUMMARY_CLOSE, SUMMARY_OPEN, WireRecord, harness_summary_at,
    task_leads_a_summary_written_here,
};
pub use native::{
    LiveView, NATIVE_COMPACTION_TYPE, has_native_compaction, is_native_compaction,
    last_native_compaction,
};
pub use pairs::{CallSite, ResultSite, ToolPairs, answered_calls_from_end};
pub use part::{Image, Part, Text, Thinking, ToolCall, ToolOutput, ToolResult, plain_text};
pub use turns::user_turns;
pub use validate::{Finding, FindingKind, validate};

/// A JSON object as the wire formats carry it; key order is kept so files written back read the same.
pub type JsonMap = serde_json::Map<String, serde_json::Value>;
