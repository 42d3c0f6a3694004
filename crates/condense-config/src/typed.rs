//! The effective configuration as types.
//!
//! The merged layers deserialize into [`Settings`], so a key the code reads is a field the
//! compiler checks, not a string that silently reads as 0 when misspelt. Every struct denies
//! unknown fields and has no serde defaults: the embedded `config/condense.toml` must name every
//! field and nothing else, which every load checks (the built-in layer is always merged in). That
//! file is the one place a default is written; the kind of each key (what a flag or variable
//! must parse as) is read from it too. Adding a key is a field here and a line there.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

use condense_tokenizer::Encoding;

/// Every section of the configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Settings {
    /// `[model]`: the model the session is sent to.
    pub model: ModelSettings,
    /// `[prune]`: phase 1's rules.
    pub prune: PruneConfig,
    /// `[trim]`: what the agent may trim with `trim_tool_result`.
    pub trim: TrimConfig,
    /// `[microcompact]`: what is cleared once the provider's cache has expired.
    pub microcompact: MicrocompactConfig,
    /// `[compaction]`: when and how phase 2 cuts and summarizes.
    pub compaction: CompactionConfig,
    /// `[summarizer]`: who writes the summary.
    pub summarizer: SummarizerConfig,
    /// `[store]`: where originals are kept.
    pub store: StoreConfig,
    /// `[serve]`: the compacting proxy.
    pub serve: ServeConfig,
}

/// `[model]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ModelSettings {
    /// The model's context window, in tokens.
    pub context_window: usize,
    /// The most the model may write in one reply.
    pub max_output_tokens: usize,
    /// The tokenizer that counts for the trigger.
    #[serde(deserialize_with = "parsed")]
    pub encoding: Encoding,
}

/// `[prune]`; [`condense_pruner::PruneSettings`] is built from it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PruneConfig {
    /// Every layer's tools, joined (no layer removes one).
    pub protected_tools: Vec<String>,
    /// Nothing at or after this many user turns from the end is touched.
    pub skip_user_turns: usize,
    /// The boundary in tool calls for autonomous runs.
    pub skip_tool_calls: usize,
    /// The newest outputs up to this many tokens stay.
    pub protect_tokens: usize,
    /// Prune only when more than this many tokens are freed.
    pub minimum_tokens: usize,
    /// Scale the two above with the context window.
    pub adaptive_thresholds: bool,
    /// The per-turn budget of fresh outputs, in characters.
    pub turn_budget_chars: usize,
    /// Bytes of an output kept in its preview.
    pub preview_bytes: usize,
    /// Outputs shorter than this are never replaced as duplicates.
    pub duplicate_min_chars: usize,
    /// Whether a read made stale by a later call on its path is replaced first.
    pub supersede_reads: bool,
    /// When a harness's requests are walked.
    pub walk_when: WalkWhen,
    /// What stands in for a pruned output.
    pub placeholder: String,
    /// Appended to a preview.
    pub preview_note: String,
    /// Stands in for an output identical to a newer one.
    pub duplicate_note: String,
    /// Stands in for a superseded read.
    pub superseded_note: String,
}

/// When the walk may replace outputs in a harness's requests (`prune.walk_when`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum WalkWhen {
    /// Only when the request is due for compaction.
    #[default]
    Due,
    /// On every request.
    Always,
}

impl WalkWhen {
    /// Every value, in the order the documentation lists them.
    pub const ALL: [WalkWhen; 2] = [WalkWhen::Due, WalkWhen::Always];

    /// The name configuration uses.
    pub fn name(self) -> &'static str {
        match self {
            WalkWhen::Due => "due",
            WalkWhen::Always => "always",
        }
    }
}

/// `[trim]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TrimConfig {
    /// Whether a result older than the most recent one may be trimmed.
    pub allow_older: bool,
}

/// `[microcompact]`; [`condense_pruner::MicrocompactSettings`] is built from it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct MicrocompactConfig {
    /// Whether the rule runs.
    pub enabled: bool,
    /// Minutes of idle before the cache counts as cold.
    pub idle_minutes: u64,
    /// The most recent results of the tools that stay (at least 1).
    pub keep_recent: usize,
    /// The tools whose results are cleared (the last layer's list wins).
    pub tools: Vec<String>,
    /// What stands in for a cleared result.
    pub note: String,
}

