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

use std::collections::BTreeSet;
use std::sync::Arc;

use condense_core::{Message, Role};
use condense_tokenizer::TokenCounter;

use super::{Live, Model, Policy, Prepared, SummarizerCall, SummarizerInput, outputs, summary_of};
use crate::ReplayError;

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
                input,
                summarizer: None,
                pruned_outputs,
            });
        }
        let Some(summary) = summary_of(&input, "detailed", self.counter.clone())? else {
            return Ok(Prepared {
                input,
                summarizer: None,
                pruned_outputs,
            });
        };
        let summary_message = Message::text(Role::User, format!("{SUMMARY_INTRO}{summary}"));
        let output_tokens = self.counter.count_message(&summary_message);
        let mut forked = input.into_owned();
        forked.push(Message::text(Role::User, COMPACT_PROMPT));
        self.live.summarized(history, vec![summary_message]);
        Ok(Prepared {
            input: self.live.input(history),
            summarizer: Some(SummarizerCall {
                input: SummarizerInput::Forked(forked),
                output_tokens,
            }),
            pruned_outputs,
        })
    }
}

/// The request the fork appends: condense's `detailed` template, written after Claude Code's
/// nine-section compact prompt and about as long (the replay prices its length, not its words).
const COMPACT_PROMPT: &str = include_str!("../../../condense-template/templates/detailed.md");
