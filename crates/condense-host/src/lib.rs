//! The host: the layered configuration and the pipeline that a harness or the CLI drives.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use condense_host::{Compactor, Config, SessionState, Sources};
//!
//! let config = Config::load(&Sources::discover(&std::env::current_dir()?, None)?)?;
//! let compactor = Compactor::from_config(&config)?;
//! let mut state = SessionState::default(); // keep it for the whole session
//! # let conversation = condense_core::Conversation::default();
//! let prepared = compactor.prepare(conversation, &mut state).await?;
//! // send prepared.conversation to the model; prepared.report says what was done
//! # Ok(()) }
//! ```

#![warn(missing_docs)]
mod compactor;
pub use condense_config as config;
mod error;
pub mod gate;
mod head;
mod human;
pub mod plugins;
pub mod refusal;
mod reply;
mod report;
mod state;
mod usage;

pub use compactor::{Compaction, Compactor};
pub use config::{
    BUILT_IN_MODELS, CachePrices, CompactionConfig, Config, ConfigError, ModelSettings,
    ModelWindow, ModelWindows, NativeMode, Origin, PluginSpec, ServeConfig, Setting, Settings,
    Source, Sources, StateLocation, StoreConfig, SummarizerConfig, SummarizerKind, TemplateChoice,
    Upstream, WalkWhen, glob_match,
};
pub use error::HostError;
pub use head::{FrozenHead, HeadOutcome, WholeSummary, history_hash, message_hash};
pub use human::render_report;
pub use plugins::{LoadedPlugin, PluginError};
pub use reply::ReplyLimit;
pub use report::{CompactReport, CompactionOutcome, FailureKind, NativeCompaction};
// What the host's public types mention, so a harness that depends on the host alone can name it.
pub use condense_compact::{Split, TailRule, TailSettings};
pub use condense_pruner::{
    Clock, Decision, DecisionLog, DirStore, FixedClock, MemoryStore, MicrocompactReport,
    MicrocompactSettings, OutputReport, PreviousRequest, PruneReport, PruneRequest, PruneSettings,
    Reason, Store, StoreError, Swept, SystemClock, Thresholds, handle_of, handles_in, is_handle,
};
pub use condense_summarize::{SummarizeError, SummarizeErrorKind, Summarizer};
pub use state::{CacheUse, Counted, ReportedUsage, Sample, SessionState, StateError};
pub use usage::{Measure, tools_tokens};

/// The README's Rust examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
mod readme {}

/// The Rust examples of the guide to embedding condense, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/embedding.md")]
mod docs_embedding {}

/// The plugin example of the configuration guide, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/configuration.md")]
mod docs_configuration {}
