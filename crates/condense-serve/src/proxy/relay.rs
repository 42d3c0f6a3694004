//! The relay: a request sent upstream, and the answer streamed back to the client as it comes
//! (or as it was read whole, where the proxy read it first: [`Proxy::relayed_body`]), its usage
//! read on the way and recorded for the session.

use super::*;

impl Proxy {
    /// Sends the request to `provider`'s upstream, at the path it came to, with its headers,
    /// and relays the answer; `usage` is where a successful answer's usage goes.
    pub(super) async fn forward(
        &self,
        provider: Api,
        parts: axum::http::request::Parts,
        body: reqwest::Body,
        usage: Option<UsageSink>,
    ) -> Response {
        self.forward_annotated(
            provider,
            parts,
            body,
            usage,
            crate::answer::AnswerEdits::default(),
        )
        .await
    }

    /// The answer when the upstream could not be reached or did not answer in time (502 or
    /// 504 in the provider's shape), counted and logged.
    fn unreachable(&self, provider: Api, upstream: &str, error: &reqwest::Error) -> Response {
        Metrics::add(&self.metrics.upstream_errors, 1);
        tracing::warn!(upstream, %error, "upstream request failed");
        let (status, what) = if error.is_timeout() {
            (StatusCode::GATEWAY_TIMEOUT, "did not answer in time")
        } else {
            (StatusCode::BAD_GATEWAY, "could not be reached")
        };
        provider.error(
            status,
            &format!("condense: the upstream {upstream} {what}: {error}"),
        )
    }

    /// [`Proxy::forward`], and a successful answer, JSON or a stream of events, gets `edits`:
    /// what condense did in the upstream's place (its `context_management`, its compaction
    /// block).
    pub(super) async fn forward_annotated(
        &self,
        provider: Api,
        parts: axum::http::request::Parts,
        body: reqwest::Body,
        usage: Option<UsageSink>,
        edits: crate::answer::AnswerEdits,
    ) -> Response {
        match self.send(provider, &parts, body).await {
            Ok(response) => self.relayed(provider, response, usage, edits).await,
            Err(unreachable) => unreachable,
        }
    }

    /// Sends the request to `provider`'s upstream, at the path it came to, with its headers:
    /// the upstream's response as it begins, or the answer to give when it could not be had.
    pub(super) async fn send(
        &self,
        provider: Api,
        parts: &axum::http::request::Parts,
        body: reqwest::Body,
    ) -> Result<reqwest::Response, Response> {
        let upstream = self.settings.upstream(provider);
        let path = parts.uri.path_and_query().map_or("/", |path| path.as_str());
        let url = upstream_url(upstream, path);
        let mut request = self.client.request(parts.method.clone(), &url).body(body);
        for (name, value) in &parts.headers {
            if forwarded(name) {
                request = request.header(name, value);
            }
        }
        request
            .send()
            .await
            .map_err(|error| self.unreachable(provider, upstream, &error))
    }

    /// The upstream's `response` relayed to the client as [`Proxy::forward_annotated`] does.
    pub(super) async fn relayed(
        &self,
        provider: Api,
        mut response: reqwest::Response,
        usage: Option<UsageSink>,
        edits: crate::answer::AnswerEdits,
    ) -> Response {
        let status = response.status();
        let headers = std::mem::take(response.headers_mut());
        let body = Box::pin(response.bytes_stream());
        self.relayed_body(provider, status, &headers, body, usage, edits)
            .await
    }

    /// An upstream's answer (`status`, `headers`, the `body` as it streams, or as it was read
    /// whole) relayed to the client as [`Proxy::forward_annotated`] does.
    pub(super) async fn relayed_body(
        &self,
        provider: Api,
        status: reqwest::StatusCode,
        headers: &reqwest::header::HeaderMap,
        body: BodyStream,
        usage: Option<UsageSink>,
        edits: crate::answer::AnswerEdits,
    ) -> Response {
        let mut builder = Response::builder().status(status.as_u16());
        let sse = event_stream(headers);
        for (name, value) in headers {
            if forwarded(name) {
                builder = builder.header(name, value);
            }
        }
        let (scanner, sink) = match usage {
            Some(sink) if status.is_success() => {
                (Some(UsageScanner::new(provider, sse)), Some(sink))
            }
            _ => (None, None),
        };
        // Read for usage as the upstream sent it, before any edit: an edit may take the usage
        // out (a stream whose usage condense asked for the client).
        let relay: BodyStream = Box::pin(Relay {
            inner: body,
            scanner,
            sink,
        });
        let relay = if status.is_success() {
            edited(relay, edits, sse).await
        } else {
            relay
        };
        builder
            .body(Body::from_stream(relay))
            .unwrap_or_else(|error| {
                provider.error(
                    StatusCode::BAD_GATEWAY,
                    &format!("condense: the upstream's response could not be relayed: {error}"),
                )
            })
    }
}

/// An answer's body as it streams.
pub(super) type BodyStream = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// Whether an answer with these `headers` is a stream of server-sent events.
pub(super) fn event_stream(headers: &reqwest::header::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"))
}

