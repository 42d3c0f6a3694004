use std::path::PathBuf;

/// A configuration problem, always with where it is: the file, line and column, or the
/// environment variable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{at}: {message}")]
    Syntax { at: String, message: String },
    #[error("{at}: unknown key `{key}`{hint}")]
    UnknownKey {
        at: String,
        key: String,
        hint: String,
    },
    #[error("{at}: `{key}` must be {expected}, not {found}")]
    WrongType {
        at: String,
        key: String,
        expected: &'static str,
        found: String,
    },
    /// The merged layers do not make a configuration (a key the built-in file lacks, or the
    /// reverse: a bug in condense, since every layer is checked against that file first).
    #[error("the configuration does not deserialize: {message}")]
    Typed { message: String },
    #[error("{name}: the value is not UTF-8")]
    NotUnicode { name: String },
    #[error("{at}: `{key}`: {message}")]
    BadValue {
        at: String,
        key: String,
        message: String,
    },
}

pub(crate) fn hint(word: &str, known: &[&str]) -> String {
    condense_core::suggest::nearest(word, known)
        .map(|near| format!(" (did you mean `{near}`?)"))
        .unwrap_or_default()
}
