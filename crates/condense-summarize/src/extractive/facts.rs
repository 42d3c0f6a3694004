//! What the extractive summarizer knows about a head: read straight from the messages.

use condense_core::{Message, Part, Role, ToolOutput, ToolPairs, harness_summary_at, plain_text};

use condense_core::tool_paths as paths;

use super::layout::{CUT_MARK, KEPT_WHOLE, KEPT_WHOLE_AFTER};
use super::previous::EarlierSummary;

/// One tool call and how it ended.
#[derive(Debug, Clone)]
pub(crate) struct CallFact {
    pub tool: String,
    /// The command, the path or the input, in one short line.
    pub what: String,
    pub outcome: Outcome,
    /// Whether the call only read, searched or listed ([`paths::only_looks`]).
    pub looks: bool,
    /// Whether the call only wrote the files it names, with an editor ([`paths::only_writes`]):
    /// the files it wrote are listed as changed.
    pub edits: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    ExitCode(i64),
    Error,
    NoResult,
}

#[derive(Debug, Clone)]
pub(crate) struct ErrorFact {
    pub tool: String,
    pub what: String,
    /// The call as a whole: its command when it runs one, else its input; the same again is
    /// the same call.
    pub call: String,
    /// What the output that reported it says ([`excerpt`]).
    pub excerpt: String,
}

/// `errors` with those of one tool that failed with the same words together: each group's
/// first failure (its tool and words) and every call that failed so, in order, the groups in
/// the order of their last failure (where a repeated line of the summary goes, as
/// `merged_repeats` places one).
pub(crate) fn alike(errors: &[ErrorFact]) -> Vec<(&ErrorFact, Vec<&str>)> {
    // Each group, and where its last failure stands.
    let mut groups: Vec<(&ErrorFact, Vec<&str>, usize)> = Vec::new();
    for (at, error) in errors.iter().enumerate() {
        match groups
            .iter_mut()
            .find(|(first, _, _)| first.tool == error.tool && first.excerpt == error.excerpt)
        {
            Some((_, calls, last)) => {
                calls.push(&error.what);
                *last = at;
            }
            None => groups.push((error, vec![&error.what], at)),
        }
    }
    groups.sort_by_key(|&(_, _, last)| last);
    groups
        .into_iter()
        .map(|(first, calls, _)| (first, calls))
        .collect()
}

#[derive(Debug, Default)]
pub(crate) struct Facts {
    /// What the person wrote, in order.
    pub requests: Vec<String>,
    pub calls: Vec<CallFact>,
    pub errors: Vec<ErrorFact>,
    /// Paths read only, in first-seen order.
    pub files_read: Vec<String>,
    /// Paths changed, in first-seen order.
    pub files_modified: Vec<String>,
    /// The agent's plan as its last todo call wrote it (or an earlier summary carried it), one
    /// `- [status] step` line a step.
    pub plan: Vec<String>,
    /// The assistant's last words in the head: usually what it meant to do next.
    pub last_intent: Option<String>,
    /// The summary an agent's own compaction left (Claude Code's, Codex's, opencode's): the
    /// newest, which was made from a context that held any before it.
    pub earlier: Option<EarlierSummary>,
    /// Those of `requests` that the compaction keeps whole after the summary.
    pub carried: Vec<String>,
    /// Each relative path of the files lists, as every call that named it resolved it (in the
    /// directory the call names, else the session's working directory where the wire records
    /// it): [`Facts::one_name_a_file`] drops it where the list names that file whole.
    resolved: Vec<(String, String)>,
}

