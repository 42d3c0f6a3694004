//! `claude-code`: Claude Code's automatic compaction and its time-based microcompact
//! (`../shared/seeds/003`, "Claude Code's layers").
//!
//! Before each request, in this order:
//! 1. Microcompact: when more than [`IDLE_MINUTES`] passed since the last assistant message, the
//!    server's cache is cold; the results of compactable tools become [`CLEARED`], all but the
//!    newest [`KEEP_RECENT`]. Cleared results stay cleared.
//! 2. Autocompact: when the request would be at least `window − min(max_output, 20,000) −
//!    13,000` tokens, the whole conversation is summarized (a call that forks the agent's own
//!    request, so it reads the agent's cached prefix) and the request carries the summary alone.
//!    A fork larger than the window is refused by the provider (billed nothing); Claude Code
//!    then drops the oldest rounds of the conversation, enough to cover what the refusal says it
//!    was over, and asks again, at most [`MAX_PTL_RETRIES`] times (`truncateHeadForPTLRetry`
//!    in its `compact.ts`): the summary is of what was left, and the request that succeeded
//!    reads only the system prompt from the cache. When no retry fits, the compaction fails and
//!    the request goes as it is. The summary is a stand-in written with the detailed template,
//!    as long as Claude Code's own summaries in the log run against it ([`crate::SummaryLength`]).
//! 3. After the summary, the files the agent used most recently are attached again, as Claude
//!    Code's `createPostCompactFileAttachments` does (`compact.ts`): the [`FILES_TO_RESTORE`]
//!    files last read or written, each cut to [`TOKENS_PER_FILE`], within [`RESTORE_BUDGET`]
//!    ([`restored_files`]). Claude Code reads them from disk again; the replay has no disk, and
//!    shows each file as the session last showed it (its last read, or the content a `Write`
//!    gave it). The logs Claude Code 1.0 compacted itself show such a block in their usage: their
//!    requests after each summary count 14,000 to 83,000 tokens more, on average, than the
//!    system prompt and the summary, more than this rule attaches at the same points.

use std::collections::BTreeSet;
use std::sync::Arc;

use condense_core::{Message, Part, Role};
use condense_tokenizer::TokenCounter;

use super::{Live, Model, Policy, Prepared, SummarizerCall, SummarizerInput, outputs};
use crate::ReplayError;
use crate::prompt::Prompt;
use crate::stand_in::stand_in;

/// `MAX_OUTPUT_TOKENS_FOR_SUMMARY`: the reply reserve is `min(max_output, this)` (p99.99 of a
/// compact summary's length, 17,387 tokens, rounded up).
pub const SUMMARY_RESERVE_CAP: usize = 20_000;
/// `AUTOCOMPACT_BUFFER_TOKENS`: the threshold sits this far under the effective window.
pub const AUTOCOMPACT_BUFFER: usize = 13_000;
/// The time-based microcompact's idle threshold in minutes: 60, the default of its
/// configuration (the rule is in the seed; the numbers are the client's defaults).
pub const IDLE_MINUTES: u64 = 60;
/// Compactable results that microcompact keeps, newest first (`keepRecent`, floored at 1).
pub const KEEP_RECENT: usize = 5;
/// `TIME_BASED_MC_CLEARED_MESSAGE`.
pub const CLEARED: &str = "[Old tool result content cleared]";
/// How many times a compaction refused as too long is asked again with its oldest rounds
/// dropped (`MAX_PTL_RETRIES`).
pub const MAX_PTL_RETRIES: usize = 3;
/// The user line a retried compaction starts with when what is left begins with the assistant
/// (the API takes no conversation that does): it stands for the rounds dropped.
const RETRY_MARKER: &str = "[earlier conversation truncated for compaction retry]";
/// `POST_COMPACT_MAX_FILES_TO_RESTORE`: how many of the files last used are attached again after
/// a summary.
pub const FILES_TO_RESTORE: usize = 5;
/// `POST_COMPACT_MAX_TOKENS_PER_FILE`: a file attached again is cut to this many tokens.
pub const TOKENS_PER_FILE: usize = 5_000;
/// `POST_COMPACT_TOKEN_BUDGET`: the most the files attached again take together.
pub const RESTORE_BUDGET: usize = 50_000;
/// What the conversation after a compaction starts with (Claude Code's summary message).
pub const SUMMARY_INTRO: &str = "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n";

