//! Summarizers that ask a model over HTTP: any OpenAI-compatible Chat Completions server, and
//! Anthropic's Messages API. Both retry with back-off on 429, 5xx, time-outs and dropped
//! connections, and summarize in chunks when the head does not fit the model's window.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use condense_core::Message;
use condense_defaults::DefaultsError;
use condense_tokenizer::TokenCounter;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use crate::chunked::{self, Complete, Room};
use crate::flatten::{Speaker, Turn, flatten};
use crate::{SummarizeError, Summarizer};

/// Where and how to ask a remote model: the `[summarizer]` keys a remote summarizer reads (their
/// defaults and reasons are in `config/condense.toml`), and what a caller adds at run time.
#[derive(Clone, Deserialize)]
pub struct RemoteSettings {
    /// `https://api.openai.com/v1`, `http://127.0.0.1:8080/v1` (llama.cpp), `http://localhost:11434/v1`
    /// (Ollama) for OpenAI; `https://api.anthropic.com` for Anthropic.
    pub base_url: String,
    /// The model to ask.
    pub model: String,
    /// A separate, usually cheaper, model for compaction; `model` when unset (`""`).
    #[serde(deserialize_with = "unless_empty")]
    pub compaction_model: Option<String>,
    /// The environment variable holding the API key; `None` (`""`) for local servers that need
    /// none.
    #[serde(deserialize_with = "unless_empty")]
    pub api_key_env: Option<String>,
    /// How long one request may take (`timeout_secs`).
    #[serde(rename = "timeout_secs", deserialize_with = "seconds")]
    pub timeout: Duration,
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The first wait before a retry, doubled at each retry, capped at 30 s; a server's
    /// `Retry-After` is honoured within that cap. Not a configuration key: 1 s unless a caller
    /// (a test) sets it.
    #[serde(skip, default = "first_backoff")]
    pub backoff: Duration,
    /// Each tool output in the head is cut to this many characters.
    pub tool_output_chars: usize,
    /// The summarizing model's own context window, in tokens.
    pub context_window: usize,
    /// The longest summary asked for, in tokens.
    pub max_summary_tokens: usize,
    /// Counts the head to size chunks; the server may count differently, hence a margin.
    #[serde(skip, default = "crate::default_counter")]
    pub counter: Arc<dyn TokenCounter>,
    /// Headers sent with every request (lowercase names). `condense serve` puts the client's
    /// own credentials here for `summarizer.kind = "upstream"`; a header named here is not
    /// added again from `api_key_env`. Never printed: `Debug` leaves them out.
    #[serde(skip)]
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for RemoteSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("compaction_model", &self.compaction_model)
            .field("api_key_env", &self.api_key_env)
            .field("timeout", &self.timeout)
            .field("max_attempts", &self.max_attempts)
            .field("context_window", &self.context_window)
            .finish_non_exhaustive()
    }
}

impl RemoteSettings {
    /// Settings for `model` at `base_url`, every other value at its built-in default, the key's
    /// variable included (`OPENAI_API_KEY`): set `api_key_env` to `None` for a server that
    /// needs no key.
    pub fn new(
        base_url: impl Into<String>,
        model: impl Into<String>,
    ) -> Result<Self, DefaultsError> {
        let mut settings: RemoteSettings = condense_defaults::section("summarizer")?;
        settings.base_url = base_url.into();
        settings.model = model.into();
        Ok(settings)
    }

    fn has_header(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(set, _)| set.eq_ignore_ascii_case(name))
    }

    /// The configured headers, then `name: value` unless one of them is named so already.
    fn headers_with(&self, defaults: Vec<(&'static str, String)>) -> Vec<(&str, String)> {
        let mut headers: Vec<(&str, String)> = self
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.clone()))
            .collect();
        for (name, value) in defaults {
            if !headers
                .iter()
                .any(|(set, _)| set.eq_ignore_ascii_case(name))
            {
                headers.push((name, value));
            }
        }
        headers
    }

    fn model(&self) -> &str {
        self.compaction_model.as_deref().unwrap_or(&self.model)
    }

    fn api_key(&self) -> Result<Option<String>, SummarizeError> {
        match &self.api_key_env {
            None => Ok(None),
            Some(variable) => {
                std::env::var(variable)
                    .map(Some)
                    .map_err(|_| SummarizeError::MissingKey {
                        variable: variable.clone(),
                    })
            }
        }
    }

    fn room(&self) -> Room {
        Room {
            window: self.context_window,
            reply_tokens: self.max_summary_tokens,
            safety: SAFETY,
        }
    }
}

