//! `[models]`: each model's context window and longest reply, so one proxy in front of several
//! models (Claude Code's Sonnet and Haiku, a team's several providers) sizes each request for
//! the model it is for. Rules from the configuration's layers (later layers first), then the
//! built-in table (`config/models.toml`); the first pattern that matches the request's `model`
//! wins; a model none matches uses `model.context_window`.

use toml::de::{DeTable, DeValue};

use super::error::ConfigError;
use super::value::{Origin, Setting, Source, convert};

/// The built-in table: the current providers' models, dated.
pub const BUILT_IN_MODELS: &str = include_str!("../../../config/models.toml");

/// One `[models."PATTERN"]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelWindow {
    /// A glob on the request's `model`: `*` matches any run of characters, `?` one.
    pub pattern: String,
    /// The model's context window, in tokens.
    pub context_window: usize,
    /// The longest reply it may write; `None`: `model.max_output_tokens`.
    pub max_output_tokens: Option<usize>,
    /// Where the entry was written.
    pub origin: Origin,
}

/// Every rule in the order they are tried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelWindows {
    rules: Vec<ModelWindow>,
}

impl ModelWindows {
    /// The rules in the order they are tried.
    pub fn rules(&self) -> &[ModelWindow] {
        &self.rules
    }

    /// The first rule whose pattern matches `model`.
    pub fn find(&self, model: &str) -> Option<&ModelWindow> {
        self.rules
            .iter()
            .find(|rule| glob_match(&rule.pattern, model))
    }

    pub(crate) fn new(rules: Vec<ModelWindow>) -> Self {
        ModelWindows { rules }
    }
}

/// Whether `name` matches `pattern`, where `*` is any run of characters (none included) and
/// `?` any one character; everything else matches itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    // The classic two-pointer match with one backtrack point: linear in practice.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((star_p, star_n)) => {
                    p = star_p + 1;
                    n = star_n + 1;
                    star = Some((star_p, star_n + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// The entries of a `[models]` table of a layer written in `text` (for error positions).
pub(crate) fn parse_table(
    table: &DeTable<'_>,
    text: &str,
    source: &Source,
) -> Result<Vec<ModelWindow>, ConfigError> {
    let origin_at = |offset: usize| Origin::at(source, text, offset);
    // The table's own order is the file's (the first match wins), not the parser's sorted one.
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(pattern, _)| pattern.span().start);
    let mut rules = Vec::new();
    for (pattern, entry) in entries {
        let pattern_name = pattern.get_ref().as_ref();
        let at = origin_at(pattern.span().start);
        let key = format!("models.\"{pattern_name}\"");
        let DeValue::Table(fields) = entry.get_ref() else {
            return Err(ConfigError::BadValue {
                at: at.to_string(),
                key,
                message: "a table with `context_window` (and `max_output_tokens`)".into(),
            });
        };
        if pattern_name.trim().is_empty() {
            return Err(ConfigError::BadValue {
                at: at.to_string(),
                key,
                message: "a pattern that matches a model's name (`*` for any)".into(),
            });
        }
        let (window, output) = window_fields(fields, &key, &origin_at)?;
        let Some(context_window) = window else {
            return Err(ConfigError::BadValue {
                at: at.to_string(),
                key,
                message: "needs a `context_window`".into(),
            });
        };
        if output.is_some_and(|output| output >= context_window) {
            return Err(ConfigError::BadValue {
                at: at.to_string(),
                key,
                message: format!(
                    "max_output_tokens must be less than its context_window ({context_window})"
                ),
            });
        }
        rules.push(ModelWindow {
            pattern: pattern_name.to_owned(),
            context_window,
            max_output_tokens: output,
            origin: at,
        });
    }
    Ok(rules)
}

/// A `[models."PATTERN"]` entry's `context_window` and `max_output_tokens`, each a whole
/// number of tokens more than 0; any other field is refused with what it might have meant.
fn window_fields(
    fields: &DeTable<'_>,
    key: &str,
    origin_at: &dyn Fn(usize) -> Origin,
) -> Result<(Option<usize>, Option<usize>), ConfigError> {
    let mut window = None;
    let mut output = None;
    for (field, value) in fields {
        let name = field.get_ref().as_ref();
        let at = origin_at(field.span().start);
        let number = match convert(value.get_ref(), super::schema::Kind::Int) {
            Some(Setting::Int(number)) => usize::try_from(number).ok().filter(|&number| number > 0),
            _ => None,
        };
        let slot = match name {
            "context_window" => &mut window,
            "max_output_tokens" => &mut output,
            other => {
                return Err(ConfigError::UnknownKey {
                    at: at.to_string(),
                    key: format!("{key}.{other}"),
                    hint: super::error::hint(other, &["context_window", "max_output_tokens"]),
                });
            }
        };
        *slot = Some(number.ok_or_else(|| ConfigError::BadValue {
            at: at.to_string(),
            key: format!("{key}.{name}"),
            message: "must be a whole number of tokens, more than 0".into(),
        })?);
    }
    Ok((window, output))
}

/// The built-in table's rules.
pub(crate) fn built_in() -> Result<Vec<ModelWindow>, ConfigError> {
    let source = Source::BuiltIn;
    let root = DeTable::parse(BUILT_IN_MODELS).map_err(|error| ConfigError::Syntax {
        at: "config/models.toml".into(),
        message: error.message().to_owned(),
    })?;
    for (key, value) in root.get_ref() {
        if let ("models", DeValue::Table(table)) = (key.get_ref().as_ref(), value.get_ref()) {
            return parse_table(table, BUILT_IN_MODELS, &source);
        }
    }
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_documented() {
        for (pattern, name, expected) in [
            ("claude-sonnet-4*", "claude-sonnet-4-5-20250929", true),
            ("claude-sonnet-4*", "claude-sonnet-3", false),
            ("*", "", true),
            ("gpt-?o", "gpt-4o", true),
            ("gpt-?o", "gpt-4o-mini", false),
            ("*mini*", "o4-mini-2025", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("exact", "exact", true),
        ] {
            assert_eq!(glob_match(pattern, name), expected, "{pattern} ~ {name}");
        }
    }

    #[test]
    fn the_built_in_table_reads_and_puts_specific_entries_first() {
        let windows = ModelWindows::new(built_in().unwrap());
        assert!(windows.rules().len() >= 10);
        let opus_41 = windows.find("claude-opus-4-1-20250805").unwrap();
        assert_eq!(opus_41.pattern, "claude-opus-4-1*");
        assert_eq!(
            windows.find("claude-haiku-4-5").unwrap().context_window,
            200_000
        );
        assert!(windows.find("llama-3.3-70b").is_none());
    }
}
