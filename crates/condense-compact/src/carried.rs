//! What outlives a summary besides the tail.

use std::collections::BTreeSet;

use condense_core::{Message, Part, ToolPairs};

/// What the head holds that must outlive the summary, verbatim: the calls and outputs of
/// protected tools (a memory store's entries are the point of protecting it), and the person's
/// last `min_tail_turns` messages when the tail could not hold them (a suffix of one huge turn).
/// Each comes out as a message of its own holding only those parts, in the original order, so no
/// tool pair is split.
pub fn carried(
    messages: &[Message],
    pinned: usize,
    tail_start: usize,
    protected_tools: &BTreeSet<String>,
    min_tail_turns: usize,
) -> Vec<Message> {
    let pairs = ToolPairs::index(messages);
    let turns = condense_core::user_turns(messages);
    let recent: Vec<usize> = turns.iter().rev().take(min_tail_turns).copied().collect();
    let mut out = Vec::new();
    for (index, message) in messages.iter().enumerate().take(tail_start).skip(pinned) {
        let keep: Vec<Part> = message
            .parts
            .iter()
            .filter(|part| match part {
                Part::ToolCall(call) => {
                    protected_tools.contains(&call.name)
                        && pairs
                            .result_site(&call.id)
                            .is_some_and(|site| site.message < tail_start)
                }
                Part::ToolResult(result) => pairs
                    .tool_name(messages, result)
                    .is_some_and(|tool| protected_tools.contains(tool)),
                Part::Text(_) | Part::Image(_) => recent.contains(&index) && message.is_user_turn(),
                _ => false,
            })
            .cloned()
            .collect();
        out.extend(holding(message, keep));
    }
    out
}

/// `message` holding only `parts` (some of its own, in order), none when they are none; its
/// wire records go when parts went, as they no longer account for what it holds.
fn holding(message: &Message, parts: Vec<Part>) -> Option<Message> {
    if parts.is_empty() {
        return None;
    }
    let mut kept = message.clone();
    if parts.len() != message.parts.len() {
        kept.parts = parts;
        kept.wire.clear();
    }
    Some(kept)
}

/// `carried` within `room` tokens (`count` gives the tokens of a list of messages): its tool
/// pairs taken from the newest back, each that fits beside those taken, the others left out;
/// with how many were left out. Protection keeps a tool's outputs from being pruned as a saving
/// and carries them past a summary; it cannot make the provider take a request larger than its
/// window. Where the protected pairs are more than the room the tail leaves, the newest that
/// fit are carried and the rest go to the summary with the rest of the head (they stay in the
/// client's history and in the summary's account of the calls).
pub fn newest_within(
    carried: Vec<Message>,
    room: usize,
    count: impl Fn(&[Message]) -> usize,
) -> (Vec<Message>, usize) {
    if count(&carried) <= room {
        return (carried, 0);
    }
    // Each id once: a harness that reuses ids (SWE-agent) has its pairs under one id kept or
    // left together.
    let mut oldest_first: Vec<&str> = Vec::new();
    for call in carried
        .iter()
        .flat_map(|message| &message.parts)
        .filter_map(Part::as_tool_call)
    {
        if !oldest_first.contains(&call.id.as_str()) {
            oldest_first.push(call.id.as_str());
        }
    }
    let only = |kept: &BTreeSet<&str>| -> Vec<Message> {
        let mut out = Vec::new();
        for message in &carried {
            let parts: Vec<Part> = message
                .parts
                .iter()
                .filter(|part| match part {
                    Part::ToolCall(call) => kept.contains(call.id.as_str()),
                    Part::ToolResult(result) => kept.contains(result.call_id.as_str()),
                    _ => true,
                })
                .cloned()
                .collect();
            out.extend(holding(message, parts));
        }
        out
    };
    let mut kept = BTreeSet::new();
    let mut taken = 0;
    for &id in oldest_first.iter().rev() {
        let tokens = count(&only(&BTreeSet::from([id])));
        if taken + tokens <= room {
            kept.insert(id);
            taken += tokens;
        }
    }
    // Each pair was counted in messages of its own; together they may share one, or not: the
    // oldest kept leave until the whole is within the room.
    let mut out = only(&kept);
    for id in &oldest_first {
        if count(&out) <= room {
            break;
        }
        if kept.remove(id) {
            out = only(&kept);
        }
    }
    let left_out = oldest_first.len() - kept.len();
    (out, left_out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use condense_core::testing::tool_step;
    use condense_core::{Message, Role};

    use super::*;

    /// A session of `steps` calls of `memory_store`, each output `size` characters.
    fn stored(steps: usize, size: usize) -> Vec<Message> {
        let mut messages = vec![
            Message::text(Role::System, "agent"),
            Message::text(Role::User, "remember things"),
        ];
        for step in 0..steps {
            messages.extend(tool_step(
                &format!("call_{step}"),
                "memory_store",
                serde_json::json!({"key": step}),
                "x".repeat(size),
            ));
        }
        messages.push(Message::text(Role::User, "go on"));
        messages
    }

    fn chars(messages: &[Message]) -> usize {
        messages
            .iter()
            .flat_map(|message| &message.parts)
            .map(|part| match part {
                Part::ToolResult(result) => result.content.text().len(),
                _ => 0,
            })
            .sum()
    }

    #[test]
    fn the_newest_protected_pairs_that_fit_are_carried_whole() {
        let messages = stored(5, 100);
        let protected = BTreeSet::from(["memory_store".to_owned()]);
        let all = carried(&messages, 1, messages.len() - 1, &protected, 0);
        assert_eq!(chars(&all), 500);

        let (kept, left_out) = newest_within(all.clone(), 250, chars);
        assert_eq!(left_out, 3);
        assert_eq!(chars(&kept), 200);
        let ids: Vec<&str> = kept
            .iter()
            .flat_map(|message| &message.parts)
            .filter_map(|part| match part {
                Part::ToolCall(call) => Some(call.id.as_str()),
                Part::ToolResult(result) => Some(result.call_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["call_3", "call_3", "call_4", "call_4"]);
        assert!(condense_core::validate(&kept).is_empty());

        // Room for all: nothing left out, the messages as they were.
        assert_eq!(newest_within(all.clone(), 500, chars), (all.clone(), 0));
        // Room for none: none carried.
        assert_eq!(newest_within(all, 50, chars), (Vec::new(), 5));
    }

    /// A newest pair larger than the room is left out, and an older one that fits is carried.
    #[test]
    fn an_older_pair_that_fits_is_carried_where_a_newer_one_does_not() {
        let mut messages = stored(2, 100);
        let last = messages.len() - 1;
        messages.splice(
            last..last,
            tool_step(
                "call_big",
                "memory_store",
                serde_json::json!({}),
                "y".repeat(1_000),
            ),
        );
        let protected = BTreeSet::from(["memory_store".to_owned()]);
        let all = carried(&messages, 1, messages.len() - 1, &protected, 0);
        let (kept, left_out) = newest_within(all, 250, chars);
        assert_eq!((chars(&kept), left_out), (200, 1));
    }
}
