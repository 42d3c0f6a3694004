use std::collections::HashMap;
use std::ops::Range;

use condense_core::{Message, Part, Role, ToolPairs, ToolResult};
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
    /// exceed the budget to previews. A compacted session always ends as the original did. The
    /// tail then goes back over the calls before it, whole, as far as what the previews leave
    /// of the budget holds them (up to `min_tail_calls` calls).
    LastExchange,
    /// Whole turns held fewer than `min_tail_calls` tool calls (an autonomous run's turn is
    /// hundreds of steps): the tail goes back to hold that many, as far as it fits the budget
    /// whole or, where it does not, with each output before the last exchange over an equal
    /// share of the budget cut to a preview of that share ([`Split::previews`]); where the
    /// budget holds fewer of them than that, as far as [`TailSettings::previews_within`] with
    /// each over an equal share of what it leaves past the tail, where that holds more.
    RecentCalls,
    /// The last turn alone is larger than the budget, and the suffix that fits it holds more
    /// than `min_tail_calls` tool calls: the tail starts at the step that makes the
    /// `min_tail_calls`-th call from the end (with the other calls of that step). Kept
    /// past the recent work, an older call is read again on every request and rewritten at
    /// every compaction, while the summary already stands for it.
    LatestCalls,
    /// The last exchange alone, beside the pinned messages, is more than the window holds, even
    /// with its inputs, protected outputs and the person's messages cut as a compaction still
    /// over the window cuts them: a thinking block a provider takes only whole and as signed
    /// (8.5K tokens of it, in a window a system prompt and tools nearly fill), or a long reply
    /// of the agent's own words. The tail is empty, and the summary stands for everything after
    /// the pinned messages: the one request the provider would take, where the exchange kept
    /// whole would be refused and keep nothing ([`Split::with_no_tail`]).
    NoRoom,
}

/// The tail's outputs the caller cuts to previews (originals stored) for the tail to fit: every
/// unprotected output in `messages` larger than `over` tokens, to a preview within that.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TailPreviews {
    /// The messages whose outputs may be cut.
    pub messages: Range<usize>,
    /// An output over this many tokens is cut.
    pub over: usize,
}

/// Where a conversation is cut: `pinned` leading messages ([`pinned`]), then the head to
/// summarize, then the tail to keep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Split {
    /// Leading messages kept in front, never summarized ([`pinned`]): the System messages, a
    /// provider's own compaction, an autonomous run's task an earlier compaction kept there.
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
    /// Tool calls in the tail.
    pub tail_calls: usize,
    /// The tail's outputs to cut to previews, when it fits only so.
    pub previews: Option<TailPreviews>,
    /// The tail's tokens once those previews are made (as [`split_counted`]'s caller sized
    /// them); `tail_tokens` without previews.
    pub kept_tokens: usize,
    /// The first message of the last exchange: the last assistant message, moved back past any
    /// earlier call whose result comes after it, so that no result in it answers a call before
    /// it. Never in the head. What a caller that must leave the agent's latest step whole
    /// (an input cut before it, [`TailPreviews`] of older outputs) stops at. Not in a report:
    /// it says nothing the tail's own fields do not.
    #[serde(skip)]
    pub last_exchange: usize,
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

    /// This cut of a conversation of `len` messages with its tail summarized too: the head
    /// runs to the end ([`TailRule::NoRoom`]), for a last exchange no request could hold.
    pub fn with_no_tail(self, len: usize) -> Split {
        Split {
            tail_start: len,
            rule: TailRule::NoRoom,
            head_tokens: self.head_tokens + self.tail_tokens,
            tail_tokens: 0,
            tail_user_turns: 0,
            tail_calls: 0,
            previews: None,
            kept_tokens: 0,
            last_exchange: len,
            ..self
        }
    }
}

/// How many leading messages are never summarized: the System messages, then a provider's own
/// compaction right after them ([`condense_core::LiveView`] puts it there), which stands for
/// everything before it and must reach the provider as it came, ahead of any summary; then the
/// person's opening request where an earlier compaction kept it in front of its summary
/// ([`leads_the_summary`]): it stays there, whole, as the system prompt does.
pub fn pinned(messages: &[Message]) -> usize {
    let systems = messages
        .iter()
        .take_while(|message| message.role == Role::System && !message.is_compaction_summary())
        .count();
    let native = systems
        + messages.get(systems).map_or(0, |message| {
            usize::from(
                message.role != Role::System
                    && message
                        .parts
                        .last()
                        .is_some_and(condense_core::is_native_compaction),
            )
        });
    native
        + usize::from(
            messages.get(native).is_some_and(Message::is_user_turn)
                && messages
                    .get(native + 1)
                    .is_some_and(Message::is_compaction_summary),
        )
}

