//! What condense does in the upstream's place when the upstream lacks it: OpenAI's compaction
//! endpoint and Codex's compaction trigger, answered with condense's own signed item, and
//! Anthropic's context management, applied before the request goes on.

use super::*;

impl Proxy {
    /// The key condense's compaction items are signed with (the store's, read once).
    pub(super) async fn compaction_key(&self) -> Result<Vec<u8>, String> {
        self.compaction_key
            .get_or_try_init(|| async {
                let store = self.store.clone();
                self.bounded(tokio::task::spawn_blocking(move || store.secret()))
                    .await
            })
            .await
            .cloned()
    }

    /// Whether condense applies Anthropic's context edits for the Anthropic upstream.
    pub(super) fn emulates_context_management(&self) -> bool {
        crate::native::emulates(
            self.settings.native_compaction,
            &self.settings.anthropic_upstream,
            "api.anthropic.com",
        )
    }

    /// Whether condense answers compaction for requests to the OpenAI upstream.
    pub(super) fn emulates_responses_compaction(&self) -> bool {
        crate::native::emulates(
            self.settings.native_compaction,
            &self.settings.openai_upstream,
            "api.openai.com",
        )
    }

    /// `POST …/responses/compact` answered here (`serve.native_compaction`): the request's
    /// `input` summarized now by condense, the answer the `response.compaction` object the
    /// OpenAI SDK and Codex read, with exactly one `compaction` item whose envelope only this
    /// proxy's store can have signed. Bad requests get 400 in OpenAI's shape.
    pub(super) async fn compact_endpoint(self: Arc<Self>, request: Request) -> Response {
        let provider = Api::Responses;
        let (parts, body) = request.into_parts();
        let bytes = match axum::body::to_bytes(body, self.settings.body_limit_bytes).await {
            Ok(bytes) => bytes,
            Err(error) => {
                Metrics::add(&self.metrics.refused, 1);
                return provider.error(
                    StatusCode::BAD_REQUEST,
                    &format!("the request body could not be read: {error}"),
                );
            }
        };
        let value = match serde_json::from_slice::<Value>(&bytes) {
            Ok(value) => value,
            Err(error) => {
                Metrics::add(&self.metrics.refused, 1);
                return provider.error(
                    StatusCode::BAD_REQUEST,
                    &format!("the request body is not JSON: {error}"),
                );
            }
        };
        self.answer_compaction(&parts, value, crate::native::Asked::Endpoint)
            .await
    }

