//! A summary asked inside the conversation it summarizes: the agent's own request (its system
//! prompt, tools and messages, as last sent) with the summary prompt after it.
//!
//! A separate summary prompt shares nothing with the provider's prompt cache: every token of
//! the head is paid in full (and on Anthropic written to the cache at 1.25×) for one answer.
//! The agent's own request, on the other hand, was just cached up to its last message, so the
//! same request with one more message reads almost all of it at a tenth of the price. Claude
//! Code's compaction does the same ("the cache-sharing fork path inherits the parent's full
//! tool set, required for cache-key match"); it also found that models sometimes call a tool
//! anyway (2.79 % on one model), which leaves no text, and then falls back to a separate
//! request. A summarizer that can send such a request overrides
//! [`Summarizer::summarize_forked`](crate::Summarizer::summarize_forked) and falls back the
//! same way.

use std::ops::Range;

use condense_core::{Conversation, Message, Role};
use condense_tokenizer::TokenCounter;

use crate::flatten::flatten;

/// The note put before the summary prompt in a forked request: no tools, and where the kept
/// tail begins (the summary prompt itself speaks of "everything above").
const NOTE: &str = include_str!("../prompts/fork-note.md");

/// What a summarizer may send instead of the head alone: the whole conversation the head
/// belongs to, as the agent's next request would carry it before the summary.
#[derive(Debug, Clone)]
pub struct Fork<'c> {
    /// The conversation, pruned, with its envelope (model, tools, system prompt).
    pub conversation: &'c Conversation,
    /// Which of its messages the summary replaces; those after it stay.
    pub head: Range<usize>,
    /// The head's messages (or parts of them) that the compaction keeps whole after the
    /// summary: the person's latest requests when the tail could not hold them, protected
    /// tools' calls. A summary need not repeat them.
    pub carried: &'c [Message],
    /// The conversation's size as the provider counts it (its reported usage when known, else
    /// condense's count): what a forked request costs in window before the prompt is added.
    pub tokens: usize,
    /// The agent's model's context window: a forked request goes to that model.
    pub window: usize,
    /// condense's count of the conversation.
    pub counted: usize,
    /// condense's count of its leading messages that the provider most likely holds in its
    /// cache: those the previous request sent (all of them when the provider has not reported
    /// one), up to the first one this request changed (an output replaced for the first time).
    pub cached: usize,
    /// The most the summary may take where the request's room is smaller than the configured
    /// budget (a system prompt and tools that leave little of the window): condense's own
    /// summarizer keeps within it, so that the compacted request fits. `None`: the budget.
    pub summary_tokens: Option<usize>,
}

/// The price of a cache read and of a cache write, relative to an uncached input token, that
/// a fork is weighed with: Anthropic's (0.1 and 1.25 for the 5-minute cache). OpenAI charges
/// no write premium, so a fork worth it on these prices is worth it there too.
const READ: f64 = 0.1;
const WRITE: f64 = 1.25;

/// What a turn of the separate prompt adds to its text's count (role and separators).
const TURN_TOKENS: usize = 4;