/// Whether a compaction at `split` keeps the head's first message in front of its summary
/// instead of carrying it after: where that message is the person's opening request, the only
/// request of theirs the head holds, and the compaction keeps it whole (`carried` starts with
/// it: it is among the person's last requests, which the tail did not hold), at most
/// `most_tokens` (`tokens`, its count). An autonomous run's task then stays where the system
/// prompt left it, so every request after the compaction shares that prefix, byte for byte, with
/// every request before it, and a provider that caches prefixes (OpenAI's automatically) reads
/// it from its cache at each compaction where it would rewrite it after a summary. Once there,
/// [`pinned`] keeps it there. `most_tokens`: a request larger than the summary it would
/// otherwise be quoted in (a pasted log) is carried as before, and goes into the summary once
/// newer requests leave it behind.
pub fn leads_the_summary(
    messages: &[Message],
    split: &Split,
    carried: &[Message],
    tokens: usize,
    most_tokens: usize,
) -> bool {
    let Some(first) = messages.get(split.pinned) else {
        return false;
    };
    first.is_user_turn()
        && tokens <= most_tokens
        && carried.first() == Some(first)
        && messages[split.head()]
            .iter()
            .filter(|message| message.is_user_turn())
            .count()
            == 1
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
/// And it holds the agent's last `min_tail_calls` tool calls when whole turns did not, with their
/// larger outputs cut to previews ([`TailRule::RecentCalls`], within the budget or, where that
/// holds fewer of them, [`TailSettings::previews_within`]): what the agent was acting on; a
/// suffix that holds more of them is cut back to that many ([`TailRule::LatestCalls`]).
///
/// Here outputs are counted as they are, none smaller as a preview; a caller that makes the
/// previews gives their sizes to [`split_counted`].
pub fn split(messages: &[Message], counter: &dyn TokenCounter, settings: &TailSettings) -> Split {
    let whole = |result: &ToolResult, _: &str, _: usize| {
        let tokens = counter.count_output(&result.content);
        (tokens, tokens)
    };
    split_counted(messages, &counter.count_each(messages), &whole, settings)
}

/// What an output of the tool named in the second argument takes, in tokens: whole, and cut to
/// the preview the caller would make of it within the third (never more than whole).
pub type OutputSizes<'a> = &'a dyn Fn(&ToolResult, &str, usize) -> (usize, usize);

/// [`split`] with each message's tokens already counted (`counts[i]` for `messages[i]`), and
/// each output's tokens whole and as a preview given by `sizes` (asked only for the outputs a
/// tail may cut).
pub fn split_counted(
    messages: &[Message],
    counts: &[usize],
    sizes: OutputSizes<'_>,
    settings: &TailSettings,
) -> Split {
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
    let earliest_need = earliest_needs(messages, &pairs);
    let mut tail_start = if kept > 0 {
        take_calls_along(turns[turns.len() - kept], pinned, &earliest_need)
    } else {
        let (start, by) = suffix_tail(messages, &suffix, pinned, budget, settings, &earliest_need);
        rule = by;
        start
    };
    let last_exchange = last_exchange_start(messages, pinned, &earliest_need);
    if tail_start > last_exchange {
        tail_start = last_exchange;
        rule = TailRule::LastExchange;
    }
    let recent = RecentCalls {
        messages,
        suffix: &suffix,
        earliest_need: &earliest_need,
        pinned,
        last_exchange,
        budget,
        cap,
        within: settings.previews_within,
        wanted: settings.rules.min_tail_calls,
    };
    let (tail_start, rule, previews, kept_tokens) = recent.fitted(tail_start, rule, &pairs, sizes);

    Split {
        pinned,
        tail_start,
        budget,
        rule,
        head_tokens: suffix[pinned] - suffix[tail_start],
        tail_tokens: suffix[tail_start],
        tail_user_turns: turns.iter().filter(|&&turn| turn >= tail_start).count(),
        tail_calls: calls_from(messages, tail_start),
        previews,
        kept_tokens,
        last_exchange,
    }
}

/// What moving the tail back to hold the recent calls needs to know of the conversation.
struct RecentCalls<'a> {
    messages: &'a [Message],
    suffix: &'a [usize],
    earliest_need: &'a [usize],
    pinned: usize,
    last_exchange: usize,
    budget: usize,
    /// The most the tail may take: the budget, or half the usable room where that is more (the
    /// summary's is the other half).
    cap: usize,
    /// [`TailSettings::previews_within`].
    within: usize,
    /// `min_tail_calls`.
    wanted: usize,
}

