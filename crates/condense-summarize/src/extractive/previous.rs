//! Folding an earlier summary into the next one.
//!
//! A head that begins with an earlier compaction's summary holds what that summary kept: the
//! person's requests, quoted and numbered, and the files read and modified. The summary is not a
//! user turn and names no tool calls, so reading the head alone would drop all of it. This reads
//! those items back out of the summary text (the extractive summarizer's own layout: `N. quote`
//! items, `Modified:` / `Read:` followed by `- path` lines, the agent's plan after `Plan:`), so
//! the new summary quotes every request and names every file the old one did, and keeps the
//! plan until the agent writes a new one.

use super::layout::{
    CUT_NOTE, EARLIER_BY, LAST_TOOL, LEDGER_HEADING, LIST_LABELS, PLAN, is_fence, is_heading,
};

/// A summary an agent's own compaction left in the history: all that is left of what came
/// before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EarlierSummary {
    /// The agent that wrote it.
    pub by: String,
    /// Its text, whole.
    pub text: String,
}

/// What an earlier summary recorded.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Previous {
    pub requests: Vec<String>,
    pub files_read: Vec<String>,
    pub files_modified: Vec<String>,
    /// The agent's plan, its `- [status] step` lines.
    pub plan: Vec<String>,
    /// The agent's own summary it quoted (the newest: it stands for those before it).
    pub earlier: Option<EarlierSummary>,
}

/// What a line of a summary is to its reader: the summary's own layout, or, of a request's
/// fenced quote ([`super::layout::numbered_quote`]), the item's line that opens the fence, a
/// line of the quote, or the fence that closes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    Layout,
    Opening,
    Quoted,
    Closing,
}

/// The lines of `summary`, each with what it is. A fence left open (a summary cut short) fences
/// nothing: its lines are read as layout.
fn lines_of(summary: &str) -> Vec<(&str, Line)> {
    let lines: Vec<&str> = summary.lines().collect();
    let mut read = Vec::with_capacity(lines.len());
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        at += 1;
        let closed = fence_opened(line).and_then(|fence| {
            let length = lines[at..].iter().position(|quoted| *quoted == fence)?;
            Some((fence, length))
        });
        let Some((fence, length)) = closed else {
            read.push((line, Line::Layout));
            continue;
        };
        read.push((line, Line::Opening));
        read.extend(
            lines[at..at + length]
                .iter()
                .map(|quoted| (*quoted, Line::Quoted)),
        );
        read.push((fence, Line::Closing));
        at += length + 1;
    }
    read
}

/// The fence `line` opens, when it is an item's number followed by one (`3. ~~~`).
fn fence_opened(line: &str) -> Option<&str> {
    super::numbered(line)
        .map(|(_, rest)| rest)
        .filter(|rest| is_fence(rest))
}

/// The agents' summaries a summary of ours quotes (each under its `Earlier summary by AGENT,
/// quoted …:` line, in `> ` lines), and its text without them.
pub(crate) fn quoted_summaries(summary: &str) -> (Vec<EarlierSummary>, String) {
    let mut found = Vec::new();
    let mut rest = Vec::new();
    let mut quoting: Option<EarlierSummary> = None;
    for (line, kind) in lines_of(summary) {
        if kind != Line::Layout {
            // A request's fenced quote, whatever its lines look like.
            found.extend(quoting.take());
            rest.push(line);
            continue;
        }
        let quoted = line
            .strip_prefix("> ")
            .or_else(|| (line == ">").then_some(""));
        if let (Some(text), Some(earlier)) = (quoted, quoting.as_mut()) {
            if !earlier.text.is_empty() {
                earlier.text.push('\n');
            }
            earlier.text.push_str(text);
            continue;
        }
        found.extend(quoting.take());
        if let Some(by) = line
            .strip_prefix(EARLIER_BY)
            .and_then(|rest| rest.split_once(", quoted"))
            .filter(|_| line.ends_with(':'))
            .map(|(by, _)| by)
        {
            quoting = Some(EarlierSummary {
                by: by.to_owned(),
                text: String::new(),
            });
        } else {
            rest.push(line);
        }
    }
    found.extend(quoting);
    (found, rest.join("\n"))
}

