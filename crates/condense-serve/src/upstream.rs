//! `summarizer.kind = "upstream"`: a summary asked of the request's own upstream, with the
//! client's own credentials and model.
//!
//! A team that runs the proxy in front of its provider often has no separate key for a
//! summarizer, and wants the summary written by the model it already pays for. The credentials
//! exist only in the request, so the summarizer is made per request; it costs nothing unless a
//! summary is due (the HTTP client is built only then). The credentials are passed on as
//! headers and never logged or stored.

use axum::http::HeaderMap;
use condense_core::Message;
use condense_summarize::{Anthropic, OpenAi, RemoteSettings, SummarizeError, Summarizer};

use crate::Provider;

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
pub(crate) struct UpstreamSummarizer {
    provider: Provider,
    settings: RemoteSettings,
}

impl std::fmt::Debug for UpstreamSummarizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamSummarizer")
            .field("provider", &self.provider.name())
            .field("settings", &self.settings)
            .finish()
    }
}

impl UpstreamSummarizer {
    /// For a request to `provider` at `origin` with `headers`, asking `model` (the request's
    /// `model`) unless `template` names a `compaction_model`; the rest (timeouts, retries,
    /// limits) from `template`, the `[summarizer]` configuration.
    pub(crate) fn for_request(
        template: &RemoteSettings,
        provider: Provider,
        origin: &str,
        headers: &HeaderMap,
        model: Option<&str>,
    ) -> Self {
        let mut settings = template.clone();
        let origin = origin.trim_end_matches('/');
        settings.base_url = match provider {
            // The OpenAI client appends `/chat/completions` to a base that ends in `/v1`.
            Provider::OpenAi => format!("{origin}/v1"),
            Provider::Anthropic => origin.to_owned(),
        };
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
        UpstreamSummarizer { provider, settings }
    }
}

#[async_trait::async_trait]
impl Summarizer for UpstreamSummarizer {
    fn name(&self) -> &str {
        "upstream"
    }

    async fn summarize(&self, head: &[Message], prompt: &str) -> Result<String, SummarizeError> {
        match self.provider {
            Provider::OpenAi => {
                OpenAi::new(self.settings.clone())?
                    .summarize(head, prompt)
                    .await
            }
            Provider::Anthropic => {
                Anthropic::new(self.settings.clone())?
                    .summarize(head, prompt)
                    .await
            }
        }
    }
}