/// A tail moved back to hold the recent calls.
struct Held {
    start: usize,
    /// Its tokens once its outputs over `over` are previews.
    tokens: usize,
    /// `None` where it fits with every output whole.
    over: Option<usize>,
}

impl RecentCalls<'_> {
    /// The tail from `tail_start` (cut by `rule`) with the previews it needs, and its tokens
    /// once they are made: when the tail holds fewer than `wanted` calls, the tail moved back
    /// to hold them ([`TailRule::RecentCalls`]), within the budget or, where that holds fewer
    /// of them (the last exchange can fill it, or alone be over it), within `within` with what
    /// it leaves past the tail shared among them, where that holds more; else the last
    /// exchange's outputs over the budget when it alone is over it; else none.
    fn fitted(
        &self,
        tail_start: usize,
        rule: TailRule,
        pairs: &ToolPairs,
        sizes: OutputSizes<'_>,
    ) -> (usize, TailRule, Option<TailPreviews>, usize) {
        let whole = self.suffix[tail_start];
        // The last exchange alone over the budget holds none of the calls before it: they may
        // still be shown as previews within `within`, as when the budget holds too few of them.
        let last_over = rule == TailRule::LastExchange && whole > self.budget;
        let mut held = None;
        if !last_over {
            let over = (self.budget / self.wanted.max(1)).max(1);
            held = self.held_from(tail_start, pairs, sizes, self.budget, over);
        }
        // Where the budget holds fewer of the recent calls than wanted (none, where the last
        // exchange fills it), the bound past it may hold more: the tail takes whichever holds
        // more of them.
        let holds = |held: &Option<Held>| {
            held.as_ref()
                .map_or(0, |held| calls_from(self.messages, held.start))
        };
        if holds(&held) < self.wanted && self.within > self.budget.max(whole) {
            let over = (self.within.saturating_sub(whole) / self.wanted).max(1);
            let wider = self.held_from(tail_start, pairs, sizes, self.within, over);
            if holds(&wider) > holds(&held) {
                held = wider;
            }
        }
        match held {
            Some(held) => {
                let previews = held.over.map(|over| TailPreviews {
                    messages: held.start..self.last_exchange,
                    over,
                });
                (held.start, TailRule::RecentCalls, previews, held.tokens)
            }
            None if last_over => {
                let cut = tail_start..self.messages.len();
                let over = self.shared_by_outputs(cut.clone(), whole, pairs, sizes);
                let kept = whole - excess(self.messages, cut.clone(), over, pairs, sizes);
                let previews = TailPreviews {
                    messages: cut,
                    over,
                };
                let (start, tokens) = self.whole_before(tail_start, kept);
                (start, rule, Some(previews), tokens)
            }
            None => (tail_start, rule, None, whole),
        }
    }

    /// The tail before a last exchange (from `tail_start`, `kept` tokens once its previews are
    /// made) moved back over the agent's calls before it, one step of calls at a time and
    /// whole, as far as what those previews leave of the budget holds them and no further than
    /// the last `wanted` calls: a preview keeps a few hundred tokens of an output over the
    /// budget, and the budget it frees is what the tail is for, the work the agent was acting
    /// on, where the summary would stand for it instead. With its tokens. The head keeps at
    /// least one message.
    fn whole_before(&self, tail_start: usize, kept: usize) -> (usize, usize) {
        let mut found = (tail_start, kept);
        let mut step = tail_start;
        while calls_from(self.messages, step) < self.wanted {
            let Some(call) = self.messages[self.pinned..step]
                .iter()
                .rposition(|message| {
                    message
                        .parts
                        .iter()
                        .any(|part| part.as_tool_call().is_some())
                })
            else {
                break;
            };
            let start = take_calls_along(self.pinned + call, self.pinned, self.earliest_need);
            let tokens = self.suffix[start] - self.suffix[tail_start] + kept;
            if start <= self.pinned || tokens > self.budget {
                break;
            }
            found = (start, tokens);
            step = start;
        }
        found
    }

    /// What each output of `messages[cut]` (`whole` tokens in all) may keep for the whole to
    /// fit the budget: the budget less what nothing cuts (the assistant's words and calls, a
    /// protected tool's output), in equal shares among the outputs a preview makes smaller, and
    /// never more than the budget. A last exchange of several outputs, each cut to the whole
    /// budget, would be several budgets; in a room that a system prompt and tools leave small,
    /// that is a request over the window. But never less than a whole preview
    /// (`prune.preview_bytes`) of the largest, as far as the tail's cap holds them: where the
    /// calls take the budget (a Write's whole file), a share of next to nothing would bring the
    /// tail no nearer it, and cut the result the agent is acting on (150 tokens of a grep) to
    /// its note, for a saving of a hundred tokens. The budget where no output is made smaller
    /// by a preview (a caller that makes none, [`split`]).
    fn shared_by_outputs(
        &self,
        cut: Range<usize>,
        whole: usize,
        pairs: &ToolPairs,
        sizes: OutputSizes<'_>,
    ) -> usize {
        // Each output that a preview makes smaller: whole, and as a whole preview (the most a
        // preview keeps).
        let cuttable: Vec<(usize, usize)> = self.messages[cut]
            .iter()
            .flat_map(|message| &message.parts)
            .filter_map(|part| match part {
                Part::ToolResult(result) => {
                    let tool = pairs.tool_name(self.messages, result).unwrap_or_default();
                    let (tokens, preview) = sizes(result, tool, usize::MAX);
                    (sizes(result, tool, 1).1 < tokens).then_some((tokens, preview))
                }
                _ => None,
            })
            .collect();
        if cuttable.is_empty() {
            return self.budget.max(1);
        }
        let count = cuttable.len();
        let fixed = whole.saturating_sub(cuttable.iter().map(|(tokens, _)| tokens).sum());
        let share = self.budget.saturating_sub(fixed) / count;
        let preview = cuttable
            .iter()
            .map(|(_, preview)| *preview)
            .max()
            .unwrap_or(0);
        let floor = preview.min(self.cap.saturating_sub(fixed) / count);
        share.max(floor).clamp(1, self.budget.max(1))
    }

    /// The earliest start before `tail_start`, one step of calls at a time, that holds no more
    /// than `wanted` calls back and fits `budget`, whole where it can, else with the outputs
    /// before the last exchange over `over` tokens cut to previews (an early compaction takes
    /// only a tail with none); `None` when the tail holds enough calls already or not even one
    /// more step fits. The head keeps at least one message.
    fn held_from(
        &self,
        tail_start: usize,
        pairs: &ToolPairs,
        sizes: OutputSizes<'_>,
        budget: usize,
        over: usize,
    ) -> Option<Held> {
        let calls_from = |start: usize| calls_from(self.messages, start);
        if self.wanted == 0 || calls_from(tail_start) >= self.wanted {
            return None;
        }
        // What previews would save from `counted_from` to the last exchange, grown as the
        // start moves back.
        let mut counted_from = tail_start.min(self.last_exchange);
        let mut saved = excess(
            self.messages,
            counted_from..self.last_exchange,
            over,
            pairs,
            sizes,
        );
        let mut held = None;
        let mut step = tail_start;
        while let Some(call) = self.messages[self.pinned..step]
            .iter()
            .rposition(|message| {
                message
                    .parts
                    .iter()
                    .any(|part| matches!(part, Part::ToolCall(_)))
            })
        {
            let start = take_calls_along(self.pinned + call, self.pinned, self.earliest_need);
            if start <= self.pinned {
                break;
            }
            saved += excess(self.messages, start..counted_from, over, pairs, sizes);
            counted_from = start;
            // Whole where they fit whole: previews only where the tail fits only so.
            let (tokens, over) = match self.suffix[start] {
                whole if whole <= budget => (whole, None),
                whole => (whole - saved, Some(over)),
            };
            if tokens > budget {
                break;
            }
            held = Some(Held {
                start,
                tokens,
                over,
            });
            if calls_from(start) >= self.wanted {
                break;
            }
            step = start;
        }
        held
    }
}

