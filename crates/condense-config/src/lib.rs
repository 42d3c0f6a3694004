//! Layered TOML configuration.
//!
//! Layers, later wins: the built-in file (`config/condense.toml`, embedded), the user's
//! (`$XDG_CONFIG_HOME/condense/condense.toml`), the project's (`condense.toml` or
//! `.condense.toml`, the nearest one upward from the working directory), an explicit file, and
//! `CONDENSE_<SECTION>_<KEY>` environment variables. `prune.protected_tools` is the union of all
//! layers. Every key is checked against the schema, every value against its kind and range; the
//! first problem is an error with its file, line and column, and nothing is half-loaded.

#![warn(missing_docs)]

mod error;
mod layer;
mod models;
mod schema;
mod typed;
mod value;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use condense_compact::TailSettings;
use condense_pruner::PruneSettings;
use condense_tokenizer::Encoding;

pub use condense_pruner::WalkWhen;
pub use error::ConfigError;
pub use layer::PluginSpec;
pub use models::{BUILT_IN_MODELS, CachePrices, ModelWindow, ModelWindows, glob_match};
pub use typed::{
    CompactionConfig, ModelSettings, NativeMode, OnBadAnswer, ServeConfig, Settings, StateLocation,
    StoreConfig, SummarizerConfig, SummarizerKind, TemplateChoice, Upstream,
};
pub use value::{Origin, Setting, Source};

/// The built-in layer: every key with its default.
pub const BUILT_IN: &str = condense_defaults::CONFIG;

/// The files and variables to read, in layer order. [`Sources::discover`] finds them the way
/// the CLI does; tests and harnesses can name them directly.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// The user's file, when it exists.
    pub user: Option<PathBuf>,
    /// The nearest project file upward from the working directory.
    pub project: Option<PathBuf>,
    /// `--config FILE`.
    pub explicit: Option<PathBuf>,
    /// `(name, value)` pairs; only `CONDENSE_*` ones are read.
    pub env: Vec<(String, String)>,
    /// Command-line settings, the last layer: `(flag, key, value)`, such as
    /// `("--context-window", "model.context_window", "32000")`.
    pub flags: Vec<(String, String, String)>,
}

impl Sources {
    /// The user's file (when it exists), the nearest project file upward from `cwd`, the
    /// explicit file if any, and the process's `CONDENSE_*` variables. Other variables are never
    /// read, so one that is not UTF-8 (`FOO=$'\xff'`) is no concern; a `CONDENSE_*` setting
    /// whose value is not is an error naming it.
    pub fn discover(cwd: &Path, explicit: Option<PathBuf>) -> Result<Sources, ConfigError> {
        let config_home = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")));
        let user = config_home
            .map(|home| home.join("condense/condense.toml"))
            .filter(|path| path.is_file());
        let project = cwd.ancestors().find_map(|dir| {
            ["condense.toml", ".condense.toml"]
                .iter()
                .map(|name| dir.join(name))
                .find(|path| path.is_file())
        });
        let mut env = Vec::new();
        for (name, value) in std::env::vars_os() {
            let Some(name) = name.to_str().filter(|name| name.starts_with("CONDENSE_")) else {
                continue;
            };
            let value = match value.into_string() {
                Ok(value) => value,
                // CONDENSE_TRANSCRIPTS and the like are paths, which need not be UTF-8: only a
                // setting's value must be text.
                Err(_) if env_setting(name).is_none() => continue,
                Err(_) => {
                    return Err(ConfigError::NotUnicode {
                        name: name.to_owned(),
                    });
                }
            };
            env.push((name.to_owned(), value));
        }
        Ok(Sources {
            user,
            project,
            explicit,
            env,
            flags: Vec::new(),
        })
    }
}

/// The effective configuration: the typed [`Settings`] every phase reads, and beside them the
/// merged layers with the origin of each value, for `config show` and for errors.
#[derive(Debug, Clone)]
pub struct Config {
    values: BTreeMap<String, (Setting, Origin)>,
    /// Every layer's protected tools with where each was named.
    protected: Vec<(String, Origin)>,
    settings: Settings,
    /// The `[[plugins]]` of every layer, in layer order.
    pub plugins: Vec<PluginSpec>,
    /// `[models]` of every layer (later layers first), then the built-in table.
    models: ModelWindows,
}

impl Config {
    /// The built-in configuration alone.
    pub fn built_in() -> Result<Config, ConfigError> {
        Config::load(&Sources::default())
    }