/// The share of the window our count may fill: other tokenizers count code and logs as up to
/// half again as many tokens as o200k does.
const SAFETY: f64 = 0.6;
const MAX_BACKOFF: Duration = Duration::from_secs(30);

fn first_backoff() -> Duration {
    Duration::from_secs(1)
}

/// `""` in configuration is "none".
fn unless_empty<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    let text = String::deserialize(deserializer)?;
    Ok(Some(text).filter(|text| !text.is_empty()))
}

fn seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    u64::deserialize(deserializer).map(Duration::from_secs)
}

/// What the protocols share: the client and the retry loop.
#[derive(Debug)]
struct Http {
    settings: RemoteSettings,
    client: reqwest::Client,
}

impl Http {
    fn new(settings: RemoteSettings) -> Result<Self, SummarizeError> {
        // TLS needs a process-wide crypto provider; this installs ring's unless the harness
        // installed one already (then that one is used, and this returns an error we ignore).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .build()
            .map_err(|error| SummarizeError::Client {
                message: error.to_string(),
            })?;
        Ok(Http { settings, client })
    }

    /// `path` after the base URL, and the base's query, if it has one, after that: a base such
    /// as Azure's `…/openai/deployments/NAME?api-version=…` keeps its query on every request.
    fn url(&self, path: &str) -> String {
        let (base, query) = match self.settings.base_url.split_once('?') {
            Some((base, query)) => (base, Some(query)),
            None => (self.settings.base_url.as_str(), None),
        };
        let mut url = format!("{}{path}", base.trim_end_matches('/'));
        if let Some(query) = query {
            url.push('?');
            url.push_str(query);
        }
        url
    }

    /// POSTs `body`, retrying what may succeed later; returns the parsed JSON answer.
    async fn post(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &Value,
        protocol: &'static str,
    ) -> Result<Value, SummarizeError> {
        let attempts = self.settings.max_attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut request = self.client.post(url).json(body);
            for (name, value) in headers {
                request = request.header(*name, value);
            }
            let failure = match request.send().await {
                Ok(response) => match answered(response, url, protocol, attempt).await {
                    Answer::Done(result) => return result,
                    Answer::Retry(error, after) => (error, after),
                },
                Err(error) if error.is_timeout() => (
                    SummarizeError::Timeout {
                        url: url.to_owned(),
                        timeout_ms: u64::try_from(self.settings.timeout.as_millis())
                            .unwrap_or(u64::MAX),
                        attempts: attempt,
                    },
                    None,
                ),
                Err(error) => (
                    SummarizeError::Connect {
                        url: url.to_owned(),
                        message: error.to_string(),
                        attempts: attempt,
                    },
                    None,
                ),
            };
            if attempt >= attempts {
                return Err(failure.0);
            }
            let backoff = self
                .settings
                .backoff
                .saturating_mul(1 << (attempt - 1).min(16))
                .min(MAX_BACKOFF);
            // A server's Retry-After is followed as given; our own back-off is jittered, so
            // replicas that failed together do not all come back in the same instant.
            tokio::time::sleep(
                failure
                    .1
                    .map_or_else(|| jittered(backoff), |after| after.min(MAX_BACKOFF)),
            )
            .await;
        }
    }
}

/// What one answer of the server means for the request.
enum Answer {
    /// The JSON it answered, or an error no retry mends (a malformed answer, a context the
    /// model cannot take, a 4xx).
    Done(Result<Value, SummarizeError>),
    /// A 429 or a 5xx: tried again, after the server's `Retry-After` when it gave one.
    Retry(SummarizeError, Option<Duration>),
}

