//! A summary, once made, is part of the session: clients resend their whole, uncompacted history
//! with every request, so the head a summary replaced comes back each time. Recognising it (by
//! the content hashes of the client's messages, not by position) and putting the same summary in
//! its place, byte for byte, keeps the provider's cached prefix and spares a summary per request.
//! A new summary is made only when the compacted form crosses the threshold again, and it folds
//! the previous one in (it is in the head it summarizes).

use std::hash::Hasher;

use condense_core::{Conversation, Message};
use serde::{Deserialize, Serialize};

/// The client's messages a summary stands for, and what stands in for them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrozenHead {
    /// Content hashes of the client's first messages, in order: the head the summary replaced.
    pub originals: Vec<u64>,
    /// What replaces them: the pinned messages, the summary and the messages carried after it.
    pub replacement: Vec<Message>,
    /// The hash of the whole history of the request that made the summary ([`history_hash`]),
    /// when that request also got the continuation message: a retry of the same request (the
    /// same history, nothing new) gets it again, so that it is sent the same bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_history: Option<u64>,
}

/// What the frozen head did on one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "head", rename_all = "snake_case")]
#[non_exhaustive]
pub enum HeadOutcome {
    /// The client's history starts with the head: it was replaced by the earlier summary.
    Reused {
        /// The client's messages replaced.
        messages: usize,
        /// The messages that replaced them.
        replaced_by: usize,
    },
    /// The client's history no longer starts with the head (an edited or branched
    /// conversation): the head was dropped and the session judged afresh.
    Diverged {
        /// The first of the head's messages that differs (or is missing).
        at: usize,
    },
}

/// The content hash of a message: everything it holds and everything its wire records keep,
/// so any edit a client makes to it is a different hash. Fed field by field
/// ([`Message::hash_content`]), not serialized: a proxy hashes every message of every request.
pub fn message_hash(message: &Message) -> u64 {
    let mut state = xxhash_rust::xxh3::Xxh3::new();
    message.hash_content(&mut state);
    state.finish()
}

/// One hash of a whole history, from its messages' content hashes in order.
pub fn history_hash(hashes: &[u64]) -> u64 {
    let mut state = xxhash_rust::xxh3::Xxh3::new();
    for hash in hashes {
        state.write_u64(*hash);
    }
    state.finish()
}

/// Where the frozen head stands in the conversation being prepared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Placed {
    /// The client's messages the replacement stands for.
    pub covered: usize,
    /// The replacement's length: conversation index `k >= replaced_by` is the client's
    /// `covered + (k - replaced_by)`.
    pub replaced_by: usize,
}

/// Puts the frozen head in place when the client's history starts with it; drops it when it
/// does not.
pub(crate) fn apply(
    head: &mut Option<FrozenHead>,
    conversation: &mut Conversation,
    hashes: &[u64],
) -> (Option<HeadOutcome>, Placed) {
    let Some(frozen) = head.as_ref() else {
        return (None, Placed::default());
    };
    let covered = frozen.originals.len();
    let differs = (0..covered).find(|&index| hashes.get(index) != frozen.originals.get(index));
    if let Some(at) = differs {
        *head = None;
        return (Some(HeadOutcome::Diverged { at }), Placed::default());
    }
    let replaced_by = frozen.replacement.len();
    conversation
        .messages
        .splice(0..covered, frozen.replacement.iter().cloned());
    (
        Some(HeadOutcome::Reused {
            messages: covered,
            replaced_by,
        }),
        Placed {
            covered,
            replaced_by,
        },
    )
}

/// The head to freeze after a summary: everything of the compacted result before the first
/// message that is still the client's own (at or after the tail, and past any earlier
/// replacement), and the hashes of the client's messages it stands for. `summary_end` is where
/// the tail begins in the result (after the pinned messages, the summary and what it carried);
/// a continuation message after the tail is the request's own and not frozen.
pub(crate) fn freeze(
    tail_start: usize,
    summary_end: usize,
    placed: Placed,
    compacted: &[Message],
    hashes: &[u64],
) -> Option<FrozenHead> {
    let first_own = tail_start.max(placed.replaced_by);
    let replacement_len = summary_end + (first_own - tail_start);
    let covered = placed.covered + (first_own - placed.replaced_by);
    Some(FrozenHead {
        originals: hashes.get(..covered)?.to_vec(),
        replacement: compacted.get(..replacement_len)?.to_vec(),
        continued_history: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_core::Role;

    #[test]
    fn any_edit_changes_the_hash() {
        let a = Message::text(Role::User, "fix the bug");
        let b = Message::text(Role::User, "fix the bugs");
        let c = Message::text(Role::Assistant, "fix the bug");
        assert_eq!(message_hash(&a), message_hash(&a.clone()));
        assert_ne!(message_hash(&a), message_hash(&b));
        assert_ne!(message_hash(&a), message_hash(&c));
    }

    #[test]
    fn a_head_is_reused_when_the_history_starts_with_it_and_dropped_when_not() {
        let messages: Vec<Message> = (0..6)
            .map(|i| Message::text(Role::User, format!("m{i}")))
            .collect();
        let hashes: Vec<u64> = messages.iter().map(message_hash).collect();
        let summary = Message::text(Role::System, "summary");
        let mut head = Some(FrozenHead {
            originals: hashes[..4].to_vec(),
            replacement: vec![summary.clone()],
            continued_history: None,
        });
        let mut conversation = Conversation::new(messages.clone());
        let (outcome, placed) = apply(&mut head, &mut conversation, &hashes);
        assert_eq!(
            outcome,
            Some(HeadOutcome::Reused {
                messages: 4,
                replaced_by: 1
            })
        );
        assert_eq!(
            conversation.messages,
            vec![summary, messages[4].clone(), messages[5].clone()]
        );
        // Frozen again after a second summary whose tail starts at compacted index 2 (the
        // client's message 5), the result being [summary 2, m4-carried, m5]: it covers the
        // client's first five.
        let again = freeze(2, 2, placed, &conversation.messages, &hashes).unwrap();
        assert_eq!(again.originals, hashes[..5].to_vec());
        assert_eq!(again.replacement.len(), 2);

        let mut edited = messages.clone();
        edited[2] = Message::text(Role::User, "changed");
        let edited_hashes: Vec<u64> = edited.iter().map(message_hash).collect();
        let mut conversation = Conversation::new(edited);
        let (outcome, _) = apply(&mut head, &mut conversation, &edited_hashes);
        assert_eq!(outcome, Some(HeadOutcome::Diverged { at: 2 }));
        assert!(head.is_none());
        assert_eq!(conversation.messages.len(), 6);
    }
}
