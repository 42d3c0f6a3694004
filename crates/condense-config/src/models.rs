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
#[derive(Debug, Clone, PartialEq)]
pub struct ModelWindow {
    /// A glob on the request's `model`: `*` matches any run of characters, `?` one.
    pub pattern: String,
    /// The model's context window, in tokens.
    pub context_window: usize,
    /// The longest reply it may write; `None`: `model.max_output_tokens`.
    pub max_output_tokens: Option<usize>,
    /// The model's prices as the early compaction weighs them
    /// (`compaction.cache_rewrite_cost` and `compaction.output_cost`, in cache reads a token):
    /// the providers price the cache differently, so the cheapest time to compact differs.
    /// `None`: those keys' values. A team's own value of a key, set in any layer of its
    /// configuration, holds for every model.
    pub prices: CachePrices,
    /// Where the entry was written.
    pub origin: Origin,
}

/// A model's prices relative to a token read from the provider's cache, each `None` where the
/// `[compaction]` key stands.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CachePrices {
    /// `cache_rewrite_cost`: what a token the provider has not cached costs more than a cached one.
    pub cache_rewrite_cost: Option<f64>,
    /// `output_cost`: an output token.
    pub output_cost: Option<f64>,
}

/// Every rule in the order they are tried.
#[derive(Debug, Clone, Default, PartialEq)]
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

    /// The rules with their prices taken out for the keys a team set in its own configuration
    /// (`configured`, see `Config::team_prices`): that value holds for every model.
    pub(crate) fn without_prices_set_elsewhere(mut self, configured: CachePrices) -> Self {
        for rule in &mut self.rules {
            if configured.cache_rewrite_cost.is_some() {
                rule.prices.cache_rewrite_cost = None;
            }
            if configured.output_cost.is_some() {
                rule.prices.output_cost = None;
            }
        }
        self
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
        let Fields {
            window,
            output,
            prices,
        } = entry_fields(fields, &key, &origin_at)?;
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
            prices,
            origin: at,
        });
    }
    Ok(rules)
}

/// A `[models."PATTERN"]` entry's fields.
struct Fields {
    window: Option<usize>,
    output: Option<usize>,
    prices: CachePrices,
}

/// The fields an entry may have.
const FIELDS: &[&str] = &[
    "context_window",
    "max_output_tokens",
    "cache_rewrite_cost",
    "output_cost",
];

/// A `[models."PATTERN"]` entry's `context_window` and `max_output_tokens`, each a whole
/// number of tokens more than 0, and its `cache_rewrite_cost` and `output_cost`, each a number
/// of cache reads, 0 or more; any other field is refused with what it might have meant.
fn entry_fields(
    fields: &DeTable<'_>,
    key: &str,
    origin_at: &dyn Fn(usize) -> Origin,
) -> Result<Fields, ConfigError> {
    let mut entry = Fields {
        window: None,
        output: None,
        prices: CachePrices::default(),
    };
    for (field, value) in fields {
        let name = field.get_ref().as_ref();
        let at = origin_at(field.span().start);
        let bad = |message: &str| ConfigError::BadValue {
            at: at.to_string(),
            key: format!("{key}.{name}"),
            message: message.into(),
        };
        match name {
            "context_window" | "max_output_tokens" => {
                let number = match convert(value.get_ref(), super::schema::Kind::Int) {
                    Some(Setting::Int(number)) => {
                        usize::try_from(number).ok().filter(|&number| number > 0)
                    }
                    _ => None,
                };
                let number =
                    number.ok_or_else(|| bad("must be a whole number of tokens, more than 0"))?;
                if name == "context_window" {
                    entry.window = Some(number);
                } else {
                    entry.output = Some(number);
                }
            }
            "cache_rewrite_cost" | "output_cost" => {
                let number = match convert(value.get_ref(), super::schema::Kind::Float) {
                    Some(Setting::Float(number)) if number.is_finite() && number >= 0.0 => number,
                    _ => return Err(bad("must be a number of cache reads, 0 or more")),
                };
                if name == "cache_rewrite_cost" {
                    entry.prices.cache_rewrite_cost = Some(number);
                } else {
                    entry.prices.output_cost = Some(number);
                }
            }
            other => {
                return Err(ConfigError::UnknownKey {
                    at: at.to_string(),
                    key: format!("{key}.{other}"),
                    hint: super::error::hint(other, FIELDS),
                });
            }
        }
    }
    Ok(entry)
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