/// Claude Code's rules.
pub struct ClaudeCode {
    live: Live,
    compactable: BTreeSet<&'static str>,
    counter: Arc<dyn TokenCounter>,
}

impl std::fmt::Debug for ClaudeCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaudeCode").finish_non_exhaustive()
    }
}

/// The tools whose results Claude Code's time-based microcompact clears (Read, the shells,
/// Grep, Glob, WebSearch, WebFetch, Edit, Write), and the same kinds of tool in opencode, Codex,
/// SWE-agent and OpenHands (mini-swe-agent's one tool is `bash`), so that the rule means the
/// same on their sessions.
const COMPACTABLE: &[&str] = &[
    "Read",
    "Bash",
    "PowerShell",
    "Grep",
    "Glob",
    "WebSearch",
    "WebFetch",
    "Edit",
    "MultiEdit",
    "Write",
    "read",
    "bash",
    "grep",
    "glob",
    "websearch",
    "webfetch",
    "edit",
    "write",
    "shell",
    "local_shell",
    "exec_command",
    "read_file",
    "grep_files",
    "apply_patch",
    "execute_bash",
    "str_replace_editor",
];

impl ClaudeCode {
    /// The policy, counting summaries with `counter`. The compactable tools are Claude Code's
    /// (Read, the shells, Grep, Glob, WebSearch, WebFetch, Edit, Write) and the same kinds of tool
    /// of the other harnesses, so that the rule means the same on their sessions.
    pub fn new(counter: Arc<dyn TokenCounter>) -> Self {
        ClaudeCode {
            live: Live::new(),
            compactable: COMPACTABLE.iter().copied().collect(),
            counter,
        }
    }

    /// The autocompact threshold for `model`.
    pub fn threshold(model: &Model<'_>) -> usize {
        model
            .context_window
            .saturating_sub(model.max_output_tokens.min(SUMMARY_RESERVE_CAP))
            .saturating_sub(AUTOCOMPACT_BUFFER)
    }

    fn microcompact(&mut self, history: &[Message], now_ms: Option<u64>) -> usize {
        let last_answer = history
            .iter()
            .rev()
            .find(|message| message.role == Role::Assistant)
            .and_then(Message::timestamp_ms);
        let (Some(now), Some(last)) = (now_ms, last_answer) else {
            return 0;
        };
        if now.saturating_sub(last) <= IDLE_MINUTES * 60_000 {
            return 0;
        }
        let input = self.live.input(history);
        let compactable: Vec<String> = outputs(&input)
            .into_iter()
            .filter(|output| self.compactable.contains(output.tool.as_str()))
            .map(|output| output.call_id)
            .collect();
        let clear = compactable.len().saturating_sub(KEEP_RECENT.max(1));
        let mut cleared = 0;
        for id in &compactable[..clear] {
            if self
                .live
                .cleared
                .insert(id.clone(), CLEARED.to_owned())
                .is_none()
            {
                cleared += 1;
            }
        }
        cleared
    }
}

impl Policy for ClaudeCode {
    fn name(&self) -> &str {
        "claude-code"
    }

    fn prepare<'h>(
        &mut self,
        history: &'h [Message],
        now_ms: Option<u64>,
        model: &Model<'_>,
    ) -> Result<Prepared<'h>, ReplayError> {
        let pruned_outputs = self.microcompact(history, now_ms);
        let input = self.live.input(history);
        if model.tokens(&input) < ClaudeCode::threshold(model) {
            return Ok(Prepared {
                reply_limit: None,
                input,
                summarizer: None,
                pruned_outputs,
            });
        }
        let Some((summarized, forked)) = fork_that_fits(input.to_vec(), model) else {
            return Ok(Prepared {
                reply_limit: None,
                input,
                summarizer: None,
                pruned_outputs,
            });
        };
        let Some(summary) = stand_in(&summarized, "detailed", &self.counter, model.summary_length)?
        else {
            return Ok(Prepared {
                reply_limit: None,
                input,
                summarizer: None,
                pruned_outputs,
            });
        };
        let summary_message = Message::text(Role::User, format!("{SUMMARY_INTRO}{summary}"));
        let output_tokens = self.counter.count_message(&summary_message);
        let mut after = vec![summary_message];
        after.extend(restored_files(history, self.counter.as_ref()));
        self.live.summarized(history, after);
        Ok(Prepared {
            reply_limit: None,
            input: self.live.input(history),
            summarizer: Some(SummarizerCall {
                input: SummarizerInput::Forked(forked),
                output_tokens,
            }),
            pruned_outputs,
        })
    }
}

