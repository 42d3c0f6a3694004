#[derive(Debug, thiserror::Error)]
/// Why a summary could not be made. The variants stay apart so a harness can tell a missing key
/// from a refused connection from a context the server would not take.
#[non_exhaustive]
pub enum SummarizeError {
    #[error("cannot set up the HTTP client: {message}")]
    /// The HTTP client could not be built.
    Client {
        /// What is wrong.
        message: String,
    },
    #[error("the environment variable {variable} that should hold the API key is not set")]
    /// The API key variable is not set.
    MissingKey {
        /// The variable.
        variable: String,
    },
    #[error("POST {url}: HTTP {status} after {attempts} attempt(s): {body}")]
    /// The server answered with an error status after every attempt.
    Http {
        /// The endpoint.
        url: String,
        /// The last status.
        status: u16,
        /// Attempts made.
        attempts: u32,
        /// The last answer's body, cut.
        body: String,
    },
    #[error("POST {url}: no answer within {timeout_ms} ms, {attempts} attempt(s)")]
    /// The server did not answer in time.
    Timeout {
        /// The endpoint.
        url: String,
        /// The time-out.
        timeout_ms: u64,
        /// Attempts made.
        attempts: u32,
    },
    #[error("POST {url}: {message} ({attempts} attempt(s))")]
    /// The server could not be reached.
    Connect {
        /// The endpoint.
        url: String,
        /// Why.
        message: String,
        /// Attempts made.
        attempts: u32,
    },
    #[error("POST {url}: the answer is not a {protocol} response: {message}")]
    /// The answer is not the protocol's shape.
    Malformed {
        /// The endpoint.
        url: String,
        /// `openai` or `anthropic`.
        protocol: &'static str,
        /// What is wrong.
        message: String,
    },
    #[error("POST {url}: the model returned an empty summary")]
    /// The answer held no text.
    Empty {
        /// The endpoint.
        url: String,
    },
    #[error("POST {url}: the request is larger than the model's context window: {body}")]
    /// The server refused the request as larger than its context.
    ContextExceeded {
        /// The endpoint.
        url: String,
        /// The server's answer, cut.
        body: String,
    },
    #[error(
        "the summarizer could not fit even one message of the head into its context window ({window} tokens)"
    )]
    /// The summarizing model's window is too small for even one chunk.
    WindowTooSmall {
        /// The window, in tokens.
        window: usize,
    },
    #[error("the extractive summary is empty: the head holds nothing to summarize")]
    /// The head holds nothing to summarize.
    NothingToSummarize,
}

/// What kind of failure a [`SummarizeError`] is, as plain data a harness can match on or read
/// from a report's JSON, without parsing the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SummarizeErrorKind {
    /// The HTTP client could not be built.
    Client,
    /// The API key variable is not set.
    MissingKey,
    /// The server answered with an error status.
    Refused,
    /// The server did not answer in time.
    TimedOut,
    /// The server could not be reached.
    Unreachable,
    /// The answer was not the protocol's shape.
    Malformed,
    /// The answer held no text.
    Empty,
    /// The request was larger than the model's context window.
    ContextExceeded,
    /// The summarizing model's window is too small for one chunk.
    WindowTooSmall,
    /// The head held nothing to summarize.
    NothingToSummarize,
}

impl SummarizeError {
    /// The kind of this failure.
    pub fn kind(&self) -> SummarizeErrorKind {
        match self {
            SummarizeError::Client { .. } => SummarizeErrorKind::Client,
            SummarizeError::MissingKey { .. } => SummarizeErrorKind::MissingKey,
            SummarizeError::Http { .. } => SummarizeErrorKind::Refused,
            SummarizeError::Timeout { .. } => SummarizeErrorKind::TimedOut,
            SummarizeError::Connect { .. } => SummarizeErrorKind::Unreachable,
            SummarizeError::Malformed { .. } => SummarizeErrorKind::Malformed,
            SummarizeError::Empty { .. } => SummarizeErrorKind::Empty,
            SummarizeError::ContextExceeded { .. } => SummarizeErrorKind::ContextExceeded,
            SummarizeError::WindowTooSmall { .. } => SummarizeErrorKind::WindowTooSmall,
            SummarizeError::NothingToSummarize => SummarizeErrorKind::NothingToSummarize,
        }
    }
}