    /// Reads and merges the layers `sources` names, checks every key, kind and value, and
    /// deserializes the result. The first problem is the error; nothing is half-loaded.
    pub fn load(sources: &Sources) -> Result<Config, ConfigError> {
        let mut layers = vec![layer::parse(BUILT_IN, &Source::BuiltIn)?];
        for (path, source) in [
            (&sources.user, Source::User as fn(PathBuf) -> Source),
            (&sources.project, Source::Project),
            (&sources.explicit, Source::Explicit),
        ] {
            if let Some(path) = path {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.clone(),
                    source,
                })?;
                layers.push(layer::parse(&text, &source(path.clone()))?);
            }
        }
        layers.push(env_layer(&sources.env)?);
        layers.push(flag_layer(&sources.flags)?);

        let mut values = BTreeMap::new();
        let mut protected: Vec<(String, Origin)> = Vec::new();
        let mut plugins = Vec::new();
        let mut models = Vec::new();
        for layer in layers {
            // A later layer's rule is tried before an earlier one's.
            models.splice(0..0, layer.models);
            for (key, (value, origin)) in layer.values {
                if schema::UNION_KEYS.contains(&key.as_str())
                    && let Setting::List(tools) = &value
                {
                    for tool in tools {
                        if !protected.iter().any(|(seen, _)| seen == tool) {
                            protected.push((tool.clone(), origin.clone()));
                        }
                    }
                }
                values.insert(key, (value, origin));
            }
            plugins.extend(layer.plugins);
        }
        let settings = typed(&values, &protected)?;
        models.extend(models::built_in()?);
        let mut config = Config {
            values,
            protected,
            settings,
            plugins,
            models: ModelWindows::default(),
        };
        // A price a team set in its own configuration holds for every model; the built-in one
        // (Anthropic's) only for models the table does not price.
        config.models =
            ModelWindows::new(models).without_prices_set_elsewhere(config.team_prices());
        config.validate()?;
        Ok(config)
    }

    fn setting(&self, key: &str) -> Option<&(Setting, Origin)> {
        self.values.get(key)
    }

    /// The effective value of `key` (`section.name`) as the configuration file writes it
    /// (`3000`, `true`, `"structured"`), or `None` for a key that is not one.
    pub fn value_text(&self, key: &str) -> Option<String> {
        self.setting(key).map(|(value, _)| value.to_string())
    }

    /// Every setting, typed.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Whether a model's twice-rejected answer fails the compaction (`summarizer.on_bad_answer
    /// = "fail"`) rather than letting the extractive summary stand in.
    pub fn fail_on_bad_answer(&self) -> bool {
        self.settings.summarizer.on_bad_answer == OnBadAnswer::Fail
    }

    /// The `[models]` rules, in the order they are tried.
    pub fn model_windows(&self) -> &ModelWindows {
        &self.models
    }

    /// `model`'s context window and longest reply: the first `[models]` rule that matches it,
    /// else `model.context_window` and `model.max_output_tokens`.
    pub fn window_for(&self, model: &str) -> (usize, usize) {
        let model_settings = &self.settings.model;
        match self.models.find(model) {
            Some(rule) => (
                rule.context_window,
                rule.max_output_tokens
                    .unwrap_or(model_settings.max_output_tokens)
                    .min(rule.context_window.saturating_sub(1)),
            ),
            None => (
                model_settings.context_window,
                model_settings.max_output_tokens,
            ),
        }
    }

    /// The `[compaction]` prices (`cache_rewrite_cost`, `output_cost`) a layer of the team's
    /// own set, each `None` where the built-in value stands: a price a team sets holds for every
    /// model, while the built-in one (Anthropic's) gives way to a model's own in `[models]`.
    pub fn team_prices(&self) -> CachePrices {
        let set = |key: &str| {
            self.setting(key).and_then(|(value, origin)| match value {
                Setting::Float(price) if origin.source != Source::BuiltIn => Some(*price),
                _ => None,
            })
        };
        CachePrices {
            cache_rewrite_cost: set("compaction.cache_rewrite_cost"),
            output_cost: set("compaction.output_cost"),
        }
    }

    /// Where a key's value came from.
    pub fn origin(&self, key: &str) -> Option<&Origin> {
        self.setting(key).map(|(_, origin)| origin)
    }

    fn bad(&self, key: &str, message: impl Into<String>) -> ConfigError {
        let at = self
            .origin(key)
            .map(ToString::to_string)
            .unwrap_or_default();
        ConfigError::BadValue {
            at,
            key: key.to_owned(),
            message: message.into(),
        }
    }

    /// The checks that relate values to each other, on the typed settings.
    fn validate(&self) -> Result<(), ConfigError> {
        self.validate_no_zeros()?;
        self.validate_room()?;
        let store = &self.settings.store;
        if !store.dir.as_os_str().is_empty() && store.dir.to_string_lossy().trim().is_empty() {
            return Err(self.bad(
                "store.dir",
                "must name a directory (or be \"\" for the user's data directory): blanks would scatter originals over the working directory",
            ));
        }
        Ok(())
    }

    /// Zeros that would silently turn a feature into nothing, each a typo rather than a
    /// setting: a window or a reply of no tokens, a summary of no tokens, no recent output kept
    /// from microcompact (documented "at least 1"), no attempt at a summary, a proxy that
    /// refuses every body, a state store given no time at all.
    fn validate_no_zeros(&self) -> Result<(), ConfigError> {
        let Settings {
            model,
            remote,
            microcompact,
            serve,
            ..
        } = &self.settings;
        for (key, value, why) in [
            (
                "model.context_window",
                model.context_window,
                "must be more than 0",
            ),
            (
                "model.max_output_tokens",
                model.max_output_tokens,
                "must be more than 0",
            ),
            (
                "summarizer.max_summary_tokens",
                remote.max_summary_tokens,
                "must be more than 0: a summary of no tokens",
            ),
            (
                "summarizer.max_attempts",
                usize::try_from(remote.max_attempts).unwrap_or(usize::MAX),
                "must be at least 1",
            ),
            (
                "microcompact.keep_recent",
                microcompact.keep_recent,
                "must be at least 1: the most recent output is always kept",
            ),
            (
                "serve.body_limit_bytes",
                serve.body_limit_bytes,
                "must be more than 0: every request would be refused",
            ),
            (
                "serve.state_timeout_ms",
                usize::try_from(serve.state_timeout_ms).unwrap_or(usize::MAX),
                "must be more than 0: every state store call would fail",
            ),
        ] {
            if value == 0 {
                return Err(self.bad(key, why));
            }
        }
        Ok(())
    }

    /// The window leaves room past the reply's reserve, and the tail's share, sizes and the
    /// cache's prices are ones the cut can use.
    fn validate_room(&self) -> Result<(), ConfigError> {
        let tail = self.tail_settings();
        let compaction = &tail.rules;
        let reserved = compaction.reserve_cap.min(tail.max_output_tokens);
        if tail.context_window <= reserved {
            return Err(self.bad(
                "model.context_window",
                format!(
                    "{} leaves no room: it must be larger than the {reserved} tokens reserved for the reply (model.max_output_tokens = {}{}, at most compaction.reserve_cap = {}); give the most the model may write in a reply (`--max-output-tokens`, or `model.max_output_tokens`)",
                    tail.context_window,
                    tail.max_output_tokens,
                    self.origin("model.max_output_tokens")
                        .map(|origin| format!(" from {}", origin.source.label()))
                        .unwrap_or_default(),
                    compaction.reserve_cap
                ),
            ));
        }
        let ratio = compaction.tail_ratio;
        if !(ratio > 0.0 && ratio <= 1.0) {
            return Err(self.bad(
                "compaction.tail_ratio",
                format!("must be more than 0 and at most 1, not {ratio}"),
            ));
        }
        for (key, cost) in [
            (
                "compaction.cache_rewrite_cost",
                compaction.cache_rewrite_cost,
            ),
            ("compaction.output_cost", compaction.output_cost),
        ] {
            if !(cost.is_finite() && cost >= 0.0) {
                return Err(self.bad(key, format!("must be 0 or more, not {cost}")));
            }
        }
        if compaction.min_tail_tokens > compaction.max_tail_tokens {
            return Err(self.bad(
                "compaction.min_tail_tokens",
                "must not be more than compaction.max_tail_tokens",
            ));
        }
        Ok(())
    }

    /// The tokenizer that counts for the trigger.
    pub fn encoding(&self) -> Encoding {
        self.settings.model.encoding
    }

    /// The model's context window, in tokens.
    pub fn context_window(&self) -> usize {
        self.settings.model.context_window
    }

    /// Protected tools from every layer, in the order they were first named.
    pub fn protected_tools(&self) -> Vec<&str> {
        self.protected
            .iter()
            .map(|(tool, _)| tool.as_str())
            .collect()
    }

    /// Phase 1's settings: `[prune]` (its protected tools every layer's), `[trim]` and
    /// `[microcompact]`.
    pub fn prune_settings(&self) -> PruneSettings {
        PruneSettings {
            rules: self.settings.prune.clone(),
            trim: self.settings.trim.clone(),
            microcompact: self.settings.microcompact.clone(),
        }
    }

    /// When to compact and where to cut: the configured model's window and `[compaction]`'s
    /// rules.
    pub fn tail_settings(&self) -> TailSettings {
        TailSettings {
            context_window: self.settings.model.context_window,
            max_output_tokens: self.settings.model.max_output_tokens,
            rules: self.settings.compaction_rules,
            previews_within: 0,
        }
    }

    /// The built-in template configuration names.
    pub fn template(&self) -> TemplateChoice {
        self.settings.compaction.template
    }

    /// The team's own template file, when one is configured.
    pub fn template_file(&self) -> Option<PathBuf> {
        self.settings.compaction.template_file.clone()
    }

    /// Whether configuration, rather than the built-in default, chose the template: then it wins
    /// over plugins.
    pub fn template_is_configured(&self) -> bool {
        self.template_file().is_some()
            || self
                .origin("compaction.template")
                .is_some_and(|origin| origin.source != Source::BuiltIn)
    }

    /// The plugin whose template to use when several supply one.
    pub fn template_plugin(&self) -> Option<String> {
        self.settings.compaction.template_plugin.clone()
    }

    /// The team's instructions for every summary.
    pub fn custom_instructions(&self) -> Option<String> {
        self.settings.compaction.custom_instructions.clone()
    }

    /// What the agent is told after an automatic compaction.
    pub fn continuation(&self) -> Option<String> {
        self.settings.compaction.continuation.clone()
    }

    /// Summarizer failures in a row before automatic compaction stops.
    pub fn max_failures(&self) -> u32 {
        self.settings.compaction.max_failures
    }

    /// Which summarizer writes the summary.
    pub fn summarizer_kind(&self) -> SummarizerKind {
        self.settings.summarizer.kind
    }

    /// Whether summaries are asked inside the agent's own request, sharing its cached prefix:
    /// `kind = "upstream"` with `fork`, and no `compaction_model` (another model shares no cache
    /// with the agent's). The proxy asks them so and `condense replay` prices them so.
    pub fn forks_summaries(&self) -> bool {
        let summarizer = &self.settings.summarizer;
        summarizer.kind == SummarizerKind::Upstream
            && summarizer.fork
            && self.settings.remote.compaction_model.is_none()
    }

    /// The offline summarizer's settings. `summarizer.budget_tokens` bounds the summary's
    /// message, which is what every later request pays for: the summary's own budget is that
    /// less what wraps it (the summary tags and the continuation, counted as they are written).
    pub fn extractive_settings(&self) -> condense_summarize::ExtractiveSettings {
        let mut settings = self.settings.extractive.clone();
        let wrapper =
            condense_compact::summary_message_continued("", self.continuation().as_deref());
        let overhead = settings.counter.count_message(&wrapper);
        settings.budget_tokens = settings.budget_tokens.saturating_sub(overhead);
        settings
    }

    /// The remote summarizers' settings.
    pub fn remote_settings(&self) -> condense_summarize::RemoteSettings {
        self.settings.remote.clone()
    }

    /// Where originals of replaced outputs are kept.
    pub fn store_dir(&self) -> PathBuf {
        if self.settings.store.dir.as_os_str().is_empty() {
            return default_store_dir();
        }
        self.settings.store.dir.clone()
    }

    /// The effective configuration as TOML, each value followed by the layer it came from.
    pub fn show(&self) -> String {
        let mut out = String::new();
        for (section, keys) in schema::schema() {
            out.push_str(&format!("[{section}]\n"));
            for (key, _) in keys {
                let full = format!("{section}.{key}");
                if full == "prune.protected_tools" {
                    let tools: Vec<String> = self
                        .protected
                        .iter()
                        .map(|(tool, origin)| format!("{tool} ({})", origin.source.label()))
                        .collect();
                    let list = Setting::List(
                        self.protected_tools()
                            .into_iter()
                            .map(str::to_owned)
                            .collect(),
                    );
                    out.push_str(&format!("{key} = {list}  # {}\n", tools.join(", ")));
                    continue;
                }
                if let Some((value, origin)) = self.setting(&full) {
                    out.push_str(&format!("{key} = {value}  # {}\n", origin.source.label()));
                }
            }
            out.push('\n');
        }
        // Each model rule as it resolves (a rule without its own max_output_tokens takes the
        // configured one).
        for rule in self.models.rules() {
            let (window, output) = (
                rule.context_window,
                rule.max_output_tokens
                    .unwrap_or(self.settings.model.max_output_tokens),
            );
            out.push_str(&format!(
                "[models.{}]  # {}\ncontext_window = {window}\nmax_output_tokens = {output}\n",
                value::quote(&rule.pattern),
                rule.origin.source.label(),
            ));
            for (key, price) in [
                ("cache_rewrite_cost", rule.prices.cache_rewrite_cost),
                ("output_cost", rule.prices.output_cost),
            ] {
                if let Some(price) = price {
                    out.push_str(&format!("{key} = {price:?}\n"));
                }
            }
            out.push('\n');
        }
        for plugin in &self.plugins {
            out.push_str(&format!(
                "[[plugins]]  # {}\npath = {}\nrequired = {}\n\n",
                plugin.origin.source.label(),
                value::quote(&plugin.path.display().to_string()),
                plugin.required
            ));
        }
        out.trim_end().to_owned() + "\n"
    }
}