impl Facts {
    pub(crate) fn of(head: &[Message]) -> Facts {
        let pairs = ToolPairs::index(head);
        let mut facts = Facts::default();
        // The session's working directory, as recorded last at or before the message read.
        let mut directory: Option<&str> = None;
        for (index, message) in head.iter().enumerate() {
            directory = condense_formats::working_directory(message).or(directory);
            if message.is_compaction_summary() {
                facts.fold(super::previous::read(&message.plain_text()));
            }
            // opencode's question for its own summary is the harness's, not the person's.
            if message.is_summary_request() && harness_summary_at(head, index + 1).is_some() {
                continue;
            }
            // The parts an agent's own summary takes; the rest of its message (opencode's next
            // step, merged into the same message) is read as any other.
            let mut summarized = 0;
            if let Some(summary) = harness_summary_at(head, index) {
                // What it quotes of ours was in the context it was made from: it stands for it.
                let (_, own) = super::previous::quoted_summaries(&summary.text(message));
                facts.earlier = Some(EarlierSummary {
                    by: summary.agent.to_owned(),
                    text: without_analysis(own.trim()),
                });
                summarized = summary.parts;
            }
            let parts = &message.parts[summarized.min(message.parts.len())..];
            if parts.is_empty() {
                continue;
            }
            if message.is_user_turn() {
                facts.add_request(request_text(parts));
            }
            if message.role == Role::Assistant {
                let said = plain_text(parts);
                if !said.trim().is_empty() {
                    facts.last_intent = Some(said.trim().to_owned());
                }
            }
            for part in parts {
                if let Part::ToolCall(call) = part {
                    facts.add_call(call, head, &pairs, directory);
                }
            }
        }
        facts.one_name_a_file();
        facts
    }

    /// Each file listed once: a relative path goes where every call that named it resolved it
    /// to a path the lists name whole (Claude Code's Read and Edit name a file whole, its shell
    /// commands relative to the working directory). The whole one names it for the agent, and
    /// keeps the stronger of the two: a file changed by its relative name is listed changed.
    fn one_name_a_file(&mut self) {
        use std::collections::{HashMap, HashSet};
        let listed_whole: HashSet<&str> = self
            .files_read
            .iter()
            .chain(&self.files_modified)
            .filter(|path| path.starts_with('/'))
            .map(|path| paths::entry(path))
            .collect();
        // Each relative path: whether every call resolved it to a path listed whole that spells
        // it out (`src/a.rs` in `/w/src/a.rs`, not `./a.rs` nor `../w/a.rs`: the list then
        // names both as the agent wrote them), and the whole paths it resolved to.
        let mut verdicts: HashMap<&str, (bool, Vec<&str>)> = HashMap::new();
        for (path, to) in &self.resolved {
            let to = paths::entry(to);
            let named = listed_whole.contains(to)
                && to
                    .strip_suffix(paths::entry(path))
                    .is_some_and(|directory| directory.ends_with('/'));
            let verdict = verdicts
                .entry(paths::entry(path))
                .or_insert_with(|| (true, Vec::new()));
            verdict.0 &= named;
            verdict.1.push(to);
        }
        verdicts.retain(|_, (named, _)| *named);
        if verdicts.is_empty() {
            return;
        }
        // Changed by its relative name and read by its whole one: the whole one is listed
        // changed, where the relative one was.
        let mut modified = Vec::with_capacity(self.files_modified.len());
        for path in std::mem::take(&mut self.files_modified) {
            let Some((_, wholes)) = verdicts.get(paths::entry(&path)) else {
                modified.push(path);
                continue;
            };
            for whole in wholes {
                if let Some(at) = self
                    .files_read
                    .iter()
                    .position(|seen| paths::entry(seen) == *whole)
                {
                    modified.push(self.files_read.remove(at));
                }
            }
        }
        self.files_modified = modified;
        self.files_read
            .retain(|seen| !verdicts.contains_key(paths::entry(seen)));
    }

