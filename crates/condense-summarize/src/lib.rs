//! Summarizers: what turns the head of a conversation into the summary that replaces it.
//!
//! The default, [`Extractive`], needs no model and no network: it fills the template's sections
//! from the head itself, deterministically. [`OpenAi`] (any Chat Completions server: OpenAI, vLLM,
//! llama.cpp, Ollama), [`Responses`] (OpenAI's Responses API, which the proxy uses for a Codex
//! client's own upstream) and [`Anthropic`] (the Messages API) ask a model. A head too large for the
//! summarizer's own window is summarized in chunks whose partial summaries are merged, so a
//! server's `context_length_exceeded` never reaches the user.

#![warn(missing_docs)]
mod chunked;
mod error;
mod extractive;
mod flatten;
mod fork;
mod remote;

use async_trait::async_trait;
use condense_core::Message;

pub use condense_defaults::DefaultsError;
pub use error::{SummarizeError, SummarizeErrorKind};
pub use extractive::{Extractive, ExtractiveSettings, LEDGER_HEADING, ledger};
pub use fork::Fork;
pub use remote::{Anthropic, OpenAi, RemoteSettings, Responses};

/// The counter a summarizer's settings start with: the default encoding's.
pub(crate) fn default_counter() -> std::sync::Arc<dyn condense_tokenizer::TokenCounter> {
    std::sync::Arc::new(condense_tokenizer::Tiktoken::default())
}

/// Turns a head into a summary. `prompt` is the rendered template (preamble, sections,
/// trailer); a model answers it, the extractive summarizer fills the sections it names.
#[async_trait]
pub trait Summarizer: Send + Sync {
    /// A short name for reports: `extractive`, `openai`, `anthropic`.
    fn name(&self) -> &str;

    /// Whether it writes summaries where it runs, without a model's request (the extractive
    /// summarizer): a compaction then costs the provider nothing but the rewrite of what it keeps.
    fn runs_locally(&self) -> bool {
        false
    }

    /// The summary it would write of `head` (`carried`: the head's messages a compaction keeps
    /// whole after it), where it can be had without a model's request: the extractive
    /// summarizer's. What an early compaction weighs as the summary's size, in place of the
    /// budget: a summary written here takes a few hundred tokens of a 3,000-token budget, and
    /// weighed at the budget every early compaction waited for a head larger than it needed.
    /// `None` (the default) for a model, whose summary is known only once asked.
    fn local_summary(&self, _head: &[Message], _carried: &[Message]) -> Option<String> {
        None
    }

    /// The summary text, or an error that says what failed. An empty summary is an error.
    async fn summarize(&self, head: &[Message], prompt: &str) -> Result<String, SummarizeError>;

    /// The summary of `fork`'s head, for a summarizer that can ask it inside the whole
    /// conversation and so share the provider's cached prefix (see [`Fork`]). By default the
    /// head alone is summarized, as [`Summarizer::summarize`] does.
    async fn summarize_forked(
        &self,
        fork: Fork<'_>,
        prompt: &str,
    ) -> Result<String, SummarizeError> {
        self.summarize(fork.head(), prompt).await
    }
}