/// Reads one answer of the server to attempt number `attempt`.
async fn answered(
    response: reqwest::Response,
    url: &str,
    protocol: &'static str,
    attempt: u32,
) -> Answer {
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let text = match response.text().await {
        Ok(text) => text,
        Err(error) => {
            return Answer::Done(Err(SummarizeError::Malformed {
                url: url.to_owned(),
                protocol,
                message: error.to_string(),
            }));
        }
    };
    if status.is_success() {
        return Answer::Done(serde_json::from_str(&text).map_err(|error| {
            SummarizeError::Malformed {
                url: url.to_owned(),
                protocol,
                message: format!("{error}: {}", excerpt(&text)),
            }
        }));
    }
    let code = status.as_u16();
    if (code == 400 || code == 413) && is_context_error(&text) {
        return Answer::Done(Err(SummarizeError::ContextExceeded {
            url: url.to_owned(),
            body: excerpt(&text),
        }));
    }
    let error = SummarizeError::Http {
        url: url.to_owned(),
        status: code,
        attempts: attempt,
        body: excerpt(&text),
    };
    if code != 429 && !status.is_server_error() {
        return Answer::Done(Err(error));
    }
    Answer::Retry(error, retry_after)
}

impl Http {
    /// POSTs `body` to `path` with OpenAI's bearer token (the configured key, unless a header
    /// the harness gave carries its own `authorization`): the two OpenAI protocols' requests.
    /// Returns the URL, for errors, and the answer.
    async fn post_bearer(
        &self,
        path: &str,
        body: &Value,
        protocol: &'static str,
    ) -> Result<(String, Value), SummarizeError> {
        let settings = &self.settings;
        let url = self.url(path);
        let mut defaults = Vec::new();
        if !settings.has_header("authorization")
            && let Some(key) = settings.api_key()?
        {
            defaults.push(("authorization", format!("Bearer {key}")));
        }
        let headers = settings.headers_with(defaults);
        let answer = self.post(&url, &headers, body, protocol).await?;
        Ok((url, answer))
    }

    /// The head as text turns, in as many chunks as the model's window needs.
    async fn summarize(
        &self,
        model: &dyn Complete,
        head: &[Message],
        prompt: &str,
    ) -> Result<String, SummarizeError> {
        let turns = flatten(head, self.settings.tool_output_chars);
        chunked::summarize(
            model,
            self.settings.counter.as_ref(),
            turns,
            prompt,
            self.settings.room(),
        )
        .await
    }
}

/// Whether a refusal says the request is larger than the model's window, in the words of OpenAI
/// (`context_length_exceeded`), Anthropic ("prompt is too long"), llama.cpp, vLLM and Ollama.
fn is_context_error(body: &str) -> bool {
    let body = body.to_lowercase();
    [
        "context_length_exceeded",
        "context length",
        "context window",
        "maximum context",
        "too long",
        "exceed",
    ]
    .iter()
    .any(|sign| body.contains(sign))
}

fn excerpt(text: &str) -> String {
    condense_text::cut(
        text.trim(),
        condense_text::Limit::Chars(300),
        condense_text::Marker::After("…"),
    )
    .into_owned()
}

fn nonempty(url: &str, text: String) -> Result<String, SummarizeError> {
    if text.trim().is_empty() {
        Err(SummarizeError::Empty {
            url: url.to_owned(),
        })
    } else {
        Ok(text)
    }
}

/// Turns as `{"role", "content"}` objects: the shape both protocols take for plain text.
fn chat_messages(turns: &[Turn]) -> Vec<Value> {
    turns
        .iter()
        .map(|turn| json!({"role": role_name(turn.speaker), "content": turn.text}))
        .collect()
}

fn role_name(speaker: Speaker) -> &'static str {
    match speaker {
        Speaker::User => "user",
        Speaker::Assistant => "assistant",
    }
}

/// Chat Completions: `POST {base_url}/chat/completions`.
#[derive(Debug)]
pub struct OpenAi {
    http: Http,
}

impl OpenAi {
    /// An OpenAI-compatible summarizer.
    pub fn new(settings: RemoteSettings) -> Result<Self, SummarizeError> {
        Ok(OpenAi {
            http: Http::new(settings)?,
        })
    }
}