/// The full key (`section.name`) a setting is called by in a library's keyword settings (the
/// Python binding's `Compactor(context_window=128_000)`): `section.name` as it is, or the
/// name alone, in the first section of the built-in file that has it (`context_window` is
/// `model.context_window`, as the CLI's `--context-window` is; `summarizer.context_window` is
/// named in full). `at` says where it was written, for the error.
pub fn key_named(name: &str, at: &str) -> Result<String, ConfigError> {
    if schema::kind_of(name).is_some() {
        return Ok(name.to_owned());
    }
    let sections = schema::section_names();
    let found = sections.iter().find(|section| {
        schema::section(section).is_some_and(|keys| keys.iter().any(|(key, _)| key == name))
    });
    match found {
        Some(section) => Ok(format!("{section}.{name}")),
        None => {
            let known: Vec<&str> = sections
                .iter()
                .filter_map(|section| schema::section(section))
                .flatten()
                .map(|(key, _)| key.as_str())
                .collect();
            Err(ConfigError::UnknownKey {
                at: at.to_owned(),
                key: name.to_owned(),
                hint: error::hint(name, &known),
            })
        }
    }
}

/// Flags, as `(flag, key, value)`.
fn flag_layer(flags: &[(String, String, String)]) -> Result<layer::Layer, ConfigError> {
    let mut out = layer::Layer::default();
    for (flag, key, raw) in flags {
        let origin = Origin {
            source: Source::Flag(flag.clone()),
            line: None,
            column: None,
        };
        let kind = schema::kind_of(key).ok_or_else(|| ConfigError::UnknownKey {
            at: flag.clone(),
            key: key.clone(),
            hint: String::new(),
        })?;
        let value = parse_setting(kind, raw, flag, key)?;
        // A repeated list flag (--protect a --protect b) adds up.
        let value = match (out.values.remove(key), value) {
            (Some((Setting::List(mut before), _)), Setting::List(more)) => {
                before.extend(more);
                Setting::List(before)
            }
            (_, value) => value,
        };
        out.values.insert(key.clone(), (value, origin));
    }
    Ok(out)
}

