//! Folding an earlier summary into the next one.
//!
//! A head that begins with an earlier compaction's summary holds what that summary kept: the
//! person's requests, quoted and numbered, and the files read and modified. The summary is not a
//! user turn and names no tool calls, so reading the head alone would drop all of it. This reads
//! those items back out of the summary text (the extractive summarizer's own layout: `N. quote`
//! items, `Modified:` / `Read:` followed by `- path` lines), so the new summary quotes every
//! request and names every file the old one did.

/// What an earlier summary recorded.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Previous {
    pub requests: Vec<String>,
    pub files_read: Vec<String>,
    pub files_modified: Vec<String>,
}

fn is_heading(line: &str) -> bool {
    line.starts_with("## ") || line.starts_with("### ")
}

/// `N. rest` with exactly the number `n`.
fn numbered(line: &str, n: usize) -> Option<&str> {
    line.strip_prefix(&format!("{n}. "))
        .or_else(|| (line == format!("{n}.")).then_some(""))
}

pub(crate) fn read(summary: &str) -> Previous {
    let lines: Vec<&str> = summary.lines().collect();
    let mut previous = Previous::default();

    // The first run of items numbered 1, 2, 3, …; an item runs until the next number, a
    // heading, or the end. Quotes keep their own line breaks.
    if let Some(start) = lines.iter().position(|line| numbered(line, 1).is_some()) {
        let mut current: Option<String> = None;
        for line in &lines[start..] {
            let next = previous.requests.len() + usize::from(current.is_some()) + 1;
            if let Some(rest) = numbered(line, next) {
                previous.requests.extend(current.take());
                current = Some(rest.to_owned());
            } else if is_heading(line) {
                break;
            } else if let Some(item) = current.as_mut() {
                item.push('\n');
                item.push_str(line);
            }
        }
        previous.requests.extend(current);
        for request in &mut previous.requests {
            let trimmed = request.trim_end().len();
            request.truncate(trimmed);
        }
    }

    let mut list: Option<&mut Vec<String>> = None;
    for line in &lines {
        match *line {
            "Modified:" => list = Some(&mut previous.files_modified),
            "Read:" => list = Some(&mut previous.files_read),
            _ => match (line.strip_prefix("- "), list.as_deref_mut()) {
                (Some(path), Some(files)) if !path.is_empty() => {
                    if !files.iter().any(|seen| seen == path) {
                        files.push(path.to_owned());
                    }
                }
                _ => list = None,
            },
        }
    }
    previous
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_files_come_back_out() {
        let summary = "## Goal\nFix it (quoted in full below)\n1. Fix the parser\nit fails on BOMs\n2. Add a test\n\n## Relevant files / directories\nModified:\n- src/a.rs\nRead:\n- src/b.rs\n- README.md\n\n## Next\n1. not a request";
        let previous = read(summary);
        assert_eq!(
            previous.requests,
            vec!["Fix the parser\nit fails on BOMs", "Add a test"]
        );
        assert_eq!(previous.files_modified, vec!["src/a.rs"]);
        assert_eq!(previous.files_read, vec!["src/b.rs", "README.md"]);
    }

    #[test]
    fn a_summary_without_items_gives_nothing() {
        assert_eq!(read("## Goal\nNone recorded."), Previous::default());
    }
}