    /// A compaction asked of the proxy (`/responses/compact`, or a `compaction_trigger` item)
    /// answered by condense: the request's `input` summarized now, the answer holding exactly
    /// one `compaction` item whose envelope only this proxy's store can have signed, in the
    /// shape `asked` wants. Bad requests get 400 in OpenAI's shape.
    pub(super) async fn answer_compaction(
        &self,
        parts: &axum::http::request::Parts,
        value: Value,
        asked: crate::native::Asked,
    ) -> Response {
        let provider = Api::Responses;
        let started = Instant::now();
        let CompactRequest {
            conversation,
            model,
            key,
        } = match self.compact_request(value).await {
            Ok(read) => read,
            Err(refused) => return refused,
        };
        let upstream = self.upstream_summarizer(provider, model.as_deref(), parts);
        let summarizer = upstream
            .as_ref()
            .map(|summarizer| summarizer as &dyn condense_host::Summarizer);
        let compaction = match self.compactor.compact_now(conversation, summarizer).await {
            Ok(compaction) => compaction,
            Err(error) => {
                return provider.error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("condense could not compact: {error}"),
                );
            }
        };
        let report = &compaction.report;
        let (compacted, summary_tokens) = match self.summarized(&compaction) {
            Ok(summarized) => summarized,
            Err(why) => return provider.error(StatusCode::BAD_GATEWAY, &why),
        };
        let created_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        let Some(answer) = crate::native::compaction_answer(
            &compacted,
            &key,
            model.as_deref(),
            (report.tokens_before, summary_tokens),
            created_at,
            asked,
        ) else {
            return provider.error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "condense's compaction holds no summary",
            );
        };
        Metrics::add(&self.metrics.emulated_compactions, 1);
        tracing::info!(
            tokens_before = report.tokens_before,
            summary_tokens,
            asked = ?asked,
            added_ms = %format_args!("{:.3}", started.elapsed().as_secs_f64() * 1_000.0),
            "compaction answered by condense"
        );
        let content_type = match asked {
            crate::native::Asked::Trigger { stream: true } => "text/event-stream",
            _ => "application/json",
        };
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, content_type)],
            answer,
        )
            .into_response()
    }

    /// The compacted conversation a `compaction` item stands for, and its summary's tokens; or
    /// why the summarizer failed. With nothing older than the kept turns, the item stands for
    /// nothing, and everything is kept after it.
    fn summarized(
        &self,
        compaction: &condense_host::Compaction,
    ) -> Result<(condense_core::Conversation, usize), String> {
        let mut compacted = compaction.conversation.clone();
        let summary_tokens = match &compaction.report.compaction {
            CompactionOutcome::Summarized { summary_tokens, .. } => *summary_tokens,
            CompactionOutcome::Failed { error, .. } => {
                Metrics::add(&self.metrics.summarizer_failures, 1);
                return Err(format!("condense's summarizer failed: {error}"));
            }
            _ => {
                let pinned = condense_compact::pinned(&compacted.messages);
                compacted.messages.insert(
                    pinned,
                    condense_compact::summary_message(
                        "Nothing earlier than the messages that follow needed summarizing.",
                    ),
                );
                0
            }
        };
        Ok((compacted, summary_tokens))
    }

    /// A compaction request's body read: its conversation (condense's own earlier compaction
    /// item expanded, a trailing `compaction_trigger` left out), its model and the key to sign
    /// the answer with; or the answer that refuses it (400 in OpenAI's shape, 503 when the key
    /// cannot be had).
    pub(super) async fn compact_request(
        &self,
        mut value: Value,
    ) -> Result<CompactRequest, Response> {
        let provider = Api::Responses;
        let refuse = |why: String| {
            Metrics::add(&self.metrics.refused, 1);
            provider.error(StatusCode::BAD_REQUEST, &why)
        };
        let Some(input) = value.get_mut("input").and_then(Value::as_array_mut) else {
            return Err(refuse(
                "condense answers compaction from the request's `input` list; a stored conversation (previous_response_id) is the provider's own".into(),
            ));
        };
        if input
            .last()
            .is_some_and(|item| item["type"] == "compaction_trigger")
        {
            input.pop();
        }
        let model = value
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut conversation =
            condense_formats::read_json(condense_formats::Format::Responses, value)
                .map_err(|error| refuse(format!("condense: {error}")))?;
        let key = self.compaction_key().await.map_err(|error| {
            provider.error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("condense cannot sign compaction items now: {error}"),
            )
        })?;
        crate::native::expand_own(&mut conversation, &key).map_err(refuse)?;
        Ok(CompactRequest {
            conversation,
            model,
            key,
        })
    }

    /// What condense does in the upstream's place before the pipeline runs: Anthropic's context
    /// edits for an upstream without them, and condense's own compaction item expanded into its
    /// summary. A bad edit or an item that does not verify is a 400; an original that could not
    /// be stored fails open.
    pub(super) async fn stand_in_for_upstream(
        &self,
        provider: Api,
        conversation: &mut condense_core::Conversation,
    ) -> Result<StandIn, Refusal> {
        let mut stand_in = StandIn::default();
        if provider == Api::Anthropic && self.emulates_context_management() {
            self.stand_in_for_anthropic(conversation, &mut stand_in)
                .await?;
        }
        if provider == Api::Responses
            && self.emulates_responses_compaction()
            && crate::native::take_compaction_request(conversation)
        {
            // OpenAI's server-side compaction, which an upstream without it would refuse or
            // ignore: condense's own compaction at its threshold stands in.
            stand_in.changed = true;
        }
        if provider == Api::Responses && crate::native::carries_own(conversation) {
            let key = self.compaction_key().await.map_err(|error| {
                Refusal::BadRequest(format!(
                    "condense cannot check its compaction item now: {error}"
                ))
            })?;
            crate::native::expand_own(conversation, &key).map_err(Refusal::BadRequest)?;
            stand_in.changed = true;
        }
        Ok(stand_in)
    }

    /// Anthropic's context management for an upstream without it: a `compaction` block the
    /// client resends read as Anthropic reads it (what came before it dropped, its summary and
    /// sealed turns in its place), then the request's edits applied, `compact_20260112` last.
    pub(super) async fn stand_in_for_anthropic(
        &self,
        conversation: &mut condense_core::Conversation,
        stand_in: &mut StandIn,
    ) -> Result<(), Refusal> {
        let key = || async {
            self.compaction_key().await.map_err(|error| {
                Refusal::FailOpen(format!(
                    "condense cannot read its compaction key now: {error}"
                ))
            })
        };
        if conversation
            .messages
            .iter()
            .any(condense_core::has_native_compaction)
        {
            crate::native::expand_blocks(conversation, &key().await?)
                .map_err(Refusal::BadRequest)?;
            stand_in.changed = true;
        }
        let Some(edits) = crate::edits::take(conversation).map_err(Refusal::BadRequest)? else {
            return Ok(());
        };
        stand_in.changed = true;
        let applied = crate::edits::apply(
            &edits,
            conversation,
            self.compactor.counter(),
            self.compactor.store(),
        )
        .map_err(Refusal::FailOpen)?;
        stand_in.applied_edits = Some(applied);
        let Some(compact) = crate::edits::compact_edit(&edits).map_err(Refusal::BadRequest)? else {
            return Ok(());
        };
        if self.compactor.counter().count_conversation(conversation) < compact.trigger {
            return Ok(());
        }
        let model = conversation.model().map(str::to_owned);
        let stream = conversation
            .envelope
            .as_ref()
            .and_then(|envelope| envelope.get("stream"))
            .and_then(Value::as_bool)
            == Some(true);
        let compaction = self
            .compactor
            .compact_now(conversation.clone(), None)
            .await
            .map_err(|error| Refusal::FailOpen(format!("compact_20260112: {error}")))?;
        if let CompactionOutcome::Failed { error, .. } = &compaction.report.compaction {
            Metrics::add(&self.metrics.summarizer_failures, 1);
            return Err(Refusal::FailOpen(format!(
                "compact_20260112: the summarizer failed: {error}"
            )));
        }
        let Some(content) =
            crate::native::block_content(&compaction.conversation, &key().await?, model.as_deref())
        else {
            // Nothing old enough to summarize: no block, as Anthropic makes none.
            return Ok(());
        };
        Metrics::add(&self.metrics.emulated_compactions, 1);
        *conversation = compaction.conversation;
        stand_in.block = Some(NativeBlock {
            content,
            pause: compact.pause,
            stream,
            model,
        });
        Ok(())
    }

    /// A request the upstream's stand-in refused: 400 for a request the provider would refuse
    /// as well, forwarded as it came when condense could not apply the edits itself.
    pub(super) fn refused_stand_in(
        &self,
        session: String,
        bytes: &Bytes,
        refusal: Refusal,
    ) -> Prepared {
        match refusal {
            Refusal::BadRequest(why) => {
                Metrics::add(&self.metrics.refused, 1);
                Prepared::refused(session, why)
            }
            Refusal::FailOpen(why) => self.failed_open(session, bytes, "context edits", &why),
        }
    }
}

