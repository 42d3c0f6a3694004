//! `condense serve`: the compacting proxy, with its settings from the configuration and flags.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use condense_host::{Compactor, DirStore, ServeConfig, StateLocation, SummarizerKind};
use condense_serve::{
    DirSessionStore, OriginalsExpiry, Proxy, ProxyError, ProxySettings, RedisSessionStore,
    SessionStore, UpstreamSummaries,
};

use crate::settings::{load, plugins, sources};
use crate::{ServeArgs, Verbosity, usage_error};

pub fn serve(args: ServeArgs, verbosity: Verbosity) -> Result<()> {
    let mut sources = sources(&args.settings)?;
    for (flag, key, value) in [
        ("--listen", "serve.listen", &args.listen),
        (
            "--openai-upstream",
            "serve.openai_upstream",
            &args.openai_upstream,
        ),
        (
            "--anthropic-upstream",
            "serve.anthropic_upstream",
            &args.anthropic_upstream,
        ),
        ("--state", "serve.state", &args.state),
    ] {
        if let Some(value) = value {
            sources.flags.push((flag.into(), key.into(), value.clone()));
        }
    }
    let config = load(&sources)?;
    let serve = config.settings().serve.clone();
    // The address, the upstreams, the state's location and every limit are checked with the
    // rest of the configuration, as it loads.
    let listen: SocketAddr = serve.listen;
    let auth_token = auth_token(&serve)?;
    let store = session_store(&serve)?;
    let plugins = plugins(&config, verbosity)?;
    // Each request sized for the model it names ([models] and the built-in table).
    let compactor = Compactor::with_plugins(&config, &plugins)?
        .with_model_windows(config.model_windows().clone())
        .with_store(crate::settings::Originals::of(&config).open(&config)?);
    log_to_stderr(verbosity);
    let state_label = store.location();
    // Placeholders name a handle, not a place: the person who recalls an original from another
    // directory needs the store's absolute path (`condense recall --store DIR HANDLE`).
    let originals = crate::settings::Originals::of(&config);
    let mut settings = ProxySettings::from_config(&serve);
    settings.auth_token = auth_token;
    settings.originals = originals_expiry(&originals, &config)?;
    if config.summarizer_kind() == SummarizerKind::Upstream {
        settings.upstream_summarizer = Some(UpstreamSummaries::from_config(&config));
    }
    if let Some(warning) = missing_key(&config) {
        eprintln!("condense serve: warning: {warning}");
    }
    let proxy = Arc::new(
        Proxy::new(settings, compactor, store).map_err(|error| match error {
            ProxyError::Upstream { .. } => usage_error(error.to_string()),
            _ => anyhow::Error::new(error),
        })?,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let bound = listener.local_addr().unwrap_or(listen);
        // Tests and scripts read this line to learn the port when they asked for port 0.
        eprintln!(
            "condense serve: listening on http://{bound} (OpenAI upstream {}, Anthropic upstream {}, state {state_label}, originals {}{})",
            serve.openai_upstream,
            serve.anthropic_upstream,
            originals.label(),
            match serve.originals_ttl_hours {
                0 => String::new(),
                hours => format!(", swept of what no state names after {hours} h unused"),
            }
        );
        condense_serve::run(listener, proxy, shutdown_signal()).await?;
        eprintln!("condense serve: stopped");
        anyhow::Ok(())
    })
}

/// The key every request must carry (`serve.auth_token_env`), read from its variable; without
/// one, a warning when the proxy listens beyond the loopback.
fn auth_token(serve: &ServeConfig) -> Result<Option<String>> {
    let listen = serve.listen;
    let auth_token = match serve.auth_token_env.as_deref() {
        None => None,
        Some(variable) => match std::env::var(variable) {
            Ok(token) if !token.is_empty() => Some(token),
            _ => {
                return Err(usage_error(format!(
                    "serve.auth_token_env names {variable}, which is not set (or empty): set it to the key clients send in x-condense-key, or auth_token_env = \"\" for none"
                )));
            }
        },
    };
    if auth_token.is_none() && !listen.ip().is_loopback() {
        eprintln!(
            "condense serve: warning: listening on {listen} with no key asked: anyone who can reach it can send requests with their own credentials (set serve.auth_token_env)"
        );
    }
    Ok(auth_token)
}

