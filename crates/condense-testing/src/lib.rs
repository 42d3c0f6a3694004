//! Snapshot a team's compaction with insta in three lines.
//!
//! ```rust,no_run
//! #[tokio::test]
//! async fn our_reference_session() {
//!     condense_testing::assert_compaction!("tests/reference.jsonl", config = "condense.toml");
//! }
//! ```
//!
//! The session is compacted by the [`Compactor`] the configuration describes (its plugins loaded),
//! with originals kept in memory and the clock fixed, so the same input always gives the same
//! snapshot. The snapshot is what a reviewer needs: one block per message as the model will see
//! it (role, tool, tokens, the text cut to a readable length, placeholders and the summary in
//! full), then the
//! report, with what varies (the elapsed time, absolute paths) redacted. Variants:
//! `window = 32_000` sets the context window, `prune_only = true` runs phase 1 alone, and
//! `now = "2025-07-17T21:00:00Z"` compacts as of that time instead of [`FIXED_NOW_MS`] (which is
//! months after any recorded session, so time-based microcompact clears old outputs of sessions
//! whose format timestamps its messages, as it would for a person resuming one; a time minutes
//! after the session's last reply snapshots a warm cache instead). Paths are relative to the
//! crate under test. Works in `#[test]` and `#[tokio::test]` alike: the
//! compaction runs on a thread of its own.

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

use condense_core::{Conversation, Message, Part};
use condense_host::{Compactor, Config, MemoryStore, Sources, plugins::load_all};
use condense_text::{Limit, Marker, cut};
use condense_tokenizer::TokenCounter;

#[doc(hidden)]
pub use insta;

/// The fixed time every snapshot is made at: 2026-01-01T00:00:00Z.
pub const FIXED_NOW_MS: u64 = 1_767_225_600_000;

/// Characters of a text part or an output shown in a block; placeholders are always whole.
pub const SHOWN_CHARS: usize = 240;

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// A configuration file, the only layer besides the built-in one (no user or project file,
    /// no environment: a snapshot must not depend on the machine).
    pub config: Option<PathBuf>,
    /// The model's context window, over the configuration's.
    pub context_window: Option<usize>,
    /// Phase 1 alone.
    pub prune_only: bool,
    /// The time of the request (RFC 3339) instead of [`FIXED_NOW_MS`].
    pub now: Option<String>,
}

/// Why a session could not be rendered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestingError {
    /// The session file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The session is not one condense reads.
    #[error("{path}: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Why.
        source: condense_formats::FormatError,
    },
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] condense_host::ConfigError),
    /// A plugin could not be loaded, or the pipeline could not run.
    #[error(transparent)]
    Host(#[from] condense_host::HostError),
    /// A plugin could not be loaded.
    #[error(transparent)]
    Plugin(#[from] condense_host::PluginError),
    /// `now` is not an RFC 3339 time.
    #[error("now: {0}")]
    Now(String),
    /// The runtime could not start, or the compaction thread died.
    #[error("{0}")]
    Runtime(String),
}

/// Compacts `session` as `options` say and renders it for a snapshot, with `base` (the crate's
/// folder) the root of relative paths and redacted from the text.
pub fn render(base: &Path, session: &Path, options: &Options) -> Result<String, TestingError> {
    let path = base.join(session);
    let bytes = std::fs::read(&path).map_err(|source| TestingError::Read {
        path: path.clone(),
        source,
    })?;
    let (format, conversation) =
        condense_formats::read(&bytes, None).map_err(|source| TestingError::Format {
            path: path.clone(),
            source,
        })?;
    let mut sources = Sources {
        explicit: options.config.as_ref().map(|config| base.join(config)),
        ..Sources::default()
    };
    if let Some(window) = options.context_window {
        sources.flags.push((
            "window".into(),
            "model.context_window".into(),
            window.to_string(),
        ));
    }
    let now = match &options.now {
        Some(text) => condense_core::time::parse_rfc3339(text).map_err(TestingError::Now)?,
        None => FIXED_NOW_MS,
    };
    let config = Config::load(&sources)?;
    let (plugins, _warnings) = load_all(&config.plugins)?;
    let compactor = Compactor::with_plugins(&config, &plugins)?
        .with_store(Box::new(MemoryStore::new()))
        .with_clock(Box::new(condense_host::FixedClock(now)));
    let prune_only = options.prune_only;
    let input = conversation.clone();
    // A thread of its own, so that a #[tokio::test] can call this without nesting runtimes.
    let compaction = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|error| TestingError::Runtime(error.to_string()))?;
                let run = if prune_only {
                    runtime.block_on(compactor.prune(input))
                } else {
                    runtime.block_on(compactor.compact(input))
                };
                run.map_err(TestingError::from)
            })
            .join()
            .map_err(|_| TestingError::Runtime("the compaction thread panicked".into()))?
    })?;

    let mut out = format!(
        "{} ({format}): {} messages -> {}\n\n",
        session.display(),
        conversation.messages.len(),
        compaction.conversation.messages.len()
    );
    out.push_str(&blocks(&compaction.conversation, compactor.counter()));
    let mut report = serde_json::to_value(&compaction.report)
        .map_err(|error| TestingError::Runtime(error.to_string()))?;
    report["elapsed_ms"] = serde_json::Value::String("[elapsed]".into());
    out.push_str("\n--- report ---\n");
    out.push_str(
        &serde_json::to_string_pretty(&report)
            .map_err(|error| TestingError::Runtime(error.to_string()))?,
    );
    out.push('\n');
    Ok(out.replace(&base.display().to_string(), "<crate>"))
}