#[async_trait]
impl Complete for OpenAi {
    async fn complete(&self, turns: Vec<Turn>) -> Result<String, SummarizeError> {
        let settings = &self.http.settings;
        let messages = chat_messages(&turns);
        let body = json!({
            "model": settings.model(),
            "messages": messages,
            "max_tokens": settings.max_summary_tokens,
            "temperature": 0,
        });
        self.complete_body(&body).await
    }
}

impl OpenAi {
    /// Posts `body`, a whole Chat Completions request (model, limits and all), and returns the
    /// answer's text, with this summarizer's headers, retries and time-out. An answer without
    /// text (a tool call, `content: null`) is [`SummarizeError::Empty`]. The proxy's forked
    /// summaries send the agent's own request this way.
    pub async fn complete_body(&self, body: &Value) -> Result<String, SummarizeError> {
        let (url, answer) = self
            .http
            .post_bearer("/chat/completions", body, "Chat Completions")
            .await?;
        let Some(message) = answer.pointer("/choices/0/message") else {
            return Err(SummarizeError::Malformed {
                url: url.clone(),
                protocol: "Chat Completions",
                message: format!("no choices[0].message in {}", excerpt(&answer.to_string())),
            });
        };
        match message.get("content") {
            Some(Value::String(text)) => nonempty(&url, text.clone()),
            Some(Value::Null) | None => Err(SummarizeError::Empty { url }),
            Some(other) => Err(SummarizeError::Malformed {
                url: url.clone(),
                protocol: "Chat Completions",
                message: format!(
                    "choices[0].message.content is {}",
                    excerpt(&other.to_string())
                ),
            }),
        }
    }
}

#[async_trait]
impl Summarizer for OpenAi {
    fn name(&self) -> &str {
        "openai"
    }

    async fn summarize(&self, head: &[Message], prompt: &str) -> Result<String, SummarizeError> {
        self.http.summarize(self, head, prompt).await
    }
}

/// OpenAI Responses: `POST {base_url}/responses`. The proxy asks a Responses client's own
/// upstream this way: models such as Codex's may answer only there.
#[derive(Debug)]
pub struct Responses {
    http: Http,
}

impl Responses {
    /// A summarizer on the Responses API.
    pub fn new(settings: RemoteSettings) -> Result<Self, SummarizeError> {
        Ok(Responses {
            http: Http::new(settings)?,
        })
    }
}

#[async_trait]
impl Complete for Responses {
    async fn complete(&self, turns: Vec<Turn>) -> Result<String, SummarizeError> {
        let settings = &self.http.settings;
        // Nothing is kept on the server: a summary is asked once.
        let body = json!({
            "model": settings.model(),
            "input": chat_messages(&turns),
            "max_output_tokens": settings.max_summary_tokens,
            "store": false,
        });
        self.complete_body(&body).await
    }
}

impl Responses {
    /// Posts `body`, a whole Responses request, and returns the text of the answer's
    /// `output_text` parts, with this summarizer's headers, retries and time-out. An answer
    /// without text (only a function call, or reasoning cut off by the output limit) is
    /// [`SummarizeError::Empty`]. The proxy's forked summaries send the agent's own request this
    /// way.
    pub async fn complete_body(&self, body: &Value) -> Result<String, SummarizeError> {
        let (url, answer) = self
            .http
            .post_bearer("/responses", body, "Responses")
            .await?;
        let Some(items) = answer.get("output").and_then(Value::as_array) else {
            return Err(SummarizeError::Malformed {
                url,
                protocol: "Responses",
                message: format!("no output list in {}", excerpt(&answer.to_string())),
            });
        };
        let text: Vec<&str> = items
            .iter()
            .filter(|item| item.get("type").and_then(Value::as_str) == Some("message"))
            .filter_map(|item| item.get("content").and_then(Value::as_array))
            .flatten()
            .filter(|part| part.get("type").and_then(Value::as_str) == Some("output_text"))
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect();
        nonempty(&url, text.join("\n"))
    }
}

#[async_trait]
impl Summarizer for Responses {
    fn name(&self) -> &str {
        "openai-responses"
    }

