//! The ledger under a model's summary: what a summary must not lose, read off the head
//! deterministically (no model), so a model that forgets a file or a request cannot lose it.
//!
//! It lists the person's requests, the files changed and read (each with the last tool that
//! touched it), the commands that failed with their error line, and the agent's plan when it
//! kept one (a `TodoWrite`, `todowrite` or `update_plan` call). A ledger in the head (from an
//! earlier compaction) is merged in: its requests and files are read back as an extractive
//! summary's are, its failures and plan carried until newer ones replace them.

use condense_core::{Message, Part};

use super::facts::{Facts, alike, cut};
use super::layout::{LAST_TOOL, LEDGER_HEADING, PLAN};

/// The failed calls kept: the most recent (those of one tool that failed with the same words
/// share a line).
const FAILURES_KEPT: usize = 10;
/// Each request is quoted up to this many characters: the summary above it says the rest.
const REQUEST_CHARS: usize = 300;

/// The ledger of `head`, or `None` when the head holds nothing it lists.
pub fn ledger(head: &[Message]) -> Option<String> {
    let facts = Facts::of(head);
    let earlier = head
        .iter()
        .rfind(|message| message.is_compaction_summary())
        .map(|message| Carried::read(&message.plain_text()))
        .unwrap_or_default();
    let last_tools = last_tools(head);
    let mut lines = Vec::new();
    if !facts.requests.is_empty() {
        lines.push("Requests:".to_owned());
        lines.extend(
            facts
                .requests
                .iter()
                .enumerate()
                .map(|(index, request)| format!("{}. {}", index + 1, one_line(request))),
        );
    }
    for (label, files) in [
        ("Modified:", &facts.files_modified),
        ("Read:", &facts.files_read),
    ] {
        if files.is_empty() {
            continue;
        }
        lines.push(label.to_owned());
        for path in files {
            match last_tools.iter().rev().find(|(seen, _)| seen == path) {
                Some((_, tool)) => lines.push(format!("- {path}{LAST_TOOL}{tool})")),
                None => lines.push(format!("- {path}")),
            }
        }
    }
    // The most recent failed calls, the earlier ledger's first; this head's of one tool that
    // failed with the same words on one line, as the summary has them.
    let recent = &facts.errors[facts.errors.len().saturating_sub(FAILURES_KEPT)..];
    let mut failures = earlier.failures;
    failures.drain(..failures.len().saturating_sub(FAILURES_KEPT - recent.len()));
    failures.extend(alike(recent).into_iter().map(|(first, calls)| {
        let line = first.excerpt.lines().find(|line| !line.trim().is_empty());
        let calls: Vec<String> = calls
            .iter()
            .map(|what| format!("`{}`", cut(what, 160)))
            .collect();
        format!(
            "- {} {}: {}",
            first.tool,
            calls.join(", "),
            cut(line.unwrap_or("failed").trim(), 200)
        )
    }));
    if !failures.is_empty() {
        lines.push("Failed:".to_owned());
        lines.extend(failures);
    }
    if !facts.plan.is_empty() {
        lines.push(PLAN.to_owned());
        lines.extend(facts.plan.iter().cloned());
    }
    if lines.is_empty() {
        return None;
    }
    Some(format!("{LEDGER_HEADING}\n{}", lines.join("\n")))
}

/// A request on one line, cut: the summary quotes it, the ledger only names it.
fn one_line(request: &str) -> String {
    let joined = request.split_whitespace().collect::<Vec<_>>().join(" ");
    cut(&joined, REQUEST_CHARS)
}

/// Every path a call touched, with the call's tool, in the order of the calls.
fn last_tools(head: &[Message]) -> Vec<(String, String)> {
    head.iter()
        .flat_map(|message| &message.parts)
        .filter_map(Part::as_tool_call)
        .flat_map(|call| {
            let (touched, _) = condense_core::tool_paths::touched(&call.name, &call.input);
            touched
                .into_iter()
                .map(|path| (path.to_owned(), call.name.clone()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What an earlier ledger carries that the head's own facts do not give back.
#[derive(Debug, Default)]
struct Carried {
    failures: Vec<String>,
}

impl Carried {
    /// The failures of the ledger in `summary`, if it has one (its plan is read back with its
    /// requests and files, [`super::previous::read`]).
    fn read(summary: &str) -> Carried {
        let mut carried = Carried::default();
        let Some(ledger) = super::previous::ledger_of(summary) else {
            return carried;
        };
        let mut list: Option<&mut Vec<String>> = None;
        for line in ledger.into_iter().skip(1) {
            match line {
                "Failed:" => list = Some(&mut carried.failures),
                _ if line.ends_with(':') && !line.starts_with("- ") => list = None,
                _ if line.starts_with("## ") => break,
                _ => {
                    if let Some(list) = list.as_deref_mut()
                        && line.starts_with("- ")
                    {
                        list.push(line.to_owned());
                    }
                }
            }
        }
        carried
    }
}
