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
    /// The literal text between the variables, braces unescaped: what every rendering contains,
    /// in this order (see [`Note::recognises`]).
    pieces: Vec<String>,
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
        Ok(Note::verbatim(&text))
    }

    /// A note taken as it is, variables unchecked. Only for texts known to be valid.
    pub(crate) fn verbatim(text: &str) -> Self {
        const HOLE: char = '\u{0}';
        let mut note = Note {
            text: text.to_owned(),
            pieces: Vec::new(),
        };
        let names = variables(text).unwrap_or_default();
        let hole = HOLE.to_string();
        let values: Vec<(&str, &str)> = names.iter().map(|name| (*name, hole.as_str())).collect();
        note.pieces = note
            .render(&values)
            .split(HOLE)
            .map(str::to_owned)
            .collect();
        note
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

impl Note {
    /// Whether `text` is this note as rendered with any values: its literal pieces appear in
    /// order and it ends with the last one. Files do not keep condense's markers, so this is how
    /// a placeholder read back from disk is told from an output (and never replaced again, which
    /// would bury the handle of the original under a second one).
    pub fn recognises(&self, text: &str) -> bool {
        let [middle @ .., last] = self.pieces.as_slice() else {
            return false;
        };
        if middle.is_empty() {
            return text == last;
        }
        // The end first: it rules out almost every real output without scanning it.
        let Some(mut rest) = text.strip_suffix(last.as_str()) else {
            return false;
        };
        for piece in middle.iter().rev() {
            match rest.rfind(piece.as_str()) {
                Some(at) => rest = &rest[..at],
                None => return false,
            }
        }
        true
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
    fn a_rendered_note_is_recognised_and_an_output_is_not() {
        let rules = crate::PruneSettings::built_in().unwrap().rules;
        let note = rules.placeholder;
        let rendered = note.render(&[
            ("tool", "Read"),
            ("tokens", "1,204"),
            ("handle", "0123456789abcdef"),
        ]);
        assert!(note.recognises(&rendered));
        assert!(!note.recognises("fn main() {}"));
        assert!(!note.recognises(&format!("{rendered} and more")));
        let preview = rules.preview_note;
        let cut = format!(
            "line one\n{}",
            preview.render(&[("tool", "Bash"), ("shown", "9"), ("handle", "ab")])
        );
        assert!(preview.recognises(&cut));
        let fixed = Note::new("[gone]", &[]).unwrap();
        assert!(fixed.recognises("[gone]") && !fixed.recognises("[gone] "));
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