    async fn summarize(&self, head: &[Message], prompt: &str) -> Result<String, SummarizeError> {
        self.http.summarize(self, head, prompt).await
    }
}

/// Messages: `POST {base_url}/v1/messages`.
#[derive(Debug)]
pub struct Anthropic {
    http: Http,
}

impl Anthropic {
    /// The API version sent in `anthropic-version`.
    pub const API_VERSION: &'static str = "2023-06-01";

    /// An Anthropic summarizer.
    pub fn new(settings: RemoteSettings) -> Result<Self, SummarizeError> {
        Ok(Anthropic {
            http: Http::new(settings)?,
        })
    }
}

#[async_trait]
impl Complete for Anthropic {
    async fn complete(&self, turns: Vec<Turn>) -> Result<String, SummarizeError> {
        let settings = &self.http.settings;
        let messages = chat_messages(&turns);
        let body = json!({
            "model": settings.model(),
            "max_tokens": settings.max_summary_tokens,
            "messages": messages,
        });
        self.complete_body(&body).await
    }
}

impl Anthropic {
    /// Posts `body`, a whole Messages request (model, limits and all), and returns the text of
    /// the answer's text blocks, with this summarizer's headers, retries and time-out. An answer
    /// without text (only `tool_use` or `thinking` blocks) is [`SummarizeError::Empty`]. The
    /// proxy's forked summaries send the agent's own request this way.
    pub async fn complete_body(&self, body: &Value) -> Result<String, SummarizeError> {
        let settings = &self.http.settings;
        let url = self.http.url("/v1/messages");
        let mut defaults = vec![("anthropic-version", Self::API_VERSION.to_owned())];
        if !settings.has_header("x-api-key")
            && !settings.has_header("authorization")
            && let Some(key) = settings.api_key()?
        {
            defaults.push(("x-api-key", key));
        }
        let headers = settings.headers_with(defaults);
        let answer = self.http.post(&url, &headers, body, "Messages").await?;
        let Some(blocks) = answer.get("content").and_then(Value::as_array) else {
            return Err(SummarizeError::Malformed {
                url,
                protocol: "Messages",
                message: format!("no content list in {}", excerpt(&answer.to_string())),
            });
        };
        let text: Vec<&str> = blocks
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect();
        nonempty(&url, text.join("\n"))
    }
}

#[async_trait]
impl Summarizer for Anthropic {
    fn name(&self) -> &str {
        "anthropic"
    }

    async fn summarize(&self, head: &[Message], prompt: &str) -> Result<String, SummarizeError> {
        self.http.summarize(self, head, prompt).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_base_with_a_query_keeps_it_after_the_endpoint() {
        let url = |base: &str, path: &str| {
            Http::new(RemoteSettings::new(base, "m").unwrap())
                .unwrap()
                .url(path)
        };
        assert_eq!(
            url("https://api.openai.com/v1/", "/chat/completions"),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(
            url(
                "https://x.openai.azure.com/openai/deployments/gpt?api-version=2024-10-21",
                "/chat/completions"
            ),
            "https://x.openai.azure.com/openai/deployments/gpt/chat/completions?api-version=2024-10-21"
        );
    }
}

/// Between half of `backoff` and all of it ("equal jitter"), drawn from the standard library's
/// per-process random hash keys (no generator of its own to seed).
fn jittered(backoff: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos()),
    );
    let share = (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64;
    backoff.mul_f64(0.5 + share / 2.0)
}

#[cfg(test)]
mod jitter_tests {
    use super::*;

    /// Every wait is within its bounds, and the waits are not all the same (replicas spread).
    #[test]
    fn a_back_off_is_jittered_within_half_and_all_of_it() {
        let backoff = Duration::from_secs(4);
        let waits: Vec<Duration> = (0..64).map(|_| jittered(backoff)).collect();
        assert!(
            waits
                .iter()
                .all(|wait| *wait >= backoff / 2 && *wait <= backoff),
            "{waits:?}"
        );
        let distinct: std::collections::HashSet<_> = waits.iter().collect();
        assert!(distinct.len() > 32, "{} distinct of 64", distinct.len());
    }
}
