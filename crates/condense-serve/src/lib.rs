//! `condense serve`: a compacting proxy in front of an OpenAI- or Anthropic-compatible
//! provider, so that any agent that accepts a base URL gets condense without a line of its code
//! changed.
//!
//! A POST to a path ending in `/chat/completions` (OpenAI, and Azure's deployments or a
//! gateway's route), `/responses` (OpenAI's Responses API: Codex) or `/v1/messages`
//! (Anthropic) is compacted: the
//! session's state is loaded, [`condense_host::Compactor::prepare`] runs (frozen decisions, agent
//! trims, time-based microcompact from the real gap since the session's previous request, the
//! pruner, a summary when due, and the frozen summary of earlier requests put back in place),
//! the state is saved, and the request goes upstream. The response comes back unchanged, a
//! stream chunk by chunk as it arrives; the provider's usage is read on the way and kept for the
//! next trigger. Every other path or method is passed through untouched. Headers are forwarded as they
//! came, credentials included, and never logged or stored.
//!
//! The proxy owns no compaction rule: every rule is the library's, so the CLI, a harness that
//! links condense and the proxy behave alike.
//!
//! **Fail open**: when anything about compacting a request fails, the client's own bytes go
//! upstream and the failure is logged and counted; a request never fails because of condense.
//! condense's own refusals use the provider's error shape: 400 for a body that is not JSON or
//! not a chat request, 413 over `serve.body_limit_bytes`, 502 when the upstream cannot be
//! reached, 504 when it stays silent past `serve.upstream_timeout_secs`.
//!
//! Sessions: the `x-condense-session` header when the client sends one, otherwise a key derived
//! from how the conversation starts: provider, system prompt, first user message and first
//! reply ([`derived_session`]).

#![warn(missing_docs)]

mod answer;
pub mod edits;
mod metrics;
pub mod native;
mod originals;
mod proxy;
mod redis_originals;
mod state;
mod stream_usage;
#[cfg(feature = "testing")]
pub mod testing;
mod upstream;
mod wire;

pub use metrics::Metrics;
pub use native::{EnvelopeError, NativeMode};
pub use originals::{OriginalsExpiry, SweepError};
pub use proxy::{KEY_HEADER, Proxy, ProxyError, ProxySettings, SESSION_HEADER};
pub use redis_originals::RedisOriginals;
pub use state::{
    DirSessionStore, RedisSessionStore, Saved, SessionStore, StateStoreError, Versioned,
};
pub use upstream::UpstreamSummaries;
pub use wire::{
    Api, SESSION_NAME_LIMIT, ScannedAnswer, UsageScanner, derived_session, named_session,
};

/// Serves `proxy` on `listener` until `shutdown` resolves; then in-flight requests and streams
/// finish, and the usage of every finished response is saved, before it returns. Meanwhile the
/// store of originals is swept at start and every hour, when the settings ask for it
/// ([`ProxySettings::originals`]).
pub async fn run(
    listener: tokio::net::TcpListener,
    proxy: std::sync::Arc<Proxy>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let sweeping = tokio::spawn(originals::sweep_every_hour(proxy.clone()));
    let served = axum::serve(listener, proxy.clone().router())
        .with_graceful_shutdown(shutdown)
        .await;
    sweeping.abort();
    served?;
    proxy.flushed().await;
    Ok(())
}
