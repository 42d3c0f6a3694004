use condense_core::{Message, Role, SUMMARY_CLOSE, SUMMARY_OPEN, SideRecord};

/// What opencode tells the agent after an automatic compaction: what the replay's opencode
/// policy sends. condense's own (`compaction.continuation`, a setting) says the same by default;
/// harnesses that drive the next turn themselves pass `None`.
pub const OPENCODE_CONTINUATION: &str = "Continue if you have next steps, or stop and ask for clarification if you are unsure how to proceed.";

/// The one System message that carries a summary.
pub fn summary_message(summary: &str) -> Message {
    summary_message_continued(summary, None)
}

/// The summary's message with the continuation after the summary, in the same message: the
/// tail then ends with the client's own last message, as the client sent it.
pub fn summary_message_continued(summary: &str, continuation: Option<&str>) -> Message {
    let mut text = format!("{SUMMARY_OPEN}\n{}\n{SUMMARY_CLOSE}", summary.trim());
    if let Some(continuation) = continuation {
        text.push_str("\n\n");
        text.push_str(continuation.trim());
    }
    Message::text(Role::System, text)
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

/// The compacted conversation: the pinned messages as they were, the summary (with the
/// continuation after it, when there is one) and the tail as it was.
pub fn reassemble(
    messages: &[Message],
    pinned: usize,
    tail_start: usize,
    summary: &str,
    continuation: Option<&str>,
) -> Vec<Message> {
    let mut out = Vec::with_capacity(pinned + 2 + messages.len().saturating_sub(tail_start));
    out.extend_from_slice(&messages[..pinned.min(messages.len())]);
    out.push(summary_message_continued(summary, continuation));
    out.extend_from_slice(&messages[tail_start.min(messages.len())..]);
    out
}

/// The records a log keeps beside its messages, placed among the compacted conversation's
/// messages: each is written before the message it came before, so a record placed by its
/// index in the old conversation would land among other messages, or after them all, once the
/// head is gone. Those that sat among the pinned messages stay; those among the summarized
/// head go just before the tail (after the summary and what it carries: a line the tail hangs
/// below, such as a Claude Code attachment, then links back to them); those among the tail move
/// with it. `front` is the number of messages before the tail now: the pinned ones, the
/// summary and the carried messages.
pub fn reposition_side(
    side: &[SideRecord],
    pinned: usize,
    tail_start: usize,
    front: usize,
) -> Vec<SideRecord> {
    side.iter()
        .map(|record| {
            let at = record.before_message;
            let before_message = if at <= pinned {
                at
            } else if at <= tail_start {
                front
            } else {
                at - tail_start + front
            };
            SideRecord {
                before_message,
                ..record.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn side_records_keep_their_place_among_the_messages_they_came_with() {
        use condense_core::SideKind;
        let at = |before_message| SideRecord {
            kind: SideKind::Other,
            before_message,
            value: serde_json::json!(before_message),
        };
        // One pinned message, a head of messages 1..5, a tail from 5 to 8; now the pinned
        // message, the summary and one carried message come before the tail.
        let side = [at(0), at(1), at(3), at(5), at(6), at(8)];
        let placed: Vec<(u64, usize)> = reposition_side(&side, 1, 5, 3)
            .iter()
            .map(|record| (record.value.as_u64().unwrap(), record.before_message))
            .collect();
        assert_eq!(placed, [(0, 0), (1, 1), (3, 3), (5, 3), (6, 4), (8, 6)]);
    }

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
            Some(OPENCODE_CONTINUATION),
        );
        // The continuation is inside the summary's message: the client's last message is
        // still the last one.
        assert_eq!(out.len(), 3);
        assert_eq!(out[0], messages[0]);
        assert_eq!(
            out[1].plain_text(),
            format!(
                "<prior-conversation-summary>\n## Goal\nship it\n</prior-conversation-summary>\n\n{OPENCODE_CONTINUATION}"
            )
        );
        assert!(out[1].is_compaction_summary());
        assert_eq!(out[2], messages[3]);
        assert_eq!(
            previous_summary(&out[1..]).as_deref(),
            Some("## Goal\nship it")
        );
        assert_eq!(previous_summary(&messages[1..]), None);
    }
}