/// The proxy's log on stderr, as verbose as asked.
fn log_to_stderr(verbosity: Verbosity) {
    let level = match verbosity {
        Verbosity::Quiet => tracing::Level::WARN,
        Verbosity::Normal => tracing::Level::INFO,
        Verbosity::Verbose => tracing::Level::DEBUG,
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

/// What the proxy sweeps from the store of originals, and after how long unused
/// (`serve.originals_ttl_hours`; `0`: nothing).
fn originals_expiry(
    originals: &crate::settings::Originals,
    config: &condense_host::Config,
) -> Result<Option<OriginalsExpiry>> {
    let hours = hours(
        config.settings().serve.originals_ttl_hours,
        "serve.originals_ttl_hours",
    )?;
    let Some(unused_for) = hours else {
        return Ok(None);
    };
    Ok(Some(match originals {
        crate::settings::Originals::Dir(dir) => {
            OriginalsExpiry::new(DirStore::new(dir), unused_for)
        }
        crate::settings::Originals::Redis(url) => {
            OriginalsExpiry::in_redis(Arc::new(originals.redis(url, config)?), unused_for)
        }
    }))
}

/// A summarizer whose key variable is unset fails every summary, session after session, until
/// each session's breaker opens: said once at start, where the operator looks, rather than only
/// per request. Not an error: the proxy still prunes, and fails open.
fn missing_key(config: &condense_host::Config) -> Option<String> {
    let remote = matches!(
        config.summarizer_kind(),
        SummarizerKind::OpenAi | SummarizerKind::Anthropic
    );
    let variable = config.settings().remote.api_key_env.as_deref()?;
    (remote && std::env::var_os(variable).is_none()).then(|| {
        format!(
            "summarizer.api_key_env names {variable}, which is not set: every summary will fail (set it, or api_key_env = \"\" for a server without a key)"
        )
    })
}

/// A `*_ttl_hours` value as a duration; `0`: `None`, forever.
fn hours(value: u64, key: &str) -> Result<Option<Duration>> {
    // A century: past it Redis refuses the expiry, and 0 already means forever.
    const TTL_HOURS_LIMIT: u64 = 876_000;
    if value > TTL_HOURS_LIMIT {
        return Err(usage_error(format!(
            "{key}: {value} is more than a century ({TTL_HOURS_LIMIT}); 0 keeps them forever"
        )));
    }
    Ok((value > 0).then(|| Duration::from_secs(value * 3_600)))
}

/// The sessions' state store `[serve]` names (a directory, or Redis), with its ttl, checked once
/// before the proxy listens.
fn session_store(serve: &ServeConfig) -> Result<Arc<dyn SessionStore>> {
    let ttl = hours(serve.state_ttl_hours, "serve.state_ttl_hours")?;
    let directory = |dir: PathBuf| -> Arc<dyn SessionStore> {
        Arc::new(DirSessionStore::new(dir).expire_after(ttl))
    };
    let store: Arc<dyn SessionStore> = match &serve.state {
        StateLocation::Redis(url) => Arc::new(
            RedisSessionStore::new(url)
                .map_err(|error| usage_error(error.to_string()))?
                .expire_after(ttl)
                .with_timeout(Duration::from_millis(serve.state_timeout_ms)),
        ),
        StateLocation::UserDirectory => directory(DirSessionStore::default_dir()),
        StateLocation::Directory(dir) => directory(dir.clone()),
    };
    match store.check() {
        Ok(()) => {}
        // A directory is this machine's own: one that cannot be written is a mistake to fix now.
        Err(error @ condense_serve::StateStoreError::Io { .. }) => {
            return Err(anyhow::Error::new(error).context("serve.state cannot be used"));
        }
        // Redis may come up after the proxy (a replica started first): say it, and serve; each
        // request fails open until it is reachable.
        Err(error) => eprintln!(
            "condense serve: warning: {error}; requests go upstream uncompacted until the state can be reached"
        ),
    }
    Ok(store)
}

/// SIGTERM or SIGINT: stop accepting, let in-flight requests and streams finish.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}
