use std::fmt;

/// Where in the input a problem is: formats that are one JSON document point at a message index,
/// JSONL points at a line, since that is what a person can find in an editor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// The message at this index (0-based) of a JSON document.
    Message(usize),
    /// This line (1-based) of a JSONL file.
    Line(usize),
    /// The document as a whole.
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
/// Why a session could not be read or written; each says where.
#[non_exhaustive]
pub enum FormatError {
    #[error("the input is empty")]
    /// The input is empty or only whitespace.
    Empty,
    #[error("the input is not valid UTF-8 (line {line}, byte {offset})")]
    /// The input is not UTF-8 from this byte on.
    InvalidUtf8 {
        /// 1-based line.
        line: usize,
        /// Byte offset of the first bad byte.
        offset: usize,
    },
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    /// The document is not JSON.
    Json {
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// The parser's message.
        message: String,
    },
    #[error("line {line} is not JSON (column {column}): {message}")]
    /// A line of a JSONL session is not JSON.
    JsonLine {
        /// 1-based line.
        line: usize,
        /// 1-based column within the line.
        column: usize,
        /// The parser's message.
        message: String,
    },
    #[error("{at}: unknown role `{role}`")]
    /// A role the format does not have.
    UnknownRole {
        /// Where.
        at: Location,
        /// The role found.
        role: String,
    },
    #[error("{at}: {problem}")]
    /// JSON of the wrong shape for the format.
    Malformed {
        /// Where.
        at: Location,
        /// What is wrong.
        problem: String,
    },
    #[error(
        "cannot tell the format: expected a JSON array or object of messages, or Claude Code or Codex JSONL ({0})"
    )]
    /// Not a session of any known format.
    Unrecognized(String),
    #[error("cannot serialise the conversation: {0}")]
    /// The conversation could not be serialized.
    Write(String),
}

impl FormatError {
    pub(crate) fn malformed(at: Location, problem: impl Into<String>) -> Self {
        FormatError::Malformed {
            at,
            problem: problem.into(),
        }
    }

    /// The same error placed at `at`, when it was found at a message index of a document that
    /// is itself one line of a JSONL file (a Codex log's item).
    pub(crate) fn at(self, at: Location) -> Self {
        match self {
            FormatError::Malformed {
                at: Location::Message(_),
                problem,
            } => FormatError::Malformed { at, problem },
            FormatError::UnknownRole {
                at: Location::Message(_),
                role,
            } => FormatError::UnknownRole { at, role },
            other => other,
        }
    }

    /// The same error, found in a log made of some of another's lines (`lines[k]` is the line
    /// of the other that is line k + 1 here), placed at the other's line.
    pub(crate) fn on_lines(self, lines: &[usize]) -> Self {
        let line = |line: usize| lines.get(line.wrapping_sub(1)).copied().unwrap_or(line);
        let at = |at: Location| match at {
            Location::Line(number) => Location::Line(line(number)),
            other => other,
        };
        match self {
            FormatError::JsonLine {
                line: number,
                column,
                message,
            } => FormatError::JsonLine {
                line: line(number),
                column,
                message,
            },
            FormatError::InvalidUtf8 {
                line: number,
                offset,
            } => FormatError::InvalidUtf8 {
                line: line(number),
                offset,
            },
            FormatError::UnknownRole { at: place, role } => FormatError::UnknownRole {
                at: at(place),
                role,
            },
            FormatError::Malformed { at: place, problem } => FormatError::Malformed {
                at: at(place),
                problem,
            },
            other => other,
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
