//! The offline summarizer: no model, no network, the same summary for the same head.
//!
//! It fills each section of the template with what it can read off the head: the person's
//! messages quoted, the tool calls made and how each ended, the errors seen, the files read and
//! changed, and the assistant's last statement of intent. What the person asked and which files
//! were involved are always kept whole; the rest is cut, item by item, at the token budget, and
//! the summary says where. (Only a request that would otherwise be over the window has them cut
//! too: [`Extractive::strictly_within`].)

mod earlier;
mod facts;
mod layout;
mod ledger;
mod previous;

pub use layout::LEDGER_HEADING;
pub use ledger::ledger;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use condense_core::Message;
use condense_defaults::DefaultsError;
use condense_template::Template;
use condense_tokenizer::TokenCounter;
use serde::Deserialize;

use crate::{SummarizeError, Summarizer};
use facts::{Facts, Outcome, cut};

use layout::CUT_NOTE;
/// The characters of a request that name it: the goal line's, and a request's that the
/// compaction keeps whole after the summary.
const GIST_CHARS: usize = 200;

/// How the offline summarizer sizes the summary: the `[summarizer]` keys it reads (their defaults
/// and reasons are in `config/condense.toml`).
#[derive(Clone, Deserialize)]
pub struct ExtractiveSettings {
    /// The summary, as written, stays within this many tokens, but for the quoted requests and
    /// the file lists, which only a strict budget cuts ([`Extractive::strictly_within`]). (The
    /// host gives it its `summarizer.budget_tokens` less what wraps the summary in its message,
    /// so that the message stays within the setting.)
    pub budget_tokens: usize,
    /// Each of the person's messages is quoted up to this many characters.
    pub quote_chars: usize,
    /// Counts the summary against the budget.
    #[serde(skip, default = "crate::default_counter")]
    pub counter: Arc<dyn TokenCounter>,
}

impl std::fmt::Debug for ExtractiveSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtractiveSettings")
            .field("budget_tokens", &self.budget_tokens)
            .field("quote_chars", &self.quote_chars)
            .finish_non_exhaustive()
    }
}

impl ExtractiveSettings {
    /// The built-in settings (`config/condense.toml`).
    pub fn built_in() -> Result<Self, DefaultsError> {
        condense_defaults::section("summarizer")
    }
}

/// The extractive summarizer for one template.
#[derive(Debug, Clone)]
pub struct Extractive {
    template: Template,
    settings: ExtractiveSettings,
    /// Whether the lines every summary holds give way too where the budget cannot hold them
    /// ([`Extractive::strictly_within`]).
    strict: bool,
}

/// What a section is filled with, decided from its heading's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Goal,
    Requests,
    Files,
    Calls,
    Errors,
    Next,
    Blocked,
    Statements,
    Tools,
    Overview,
}

fn kind_of(heading: &str, has_subsections: bool) -> Kind {
    let h = heading.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|word| h.contains(word));
    if has(&["user message", "instruction", "constraint", "preference"]) {
        Kind::Requests
    } else if has(&["goal", "primary request", "intent"]) {
        Kind::Goal
    } else if has(&["file", "director"]) {
        Kind::Files
    } else if has(&["blocked"]) {
        Kind::Blocked
    } else if has(&["next", "pending", "in progress", "current work"]) {
        Kind::Next
    } else if has_subsections {
        Kind::Overview
    } else if has(&["done", "accomplish", "progress"]) {
        Kind::Calls
    } else if has(&["error", "discover", "problem", "critical"]) {
        Kind::Errors
    } else if has(&["technical", "concept"]) {
        Kind::Tools
    } else {
        Kind::Statements
    }
}

/// Where a template's sections put what every summary must hold: the requests in the
/// requests section (else the goal's, else the first), the files in the files section (else the
/// last).
struct Layout<'t> {
    sections: &'t [String],
    source: &'t str,
    kinds: Vec<Kind>,
    requests_home: Kind,
    requests_in_first: bool,
    files_in_last: bool,
}