/// The body of a successful answer as it streams, with `edits` made to it: each whole event of
/// a stream as it completes, or a JSON answer once it has all come.
async fn edited(body: BodyStream, edits: crate::answer::AnswerEdits, sse: bool) -> BodyStream {
    use futures_util::{StreamExt as _, TryStreamExt as _};
    if edits.is_empty() {
        return body;
    }
    if !sse {
        let whole = body
            .try_fold(Vec::new(), |mut whole, chunk| {
                whole.extend_from_slice(&chunk);
                std::future::ready(Ok(whole))
            })
            .await;
        let edited = whole.map(|bytes| edits.apply_json(&bytes));
        return Box::pin(futures_util::stream::once(async move { edited }));
    }
    // The upstream's chunks, then the end: whole events edited as they complete.
    let chunks = body
        .map(Some)
        .chain(futures_util::stream::once(async { None }));
    Box::pin(chunks.scan(edits.stream(), |editor, chunk| {
        let edited = match chunk {
            Some(Ok(chunk)) => Ok(editor.feed(&chunk)),
            Some(Err(error)) => Err(error),
            None => Ok(editor.finish()),
        };
        std::future::ready(Some(edited))
    }))
}

/// Where a finished response's usage goes.
pub(super) struct UsageSink {
    pub(super) proxy: Arc<Proxy>,
    pub(super) session: String,
    pub(super) message: usize,
    /// The reply limit condense lowered for the request, when it did.
    pub(super) lowered_limit: Option<u64>,
}

impl UsageSink {
    /// Records what `answer` told of the session, in the background: the request's answer is
    /// on its way to the client meanwhile, and the session's next request waits for it.
    pub(super) fn record(self, answer: ScannedAnswer) {
        let proxy = self.proxy.clone();
        let session = self.session.clone();
        proxy.learn_in_background(&session, self.recorded(answer));
    }

    /// What `answer` told of the session, recorded in it: the provider's count of the request,
    /// and a reply cut at the limit condense lowered (with a warning and its metric).
    pub(super) async fn recorded(self, answer: ScannedAnswer) {
        let cut_at = self.lowered_limit.filter(|_| answer.at_limit);
        if let Some(limit) = cut_at {
            // The one cost of lowering a limit: a reply longer than the room condense left.
            // The session's next requests leave the reply more (`record_cut_reply`).
            Metrics::add(&self.proxy.metrics.replies_cut_at_lowered_limit, 1);
            tracing::warn!(
                session = %self.session,
                limit,
                "the reply stopped at the limit condense lowered it to"
            );
        }
        let count = |tokens: u64| usize::try_from(tokens).unwrap_or(usize::MAX);
        let usage = match cut_at {
            // No answer the client can go on from: it sends the request again (or goes on
            // after it), which the input's count measures.
            Some(_) => answer
                .input
                .and_then(|input| ReportedUsage::unanswered_request(self.message, count(input))),
            None => answer
                .tokens
                .map(|tokens| ReportedUsage::answered(self.message, count(tokens))),
        };
        if usage.is_none() && cut_at.is_none() {
            return;
        }
        let learn = |state: &mut SessionState| {
            if let Some(usage) = usage {
                state.reported_usage = Some(usage);
            }
            match cut_at {
                // The input's figure is `usage`'s, at the message this request sent last.
                Some(limit) => state.record_cut_reply(count(limit), None),
                None => state.reply_went_through(),
            }
        };
        self.proxy.learn(self.session, learn).await;
    }
}

/// The upstream's body, chunk by chunk as it arrives, read for usage on the way.
pub(super) struct Relay {
    pub(super) inner: BodyStream,
    pub(super) scanner: Option<UsageScanner>,
    pub(super) sink: Option<UsageSink>,
}

impl Relay {
    /// Hands what was read of the answer to its sink, once.
    fn record(&mut self) {
        if let (Some(scanner), Some(sink)) = (self.scanner.take(), self.sink.take()) {
            sink.record(scanner.finish_answer());
        }
    }
}

impl Stream for Relay {
    type Item = reqwest::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(chunk))) => {
                if let Some(scanner) = self.scanner.as_mut() {
                    scanner.feed(chunk);
                    // Recorded before the client reads the answer's last event, after which
                    // it may send its next request while the upstream's body has yet to end.
                    if scanner.ended() {
                        self.record();
                    }
                }
            }
            Poll::Ready(None) => self.record(),
            // An upstream that fails mid-stream: the client's stream ends with the error (its
            // connection is cut), and no usage is recorded.
            Poll::Ready(Some(Err(error))) => {
                tracing::warn!(%error, "the upstream's stream failed");
                self.scanner = None;
                self.sink = None;
            }
            Poll::Pending => {}
        }
        polled
    }
}

/// Headers that belong to one hop, not to the request: never forwarded either way. The
/// client's `accept-encoding` is dropped too, so the upstream answers uncompressed and the
/// proxy can read its usage; the bytes relayed are the upstream's own.
pub(super) fn forwarded(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
            | "accept-encoding"
            | SESSION_HEADER
            | KEY_HEADER
    )
}
