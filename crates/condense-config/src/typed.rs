//! The effective configuration as types.
//!
//! The merged layers are read into [`Settings`], section by section, each by the struct of the
//! crate that uses it (`[prune]` by `condense_pruner::PruneRules`, `[compaction]` by the host's
//! [`CompactionConfig`] and `condense_compact::CompactionRules`, ...), so a key the code reads is
//! a field the compiler checks, not a string that silently reads as 0 when misspelt. No struct
//! has serde defaults: the embedded `config/condense.toml` must name every field, and every key
//! it names must be a field of a struct that reads its section ([`Sections::all_read`]); every
//! load checks both, the built-in layer being always merged in. That file is the one place a
//! default is written; the kind of each key (what a flag or variable must parse as) is read from
//! it too. Adding a key is a field with its doc in the struct that uses it and a line in the
//! file.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use condense_compact::CompactionRules;
use condense_pruner::{MicrocompactSettings, PruneRules, TrimRules};
use condense_summarize::{ExtractiveSettings, RemoteSettings};
use condense_tokenizer::Encoding;
use serde::de::{DeserializeOwned, Visitor};
use serde::{Deserialize, Deserializer};

use crate::{ConfigError, Origin, Setting};

/// Every section of the configuration, each read by the struct of the crate that uses it. A
/// section two crates read (`[compaction]`, `[summarizer]`) is read by each of their structs;
/// loading checks that every key of the file is a field of one of them.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// `[model]`: the model the session is sent to.
    pub model: ModelSettings,
    /// `[prune]`: phase 1's rules.
    pub prune: PruneRules,
    /// `[trim]`: what the agent may trim with `trim_tool_result`.
    pub trim: TrimRules,
    /// `[microcompact]`: what is cleared once the provider's cache has expired.
    pub microcompact: MicrocompactSettings,
    /// `[compaction]`: the template, the continuation and the circuit breaker.
    pub compaction: CompactionConfig,
    /// `[compaction]`: the cut's sizes and the prices that judge compacting early.
    pub compaction_rules: CompactionRules,
    /// `[summarizer]`: which summarizer, and what a bad answer does.
    pub summarizer: SummarizerConfig,
    /// `[summarizer]`: the offline summarizer's budget.
    pub extractive: ExtractiveSettings,
    /// `[summarizer]`: where and how a model is asked.
    pub remote: RemoteSettings,
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

/// `[compaction]`: the keys the host reads (the rest are [`CompactionRules`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct CompactionConfig {
    /// A built-in template.
    pub template: TemplateChoice,
    /// A template file of the team's own (`""` in the file: none). Wins over `template`.
    #[serde(deserialize_with = "unless_empty")]
    pub template_file: Option<PathBuf>,
    /// Which plugin's template, when several offer one (`""`: none).
    #[serde(deserialize_with = "unless_empty")]
    pub template_plugin: Option<String>,
    /// Appended to every summary prompt (`""`: none).
    #[serde(deserialize_with = "unless_empty")]
    pub custom_instructions: Option<String>,
    /// Told to the agent after an automatic compaction (`""`: nothing is sent).
    #[serde(deserialize_with = "unless_empty")]
    pub continuation: Option<String>,
    /// Summarizer failures in a row before automatic compaction stops.
    pub max_failures: u32,
}

/// `[summarizer]`: the keys the host reads (the rest are [`ExtractiveSettings`] and
/// [`RemoteSettings`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct SummarizerConfig {
    /// Which summarizer.
    pub kind: SummarizerKind,
    /// upstream: ask inside the agent's own request, sharing its cached prefix.
    pub fork: bool,
    /// What happens when a model's answer is rejected twice.
    pub on_bad_answer: OnBadAnswer,
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
    #[serde(deserialize_with = "socket_address")]
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
    /// `x-condense-key` (`""`: no key asked).
    #[serde(deserialize_with = "unless_empty")]
    pub auth_token_env: Option<String>,
    /// `auto`, `pass` or `emulate`: whether condense answers the providers' compaction
    /// endpoints itself.
    pub native_compaction: NativeMode,
    /// Whether a Chat Completions stream the client sent without `stream_options` is asked
    /// for its usage on the client's behalf.
    pub ask_stream_usage: bool,
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
#[serde(try_from = "String")]
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

/// What happens when a model's summary is rejected twice (`summarizer.on_bad_answer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum OnBadAnswer {
    /// The extractive summary stands in, and the report says so and why.
    Extractive,
    /// Nothing is written: the compaction fails (the proxy fails open).
    Fail,
}

impl OnBadAnswer {
    /// Every value, in the order the documentation lists them.
    pub const ALL: [OnBadAnswer; 2] = [OnBadAnswer::Extractive, OnBadAnswer::Fail];

    /// The name configuration uses.
    pub fn name(self) -> &'static str {
        match self {
            OnBadAnswer::Extractive => "extractive",
            OnBadAnswer::Fail => "fail",
        }
    }
}

impl TryFrom<String> for OnBadAnswer {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        named(&text, OnBadAnswer::ALL, OnBadAnswer::name, "choice")
    }
}

/// The summarizer `summarizer.kind` names. Exhaustive on purpose: a new kind is a compile error
/// wherever a summarizer is built from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum SummarizerKind {
    /// Offline and deterministic: the summary is read off the head.
    Extractive,
    /// Any Chat Completions server.
    OpenAi,
    /// The Anthropic Messages API.
    Anthropic,
    /// `condense serve` only: the request's own upstream, with the client's own credentials,
    /// asking the request's model (or `compaction_model`).
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
#[serde(try_from = "String")]
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