    /// A tool call of the head: the files it touched (a file written moves from the read list
    /// to the modified one), what it did and how it ended, and its error when it failed (in
    /// place of the same command's earlier one).
    fn add_call(
        &mut self,
        call: &condense_core::ToolCall,
        head: &[Message],
        pairs: &ToolPairs,
        directory: Option<&str>,
    ) {
        let (touched, writes) = paths::touched(&call.name, &call.input);
        let names_a_file = !touched.is_empty();
        let result = pairs.result_site(&call.id).and_then(|site| {
            head.get(site.message)?
                .parts
                .get(site.part)?
                .as_tool_result()
        });
        // An editor's call that failed changed nothing: its file is one the agent looked at,
        // not one it modified.
        let writes = writes
            && !paths::edit_failed(
                &call.name,
                &call.input,
                result.and_then(|result| result.is_error),
            );
        let directory = paths::call_directory(&call.input).or(directory);
        if let Some(directory) = directory.filter(|directory| directory.starts_with('/')) {
            for path in touched.iter().filter(|path| !path.starts_with(['/', '~'])) {
                let resolution = ((*path).to_owned(), paths::normalize(path, Some(directory)));
                if !self.resolved.contains(&resolution) {
                    self.resolved.push(resolution);
                }
            }
        }
        // A directory named with and without its last `/` is one entry, as first named.
        let same = |seen: &String, path: &str| paths::entry(seen) == paths::entry(path);
        for path in touched {
            let (target, other) = if writes {
                (&mut self.files_modified, &mut self.files_read)
            } else {
                (&mut self.files_read, &mut self.files_modified)
            };
            if writes {
                other.retain(|seen| !same(seen, path));
            }
            if !target.iter().any(|seen| same(seen, path))
                && !other.iter().any(|seen| same(seen, path))
            {
                target.push(path.to_owned());
            }
        }
        let what = describe(&call.input);
        let outcome = match result {
            None => Outcome::NoResult,
            Some(result) => outcome_of(&result.content, result.is_error),
        };
        // The same call again (the same command, or the same input) supersedes its earlier
        // failure: a later error is the one that stands, a later success leaves none. (The key
        // is made only where there is a failure to supersede or to record.)
        let failed = result.filter(|_| matches!(outcome, Outcome::Error | Outcome::ExitCode(_)));
        if failed.is_some() || self.errors.iter().any(|error| error.tool == call.name) {
            let whole = paths::command_of(&call.input)
                .map_or_else(|| call.input.to_string(), std::borrow::Cow::into_owned);
            self.errors
                .retain(|error| !(error.tool == call.name && error.call == whole));
            if let Some(result) = failed {
                self.errors.push(ErrorFact {
                    tool: call.name.clone(),
                    what: what.clone(),
                    call: whole,
                    excerpt: excerpt(&result.content),
                });
            }
        }
        if PLAN_TOOLS.contains(&call.name.as_str())
            && let Some(plan) = plan_steps(&call.input)
        {
            self.plan = plan;
        }
        self.calls.push(CallFact {
            tool: call.name.clone(),
            what,
            outcome,
            looks: paths::only_looks(&call.name, &call.input),
            edits: names_a_file && paths::only_writes(&call.name, &call.input),
        });
    }
}

impl Facts {
    /// A request of the person's: in place of an earlier summary's quote of it (cut, or named
    /// as kept whole beside that summary), which it completes; nothing when it is itself such a
    /// quote of one already known, or known as it is; else after the others.
    fn add_request(&mut self, text: String) {
        if let Some(quote) = self
            .requests
            .iter_mut()
            .find(|quote| abbreviates(quote, &text))
        {
            *quote = text;
        } else if !self
            .requests
            .iter()
            .any(|seen| *seen == text || abbreviates(&text, seen))
        {
            self.requests.push(text);
        }
    }

    /// Marks the requests among `carried` (messages the compaction keeps whole after the
    /// summary).
    pub(crate) fn mark_carried(&mut self, carried: &[Message]) {
        self.carried = carried
            .iter()
            .filter(|message| message.is_user_turn())
            .map(|message| request_text(&message.parts))
            .filter(|text| self.requests.contains(text))
            .collect();
    }

