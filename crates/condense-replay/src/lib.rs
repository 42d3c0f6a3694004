//! What a compaction policy costs, request by request, against the provider's prompt cache.
//!
//! Every compaction trades tokens against the cache: pruning an old output makes every later
//! request smaller, but the request after it pays a cache write from that point instead of a
//! read. This crate answers whether that pays on a team's own sessions:
//!
//! 1. [`Recording::of`] turns a saved session back into the requests its harness made (each
//!    assistant message answered one request whose input was everything before it). Read the
//!    session with [`condense_formats::read_whole`]: a Codex log that Codex compacted is then
//!    replayed from its start, not from its last compaction.
//! 2. A [`Policy`] rebuilds each request as that policy would have sent it, keeping its own state
//!    from request to request: `recorded`, `none`, `claude-code`, `opencode`, `hermes`, and
//!    condense itself ([`policy`]).
//! 3. A model of the provider's cache ([`cache`]) splits each request's input into cache reads,
//!    writes and uncached tokens, and the [`PriceTable`] prices them.
//!
//! A subagent works in a context of its own (Claude Code's Task tool): [`replay_session`] replays
//! each of a session's subagents ([`condense_formats::subagents`], or Claude Code 2's logs of
//! their own) on its own and adds the whole session up.
//!
//! Claude Code logs carry Anthropic's own accounting of every request; the `recorded` policy
//! reproduces it ([`Agreement`]), after a [`Calibration`] fitted on the same log turns condense's
//! token counts into Anthropic's and adds the system prompt and tools the log leaves out.
//!
//! ```no_run
//! # fn run(conversation: condense_core::Conversation) -> Result<(), condense_replay::ReplayError> {
//! use std::sync::Arc;
//! use condense_replay::{PriceTable, Provider, Recording, ReplaySettings, Ttl, policy};
//!
//! let counter: Arc<dyn condense_tokenizer::TokenCounter> =
//!     Arc::new(condense_tokenizer::Tiktoken::default());
//! let mut policies: Vec<Box<dyn condense_replay::Policy>> = vec![
//!     Box::new(policy::Recorded),
//!     Box::new(policy::ClaudeCode::new(counter.clone())),
//! ];
//! let settings = ReplaySettings {
//!     provider: Provider::Anthropic,
//!     ttl: Ttl::FiveMinutes,
//!     prices: PriceTable::built_in()?,
//!     context_window: 200_000,
//!     max_output_tokens: 32_000,
//! };
//! let replay = condense_replay::replay(&Recording::of(conversation), &mut policies, &settings,
//!     counter, &mut |_| {})?;
//! for result in &replay.policies {
//!     println!("{}: ${:.2}", result.name, result.cost_usd);
//! }
//! # Ok(()) }
//! ```

#![warn(missing_docs)]
pub mod cache;
pub mod plot;
pub mod policy;
mod prices;
mod prompt;
mod recording;
pub mod retention;
mod run;
mod stand_in;

pub use cache::{Ttl, Usage};
pub use policy::{Model, Policy, Prepared, SummarizerCall, SummarizerInput};
pub use prices::{AnthropicPrices, BUILT_IN_PRICES, OpenAiPrices, PriceTable};
pub use prompt::{
    AfterSummary, Calibration, FIT_TOLERANCE, IDENTITY, Point, Prompt, SCALES, content_hash,
};
pub use recording::{RecordedUsage, Recording, Step};
pub use run::{
    Agreement, NotReplayed, PolicyResult, Progress, Provider, RecordedFigures, Replay,
    ReplaySettings, Row, RowKind, SubagentRecording, SubagentReplay, replay, replay_session,
    replay_sized,
};
pub use stand_in::SummaryLength;

/// Why a replay could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// A price table that cannot be read.
    #[error("the price table {path}: {message}")]
    Prices {
        /// The file.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// A policy failed on a request.
    #[error("the {policy} policy: {message}")]
    Policy {
        /// The policy.
        policy: String,
        /// What went wrong.
        message: String,
    },
    /// The chart could not be drawn or written.
    #[error("cannot draw the chart: {0}")]
    Plot(String),
}
