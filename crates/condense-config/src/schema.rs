//! Every configuration key and the kind of value it takes, read from the built-in file
//! (`config/condense.toml`): the file that gives each key its default also says what the key is,
//! so the two cannot drift. The order is the file's, for `config show`.

use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Int,
    Float,
    Bool,
    Str,
    List,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Int => "a non-negative integer",
            Kind::Float => "a number",
            Kind::Bool => "true or false",
            Kind::Str => "a string",
            Kind::List => "a list of strings",
        }
    }

    fn of(value: &toml::Value) -> Option<Kind> {
        Some(match value {
            toml::Value::Integer(_) => Kind::Int,
            toml::Value::Float(_) => Kind::Float,
            toml::Value::Boolean(_) => Kind::Bool,
            toml::Value::String(_) => Kind::Str,
            toml::Value::Array(_) => Kind::List,
            toml::Value::Datetime(_) | toml::Value::Table(_) => return None,
        })
    }
}

/// Sections in file order, each with its keys in file order.
pub(crate) type Schema = Vec<(String, Vec<(String, Kind)>)>;

/// The schema of the built-in file. It is compiled in and checked by every test that loads a
/// configuration, so it always parses; were it not to, the schema would be empty and every key
/// an error, never a silent default.
pub(crate) fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| read(super::BUILT_IN))
}

fn read(text: &str) -> Schema {
    let Ok(table) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    // toml's table is sorted; the file's own order comes from its lines.
    let mut schema: Schema = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if !section.starts_with('[') && table.get(section).is_some_and(toml::Value::is_table) {
                schema.push((section.to_owned(), Vec::new()));
            }
            continue;
        }
        let (Some((section, keys)), Some((key, _))) = (schema.last_mut(), line.split_once('='))
        else {
            continue;
        };
        let key = key.trim();
        if line.starts_with('#') || keys.iter().any(|(k, _)| k == key) {
            continue;
        }
        if let Some(kind) = table
            .get(section.as_str())
            .and_then(|s| s.get(key))
            .and_then(Kind::of)
        {
            keys.push((key.to_owned(), kind));
        }
    }
    schema
}

/// Keys whose values from every layer are joined rather than replaced.
pub(crate) const UNION_KEYS: [&str; 1] = ["prune.protected_tools"];

pub(crate) fn section_names() -> Vec<&'static str> {
    schema().iter().map(|(name, _)| name.as_str()).collect()
}

pub(crate) fn section(name: &str) -> Option<&'static [(String, Kind)]> {
    schema()
        .iter()
        .find(|(section, _)| section == name)
        .map(|(_, keys)| keys.as_slice())
}

pub(crate) fn kind_of(key: &str) -> Option<Kind> {
    let (section_name, name) = key.split_once('.')?;
    section(section_name)?
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, kind)| *kind)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_built_in_file_gives_every_section_and_key_in_order() {
        let schema = super::schema();
        let sections: Vec<&str> = schema.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(
            sections,
            [
                "model",
                "prune",
                "trim",
                "microcompact",
                "compaction",
                "summarizer",
                "store",
                "serve"
            ]
        );
        assert_eq!(
            super::kind_of("prune.protected_tools"),
            Some(super::Kind::List)
        );
        assert_eq!(
            super::kind_of("compaction.tail_ratio"),
            Some(super::Kind::Float)
        );
        assert_eq!(schema[0].1[0].0, "context_window");
    }
}
