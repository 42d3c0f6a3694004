//! A provider's own compaction in a history: OpenAI's Responses `compaction` item (from
//! `context_management` or `POST /v1/responses/compact`, `encrypted_content` opaque) and
//! Anthropic's `compaction` content block (from the `compact_20260112` edit). Both stand for
//! everything before them, which the provider ignores from then on: the client must resend the
//! item exactly as returned, and may send what came before it or not.
//!
//! So condense never touches what a provider compacted. [`LiveView::take`] lifts the messages
//! before the last such item out of a conversation (they are neither counted, pruned nor
//! summarized) and leaves the item at the front of what is left, after the leading System
//! messages, where the split pins it: no summary of condense's can go before it.
//! [`LiveView::restore`] puts them back, byte for byte, and rejoins the item's message when its
//! other parts came through untouched.

use serde_json::Value;

use crate::{Conversation, Message, Part, Role, SideRecord, WireRecord};

/// The `type` both providers give their compaction item or block.
pub const NATIVE_COMPACTION_TYPE: &str = "compaction";

/// Whether `part` is a provider's compaction item or block, kept opaque by every reader.
pub fn is_native_compaction(part: &Part) -> bool {
    matches!(part, Part::Opaque { value: Value::Object(fields) }
        if fields.get("type").and_then(Value::as_str) == Some(NATIVE_COMPACTION_TYPE))
}

/// Whether `message` carries a provider's compaction.
pub fn has_native_compaction(message: &Message) -> bool {
    message.parts.iter().any(is_native_compaction)
}

/// Where the last provider compaction of `messages` is: its message and its part.
pub fn last_native_compaction(messages: &[Message]) -> Option<(usize, usize)> {
    messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(index, message)| {
            message
                .parts
                .iter()
                .rposition(is_native_compaction)
                .map(|part| (index, part))
        })
}

/// What [`LiveView::take`] lifted out, to put back with [`LiveView::restore`].
#[derive(Debug, Clone)]
pub struct LiveView {
    /// Leading System messages, left in place.
    lead: usize,
    /// The messages between them and the compaction's message: what the provider ignores.
    ignored: Vec<Message>,
    /// The compaction's message as it came, when parts followed the compaction in it and were
    /// left in the view as a message of their own.
    whole: Option<Message>,
    /// That remainder as it went into the view, to tell whether it came back untouched.
    remainder: Option<Message>,
    /// Side records placed at or before the compaction's message, as they were.
    side_before: Vec<SideRecord>,
}

impl LiveView {
    /// Lifts out what the provider ignores: `None` (the conversation untouched) when it holds no
    /// provider compaction, or nothing but leading System messages comes before it. Otherwise
    /// the conversation starts with its leading System messages, then a message holding the
    /// compaction (and whatever came before it in its message), then the rest.
    pub fn take(conversation: &mut Conversation) -> Option<LiveView> {
        let (at, part) = last_native_compaction(&conversation.messages)?;
        let lead = conversation
            .messages
            .iter()
            .take_while(|message| message.role == Role::System)
            .count();
        if at < lead || (at == lead && part + 1 >= conversation.messages[at].parts.len()) {
            // Nothing before it to lift, nothing after it to set apart: the view is the
            // conversation.
            return None;
        }
        let after = conversation.messages.split_off(at + 1);
        let mut item = conversation.messages.pop()?;
        let ignored = conversation.messages.split_off(lead);
        let (whole, remainder) = if part + 1 < item.parts.len() {
            let whole = item.clone();
            let rest = split_message(&mut item, part + 1);
            (Some(whole), Some(rest))
        } else {
            (None, None)
        };
        // Side records: those at or before the compaction's message stay aside; the others
        // move with the messages.
        let removed = ignored.len();
        let added = usize::from(remainder.is_some());
        let (side_before, side_after): (Vec<_>, Vec<_>) = std::mem::take(&mut conversation.side)
            .into_iter()
            .partition(|record| record.before_message <= at);
        conversation.side = side_after
            .into_iter()
            .map(|record| SideRecord {
                before_message: record.before_message - removed + added,
                ..record
            })
            .collect();
        conversation.messages.push(item);
        conversation.messages.extend(remainder.clone());
        conversation.messages.extend(after);
        Some(LiveView {
            lead,
            ignored,
            whole,
            remainder,
            side_before,
        })
    }

    /// How many messages came before the compaction's message (after the leading System ones):
    /// what the provider ignores.
    pub fn ignored_messages(&self) -> usize {
        self.ignored.len()
    }

    /// How many messages the view has fewer than the conversation at `index` and after: a
    /// client's index past the compaction minus this is the index in the view.
    pub fn offset(&self) -> isize {
        let removed = isize::try_from(self.ignored.len()).unwrap_or(isize::MAX);
        removed - isize::from(self.remainder.is_some())
    }

