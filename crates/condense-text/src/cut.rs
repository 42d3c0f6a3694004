//! Cutting text at a limit, with a marker that says so. Every place condense shortens text (a
//! preview in a placeholder, a quote in a summary, an excerpt of an error, a table cell) goes
//! through [`cut`]; they differ only in the limit and the marker.

use std::borrow::Cow;

/// How much of the text to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// At most this many characters.
    Chars(usize),
    /// At most this many bytes, ending after the last whole line that fits (a preview that keeps
    /// whole lines), or at the last character boundary when not even one line fits.
    BytesAtLine(usize),
}

/// What marks the cut.
#[derive(Debug, Clone, Copy)]
pub enum Marker<'a> {
    /// Nothing: the caller says it elsewhere (a placeholder's note).
    None,
    /// This text after what is kept.
    After(&'a str),
    /// This text counted within the limit: the result is at most the limit in all.
    Within(&'a str),
    /// Text made from the number of characters cut, after what is kept.
    Count(fn(usize) -> String),
}

/// `text` cut to `limit` with `marker`; borrowed and unchanged when it fits.
pub fn cut<'t>(text: &'t str, limit: Limit, marker: Marker<'_>) -> Cow<'t, str> {
    let kept = match limit {
        Limit::Chars(chars) => {
            let chars = match marker {
                Marker::Within(mark) if text.chars().count() > chars => {
                    chars.saturating_sub(mark.chars().count())
                }
                _ => chars,
            };
            match text.char_indices().nth(chars) {
                None => return Cow::Borrowed(text),
                Some((end, _)) => &text[..end],
            }
        }
        Limit::BytesAtLine(bytes) => {
            if text.len() <= bytes {
                return Cow::Borrowed(text);
            }
            let mut end = bytes;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            match text[..end].rfind('\n') {
                Some(newline) if newline > 0 => &text[..=newline],
                _ => &text[..end],
            }
        }
    };
    match marker {
        Marker::None => Cow::Borrowed(kept),
        Marker::After(mark) | Marker::Within(mark) => Cow::Owned(format!("{kept}{mark}")),
        Marker::Count(describe) => {
            let left = text[kept.len()..].chars().count();
            Cow::Owned(format!("{kept}{}", describe(left)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_marker() {
        assert_eq!(
            cut("short", Limit::Chars(10), Marker::After(" […]")),
            "short"
        );
        assert_eq!(
            cut("abcdefgh", Limit::Chars(3), Marker::After(" […]")),
            "abc […]"
        );
        assert_eq!(
            cut("abcdefgh", Limit::Chars(4), Marker::Within("…")),
            "abc…"
        );
        assert_eq!(cut("abcd", Limit::Chars(4), Marker::Within("…")), "abcd");
        assert_eq!(
            cut(
                "abcdefgh",
                Limit::Chars(3),
                Marker::Count(|left| format!(" [{left} cut]"))
            ),
            "abc [5 cut]"
        );
        assert_eq!(cut("λλλλ", Limit::Chars(2), Marker::None), "λλ");
    }

    #[test]
    fn a_byte_preview_keeps_whole_lines() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(cut(text, Limit::BytesAtLine(9), Marker::None), "one\ntwo\n");
        assert_eq!(
            cut("no newline here", Limit::BytesAtLine(5), Marker::None),
            "no ne"
        );
        assert_eq!(cut("λλλ", Limit::BytesAtLine(3), Marker::None), "λ");
        assert_eq!(cut(text, Limit::BytesAtLine(100), Marker::None), text);
    }
}