    /// What an earlier summary kept comes first, as it happened first: its requests before the
    /// head's, its files before the head's (a file modified since moves to the modified list).
    fn fold(&mut self, previous: super::previous::Previous) {
        if previous.earlier.is_some() {
            self.earlier = previous.earlier;
        }
        if !previous.plan.is_empty() {
            self.plan = previous.plan;
        }
        for request in previous.requests {
            self.add_request(request);
        }
        for path in previous.files_modified {
            self.files_read.retain(|seen| *seen != path);
            if !self.files_modified.contains(&path) {
                self.files_modified.push(path);
            }
        }
        for path in previous.files_read {
            if !self.files_read.contains(&path) && !self.files_modified.contains(&path) {
                self.files_read.push(path);
            }
        }
    }
}

/// The tools an agent keeps its plan with: Claude Code's, opencode's and Codex's.
pub(crate) const PLAN_TOOLS: [&str; 3] = ["TodoWrite", "todowrite", "update_plan"];

/// A todo call's plan, one `- [status] step` line a step; `None` when its input holds none.
fn plan_steps(input: &serde_json::Value) -> Option<Vec<String>> {
    let steps = input
        .get("todos")
        .or_else(|| input.get("plan"))
        .and_then(serde_json::Value::as_array)?;
    Some(
        steps
            .iter()
            .filter_map(|step| {
                let text = step
                    .get("content")
                    .or_else(|| step.get("step"))
                    .and_then(serde_json::Value::as_str)?;
                let status = step
                    .get("status")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("pending");
                Some(format!("- [{status}] {}", cut(text, 200)))
            })
            .collect(),
    )
}

/// A user turn's request as the summary quotes it: its text, and a mark for each image.
fn request_text(parts: &[Part]) -> String {
    let mut text = plain_text(parts);
    if parts.iter().any(|part| matches!(part, Part::Image(_))) {
        text.push_str(if text.is_empty() {
            "[image]"
        } else {
            " [image]"
        });
    }
    text
}

/// Whether `quote` is a summary's shortened quote of `request`: its start, cut (a quote, a
/// ledger's one-line form) or naming a request kept whole beside the summary, the same words
/// whatever the line breaks.
fn abbreviates(quote: &str, request: &str) -> bool {
    let shortened = quote
        .strip_suffix(KEPT_WHOLE)
        .or_else(|| quote.strip_suffix(KEPT_WHOLE_AFTER))
        .unwrap_or(quote);
    let Some(start) = shortened.strip_suffix(CUT_MARK) else {
        return false;
    };
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (start, request) = (words(start), words(request));
    !start.is_empty() && start.len() < request.len() && request.starts_with(&start)
}

/// A call's input in one line: the command, else the path, else the compact JSON, cut at 120.
fn describe(input: &serde_json::Value) -> String {
    let text = paths::command_of(input)
        .map(std::borrow::Cow::into_owned)
        .or_else(|| {
            [
                "file_path",
                "path",
                "pattern",
                "query",
                "filename",
                "description",
            ]
            .iter()
            .find_map(|key| input.get(key).and_then(serde_json::Value::as_str))
            .map(str::to_owned)
        })
        .unwrap_or_else(|| input.to_string());
    let line = text.lines().next().unwrap_or_default();
    let mut short = cut(line, 120);
    if text.lines().nth(1).is_some() && short.len() == line.len() {
        short.push_str(" …");
    }
    short
}

/// How a result ended: an exit code when the output reports one (mini-swe-agent's
/// `<returncode>`, OpenHands' "exit code N"), else the error flag.
fn outcome_of(content: &ToolOutput, is_error: Option<bool>) -> Outcome {
    let text = content.text();
    if let Some(code) = exit_code(&text) {
        return if code == 0 {
            Outcome::Ok
        } else {
            Outcome::ExitCode(code)
        };
    }
    if is_error == Some(true) {
        Outcome::Error
    } else {
        Outcome::Ok
    }
}

