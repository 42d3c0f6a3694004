//! Flags become the configuration's last layer.

use anyhow::{Context, Result};
use condense_host::plugins::load_all;
use condense_host::{Config, LoadedPlugin, Sources, SummarizerKind};

use crate::{SettingArgs, Verbosity, usage_error};

pub fn sources(args: &SettingArgs) -> Result<Sources> {
    let cwd = std::env::current_dir().context("cannot read the working directory")?;
    let mut sources = Sources::discover(&cwd, args.config.clone())?;
    let mut flag = |name: &str, key: &str, value: String| {
        sources.flags.push((name.to_owned(), key.to_owned(), value))
    };
    if let Some(window) = args.context_window {
        flag(
            "--context-window",
            "model.context_window",
            window.to_string(),
        );
    }
    if let Some(tokens) = args.max_output_tokens {
        flag(
            "--max-output-tokens",
            "model.max_output_tokens",
            tokens.to_string(),
        );
    }
    if let Some(kind) = &args.summarizer {
        flag("--summarizer", "summarizer.kind", kind.clone());
    }
    if let Some(template) = &args.template {
        flag("--template", "compaction.template", template.clone());
    }
    for tool in &args.protect {
        flag("--protect", "prune.protected_tools", tool.clone());
    }
    if let Some(store) = &args.store {
        flag("--store", "store.dir", store.display().to_string());
    }
    Ok(sources)
}

/// The effective configuration. A value refused where a flag gave it is a usage error (exit
/// 2, as clap's own refusals are); one refused in a file or a variable is a failure (exit 1).
pub fn config(args: &SettingArgs) -> Result<Config> {
    load(&sources(args)?)
}

/// [`config`] for sources a command has added its own flags to.
pub fn load(sources: &Sources) -> Result<Config> {
    Config::load(sources).map_err(|error| {
        let from_flag = error
            .at()
            .is_some_and(|at| sources.flags.iter().any(|(flag, _, _)| flag == at));
        if from_flag {
            usage_error(error.to_string())
        } else {
            error.into()
        }
    })
}

/// `summarizer.kind = "upstream"` summarizes with a client's request, which only the proxy has:
/// a command that summarizes a saved session says so before it starts.
pub fn refuse_upstream(config: &Config, command: &str) -> Result<()> {
    if config.summarizer_kind() == SummarizerKind::Upstream {
        return Err(usage_error(format!(
            "summarizer.kind = \"upstream\" (from {}) asks the request's own upstream with the client's credentials: only `condense serve` has them; `condense {command}` needs extractive, openai or anthropic (--summarizer extractive)",
            config
                .origin("summarizer.kind")
                .map_or_else(|| "the configuration".to_owned(), ToString::to_string)
        )));
    }
    Ok(())
}

/// The configured plugins; optional ones that fail are reported and skipped.
pub fn plugins(config: &Config, verbosity: Verbosity) -> Result<Vec<LoadedPlugin>> {
    let (plugins, warnings) = load_all(&config.plugins)?;
    if verbosity != Verbosity::Quiet {
        for warning in warnings {
            eprintln!("condense: warning: {warning}");
        }
    }
    Ok(plugins)
}

/// Where originals go: `store.dir` names a directory, or a Redis (`redis://…`), as the proxy's
/// replicas on several machines share.
#[derive(Debug, Clone)]
pub enum Originals {
    /// A directory (made absolute: a placeholder names a handle, not a place).
    Dir(std::path::PathBuf),
    /// A Redis URL.
    Redis(String),
}

impl Originals {
    /// The configuration's store of originals.
    pub fn of(config: &Config) -> Originals {
        let dir = config.store_dir();
        let text = dir.to_string_lossy();
        if condense_serve::RedisOriginals::is_redis(&text) {
            return Originals::Redis(text.into_owned());
        }
        Originals::Dir(std::path::absolute(&dir).unwrap_or(dir))
    }

    /// The store, each Redis call bounded by `serve.state_timeout_ms`.
    pub fn open(&self, config: &Config) -> Result<Box<dyn condense_host::Store>> {
        Ok(match self {
            Originals::Dir(dir) => Box::new(condense_host::DirStore::new(dir)),
            Originals::Redis(url) => Box::new(self.redis(url, config)?),
        })
    }

    /// The Redis store itself (the proxy's sweep needs it shared).
    pub fn redis(&self, url: &str, config: &Config) -> Result<condense_serve::RedisOriginals> {
        let timeout = std::time::Duration::from_millis(config.settings().serve.state_timeout_ms);
        condense_serve::RedisOriginals::new(url, timeout)
            .map_err(|error| usage_error(format!("store.dir: {error}")))
    }

    /// Where, as reports and the start line say it (a Redis password never shown).
    pub fn label(&self) -> String {
        match self {
            Originals::Dir(dir) => dir.display().to_string(),
            Originals::Redis(url) => match url.split_once('@') {
                Some((scheme, host)) => format!(
                    "{}…@{host}",
                    &scheme[..scheme.find("://").map_or(0, |at| at + 3)]
                ),
                None => url.clone(),
            },
        }
    }
}
