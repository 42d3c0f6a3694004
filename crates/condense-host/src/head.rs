//! A summary, once made, is part of the session: clients resend their whole, uncompacted history
//! with every request, so the head a summary replaced comes back each time. Recognising it (by
//! the content hashes of the client's messages, not by position) and putting the same summary in
//! its place, byte for byte, keeps the provider's cached prefix and spares a summary per request.
//! A new summary is made only when the compacted form crosses the threshold again, and it folds
//! the previous one in (it is in the head it summarizes). A client that prunes its own old tool
//! results resends the head with other contents; its messages' outlines (all but what the
//! results hold) still match, and the summary still stands for them.

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
    /// Outline hashes ([`Message::hash_outline`]) of the same messages: a client that clears
    /// old tool results itself resends the head with other contents but the same outline, and
    /// still gets the summary. Empty in a state saved before outlines were kept: no such
    /// tolerance then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outlines: Vec<u64>,
    /// Where condense's summary in `replacement` went out written again smaller, for the
    /// request to fit a window its system prompt and tools nearly fill: the summary as first
    /// written. A later summary of this head folds it in place of the smaller one, so what that
    /// gave up (the files, the requests' quotes) is given up for one request, not for good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_summary: Option<WholeSummary>,
}

/// condense's summary as first written, and as it went out written again smaller
/// ([`FrozenHead::whole_summary`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WholeSummary {
    /// The summary's text as it went out.
    pub sent: String,
    /// Its text as first written.
    pub whole: String,
}

