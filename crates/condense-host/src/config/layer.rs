//! One layer of configuration: a TOML file (or the environment) read into key → value, each value
//! with the place it was written.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Serialize;
use toml::de::{DeTable, DeValue};

use super::error::{ConfigError, hint};
use super::schema::{self, Kind};

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

/// A `[[plugins]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginSpec {
    /// The shared library.
    pub path: PathBuf,
    /// Whether failing to load it is an error (`true`) or a warning.
    pub required: bool,
    /// The `[plugins.config]` table, as TOML text for the plugin.
    pub config: String,
    /// Where the entry was written.
    pub origin: Origin,
}

#[derive(Debug, Default)]
pub(crate) struct Layer {
    pub values: BTreeMap<String, (Setting, Origin)>,
    pub plugins: Vec<PluginSpec>,
    pub models: Vec<super::models::ModelWindow>,
}

/// Reads one TOML layer, checking every key and type against the schema.
pub(crate) fn parse(text: &str, source: &Source) -> Result<Layer, ConfigError> {
    let origin_at = |offset: usize| {
        let (line, column) = line_column(text, offset);
        Origin {
            source: source.clone(),
            line: Some(line),
            column: Some(column),
        }
    };
    let root = DeTable::parse(text).map_err(|error| {
        let offset = error.span().map_or(0, |span| span.start);
        ConfigError::Syntax {
            at: origin_at(offset).to_string(),
            message: first_line(error.message()),
        }
    })?;
    let mut layer = Layer::default();
    for (key, value) in root.get_ref() {
        let name = key.get_ref().as_ref();
        let at = origin_at(key.span().start);
        if name == "plugins" {
            let DeValue::Array(entries) = value.get_ref() else {
                return Err(wrong_type(
                    &at,
                    "plugins",
                    "a list of [[plugins]] tables",
                    value.get_ref(),
                ));
            };
            for entry in entries {
                layer.plugins.push(plugin(entry, &origin_at, &at)?);
            }
            continue;
        }
        if name == "models" {
            let DeValue::Table(table) = value.get_ref() else {
                return Err(wrong_type(
                    &at,
                    "models",
                    "a table of [models.\"PATTERN\"] tables",
                    value.get_ref(),
                ));
            };
            layer
                .models
                .extend(super::models::parse_table(table, text, source)?);
            continue;
        }
        let Some(keys) = schema::section(name) else {
            let sections: Vec<&str> = schema::section_names()
                .into_iter()
                .chain(["plugins", "models"])
                .collect();
            return Err(ConfigError::UnknownKey {
                at: at.to_string(),
                key: name.to_owned(),
                hint: hint(name, &sections),
            });
        };
        let DeValue::Table(table) = value.get_ref() else {
            return Err(wrong_type(&at, name, "a table", value.get_ref()));
        };
        for (field, value) in table {
            let field_name = field.get_ref().as_ref();
            let full = format!("{name}.{field_name}");
            let at = origin_at(field.span().start);
            let Some(kind) = keys
                .iter()
                .find(|(k, _)| k == field_name)
                .map(|(_, kind)| *kind)
            else {
                let known: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
                return Err(ConfigError::UnknownKey {
                    at: at.to_string(),
                    key: full,
                    hint: hint(field_name, &known),
                });
            };
            let value_at = origin_at(value.span().start);
            let setting = convert(value.get_ref(), kind)
                .ok_or_else(|| wrong_type(&value_at, &full, kind.name(), value.get_ref()))?;
            layer.values.insert(full, (setting, value_at));
        }
    }
    Ok(layer)
}

fn plugin(
    entry: &toml::Spanned<DeValue<'_>>,
    origin_at: &dyn Fn(usize) -> Origin,
    at: &Origin,
) -> Result<PluginSpec, ConfigError> {
    let DeValue::Table(table) = entry.get_ref() else {
        return Err(wrong_type(
            at,
            "plugins",
            "a list of [[plugins]] tables",
            entry.get_ref(),
        ));
    };
    let origin = origin_at(entry.span().start);
    let mut spec = PluginSpec {
        path: PathBuf::new(),
        required: true,
        config: String::new(),
        origin: origin.clone(),
    };
    let mut has_path = false;
    for (key, value) in table {
        let name = key.get_ref().as_ref();
        let at = origin_at(key.span().start);
        match (name, value.get_ref()) {
            ("path", DeValue::String(path)) => {
                spec.path = PathBuf::from(path.as_ref());
                has_path = true;
            }
            ("path", other) => return Err(wrong_type(&at, "plugins.path", "a string", other)),
            ("required", DeValue::Boolean(required)) => spec.required = *required,
            ("required", other) => {
                return Err(wrong_type(&at, "plugins.required", "true or false", other));
            }
            ("config", DeValue::Table(config)) => {
                let table = to_toml_table(config);
                spec.config = toml::to_string(&table).map_err(|error| ConfigError::BadValue {
                    at: at.to_string(),
                    key: "plugins.config".into(),
                    message: error.to_string(),
                })?;
            }
            ("config", other) => return Err(wrong_type(&at, "plugins.config", "a table", other)),
            (other, _) => {
                return Err(ConfigError::UnknownKey {
                    at: at.to_string(),
                    key: format!("plugins.{other}"),
                    hint: hint(other, &["path", "required", "config"]),
                });
            }
        }
    }
    if !has_path {
        return Err(ConfigError::BadValue {
            at: origin.to_string(),
            key: "plugins".into(),
            message: "a plugin needs a `path`".into(),
        });
    }
    Ok(spec)
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

fn to_toml_table(table: &DeTable<'_>) -> toml::Table {
    table
        .iter()
        .map(|(key, value)| (key.get_ref().to_string(), to_toml(value.get_ref())))
        .collect()
}

fn to_toml(value: &DeValue<'_>) -> toml::Value {
    match value {
        DeValue::String(text) => toml::Value::String(text.to_string()),
        DeValue::Integer(integer) => integer
            .as_str()
            .replace('_', "")
            .parse::<i64>()
            .map_or_else(
                |_| toml::Value::String(integer.as_str().to_owned()),
                toml::Value::Integer,
            ),
        DeValue::Float(float) => float
            .as_str()
            .parse()
            .map_or(toml::Value::Float(f64::NAN), toml::Value::Float),
        DeValue::Boolean(flag) => toml::Value::Boolean(*flag),
        DeValue::Datetime(datetime) => toml::Value::Datetime(*datetime),
        DeValue::Array(items) => {
            toml::Value::Array(items.iter().map(|item| to_toml(item.get_ref())).collect())
        }
        DeValue::Table(table) => toml::Value::Table(to_toml_table(table)),
    }
}

fn wrong_type(at: &Origin, key: &str, expected: &'static str, found: &DeValue<'_>) -> ConfigError {
    let found = match found {
        DeValue::String(_) => "a string",
        DeValue::Integer(integer) if integer.as_str().starts_with('-') => "a negative integer",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date",
        DeValue::Array(_) => "a list",
        DeValue::Table(_) => "a table",
    };
    ConfigError::WrongType {
        at: at.to_string(),
        key: key.to_owned(),
        expected,
        found: found.to_owned(),
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

fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().to_owned()
}
