//! `summarizer.kind = "upstream"`: a summary asked of the request's own upstream, with the
//! client's own credentials and model.
//!
//! A team that runs the proxy in front of its provider often has no separate key for a
//! summarizer, and wants the summary written by the model it already pays for. The credentials
//! exist only in the request, so the summarizer is made per request; it costs nothing unless a
//! summary is due (the HTTP client is built only then). The credentials are passed on as
//! headers and never logged or stored.
//!
//! With `summarizer.fork` (the default) the summary is asked inside the agent's own request:
//! the conversation as the proxy would forward it, with the summary prompt after it
//! ([`condense_summarize::Fork`]). The provider has that request cached up to its last message,
//! so the summary reads the head from the cache instead of paying for a separate prompt. The
//! body keeps everything that is part of the cache key (model, system prompt, tools, tool
//! choice, thinking); only what is not is changed: no stream, no stop sequences, and a reply
//! limit for a summary. A request bound to an output schema is summarized apart: its answer
//! would follow the agent's schema, not the summary's sections.

use condense_core::Message;
use condense_summarize::{
    Anthropic, Fork, OpenAi, RemoteSettings, Responses, SummarizeError, SummarizeErrorKind,
    Summarizer,
};
use serde_json::{Value, json};

use crate::{Api, Metrics};

/// `summarizer.kind = "upstream"`: how the proxy asks the request's own upstream for summaries.
#[derive(Debug, Clone)]
pub struct UpstreamSummaries {
    /// Time-outs, retries, `compaction_model` and the summary's length: the `[summarizer]`
    /// configuration (its server and key are the request's).
    pub remote: RemoteSettings,
    /// Ask inside the agent's own request, sharing its cached prefix
    /// ([`condense_host::Config::forks_summaries`]).
    pub fork: bool,
}

impl UpstreamSummaries {
    /// The `[summarizer]` configuration's values.
    pub fn from_config(config: &condense_host::Config) -> Self {
        UpstreamSummaries {
            remote: config.remote_settings(),
            fork: config.forks_summaries(),
        }
    }
}

/// The request headers a summary request carries over: the credentials of both providers
/// (OpenAI's bearer token and organisation/project, Anthropic's key), Azure's key, and
/// Anthropic's API version and betas.
const CARRIED: [&str; 7] = [
    "authorization",
    "x-api-key",
    "api-key",
    "openai-organization",
    "openai-project",
    "anthropic-version",
    "anthropic-beta",
];

/// The summarizer for one request.
pub(crate) struct UpstreamSummarizer<'m> {
    provider: Api,
    settings: RemoteSettings,
    /// Whether a forked request is tried first ([`UpstreamSummaries::fork`]).
    fork: bool,
    /// Where forked requests and their fallbacks are counted.
    metrics: &'m Metrics,
    /// How the last summary was asked, for the request's log line.
    asked: std::sync::Mutex<Option<Asked>>,
}

/// How a summary was asked of the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// Inside the agent's own request, which answered it.
    Forked,
    /// Inside the agent's own request first, which gave no summary; then as a separate prompt.
    FellBack,
    /// As a separate prompt only (forking off, or not cheaper for this request).
    Separate,
}

impl Asked {
    /// As the request's log line says it.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Asked::Forked => "forked",
            Asked::FellBack => "fork fell back to a separate prompt",
            Asked::Separate => "separate prompt",
        }
    }
}

impl std::fmt::Debug for UpstreamSummarizer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamSummarizer")
            .field("provider", &self.provider.name())
            .field("settings", &self.settings)
            .field("fork", &self.fork)
            .finish()
    }
}

