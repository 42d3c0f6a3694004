use std::ops::Range;

use condense_core::{Message, Part, Role, ToolPairs};
use condense_tokenizer::TokenCounter;
use serde::Serialize;

use crate::{TailSettings, tail_budget, usable};

/// How the tail was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TailRule {
    /// Whole user turns from the end, as many as fit the budget.
    WholeTurns,
    /// More whole turns than fit the budget, to hold `min_tail_turns` of them.
    MinTurns,
    /// The last turn alone is larger than the budget: its longest suffix that fits.
    Suffix,
    /// Nothing that fits the budget holds the last exchange (the last assistant step and what
    /// follows it): the tail is that exchange anyway, and the caller cuts its outputs that alone
    /// exceed the budget to previews. A compacted session always ends as the original did.
    LastExchange,
}

/// Where a conversation is cut: `pinned` leading System messages, then the head to summarize,
/// then the tail to keep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Split {
    /// Leading System messages kept in front, never summarized.
    pub pinned: usize,
    /// The first message of the tail.
    pub tail_start: usize,
    /// The tail budget in tokens.
    pub budget: usize,
    /// How the tail was chosen.
    pub rule: TailRule,
    /// The head's tokens.
    pub head_tokens: usize,
    /// The tail's tokens.
    pub tail_tokens: usize,
    /// User turns in the tail.
    pub tail_user_turns: usize,
}

impl Split {
    /// The messages to summarize.
    pub fn head(&self) -> Range<usize> {
        self.pinned..self.tail_start
    }

    /// The tail is everything after the pinned messages: a normal outcome, not an error.
    pub fn nothing_to_compact(&self) -> bool {
        self.tail_start <= self.pinned
    }
}

/// How many leading messages are never summarized: the System messages, then a provider's own
/// compaction right after them ([`condense_core::LiveView`] puts it there), which stands for
/// everything before it and must reach the provider as it came, ahead of any summary.
pub fn pinned(messages: &[Message]) -> usize {
    let systems = messages
        .iter()
        .take_while(|message| message.role == Role::System && !message.is_compaction_summary())
        .count();
    systems
        + messages.get(systems).map_or(0, |message| {
            usize::from(
                message.role != Role::System
                    && message
                        .parts
                        .last()
                        .is_some_and(condense_core::is_native_compaction),
            )
        })
}

/// Cuts `messages` into pinned, head and tail.
///
/// Whole user turns are kept from the end while they fit the tail budget. Fewer than
/// `min_tail_turns` are topped up with whole turns as long as the tail stays within half the
/// usable window (beyond that the summary would have no room, and compaction could not get under
/// the threshold). When even the last turn is larger than the budget, the tail is its longest
/// suffix that fits, starting at a message boundary. The tail never starts with a result whose
/// call is in the head: a turn-based cut moves back to take the call along, a suffix moves forward
/// past the result so that it still fits. Whatever the budget, the tail holds the last exchange
/// ([`TailRule::LastExchange`]): a resumed agent must see where it was, not its original task.
pub fn split(messages: &[Message], counter: &dyn TokenCounter, settings: &TailSettings) -> Split {
    split_counted(messages, &counter.count_each(messages), settings)
}

/// [`split`] with each message's tokens already counted (`counts[i]` for `messages[i]`).
pub fn split_counted(messages: &[Message], counts: &[usize], settings: &TailSettings) -> Split {
    let pinned = pinned(messages);
    let mut suffix = vec![0usize; messages.len() + 1];
    for index in (0..messages.len()).rev() {
        suffix[index] = suffix[index + 1] + counts[index];
    }
    let turns: Vec<usize> = condense_core::user_turns(messages)
        .into_iter()
        .filter(|&turn| turn >= pinned)
        .collect();
    let budget = tail_budget(settings);
    let cap = budget.max(usable(settings) / 2);

    let mut kept = turns
        .iter()
        .rev()
        .take_while(|&&turn| suffix[turn] <= budget)
        .count();
    let mut rule = TailRule::WholeTurns;
    let wanted = settings.rules.min_tail_turns.min(turns.len());
    if kept > 0 || turns.last().is_some_and(|&last| suffix[last] <= budget) {
        while kept < wanted && suffix[turns[turns.len() - kept - 1]] <= cap {
            kept += 1;
            rule = TailRule::MinTurns;
        }
    }

    let pairs = ToolPairs::index(messages);
    let earliest_call = earliest_calls(messages, &pairs);
    let mut tail_start = if kept > 0 {
        take_calls_along(turns[turns.len() - kept], pinned, &earliest_call)
    } else {
        rule = TailRule::Suffix;
        let fits = (pinned..=messages.len())
            .find(|&index| suffix[index] <= budget)
            .unwrap_or(messages.len());
        skip_orphaned_results(fits, &earliest_call)
    };
    let last_exchange = last_exchange_start(messages, pinned, &earliest_call);
    if tail_start > last_exchange {
        tail_start = last_exchange;
        rule = TailRule::LastExchange;
    }

    Split {
        pinned,
        tail_start,
        budget,
        rule,
        head_tokens: suffix[pinned] - suffix[tail_start],
        tail_tokens: suffix[tail_start],
        tail_user_turns: turns.iter().filter(|&&turn| turn >= tail_start).count(),
    }
}

/// Where the last exchange begins: the last assistant message (its calls' results follow it),
/// or the last message when no assistant spoke; never inside the pinned messages.
fn last_exchange_start(messages: &[Message], pinned: usize, earliest_call: &[usize]) -> usize {
    let last = messages
        .iter()
        .rposition(|message| message.role == Role::Assistant)
        .or_else(|| messages.len().checked_sub(1))
        .unwrap_or(0)
        .max(pinned);
    take_calls_along(last.min(messages.len()), pinned, earliest_call)
}

/// For each message, the index of the earliest message holding a call that one of its results
/// answers (`usize::MAX` when it has no results with a known call).
fn earliest_calls(messages: &[Message], pairs: &ToolPairs) -> Vec<usize> {
    messages
        .iter()
        .map(|message| {
            message
                .parts
                .iter()
                .filter_map(|part| match part {
                    Part::ToolResult(result) => pairs.call_site(&result.call_id),
                    _ => None,
                })
                .map(|site| site.message)
                .min()
                .unwrap_or(usize::MAX)
        })
        .collect()
}

/// Moves `start` back until no result in the tail has its call in the head.
fn take_calls_along(mut start: usize, pinned: usize, earliest_call: &[usize]) -> usize {
    if start >= earliest_call.len() {
        return start;
    }
    loop {
        let needed = earliest_call[start..]
            .iter()
            .copied()
            .min()
            .unwrap_or(usize::MAX);
        if needed >= start {
            return start;
        }
        start = needed.max(pinned);
    }
}

/// Moves `start` forward past every result whose call is before it.
fn skip_orphaned_results(mut start: usize, earliest_call: &[usize]) -> usize {
    while start < earliest_call.len() && earliest_call[start..].iter().any(|&call| call < start) {
        start += 1;
    }
    start
}