impl Extractive {
    /// The summarizer for `template`.
    pub fn new(template: Template, settings: ExtractiveSettings) -> Self {
        Extractive {
            template,
            settings,
            strict: false,
        }
    }

    /// The tokens its summaries keep within (but for the requests and files, which only a
    /// strict budget cuts: [`Extractive::strictly_within`]).
    pub fn budget_tokens(&self) -> usize {
        self.settings.budget_tokens
    }

    /// This summarizer keeping within `room` tokens where that is less than its budget (a
    /// request whose system prompt and tools leave little of the window,
    /// [`crate::Fork::summary_tokens`]); itself otherwise.
    pub fn within(&self, room: Option<usize>) -> Cow<'_, Extractive> {
        match room {
            Some(room) if room < self.settings.budget_tokens => {
                let mut within = self.clone();
                within.settings.budget_tokens = room;
                Cow::Owned(within)
            }
            _ => Cow::Borrowed(self),
        }
    }

    /// This summarizer keeping within `room` tokens even where the person's requests and the
    /// files are more than that: for a request that is over the window with the summary as
    /// [`Extractive::within`] wrote it, and so would keep nothing. What the agent is least
    /// likely to miss gives way first: a path listed relative to the working directory and
    /// also whole; the requests' quotes, cut to the start that names each, the earliest first;
    /// the files read, then the files changed, the earliest first; then the requests, the
    /// earliest first, the opening one and the latest last of all. Within a budget alone they
    /// are never cut: the budget is reckoned before the request is measured, and a summary a
    /// little over it most often still fits.
    pub fn strictly_within(&self, room: usize) -> Extractive {
        let mut strict = self.clone();
        strict.settings.budget_tokens = room;
        strict.strict = true;
        strict
    }

    /// The summary of `head`, synchronously (the trait method only wraps this): what must be
    /// in it first, whole, then the rest item by item while the budget lasts, then fitted to
    /// the budget as written.
    pub fn summary_of(&self, head: &[Message]) -> Result<String, SummarizeError> {
        self.summary_carrying(head, &[])
    }

    /// [`Extractive::summary_of`] for a compaction that keeps `carried` (messages of the head)
    /// whole after the summary: a request among them is named by its start, not quoted, since
    /// the request itself follows (every later request would otherwise read it twice).
    pub fn summary_carrying(
        &self,
        head: &[Message],
        carried: &[Message],
    ) -> Result<String, SummarizeError> {
        let mut facts = Facts::of(head);
        facts.mark_carried(carried);
        // (An earlier summary that kept only files, its requests long shed or never made,
        // still has them to hand on.)
        if facts.requests.is_empty()
            && facts.calls.is_empty()
            && facts.last_intent.is_none()
            && facts.earlier.is_none()
            && facts.files_read.is_empty()
            && facts.files_modified.is_empty()
            && facts.plan.is_empty()
        {
            return Err(SummarizeError::NothingToSummarize);
        }
        let layout = self.layout();
        let required_lines = |quote: &[String]| -> Vec<Vec<String>> {
            (0..layout.kinds.len())
                .map(|index| self.required(&layout, index, &facts, quote))
                .collect()
        };
        let optional: Vec<Vec<String>> = layout
            .kinds
            .iter()
            .map(|kind| self.optional_items(&layout, *kind, &facts))
            .collect();
        let mut bodies = required_lines(&[]);
        if facts.earlier.is_some() {
            let quote = self.earlier_summary(&layout, &facts, &bodies, &optional);
            bodies = required_lines(&quote);
        }
        let required: Vec<usize> = bodies.iter().map(Vec::len).collect();
        self.add_optional(&layout, &optional, &mut bodies);
        Ok(self.fitted(&layout, bodies, &required))
    }

    /// Where this template's sections put what every summary must hold.
    fn layout(&self) -> Layout<'_> {
        let sections = self.template.sections();
        let source = self.template.source();
        let kinds: Vec<Kind> = sections
            .iter()
            .map(|heading| kind_of(heading, has_subsections(source, heading)))
            .collect();
        let has = |kind| kinds.contains(&kind);
        // Requests and files must be somewhere, whatever the template calls its sections.
        Layout {
            sections,
            source,
            requests_home: if has(Kind::Requests) {
                Kind::Requests
            } else {
                Kind::Goal
            },
            requests_in_first: !has(Kind::Requests) && !has(Kind::Goal),
            files_in_last: !has(Kind::Files),
            kinds,
        }
    }

    /// The lines section `index` must hold whole, which the budget never cuts: the person's
    /// requests (after `quote`, an agent's earlier summary as [`Extractive::earlier_summary`]
    /// quotes it), the goal line, the files.
    fn required(
        &self,
        layout: &Layout<'_>,
        index: usize,
        facts: &Facts,
        quote: &[String],
    ) -> Vec<String> {
        let kind = layout.kinds[index];
        let first = index == 0;
        let last = index + 1 == layout.kinds.len();
        let mut lines = Vec::new();
        if kind == layout.requests_home || (first && layout.requests_in_first) {
            lines.extend_from_slice(quote);
            lines.extend(self.quoted_requests(facts));
        } else if kind == Kind::Goal {
            match (facts.requests.first(), &facts.earlier) {
                (Some(first), _) => lines.push(format!(
                    "{} (quoted in full below)",
                    cut(&gist(first), GIST_CHARS)
                )),
                // A head that is an agent's earlier summary and the work after it, no request of
                // the person's since: the goal is the one that summary gives, not "none".
                (None, Some(earlier)) => {
                    let home = layout
                        .kinds
                        .iter()
                        .position(|kind| *kind == layout.requests_home)
                        .unwrap_or(0);
                    let place = layout
                        .sections
                        .get(home)
                        .map_or_else(|| "below".to_owned(), |heading| format!("under {heading}"));
                    lines.push(format!(
                        "As the earlier summary by {} gives it (quoted {place})",
                        earlier.by
                    ));
                }
                (None, None) => {}
            }
        }
        if kind == Kind::Files || (last && layout.files_in_last) {
            lines.extend(file_lines(facts));
        }
        lines
    }

    /// The rest, section by section and item by item, while the budget lasts; where it ran
    /// out, a line says so. (`optional[i]`: section `i`'s items, [`Extractive::optional_items`].)
    fn add_optional(
        &self,
        layout: &Layout<'_>,
        optional: &[Vec<String>],
        bodies: &mut [Vec<String>],
    ) {
        let budget = self.settings.budget_tokens;
        let counter = self.settings.counter.as_ref();
        let mut used: usize = bodies
            .iter()
            .zip(layout.sections)
            .map(|(body, heading)| {
                counter.count_text(heading)
                    + body
                        .iter()
                        .map(|line| counter.count_text(line))
                        .sum::<usize>()
            })
            .sum();
        let mut cut_note = None;
        for (index, items) in optional.iter().enumerate() {
            let mut taken = 0;
            for item in items {
                let cost = counter.count_text(item) + 1;
                if cut_note.is_some() || used + cost > budget {
                    break;
                }
                used += cost;
                bodies[index].push(item.clone());
                taken += 1;
            }
            if taken < items.len() {
                let left = items.len() - taken;
                bodies[index].push(format!(
                    "{CUT_NOTE} {left} more item(s) cut here: the summary is kept within {budget} tokens]"
                ));
                cut_note.get_or_insert(index);
            }
        }
    }

    /// The summary as written within the budget, headings and line breaks included: the items'
    /// own counts add up to a little less, so the last optional items taken go back out until
    /// it fits; where the `required` lines at the top of each section are more than the budget
    /// even then, and the budget is strict ([`Extractive::strictly_within`]), they give way
    /// too ([`shed_required`]): the budget is then the room a request has left (a system prompt
    /// and tools that take nearly all of the window), and a summary over it would make the
    /// request fail, which keeps nothing.
    fn fitted(
        &self,
        layout: &Layout<'_>,
        mut bodies: Vec<Vec<String>>,
        required: &[usize],
    ) -> String {
        let mut required = required.to_vec();
        let budget = self.settings.budget_tokens;
        let counter = self.settings.counter.as_ref();
        let mut taken: Vec<(usize, usize)> = bodies
            .iter()
            .enumerate()
            .flat_map(|(index, body)| (required[index]..body.len()).map(move |line| (index, line)))
            .collect();
        let mut out = render(layout.sections, &bodies, layout.source);
        while counter.count_text(&out) > budget {
            let Some((index, line)) = taken.pop() else {
                break;
            };
            if bodies[index][line].starts_with(CUT_NOTE) {
                continue;
            }
            bodies[index].remove(line);
            if !bodies[index].iter().any(|line| line.starts_with(CUT_NOTE)) {
                bodies[index].push(format!(
                    "{CUT_NOTE} more item(s) cut here: the summary is kept within {budget} tokens]"
                ));
            }
            out = render(layout.sections, &bodies, layout.source);
        }
        while self.strict && counter.count_text(&out) > budget {
            let Some(index) = shed_required(&mut bodies, &mut required) else {
                break;
            };
            if !bodies[index].iter().any(|line| line.starts_with(CUT_NOTE)) {
                bodies[index].push(format!(
                    "{CUT_NOTE} more item(s) cut here: the summary is kept within {budget} tokens]"
                ));
            }
            out = render(layout.sections, &bodies, layout.source);
        }
        out
    }

    /// The summary an agent's own compaction left, quoted as a block under a line that names
    /// the agent ([`previous::read`] finds it there when this summary is folded in turn, and
    /// its numbered lines are not taken for the person's requests). It is quoted whole within
    /// what the summary's budget leaves beside the lines every summary holds (`required`, the
    /// sections' bodies without it) and the work after it (`optional`, every section's
    /// [`Extractive::optional_items`]), but never in less than half the budget: it is all that is
    /// left of the session before it, and the work since is what the next request needs most.
    /// Cut, each of its sections keeps its start ([`earlier::fitted`]).
    fn earlier_summary(
        &self,
        layout: &Layout<'_>,
        facts: &Facts,
        required: &[Vec<String>],
        optional: &[Vec<String>],
    ) -> Vec<String> {
        let Some(earlier) = &facts.earlier else {
            return Vec::new();
        };
        let counter = self.settings.counter.as_ref();
        let budget = self.settings.budget_tokens;
        let held = counter.count_text(&render(layout.sections, required, layout.source));
        // What the work after it takes, as `add_optional` counts it.
        let work: usize = optional
            .iter()
            .flatten()
            .map(|item| counter.count_text(item) + 1)
            .sum();
        let room = budget.saturating_sub(held + work).max(budget / 2);
        let fitted = earlier::fitted(&earlier.text, room, counter);
        let how = match &fitted {
            None => layout::IN_FULL.to_owned(),
            Some(_) => format!("quoted in part (within {room} tokens)"),
        };
        let text = fitted.as_deref().unwrap_or(&earlier.text);
        let mut lines = vec![format!("{}{}, {how}:", layout::EARLIER_BY, earlier.by)];
        lines.extend(text.lines().map(|line| {
            if line.is_empty() {
                ">".to_owned()
            } else {
                format!("> {line}")
            }
        }));
        lines
    }

    fn quoted_requests(&self, facts: &Facts) -> Vec<String> {
        facts
            .requests
            .iter()
            .enumerate()
            .map(|(index, text)| {
                let quoted = cut(text, self.settings.quote_chars);
                let named = format!("{}{}", cut(text, GIST_CHARS), layout::KEPT_WHOLE);
                // Named only where that is shorter: a short request is quoted whole anyway.
                let line = if facts.carried.contains(text) && named.len() < quoted.len() {
                    named
                } else {
                    quoted
                };
                layout::numbered_quote(index + 1, &line)
            })
            .collect()
    }

    fn optional_items(&self, layout: &Layout<'_>, kind: Kind, facts: &Facts) -> Vec<String> {
        let mut items = self.kind_items(layout, kind, facts);
        // The plan first in the section of what was done: where the work stands, as the agent
        // itself last put it. (Only there: the replay prices Claude Code's rules with the
        // `detailed` template's summary, whose size must not move with condense's own.)
        if kind == Kind::Calls && !facts.plan.is_empty() {
            let plan = std::iter::once(layout::PLAN.to_owned()).chain(facts.plan.iter().cloned());
            items.splice(0..0, plan);
        }
        items
    }

    /// What the calls of the head did, for a section of what was done: the calls that changed
    /// something or ran something, with how each ended. Left out are the calls that only read,
    /// searched or listed and succeeded (the files they read are listed; what they found is
    /// gone with their outputs, and a line each would say only that they ran), those that only
    /// edited files and succeeded (the files are listed as changed, and a line each would say
    /// only the file's path again), the agent's todo calls (the plan says where they left it)
    /// and, where the template has a section for errors, the calls that failed (each is there
    /// with its error). Last lines count the edits and the look-ups left out.
    fn calls_done(&self, layout: &Layout<'_>, facts: &Facts) -> Vec<String> {
        let errors_listed = layout.kinds.contains(&Kind::Errors);
        let succeeded = |call: &&facts::CallFact| call.outcome == Outcome::Ok;
        let looked = facts
            .calls
            .iter()
            .filter(|call| call.looks && succeeded(call))
            .count();
        let edited = facts
            .calls
            .iter()
            .filter(|call| call.edits && succeeded(call))
            .count();
        let mut lines = merged_repeats(
            facts
                .calls
                .iter()
                .filter(|call| !((call.looks || call.edits) && succeeded(call)))
                .filter(|call| !facts::PLAN_TOOLS.contains(&call.tool.as_str()))
                .filter(|call| !(errors_listed && call.outcome != Outcome::Ok))
                .map(|call| {
                    let outcome = match call.outcome {
                        Outcome::Ok => "ok".to_owned(),
                        Outcome::ExitCode(code) => format!("exit code {code}"),
                        Outcome::Error => "error".to_owned(),
                        Outcome::NoResult => "no result".to_owned(),
                    };
                    format!("- {}: {} → {outcome}", call.tool, call.what)
                }),
        );
        if edited > 0 {
            lines.push(format!(
                "- and {edited} call(s) that only edited files listed as modified"
            ));
        }
        if looked > 0 {
            lines.push(format!(
                "- and {looked} call(s) that only read, searched or listed files"
            ));
        }
        lines
    }

    fn kind_items(&self, layout: &Layout<'_>, kind: Kind, facts: &Facts) -> Vec<String> {
        match kind {
            Kind::Calls => self.calls_done(layout, facts),
            Kind::Errors => failures_alike(&facts.errors),
            Kind::Next => facts
                .last_intent
                .iter()
                .map(|intent| format!("Last stated by the assistant: {}", cut(intent, 1_000)))
                .collect(),
            Kind::Blocked => match facts.calls.last() {
                Some(call) if matches!(call.outcome, Outcome::Error | Outcome::ExitCode(_)) => {
                    vec![format!(
                        "The last tool call failed: {} `{}`",
                        call.tool, call.what
                    )]
                }
                _ => Vec::new(),
            },
            Kind::Tools => {
                let mut counts: Vec<(String, usize)> = Vec::new();
                for call in &facts.calls {
                    match counts.iter_mut().find(|(tool, _)| *tool == call.tool) {
                        Some((_, count)) => *count += 1,
                        None => counts.push((call.tool.clone(), 1)),
                    }
                }
                counts
                    .into_iter()
                    .map(|(tool, count)| format!("- {tool}: {count} call(s)"))
                    .collect()
            }
            Kind::Overview => {
                let failed = facts
                    .calls
                    .iter()
                    .filter(|c| !matches!(c.outcome, Outcome::Ok))
                    .count();
                vec![format!(
                    "{} tool call(s), {failed} without success; details below.",
                    facts.calls.len()
                )]
            }
            Kind::Statements => facts
                .last_intent
                .iter()
                .map(|intent| cut(intent, 600))
                .collect(),
            Kind::Goal | Kind::Requests | Kind::Files => Vec::new(),
        }
    }
}