/// A flag's or a variable's text as a value of `kind`; `at` names where it came from.
fn parse_setting(
    kind: schema::Kind,
    raw: &str,
    at: &str,
    key: &str,
) -> Result<Setting, ConfigError> {
    let value = match kind {
        schema::Kind::Int => raw.trim().replace('_', "").parse().ok().map(Setting::Int),
        schema::Kind::Float => raw.trim().parse().ok().map(Setting::Float),
        schema::Kind::Bool => raw.trim().parse().ok().map(Setting::Bool),
        schema::Kind::Str => Some(Setting::Str(raw.to_owned())),
        schema::Kind::List => Some(Setting::List(
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        )),
    };
    value.ok_or_else(|| ConfigError::WrongType {
        at: at.to_owned(),
        key: key.to_owned(),
        expected: kind.name(),
        found: format!("`{raw}`"),
    })
}

/// The section and key a `CONDENSE_SECTION_KEY` variable sets, or `None` when its name starts
/// with no section (`CONDENSE_LLM_URL`): such a variable is not a setting.
fn env_setting(name: &str) -> Option<(&'static str, String)> {
    let rest = name.strip_prefix("CONDENSE_")?.to_lowercase();
    schema::section_names().into_iter().find_map(|section| {
        rest.strip_prefix(&format!("{section}_"))
            .map(|key| (section, key.to_owned()))
    })
}

