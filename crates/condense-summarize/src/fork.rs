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
    /// The conversation's size as the provider counts it (its reported usage when known, else
    /// condense's count): what a forked request costs in window before the prompt is added.
    pub tokens: usize,
    /// The agent's model's context window: a forked request goes to that model.
    pub window: usize,
}

impl<'c> Fork<'c> {
    /// The messages the summary replaces.
    pub fn head(&self) -> &'c [Message] {
        self.conversation
            .messages
            .get(self.head.clone())
            .unwrap_or_default()
    }

    /// The forked request: the conversation with one more user message, the note on tools and
    /// on the kept tail, then `prompt`; and the reply limit to ask for, `reply_tokens` or what
    /// the window has left for it. `None` when the window leaves less than half of
    /// `reply_tokens` (a conversation at or over the window: a separate, chunked request is
    /// the only one that can succeed). A summary is due when the conversation reaches the
    /// window less the room reserved for a reply, so the room left is that reservation less
    /// what the last step overshot it by: a reservation smaller than the summary's length
    /// still gets a shorter summary forked.
    pub fn request(
        &self,
        prompt: &str,
        counter: &dyn TokenCounter,
        reply_tokens: usize,
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

    fn conversation() -> Conversation {
        let mut messages = vec![
            Message::text(Role::System, "You are an agent."),
            Message::text(Role::User, "Fix the bug."),
        ];
        messages.extend(tool_step(
            "c1",
            "bash",
            serde_json::json!({"command": "ls"}),
            "a.rs b.rs",
        ));
        messages.extend(tool_step(
            "c2",
            "bash",
            serde_json::json!({"command": "cat a.rs"}),
            "fn main() {}",
        ));
        Conversation::new(messages)
    }

    #[test]
    fn the_request_is_the_conversation_then_the_prompt_naming_the_kept_tail() {
        let conversation = conversation();
        let fork = Fork {
            conversation: &conversation,
            head: 1..4,
            tokens: 100,
            window: 10_000,
        };
        assert_eq!(fork.head(), &conversation.messages[1..4]);
        let (request, reply) = fork
            .request("Summarize.", &Tiktoken::default(), 4_096)
            .unwrap();
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
        let mut fork = Fork {
            conversation: &conversation,
            head: 1..4,
            tokens: 0,
            window: 10_000,
        };
        let (request, _) = fork.request("Summarize.", &counter, 4_096).unwrap();
        let prompt = counter.count_message(request.messages.last().unwrap());
        fork.tokens = 10_000 - prompt - 3_000;
        assert_eq!(
            fork.request("Summarize.", &counter, 4_096).unwrap().1,
            3_000
        );
        fork.tokens = 10_000 - prompt - 2_048;
        assert_eq!(
            fork.request("Summarize.", &counter, 4_096).unwrap().1,
            2_048
        );
        fork.tokens += 1;
        assert!(fork.request("Summarize.", &counter, 4_096).is_none());
        fork.tokens = 20_000;
        assert!(fork.request("Summarize.", &counter, 4_096).is_none());
    }
}
