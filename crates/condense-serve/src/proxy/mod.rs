//! The request path: read, prepare with the session's state, forward, relay.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use condense_host::{
    CompactionOutcome, Compactor, HeadOutcome, ReportedUsage, ServeConfig, SessionState, Swept,
};
use futures_util::Stream;
use serde_json::Value;

use crate::metrics::Metrics;
use crate::originals::{OriginalsExpiry, SweepError};
use crate::state::{Saved, SessionStore};
use crate::upstream::{Asked, UpstreamSummaries, UpstreamSummarizer, upstream_url};
use crate::wire::{Api, ScannedAnswer, UsageScanner, derived_session, named_session};
use condense_host::refusal::TooLong;

mod relay;
mod sessions;
mod stand_in;

use relay::UsageSink;
use sessions::DeferredSave;
use stand_in::NativeBlock;

/// The header a client may send to name its session.
pub const SESSION_HEADER: &str = "x-condense-session";

/// The header that carries the proxy's own key when `serve.auth_token_env` sets one: a custom
/// header every SDK and agent can add, apart from the provider's key the client also sends.
pub const KEY_HEADER: &str = "x-condense-key";

/// Where requests go and what the proxy accepts.
#[derive(Debug, Clone)]
pub struct ProxySettings {
    /// The OpenAI-compatible upstream's origin.
    pub openai_upstream: String,
    /// The Anthropic upstream's origin.
    pub anthropic_upstream: String,
    /// The largest request body accepted on the compacted routes.
    pub body_limit_bytes: usize,
    /// The longest the upstream may stay silent.
    pub upstream_timeout: Duration,
    /// `summarizer.kind = "upstream"`: summaries are asked of the request's own upstream with
    /// the client's credentials and model, with these settings for the rest (timeouts,
    /// retries, `compaction_model`, forking). `None`: the compactor's own summarizer.
    pub upstream_summarizer: Option<UpstreamSummaries>,
    /// `serve.originals_ttl_hours`: the store of originals to sweep of what no state names
    /// after that long unused. `None` (`0`, the default): originals are kept forever.
    pub originals: Option<OriginalsExpiry>,
    /// `serve.state_timeout_ms`: the longest a read or a save of a session's state may take;
    /// past it the request goes on without (a fresh state, not saved).
    pub state_timeout: Duration,
    /// The key every request must carry in [`KEY_HEADER`] (`serve.auth_token_env` names the
    /// variable holding it); `None`: the proxy answers anyone who can reach it.
    pub auth_token: Option<String>,
    /// `serve.native_compaction`: whether condense answers `POST …/responses/compact` itself
    /// (for an upstream that has none) or passes it on.
    pub native_compaction: crate::NativeMode,
    /// `serve.ask_stream_usage`: a Chat Completions stream the client sent without
    /// `stream_options` is asked for its usage, which is taken out again before the client
    /// reads it.
    pub ask_stream_usage: bool,
}

impl ProxySettings {
    /// The `[serve]` configuration's values.
    pub fn from_config(config: &ServeConfig) -> Self {
        ProxySettings {
            openai_upstream: config.openai_upstream.to_string(),
            anthropic_upstream: config.anthropic_upstream.to_string(),
            body_limit_bytes: config.body_limit_bytes,
            upstream_timeout: Duration::from_secs(config.upstream_timeout_secs),
            upstream_summarizer: None,
            originals: None,
            state_timeout: Duration::from_millis(config.state_timeout_ms.max(1)),
            auth_token: None,
            native_compaction: config.native_compaction,
            ask_stream_usage: config.ask_stream_usage,
        }
    }

    fn upstream(&self, provider: Api) -> &str {
        match provider {
            Api::OpenAi | Api::Responses => &self.openai_upstream,
            Api::Anthropic => &self.anthropic_upstream,
        }
    }
}