/// The merged layers, section by section, as the structs that read them ask for them.
pub(crate) struct Sections<'a> {
    root: toml::Table,
    values: &'a BTreeMap<String, (Setting, Origin)>,
    /// The fields of the structs that read each section so far.
    read: BTreeMap<String, BTreeSet<&'static str>>,
}

impl<'a> Sections<'a> {
    pub(crate) fn new(root: toml::Table, values: &'a BTreeMap<String, (Setting, Origin)>) -> Self {
        Sections {
            root,
            values,
            read: BTreeMap::new(),
        }
    }

    /// `[section]` as `T`. A value `T` refuses (a note with an unknown variable, an address
    /// that is none) is an error naming its key and where it was written.
    pub(crate) fn read<T: DeserializeOwned>(&mut self, section: &str) -> Result<T, ConfigError> {
        self.read
            .entry(section.to_owned())
            .or_default()
            .extend(fields_of::<T>());
        let table = self
            .root
            .get(section)
            .cloned()
            .unwrap_or_else(|| toml::Value::Table(toml::Table::new()));
        serde_path_to_error::deserialize(table).map_err(|error| {
            let key = format!("{section}.{}", error.path());
            let message = error.inner().message().trim().to_owned();
            match self.values.get(&key) {
                Some((_, origin)) => ConfigError::BadValue {
                    at: origin.to_string(),
                    key,
                    message,
                },
                None => ConfigError::Typed {
                    message: format!("{key}: {message}"),
                },
            }
        })
    }

    /// Every key was a field of a struct that read its section: a key of the built-in file
    /// that nothing reads would be a setting with no effect.
    pub(crate) fn all_read(&self) -> Result<(), ConfigError> {
        for (section, table) in &self.root {
            let Some(table) = table.as_table() else {
                continue;
            };
            let read = self.read.get(section);
            if let Some(key) = table
                .keys()
                .find(|key| !read.is_some_and(|fields| fields.contains(key.as_str())))
            {
                return Err(ConfigError::Typed {
                    message: format!("{section}.{key} is read by no setting"),
                });
            }
        }
        Ok(())
    }
}

/// The names of the fields a struct reads, as configuration writes them: what serde hands a
/// deserializer for a struct, caught before anything is read.
fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldProbe(&mut fields));
    fields
}

struct FieldProbe<'a>(&'a mut &'static [&'static str]);

#[derive(Debug)]
struct Probed;

impl std::fmt::Display for Probed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("fields probed")
    }
}

impl std::error::Error for Probed {}

impl serde::de::Error for Probed {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Probed
    }
}

impl<'de> Deserializer<'de> for FieldProbe<'_> {
    type Error = Probed;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Probed> {
        Err(Probed)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Probed> {
        *self.0 = fields;
        Err(Probed)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// `text` as one of `all`, by the names configuration uses; else what it might have been.
fn named<T: Copy, const N: usize>(
    text: &str,
    all: [T; N],
    name: fn(T) -> &'static str,
    what: &str,
) -> Result<T, String> {
    all.into_iter()
        .find(|item| name(*item) == text)
        .ok_or_else(|| {
            let names: Vec<&str> = all.into_iter().map(name).collect();
            format!("unknown {what} `{text}` (one of {})", names.join(", "))
        })
}

impl TryFrom<String> for NativeMode {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        named(&text, NativeMode::ALL, NativeMode::name, "mode")
    }
}

impl TryFrom<String> for SummarizerKind {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        named(
            &text,
            SummarizerKind::ALL,
            SummarizerKind::name,
            "summarizer",
        )
    }
}

impl TryFrom<String> for TemplateChoice {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        named(&text, TemplateChoice::ALL, TemplateChoice::name, "template")
    }
}

/// A text setting where `""` means none: `None` then, so that no caller tests for `""`.
fn unless_empty<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: From<String>,
{
    let text = String::deserialize(deserializer)?;
    Ok((!text.is_empty()).then(|| T::from(text)))
}

/// An IP address and port (`serve.listen`), with an example when it is not one.
fn socket_address<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SocketAddr, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse().map_err(|_| {
        serde::de::Error::custom(format!(
            "`{text}` is not an IP address and port (e.g. 127.0.0.1:8787)"
        ))
    })
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
    fn a_structs_fields_are_its_keys_as_configuration_writes_them() {
        let remote = fields_of::<RemoteSettings>();
        assert!(remote.contains(&"timeout_secs"), "{remote:?}");
        assert!(!remote.contains(&"timeout") && !remote.contains(&"counter"));
        assert!(fields_of::<PruneRules>().contains(&"placeholder"));
    }

    #[test]
    fn a_key_no_setting_reads_is_refused() {
        let mut root: toml::Table = toml::from_str(crate::BUILT_IN).unwrap();
        root["compaction"]
            .as_table_mut()
            .unwrap()
            .insert("tail_share".into(), toml::Value::Float(0.5));
        let values = BTreeMap::new();
        let mut sections = Sections::new(root, &values);
        let _: CompactionConfig = sections.read("compaction").unwrap();
        let _: CompactionRules = sections.read("compaction").unwrap();
        let error = sections.all_read().unwrap_err();
        assert!(
            error
                .to_string()
                .contains("compaction.tail_share is read by no setting"),
            "{error}"
        );
    }

    #[test]
    fn the_enums_name_what_the_template_crate_knows() {
        let builtin: Vec<&str> = condense_template::BUILTIN.iter().map(|(n, _)| *n).collect();
        let ours: Vec<&str> = TemplateChoice::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(ours, builtin);
    }
}
