//! The texts that stand in for replaced outputs. Each is a setting: a line of text with `{name}`
//! variables, checked when it is made so that a typo is a configuration error, not a placeholder
//! that says `{tokns}` to the model forever.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
/// Why a placeholder text is invalid.
#[non_exhaustive]
pub enum NoteError {
    #[error("unknown variable `{{{name}}}` in `{text}` (known: {known})")]
    /// It uses a variable that is not offered.
    UnknownVariable {
        /// The variable.
        name: String,
        /// The text.
        text: String,
        /// The variables it may use.
        known: String,
    },
    #[error("unclosed `{{` in `{0}` (write `{{{{` for a literal brace)")]
    /// A `{` is not closed.
    Unclosed(String),
}

/// A text with `{variable}`s; `{{` and `}}` are literal braces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    text: String,
}

impl Note {
    /// Variables every note may use.
    pub const COMMON: [&'static str; 4] = ["tool", "tokens", "chars", "handle"];

    /// Checks that `text` uses only `COMMON` variables and those in `extra`.
    pub fn new(text: impl Into<String>, extra: &[&str]) -> Result<Self, NoteError> {
        let text = text.into();
        for name in variables(&text)? {
            if !Self::COMMON.contains(&name) && !extra.contains(&name) {
                let known: Vec<&str> = Self::COMMON.iter().chain(extra).copied().collect();
                return Err(NoteError::UnknownVariable {
                    name: name.to_owned(),
                    text: text.clone(),
                    known: known.join(", "),
                });
            }
        }
        Ok(Note { text })
    }

    /// A note taken as it is, variables unchecked. Only for texts known to be valid.
    pub(crate) fn verbatim(text: &str) -> Self {
        Note {
            text: text.to_owned(),
        }
    }

    /// The text as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The note with each variable replaced by its value; a variable with no value is left
    /// empty (the constructor already refused unknown names).
    pub fn render(&self, values: &[(&str, &str)]) -> String {
        let mut out = String::with_capacity(self.text.len() + 64);
        let mut rest = self.text.as_str();
        while let Some(at) = rest.find(['{', '}']) {
            out.push_str(&rest[..at]);
            let tail = &rest[at..];
            if tail.starts_with("{{") || tail.starts_with("}}") {
                out.push_str(&tail[..1]);
                rest = &tail[2..];
            } else if let Some(close) = tail.find('}').filter(|_| tail.starts_with('{')) {
                let name = &tail[1..close];
                if let Some((_, value)) = values.iter().find(|(key, _)| *key == name) {
                    out.push_str(value);
                }
                rest = &tail[close + 1..];
            } else {
                out.push_str(&tail[..1]);
                rest = &tail[1..];
            }
        }
        out.push_str(rest);
        out
    }
}

fn variables(text: &str) -> Result<Vec<&str>, NoteError> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('{') {
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("{{") {
            rest = after;
            continue;
        }
        let Some(close) = tail.find('}') else {
            return Err(NoteError::Unclosed(text.to_owned()));
        };
        names.push(&tail[1..close]);
        rest = &tail[close + 1..];
    }
    Ok(names)
}

/// The first `limit` bytes of `text` at most, cut after the last complete line when there is
/// one, and never inside a UTF-8 character.
pub(crate) fn preview(text: &str, limit: usize) -> std::borrow::Cow<'_, str> {
    condense_text::cut(
        text,
        condense_text::Limit::BytesAtLine(limit),
        condense_text::Marker::None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_filled_and_braces_escaped() {
        let note = Note::new("[{tool}: {tokens} tokens, {{literal}}]", &[]).unwrap();
        assert_eq!(
            note.render(&[("tool", "read_file"), ("tokens", "1,024")]),
            "[read_file: 1,024 tokens, {literal}]"
        );
    }

    #[test]
    fn an_unknown_variable_is_named() {
        let error = Note::new("{tool} {tokns}", &[]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown variable `{tokns}` in `{tool} {tokns}` (known: tool, tokens, chars, handle)"
        );
        assert!(matches!(
            Note::new("oops {tool", &[]),
            Err(NoteError::Unclosed(_))
        ));
    }

    #[test]
    fn a_preview_cuts_on_a_line_and_a_character_boundary() {
        assert_eq!(preview("short", 10), "short");
        assert_eq!(
            preview("line one\nline two\nline three", 20),
            "line one\nline two\n"
        );
        // No newline in reach: cut at the limit, backing off to a character boundary.
        assert_eq!(preview("ééééé", 5), "éé");
    }
}
