//! A configuration value and where it was written: what every layer reads into, the
//! `[models]` table included.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;
use toml::de::DeValue;

use super::schema::Kind;

/// Which layer a value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "layer", content = "from", rename_all = "snake_case")]
pub enum Source {
    /// `config/condense.toml`, compiled in.
    BuiltIn,
    /// The user's file.
    User(PathBuf),
    /// The project's file.
    Project(PathBuf),
    /// `--config FILE`.
    Explicit(PathBuf),
    /// A `CONDENSE_*` variable.
    Env(String),
    /// A command-line flag.
    Flag(String),
}

impl Source {
    /// How `config show` names the layer.
    pub fn label(&self) -> String {
        match self {
            Source::BuiltIn => "built-in".to_owned(),
            Source::User(path) => format!("user {}", path.display()),
            Source::Project(path) => format!("project {}", path.display()),
            Source::Explicit(path) => format!("--config {}", path.display()),
            Source::Env(variable) => format!("environment {variable}"),
            Source::Flag(flag) => format!("flag {flag}"),
        }
    }

    fn file_name(&self) -> String {
        match self {
            Source::BuiltIn => "config/condense.toml (built-in)".to_owned(),
            Source::User(path) | Source::Project(path) | Source::Explicit(path) => {
                path.display().to_string()
            }
            Source::Env(variable) | Source::Flag(variable) => variable.clone(),
        }
    }
}

/// Where a value was written: the layer and, for files, the line and column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    #[serde(flatten)]
    /// The layer.
    pub source: Source,
    /// 1-based line, for files.
    pub line: Option<usize>,
    /// 1-based column, for files.
    pub column: Option<usize>,
}

impl Origin {
    /// Where byte `offset` of `text`, a layer read from `source`, is.
    pub(crate) fn at(source: &Source, text: &str, offset: usize) -> Origin {
        let (line, column) = line_column(text, offset);
        Origin {
            source: source.clone(),
            line: Some(line),
            column: Some(column),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => write!(f, "{}:{line}:{column}", self.source.file_name()),
            _ => f.write_str(&self.source.file_name()),
        }
    }
}

/// A configuration value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Setting {
    /// A non-negative integer.
    Int(u64),
    /// A number.
    Float(f64),
    /// true or false.
    Bool(bool),
    /// A string.
    Str(String),
    /// A list of strings.
    List(Vec<String>),
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setting::Int(value) => write!(f, "{value}"),
            Setting::Float(value) => write!(f, "{value:?}"),
            Setting::Bool(value) => write!(f, "{value}"),
            Setting::Str(value) => f.write_str(&quote(value)),
            Setting::List(values) => {
                let quoted: Vec<String> = values.iter().map(|value| quote(value)).collect();
                write!(f, "[{}]", quoted.join(", "))
            }
        }
    }
}

/// A TOML basic string on one line. JSON's escapes are TOML's, so serde_json writes it.
pub(crate) fn quote(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

pub(crate) fn convert(value: &DeValue<'_>, kind: Kind) -> Option<Setting> {
    match (kind, value) {
        (Kind::Int, DeValue::Integer(integer)) => {
            let digits = integer.as_str().replace('_', "");
            let digits = digits
                .trim_start_matches("0x")
                .trim_start_matches("0o")
                .trim_start_matches("0b");
            u64::from_str_radix(digits, integer.radix())
                .ok()
                .map(Setting::Int)
        }
        (Kind::Float, DeValue::Float(float)) => float
            .as_str()
            .replace('_', "")
            .parse()
            .ok()
            .map(Setting::Float),
        (Kind::Float, DeValue::Integer(integer)) => integer
            .as_str()
            .replace('_', "")
            .parse::<i64>()
            .ok()
            .map(|v| Setting::Float(v as f64)),
        (Kind::Bool, DeValue::Boolean(flag)) => Some(Setting::Bool(*flag)),
        (Kind::Str, DeValue::String(text)) => Some(Setting::Str(text.to_string())),
        (Kind::List, DeValue::Array(items)) => items
            .iter()
            .map(|item| item.get_ref().as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Setting::List),
        _ => None,
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |tail| tail.chars().count())
        + 1;
    (line, column)
}