impl<'m> UpstreamSummarizer<'m> {
    /// For the request `parts` to `provider` at `origin`, asking `model` (the request's `model`)
    /// unless `template` names a `compaction_model`; the rest (timeouts, retries, limits) from
    /// `template`, the `[summarizer]` configuration. The summary goes where the request goes:
    /// the same path and query (Azure's deployment and `api-version`, a gateway's route).
    pub(crate) fn for_request(
        template: &UpstreamSummaries,
        provider: Api,
        origin: &str,
        parts: &axum::http::request::Parts,
        model: Option<&str>,
        metrics: &'m Metrics,
    ) -> Self {
        let mut settings = template.remote.clone();
        // The summarizer's client appends the endpoint to its base, before the query.
        let path = parts.uri.path();
        let prefix = path.strip_suffix(provider.endpoint()).unwrap_or(path);
        settings.base_url = upstream_url(origin, prefix);
        if let Some(query) = parts.uri.query() {
            settings.base_url = format!("{}?{query}", settings.base_url);
        }
        let headers = &parts.headers;
        if let Some(model) = model {
            settings.model = model.to_owned();
        }
        settings.api_key_env = None;
        settings.headers = CARRIED
            .iter()
            .filter_map(|name| {
                let value = headers.get(*name)?.to_str().ok()?;
                Some(((*name).to_owned(), value.to_owned()))
            })
            .collect();
        UpstreamSummarizer {
            provider,
            settings,
            fork: template.fork,
            metrics,
            asked: std::sync::Mutex::new(None),
        }
    }

    /// How the last summary of this request was asked, if one was.
    pub(crate) fn asked(&self) -> Option<Asked> {
        self.asked.lock().map(|asked| *asked).unwrap_or(None)
    }

    fn note(&self, asked: Asked) {
        if let Ok(mut last) = self.asked.lock() {
            *last = Some(asked);
        }
    }

    /// The agent's request with the summary prompt after it, as the provider's JSON body;
    /// `None` when the separate prompt is the better request (see [`Fork::request`]), when the
    /// request is bound to an output schema, or when it cannot be written.
    fn forked_body(&self, fork: &Fork<'_>, prompt: &str) -> Option<Value> {
        // An answer bound to the agent's own output schema (OpenAI's `response_format`, the
        // Responses API's `text.format`, Anthropic's `output_format`) would not be a summary,
        // and the schema is part of the cached prefix: such a request is summarized apart.
        let envelope = fork.conversation.envelope.as_ref();
        let structured = envelope.is_some_and(|envelope| {
            envelope
                .get("response_format")
                .is_some_and(|format| format["type"] != "text")
                || envelope
                    .get("text")
                    .and_then(|text| text.get("format"))
                    .is_some_and(|format| format["type"] != "text")
                || envelope.contains_key("output_format")
        });
        if structured {
            return None;
        }
        let (request, reply_tokens) = fork.request(
            prompt,
            self.settings.counter.as_ref(),
            self.settings.max_summary_tokens,
            self.settings.tool_output_chars,
        )?;
        let bytes = condense_formats::write_compact(self.provider.format(), &request).ok()?;
        let mut body: Value = serde_json::from_slice(&bytes).ok()?;
        let object = body.as_object_mut()?;
        // Not part of the cached prefix: the summary is read whole, one answer is enough, and
        // the agent's stop sequences could cut it short.
        for key in ["stream", "stream_options", "n", "stop", "stop_sequences"] {
            object.remove(key);
        }
        match self.provider {
            // Reasoning models take `max_completion_tokens` and refuse `max_tokens`: set the one
            // the agent used.
            Api::OpenAi => {
                let key = if object.contains_key("max_completion_tokens") {
                    "max_completion_tokens"
                } else {
                    "max_tokens"
                };
                object.insert(key.to_owned(), json!(reply_tokens));
            }
            // The limit covers a reasoning model's reasoning as well; the summary is read from
            // the answer, so it need not be kept on the server either.
            Api::Responses => {
                object.insert("max_output_tokens".to_owned(), json!(reply_tokens));
                object.insert("store".to_owned(), json!(false));
            }
            // With extended thinking the limit covers the thinking budget as well, and must
            // exceed it.
            Api::Anthropic => {
                let thinking = object
                    .get("thinking")
                    .filter(|thinking| thinking["type"] == "enabled")
                    .and_then(|thinking| thinking["budget_tokens"].as_u64())
                    .unwrap_or(0);
                let limit = u64::try_from(reply_tokens).unwrap_or(u64::MAX);
                object.insert(
                    "max_tokens".to_owned(),
                    json!(thinking.saturating_add(limit)),
                );
                if let Some(Value::Array(messages)) = object.get_mut("messages") {
                    join_trailing_user_turns(messages);
                }
            }
        }
        Some(body)
    }