impl WholeSummary {
    /// Puts the summary that went out back whole in the compaction summary among `messages`
    /// that holds it; whether one did.
    pub(crate) fn restore_in(&self, messages: &mut [Message]) -> bool {
        let holding = messages
            .iter_mut()
            .filter(|message| message.is_compaction_summary())
            .flat_map(|message| message.parts.iter_mut())
            .find_map(|part| match part {
                condense_core::Part::Text(said) if said.text.contains(&self.sent) => Some(said),
                _ => None,
            });
        match holding {
            Some(said) => {
                said.text = said.text.replacen(&self.sent, &self.whole, 1);
                true
            }
            None => false,
        }
    }
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

/// The outline hash of a message ([`Message::hash_outline`]): its content but for what its tool
/// results hold.
pub fn outline_hash(message: &Message) -> u64 {
    let mut state = xxhash_rust::xxh3::Xxh3::new();
    message.hash_outline(&mut state);
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
    let Some(frozen) = head.as_mut() else {
        return (None, Placed::default());
    };
    let covered = frozen.originals.len();
    let differs = (0..covered).find(|&index| hashes.get(index) != frozen.originals.get(index));
    if let Some(at) = differs {
        // Only results differ (the client cleared them, as Claude Code does after an idle hour
        // and opencode's prune does): the same conversation, and the summary stands for it as
        // it did. Its hashes are taken as they now are, so the next request matches at once.
        let same_outline = frozen.outlines.len() == covered
            && hashes.len() >= covered
            && (at..covered).all(|index| {
                conversation.messages.get(index).map(outline_hash) == Some(frozen.outlines[index])
            });
        if !same_outline {
            *head = None;
            return (Some(HeadOutcome::Diverged { at }), Placed::default());
        }
        frozen.originals.copy_from_slice(&hashes[..covered]);
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
///
/// `summarized` is the conversation the summary was made from (the earlier replacement in place,
/// then the client's messages, pruned: the outline does not see what pruning changed), and
/// `earlier` the outlines of the messages that replacement stood for.
pub(crate) fn freeze(
    tail_start: usize,
    summary_end: usize,
    placed: Placed,
    compacted: &[Message],
    hashes: &[u64],
    summarized: &[Message],
    earlier: &[u64],
) -> Option<FrozenHead> {
    let first_own = tail_start.max(placed.replaced_by);
    let replacement_len = summary_end + (first_own - tail_start);
    let covered = placed.covered + (first_own - placed.replaced_by);
    let outlines = if earlier.len() == placed.covered {
        let own = summarized.get(placed.replaced_by..first_own)?;
        earlier
            .iter()
            .copied()
            .chain(own.iter().map(outline_hash))
            .collect()
    } else {
        Vec::new()
    };
    Some(FrozenHead {
        originals: hashes.get(..covered)?.to_vec(),
        replacement: compacted.get(..replacement_len)?.to_vec(),
        outlines,
        whole_summary: None,
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
        let outlines: Vec<u64> = messages.iter().map(outline_hash).collect();
        let mut head = Some(FrozenHead {
            originals: hashes[..4].to_vec(),
            replacement: vec![summary.clone()],
            outlines: outlines[..4].to_vec(),
            whole_summary: None,
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
        let again = freeze(
            2,
            2,
            placed,
            &conversation.messages,
            &hashes,
            &conversation.messages,
            &outlines[..4],
        )
        .unwrap();
        assert_eq!(again.originals, hashes[..5].to_vec());
        assert_eq!(again.replacement.len(), 2);
        assert_eq!(again.outlines, outlines[..5].to_vec());

        let mut edited = messages.clone();
        edited[2] = Message::text(Role::User, "changed");
        let edited_hashes: Vec<u64> = edited.iter().map(message_hash).collect();
        let mut conversation = Conversation::new(edited);
        let (outcome, _) = apply(&mut head, &mut conversation, &edited_hashes);
        assert_eq!(outcome, Some(HeadOutcome::Diverged { at: 2 }));
        assert!(head.is_none());
        assert_eq!(conversation.messages.len(), 6);
    }

    /// A client that clears its old tool results itself (Claude Code after an idle hour,
    /// opencode's prune) resends the head with other contents: the summary still stands for
    /// it, and the hashes are taken as they now are. Any other change is a divergence, and a
    /// state saved without outlines keeps the strict rule.
    #[test]
    fn a_head_whose_results_the_client_cleared_is_still_the_head() {
        use condense_core::{JsonMap, Part, ToolCall, ToolOutput, ToolResult};
        let result = |content: &str| {
            Message::new(
                Role::User,
                vec![Part::ToolResult(ToolResult {
                    call_id: "c1".into(),
                    content: ToolOutput::Text(content.into()),
                    is_error: None,
                    embedded: false,
                    compacted: None,
                    extra: JsonMap::new(),
                })],
            )
        };
        let messages = vec![
            Message::text(Role::User, "read a.rs"),
            Message::new(
                Role::Assistant,
                vec![Part::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "Read".into(),
                    input: serde_json::json!({"file_path": "a.rs"}),
                    raw_input: None,
                    embedded: false,
                    extra: JsonMap::new(),
                })],
            ),
            result("fn main() {}"),
            Message::text(Role::User, "now test it"),
        ];
        let hashes: Vec<u64> = messages.iter().map(message_hash).collect();
        let frozen = FrozenHead {
            originals: hashes[..3].to_vec(),
            replacement: vec![Message::text(Role::System, "summary")],
            outlines: messages[..3].iter().map(outline_hash).collect(),
            whole_summary: None,
        };

        let mut cleared = messages.clone();
        cleared[2] = result("[Old tool result content cleared]");
        let cleared_hashes: Vec<u64> = cleared.iter().map(message_hash).collect();
        let mut head = Some(frozen.clone());
        let mut conversation = Conversation::new(cleared.clone());
        let (outcome, _) = apply(&mut head, &mut conversation, &cleared_hashes);
        assert_eq!(
            outcome,
            Some(HeadOutcome::Reused {
                messages: 3,
                replaced_by: 1
            })
        );
        assert_eq!(conversation.messages[1], messages[3]);
        let kept = head.as_ref().unwrap();
        assert_eq!(kept.originals, cleared_hashes[..3].to_vec());
        assert_eq!(kept.replacement, frozen.replacement);

        let mut edited = cleared.clone();
        edited[0] = Message::text(Role::User, "read b.rs");
        let edited_hashes: Vec<u64> = edited.iter().map(message_hash).collect();
        let mut head = Some(frozen.clone());
        let (outcome, _) = apply(&mut head, &mut Conversation::new(edited), &edited_hashes);
        assert_eq!(outcome, Some(HeadOutcome::Diverged { at: 0 }));

        let mut head = Some(FrozenHead {
            outlines: Vec::new(),
            whole_summary: None,
            ..frozen
        });
        let (outcome, _) = apply(&mut head, &mut Conversation::new(cleared), &cleared_hashes);
        assert_eq!(outcome, Some(HeadOutcome::Diverged { at: 2 }));
    }
}
