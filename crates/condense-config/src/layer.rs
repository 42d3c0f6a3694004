//! One layer of configuration: a TOML file (or the environment) read into key → value, each value
//! with the place it was written.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use toml::de::{DeTable, DeValue};

use super::error::{ConfigError, hint};
use super::schema;
use super::value::{Origin, Setting, Source, convert};

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
    let origin_at = |offset: usize| Origin::at(source, text, offset);
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
        read_section(&mut layer, name, table, keys, &origin_at)?;
    }
    Ok(layer)
}

/// The keys of section `name` into `layer`, each checked against the schema's `keys` and
/// converted to its kind.
fn read_section(
    layer: &mut Layer,
    name: &str,
    table: &DeTable<'_>,
    keys: &[(String, schema::Kind)],
    origin_at: &dyn Fn(usize) -> Origin,
) -> Result<(), ConfigError> {
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
    Ok(())
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

fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().to_owned()
}