/// Why a proxy could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The HTTP client could not be built.
    #[error("cannot build the upstream HTTP client: {0}")]
    Client(String),
    /// An upstream origin the proxy cannot send to.
    #[error("{key}: {reason}")]
    Upstream {
        /// The configuration key: `serve.openai_upstream` or `serve.anthropic_upstream`.
        key: &'static str,
        /// The value given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Checks an upstream origin as the configuration does ([`condense_host::Upstream`]), for
/// settings a library built itself.
fn check_upstream(key: &'static str, url: &str) -> Result<(), ProxyError> {
    url.parse::<condense_host::Upstream>()
        .map(|_| ())
        .map_err(|reason| ProxyError::Upstream {
            key,
            url: url.to_owned(),
            reason,
        })
}

/// One line per compacted request: the counts, the measure that drove the decisions, what
/// fired and the time condense added.
fn log_request(provider: Api, prepared: &Prepared, added: Duration) {
    tracing::info!(
        session = %prepared.session,
        provider = provider.name(),
        tokens_before = prepared.tokens.0,
        tokens_after = prepared.tokens.1,
        measure = prepared.due.2,
        due_before = prepared.due.0,
        due_after = prepared.due.1,
        fired = %prepared.fired,
        added_ms = %format_args!("{:.3}", added.as_secs_f64() * 1_000.0),
        "request"
    );
}

/// The proxy: one compactor for every session, each session's state in the store.
pub struct Proxy {
    settings: ProxySettings,
    compactor: Compactor,
    store: Arc<dyn SessionStore>,
    client: reqwest::Client,
    /// Each session's place on this replica: its lock and the answers whose news is still being
    /// recorded ([`SessionSlot`]).
    slots: Mutex<HashMap<String, Arc<SessionSlot>>>,
    /// Every session's messages already read: clients resend their history with each request.
    messages: condense_formats::MessageCache,
    /// Usage recordings still running after their response ended; shutdown waits for them.
    pending: Arc<Pending>,
    /// What `/metrics` reports.
    pub metrics: Metrics,
    /// The key condense's compaction items are signed with, read from the store once.
    compaction_key: tokio::sync::OnceCell<Vec<u8>>,
    /// The OpenAI upstream refused `stream_options` once: Chat Completions streams are no
    /// longer asked for their usage ([`crate::stream_usage`]).
    usage_option_refused: AtomicBool,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("settings", &self.settings)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

/// Work still running beside the requests, counted so that someone can wait for all of it.
#[derive(Debug, Default)]
struct Pending {
    count: AtomicUsize,
    done: tokio::sync::Notify,
}

impl Pending {
    fn begin(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    fn end(&self) {
        if self.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.done.notify_waiters();
        }
    }

    /// Returns once nothing counted is running.
    async fn idle(&self) {
        loop {
            // Made before the count is read: `notify_waiters` reaches it from then on.
            let done = self.done.notified();
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            done.await;
        }
    }
}

/// One session on this replica. Two requests of it are prepared one after the other (across
/// replicas the store's compare-and-set decides), and neither before what the answers already
/// given told of the session (the provider's count, a reply cut short) is recorded: a client
/// may send its next request the moment it has read an answer, before the recording, which runs
/// beside the answer, has begun.
#[derive(Debug, Default)]
struct SessionSlot {
    lock: Arc<tokio::sync::Mutex<()>>,
    /// Recordings of this session's answers, counted from before the client could read them.
    learning: Pending,
}

impl Proxy {
    /// A proxy forwarding as `settings` say, compacting with `compactor`, keeping states in
    /// `store`.
    pub fn new(
        settings: ProxySettings,
        compactor: Compactor,
        store: Arc<dyn SessionStore>,
    ) -> Result<Self, ProxyError> {
        check_upstream("serve.openai_upstream", &settings.openai_upstream)?;
        check_upstream("serve.anthropic_upstream", &settings.anthropic_upstream)?;
        // TLS needs a process-wide crypto provider; ring's, unless one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(settings.upstream_timeout)
            .build()
            .map_err(|error| ProxyError::Client(error.to_string()))?;
        Ok(Proxy {
            settings,
            compactor,
            store,
            client,
            slots: Mutex::new(HashMap::new()),
            messages: condense_formats::MessageCache::default(),
            pending: Arc::new(Pending::default()),
            metrics: Metrics::default(),
            compaction_key: tokio::sync::OnceCell::new(),
            usage_option_refused: AtomicBool::new(false),
        })
    }

    /// The routes: the two compacted ones, `/healthz`, `/metrics`, and everything else passed
    /// through.
    pub fn router(self: Arc<Self>) -> Router {
        Router::new()
            .route("/healthz", get(|| async { "ok\n" }))
            .route(
                "/readyz",
                get(|State(proxy): State<Arc<Proxy>>| async move { proxy.ready().await }),
            )
            .route(
                "/metrics",
                get(
                    |State(proxy): State<Arc<Proxy>>, request: Request| async move {
                        match proxy.refused_key(&request) {
                            Some(refused) => refused,
                            None => proxy.metrics.render().into_response(),
                        }
                    },
                ),
            )
            // A POST to a path ending in a chat endpoint is compacted; anything else is the
            // upstream's to answer (OpenAI lists stored completions at GET /v1/chat/completions).
            .fallback(dispatch)
            .with_state(self)
    }

    /// Sweeps the store of originals once, when `serve.originals_ttl_hours` asks for it
    /// ([`ProxySettings::originals`]): `None` when it does not, else the sweep's outcome, also
    /// logged and counted. [`crate::run`] calls it at start and every hour.
    pub async fn sweep_originals(&self) -> Option<Result<Swept, SweepError>> {
        let expiry = self.settings.originals.clone()?;
        let sessions = self.store.clone();
        let swept = tokio::task::spawn_blocking(move || expiry.sweep(sessions.as_ref()))
            .await
            .unwrap_or_else(|error| Err(SweepError::Stopped(error.to_string())));
        crate::originals::record(&self.metrics, &swept);
        Some(swept)
    }

    /// `GET /readyz`: 200 when the state store answers within `serve.state_timeout_ms`, else
    /// 503 saying why. A replica whose Redis is unreachable still serves (uncompacted by state,
    /// judged afresh), but a load balancer should prefer one that is not.
    async fn ready(&self) -> Response {
        let store = self.store.clone();
        match self
            .bounded(tokio::task::spawn_blocking(move || store.check()))
            .await
        {
            Ok(()) => (StatusCode::OK, "ready\n").into_response(),
            Err(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: the state store: {why}\n"),
            )
                .into_response(),
        }
    }

    /// The answer to a request without the proxy's key, when one is set: 401 in the shape of the
    /// provider the request is for.
    fn refused_key(&self, request: &Request) -> Option<Response> {
        let expected = self.settings.auth_token.as_deref()?;
        let given = request
            .headers()
            .get(KEY_HEADER)
            .map(|value| value.as_bytes())
            .unwrap_or_default();
        if constant_time_eq(given, expected.as_bytes()) {
            return None;
        }
        Metrics::add(&self.metrics.refused, 1);
        let provider = Api::of_request(request.method(), request.uri().path())
            .unwrap_or_else(|| guess_provider(request.headers()));
        Some(provider.error(
            StatusCode::UNAUTHORIZED,
            &format!("condense: this proxy needs its key in the `{KEY_HEADER}` header (serve.auth_token_env)"),
        ))
    }

    /// Waits until every state saved after forwarding and every usage recording of a finished
    /// response is stored.
    pub async fn flushed(&self) {
        self.pending.idle().await;
    }

    async fn compacted(self: Arc<Self>, provider: Api, request: Request) -> Response {
        let started = Instant::now();
        let index = match provider {
            Api::OpenAi => 0,
            Api::Anthropic => 1,
            Api::Responses => 2,
        };
        Metrics::add(&self.metrics.requests[index], 1);
        let (parts, body) = request.into_parts();
        if let Some(encoding) = compressed(&parts.headers) {
            // Condense cannot read it, and the client did nothing wrong: it goes upstream as it
            // came (fail open), uncompacted.
            Metrics::add(&self.metrics.failed_open, 1);
            tracing::warn!(
                provider = provider.name(),
                encoding,
                "the request body is compressed; forwarding it unchanged, not compacted"
            );
            let body = reqwest::Body::wrap_stream(body.into_data_stream());
            return self.forward(provider, parts, body, None).await;
        }
        let bytes = match self.read_body(provider, body).await {
            Ok(bytes) => bytes,
            Err(refused) => return refused,
        };
        if provider == Api::Responses
            && self.emulates_responses_compaction()
            && let Some(value) = crate::native::asks_trigger(&bytes)
        {
            let stream = value["stream"] == true;
            return self
                .answer_compaction(&parts, value, crate::native::Asked::Trigger { stream })
                .await;
        }
        let request = match chat_request(provider, &bytes) {
            Ok(Some(request)) => request,
            Ok(None) => {
                Metrics::add(&self.metrics.passthrough, 1);
                tracing::debug!(
                    provider = provider.name(),
                    "the provider holds this conversation (previous_response_id, or no input list); forwarded as it came"
                );
                return self
                    .forward(provider, parts, reqwest::Body::from(bytes), None)
                    .await;
            }
            Err(why) => {
                Metrics::add(&self.metrics.refused, 1);
                return provider.error(StatusCode::BAD_REQUEST, &why);
            }
        };
        let mut named = parts
            .headers
            .get(SESSION_HEADER)
            .map(|value| value.as_bytes())
            .filter(|value| !value.is_empty())
            .map(named_session);
        let ask_usage = self.settings.ask_stream_usage
            && provider == Api::OpenAi
            && crate::stream_usage::should_ask(&request);
        let (mut started, mut retry) = (started, true);
        loop {
            let mut prepared = self
                .prepare(provider, named.clone(), &bytes, &request, &parts)
                .await;
            if let Some(why) = prepared.refusal.take() {
                return provider.error(StatusCode::BAD_REQUEST, &why);
            }
            if ask_usage {
                self.ask_stream_usage(&mut prepared);
            }
            let added = started.elapsed();
            self.metrics
                .observe_added(u64::try_from(added.as_micros()).unwrap_or(u64::MAX));
            self.save_in_background(&mut prepared);
            log_request(provider, &prepared, added);
            let answered = self
                .clone()
                .answer(provider, parts.clone(), prepared, retry)
                .await;
            match self.given_or_again(answered).await {
                ControlFlow::Break(response) => return response,
                // Once: refused or cut again, the answer goes to the client as it came.
                ControlFlow::Continue(session) => {
                    (named, retry, started) = (Some(session), false, Instant::now());
                }
            }
        }
    }

    /// The answer to give the client, or the session of a request to prepare and send once
    /// more, with what the upstream said of it recorded there: its count of a request it
    /// refused as too long (a whole answer cut at a limit condense lowered was recorded as it
    /// was read, [`Proxy::answer_read_whole`]).
    async fn given_or_again(&self, answered: Answered) -> ControlFlow<Response, String> {
        match answered {
            Answered::Given(response) => ControlFlow::Break(response),
            Answered::TooLong { session, usage } => {
                Metrics::add(&self.metrics.refused_as_too_long, 1);
                tracing::info!(
                    %session,
                    provider_tokens = usage.tokens,
                    "the upstream refused the request as longer than the window; prepared again with its count"
                );
                self.record_usage(session.clone(), usage).await;
                ControlFlow::Continue(session)
            }
            Answered::CutShort { session } => {
                Metrics::add(&self.metrics.cut_replies_sent_again, 1);
                tracing::info!(
                    %session,
                    "the whole answer stopped at the reply limit condense lowered; prepared again with the room it asked"
                );
                ControlFlow::Continue(session)
            }
        }
    }

    /// `prepared`'s body asking its Chat Completions stream for its usage
    /// ([`crate::stream_usage`]): only where the answer's usage is recorded (a request condense
    /// prepared), and while the upstream has not refused the option.
    fn ask_stream_usage(&self, prepared: &mut Prepared) {
        if prepared.sent_messages.is_some()
            && !self.usage_option_refused.load(Ordering::Relaxed)
            && let Some((body, at)) = crate::stream_usage::asked(&prepared.body)
        {
            prepared.body = body;
            prepared.usage_asked = Some(at);
        }
    }

    /// The state a request's preparation deferred, saved once the request is on its way; the
    /// session's lock is held until then.
    fn save_in_background(self: &Arc<Self>, prepared: &mut Prepared) {
        let Some((save, guard)) = prepared.deferred.take() else {
            return;
        };
        let proxy = self.clone();
        let session = prepared.session.clone();
        self.in_background(async move {
            match proxy.save(&session, save.state, save.version).await {
                Ok(Saved::Stored(_)) => {}
                Ok(Saved::Conflict) => tracing::warn!(
                    %session,
                    "the session state changed under an exclusive store; this request's decisions were not saved"
                ),
                Err(error) => tracing::warn!(%session, %error, "the session state was not saved"),
            }
            drop(guard);
        });
    }

    /// The prepared request sent upstream, its answer annotated with what condense did in the
    /// upstream's place; or, after a `compact_20260112` with `pause_after_compaction`, the
    /// compaction block as the whole answer. With `retry`, a request condense prepared that
    /// the upstream refuses as longer than the window is not answered: the upstream's count of
    /// it comes back to prepare it again ([`condense_host::refusal`]); nor is a whole answer
    /// cut at a limit condense lowered ([`Proxy::answer_read_whole`]).
    async fn answer(
        self: Arc<Self>,
        provider: Api,
        parts: axum::http::request::Parts,
        mut prepared: Prepared,
        retry: bool,
    ) -> Answered {
        let usage = prepared.sent_messages.map(|sent| UsageSink {
            proxy: self.clone(),
            session: prepared.session.clone(),
            message: sent,
            lowered_limit: prepared.lowered_limit,
        });
        let edits = crate::answer::AnswerEdits {
            context_management: prepared
                .applied_edits
                .take()
                .map(|applied| serde_json::json!({"applied_edits": applied})),
            compaction: prepared.block.as_ref().map(|block| block.content.clone()),
            usage_asked: false,
        };
        if let Some(block) = prepared.block.take().filter(|block| block.pause) {
            // `pause_after_compaction`: the block is the whole answer, the upstream not asked.
            return Answered::Given(block.paused_answer(prepared.tokens.1));
        }
        let mut response = match self
            .send(provider, &parts, reqwest::Body::from(prepared.body.clone()))
            .await
        {
            Ok(response) => response,
            Err(unreachable) => return Answered::Given(unreachable),
        };
        if let Some(at) = prepared.usage_asked
            && matches!(response.status().as_u16(), 400 | 422)
        {
            let refusal = match Whole::read(provider, response).await {
                Ok(refusal) => refusal,
                Err(unread) => return Answered::Given(unread),
            };
            if condense_host::refusal::too_long(&refusal.body).is_some() {
                return self.answer_refusal(provider, prepared, retry, refusal);
            }
            // Any other refusal: sent again as the client's request would have gone. The option
            // was the cause where the refusal names it, or where the request goes through
            // without it (a server that refuses fields it does not know in words of its own);
            // it is then never asked again. Otherwise the client gets the answer its own
            // request gets, and later streams are still asked.
            let named = crate::stream_usage::refuses_option(refusal.status.as_u16(), &refusal.body);
            prepared.body = crate::stream_usage::unasked(&prepared.body, at);
            prepared.usage_asked = None;
            response = match self
                .send(provider, &parts, reqwest::Body::from(prepared.body.clone()))
                .await
            {
                Ok(response) => response,
                Err(unreachable) => return Answered::Given(unreachable),
            };
            if named || response.status().is_success() {
                self.usage_option_refused.store(true, Ordering::Relaxed);
                tracing::warn!(
                    upstream = self.settings.upstream(provider),
                    refused = %refusal.status,
                    "the upstream refuses stream_options; Chat Completions streams are no longer asked for their usage"
                );
            }
        }
        if retry && prepared.sent_messages.is_some() && response.status() == StatusCode::BAD_REQUEST
        {
            return match Whole::read(provider, response).await {
                Ok(refusal) => self.answer_refusal(provider, prepared, retry, refusal),
                Err(unread) => Answered::Given(unread),
            };
        }
        let edits = crate::answer::AnswerEdits {
            usage_asked: prepared.usage_asked.is_some(),
            ..edits
        };
        if retry
            && prepared.lowered_limit.is_some()
            && response.status().is_success()
            && !relay::event_stream(response.headers())
        {
            return self
                .answer_read_whole(provider, response, usage, edits, prepared.session)
                .await;
        }
        Answered::Given(self.relayed(provider, response, usage, edits).await)
    }

    /// The whole answer (not a stream) to a request whose reply limit condense lowered, read
    /// before the client gets it. One that stopped at that limit is a reply condense cut short,
    /// which the client's own limit would have let through: it is recorded in the session
    /// (whose next preparation leaves the reply twice that room, compacting to make it) and not
    /// given; the request is prepared and sent once more. A client that waits for a whole
    /// answer loses no time to the read, and gets the reply it asked room for. A stream is
    /// relayed as it comes (holding it back would hold back every token of the reply), so its
    /// client meets the cut, and its next requests leave the room.
    async fn answer_read_whole(
        &self,
        provider: Api,
        response: reqwest::Response,
        usage: Option<UsageSink>,
        edits: crate::answer::AnswerEdits,
        session: String,
    ) -> Answered {
        let whole = match Whole::read(provider, response).await {
            Ok(whole) => whole,
            Err(unread) => return Answered::Given(unread),
        };
        let mut scanner = UsageScanner::new(provider, false);
        scanner.feed(&whole.body);
        let answer = scanner.finish_answer();
        if let Some(usage) = usage {
            if answer.at_limit {
                usage.recorded(answer).await;
                return Answered::CutShort { session };
            }
            usage.record(answer);
        }
        let body = Box::pin(futures_util::stream::once(std::future::ready(Ok(
            whole.body
        ))));
        Answered::Given(
            self.relayed_body(provider, whole.status, &whole.headers, body, None, edits)
                .await,
        )
    }

    /// What becomes of a request the upstream refused: with `retry`, one it refused as longer
    /// than the window comes back with the upstream's count to be prepared again
    /// ([`condense_host::refusal`]); any other refusal goes to the client as it came.
    fn answer_refusal(
        &self,
        provider: Api,
        prepared: Prepared,
        retry: bool,
        refusal: Whole,
    ) -> Answered {
        let Whole {
            status,
            headers,
            body,
        } = refusal;
        let Some(sent) = prepared
            .sent_messages
            .filter(|_| retry && status == StatusCode::BAD_REQUEST)
        else {
            return Answered::Given(relayed_whole(provider, status, &headers, body));
        };
        // Without the provider's count, more than the window is what it said.
        let tokens = match condense_host::refusal::too_long(&body) {
            Some(TooLong::Uncounted) if prepared.window == 0 => None,
            refusal => refusal.map(|refusal| refusal.input_tokens(prepared.window)),
        };
        let Some(usage) = tokens.and_then(|tokens| ReportedUsage::unanswered_request(sent, tokens))
        else {
            return Answered::Given(relayed_whole(provider, status, &headers, body));
        };
        Answered::TooLong {
            session: prepared.session,
            usage,
        }
    }

    /// The whole body, within `serve.body_limit_bytes`; a body past it, or one that cannot be
    /// read, is refused in the provider's shape.
    async fn read_body(&self, provider: Api, body: axum::body::Body) -> Result<Bytes, Response> {
        axum::body::to_bytes(body, self.settings.body_limit_bytes)
            .await
            .map_err(|error| {
                Metrics::add(&self.metrics.refused, 1);
                let too_large = std::error::Error::source(&error)
                    .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
                if too_large {
                    provider.error(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        &format!(
                            "the request body is larger than condense's limit of {} bytes (serve.body_limit_bytes)",
                            self.settings.body_limit_bytes
                        ),
                    )
                } else {
                    provider.error(
                        StatusCode::BAD_REQUEST,
                        &format!("the request body could not be read: {error}"),
                    )
                }
            })
    }

    async fn passthrough(self: Arc<Self>, request: Request) -> Response {
        Metrics::add(&self.metrics.passthrough, 1);
        let (parts, body) = request.into_parts();
        let provider = guess_provider(&parts.headers);
        let body = reqwest::Body::wrap_stream(body.into_data_stream());
        self.forward(provider, parts, body, None).await
    }

    /// The body to forward: the prepared conversation, or, when anything about preparing it
    /// fails, the client's own bytes (fail open: condense never fails a request).
    async fn prepare(
        &self,
        provider: Api,
        named: Option<String>,
        bytes: &Bytes,
        request: &condense_formats::Request<'_>,
        parts: &axum::http::request::Parts,
    ) -> Prepared {
        let format = provider.format();
        let (conversation, memos) = match request.read_memoized(format, &self.messages) {
            Ok(read) => read,
            Err(error) => {
                return self.failed_open(named.unwrap_or_default(), bytes, "read", &error);
            }
        };
        let model = conversation.model();
        let upstream = self.upstream_summarizer(provider, model, parts);
        let summarizer = upstream
            .as_ref()
            .map(|summarizer| summarizer as &dyn condense_host::Summarizer);
        let session = named.unwrap_or_else(|| derived_session(provider, &conversation));
        let slot = self.session_slot(&session);
        self.learned(&slot).await;
        // Held until the state is saved, which for an exclusive store is after forwarding.
        let guard = slot.lock.clone().lock_owned().await;
        // Read again only after a lost compare-and-set (the messages are cached by then): the
        // first attempt takes the conversation without copying it.
        let mut first = Some((conversation, memos));
        let mut attempt = 0;
        let mut applied_edits = None;
        loop {
            attempt += 1;
            let (mut conversation, mut memos) = match first.take() {
                Some(read) => read,
                None => match request.read_memoized(format, &self.messages) {
                    Ok(read) => read,
                    Err(error) => return self.failed_open(session, bytes, "read", &error),
                },
            };
            // condense's own compaction item (from its /responses/compact): its summary in its
            // place, what came before it gone, as the provider treats its own.
            // What condense does in the upstream's place changes the messages, and with them
            // the indices the memos are kept by.
            let stand_in = match self
                .stand_in_for_upstream(provider, &mut conversation)
                .await
            {
                Ok(stand_in) => stand_in,
                Err(refusal) => return self.refused_stand_in(session, bytes, refusal),
            };
            if stand_in.changed {
                memos = condense_core::Memos::default();
            }
            if stand_in.applied_edits.is_some() {
                applied_edits = stand_in.applied_edits;
            }
            let (versioned, saving) = self.load_or_fresh(&session).await;
            let mut state = versioned.state;
            let prepared = self
                .compactor
                .prepare_memoized(conversation, &memos, &mut state, summarizer)
                .await;
            let compaction = match prepared {
                Ok(compaction) => compaction,
                Err(error) => return self.failed_open(session, bytes, "prepare", &error),
            };
            let body = match body_of(format, bytes, &compaction, stand_in.changed) {
                Ok(body) => body,
                Err(error) => return self.failed_open(session, bytes, "write", &error),
            };
            let settled = self
                .settle(&session, state, versioned.version, saving, attempt)
                .await;
            let Ok(deferred) = settled else {
                continue;
            };
            return self.sent(
                session,
                body,
                &compaction,
                upstream.as_ref(),
                deferred.map(|save| (save, guard)),
                (applied_edits, stand_in.block),
            );
        }
    }

    /// What a prepared request sends, with what its decisions were for the log and metrics.
    fn sent(
        &self,
        session: String,
        body: Bytes,
        compaction: &condense_host::Compaction,
        upstream: Option<&UpstreamSummarizer>,
        deferred: Option<(DeferredSave, tokio::sync::OwnedMutexGuard<()>)>,
        (applied_edits, block): (Option<Vec<Value>>, Option<NativeBlock>),
    ) -> Prepared {
        let report = &compaction.report;
        if let CompactionOutcome::Failed {
            summarizer, error, ..
        } = &report.compaction
        {
            // The request line says that it failed; this one says why, for the operator.
            tracing::warn!(%session, %summarizer, %error, "the summarizer failed");
        }
        let asked = upstream.and_then(UpstreamSummarizer::asked);
        let fired = self.record(report, asked);
        Prepared {
            session,
            body,
            sent_messages: Some(compaction.conversation.messages.len()),
            window: self
                .compactor
                .tail_for(&compaction.conversation)
                .context_window,
            tokens: (report.tokens_before, report.tokens_after),
            due: (
                report.measured.tokens(),
                report.due_after,
                match report.measured {
                    condense_host::Measure::ProviderUsage { .. } => "provider usage",
                    _ => "tokenizer",
                },
            ),
            fired,
            deferred,
            refusal: None,
            applied_edits,
            block,
            usage_asked: None,
            lowered_limit: report.reply_limit.map(|limit| limit.sent),
        }
    }

    /// The summarizer that asks the request's own upstream with the client's credentials, when
    /// the configuration names it (`summarizer.kind = "upstream"`).
    pub(super) fn upstream_summarizer(
        &self,
        provider: Api,
        model: Option<&str>,
        parts: &axum::http::request::Parts,
    ) -> Option<UpstreamSummarizer<'_>> {
        let template = self.settings.upstream_summarizer.as_ref()?;
        Some(UpstreamSummarizer::for_request(
            template,
            provider,
            self.settings.upstream(provider),
            parts,
            model,
            &self.metrics,
        ))
    }

    /// Counts what fired in the metrics, and names it for the request's log line (with how the
    /// upstream was asked for a summary, when it was).
    fn record(&self, report: &condense_host::CompactReport, asked: Option<Asked>) -> String {
        let mut fired: Vec<std::borrow::Cow<'static, str>> = Vec::new();
        if matches!(report.head, Some(HeadOutcome::Reused { .. })) {
            Metrics::add(&self.metrics.head_reused, 1);
            fired.push("frozen summary".into());
        }
        if report
            .prune
            .microcompact
            .as_ref()
            .is_some_and(|m| m.cleared > 0)
        {
            Metrics::add(&self.metrics.microcompacted, 1);
            fired.push("microcompact".into());
        }
        if report.prune.replaced() > 0 {
            Metrics::add(&self.metrics.pruned, 1);
            fired.push("prune".into());
        }
        match &report.compaction {
            CompactionOutcome::Summarized { rejected, .. } => {
                Metrics::add(&self.metrics.summarized, 1);
                fired.push(match (asked, rejected) {
                    (_, Some(reason)) => {
                        Metrics::add(&self.metrics.rejected_summaries, 1);
                        format!("summary (the model's answer rejected twice, {reason}: the extractive summary stood in)").into()
                    }
                    (Some(asked), None) => format!("summary ({})", asked.describe()).into(),
                    (None, None) => "summary".into(),
                });
            }
            CompactionOutcome::Failed { .. } => {
                Metrics::add(&self.metrics.summarizer_failures, 1);
                fired.push("summary failed".into());
            }
            CompactionOutcome::NothingNew { .. } => {
                fired.push("nothing new to summarize".into());
            }
            CompactionOutcome::NothingToCompact { .. } => {
                fired.push("nothing to summarize".into());
            }
            CompactionOutcome::CircuitOpen {
                consecutive_failures,
            } => {
                fired.push(
                    format!("summary skipped: circuit open after {consecutive_failures} failures")
                        .into(),
                );
            }
            _ => {}
        }
        if let Some(limit) = report.reply_limit {
            Metrics::add(&self.metrics.reply_limits_lowered, 1);
            fired.push(format!("reply limit {} -> {}", limit.asked, limit.sent).into());
        }
        if !report.under_threshold {
            Metrics::add(&self.metrics.over_threshold, 1);
            fired.push("still over the threshold".into());
        }
        if matches!(report.head, Some(HeadOutcome::Diverged { .. })) {
            Metrics::add(&self.metrics.diverged, 1);
            fired.push("history diverged: judged afresh".into());
        }
        Metrics::add(&self.metrics.tokens_before, report.tokens_before as u64);
        Metrics::add(&self.metrics.tokens_after, report.tokens_after as u64);
        if fired.is_empty() {
            "nothing".to_owned()
        } else {
            fired.join(", ")
        }
    }

    fn failed_open(
        &self,
        session: String,
        bytes: &Bytes,
        step: &str,
        error: &dyn std::fmt::Display,
    ) -> Prepared {
        Metrics::add(&self.metrics.failed_open, 1);
        tracing::warn!(%session, step, %error, "compaction failed; forwarding the request unchanged");
        Prepared {
            session,
            body: bytes.clone(),
            sent_messages: None,
            window: 0,
            tokens: (0, 0),
            due: (0, 0, "none"),
            fired: format!("failed open at {step}"),
            deferred: None,
            refusal: None,
            applied_edits: None,
            block: None,
            usage_asked: None,
            lowered_limit: None,
        }
    }

    /// Runs `work` beside the request, off its path (a state saved once the request is on its
    /// way, a usage recorded once the response has ended); [`Proxy::flushed`] waits for it.
    fn in_background(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        let pending = self.pending.clone();
        pending.begin();
        tokio::spawn(async move {
            work.await;
            pending.end();
        });
    }
}

/// What preparing a request gave.
struct Prepared {
    session: String,
    body: Bytes,
    /// How many messages were sent (the reply's index in the next request), when the request
    /// was compacted.
    sent_messages: Option<usize>,
    /// The window condense sized the request for (its model's); 0 where it did not.
    window: usize,
    tokens: (usize, usize),
    /// What drove the decisions: the trigger's measure before and after (the provider's
    /// count, or condense's tokenizer), and which it was.
    due: (usize, usize, &'static str),
    fired: String,
    /// The state to save once the request is forwarded, and the session's lock held until then.
    deferred: Option<(DeferredSave, tokio::sync::OwnedMutexGuard<()>)>,
    /// Why the request is answered with 400 instead of being sent.
    refusal: Option<String>,
    /// The context edits condense applied in the upstream's place, for the answer's
    /// `context_management.applied_edits`.
    applied_edits: Option<Vec<Value>>,
    /// The `compaction` block of a `compact_20260112` condense ran, for the answer.
    block: Option<NativeBlock>,
    /// Where the body asks its Chat Completions stream for its usage on the client's behalf
    /// ([`crate::stream_usage::asked`]), when it does.
    usage_asked: Option<usize>,
    /// The reply limit condense lowered the request's to, when it did.
    lowered_limit: Option<u64>,
}

impl Prepared {
    /// A request condense must refuse (400 in the provider's shape) rather than send.
    fn refused(session: String, why: String) -> Prepared {
        Prepared {
            session,
            body: Bytes::new(),
            sent_messages: None,
            window: 0,
            tokens: (0, 0),
            due: (0, 0, "none"),
            fired: "refused".into(),
            deferred: None,
            refusal: Some(why),
            applied_edits: None,
            block: None,
            usage_asked: None,
            lowered_limit: None,
        }
    }
}

/// What became of a prepared request sent upstream ([`Proxy::answer`]).
enum Answered {
    /// The answer to give the client.
    Given(Response),
    /// The upstream refused it as longer than the model's window: its count of it (one over
    /// the window where it gave none), to record in the session before preparing the request
    /// again.
    TooLong {
        /// The request's session.
        session: String,
        /// The upstream's count, at the last message the request carried.
        usage: ReportedUsage,
    },
    /// A whole answer stopped at the reply limit condense lowered, recorded in the session
    /// ([`Proxy::answer_read_whole`]): the request is prepared again and sent once more.
    CutShort {
        /// The request's session.
        session: String,
    },
}

/// An upstream's answer read whole to see what it says: a refusal, or a whole answer to a
/// request whose reply limit condense lowered.
struct Whole {
    status: reqwest::StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Bytes,
}

impl Whole {
    /// `response` read whole; the answer to give when it cannot be (502 in `provider`'s shape).
    async fn read(provider: Api, mut response: reqwest::Response) -> Result<Whole, Response> {
        let (status, headers) = (response.status(), std::mem::take(response.headers_mut()));
        match response.bytes().await {
            Ok(body) => Ok(Whole {
                status,
                headers,
                body,
            }),
            Err(error) => Err(provider.error(
                StatusCode::BAD_GATEWAY,
                &format!("condense: the upstream's answer could not be read: {error}"),
            )),
        }
    }
}

/// An upstream's answer read whole (a refusal condense read), given to the client as it came.
fn relayed_whole(
    provider: Api,
    status: reqwest::StatusCode,
    headers: &reqwest::header::HeaderMap,
    body: Bytes,
) -> Response {
    let mut builder = Response::builder().status(status.as_u16());
    for (name, value) in headers {
        if relay::forwarded(name) {
            builder = builder.header(name, value);
        }
    }
    builder.body(Body::from(body)).unwrap_or_else(|error| {
        provider.error(
            StatusCode::BAD_GATEWAY,
            &format!("condense: the upstream's response could not be relayed: {error}"),
        )
    })
}

/// The body to send: the client's own bytes when nothing was replaced, cut or summarized (as they
/// came, without the cost of writing them again), else the compacted conversation written.
fn body_of(
    format: condense_formats::Format,
    bytes: &Bytes,
    compaction: &condense_host::Compaction,
    stood_in: bool,
) -> Result<Bytes, condense_formats::FormatError> {
    let report = &compaction.report;
    let unchanged = !stood_in
        && !matches!(report.head, Some(HeadOutcome::Reused { .. }))
        && !report.prune.changed()
        && !matches!(report.compaction, CompactionOutcome::Summarized { .. })
        && report.reply_limit.is_none();
    if unchanged {
        return Ok(bytes.clone());
    }
    condense_formats::write_compact(format, &compaction.conversation).map(Bytes::from)
}

/// A chat request is compacted ([`Api::of_request`]); any other is relayed to the upstream
/// as it came.
async fn dispatch(State(proxy): State<Arc<Proxy>>, request: Request) -> Response {
    if let Some(refused) = proxy.refused_key(&request) {
        return refused;
    }
    if request.method() == axum::http::Method::POST
        && request.uri().path().ends_with("/responses/compact")
        && proxy.emulates_responses_compaction()
    {
        return proxy.compact_endpoint(request).await;
    }
    match Api::of_request(request.method(), request.uri().path()) {
        Some(provider) => proxy.compacted(provider, request).await,
        None => proxy.passthrough(request).await,
    }
}

/// The provider a request that is not a chat request is for: Anthropic's when it carries
/// Anthropic's headers, else OpenAI's.
fn guess_provider(headers: &axum::http::HeaderMap) -> Api {
    if headers.contains_key("x-api-key") || headers.contains_key("anthropic-version") {
        Api::Anthropic
    } else {
        Api::OpenAi
    }
}

/// Whether `a` and `b` are equal, in time that does not depend on where they differ (a key
/// compared byte by byte with an early exit can be guessed a byte at a time).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut differ = a.len() ^ b.len();
    for (index, byte) in b.iter().enumerate() {
        differ |= usize::from(a.get(index).copied().unwrap_or(!byte) ^ byte);
    }
    differ == 0
}

/// The request body's `content-encoding` when it is anything but plain bytes (`gzip`, `br`,
/// `zstd`, …): such a body is relayed as it came rather than read.
fn compressed(headers: &axum::http::HeaderMap) -> Option<String> {
    let encoding = headers.get(axum::http::header::CONTENT_ENCODING)?;
    let encoding = String::from_utf8_lossy(encoding.as_bytes())
        .trim()
        .to_owned();
    (!encoding.is_empty() && !encoding.eq_ignore_ascii_case("identity")).then_some(encoding)
}

/// The body as a chat request, or why it is not one (the client gets it in a 400). UTF-8 is
/// checked once for the whole body: parsing from a `str` then skips checking each string again.
/// The JSON is checked whole, but only the messages not seen before are built (see
/// [`condense_formats::Request`]).
///
/// `None` for a Responses request with no list of items to compact: one that continues a
/// stored response (`previous_response_id`: its `input` is only what is new, the provider holds
/// the rest), or whose `input` is not a list (a single string; anything else is the provider's
/// to refuse). It goes upstream as it came.
fn chat_request(
    provider: Api,
    bytes: &[u8],
) -> Result<Option<condense_formats::Request<'_>>, String> {
    let text = std::str::from_utf8(bytes).map_err(|error| {
        format!(
            "the request body is not valid UTF-8 (byte {}): JSON must be",
            error.valid_up_to()
        )
    })?;
    let request = condense_formats::Request::parse_for(provider.format(), text).map_err(
        |error| match error {
            condense_formats::FormatError::Json {
                line,
                column,
                message,
            } => {
                format!(
                    "the request body is not valid JSON (line {line}, column {column}): {message}"
                )
            }
            _ => "not a chat request: the body is not a JSON object".to_owned(),
        },
    )?;
    if provider == Api::Responses {
        let continues = request
            .entry("previous_response_id")
            .is_some_and(|id| id != "null");
        if continues || (!request.has_messages() && request.has_entry("input")) {
            return Ok(None);
        }
        if !request.has_messages() {
            return Err("not a Responses request: the body has no `input`".to_owned());
        }
    } else if !request.has_messages() {
        return Err("not a chat request: the body has no `messages` array".to_owned());
    }
    Ok(Some(request))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upstream_with_the_apis_path_does_not_get_it_twice() {
        for (upstream, path, url) in [
            (
                "http://h:8000",
                "/v1/chat/completions",
                "http://h:8000/v1/chat/completions",
            ),
            (
                "http://h:8000/",
                "/v1/messages",
                "http://h:8000/v1/messages",
            ),
            (
                "http://h:8000/v1",
                "/v1/chat/completions",
                "http://h:8000/v1/chat/completions",
            ),
            (
                "http://h:8000/v1/",
                "/v1/responses?x=1",
                "http://h:8000/v1/responses?x=1",
            ),
            (
                "https://gw/openai",
                "/v1/chat/completions",
                "https://gw/openai/v1/chat/completions",
            ),
            ("http://h/v1", "/v10/models", "http://h/v1/v10/models"),
        ] {
            assert_eq!(upstream_url(upstream, path), url, "{upstream} + {path}");
        }
    }
}
