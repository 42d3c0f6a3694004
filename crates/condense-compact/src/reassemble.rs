use condense_core::{Message, Role, SUMMARY_CLOSE, SUMMARY_OPEN};

/// What the agent is told after an automatic compaction (DESIGN.md). A setting: harnesses that
/// drive the next turn themselves pass `None`.
pub const DEFAULT_CONTINUATION: &str = "Continue if you have next steps, or stop and ask for clarification if you are unsure how to proceed.";

/// The one System message that carries a summary.
pub fn summary_message(summary: &str) -> Message {
    Message::text(
        Role::System,
        format!("{SUMMARY_OPEN}\n{}\n{SUMMARY_CLOSE}", summary.trim()),
    )
}

/// The summary an earlier compaction left at the start of `head`, if any.
pub fn previous_summary(head: &[Message]) -> Option<String> {
    let first = head
        .first()
        .filter(|message| message.is_compaction_summary())?;
    let text = first.plain_text();
    let inner = text.trim_start().strip_prefix(SUMMARY_OPEN)?;
    let inner = inner
        .rfind(SUMMARY_CLOSE)
        .map_or(inner, |end| &inner[..end]);
    Some(inner.trim().to_owned())
}

/// The compacted conversation: the pinned messages as they were, the summary, the tail as it
/// was, and the continuation message when there is one. The continuation is generated text, not
/// a user turn, so it does not shift the pruner's boundary.
pub fn reassemble(
    messages: &[Message],
    pinned: usize,
    tail_start: usize,
    summary: &str,
    continuation: Option<&str>,
) -> Vec<Message> {
    let mut out = Vec::with_capacity(pinned + 2 + messages.len().saturating_sub(tail_start));
    out.extend_from_slice(&messages[..pinned.min(messages.len())]);
    out.push(summary_message(summary));
    out.extend_from_slice(&messages[tail_start.min(messages.len())..]);
    if let Some(text) = continuation {
        out.push(continuation_message(text));
    }
    out
}

/// The continuation message after the tail: generated text in the user's place, which does not
/// count as a user turn.
pub fn continuation_message(text: &str) -> Message {
    let mut message = Message::text(Role::User, text);
    message.generated = true;
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reassembly_keeps_pinned_and_tail_around_the_summary() {
        let messages = vec![
            Message::text(Role::System, "be careful"),
            Message::text(Role::User, "old request"),
            Message::text(Role::Assistant, "old answer"),
            Message::text(Role::User, "new request"),
        ];
        let out = reassemble(
            &messages,
            1,
            3,
            "## Goal\nship it",
            Some(DEFAULT_CONTINUATION),
        );
        assert_eq!(out.len(), 4);
        assert_eq!(out[0], messages[0]);
        assert_eq!(
            out[1].plain_text(),
            "<prior-conversation-summary>\n## Goal\nship it\n</prior-conversation-summary>"
        );
        assert!(out[1].is_compaction_summary());
        assert_eq!(out[2], messages[3]);
        assert!(out[3].generated && !out[3].is_user_turn());
        assert_eq!(
            previous_summary(&out[1..]).as_deref(),
            Some("## Goal\nship it")
        );
        assert_eq!(previous_summary(&messages[1..]), None);
    }
}