/// The failed calls, a line each; but the calls of one tool that failed with the same words (a
/// linter's findings run after run, searches that found nothing) are one line, the words once
/// and the calls in the order they failed ([`facts::alike`]): the words, repeated, were most of
/// those lines, and every later request reads the summary again.
fn failures_alike(errors: &[facts::ErrorFact]) -> Vec<String> {
    facts::alike(errors)
        .into_iter()
        .map(|(first, calls)| {
            let calls: Vec<String> = calls.iter().map(|what| format!("`{what}`")).collect();
            format!(
                "- {} {} failed: {}",
                first.tool,
                calls.join(", "),
                first.excerpt
            )
        })
        .collect()
}

/// The first line of a request that says something: not blank, not wrapped in a `<tag>` (an
/// IDE's note of the file open, a reminder before the person's own words). A request of such
/// lines alone (Claude Code's slash command: `<command-name>/compact</command-name>`, then its
/// message and arguments) says it with its first line's tags taken off (or, tags alone, as its
/// first line): one line, as the goal's is, where the whole request used to go in.
fn gist(request: &str) -> String {
    let mut lines = request.lines().map(str::trim);
    if let Some(line) = lines
        .clone()
        .find(|line| !(line.is_empty() || (line.starts_with('<') && line.ends_with('>'))))
    {
        return line.to_owned();
    }
    lines
        .clone()
        .map(without_tags)
        .find(|line| !line.is_empty())
        .or_else(|| lines.find(|line| !line.is_empty()).map(str::to_owned))
        .unwrap_or_default()
}