/// The tail of a last turn larger than the budget: its longest suffix within `budget` that
/// starts at a message boundary past any result whose call is before it
/// ([`TailRule::Suffix`]), cut back to its last `min_tail_calls` calls when it holds more
/// ([`TailRule::LatestCalls`]).
fn suffix_tail(
    messages: &[Message],
    suffix: &[usize],
    pinned: usize,
    budget: usize,
    settings: &TailSettings,
    earliest_need: &[usize],
) -> (usize, TailRule) {
    let fits = (pinned..=messages.len())
        .find(|&index| suffix[index] <= budget)
        .unwrap_or(messages.len());
    let fits = skip_orphaned_results(fits, pinned, earliest_need);
    let latest = latest_calls(messages, fits, settings.rules.min_tail_calls, earliest_need);
    if latest > fits {
        (latest, TailRule::LatestCalls)
    } else {
        (fits, TailRule::Suffix)
    }
}

/// Where the tail from `start` begins once it holds no more than the last `wanted` tool calls
/// (the message of the `wanted`-th answered call from the end, with any call whose result
/// follows); `start` when it holds no more than that, or `wanted` is 0.
fn latest_calls(
    messages: &[Message],
    start: usize,
    wanted: usize,
    earliest_need: &[usize],
) -> usize {
    if wanted == 0 || calls_from(messages, start) <= wanted {
        return start;
    }
    let mut seen = 0;
    for (offset, calls) in condense_core::answered_calls_from_end(&messages[start..]) {
        seen += calls;
        if seen >= wanted {
            return take_calls_along(start + offset, start, earliest_need).max(start);
        }
    }
    start
}