/// Where the ledger under a model's summary starts in `lines`, when there is one: the last line
/// of the layout that is its heading (condense writes the ledger last; a request that quotes the
/// heading is fenced, and the model's text above it is not the ledger).
fn ledger_start(lines: &[(&str, Line)]) -> Option<usize> {
    lines
        .iter()
        .rposition(|&(line, kind)| kind == Line::Layout && line == LEDGER_HEADING)
}

/// The ledger of `summary` and what follows it, when it has one ([`ledger_start`]).
pub(crate) fn ledger_of(summary: &str) -> Option<Vec<&str>> {
    let lines = lines_of(summary);
    let start = ledger_start(&lines)?;
    Some(lines[start..].iter().map(|&(line, _)| line).collect())
}

/// `N. rest` with exactly the number `n`.
fn numbered(line: &str, n: usize) -> Option<&str> {
    line.strip_prefix(&format!("{n}. "))
        .or_else(|| (line == format!("{n}.")).then_some(""))
}

pub(crate) fn read(summary: &str) -> Previous {
    // Under a model's summary, the ledger is what condense wrote: its lists, not the model's
    // own numbered lines, are the requests and files.
    let lines = lines_of(summary);
    let lines = ledger_start(&lines).map_or(&lines[..], |start| &lines[start..]);
    let mut previous = Previous::default();

    // The first run of items numbered 1, 2, 3, …; an item runs until the next number, a
    // heading, a note of the budget's cut, or the end, and a fenced one is its fence's lines.
    // Quotes keep their own line breaks.
    let first = lines.iter().position(|(line, kind)| {
        matches!(kind, Line::Layout | Line::Opening) && numbered(line, 1).is_some()
    });
    if let Some(start) = first {
        let mut current: Option<String> = None;
        // Whether `current` is a fenced quote, whether none of its lines is read yet, and
        // whether it is whole (its fence closed, or a note of a cut after it): what follows,
        // to the next item, is not its text.
        let (mut fenced, mut fresh, mut whole) = (false, false, false);
        for &(line, kind) in &lines[start..] {
            let next = previous.requests.len() + usize::from(current.is_some()) + 1;
            if let Some(rest) = numbered(line, next).filter(|_| kind != Line::Quoted) {
                previous.requests.extend(current.take());
                fenced = kind == Line::Opening;
                fresh = fenced;
                whole = false;
                current = Some(if fenced { "" } else { rest }.to_owned());
                continue;
            }
            match kind {
                Line::Closing if fenced => {
                    whole = true;
                    continue;
                }
                Line::Layout if is_heading(line) || LIST_LABELS.contains(&line) => break,
                Line::Layout if line.starts_with(CUT_NOTE) => {
                    whole = true;
                    continue;
                }
                // Anything else, a fence that is not an item's among them, is the item's text.
                _ if whole => continue,
                _ => {}
            }
            if let Some(item) = current.as_mut() {
                if !std::mem::take(&mut fresh) {
                    item.push('\n');
                }
                item.push_str(line);
            }
        }
        previous.requests.extend(current);
        for request in &mut previous.requests {
            let trimmed = request.trim_end().len();
            request.truncate(trimmed);
        }
    }

    previous.earlier = quoted_summaries(summary).0.pop();

    // Which list the `- item` lines go to: the files' (a path, with the ledger's last tool after
    // it) or the plan's (the line as it is).
    let mut list: Option<(&mut Vec<String>, bool)> = None;
    for (line, _) in lines.iter().filter(|(_, kind)| *kind == Line::Layout) {
        match *line {
            "Modified:" => list = Some((&mut previous.files_modified, true)),
            "Read:" => list = Some((&mut previous.files_read, true)),
            PLAN => {
                previous.plan.clear();
                list = Some((&mut previous.plan, false));
            }
            _ => match (line.strip_prefix("- "), list.as_mut()) {
                (Some(item), Some((items, true))) if !item.is_empty() => {
                    let path = item
                        .rsplit_once(LAST_TOOL)
                        .filter(|(_, tool)| tool.ends_with(')'))
                        .map_or(item, |(path, _)| path);
                    if !items.iter().any(|seen| seen == path) {
                        items.push(path.to_owned());
                    }
                }
                (Some(step), Some((items, false))) if step.starts_with('[') => {
                    items.push((*line).to_owned());
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
    fn an_agents_summary_quoted_in_it_comes_back_whole() {
        let summary = "## Goal\nPort it (quoted in full below)\nEarlier summary by Codex, quoted in full:\n> Another language model started.\n>\n> 1. not a request\n1. Port it\n2. Test it\n\n## Next\nEarlier summary by Claude Code, quoted up to 4000 characters:\n> This session […]";
        let previous = read(summary);
        let (quoted, rest) = quoted_summaries(summary);
        assert_eq!(
            quoted,
            vec![
                EarlierSummary {
                    by: "Codex".to_owned(),
                    text: "Another language model started.\n\n1. not a request".to_owned(),
                },
                EarlierSummary {
                    by: "Claude Code".to_owned(),
                    text: "This session […]".to_owned(),
                },
            ]
        );
        assert_eq!(
            rest,
            "## Goal\nPort it (quoted in full below)\n1. Port it\n2. Test it\n\n## Next"
        );
        // The newest stands for those before it.
        assert_eq!(previous.earlier, quoted.last().cloned());
        assert_eq!(previous.requests, vec!["Port it", "Test it"]);
    }

    #[test]
    fn a_fence_that_is_not_an_item_s_or_left_open_is_text() {
        // An old summary's request that opened with a fence of its own, left open, and a fenced
        // quote under a number that is not the next item's.
        let summary = "## Goal\nX\n1. ~~~\nplain\n2. Read it\n\n## Next\nnone";
        assert_eq!(read(summary).requests, vec!["~~~\nplain", "Read it"]);
        let summary = "## Goal\nX\n1. one\n5. ~~~\n2. inside\n~~~\n2. two";
        assert_eq!(
            read(summary).requests,
            vec!["one\n5. ~~~\n2. inside\n~~~", "two"]
        );
    }

    /// Lines a request may hold that read as the summary's own layout, and plain ones.
    const LINES: [&str; 17] = [
        "1. first",
        "[… 2 more item(s) cut here: the summary is kept within 610 tokens]",
        "2.",
        "10. tenth",
        "## Usage",
        "### Ledger",
        "Read:",
        "Modified:",
        "Failed:",
        "Plan:",
        "- src/b.rs",
        "~~~",
        "~~~~",
        "> quoted",
        "Earlier summary by Codex, quoted in full:",
        "plain words",
        "",
    ];

    fn request() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        proptest::collection::vec(proptest::sample::select(LINES.to_vec()), 1..5)
            .prop_map(|lines| lines.join("\n").trim().to_owned())
            .prop_filter("a request says something", |text| !text.is_empty())
    }

    proptest::proptest! {
        /// Whatever lines the person's requests hold, a summary that quotes them (a note of a
        /// cut after them) gives back each, whole and in order, and the files it lists, and
        /// no more.
        #[test]
        fn every_quoted_request_comes_back_as_written(
            requests in proptest::collection::vec(request(), 1..5)
        ) {
            let items: Vec<String> = requests
                .iter()
                .enumerate()
                .map(|(index, text)| super::super::layout::numbered_quote(index + 1, text))
                .collect();
            let summary = format!(
                "## Goal\nX (quoted in full below)\n{}\n[… more item(s) cut here: the summary is kept within 9 tokens]\n\n## Relevant files / directories\nRead:\n- src/a.rs",
                items.join("\n")
            );
            let previous = read(&summary);
            proptest::prop_assert_eq!(&previous.requests, &requests, "{}", summary);
            proptest::prop_assert_eq!(previous.files_read, vec!["src/a.rs".to_owned()]);
            proptest::prop_assert!(previous.files_modified.is_empty() && previous.plan.is_empty());
            proptest::prop_assert_eq!(previous.earlier, None);
        }
    }

    #[test]
    fn a_summary_without_items_gives_nothing() {
        assert_eq!(read("## Goal\nNone recorded."), Previous::default());
    }
}