    /// Posts a whole request body to the upstream.
    async fn complete_body(&self, body: &Value) -> Result<String, SummarizeError> {
        match self.provider {
            Api::OpenAi => {
                OpenAi::new(self.settings.clone())?
                    .complete_body(body)
                    .await
            }
            Api::Responses => {
                Responses::new(self.settings.clone())?
                    .complete_body(body)
                    .await
            }
            Api::Anthropic => {
                Anthropic::new(self.settings.clone())?
                    .complete_body(body)
                    .await
            }
        }
    }
}

/// The summary prompt, the last message, joined to the user turn before it (tool results,
/// usually) as one more text block: the Messages API wants turns to alternate, and the blocks
/// before it, the cached prefix, stay exactly as they were.
fn join_trailing_user_turns(messages: &mut Vec<Value>) {
    let [.., previous, last] = messages.as_mut_slice() else {
        return;
    };
    if previous["role"] != "user" || last["role"] != "user" {
        return;
    }
    let blocks = |content: Value| match content {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks,
        other => vec![other],
    };
    let added = blocks(last["content"].take());
    let mut joined = blocks(previous["content"].take());
    joined.extend(added);
    previous["content"] = Value::Array(joined);
    messages.pop();
}

#[async_trait::async_trait]
impl Summarizer for UpstreamSummarizer<'_> {
    fn name(&self) -> &str {
        "upstream"
    }

    /// Inside the agent's own request when it fits and costs less; the separate prompt when
    /// not, or when the forked answer holds no text (the model called a tool, as the agent's tools
    /// invite it to) or the server found the request too long after all.
    async fn summarize_forked(
        &self,
        fork: Fork<'_>,
        prompt: &str,
    ) -> Result<String, SummarizeError> {
        let body = if self.fork {
            self.forked_body(&fork, prompt)
        } else {
            None
        };
        let mut asked = Asked::Separate;
        if let Some(body) = body {
            match self.complete_body(&body).await {
                Err(error)
                    if matches!(
                        error.kind(),
                        SummarizeErrorKind::Empty | SummarizeErrorKind::ContextExceeded
                    ) =>
                {
                    Metrics::add(&self.metrics.fork_fallbacks, 1);
                    tracing::debug!(%error, "forked summary failed; asking a separate prompt");
                    asked = Asked::FellBack;
                }
                answer => {
                    if answer.is_ok() {
                        Metrics::add(&self.metrics.forked_summaries, 1);
                    }
                    self.note(Asked::Forked);
                    return answer;
                }
            }
        }
        self.note(asked);
        self.summarize(fork.head(), prompt).await
    }

    async fn summarize(&self, head: &[Message], prompt: &str) -> Result<String, SummarizeError> {
        match self.provider {
            Api::OpenAi => {
                OpenAi::new(self.settings.clone())?
                    .summarize(head, prompt)
                    .await
            }
            Api::Responses => {
                Responses::new(self.settings.clone())?
                    .summarize(head, prompt)
                    .await
            }
            Api::Anthropic => {
                Anthropic::new(self.settings.clone())?
                    .summarize(head, prompt)
                    .await
            }
        }
    }
}

