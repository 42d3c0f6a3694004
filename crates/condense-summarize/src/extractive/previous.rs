//! Folding an earlier summary into the next one.
//!
//! A head that begins with an earlier compaction's summary holds what that summary kept: the
//! person's requests, quoted and numbered, and the files read and modified. The summary is not a
//! user turn and names no tool calls, so reading the head alone would drop all of it. This reads
//! those items back out of the summary text (the extractive summarizer's own layout: `N. quote`
//! items, `Modified:` / `Read:` followed by `- path` lines, the agent's plan after `Plan:`), so
//! the new summary quotes every request and names every file the old one did, and keeps the
//! plan until the agent writes a new one.

use super::layout::{EARLIER_BY, LAST_TOOL, LEDGER_HEADING, PLAN};

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

/// The agents' summaries a summary of ours quotes (each under its `Earlier summary by AGENT,
/// quoted …:` line, in `> ` lines), and its text without them.
pub(crate) fn quoted_summaries(summary: &str) -> (Vec<EarlierSummary>, String) {
    let mut found = Vec::new();
    let mut rest = Vec::new();
    let mut quoting: Option<EarlierSummary> = None;
    for line in summary.lines() {
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

fn is_heading(line: &str) -> bool {
    line.starts_with("## ") || line.starts_with("### ")
}

/// `N. rest` with exactly the number `n`.
fn numbered(line: &str, n: usize) -> Option<&str> {
    line.strip_prefix(&format!("{n}. "))
        .or_else(|| (line == format!("{n}.")).then_some(""))
}

pub(crate) fn read(summary: &str) -> Previous {
    // Under a model's summary, the ledger is what condense wrote: its lists, not the model's
    // own numbered lines, are the requests and files.
    let ledger = summary
        .find(LEDGER_HEADING)
        .map_or(summary, |start| &summary[start..]);
    let lines: Vec<&str> = ledger.lines().collect();
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
            } else if is_heading(line) || matches!(*line, "Modified:" | "Read:" | "Failed:" | PLAN)
            {
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

    previous.earlier = quoted_summaries(summary).0.pop();

    // Which list the `- item` lines go to: the files' (a path, with the ledger's last tool after
    // it) or the plan's (the line as it is).
    let mut list: Option<(&mut Vec<String>, bool)> = None;
    for line in &lines {
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
    fn a_summary_without_items_gives_nothing() {
        assert_eq!(read("## Goal\nNone recorded."), Previous::default());
    }
}