    /// The index in the view of the conversation's message `index`, `None` for a message at or
    /// before the compaction, which the provider no longer sees as it was.
    pub fn to_view(&self, index: usize) -> Option<usize> {
        let compaction = self.lead + self.ignored.len();
        (index > compaction).then(|| index.saturating_add_signed(-self.offset()))
    }

    /// Puts back what [`LiveView::take`] lifted out of `conversation` (the view, after whatever
    /// was done to it): the ignored messages before the compaction's message, which is rejoined
    /// with its remainder when that is still right after it, unchanged.
    pub fn restore(self, conversation: &mut Conversation) {
        let Some(at) = conversation.messages.iter().position(has_native_compaction) else {
            // Whatever was done lost the item: nothing to rejoin; the ignored messages still go
            // back after the leading System messages.
            let tail = conversation
                .messages
                .split_off(self.lead.min(conversation.len()));
            conversation.messages.extend(self.ignored);
            conversation.messages.extend(tail);
            return;
        };
        let rejoined = match (&self.whole, &self.remainder) {
            (Some(whole), Some(remainder))
                if conversation.messages.get(at + 1) == Some(remainder) =>
            {
                conversation.messages[at] = whole.clone();
                conversation.messages.remove(at + 1);
                true
            }
            _ => false,
        };
        let removed = self.ignored.len();
        let tail = conversation.messages.split_off(at);
        conversation.messages.extend(self.ignored);
        conversation.messages.extend(tail);
        let compaction = at + removed;
        // What the view placed after the compaction stays after it.
        for record in &mut conversation.side {
            record.before_message = (record.before_message + removed)
                .saturating_sub(usize::from(rejoined))
                .max(compaction + 1);
        }
        conversation.side.extend(self.side_before);
        conversation
            .side
            .sort_by_key(|record| record.before_message);
    }
}

/// Splits `message` before part `at`: `message` keeps the parts before it, the returned message
/// the rest, each with its share of the wire records (a record holding both halves is kept by
/// both, each with its own count).
fn split_message(message: &mut Message, at: usize) -> Message {
    let rest_parts = message.parts.split_off(at);
    let mut first = Vec::new();
    let mut rest = Vec::new();
    let mut seen = 0;
    for record in std::mem::take(&mut message.wire) {
        let start = seen;
        seen += record.parts;
        if seen <= at {
            first.push(record);
        } else if start >= at {
            rest.push(record);
        } else {
            first.push(WireRecord {
                parts: at - start,
                ..record.clone()
            });
            rest.push(WireRecord {
                parts: seen - at,
                ..record
            });
        }
    }
    message.wire = first;
    Message {
        role: message.role,
        parts: rest_parts,
        generated: message.generated,
        wire: rest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compaction() -> Part {
        Part::Opaque {
            value: json!({"type": "compaction", "encrypted_content": "gAAAA"}),
        }
    }

    fn conversation() -> Conversation {
        let mut item = Message::new(Role::Assistant, vec![compaction(), Part::text("next")]);
        item.wire = vec![WireRecord {
            fields: crate::JsonMap::new(),
            parts: 2,
            shape: crate::ContentShape::Blocks,
        }];
        Conversation::new(vec![
            Message::text(Role::System, "be brief"),
            Message::text(Role::User, "old task"),
            Message::text(Role::Assistant, "old answer"),
            item,
            Message::text(Role::User, "new task"),
        ])
    }

    #[test]
    fn the_view_starts_at_the_compaction_and_comes_back_whole() {
        let original = conversation();
        let mut view = original.clone();
        let live = LiveView::take(&mut view).expect("a compaction with messages before it");
        assert_eq!(view.messages.len(), 4);
        assert_eq!(view.messages[1].parts, vec![compaction()]);
        assert_eq!(view.messages[2].parts, vec![Part::text("next")]);
        assert_eq!(live.to_view(4), Some(3));
        assert_eq!(live.to_view(3), None);
        live.restore(&mut view);
        assert_eq!(view, original);
    }

    #[test]
    fn a_changed_remainder_stays_apart_and_the_compaction_stays_in_front_of_it() {
        let mut view = conversation();
        let live = LiveView::take(&mut view).expect("a compaction");
        view.messages[2] = Message::text(Role::System, "summary");
        live.restore(&mut view);
        let texts: Vec<_> = view.messages.iter().map(Message::plain_text).collect();
        assert_eq!(
            texts,
            [
                "be brief",
                "old task",
                "old answer",
                "",
                "summary",
                "new task"
            ]
        );
        assert!(has_native_compaction(&view.messages[3]));
    }

    #[test]
    fn no_compaction_no_view() {
        let mut plain = Conversation::new(vec![Message::text(Role::User, "hi")]);
        assert!(LiveView::take(&mut plain).is_none());
        assert_eq!(plain.messages.len(), 1);
    }
}