/// Where a request to `path` goes on `upstream`: the upstream and the path. An upstream
/// given with the API's own version path (`http://host:8000/v1`, as OpenAI-compatible servers
/// document their base URL) already ends where the client's path begins (`/v1/...`): that
/// part is not sent twice. A gateway's own prefix (`https://gw/openai`) is kept.
pub(crate) fn upstream_url(upstream: &str, path: &str) -> String {
    let base = upstream.trim_end_matches('/');
    let prefix = reqwest::Url::parse(base)
        .ok()
        .map(|url| url.path().trim_end_matches('/').to_owned())
        .unwrap_or_default();
    let overlap = !prefix.is_empty()
        && path
            .strip_prefix(prefix.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['/', '?']));
    if overlap {
        format!("{}{path}", &base[..base.len() - prefix.len()])
    } else {
        format!("{base}{path}")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::sync::atomic::Ordering;

    /// An OpenAI conversation of one call and its long result: a head worth summarizing.
    fn listed_sources() -> Value {
        let listing: String = (0..300).map(|n| format!("src/module_{n}.rs\n")).collect();
        json!([
            {"role": "user", "content": "List the sources."},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": listing}
        ])
    }

    /// A request to `provider`'s usual path, with no headers.
    fn parts(provider: Api) -> axum::http::request::Parts {
        let path = match provider {
            Api::OpenAi => "/v1/chat/completions",
            Api::Responses => "/v1/responses",
            Api::Anthropic => "/v1/messages",
        };
        axum::http::Request::post(path)
            .body(())
            .unwrap()
            .into_parts()
            .0
    }

    /// The fork of `body`, a request to `provider` as the proxy would forward it.
    fn forked(provider: Api, body: &Value) -> Option<Value> {
        let (_, conversation) =
            condense_formats::read(body.to_string().as_bytes(), Some(provider.format())).unwrap();
        let metrics = Metrics::default();
        let template = UpstreamSummaries {
            remote: RemoteSettings::new("unused", "unused").unwrap(),
            fork: true,
        };
        let summarizer = UpstreamSummarizer::for_request(
            &template,
            provider,
            "http://127.0.0.1:1",
            &parts(provider),
            Some("claude"),
            &metrics,
        );
        // Counted low, so that the fork is the cheaper request whatever the head's size.
        let counted = 100;
        let fork = Fork {
            conversation: &conversation,
            head: 0..conversation.messages.len(),
            carried: &[],
            tokens: counted,
            window: 200_000,
            counted,
            cached: counted,
            summary_tokens: None,
        };
        summarizer.forked_body(&fork, &"Summarize. ".repeat(10))
    }

    #[test]
    fn an_anthropic_fork_adds_the_prompt_to_the_last_user_turn_and_leaves_the_rest() {
        let listing: String = (0..300).map(|n| format!("src/module_{n}.rs\n")).collect();
        let body = json!({
            "model": "claude",
            "max_tokens": 32000,
            "stream": true,
            "stop_sequences": ["</answer>"],
            "thinking": {"type": "enabled", "budget_tokens": 10000},
            "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
            "messages": [
                {"role": "user", "content": "List the sources."},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": listing,
                     "cache_control": {"type": "ephemeral"}}
                ]}
            ]
        });
        let fork = forked(Api::Anthropic, &body).unwrap();
        let messages = fork["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3, "no second user turn in a row");
        assert_eq!(messages[..2], body["messages"].as_array().unwrap()[..2]);
        let blocks = messages[2]["content"].as_array().unwrap();
        assert_eq!(
            blocks[0], body["messages"][2]["content"][0],
            "the cached block"
        );
        assert_eq!(blocks.len(), 2);
        assert!(blocks[1]["text"].as_str().unwrap().ends_with("Summarize. "));
        assert_eq!(fork["tools"], body["tools"]);
        assert_eq!(fork["thinking"], body["thinking"]);
        assert!(fork.get("stream").is_none() && fork.get("stop_sequences").is_none());
        // The reply limit covers the thinking budget and the summary.
        assert_eq!(fork["max_tokens"], 10_000 + 4_096);
    }

    /// A request whose answer must follow the agent's own schema is not forked: the answer
    /// would not be a summary.
    #[test]
    fn an_openai_request_with_an_output_schema_is_not_forked() {
        let mut body = json!({
            "model": "gpt",
            "max_completion_tokens": 32000,
            "stop": ["Observation:"],
            "messages": listed_sources(),
        });
        let fork = forked(Api::OpenAi, &body).unwrap();
        assert_eq!(fork["max_completion_tokens"], 4_096);
        assert!(fork.get("max_tokens").is_none() && fork.get("stop").is_none());
        assert_eq!(fork["messages"].as_array().unwrap().len(), 4);
        body["response_format"] = json!({"type": "text"});
        assert!(forked(Api::OpenAi, &body).is_some());
        body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "step"}});
        assert!(forked(Api::OpenAi, &body).is_none());
    }

    /// A Responses request (Codex's) forks as the others do: its items and instructions, tools
    /// and reasoning kept, the prompt one more user item, the limit in `max_output_tokens`, no
    /// stream, nothing stored; one bound to a schema (`text.format`) is not forked.
    #[test]
    fn a_responses_fork_keeps_the_items_and_limits_the_answer() {
        let chat = json!({"messages": listed_sources()});
        let mut body = condense_core::testing::responses_from_chat(&chat);
        let object = body.as_object_mut().unwrap();
        object.insert("model".into(), json!("gpt-5-codex"));
        object.insert("instructions".into(), json!("You are Codex."));
        object.insert("stream".into(), json!(true));
        object.insert("store".into(), json!(true));
        object.insert("reasoning".into(), json!({"effort": "high"}));
        object.insert(
            "tools".into(),
            json!([{"type": "function", "name": "shell"}]),
        );
        let fork = forked(Api::Responses, &body).unwrap();
        let items = fork["input"].as_array().unwrap();
        assert_eq!(items[..3], body["input"].as_array().unwrap()[..]);
        assert_eq!(items.len(), 4);
        assert_eq!(items[3]["role"], "user");
        assert!(
            items[3]["content"]
                .as_str()
                .unwrap()
                .ends_with("Summarize. ")
        );
        for key in ["instructions", "tools", "reasoning", "model"] {
            assert_eq!(fork[key], body[key], "{key}");
        }
        assert_eq!(fork["max_output_tokens"], 4_096);
        assert_eq!(fork["store"], false);
        assert!(fork.get("stream").is_none());
        body["text"] = json!({"format": {"type": "json_schema", "name": "step"}});
        assert!(forked(Api::Responses, &body).is_none());
    }

    #[test]
    fn a_string_turn_becomes_blocks_and_alternating_turns_are_left_alone() {
        let mut messages = vec![
            json!({"role": "assistant", "content": "Done."}),
            json!({"role": "user", "content": "Summarize."}),
        ];
        join_trailing_user_turns(&mut messages);
        assert_eq!(messages.len(), 2);
        let mut messages = vec![
            json!({"role": "user", "content": "Fix it."}),
            json!({"role": "user", "content": [{"type": "text", "text": "Summarize."}]}),
        ];
        join_trailing_user_turns(&mut messages);
        assert_eq!(
            messages,
            vec![json!({"role": "user", "content": [
                {"type": "text", "text": "Fix it."},
                {"type": "text", "text": "Summarize."}
            ]})]
        );
    }

    /// The request's log line says how its summary was asked: inside the agent's request, in a
    /// separate prompt after a forked answer that held no summary, or only apart.
    #[tokio::test]
    async fn how_the_summary_was_asked_is_kept_for_the_log_line() {
        let (origin, received) = crate::testing::upstream().await;
        let mut body = json!({"model": "gpt", "messages": listed_sources()});
        let metrics = Metrics::default();
        let asked = async |body: &Value, fork: bool| {
            let (_, conversation) =
                condense_formats::read(body.to_string().as_bytes(), Some(Api::OpenAi.format()))
                    .unwrap();
            let summarizer = UpstreamSummarizer::for_request(
                &UpstreamSummaries {
                    remote: RemoteSettings::new("unused", "unused").unwrap(),
                    fork,
                },
                Api::OpenAi,
                &format!("http://{origin}"),
                &parts(Api::OpenAi),
                Some("gpt"),
                &metrics,
            );
            assert_eq!(summarizer.asked(), None, "nothing asked yet");
            let fork = Fork {
                conversation: &conversation,
                head: 0..3,
                carried: &[],
                tokens: 100,
                window: 200_000,
                counted: 100,
                cached: 100,
                summary_tokens: None,
            };
            let summary = summarizer
                .summarize_forked(fork, "Summarize.")
                .await
                .unwrap();
            assert_eq!(summary, "ok", "the scripted upstream's text");
            summarizer.asked()
        };
        assert_eq!(asked(&body, true).await, Some(Asked::Forked));
        assert_eq!(asked(&body, false).await, Some(Asked::Separate));
        // An agent that must call a tool answers the fork with a call, not a summary.
        body["tool_choice"] = json!("required");
        assert_eq!(asked(&body, true).await, Some(Asked::FellBack));
        // Forked, separate; forked then separate.
        assert_eq!(received.lock().unwrap().len(), 4);
        assert_eq!(metrics.forked_summaries.load(Ordering::Relaxed), 1);
        assert_eq!(metrics.fork_fallbacks.load(Ordering::Relaxed), 1);
    }
}