/// `[compaction]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CompactionConfig {
    /// A built-in template.
    pub template: TemplateChoice,
    /// A template file of the team's own; `""` for none. Wins over `template`.
    pub template_file: String,
    /// Which plugin's template, when several offer one; `""` for none.
    pub template_plugin: String,
    /// Appended to every summary prompt; `""` for none.
    pub custom_instructions: String,
    /// Told to the agent after an automatic compaction; `""` sends nothing.
    pub continuation: String,
    /// `reserved = min(reserve_cap, max_output_tokens)`.
    pub reserve_cap: usize,
    /// The tail's share of the usable window.
    pub tail_ratio: f64,
    /// The tail budget's floor.
    pub min_tail_tokens: usize,
    /// The tail budget's ceiling.
    pub max_tail_tokens: usize,
    /// The tail keeps at least this many user turns.
    pub min_tail_turns: usize,
    /// A token the provider has not cached costs this many cache reads more than one it has:
    /// what a compaction pays to rewrite what it keeps (0 compacts only when the window is full).
    pub cache_rewrite_cost: f64,
    /// An output token costs this many cache reads: what a model's summary costs to write.
    pub output_cost: f64,
    /// Summarizer failures in a row before automatic compaction stops.
    pub max_failures: u32,
}

/// `[summarizer]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SummarizerConfig {
    /// Which summarizer.
    pub kind: SummarizerKind,
    /// upstream: ask inside the agent's own request, sharing its cached prefix.
    pub fork: bool,
    /// extractive: the summary's budget in tokens.
    pub budget_tokens: usize,
    /// extractive: each request is quoted up to this many characters.
    pub quote_chars: usize,
    /// openai / anthropic: the server.
    pub base_url: String,
    /// openai / anthropic: the model.
    pub model: String,
    /// A cheaper model for compaction; `""` uses `model`.
    pub compaction_model: String,
    /// The variable holding the API key; `""` sends none.
    pub api_key_env: String,
    /// How long one request may take.
    pub timeout_secs: u64,
    /// Attempts in all.
    pub max_attempts: u32,
    /// Each tool output sent to the summarizer is cut to this many characters.
    pub tool_output_chars: usize,
    /// The summarizing model's own window.
    pub context_window: usize,
    /// The longest summary asked for.
    pub max_summary_tokens: usize,
    /// `extractive` or `fail`: what happens when a model's answer is rejected twice.
    pub on_bad_answer: String,
}

/// `[store]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct StoreConfig {
    /// Where originals of replaced outputs are kept.
    pub dir: PathBuf,
}

/// `[serve]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ServeConfig {
    /// The address the proxy listens on.
    #[serde(deserialize_with = "parsed")]
    pub listen: SocketAddr,
    /// The OpenAI-compatible upstream's origin.
    #[serde(deserialize_with = "parsed")]
    pub openai_upstream: Upstream,
    /// The Anthropic upstream's origin.
    #[serde(deserialize_with = "parsed")]
    pub anthropic_upstream: Upstream,
    /// Where the sessions' state is kept.
    #[serde(deserialize_with = "parsed")]
    pub state: StateLocation,
    /// Hours a session's state is kept after its last request; `0`: forever.
    pub state_ttl_hours: u64,
    /// The longest a read or a save of a session's state may take before the request goes on
    /// without it.
    pub state_timeout_ms: u64,
    /// Hours an original named by no session state is kept; `0`: forever.
    pub originals_ttl_hours: u64,
    /// The largest request body accepted.
    pub body_limit_bytes: usize,
    /// The longest the upstream may stay silent.
    pub upstream_timeout_secs: u64,
    /// The environment variable holding the key every request must carry in
    /// `x-condense-key`; `""`: no key asked.
    pub auth_token_env: String,
    /// `auto`, `pass` or `emulate`: whether condense answers the providers' compaction
    /// endpoints itself.
    pub native_compaction: NativeMode,
}

/// An upstream's origin (`serve.openai_upstream`, `serve.anthropic_upstream`): an absolute
/// http(s) URL with a host and no query or fragment. The request's own path is appended to it,
/// so a gateway's path prefix is kept. Checked here, once, for the configuration and for a
/// library that builds the proxy's settings itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream(String);

impl Upstream {
    /// The origin as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Upstream {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let parsed =
            url::Url::parse(text).map_err(|error| format!("`{text}` is not a URL ({error})"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(format!("`{text}` is not an http:// or https:// origin"));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(format!(
                "`{text}` has a query or fragment: give the origin (and a path prefix) only"
            ));
        }
        Ok(Upstream(text.to_owned()))
    }
}

