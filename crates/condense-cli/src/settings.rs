//! Flags become the configuration's last layer.

use anyhow::{Context, Result};
use condense_host::plugins::load_all;
use condense_host::{Config, LoadedPlugin, Sources};

use crate::{SettingArgs, Verbosity};

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

pub fn config(args: &SettingArgs) -> Result<Config> {
    Ok(Config::load(&sources(args)?)?)
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