/// `line` without its tags (`<name>`, `</name>`, `<name/>`), trimmed.
fn without_tags(line: &str) -> String {
    let mut kept = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find('<') {
        kept.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let name = after.strip_prefix('/').unwrap_or(after);
        let length = name
            .bytes()
            .take_while(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b':'))
            .count();
        let close = name[length..]
            .strip_prefix("/>")
            .or_else(|| name[length..].strip_prefix('>'));
        match close {
            Some(tail) if length > 0 => rest = tail,
            _ => {
                kept.push('<');
                rest = after;
            }
        }
    }
    kept.push_str(rest);
    kept.trim().to_owned()
}

fn file_lines(facts: &Facts) -> Vec<String> {
    let mut lines = Vec::new();
    if !facts.files_modified.is_empty() {
        lines.push("Modified:".to_owned());
        lines.extend(facts.files_modified.iter().map(|path| format!("- {path}")));
    }
    if !facts.files_read.is_empty() {
        lines.push("Read:".to_owned());
        lines.extend(facts.files_read.iter().map(|path| format!("- {path}")));
    }
    lines
}

/// Takes one of the lines every summary holds out of `bodies` (or shortens it), for a summary
/// whose budget cannot hold them all, and gives its section: what the agent is least likely to
/// miss goes first. A path listed both relative to the working directory and whole goes in its
/// relative form (the whole one names it). Each of the person's requests is shortened to the
/// start that names it, the earliest first; then the files the agent read go, the earliest
/// first (it can read them again), then the files it changed, the earliest first (they are on
/// disk as changed); then the requests, the earliest first, their opening request (the task)
/// and their latest last of all. `None`: nothing is left to take. (`required[i]`: how many of
/// section `i`'s lines, at its top, are such lines.)
fn shed_required(bodies: &mut [Vec<String>], required: &mut [usize]) -> Option<usize> {
    // A path listed relative to the working directory and also whole: the whole one names it.
    let listed: Vec<&str> = bodies
        .iter()
        .zip(required.iter())
        .flat_map(|(body, &top)| body[..top].iter())
        .filter_map(|line| line.strip_prefix("- "))
        .collect();
    let named_whole = |path: &str| {
        listed
            .iter()
            .any(|other| other.len() > path.len() && other.ends_with(&format!("/{path}")))
    };
    let repeated = bodies.iter().enumerate().find_map(|(index, body)| {
        body[..required[index]]
            .iter()
            .position(|line| line.strip_prefix("- ").is_some_and(named_whole))
            .map(|line| (index, line))
    });
    if let Some((index, line)) = repeated {
        bodies[index].remove(line);
        required[index] -= 1;
        return Some(index);
    }
    let listed = request_lines(bodies, required);
    for &(index, line) in &listed {
        let Some((number, quote)) = numbered(&bodies[index][line]) else {
            continue;
        };
        let text = layout::unfenced(quote);
        if text.chars().count() > GIST_CHARS + layout::CUT_MARK.chars().count() {
            bodies[index][line] = layout::numbered_quote(number, &cut(text, GIST_CHARS));
            return Some(index);
        }
    }
    for list in ["Read:", "Modified:"] {
        for (index, body) in bodies.iter_mut().enumerate() {
            let top = &body[..required[index]];
            let Some(header) = top.iter().position(|line| line == list) else {
                continue;
            };
            let entries = top[header + 1..]
                .iter()
                .take_while(|line| line.starts_with("- "))
                .count();
            // The earliest entry, or the heading once it has none left.
            let at = if entries == 0 { header } else { header + 1 };
            body.remove(at);
            required[index] -= 1;
            return Some(index);
        }
    }
    let listed = request_lines(bodies, required);
    // The earliest first, but for the first and the last, which go last (the last of all).
    let order = match listed.len() {
        0 => None,
        1 | 2 => listed.first(),
        _ => listed.get(1),
    };
    let &(index, line) = order?;
    bodies[index].remove(line);
    required[index] -= 1;
    Some(index)
}