/// A `/responses/compact` request, read ([`Proxy::compact_request`]).
pub(super) struct CompactRequest {
    pub(super) conversation: condense_core::Conversation,
    pub(super) model: Option<String>,
    pub(super) key: Vec<u8>,
}

/// What [`Proxy::stand_in_for_upstream`] did.
#[derive(Debug, Default)]
pub(super) struct StandIn {
    /// The conversation is no longer the client's as read.
    pub(super) changed: bool,
    /// Anthropic's context edits applied, for the answer.
    pub(super) applied_edits: Option<Vec<Value>>,
    /// The compaction block of a `compact_20260112` condense ran.
    pub(super) block: Option<NativeBlock>,
}

/// Why a request is not prepared as it came.
pub(super) enum Refusal {
    /// The client's mistake: 400 in the provider's shape.
    BadRequest(String),
    /// condense's own failure: the request goes on as it came.
    FailOpen(String),
}

/// A `compact_20260112` edit condense ran for an upstream that has none.
#[derive(Debug, Clone)]
pub(super) struct NativeBlock {
    /// The block's `content`.
    pub(super) content: String,
    /// `pause_after_compaction`: the block is the whole answer.
    pub(super) pause: bool,
    /// The request asked for a stream.
    pub(super) stream: bool,
    /// The model the request named.
    pub(super) model: Option<String>,
}

impl NativeBlock {
    /// The answer where the block is the whole of it (`pause_after_compaction`), the upstream
    /// not asked: a message of the block alone, JSON or a stream as the request asked, its
    /// input `input_tokens`.
    pub(super) fn paused_answer(&self, input_tokens: usize) -> Response {
        let content_type = if self.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let body = crate::answer::paused(
            &self.content,
            self.model.as_deref(),
            input_tokens,
            self.stream,
        );
        (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response()
    }
}