/// The files Claude Code attaches again after its summary of `history` (the session as the log
/// has it, which is what its record of the files read holds: a file it attached again at an
/// earlier summary counts as used there, after every file it left out): the
/// [`FILES_TO_RESTORE`] paths last read or written by a call, newest first (its memory and plan
/// files apart, which go back another way), each shown as the
/// session last showed it (the output of a call that read that one file, or a `Write`'s
/// `content`), cut to [`TOKENS_PER_FILE`], as far as [`RESTORE_BUDGET`] holds them. A file whose
/// content the session never showed (one only edited) keeps its place among the five but is
/// left out: Claude Code would read it from disk, and the replay cannot tell its size, so the
/// replay's Claude Code sends less, never more. One message the harness wrote, never a
/// person's turn; `None` when no file qualifies.
pub fn restored_files(history: &[Message], counter: &dyn TokenCounter) -> Option<Message> {
    use condense_core::tool_paths::{only_writes, shows_content, touched};
    // Each path's last use (its place in the order of calls) and the content last shown of it.
    let mut files: Vec<(String, Option<String>)> = Vec::new();
    let mut calls: std::collections::HashMap<&str, (&str, &serde_json::Value)> =
        std::collections::HashMap::new();
    let used = |files: &mut Vec<(String, Option<String>)>, path: &str, content: Option<String>| {
        let known = files
            .iter()
            .position(|(seen, _)| seen == path)
            .map(|at| files.remove(at).1);
        files.push((path.to_owned(), content.or(known.flatten())));
    };
    for message in history {
        for part in &message.parts {
            match part {
                Part::ToolCall(call) => {
                    calls.insert(call.id.as_str(), (call.name.as_str(), &call.input));
                }
                // A call that failed (a read of a missing file, an edit that changed nothing)
                // records no file.
                Part::ToolResult(result) if result.is_error != Some(true) => {
                    let Some(&(tool, input)) = calls.get(result.call_id.as_str()) else {
                        continue;
                    };
                    let content = if only_writes(tool, input) {
                        (tool == "Write")
                            .then(|| input.get("content").and_then(serde_json::Value::as_str))
                            .flatten()
                            .map(str::to_owned)
                    } else if shows_content(tool, input) {
                        // A call that showed several files at once shows no one file's content.
                        let paths = touched(tool, input).0;
                        (paths.len() == 1).then(|| result.content.text().into_owned())
                    } else {
                        continue;
                    };
                    for path in touched(tool, input).0 {
                        used(&mut files, path, content.clone());
                    }
                }
                _ => {}
            }
        }
    }
    let mut budget = RESTORE_BUDGET;
    let mut parts = Vec::new();
    let restorable = files
        .iter()
        .rev()
        .filter(|(path, _)| !has_its_own_channel(path));
    for (path, content) in restorable.take(FILES_TO_RESTORE) {
        let Some(content) = content else { continue };
        let content = within_tokens(content, TOKENS_PER_FILE, counter);
        let text = format!(
            "Called the Read tool with the following input: {{\"file_path\":{}}}\n\nResult of calling the Read tool: {content}",
            serde_json::Value::String(path.clone())
        );
        let tokens = counter.count_text(&text);
        if tokens > budget {
            continue;
        }
        budget -= tokens;
        parts.push(Part::text(text));
    }
    (!parts.is_empty()).then(|| {
        let mut message = Message::new(Role::User, parts);
        message.generated = true;
        message
    })
}

/// Files Claude Code never attaches again after a summary (`shouldExcludeFromPostCompactRestore`):
/// its memory files (`CLAUDE.md`, `CLAUDE.local.md`), which go back into the system prompt, and
/// its plan files, which have an attachment of their own.
fn has_its_own_channel(path: &str) -> bool {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    matches!(name, "CLAUDE.md" | "CLAUDE.local.md") || path.contains(".claude/plans/")
}

