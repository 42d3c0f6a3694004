use std::path::PathBuf;

/// A configuration problem, always with where it is: the file, line and column, or the
/// environment variable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("{}: cannot read: {source}", path.display())]
    /// A configuration file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    #[error("{at}: {message}")]
    /// A file is not valid TOML.
    Syntax {
        /// Where.
        at: String,
        /// What is wrong.
        message: String,
    },
    #[error("{at}: unknown key `{key}`{hint}")]
    /// A key the configuration does not have.
    UnknownKey {
        /// Where it was written.
        at: String,
        /// The key, `section.name`.
        key: String,
        /// " (did you mean `…`?)", or empty.
        hint: String,
    },
    #[error("{at}: `{key}` must be {expected}, not {found}")]
    /// A value of the wrong kind.
    WrongType {
        /// Where it was written.
        at: String,
        /// The key.
        key: String,
        /// What the key takes.
        expected: &'static str,
        /// What was found.
        found: String,
    },
    /// The merged layers do not make a configuration (a key the built-in file lacks, or the
    /// reverse: a bug in condense, since every layer is checked against that file first).
    #[error("the configuration does not deserialize: {message}")]
    /// The merged layers do not deserialize (a bug: every layer is checked first).
    Typed {
        /// What is wrong.
        message: String,
    },
    #[error("{name}: the value is not UTF-8")]
    /// A `CONDENSE_*` variable whose value is not UTF-8.
    NotUnicode {
        /// The name.
        name: String,
    },
    #[error("{at}: `{key}`: {message}")]
    /// A value of the right kind that is out of range or inconsistent.
    BadValue {
        /// Where it was written.
        at: String,
        /// The key.
        key: String,
        /// What is wrong with it.
        message: String,
    },
}

impl ConfigError {
    /// Where the problem was written, as the message begins: `file:line:column`, a variable's
    /// name or a flag's (`--context-window`); `None` for a problem of no one place. A caller
    /// that gave the flags tells its own mistakes from a file's by it.
    pub fn at(&self) -> Option<&str> {
        match self {
            ConfigError::Syntax { at, .. }
            | ConfigError::UnknownKey { at, .. }
            | ConfigError::WrongType { at, .. }
            | ConfigError::BadValue { at, .. } => Some(at),
            _ => None,
        }
    }
}

pub(crate) fn hint(word: &str, known: &[&str]) -> String {
    condense_text::nearest(word, known)
        .map(|near| format!(" (did you mean `{near}`?)"))
        .unwrap_or_default()
}