/// Where the quoted requests are among the `required` lines of `bodies`: (section, line).
fn request_lines(bodies: &[Vec<String>], required: &[usize]) -> Vec<(usize, usize)> {
    bodies
        .iter()
        .enumerate()
        .flat_map(|(index, lines)| {
            lines[..required[index]]
                .iter()
                .enumerate()
                .filter(|(_, line)| numbered(line).is_some())
                .map(move |(line, _)| (index, line))
        })
        .collect()
}

/// A quoted request's line, `N. text`, as its number and its text.
fn numbered(line: &str) -> Option<(&str, &str)> {
    let (number, text) = line.split_once(". ")?;
    (!number.is_empty() && number.bytes().all(|byte| byte.is_ascii_digit()))
        .then_some((number, text))
}

/// The summary's text: each section under its heading (at the template's level), "None
/// recorded." for an empty one.
fn render(sections: &[String], bodies: &[Vec<String>], source: &str) -> String {
    let mut out = String::new();
    for (heading, body) in sections.iter().zip(bodies) {
        let level = if source
            .lines()
            .any(|line| line.trim() == format!("### {heading}"))
        {
            "###"
        } else {
            "##"
        };
        out.push_str(&format!("{level} {heading}\n"));
        if body.is_empty() {
            out.push_str("None recorded.\n");
        }
        for line in body {
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
    }
    out.trim_end().to_owned()
}

/// `lines` with the same line written once, where it last came, with how many times it came:
/// an agent editing one file step after step, or running its reproduction script after each
/// edit, leaves the same line again and again (`str_replace_editor: …/match.c → ok` fifteen
/// times in a row on an OpenHands run), which say no more than one line and its count, and every
/// summary token is read again on every later request. The last time is where it stands: an edit
/// made again after the file was checked out comes after the checkout.
fn merged_repeats(lines: impl Iterator<Item = String>) -> Vec<String> {
    let lines: Vec<String> = lines.collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for line in &lines {
        *counts.entry(line.as_str()).or_default() += 1;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut merged = Vec::new();
    for line in &lines {
        let times = seen.entry(line.as_str()).or_default();
        *times += 1;
        match counts.get(line.as_str()) {
            Some(&count) if count == *times && count > 1 => {
                merged.push(format!("{line} (×{count})"));
            }
            Some(&count) if count == *times => merged.push(line.clone()),
            _ => {}
        }
    }
    merged
}

/// Whether `heading` is a `## ` heading followed by `### ` headings before the next `## `.
fn has_subsections(source: &str, heading: &str) -> bool {
    let mut lines = source
        .lines()
        .skip_while(|line| line.trim() != format!("## {heading}"));
    if lines.next().is_none() {
        return false;
    }
    lines
        .take_while(|line| !line.starts_with("## "))
        .any(|line| line.starts_with("### "))
}

#[async_trait]
impl Summarizer for Extractive {
    fn name(&self) -> &str {
        "extractive"
    }

    fn runs_locally(&self) -> bool {
        true
    }

    fn local_summary(&self, head: &[Message], carried: &[Message]) -> Option<String> {
        self.summary_carrying(head, carried).ok()
    }

    async fn summarize(&self, head: &[Message], _prompt: &str) -> Result<String, SummarizeError> {
        self.summary_of(head)
    }

    async fn summarize_forked(
        &self,
        fork: crate::Fork<'_>,
        _prompt: &str,
    ) -> Result<String, SummarizeError> {
        self.within(fork.summary_tokens)
            .summary_carrying(fork.head(), fork.carried)
    }
}

#[cfg(test)]
mod tests {
    use super::{failures_alike, gist, merged_repeats};
    use crate::extractive::facts::ErrorFact;

    #[test]
    fn a_request_s_gist_is_one_line_that_says_something() {
        let ide =
            "<ide_opened_file>The user opened src/a.rs.</ide_opened_file>\nFix the bug\nin a.rs";
        assert_eq!(gist(ide), "Fix the bug");
        let command = "<command-name>/compact</command-name>\n            <command-message>compact</command-message>\n            <command-args>and go on</command-args>";
        assert_eq!(gist(command), "/compact");
        assert_eq!(gist("<a>\n<b/>\n  <c>x < y</c>"), "x < y");
        assert_eq!(
            gist("\n<task-notification>\n</task-notification>"),
            "<task-notification>"
        );
    }

    /// Five runs of a linter that found the same two things, between two searches that found
    /// nothing and a script that failed its own way: three lines, each where the last of its
    /// calls failed.
    #[test]
    fn calls_that_failed_with_the_same_words_are_one_line() {
        let error = |tool: &str, what: &str, excerpt: &str| ErrorFact {
            tool: tool.to_owned(),
            what: what.to_owned(),
            call: what.to_owned(),
            excerpt: excerpt.to_owned(),
        };
        let lint = "a.py:1:0: C0114 / a.py:4:0: C0116";
        let errors = [
            error("bash", "grep -n x a.py", "no output"),
            error("bash", "pylint .", lint),
            error("bash", "pylint --ignore=b .", lint),
            error("bash", "python3 debug.py", "error: no such option"),
            error("bash", "grep -n y a.py", "no output"),
            error("bash", "pylint --ignore-paths=b .", lint),
            error("Grep", "y", "no output"),
        ];
        assert_eq!(
            failures_alike(&errors),
            [
                "- bash `python3 debug.py` failed: error: no such option",
                "- bash `grep -n x a.py`, `grep -n y a.py` failed: no output",
                "- bash `pylint .`, `pylint --ignore=b .`, `pylint --ignore-paths=b .` failed: \
                 a.py:1:0: C0114 / a.py:4:0: C0116",
                "- Grep `y` failed: no output",
            ]
        );
        assert!(failures_alike(&[]).is_empty());
    }

    #[test]
    fn the_same_line_is_written_once_where_it_last_came_with_its_count() {
        let lines = ["a", "b", "b", "b", "a", "c", "c"].map(str::to_owned);
        assert_eq!(
            merged_repeats(lines.into_iter()),
            ["b (×3)", "a (×2)", "c (×2)"]
        );
        assert!(merged_repeats(std::iter::empty()).is_empty());
    }
}