/// One block per message as the model will see it.
pub fn blocks(conversation: &Conversation, counter: &dyn TokenCounter) -> String {
    let pairs = conversation.tool_pairs();
    let tokens = counter.count_each(&conversation.messages);
    let mut out = String::new();
    for (index, message) in conversation.messages.iter().enumerate() {
        out.push_str(&header(index, message, tokens[index]));
        for part in &message.parts {
            let line = match part {
                // What condense wrote (a summary, the continuation) is what the review is about:
                // in full. What the session said is cut to a readable length.
                Part::Text(text) if message.is_compaction_summary() || message.generated => {
                    format!("text: {}", text.text)
                }
                Part::Text(text) => format!("text: {}", shown(&text.text)),
                Part::ToolCall(call) => format!(
                    "call {} ({}): {}",
                    call.name,
                    call.id,
                    shown(&call.input.to_string())
                ),
                Part::ToolResult(result) => {
                    let tool = pairs
                        .tool_name(&conversation.messages, result)
                        .unwrap_or("(unknown tool)");
                    let text = result.content.text();
                    // A placeholder is what the review is about: always in full.
                    let body = if result.compacted.is_some() {
                        text.into_owned()
                    } else {
                        shown(&text)
                    };
                    format!("result of {tool} ({}): {body}", result.call_id)
                }
                Part::Image(_) => "image".to_owned(),
                Part::Thinking(thinking) => format!("thinking: {}", shown(&thinking.text)),
                Part::Opaque { value } => format!("opaque: {}", shown(&value.to_string())),
            };
            for (n, text) in line.lines().enumerate() {
                out.push_str(if n == 0 { "  " } else { "    " });
                out.push_str(text);
                out.push('\n');
            }
        }
    }
    out
}

fn header(index: usize, message: &Message, tokens: usize) -> String {
    let mut tags = Vec::new();
    if message.is_compaction_summary() {
        tags.push("summary");
    }
    if message.generated {
        tags.push("generated");
    }
    if message.is_user_turn() {
        tags.push("user turn");
    }
    format!(
        "[{index}] {}{} · {} tokens\n",
        message.role,
        if tags.is_empty() {
            String::new()
        } else {
            format!(" ({})", tags.join(", "))
        },
        condense_text::thousands(tokens)
    )
}

fn shown(text: &str) -> String {
    let one_line = text.replace('\n', "⏎");
    cut(
        &one_line,
        Limit::Chars(SHOWN_CHARS),
        Marker::Count(|left| format!(" […{left} more characters]")),
    )
    .into_owned()
}

/// Compacts a session and snapshots the rendering with insta. Arguments after the path, in any
/// order: `config = "condense.toml"`, `window = 32_000`, `prune_only = true`; paths are relative
/// to the crate under test.
#[macro_export]
macro_rules! assert_compaction {
    ($session:expr $(, $key:ident = $value:expr)* $(,)?) => {{
        #[allow(unused_mut)]
        let mut options = $crate::Options::default();
        $( $crate::assert_compaction!(@set options, $key, $value); )*
        let rendered = $crate::render(
            ::std::path::Path::new(env!("CARGO_MANIFEST_DIR")),
            ::std::path::Path::new($session),
            &options,
        )
        .unwrap_or_else(|error| panic!("condense_testing: {error}"));
        $crate::insta::assert_snapshot!(rendered);
    }};
    (@set $options:ident, config, $value:expr) => {
        $options.config = Some(::std::path::PathBuf::from($value));
    };
    (@set $options:ident, window, $value:expr) => {
        $options.context_window = Some($value);
    };
    (@set $options:ident, prune_only, $value:expr) => {
        $options.prune_only = $value;
    };
    (@set $options:ident, now, $value:expr) => {
        $options.now = Some(::std::string::String::from($value));
    };
}
