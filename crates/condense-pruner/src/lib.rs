//! Phase 1 of condense: prune old tool outputs, no model call.
//!
//! Tool outputs are the bulk of an agent session and the part the agent needs least once it has
//! acted on them. The pruner replaces old ones with a short placeholder (what tool, how big, the
//! handle of the stored original) and leaves everything else — user messages, assistant text,
//! tool calls — as it was. These rules decide, each from an agent or proposal that uses it:
//!
//! - the **walk** (opencode): from the end back, skipping the last user turns, keep the newest
//!   outputs up to a protect window and replace the older ones, if that frees enough;
//! - the **per-turn budget** (Claude Code): one turn's fresh outputs may not exceed a number of
//!   characters; the largest are cut to a preview;
//! - **duplicates** (hermes-agent): an output identical to a newer one points to it;
//! - **superseded reads** (Claude Code): a read that a later edit, write or read of the same
//!   path made stale goes first;
//! - **frozen decisions** (Claude Code): a decision, once made, is repeated byte for byte, so a
//!   provider's prompt cache survives from one request to the next;
//! - **agent trims** (the `trim_tool_result` proposal): the agent replaces a result it has used
//!   with its own summary, by calling a tool ([`TRIM_TOOL`]);
//! - **time-based microcompact** (Claude Code): after an idle gap longer than the provider's
//!   cache lives, the old results of common tools are cleared at once, and the budget and the
//!   walk wait for the next request.
//!
//! Originals go to a [`Store`] before the conversation changes: if one cannot be stored, nothing
//! is replaced.

#![warn(missing_docs)]
mod clock;
mod decisions;
mod inputs;
mod microcompact;
mod note;
mod person;
mod prune;
mod report;
mod settings;
mod store;
mod trim;

#[cfg(test)]
mod test_support;

pub use clock::{Clock, FixedClock, SystemClock};
pub use condense_defaults::DefaultsError;
pub use decisions::{Decision, DecisionLog, DecisionLogError, InputCut, MessageCut, PartCut};
pub use microcompact::{MicrocompactReport, MicrocompactSettings, PreviousRequest};
pub use note::{Note, NoteError};
pub use person::person_key;
pub use prune::{PruneError, PruneRequest, Pruner, boundary, boundary_by_calls, boundary_for};
pub use report::{InputReport, MessageReport, OutputReport, PruneReport, Reason};
pub use settings::{
    DUPLICATE_VARIABLES, INPUT_VARIABLES, PREVIEW_VARIABLES, PruneRules, PruneSettings,
    SUPERSEDED_VARIABLES, Thresholds, TrimRules, WalkWhen,
};
pub use store::{
    DirStore, MemoryStore, ReadThrough, Store, StoreError, Swept, handle_of, handles_in, is_handle,
    stored_output,
};
pub use trim::{
    TRIM_TOOL, TRIM_TOOL_DESCRIPTION, TrimOutcome, TrimRefusal, TrimReport, trim_tool_parameters,
};
