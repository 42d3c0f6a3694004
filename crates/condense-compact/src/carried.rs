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
        if keep.is_empty() {
            continue;
        }
        let mut kept = message.clone();
        if keep.len() != message.parts.len() {
            kept.parts = keep;
            kept.wire.clear();
        }
        out.push(kept);
    }
    out
}