impl<'c> Fork<'c> {
    /// The messages the summary replaces.
    pub fn head(&self) -> &'c [Message] {
        self.conversation
            .messages
            .get(self.head.clone())
            .unwrap_or_default()
    }

    /// What the separate prompt for this head counts: the head flattened into text turns, each
    /// tool output cut to `tool_output_chars`, then `prompt`, as [`crate::OpenAi`] and
    /// [`crate::Anthropic`] send it when it fits one request.
    pub fn separate_tokens(
        &self,
        prompt: &str,
        counter: &dyn TokenCounter,
        tool_output_chars: usize,
    ) -> usize {
        flatten(self.head(), tool_output_chars)
            .iter()
            .map(|turn| counter.count_text(&turn.text) + TURN_TOKENS)
            .sum::<usize>()
            + counter.count_text(prompt)
    }

    /// The forked request: the conversation with one more user message, the note on tools and
    /// on the kept tail, then `prompt`; and the reply limit to ask for, `reply_tokens` or what
    /// the window has left for it. `None` when a separate prompt (the head flattened, each tool
    /// output cut to `tool_output_chars`) is the better request:
    /// - the window leaves less than half of `reply_tokens` (a conversation at or over the
    ///   window: only a separate, chunked request can succeed). A summary is due when the
    ///   conversation reaches the window less the room reserved for a reply, so the room left
    ///   is that reservation less what the last step overshot it by: a reservation smaller than
    ///   the summary's length still gets a shorter summary forked;
    /// - or it would cost more: what the fork does not find cached is written to the cache at a
    ///   premium, and when that part (new messages, outputs just replaced) is large and the head
    ///   small, the head alone, uncached, is cheaper.
    pub fn request(
        &self,
        prompt: &str,
        counter: &dyn TokenCounter,
        reply_tokens: usize,
        tool_output_chars: usize,
    ) -> Option<(Conversation, usize)> {
        let kept = self
            .conversation
            .messages
            .len()
            .saturating_sub(self.head.end);
        let text = format!("{}{prompt}", NOTE.replace("{tail}", &kept.to_string()));
        let instruction = Message::text(Role::User, text);
        let input = self.tokens + counter.count_message(&instruction);
        let room = self.window.saturating_sub(input).min(reply_tokens);
        if room < reply_tokens.div_ceil(2) {
            return None;
        }
        // The fork reads what the request carries beyond the messages as well (tool
        // definitions, a system prompt sent apart): at the front, cached with the prefix.
        let beyond = self.tokens.saturating_sub(self.counted);
        let forked = self.counted + beyond + counter.count_message(&instruction);
        let cached = (self.cached + beyond).min(forked);
        let fork_price = READ * cached as f64 + WRITE * (forked - cached) as f64;
        let separate = self.separate_tokens(prompt, counter, tool_output_chars);
        if fork_price >= separate as f64 {
            return None;
        }
        let mut request = self.conversation.clone();
        request.messages.push(instruction);
        Some((request, room))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use condense_core::testing::tool_step;
    use condense_tokenizer::Tiktoken;

    use super::*;

    /// A task, a large listing in the head (cut to 2,000 characters in a separate prompt), and
    /// a small last step.
    fn conversation() -> Conversation {
        let listing: String = (0..400).map(|n| format!("src/module_{n}.rs\n")).collect();
        let mut messages = vec![
            Message::text(Role::System, "You are an agent."),
            Message::text(Role::User, "Fix the bug."),
        ];
        let ls = serde_json::json!({"command": "ls -R"});
        messages.extend(tool_step("c1", "bash", ls, listing));
        let cat = serde_json::json!({"command": "cat a.rs"});
        messages.extend(tool_step("c2", "bash", cat, "fn main() {}"));
        Conversation::new(messages)
    }

    /// A fork of `conversation`, all of it cached, with `window` tokens of window.
    fn fork(conversation: &Conversation, window: usize) -> Fork<'_> {
        let counted = Tiktoken::default().count_conversation(conversation);
        Fork {
            conversation,
            head: 1..4,
            carried: &[],
            tokens: counted,
            window,
            counted,
            cached: counted,
            summary_tokens: None,
        }
    }

    fn request(fork: &Fork<'_>) -> Option<(Conversation, usize)> {
        fork.request("Summarize.", &Tiktoken::default(), 4_096, 2_000)
    }

    #[test]
    fn the_request_is_the_conversation_then_the_prompt_naming_the_kept_tail() {
        let conversation = conversation();
        let fork = fork(&conversation, 100_000);
        assert_eq!(fork.head(), &conversation.messages[1..4]);
        let (request, reply) = request(&fork).unwrap();
        assert_eq!(reply, 4_096);
        assert_eq!(request.messages.len(), conversation.messages.len() + 1);
        assert_eq!(request.messages[..6], conversation.messages[..]);
        let last = request.messages.last().unwrap();
        assert_eq!(last.role, Role::User);
        let text = last.plain_text();
        assert!(text.contains("the last 2 messages stay"), "{text}");
        assert!(
            text.starts_with("CRITICAL: answer with text only"),
            "{text}"
        );
        assert!(text.ends_with("Summarize."), "{text}");
    }

    #[test]
    fn the_reply_gets_what_the_window_has_left_down_to_half_the_summary() {
        let conversation = conversation();
        let counter = Tiktoken::default();
        let mut fork = fork(&conversation, 100_000);
        let (forked, _) = request(&fork).unwrap();
        let prompt = counter.count_message(forked.messages.last().unwrap());
        let input = fork.tokens + prompt;
        fork.window = input + 3_000;
        assert_eq!(request(&fork).unwrap().1, 3_000);
        fork.window = input + 2_048;
        assert_eq!(request(&fork).unwrap().1, 2_048);
        fork.window -= 1;
        assert!(request(&fork).is_none());
        fork.window = fork.tokens;
        assert!(request(&fork).is_none());
    }

    /// The fork pays a tenth for what is cached and a quarter more for the rest, its own
    /// prompt included; the separate prompt pays the head, its outputs cut, and the prompt in
    /// full.
    #[test]
    fn a_fork_is_made_only_when_it_costs_less_than_the_head_alone() {
        let conversation = conversation();
        let mut fork = fork(&conversation, 1_000_000);
        assert!(request(&fork).is_some(), "all cached: a tenth of the price");
        fork.cached = 0;
        assert!(
            request(&fork).is_none(),
            "nothing cached: all of it at 1.25x"
        );
        // Behind the same head, a long cached conversation costs a tenth of its size: at some
        // size that is more than the head alone.
        fork.counted = 100_000;
        fork.cached = 100_000;
        assert!(
            request(&fork).is_none(),
            "a tenth of 100,000 is more than the head"
        );
    }

    /// What the request carries beyond its messages (the provider's count over condense's:
    /// tool definitions, a system prompt sent apart) is read by the fork as well: a fork that
    /// pays on the messages alone does not once a large system prompt is read with them.
    #[test]
    fn a_fork_pays_for_the_system_prompt_and_tools_it_reads() {
        let conversation = conversation();
        let mut fork = fork(&conversation, 1_000_000);
        assert!(request(&fork).is_some());
        fork.tokens = fork.counted + 100_000;
        assert!(
            request(&fork).is_none(),
            "a tenth of 100,000 tokens of tools is more than the head"
        );
    }
}