/// `CONDENSE_PRUNE_PROTECT_TOKENS=30000` is `prune.protect_tokens = 30000`.
fn env_layer(env: &[(String, String)]) -> Result<layer::Layer, ConfigError> {
    let mut out = layer::Layer::default();
    let mut sorted: Vec<&(String, String)> = env
        .iter()
        .filter(|(name, _)| name.starts_with("CONDENSE_"))
        .collect();
    sorted.sort();
    for (name, raw) in sorted {
        let Some((section, key)) = env_setting(name) else {
            continue; // Other CONDENSE_* variables (CONDENSE_LLM_URL, CONDENSE_TRANSCRIPTS) are not settings.
        };
        let full = format!("{section}.{key}");
        let origin = Origin {
            source: Source::Env(name.clone()),
            line: None,
            column: None,
        };
        let Some(kind) = schema::kind_of(&full) else {
            let known: Vec<&str> = schema::section(section)
                .unwrap_or_default()
                .iter()
                .map(|(k, _)| k.as_str())
                .collect();
            return Err(ConfigError::UnknownKey {
                at: name.clone(),
                key: full,
                hint: error::hint(&key, &known),
            });
        };
        let value = parse_setting(kind, raw, name, &full)?;
        out.values.insert(full, (value, origin));
    }
    Ok(out)
}

