#[derive(Debug, thiserror::Error)]
pub enum SummarizeError {
    #[error("cannot set up the HTTP client: {message}")]
    Client { message: String },
    #[error("the environment variable {variable} that should hold the API key is not set")]
    MissingKey { variable: String },
    #[error("POST {url}: HTTP {status} after {attempts} attempt(s): {body}")]
    Http {
        url: String,
        status: u16,
        attempts: u32,
        body: String,
    },
    #[error("POST {url}: no answer within {timeout_ms} ms, {attempts} attempt(s)")]
    Timeout {
        url: String,
        timeout_ms: u64,
        attempts: u32,
    },
    #[error("POST {url}: {message} ({attempts} attempt(s))")]
    Connect {
        url: String,
        message: String,
        attempts: u32,
    },
    #[error("POST {url}: the answer is not a {protocol} response: {message}")]
    Malformed {
        url: String,
        protocol: &'static str,
        message: String,
    },
    #[error("POST {url}: the model returned an empty summary")]
    Empty { url: String },
    #[error("POST {url}: the request is larger than the model's context window: {body}")]
    ContextExceeded { url: String, body: String },
    #[error(
        "the summarizer could not fit even one message of the head into its context window ({window} tokens)"
    )]
    WindowTooSmall { window: usize },
    #[error("the extractive summary is empty: the head holds nothing to summarize")]
    NothingToSummarize,
}