fn exit_code(text: &str) -> Option<i64> {
    if let Some(start) = text.find("<returncode>") {
        let rest = &text[start + "<returncode>".len()..];
        return rest.split('<').next()?.trim().parse().ok();
    }
    let lower = text.to_ascii_lowercase();
    let at = lower.rfind("exit code")?;
    let digits: String = lower[at + "exit code".len()..]
        .trim_start_matches([' ', ':'])
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse().ok()
}

/// What an output that reported a failure says, in at most 240 characters: its first three
/// lines that say something (a bare tag such as mini-swe-agent's `<output>` or `<warning>`
/// says nothing), or, where a Python traceback starts in those, what comes before it and its
/// last line, the exception (the lines after `Traceback (most recent call last):` are the
/// frames that led there). Where none of those three names an error and a later line does (a
/// build's warnings before its first `error:`), that line: the first error is the one to fix.
/// "no output" when there is none (a search that found nothing).
fn excerpt(content: &ToolOutput) -> String {
    let text = content.text();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| {
            !(line.is_empty()
                || line.starts_with("<returncode>")
                || line.starts_with('<') && line.ends_with('>') && !line[1..].contains('<'))
        })
        .collect();
    let shown = &lines[..lines.len().min(3)];
    let traceback = shown
        .iter()
        .position(|line| line.starts_with("Traceback (most recent call last)"));
    match (traceback, lines.split_last()) {
        (_, None) => "no output".to_owned(),
        (Some(at), Some((exception, _))) if at + 1 < lines.len() => {
            // What led to it is cut first: the exception is what went wrong.
            let room = 240usize.saturating_sub(exception.chars().count().min(160) + 7);
            let before = cut(&lines[..=at].join(" / "), room);
            cut(&format!("{before} / … / {exception}"), 240)
        }
        _ => match lines.iter().position(|line| names_an_error(line)) {
            Some(at) if at >= shown.len() => cut(&format!("… / {}", lines[at]), 240),
            _ => cut(&shown.join(" / "), 240),
        },
    }
}

/// Whether a line of a failed command's output says what the error was, as compilers, linkers,
/// interpreters and git write it (`error:`, rustc's `error[E0433]:`, `AssertionError:`,
/// `fatal:`), or pytest (`FAILED`, in capitals: the word in a message is not a verdict).
fn names_an_error(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    ["error:", "error[", "fatal:", "fatal error"]
        .iter()
        .any(|mark| lower.contains(mark))
        || line.contains("FAILED")
}

/// What stands in an agent's summary for the analysis [`without_analysis`] leaves out.
const ANALYSIS_LEFT_OUT: &str = "[… the analysis it wrote before its summary left out]";

/// An agent's summary without the analysis written before it. Claude Code has its model think
/// in an `<analysis>` block before the `<summary>` and sends both, as an `Analysis:` and a
/// `Summary:` section: the analysis is the model's scratch work, a pass over the conversation
/// in order that the summary then says again (a quarter of the summary in the Claude Code 2.1
/// logs here). Quoted whole, it left the quote's budget too little for the summary's last
/// sections (the pending tasks, the current work, the next step), which a quote cut to its
/// length loses first. A summary without both sections, in that order, is as it came.
fn without_analysis(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let analysis = lines.iter().position(|line| line.trim_end() == "Analysis:");
    let summary = analysis.and_then(|start| {
        lines[start..]
            .iter()
            .position(|line| line.trim_end() == "Summary:")
            .map(|offset| start + offset)
    });
    let (Some(analysis), Some(summary)) = (analysis, summary) else {
        return text.to_owned();
    };
    let mut kept: Vec<&str> = lines[..analysis].to_vec();
    kept.push(ANALYSIS_LEFT_OUT);
    kept.push("");
    kept.extend(&lines[summary..]);
    kept.join("\n")
}

/// At most `limit` characters of `text`, with " […]" when it was cut.
pub(crate) fn cut(text: &str, limit: usize) -> String {
    condense_text::cut(
        text,
        condense_text::Limit::Chars(limit),
        condense_text::Marker::After(CUT_MARK),
    )
    .into_owned()
}