/// `""` is how the file says "none".
/// The merged values as the typed tree.
fn typed(
    values: &BTreeMap<String, (Setting, Origin)>,
    protected: &[(String, Origin)],
) -> Result<Settings, ConfigError> {
    let mut root = toml::Table::new();
    for (key, (value, origin)) in values {
        let Some((section, name)) = key.split_once('.') else {
            continue;
        };
        let value = if schema::UNION_KEYS.contains(&key.as_str()) {
            toml::Value::Array(
                protected
                    .iter()
                    .map(|(tool, _)| toml::Value::String(tool.clone()))
                    .collect(),
            )
        } else {
            match value {
                // TOML stops at i64::MAX; a larger flag or variable is refused, not clamped,
                // so that what `config show` prints is what was asked for.
                Setting::Int(int) => match i64::try_from(*int) {
                    Ok(int) => toml::Value::Integer(int),
                    Err(_) => {
                        return Err(ConfigError::BadValue {
                            at: origin.to_string(),
                            key: key.clone(),
                            message: format!("{int} is too large (at most {})", i64::MAX),
                        });
                    }
                },
                Setting::Float(float) => toml::Value::Float(*float),
                Setting::Bool(flag) => toml::Value::Boolean(*flag),
                Setting::Str(text) => toml::Value::String(text.clone()),
                Setting::List(items) => {
                    toml::Value::Array(items.iter().cloned().map(toml::Value::String).collect())
                }
            }
        };
        if let toml::Value::Table(table) = root
            .entry(section.to_owned())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        {
            table.insert(name.to_owned(), value);
        }
    }
    let mut sections = typed::Sections::new(root, values);
    let settings = Settings {
        model: sections.read("model")?,
        prune: sections.read("prune")?,
        trim: sections.read("trim")?,
        microcompact: sections.read("microcompact")?,
        compaction: sections.read("compaction")?,
        compaction_rules: sections.read("compaction")?,
        summarizer: sections.read("summarizer")?,
        extractive: sections.read("summarizer")?,
        remote: sections.read("summarizer")?,
        store: sections.read("store")?,
        serve: sections.read("serve")?,
    };
    sections.all_read()?;
    Ok(settings)
}

/// `store.dir = ""`: `$XDG_DATA_HOME/condense/originals`, else
/// `~/.local/share/condense/originals`, else `.condense/originals` (no home at all). One place
/// per machine, so a handle is recalled from any directory.
fn default_store_dir() -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|value| !value.is_empty())
                .map(|home| PathBuf::from(home).join(".local/share"))
        });
    match base {
        Some(base) => base.join("condense/originals"),
        None => PathBuf::from(".condense/originals"),
    }
}
