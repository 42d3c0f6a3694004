use std::fmt;

/// Where in the input a problem is: formats that are one JSON document point at a message index,
/// JSONL points at a line, since that is what a person can find in an editor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Message(usize),
    Line(usize),
    TopLevel,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Message(index) => write!(f, "message {index}"),
            Location::Line(line) => write!(f, "line {line}"),
            Location::TopLevel => f.write_str("top level"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("the input is empty")]
    Empty,
    #[error("the input is not valid UTF-8 (line {line}, byte {offset})")]
    InvalidUtf8 { line: usize, offset: usize },
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("line {line} is not JSON (column {column}): {message}")]
    JsonLine {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{at}: unknown role `{role}`")]
    UnknownRole { at: Location, role: String },
    #[error("{at}: {problem}")]
    Malformed { at: Location, problem: String },
    #[error(
        "cannot tell the format: expected a JSON array or object of messages, or Claude Code JSONL ({0})"
    )]
    Unrecognized(String),
    #[error("cannot serialise the conversation: {0}")]
    Write(String),
}

impl FormatError {
    pub(crate) fn malformed(at: Location, problem: impl Into<String>) -> Self {
        FormatError::Malformed {
            at,
            problem: problem.into(),
        }
    }

    pub(crate) fn json(error: &serde_json::Error) -> Self {
        FormatError::Json {
            line: error.line(),
            column: error.column(),
            message: strip_position(error),
        }
    }
}

/// serde_json appends " at line L column C" to its messages; we report the position ourselves.
pub(crate) fn strip_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(cut) => text[..cut].to_owned(),
        None => text,
    }
}