/// Where the proxy keeps its sessions' state (`serve.state`). Exhaustive on purpose: a new kind
/// of store is a compile error wherever a store is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateLocation {
    /// The user's state directory (`""`).
    UserDirectory,
    /// A directory of its own.
    Directory(PathBuf),
    /// A Redis server replicas share (`redis://HOST:PORT/DB`, or `rediss://` over TLS).
    Redis(String),
}

impl FromStr for StateLocation {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.is_empty() {
            Ok(StateLocation::UserDirectory)
        } else if text.starts_with("redis://") || text.starts_with("rediss://") {
            Ok(StateLocation::Redis(text.to_owned()))
        } else if text.trim().is_empty() {
            Err("must name a directory or a redis:// URL (or be \"\" for the user's state directory)".to_owned())
        } else {
            Ok(StateLocation::Directory(PathBuf::from(text)))
        }
    }
}

/// Whether the proxy answers the providers' own compaction itself or passes it on
/// (`serve.native_compaction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum NativeMode {
    /// Pass to the providers' own hosts (`api.openai.com`, `api.anthropic.com`), emulate for
    /// any other upstream.
    #[default]
    Auto,
    /// Always pass: the upstream compacts (or refuses).
    Pass,
    /// Always answer in the upstream's place.
    Emulate,
}

impl NativeMode {
    /// Every value, in the order the documentation lists them.
    pub const ALL: [NativeMode; 3] = [NativeMode::Auto, NativeMode::Pass, NativeMode::Emulate];

    /// The name configuration uses.
    pub fn name(self) -> &'static str {
        match self {
            NativeMode::Auto => "auto",
            NativeMode::Pass => "pass",
            NativeMode::Emulate => "emulate",
        }
    }
}

/// The summarizer `summarizer.kind` names. Exhaustive on purpose: a new kind is a compile error
/// wherever a summarizer is built from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum SummarizerKind {
    /// Offline and deterministic: the summary is read off the head.
    #[serde(rename = "extractive")]
    Extractive,
    /// Any Chat Completions server.
    #[serde(rename = "openai")]
    OpenAi,
    /// The Anthropic Messages API.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// `condense serve` only: the request's own upstream, with the client's own credentials,
    /// asking the request's model (or `compaction_model`).
    #[serde(rename = "upstream")]
    Upstream,
}

impl SummarizerKind {
    /// Every kind, in the order the documentation lists them.
    pub const ALL: [SummarizerKind; 4] = [
        SummarizerKind::Extractive,
        SummarizerKind::OpenAi,
        SummarizerKind::Anthropic,
        SummarizerKind::Upstream,
    ];

    /// The name configuration uses.
    pub fn name(self) -> &'static str {
        match self {
            SummarizerKind::Extractive => "extractive",
            SummarizerKind::OpenAi => "openai",
            SummarizerKind::Anthropic => "anthropic",
            SummarizerKind::Upstream => "upstream",
        }
    }

    /// Whether it calls a model over the network.
    pub fn is_remote(self) -> bool {
        self != SummarizerKind::Extractive
    }
}

impl std::fmt::Display for SummarizerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One of the built-in templates `compaction.template` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum TemplateChoice {
    /// Goal, Instructions, Discoveries, Accomplished, Relevant files / directories.
    Structured,
    /// A summary anchored on the session's intent and state.
    Anchored,
    /// The long form.
    Detailed,
}

impl TemplateChoice {
    /// Every built-in, as `condense template list` shows them.
    pub const ALL: [TemplateChoice; 3] = [
        TemplateChoice::Structured,
        TemplateChoice::Anchored,
        TemplateChoice::Detailed,
    ];

    /// The name configuration and [`condense_template::Template::builtin`] use.
    pub fn name(self) -> &'static str {
        match self {
            TemplateChoice::Structured => "structured",
            TemplateChoice::Anchored => "anchored",
            TemplateChoice::Detailed => "detailed",
        }
    }
}

/// A value written as its `FromStr` text (`"o200k_base"`).
fn parsed<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: std::fmt::Display,
{
    let text = String::deserialize(deserializer)?;
    text.parse().map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_enums_name_what_the_template_crate_knows() {
        let builtin: Vec<&str> = condense_template::BUILTIN.iter().map(|(n, _)| *n).collect();
        let ours: Vec<&str> = TemplateChoice::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(ours, builtin);
    }
}