/// The tool calls in `messages[start..]` that have their result there: the agent's recent work
/// ([`condense_core::answered_calls_from_end`]; a call a log never answered is none).
fn calls_from(messages: &[Message], start: usize) -> usize {
    condense_core::answered_calls_from_end(&messages[start..])
        .map(|(_, calls)| calls)
        .sum()
}

/// The tokens that cutting every output of `messages[within]` over `over` tokens to its preview
/// saves.
fn excess(
    messages: &[Message],
    within: Range<usize>,
    over: usize,
    pairs: &ToolPairs,
    sizes: OutputSizes<'_>,
) -> usize {
    messages[within]
        .iter()
        .flat_map(|message| &message.parts)
        .filter_map(|part| match part {
            Part::ToolResult(result) => {
                let tool = pairs.tool_name(messages, result).unwrap_or_default();
                let (whole, preview) = sizes(result, tool, over);
                (whole > over).then(|| whole.saturating_sub(preview))
            }
            _ => None,
        })
        .sum()
}

/// Where the last exchange begins: the last assistant message (its calls' results follow it),
/// or the last message when no assistant spoke; never inside the pinned messages.
fn last_exchange_start(messages: &[Message], pinned: usize, earliest_need: &[usize]) -> usize {
    let last = messages
        .iter()
        .rposition(|message| message.role == Role::Assistant)
        .or_else(|| messages.len().checked_sub(1))
        .unwrap_or(0)
        .max(pinned);
    take_calls_along(last.min(messages.len()), pinned, earliest_need)
}

/// For each message, the index of the earliest message it cannot go without: the call one of
/// its results answers, an opaque part it is linked to ([`Part::opaque_link`]: a built-in
/// tool's call that condense keeps whole, and its output), or the first message of the answer it
/// continues (an answer of several assistant messages, as a Responses answer's reasoning item
/// and the calls it led to, or a Claude Code log's blocks, is never parted: the API refuses a
/// call without the reasoning that made it), or, for a result whose call the request does not
/// show (an `item_reference` to a call the provider stores), the answer before it;
/// `usize::MAX` when it needs nothing before it.
fn earliest_needs(messages: &[Message], pairs: &ToolPairs) -> Vec<usize> {
    // Where each link id first appears.
    let mut linked: HashMap<&str, usize> = HashMap::new();
    let mut earliest = Vec::with_capacity(messages.len());
    let mut answer_start = None;
    for (index, message) in messages.iter().enumerate() {
        let mut needed = usize::MAX;
        if message.role == Role::Assistant {
            let continues = index > 0 && messages[index - 1].role == Role::Assistant;
            if continues {
                needed = answer_start.unwrap_or(usize::MAX);
            } else {
                answer_start = Some(index);
            }
        }
        for part in &message.parts {
            let site = match part {
                Part::ToolResult(result) => pairs
                    .call_site(&result.call_id)
                    .map(|site| site.message)
                    .or(answer_start),
                _ => part
                    .opaque_link()
                    .map(|link| *linked.entry(link).or_insert(index))
                    .filter(|&first| first < index),
            };
            needed = needed.min(site.unwrap_or(usize::MAX));
        }
        earliest.push(needed);
    }
    earliest
}

/// Moves `start` back until no result in the tail has its call in the head, or to the pinned
/// messages, which are never summarized (what a tail message needs among them stays anyway).
fn take_calls_along(mut start: usize, pinned: usize, earliest_need: &[usize]) -> usize {
    if start >= earliest_need.len() {
        return start;
    }
    loop {
        let needed = earliest_need[start..]
            .iter()
            .copied()
            .min()
            .unwrap_or(usize::MAX);
        let back = needed.max(pinned);
        if back >= start {
            return start;
        }
        start = back;
    }
}

/// Moves `start` forward past every result whose call is before it and not among the pinned
/// messages (which stay).
fn skip_orphaned_results(mut start: usize, pinned: usize, earliest_need: &[usize]) -> usize {
    while start < earliest_need.len()
        && earliest_need[start..]
            .iter()
            .any(|&call| call < start && call >= pinned)
    {
        start += 1;
    }
    start
}