/// `text` cut at a character boundary to at most `limit` tokens by `counter`.
fn within_tokens<'t>(text: &'t str, limit: usize, counter: &dyn TokenCounter) -> &'t str {
    let mut kept = text;
    loop {
        let tokens = counter.count_text(kept);
        if tokens <= limit {
            return kept;
        }
        // Shorten in proportion, a little more than the excess, and count again.
        let chars = kept.chars().count() * limit / tokens * 19 / 20;
        kept = kept
            .char_indices()
            .nth(chars)
            .map_or(kept, |(at, _)| &kept[..at]);
    }
}

/// The compaction request Claude Code gets the provider to take for `input` (the agent's
/// messages): the fork itself, or, where the provider refuses it as over the window, the fork
/// of what is left once the oldest rounds are dropped (at most [`MAX_PTL_RETRIES`] times).
/// Returns the messages summarized (the marker left out) and the request sent; `None` when no
/// retry fits.
fn fork_that_fits(
    mut input: Vec<Message>,
    model: &Model<'_>,
) -> Option<(Vec<Message>, Vec<Message>)> {
    for retry in 0..=MAX_PTL_RETRIES {
        let mut forked = input.clone();
        forked.push(Message::text(Role::User, COMPACT_PROMPT));
        let tokens = Prompt::of(&forked, model.counter, model.calibration, 0).tokens();
        let Some(over) = tokens
            .checked_sub(model.context_window as u64)
            .filter(|over| *over > 0)
        else {
            let summarized = input
                .into_iter()
                .filter(|message| !is_marker(message))
                .collect();
            return Some((summarized, forked));
        };
        if retry == MAX_PTL_RETRIES {
            return None;
        }
        input = without_oldest_rounds(input, over, model)?;
    }
    None
}

/// `input` without its oldest rounds (a response of the assistant's, in one message or a run
/// of them, and what answers it; the messages before the first response are a round too), as
/// many as make up `over` tokens, the leading system messages kept and at least one round left,
/// every result kept with its call; `None` with fewer than two rounds. A conversation left
/// starting with the assistant gets [`RETRY_MARKER`] in front.
fn without_oldest_rounds(
    input: Vec<Message>,
    over: u64,
    model: &Model<'_>,
) -> Option<Vec<Message>> {
    let (mut kept, rest): (Vec<Message>, Vec<Message>) = {
        let system = input
            .iter()
            .take_while(|message| message.role == Role::System)
            .count();
        let mut input = input;
        let rest = input.split_off(system);
        // The marker of an earlier retry goes: the rounds are counted afresh.
        (input, rest.into_iter().filter(|m| !is_marker(m)).collect())
    };
    let starts: Vec<usize> = (0..rest.len())
        .filter(|&at| {
            at == 0 || rest[at].role == Role::Assistant && rest[at - 1].role != Role::Assistant
        })
        .collect();
    if starts.len() < 2 {
        return None;
    }
    let tokens = |message: &Message| {
        model
            .calibration
            .scaled(model.counter.count_message(message))
    };
    let mut round = 0;
    let mut covered = 0u64;
    while round < starts.len() - 1 && covered < over {
        covered += rest[starts[round]..starts[round + 1]]
            .iter()
            .map(tokens)
            .sum::<u64>();
        round += 1;
    }
    let cut = super::pair_safe_start(&rest, starts[round]);
    if cut == 0 {
        return None;
    }
    if rest[cut].role == Role::Assistant {
        kept.push(Message::text(Role::User, RETRY_MARKER));
    }
    kept.extend(rest.into_iter().skip(cut));
    Some(kept)
}

fn is_marker(message: &Message) -> bool {
    message.role == Role::User
        && matches!(message.parts.as_slice(), [condense_core::Part::Text(said)] if said.text == RETRY_MARKER)
}

/// The request the fork appends: condense's `detailed` template, written after Claude Code's
/// nine-section compact prompt and about as long (the replay prices its length, not its words).
const COMPACT_PROMPT: &str = include_str!("../../../condense-template/templates/detailed.md");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Calibration;
    use condense_core::testing::tool_step as used;
    use condense_tokenizer::Tiktoken;

    fn model(counter: &dyn TokenCounter, context_window: usize) -> Model<'_> {
        Model {
            counter,
            context_window,
            max_output_tokens: 1_000,
            calibration: &crate::IDENTITY,
            prices: condense_host::CachePrices::default(),
            cache_lifetime_minutes: 5,
            answering: None,
            summary_length: None,
        }
    }

    /// A system prompt, the task, then `rounds` of the agent reading a file, each output
    /// `output_chars` long.
    fn session(rounds: usize, output_chars: usize) -> Vec<Message> {
        let mut messages = vec![
            Message::text(Role::System, "You are a coding agent."),
            Message::text(Role::User, "fix the parser in src/old_task.rs"),
        ];
        for round in 0..rounds {
            messages.push(Message::text(
                Role::Assistant,
                format!("reading file {round}"),
            ));
            messages.push(Message::text(
                Role::User,
                format!(
                    "contents of round{round}.rs\n{}",
                    "x = 1\n".repeat(output_chars / 6)
                ),
            ));
        }
        messages
    }

    /// What Claude Code's rules send for `history` in a `window`: the compaction request they
    /// fork, if any, and the agent's request.
    fn compaction(history: &[Message], window: usize) -> (Option<Vec<Message>>, Vec<Message>) {
        let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::default());
        let mut policy = ClaudeCode::new(counter.clone());
        let asked = model(counter.as_ref(), window);
        let prepared = policy.prepare(history, None, &asked).unwrap();
        let forked = prepared.summarizer.map(|call| match call.input {
            SummarizerInput::Forked(forked) => forked,
            other => panic!("Claude Code forks its summary request, not {other:?}"),
        });
        (forked, prepared.input.into_owned())
    }

    /// Tokens of `messages` as the replay bills them.
    fn tokens(messages: &[Message]) -> usize {
        Prompt::of(messages, &Tiktoken::default(), &Calibration::default(), 0).tokens() as usize
    }

    /// Tokens the compact prompt adds to a fork.
    fn prompt_tokens() -> usize {
        tokens(&[Message::text(Role::User, COMPACT_PROMPT)])
    }

    /// A compaction request over the window is refused; the one Claude Code asks again drops
    /// the oldest rounds, fits, and the summary is of what is left.
    #[test]
    fn a_compaction_request_over_the_window_is_asked_again_without_its_oldest_rounds() {
        let history = session(6, 4_000);
        // The request fits, its fork (with the compact prompt) does not; the threshold is
        // 14,000 under the window.
        let window = tokens(&history) + prompt_tokens() / 2;
        let (forked, sent) = compaction(&history, window);
        let forked = forked.expect("the compaction succeeds on a retry");
        assert!(tokens(&forked) <= window, "the request sent fits");
        assert_eq!(forked[0], history[0], "the system prompt stays");
        assert_eq!(forked[1], Message::text(Role::User, RETRY_MARKER));
        let text: String = forked.iter().map(Message::plain_text).collect();
        assert!(!text.contains("old_task") && !text.contains("round0.rs"));
        assert!(text.contains("round5.rs"));
        // The summary the request then carries is of what was left.
        let summary = sent[1].plain_text();
        assert!(summary.starts_with(SUMMARY_INTRO), "{summary}");
        assert!(!summary.contains("round0.rs") && summary.contains("round5.rs"));
    }

    /// A compaction request that fits is sent whole, the first round and all.
    #[test]
    fn a_compaction_request_that_fits_is_sent_whole() {
        let history = session(6, 4_000);
        let (forked, sent) = compaction(&history, tokens(&history) + 20_000);
        assert!(forked.is_none(), "not due at this window");
        assert_eq!(sent, history);
        let (forked, _) = compaction(&history, tokens(&history) + prompt_tokens() + 100);
        let forked = forked.expect("due at this one");
        assert_eq!(&forked[..history.len()], history.as_slice());
    }

    /// After its summary, Claude Code attaches again the five files used last, newest first,
    /// each as the session last showed it: a file read again counts at its last read, a
    /// `Write` gives the content it wrote, an edit that failed and a search count for nothing,
    /// and a memory file takes no place among them.
    #[test]
    fn the_files_used_last_are_attached_again_after_the_summary() {
        let mut history = vec![
            Message::text(Role::System, "You are a coding agent."),
            Message::text(Role::User, "fix the parser"),
        ];
        let read = |n: usize| {
            used(
                &format!("r{n}"),
                "Read",
                serde_json::json!({"file_path": format!("/src/f{n}.rs")}),
                format!("contents of f{n}\n{}", "let x = 1;\n".repeat(300)),
            )
        };
        for n in 0..6 {
            history.extend(read(n));
        }
        history.extend(read(1));
        history.extend(used(
            "w",
            "Write",
            serde_json::json!({"file_path": "/src/new.rs", "content": "fn new() {}"}),
            "File created",
        ));
        // An edit that failed changed nothing, and records nothing.
        let mut failed = used(
            "e",
            "Edit",
            serde_json::json!({"file_path": "/src/f0.rs", "old_string": "y", "new_string": "z"}),
            "String to replace not found",
        );
        if let Part::ToolResult(result) = &mut failed[1].parts[0] {
            result.is_error = Some(true);
        }
        history.extend(failed);
        history.extend(used(
            "m",
            "Read",
            serde_json::json!({"file_path": "/repo/CLAUDE.md"}),
            "# Project memory",
        ));
        history.extend(used(
            "g",
            "Grep",
            serde_json::json!({"pattern": "parse", "path": "/src"}),
            "/src/f0.rs: parse",
        ));
        let counter = Tiktoken::default();
        let restored = restored_files(&history, &counter).expect("files to attach");
        assert!(restored.generated && !restored.is_user_turn());
        let shown: Vec<String> = restored
            .parts
            .iter()
            .map(|part| match part {
                Part::Text(text) => text.text.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        let named = |path: &str| {
            shown
                .iter()
                .position(|text| text.contains(&format!("\"{path}\"")))
        };
        assert_eq!(shown.len(), FILES_TO_RESTORE, "{shown:#?}");
        // Newest first: the file written, the file read again, then the last reads before it.
        assert_eq!(named("/src/new.rs"), Some(0));
        assert!(shown[0].ends_with("fn new() {}"));
        assert_eq!(named("/src/f1.rs"), Some(1));
        assert_eq!(named("/src/f5.rs"), Some(2));
        assert_eq!(named("/src/f3.rs"), Some(4));
        assert_eq!(
            named("/src/f2.rs"),
            None,
            "the sixth file used last is left out"
        );
        assert_eq!(named("/src/f0.rs"), None);
        assert_eq!(
            named("/repo/CLAUDE.md"),
            None,
            "memory goes back another way"
        );
        assert!(shown[2].contains("contents of f5"));

        // The request after the summary carries them, after the summary.
        let window = tokens(&history) + prompt_tokens() + 100;
        let (forked, sent) = compaction(&history, window);
        assert!(forked.is_some(), "due at this window");
        assert!(sent[1].plain_text().starts_with(SUMMARY_INTRO));
        assert_eq!(sent[2], restored);
    }

    /// A file longer than [`TOKENS_PER_FILE`] is attached again cut to that many tokens.
    #[test]
    fn a_long_file_is_attached_again_cut_to_its_share() {
        let long = "let value = compute(1, 2, 3);\n".repeat(3_000);
        let history = used(
            "r",
            "Read",
            serde_json::json!({"file_path": "/src/long.rs"}),
            &long,
        );
        let counter = Tiktoken::default();
        assert!(counter.count_text(&long) > 3 * TOKENS_PER_FILE);
        let restored = restored_files(&history, &counter).expect("the file to attach");
        let shown = restored.plain_text();
        let tokens = counter.count_text(&shown);
        assert!(
            (TOKENS_PER_FILE * 9 / 10..=TOKENS_PER_FILE + 50).contains(&tokens),
            "{tokens} tokens"
        );
        assert!(shown.contains("let value = compute(1, 2, 3);"));
    }

    /// When no retry fits (one round larger than the window), nothing is summarized and the
    /// request goes as it is.
    #[test]
    fn a_compaction_no_retry_can_fit_fails_and_the_request_goes_as_it_is() {
        let history = session(1, 80_000);
        let (forked, sent) = compaction(&history, 16_000);
        assert!(forked.is_none());
        assert_eq!(sent, history);
    }
}
