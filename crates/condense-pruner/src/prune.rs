use std::borrow::Cow;
use std::collections::HashMap;

use condense_core::{
    Compacted, Conversation, Message, Part, Phase, ToolOutput, ToolPairs, ToolResult,
};
use condense_tokenizer::TokenCounter;

use condense_text::thousands;

use crate::note::preview;
use crate::trim::{self, TRIM_TOOL};
use crate::{
    Clock, Decision, DecisionLog, MicrocompactReport, OutputReport, PreviousRequest, PruneReport,
    PruneSettings, Reason, Store, StoreError, Thresholds, TrimOutcome, TrimRefusal, TrimReport,
    handle_of,
};

#[derive(Debug, thiserror::Error)]
/// Why phase 1 could not run; on error nothing has changed.
#[non_exhaustive]
pub enum PruneError {
    #[error(
        "could not store the original of tool output `{call_id}` (message {message}), so nothing was pruned: {source}"
    )]
    /// An original could not be stored.
    Store {
        /// The call whose output it is.
        call_id: String,
        /// The message holding it.
        message: usize,
        #[source]
        /// The store's error.
        source: StoreError,
    },
    #[error(
        "could not store the whole input of tool call `{call_id}` (message {message}), so it was not cut: {source}"
    )]
    /// The whole input of a call about to be cut to a preview could not be stored.
    StoreInput {
        /// The call.
        call_id: String,
        /// The message holding it.
        message: usize,
        #[source]
        /// The store's error.
        source: StoreError,
    },
    #[error(
        "could not store the whole of the person's message {message}, so it was not cut: {source}"
    )]
    /// The whole of a message of the person's about to be cut could not be stored.
    StoreMessage {
        /// The message.
        message: usize,
        #[source]
        /// The store's error.
        source: StoreError,
    },
    #[error("cannot serialise the person's message {message} to store it: {reason}")]
    /// A message of the person's could not be serialized.
    SerializeMessage {
        /// The message.
        message: usize,
        /// Why.
        reason: String,
    },
    #[error(
        "cannot serialise the original of tool output `{call_id}` (message {message}): {reason}"
    )]
    /// An output of blocks could not be serialized.
    Serialize {
        /// The call whose output it is.
        call_id: String,
        /// The message holding it.
        message: usize,
        /// Why.
        reason: String,
    },
}

/// Runs phase 1 over a conversation. Borrowing everything it needs keeps one pruner cheap to make
/// per request, with the token cache and the store living as long as the harness wants.
pub struct Pruner<'a> {
    /// The rules.
    pub settings: &'a PruneSettings,
    /// Counts tokens.
    pub counter: &'a dyn TokenCounter,
    /// Keeps originals.
    pub store: &'a dyn Store,
    /// Gives the time of decisions.
    pub clock: &'a dyn Clock,
}

impl std::fmt::Debug for Pruner<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pruner")
            .field("settings", self.settings)
            .finish_non_exhaustive()
    }
}

/// What one call knows about the request it prepares, beyond the conversation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PruneRequest {
    /// The model's context window: adaptive thresholds, the autonomous-run boundary and the
    /// skip boundary's exception for an output larger than the window need it.
    pub context_window: Option<usize>,
    /// When the harness sent its previous request (milliseconds since the epoch), for
    /// time-based microcompact. A conversation whose format timestamps its messages (Claude
    /// Code) tells it itself; this is used when it does not.
    pub previous_request_ms: Option<u64>,
    /// The walk (age, duplicates, superseded reads) is left out for this request: the host
    /// found it not due for compaction, and with the provider's cache warm every rewrite of the
    /// prefix costs a cache write that pays only when it saves a summary or a failure. Frozen
    /// decisions, the agent's trims, microcompact and the per-turn budget still apply.
    pub skip_walk: bool,
    /// What a token of the provider's cached prefix costs more, in cache reads, when a
    /// replacement makes the provider read it again uncached (`compaction.cache_rewrite_cost`,
    /// as the request's model prices it): what a duplicate of a fresh result must save to be
    /// replaced ([`crate::PruneRules::duplicates_of_fresh`]). `0`, where no cache is kept (a saved
    /// file compacted offline).
    pub cache_rewrite_cost: f64,
}

impl PruneRequest {
    /// A request to a model with this window, with no previous request known.
    pub fn window(context_window: Option<usize>) -> PruneRequest {
        PruneRequest {
            context_window,
            previous_request_ms: None,
            skip_walk: false,
            cache_rewrite_cost: 0.0,
        }
    }
}

/// The first message nothing may touch: the `skip_user_turns`-th user turn from the end. When the
/// conversation has fewer user turns than that, every message is inside (`0`); with
/// `skip_user_turns = 0`, none is (`messages.len()`).
pub fn boundary(messages: &[Message], skip_user_turns: usize) -> usize {
    if skip_user_turns == 0 {
        return messages.len();
    }
    let turns = condense_core::user_turns(messages);
    match turns.len().checked_sub(skip_user_turns) {
        Some(index) => turns[index],
        None => 0,
    }
}

/// The boundary one call uses: [`boundary`] by user turns, unless what follows it is more than
/// half of `context_window` (then it protects more than the model can use: an autonomous run is
/// one user turn), in which case it is the message holding the `skip_tool_calls`-th tool call
/// from the end, if that is later. Without a window, user turns alone decide.
pub fn boundary_for(
    messages: &[Message],
    settings: &PruneSettings,
    counter: &dyn TokenCounter,
    context_window: Option<usize>,
) -> usize {
    boundary_counted(messages, &[], settings, counter, context_window)
}

/// [`boundary_for`] with the messages' counts when the caller has them (`counts[i]` is message
/// `i`'s; a slice of any other length, such as an empty one: counted here).
fn boundary_counted(
    messages: &[Message],
    counts: &[usize],
    settings: &PruneSettings,
    counter: &dyn TokenCounter,
    context_window: Option<usize>,
) -> usize {
    let by_turns = boundary(messages, settings.rules.skip_user_turns);
    let Some(window) = context_window else {
        return by_turns;
    };
    let after: usize = if counts.len() == messages.len() {
        counts[by_turns..].iter().sum()
    } else {
        counter.count_each(&messages[by_turns..]).iter().sum()
    };
    if after <= window / 2 {
        return by_turns;
    }
    by_turns.max(boundary_by_calls(messages, settings.rules.skip_tool_calls))
}

/// The message holding the `calls`-th tool call from the end, counting the calls that have a
/// result ([`condense_core::answered_calls_from_end`]: one a log never answered has no output
/// to keep) (`0` when there are fewer; `messages.len()` with `calls = 0`).
pub fn boundary_by_calls(messages: &[Message], calls: usize) -> usize {
    if calls == 0 {
        return messages.len();
    }
    let mut seen = 0;
    for (index, answered) in condense_core::answered_calls_from_end(messages) {
        seen += answered;
        if seen >= calls {
            return index;
        }
    }
    0
}

/// One tool output of the conversation and what this call decides for it.
struct Output<'c> {
    message: usize,
    part: usize,
    result: &'c ToolResult,
    tool: &'c str,
    protected: bool,
    /// Which run of results (not separated by an assistant message) it belongs to.
    group: usize,
    /// Its tokens as it stands.
    tokens: usize,
    /// Why it is kept or replaced; `None` until a rule has judged it.
    reason: Option<Reason>,
}

/// A replacement decided in this call, applied only once every original is stored.
struct Replacement {
    output: usize,
    content: String,
    marker: Compacted,
    /// Whether the original is still to be stored (`false` when the store has it: frozen). Its
    /// bytes are taken from the output again then, not kept here: most candidates are never
    /// applied (their batch stays below the minimum), and copying each one's text only to hash
    /// it cost 2 to 7 % of a call.
    store: bool,
}

/// What the call decides: one record per output, the replacements in the order they were
/// decided, and the fresh outputs the per-turn budget kept.
struct Plan<'c> {
    outputs: Vec<Output<'c>>,
    replacements: Vec<Replacement>,
    /// Fresh outputs the per-turn budget saw and kept: logged as kept once the call succeeds.
    kept_fresh: Vec<usize>,
}

/// Why the walk would replace an output.
#[derive(Debug, Clone)]
enum Ground {
    /// Old: past the protect window.
    Age,
    /// Identical to this newer surviving output.
    Duplicate(usize),
    /// A read made stale by a later call.
    Superseded(Supersession),
    /// Time-based microcompact: the cache had expired (not the walk's, but the same kind of
    /// placeholder).
    CacheCold,
}

/// The later call that made a read stale.
#[derive(Debug, Clone)]
struct Supersession {
    tool: String,
    message: usize,
}

/// A candidate of the walk: the output and why.
type Candidate = (usize, Ground);

impl Pruner<'_> {
    /// Prunes `conversation` in place and records every new decision in `log`. On error neither
    /// the conversation nor the log has changed.
    ///
    /// The steps are phase 1's rules in order (ARCHITECTURE.md, "Where to add"): frozen decisions first, the agent's trims, then
    /// time-based microcompact (which, when it clears anything, ends the call's rules there), the
    /// per-turn budget, the walk, and the duplicates of the request's fresh results; every
    /// original is stored before anything changes.
    pub fn prune(
        &self,
        conversation: &mut Conversation,
        log: &mut DecisionLog,
        request: PruneRequest,
    ) -> Result<PruneReport, PruneError> {
        self.prune_counted(conversation, &[], log, request)
    }

    /// [`Pruner::prune`] for a caller that has counted the messages already (`counts`, one per
    /// message, as [`TokenCounter::count_each`] gives them; empty when it has not): the pipeline
    /// counts every message before pruning, and counting the unprotected tail again for the
    /// boundary was about 6 % of a proxied request's instructions.
    pub fn prune_counted(
        &self,
        conversation: &mut Conversation,
        counts: &[usize],
        log: &mut DecisionLog,
        request: PruneRequest,
    ) -> Result<PruneReport, PruneError> {
        let context_window = request.context_window;
        let thresholds = Thresholds::for_window(self.settings, context_window);
        let boundary = boundary_counted(
            &conversation.messages,
            counts,
            self.settings,
            self.counter,
            context_window,
        );
        let now = self.clock.now_ms();

        let messages = &conversation.messages;
        let mut plan = self.plan(messages);
        self.apply_log(&mut plan, log, context_window);
        let trims = self.agent_trims(&mut plan, messages, log, now)?;
        let microcompact = self.microcompact(&mut plan, messages, boundary, request, now)?;
        let walk = if microcompact.as_ref().is_some_and(|micro| micro.cleared > 0) {
            // Claude Code: the time-based clear short-circuits the other rules for this request.
            WalkOutcome::default()
        } else {
            self.turn_budget(&mut plan, log, boundary, context_window, now)?;
            let walk = if request.skip_walk {
                WalkOutcome::default()
            } else {
                self.walk(&mut plan, messages, boundary, thresholds, now)?
            };
            if self.settings.rules.duplicates_of_fresh {
                self.repeats_of_fresh(
                    &mut plan,
                    messages,
                    counts,
                    request.cache_rewrite_cost,
                    now,
                )?;
            }
            walk
        };
        self.store_originals(&plan)?;
        let (outputs, tokens_freed) = self.report(&plan);
        let decided = Decided::from(plan);
        decided.apply(conversation, log);
        let inputs = self.cut_inputs_again(conversation, log);
        let messages = self.cut_person_again(conversation, log);
        let tokens_freed = tokens_freed
            + inputs
                .iter()
                .map(|input| input.tokens_before.saturating_sub(input.tokens_after))
                .sum::<usize>()
            + messages
                .iter()
                .map(|cut| cut.tokens_before.saturating_sub(cut.tokens_after))
                .sum::<usize>();

        Ok(PruneReport {
            boundary,
            thresholds,
            walk_stopped_at: walk.stopped_at,
            reclaimable_tokens: walk.reclaimable,
            batch_applied: walk.applied,
            tokens_freed,
            outputs,
            trims,
            inputs,
            messages,
            microcompact,
        })
    }

    /// An output identical to one of the request's fresh results (those after its last
    /// assistant message: what the agent has just been given) becomes a pointer to that fresh
    /// one, inside the skip boundary too: the request still shows the agent every byte of it,
    /// once, where the agent last asked for it (an editor's view of the same file three times
    /// in a row, a test run again with nothing changed). Only where it pays on this very
    /// request, by the cost model: the provider reads again, uncached, what follows the first
    /// output replaced up to the last assistant message (`rewrite_cost` cache reads a token
    /// more than reading it cached), and the request saves the outputs' tokens less their
    /// pointers'. Every later request saves the same again and carries the same pointers (a
    /// frozen decision); later still the gain only shrinks, as more follows the older copy, so
    /// the one request the fresh copy arrives is when this is weighed.
    fn repeats_of_fresh(
        &self,
        plan: &mut Plan<'_>,
        messages: &[Message],
        counts: &[usize],
        rewrite_cost: f64,
        now: u64,
    ) -> Result<(), PruneError> {
        let Some(last_answer) = messages
            .iter()
            .rposition(|message| message.role == condense_core::Role::Assistant)
        else {
            return Ok(());
        };
        let min_chars = self.settings.rules.duplicate_min_chars;
        // The fresh results by tool and length: an older output is compared, byte for byte,
        // only with those of its tool and length, so most requests compare nothing.
        let fresh: Vec<(usize, &str, usize)> = plan
            .outputs
            .iter()
            .enumerate()
            .filter(|(_, output)| output.message > last_answer && shown_whole(output))
            .filter_map(|(index, output)| {
                let text = output.result.content.text();
                (text.len() >= min_chars && text.chars().count() >= min_chars)
                    .then(|| (index, output.tool, text.len()))
            })
            .collect();
        if fresh.is_empty() {
            return Ok(());
        }
        let mut sizes: Option<Vec<usize>> = None;
        let mut saved = 0usize;
        let mut chosen = Vec::new();
        for index in (0..plan.outputs.len()).rev() {
            let output = &plan.outputs[index];
            if output.message >= last_answer
                || output.protected
                || !shown_whole(output)
                || !fresh.iter().any(|&(_, tool, _)| tool == output.tool)
            {
                continue;
            }
            // Only now its text: an output of blocks is written out as JSON to be compared.
            let text = output.result.content.text();
            let newer = fresh.iter().find_map(|&(other, tool, len)| {
                (tool == output.tool
                    && len == text.len()
                    && plan.outputs[other].result.content.text() == text)
                    .then_some(other)
            });
            let Some(newer) = newer else {
                continue;
            };
            if id_reused(plan, index) {
                continue;
            }
            let replacement = self.placeholder(plan, index, &Ground::Duplicate(newer), now)?;
            let gain = output
                .tokens
                .saturating_sub(self.counter.count_text(&replacement.content));
            let sizes = sizes.get_or_insert_with(|| {
                if counts.len() == messages.len() {
                    counts.to_vec()
                } else {
                    self.counter.count_each(messages)
                }
            });
            // What the provider read cached before and now reads again: the rest of the
            // output's own message and every message after it that the last request sent.
            let rewritten = sizes[output.message].saturating_sub(output.tokens)
                + sizes[output.message + 1..last_answer].iter().sum::<usize>();
            if (saved + gain) as f64 > rewritten as f64 * rewrite_cost {
                saved += gain;
                chosen.push((replacement, newer));
            }
        }
        for (replacement, newer) in chosen {
            plan.outputs[replacement.output].reason = Some(Reason::Duplicate {
                newer: plan.outputs[newer].result.call_id.clone(),
            });
            plan.replacements.push(replacement);
        }
        Ok(())
    }

    /// Cuts every unprotected output in the messages `within` whose tokens exceed `limit` to a
    /// preview within about `limit` tokens (and `prune.preview_bytes`), its original stored
    /// first, and records each in `log` so later requests repeat it. Phase 2 uses it for the
    /// tail to fit its budget: when the last exchange alone is larger (the compacted session
    /// must still end with it), and when the tail holds the agent's recent calls with their
    /// larger outputs as previews. Returns how many outputs were cut.
    pub fn preview_oversized(
        &self,
        conversation: &mut Conversation,
        within: std::ops::Range<usize>,
        limit: usize,
        log: &mut DecisionLog,
    ) -> Result<usize, PruneError> {
        let plan = self.plan(&conversation.messages);
        let (decided, cut) = self.previews_over(plan, within, limit, false)?;
        decided.apply(conversation, log);
        Ok(cut)
    }

    /// The last resort of a request still over the window when everything else that may be cut
    /// was: the outputs of protected tools in the messages `within` cut to previews, the largest
    /// first and each to the same share of tokens, until about `excess` tokens are freed
    /// (originals stored, every cut logged and made again on later requests). Protection keeps an
    /// output from being pruned as a saving; it cannot make the provider take a request larger
    /// than its window, which would keep nothing. Returns how many outputs were cut.
    pub fn preview_protected_to_fit(
        &self,
        conversation: &mut Conversation,
        within: std::ops::Range<usize>,
        excess: usize,
        log: &mut DecisionLog,
    ) -> Result<usize, PruneError> {
        if excess == 0 {
            return Ok(0);
        }
        let plan = self.plan(&conversation.messages);
        let mut sizes: Vec<usize> = plan
            .outputs
            .iter()
            .filter(|output| {
                within.contains(&output.message)
                    && output.protected
                    && output.result.compacted.is_none()
            })
            .map(|output| output.tokens)
            .collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let note = self.note_tokens(&self.settings.rules.preview_note);
        let (_, share) = crate::inputs::shares(&sizes, excess, note);
        let (decided, cut) = self.previews_over(plan, within, share, true)?;
        decided.apply(conversation, log);
        Ok(cut)
    }

    /// [`Pruner::preview_oversized`] decided on `plan` (the conversation's, made once by the
    /// caller), of the protected tools' outputs alone when `protected`: what to apply, and how
    /// many outputs it cuts, the originals stored first.
    fn previews_over(
        &self,
        mut plan: Plan<'_>,
        within: std::ops::Range<usize>,
        limit: usize,
        protected: bool,
    ) -> Result<(Decided, usize), PruneError> {
        let now = self.clock.now_ms();
        for index in 0..plan.outputs.len() {
            let output = &plan.outputs[index];
            if !within.contains(&output.message)
                || output.protected != protected
                || output.result.compacted.is_some()
                || output.tokens <= limit
            {
                continue;
            }
            let text = output.result.content.text();
            let bytes = self.preview_bytes_within(&text, output.tokens, output.tool, limit);
            let replacement = self.preview(&plan, index, text.chars().count(), bytes, now)?;
            // An output whose preview would be no shorter stays whole.
            if replacement.content.len() < text.len() {
                plan.replacements.push(replacement);
            }
        }
        self.store_originals(&plan)?;
        let cut = plan.replacements.len();
        Ok((Decided::from(plan), cut))
    }

    /// The tokens `result` would take as the preview [`Pruner::preview_oversized`] makes of it
    /// within `limit` tokens (its tool named `tool` in the note; `whole`, its tokens as it is):
    /// for a cut to count what a tail of previews keeps before making them. Never more than
    /// the output whole.
    pub fn preview_tokens(
        &self,
        result: &ToolResult,
        whole: usize,
        tool: &str,
        limit: usize,
    ) -> usize {
        let text = result.content.text();
        let bytes = self.preview_bytes_within(&text, whole, tool, limit);
        let shown = preview(&text, bytes);
        let handle = handle_of(&crate::store::stored_bytes(&result.content).unwrap_or_default());
        let chars = text.chars().count();
        let note = self.preview_note_of(tool, whole, chars, shown.chars().count(), &handle);
        self.counter
            .count_text(&format!("{shown}{note}"))
            .min(whole)
    }

    /// How many bytes of `text` (`tokens` whole) a preview keeps for it, its note included, to
    /// stay within about `limit` tokens: the output's own bytes a token times what the note
    /// leaves of `limit`, and never more than `prune.preview_bytes`. An equal share of a tail
    /// budget then holds as many previews as it has shares.
    fn preview_bytes_within(&self, text: &str, tokens: usize, tool: &str, limit: usize) -> usize {
        let chars = text.chars().count();
        // The note at its longest (as many characters shown as there are), with a handle of the
        // same form as the output's own: hex digits count as hex digits do.
        let note = self.preview_note_of(tool, tokens, chars, chars, &handle_of(b""));
        let room = limit.saturating_sub(self.counter.count_text(&note));
        (text.len().saturating_mul(room) / tokens.max(1)).min(self.settings.rules.preview_bytes)
    }

    /// The note after a preview of `shown` of the `chars` characters (`tokens` tokens) of an
    /// output of `tool`, kept as `handle`.
    fn preview_note_of(
        &self,
        tool: &str,
        tokens: usize,
        chars: usize,
        shown: usize,
        handle: &str,
    ) -> String {
        self.settings.rules.preview_note.render(&[
            ("tool", tool),
            ("tokens", &thousands(tokens)),
            ("chars", &thousands(chars)),
            ("handle", handle),
            ("shown", &thousands(shown)),
        ])
    }

    /// Every tool output, with its tokens and whether its tool is protected.
    fn plan<'c>(&self, messages: &'c [Message]) -> Plan<'c> {
        let pairs = ToolPairs::index(messages);
        let mut outputs = Vec::new();
        let mut group = 0;
        let mut group_has_results = false;
        for (message_index, message) in messages.iter().enumerate() {
            if message.role == condense_core::Role::Assistant && group_has_results {
                group += 1;
                group_has_results = false;
            }
            for (part_index, part) in message.parts.iter().enumerate() {
                let Part::ToolResult(result) = part else {
                    continue;
                };
                group_has_results = true;
                let tool = pairs
                    .tool_name(messages, result)
                    .unwrap_or("(unknown tool)");
                outputs.push(Output {
                    message: message_index,
                    part: part_index,
                    result,
                    tool,
                    protected: self.settings.rules.protected_tools.contains(tool),
                    group,
                    tokens: self.counter.count_output(&result.content),
                    reason: None,
                });
            }
        }
        Plan {
            outputs,
            replacements: Vec::new(),
            kept_fresh: Vec::new(),
        }
    }

    /// Frozen decisions: outputs already replaced stay as they are; outputs the log says were
    /// replaced get the same replacement again. Protected outputs are never touched, whatever an
    /// older log says, but where no request could carry them whole: one larger than the whole
    /// `context_window` ([`Pruner::turn_budget`]), and one the log has cut to a preview, which
    /// only the per-turn budget and the last resort of a compaction over the window do
    /// ([`Pruner::preview_protected_to_fit`]; a preview the per-turn budget made before the
    /// tool was protected is repeated too, as the prefix the provider cached holds it).
    fn apply_log(&self, plan: &mut Plan<'_>, log: &DecisionLog, context_window: Option<usize>) {
        for index in 0..plan.outputs.len() {
            let output = &mut plan.outputs[index];
            if output.result.compacted.is_some() {
                output.reason = Some(Reason::AlreadyReplaced);
                continue;
            }
            // A protected output is left alone but where it could not be sent whole: larger
            // than the whole window, or cut by the last resort of a compaction that could not
            // fit the window otherwise ([`Pruner::preview_protected_to_fit`], logged as a
            // preview).
            let cut_to_fit = context_window.is_some_and(|window| output.tokens > window)
                || matches!(
                    log.get(&output.result.call_id),
                    Some(Decision::Replaced { marker, .. }) if marker.phase == Phase::TurnBudget
                );
            if output.protected && !cut_to_fit {
                output.reason = Some(Reason::Protected);
                continue;
            }
            let decision = log.get(&output.result.call_id);
            if decision.is_none() && self.is_placeholder(&output.result.content) {
                // Replaced before and written to a file, which does not keep the marker.
                output.reason = Some(Reason::AlreadyReplaced);
                continue;
            }
            if let Some(Decision::Replaced { content, marker }) = decision {
                let unchanged =
                    matches!(&output.result.content, ToolOutput::Text(text) if text == content);
                // Some harnesses reuse a call id (SWE-agent does): the decision is for the
                // output whose original the marker names, not for another under the same id,
                // which is judged afresh.
                let same_output = unchanged
                    || marker.handle.is_empty()
                    || original_bytes(output).is_ok_and(|bytes| handle_of(&bytes) == marker.handle);
                if !same_output {
                    continue;
                }
                output.reason = Some(if unchanged {
                    Reason::AlreadyReplaced
                } else {
                    Reason::Frozen
                });
                // Even an unchanged text gets its marker back: a file read back from disk loses
                // markers, and the walk needs them to know where to stop.
                plan.replacements.push(Replacement {
                    output: index,
                    content: content.clone(),
                    marker: marker.clone(),
                    store: false,
                });
            }
        }
    }

    /// Whether an output is one of condense's own placeholders (any rule's, as configured), read
    /// back without its marker (files do not keep markers).
    pub fn is_placeholder(&self, content: &ToolOutput) -> bool {
        let ToolOutput::Text(text) = content else {
            return false;
        };
        let settings = self.settings;
        text.starts_with(trim::TRIMMED_PREFIX)
            || [
                &settings.rules.placeholder,
                &settings.rules.preview_note,
                &settings.rules.duplicate_note,
                &settings.rules.superseded_note,
                &settings.microcompact.note,
            ]
            .iter()
            .any(|note| note.recognises(text))
    }

    /// The agent's own trims, before any rule of condense's: each `trim_tool_result` call
    /// replaces its target with the agent's summary, or is refused with a reason.
    fn agent_trims(
        &self,
        plan: &mut Plan<'_>,
        messages: &[Message],
        log: &DecisionLog,
        now: u64,
    ) -> Result<Vec<TrimReport>, PruneError> {
        let mut reports = Vec::new();
        for (message_index, message) in messages.iter().enumerate() {
            for part in &message.parts {
                let Part::ToolCall(call) = part else { continue };
                if call.name != TRIM_TOOL {
                    continue;
                }
                let request = trim::request(&call.input);
                // The results the call can see: those before it, trims' own results aside.
                let earlier: Vec<usize> = (0..plan.outputs.len())
                    .filter(|&index| {
                        plan.outputs[index].message < message_index
                            && plan.outputs[index].tool != TRIM_TOOL
                    })
                    .collect();
                let most_recent = earlier.last().copied();
                let target = match &request.target {
                    Some(id) => earlier
                        .iter()
                        .copied()
                        .find(|&index| plan.outputs[index].result.call_id == *id),
                    None => most_recent,
                };
                let outcome = match (&request.summary, target) {
                    (None, _) => TrimOutcome::Refused {
                        reason: TrimRefusal::NoSummary,
                    },
                    (_, None) => TrimOutcome::Refused {
                        reason: TrimRefusal::UnknownTarget,
                    },
                    (Some(summary), Some(index)) => {
                        self.trim_one(plan, index, most_recent, summary, log, now)?
                    }
                };
                reports.push(TrimReport {
                    call_id: call.id.clone(),
                    target: target
                        .map(|index| plan.outputs[index].result.call_id.clone())
                        .or(request.target),
                    outcome,
                });
            }
        }
        Ok(reports)
    }

    fn trim_one(
        &self,
        plan: &mut Plan<'_>,
        index: usize,
        most_recent: Option<usize>,
        summary: &str,
        log: &DecisionLog,
        now: u64,
    ) -> Result<TrimOutcome, PruneError> {
        let refused = |reason| Ok(TrimOutcome::Refused { reason });
        let output = &plan.outputs[index];
        if output.protected {
            return refused(TrimRefusal::Protected);
        }
        let trimmed_before = matches!(
            log.get(&output.result.call_id),
            Some(Decision::Replaced { marker, .. }) if marker.phase == Phase::AgentTrim
        );
        if trimmed_before {
            return Ok(TrimOutcome::Frozen);
        }
        // Replaced by a rule, by an earlier trim in this call, or a file written back with the
        // trim's text (its marker lost): never wrapped twice.
        if output.reason.is_some()
            || output.result.compacted.is_some()
            || output
                .result
                .content
                .text()
                .starts_with(trim::TRIMMED_PREFIX)
        {
            return refused(TrimRefusal::AlreadyReplaced);
        }
        if Some(index) != most_recent && !self.settings.trim.allow_older {
            return refused(TrimRefusal::NotMostRecent);
        }
        let handle = handle_of(&original_bytes(output)?);
        let chars = output.result.content.text().chars().count();
        let replacement = Replacement {
            output: index,
            content: trim::replacement(summary, &handle),
            marker: marker(now, Phase::AgentTrim, output.tokens, chars, handle),
            store: true,
        };
        plan.outputs[index].reason = Some(Reason::TrimmedByAgent);
        plan.replacements.push(replacement);
        Ok(TrimOutcome::Trimmed)
    }

    /// Time-based microcompact: when the gap since the previous request is longer than the
    /// provider keeps its cache, every result of a compactable tool before the boundary, except
    /// the most recent few, is cleared (its original stored). `None` when the rule is off or the
    /// time of the previous request is unknown.
    fn microcompact(
        &self,
        plan: &mut Plan<'_>,
        messages: &[Message],
        boundary: usize,
        request: PruneRequest,
        now: u64,
    ) -> Result<Option<MicrocompactReport>, PruneError> {
        let settings = &self.settings.microcompact;
        if !settings.enabled {
            return Ok(None);
        }
        let Some((previous, source)) = previous_request(messages, request) else {
            return Ok(None);
        };
        let gap = now.saturating_sub(previous);
        let mut report = MicrocompactReport {
            previous: source,
            idle_minutes: gap / 60_000,
            threshold_minutes: settings.idle_minutes,
            cache_cold: settings.is_cold(gap),
            cleared: 0,
        };
        if !report.cache_cold {
            return Ok(Some(report));
        }
        // Which results count: Claude Code keeps the most recent of all compactable results,
        // cleared or not, so the kept set does not shift as results are cleared.
        let compactable: Vec<usize> = (0..plan.outputs.len())
            .filter(|&index| {
                let output = &plan.outputs[index];
                !output.protected && settings.tools.contains(output.tool)
            })
            .collect();
        let kept_from = compactable.len().saturating_sub(settings.keep());
        let mut cleared = Vec::new();
        // Why the outputs it leaves stay: said only when it clears anything, since otherwise
        // the other rules run and judge them (a decided output is one the walk passes over).
        let mut kept = Vec::new();
        for (rank, &index) in compactable.iter().enumerate() {
            let output = &plan.outputs[index];
            if output.reason.is_some() || output.message >= boundary {
                continue;
            }
            if rank >= kept_from {
                kept.push((index, Reason::KeptRecent));
                continue;
            }
            let replacement = self.placeholder(plan, index, &Ground::CacheCold, now)?;
            if self.counter.count_text(&replacement.content) >= output.tokens {
                kept.push((index, Reason::SmallerThanPlaceholder));
                continue;
            }
            cleared.push(replacement);
        }
        report.cleared = cleared.len();
        if !cleared.is_empty() {
            microcompacted(plan, cleared, kept, boundary);
        }
        Ok(Some(report))
    }

    /// Claude Code's per-turn budget over the outputs seen for the first time, before the skip
    /// boundary. After it the budget touches nothing, with one exception: an output whose
    /// tokens alone exceed the context window could never be sent, so it becomes a preview
    /// there too, and wherever it is, even a protected tool's (protection keeps what can be
    /// sent; a request the provider refuses keeps nothing).
    fn turn_budget(
        &self,
        plan: &mut Plan<'_>,
        log: &DecisionLog,
        boundary: usize,
        context_window: Option<usize>,
        now: u64,
    ) -> Result<(), PruneError> {
        let budget = self.settings.rules.turn_budget_chars;
        let mut start = 0;
        while start < plan.outputs.len() {
            let group = plan.outputs[start].group;
            let end = (start..plan.outputs.len())
                .find(|&index| plan.outputs[index].group != group)
                .unwrap_or(plan.outputs.len());
            let mut fresh: Vec<(usize, usize)> = (start..end)
                .filter(|&index| {
                    let output = &plan.outputs[index];
                    let unsendable = context_window.is_some_and(|window| output.tokens > window);
                    output.reason.is_none()
                        && log.get(&output.result.call_id).is_none()
                        && (unsendable || !output.protected && output.message < boundary)
                })
                .map(|index| {
                    (
                        index,
                        plan.outputs[index].result.content.text().chars().count(),
                    )
                })
                .collect();
            let mut total: usize = fresh.iter().map(|(_, chars)| chars).sum();
            // Largest first; the earlier output first among equals, so the choice is stable.
            fresh.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            for &(index, chars) in &fresh {
                // Inside the boundary only the output larger than the window is here, and it
                // is cut whatever the turn's total; so is a protected one, wherever it is.
                let output = &plan.outputs[index];
                let unsendable = output.message >= boundary || output.protected;
                if total <= budget && !unsendable {
                    plan.kept_fresh.push(index);
                    continue;
                }
                let bytes = self.settings.rules.preview_bytes;
                let replacement = self.preview(plan, index, chars, bytes, now)?;
                total = total - chars + replacement.content.chars().count();
                plan.outputs[index].reason = Some(Reason::OverTurnBudget);
                plan.replacements.push(replacement);
            }
            start = end;
        }
        Ok(())
    }

    /// The output `index` cut to a preview of its first `bytes` (at a line's end), with the note.
    fn preview(
        &self,
        plan: &Plan<'_>,
        index: usize,
        chars: usize,
        bytes: usize,
        now: u64,
    ) -> Result<Replacement, PruneError> {
        let output = &plan.outputs[index];
        let handle = handle_of(&original_bytes(output)?);
        let text = output.result.content.text();
        let shown = preview(&text, bytes);
        let note = self.preview_note_of(
            output.tool,
            output.tokens,
            chars,
            shown.chars().count(),
            &handle,
        );
        Ok(Replacement {
            output: index,
            content: format!("{shown}{note}"),
            marker: marker(now, Phase::TurnBudget, output.tokens, chars, handle),
            store: true,
        })
    }

    /// opencode's walk, with hermes-agent's duplicates folded in: judge each output from the
    /// newest back, then replace the candidates only if together they free the minimum.
    fn walk(
        &self,
        plan: &mut Plan<'_>,
        messages: &[Message],
        boundary: usize,
        thresholds: Thresholds,
        now: u64,
    ) -> Result<WalkOutcome, PruneError> {
        let superseded = if self.settings.rules.supersede_reads {
            superseded_reads(plan, messages)
        } else {
            HashMap::new()
        };
        let mut walk = Walk {
            settings: self.settings,
            boundary,
            protect_tokens: thresholds.protect_tokens,
            stopped_at: None,
            window: 0,
            candidates: Vec::new(),
            survivors: HashMap::new(),
            superseded,
        };
        let mut by_message: Vec<Vec<usize>> = vec![Vec::new(); messages.len()];
        for (index, output) in plan.outputs.iter().enumerate() {
            by_message[output.message].push(index);
        }
        for message_index in (0..messages.len()).rev() {
            walk.stop_at_summary(message_index, &messages[message_index]);
            for &index in by_message[message_index].iter().rev() {
                walk.judge(plan, index);
            }
        }
        let stopped_at = walk.stopped_at;
        let (reclaimable, applied) =
            self.apply_minimum(plan, walk.candidates, thresholds.minimum_tokens, now)?;
        Ok(WalkOutcome {
            stopped_at,
            reclaimable,
            applied,
        })
    }

    /// Prune only when the candidates together free more than the minimum (a prune rewrites the
    /// cached prefix); a placeholder no smaller than its output is never a candidate.
    fn apply_minimum(
        &self,
        plan: &mut Plan<'_>,
        candidates: Vec<Candidate>,
        minimum_tokens: usize,
        now: u64,
    ) -> Result<(usize, bool), PruneError> {
        let mut replacements = Vec::with_capacity(candidates.len());
        let mut reclaimable = 0usize;
        for (index, ground) in candidates {
            let replacement = self.placeholder(plan, index, &ground, now)?;
            let after = self.counter.count_text(&replacement.content);
            let before = plan.outputs[index].tokens;
            if after >= before {
                // A placeholder is not smaller than this output: replacing it would cost tokens.
                plan.outputs[index].reason = Some(Reason::SmallerThanPlaceholder);
                continue;
            }
            reclaimable += before - after;
            replacements.push((replacement, ground));
        }
        let applied = !replacements.is_empty() && reclaimable > minimum_tokens;
        for (replacement, ground) in replacements {
            let index = replacement.output;
            plan.outputs[index].reason = Some(match (applied, ground) {
                (false, _) => Reason::BelowMinimum,
                (true, Ground::Age) => Reason::Pruned,
                (true, Ground::Duplicate(newer)) => Reason::Duplicate {
                    newer: plan.outputs[newer].result.call_id.clone(),
                },
                (true, Ground::Superseded(by)) => Reason::Superseded {
                    by: by.tool,
                    at: by.message,
                },
                (true, Ground::CacheCold) => Reason::Microcompacted,
            });
            if applied {
                plan.replacements.push(replacement);
            }
        }
        Ok((reclaimable, applied))
    }

    fn placeholder(
        &self,
        plan: &Plan<'_>,
        index: usize,
        ground: &Ground,
        now: u64,
    ) -> Result<Replacement, PruneError> {
        let output = &plan.outputs[index];
        let handle = handle_of(&original_bytes(output)?);
        let chars = output.result.content.text().chars().count();
        let mut values = vec![
            ("tool", output.tool.to_owned()),
            ("tokens", thousands(output.tokens)),
            ("chars", thousands(chars)),
            ("handle", handle.clone()),
        ];
        let (note, phase) = match ground {
            Ground::Duplicate(newer) => {
                values.push(("newer", plan.outputs[*newer].result.call_id.clone()));
                (&self.settings.rules.duplicate_note, Phase::Duplicate)
            }
            Ground::Superseded(by) => {
                values.push(("by", by.tool.clone()));
                values.push(("at", by.message.to_string()));
                (&self.settings.rules.superseded_note, Phase::Superseded)
            }
            Ground::Age => (&self.settings.rules.placeholder, Phase::Prune),
            Ground::CacheCold => (&self.settings.microcompact.note, Phase::Microcompact),
        };
        let values: Vec<(&str, &str)> = values
            .iter()
            .map(|(key, value)| (*key, value.as_str()))
            .collect();
        Ok(Replacement {
            output: index,
            content: note.render(&values),
            marker: marker(now, phase, output.tokens, chars, handle),
            store: true,
        })
    }

    /// Every original goes to the store before the conversation changes (ARCHITECTURE.md's invariants: nothing is
    /// lost); frozen replacements were stored when first decided.
    fn store_originals(&self, plan: &Plan<'_>) -> Result<(), PruneError> {
        for replacement in plan.replacements.iter().filter(|r| r.store) {
            let output = &plan.outputs[replacement.output];
            let original = original_bytes(output)?;
            self.store
                .put(&replacement.marker.handle, &original)
                .map_err(|source| PruneError::Store {
                    call_id: output.result.call_id.clone(),
                    message: output.message,
                    source,
                })?;
        }
        Ok(())
    }

    /// One row per output, and the tokens freed in all.
    fn report(&self, plan: &Plan<'_>) -> (Vec<OutputReport>, usize) {
        let mut after: HashMap<usize, usize> = HashMap::new();
        for replacement in &plan.replacements {
            after.insert(
                replacement.output,
                self.counter.count_text(&replacement.content),
            );
        }
        let mut tokens_freed = 0;
        let rows = plan
            .outputs
            .iter()
            .enumerate()
            .map(|(index, output)| {
                let tokens_after = after.get(&index).copied().unwrap_or(output.tokens);
                tokens_freed += output.tokens.saturating_sub(tokens_after);
                OutputReport {
                    message: output.message,
                    call_id: output.result.call_id.clone(),
                    tool: output.tool.to_owned(),
                    reason: output.reason.clone().unwrap_or(Reason::InsideWindow),
                    tokens_before: output.tokens,
                    tokens_after,
                }
            })
            .collect();
        (rows, tokens_freed)
    }
}

/// When the previous request was: the last assistant message's time where the format records
/// one, else what the harness remembered; `None` when neither is known.
fn previous_request(messages: &[Message], request: PruneRequest) -> Option<(u64, PreviousRequest)> {
    let last_assistant = messages
        .iter()
        .rev()
        .find(|message| message.role == condense_core::Role::Assistant)
        .and_then(Message::timestamp_ms);
    match (last_assistant, request.previous_request_ms) {
        (Some(at), _) => Some((at, PreviousRequest::LastAssistantMessage)),
        (None, Some(at)) => Some((at, PreviousRequest::State)),
        (None, None) => None,
    }
}

/// Microcompact's decisions into the plan: what it cleared, why what it kept stays, and, since
/// the other rules do not run on this request, why each output they would have judged stays.
fn microcompacted(
    plan: &mut Plan<'_>,
    cleared: Vec<Replacement>,
    kept: Vec<(usize, Reason)>,
    boundary: usize,
) {
    for (index, reason) in kept {
        plan.outputs[index].reason = Some(reason);
    }
    for replacement in cleared {
        plan.outputs[replacement.output].reason = Some(Reason::Microcompacted);
        plan.replacements.push(replacement);
    }
    for output in &mut plan.outputs {
        if output.reason.is_none() {
            output.reason = Some(if output.message >= boundary {
                Reason::InsideBoundary
            } else {
                Reason::NotCompactable
            });
        }
    }
}

/// The walk's state as it goes from the newest output back.
struct Walk<'s> {
    settings: &'s PruneSettings,
    boundary: usize,
    protect_tokens: usize,
    /// Where it stopped: at the last compaction summary, or at an output pruned before.
    stopped_at: Option<usize>,
    /// Tokens of the newest outputs kept so far (the protect window).
    window: usize,
    candidates: Vec<Candidate>,
    /// Surviving outputs by hash of (tool, text), newest first, to find older duplicates.
    survivors: HashMap<u64, Vec<usize>>,
    /// Reads a later call made stale, by output.
    superseded: HashMap<usize, Supersession>,
}

impl Walk<'_> {
    /// opencode stops at the last compaction summary before the boundary.
    fn stop_at_summary(&mut self, message_index: usize, message: &Message) {
        if self.stopped_at.is_none()
            && message_index < self.boundary
            && message.is_compaction_summary()
        {
            self.stopped_at = Some(message_index);
        }
    }

    /// One output's fate: already judged (and a stop if it was pruned before), inside the
    /// boundary, behind the stop, a duplicate of a newer survivor, inside the protect window, or
    /// a candidate.
    fn judge(&mut self, plan: &mut Plan<'_>, index: usize) {
        let output = &plan.outputs[index];
        let message_index = output.message;
        if let Some(reason) = &output.reason {
            let pruned_before = matches!(reason, Reason::AlreadyReplaced | Reason::Frozen)
                && replaced_phase(plan, index) == Some(Phase::Prune);
            if pruned_before && message_index < self.boundary && self.stopped_at.is_none() {
                self.stopped_at = Some(message_index);
            }
            return;
        }
        let text = output.result.content.text();
        // Only outputs long enough to be replaced as duplicates are hashed and remembered.
        let key = (text.len() >= self.settings.rules.duplicate_min_chars
            && text.chars().count() >= self.settings.rules.duplicate_min_chars)
            .then(|| duplicate_key(output.tool, &text));
        if message_index >= self.boundary {
            plan.outputs[index].reason = Some(Reason::InsideBoundary);
            self.survive(key, index);
            return;
        }
        if self.stopped_at.is_some() {
            plan.outputs[index].reason = Some(Reason::BehindEarlierCompaction);
            return;
        }
        // Stale before old: a superseded read is a candidate whatever the protect window says,
        // and does not use up the window.
        if let Some(by) = self.superseded.get(&index) {
            self.candidates
                .push((index, Ground::Superseded(by.clone())));
            return;
        }
        let newer = key
            .and_then(|key| self.survivors.get(&key))
            .and_then(|same| {
                same.iter().copied().find(|&other| {
                    plan.outputs[other].tool == output.tool
                        && plan.outputs[other].result.content.text() == text
                })
            });
        if let Some(newer) = newer.filter(|_| !id_reused(plan, index)) {
            self.candidates.push((index, Ground::Duplicate(newer)));
            return;
        }
        self.window += output.tokens;
        if self.window > self.protect_tokens {
            self.candidates.push((index, Ground::Age));
        } else {
            plan.outputs[index].reason = Some(Reason::InsideWindow);
            self.survive(key, index);
        }
    }

    fn survive(&mut self, key: Option<u64>, index: usize) {
        if let Some(key) = key {
            self.survivors.entry(key).or_default().push(index);
        }
    }
}

/// Every read whose path a later call edits, writes or reads again, with the first
/// such call: the model works from the newest version, so the older output is stale. An
/// editor's call that failed changed nothing, and makes nothing stale. Paths are
/// compared absolute: a relative one is joined to the directory the call names (Codex's
/// `workdir`), else to the session's working directory where the format records it
/// ([`condense_formats::working_directory`]: Claude Code's `cwd`, Codex's environment context,
/// a system prompt's environment section).
fn superseded_reads(plan: &Plan<'_>, messages: &[Message]) -> HashMap<usize, Supersession> {
    use condense_core::tool_paths::{
        call_directory, edit_failed, normalize, shows_content, touched,
    };
    let by_call: HashMap<&str, usize> = plan
        .outputs
        .iter()
        .enumerate()
        .map(|(index, output)| (output.result.call_id.as_str(), index))
        .collect();
    let mut open: HashMap<String, Vec<usize>> = HashMap::new();
    let mut stale = HashMap::new();
    let mut directories = SessionDirectory::default();
    for (message_index, message) in messages.iter().enumerate() {
        for part in &message.parts {
            let Part::ToolCall(call) = part else { continue };
            let (paths, writes) = touched(&call.name, &call.input);
            let reads = shows_content(&call.name, &call.input);
            // Only a change to the file or a newer view of it makes a read stale; a search or a
            // listing that names the path does not (and its paths need no normalizing, nor the
            // working directory looked up).
            if (!writes && !reads) || paths.is_empty() {
                continue;
            }
            // An editor's call that failed changed nothing: a read before it still shows the
            // file as it is.
            let is_error = by_call
                .get(call.id.as_str())
                .and_then(|&output| plan.outputs[output].result.is_error);
            if !reads && edit_failed(&call.name, &call.input, is_error) {
                continue;
            }
            // Without a session directory a relative path is compared as written (the call's
            // own directory could be absolute while another call's path is relative to a
            // directory nobody recorded); with one, the call's directory is resolved in it.
            let session_directory = directories.at(messages, message_index);
            let call_directory = session_directory.and_then(|session| {
                call_directory(&call.input).map(|directory| normalize(directory, Some(session)))
            });
            let directory = call_directory.as_deref().or(session_directory);
            let paths: Vec<String> = paths
                .iter()
                .map(|path| normalize(path, directory))
                .collect();
            for path in &paths {
                for read in open.remove(path).unwrap_or_default() {
                    stale.entry(read).or_insert_with(|| Supersession {
                        tool: call.name.clone(),
                        message: message_index,
                    });
                }
            }
            if let ([path], true) = (paths.as_slice(), reads)
                && let Some(&output) = by_call.get(call.id.as_str())
            {
                open.entry(path.clone()).or_default().push(output);
            }
        }
    }
    stale
}

/// The session's working directory at a message, found only for the messages that need it (a
/// call that reads or changes a file), each message looked at once at most: the rule runs on
/// every request, and a profile once found a lookup in every message among its largest costs
/// (docs/benchmarks-history.md, "Pruning cost after the rules").
#[derive(Default)]
struct SessionDirectory<'m> {
    /// Messages before this one have been looked at.
    scanned: usize,
    directory: Option<&'m str>,
}

impl<'m> SessionDirectory<'m> {
    /// The directory recorded last at or before `message`: the newest message not looked at
    /// yet that records one, else the one found before.
    fn at(&mut self, messages: &'m [Message], message: usize) -> Option<&'m str> {
        if message >= self.scanned {
            if let Some(directory) = messages[self.scanned..=message]
                .iter()
                .rev()
                .find_map(condense_formats::working_directory)
            {
                self.directory = Some(directory);
            }
            self.scanned = message + 1;
        }
        self.directory
    }
}

#[derive(Default)]
struct WalkOutcome {
    stopped_at: Option<usize>,
    reclaimable: usize,
    applied: bool,
}

/// A plan's decisions, no longer borrowing the conversation, ready to be written into it.
struct Decided {
    /// `(message, part, call id)` of each output.
    sites: Vec<(usize, usize, String)>,
    kept: Vec<usize>,
    replacements: Vec<Replacement>,
}

impl From<Plan<'_>> for Decided {
    fn from(plan: Plan<'_>) -> Self {
        Decided {
            sites: plan
                .outputs
                .iter()
                .map(|output| (output.message, output.part, output.result.call_id.clone()))
                .collect(),
            kept: plan.kept_fresh,
            replacements: plan.replacements,
        }
    }
}

impl Decided {
    /// Rewrites the replaced outputs and records every decision. Kept first: an output the
    /// budget kept may be replaced by the walk in the same call, and then the replacement is its
    /// fate.
    fn apply(self, conversation: &mut Conversation, log: &mut DecisionLog) {
        for index in self.kept {
            log.record(self.sites[index].2.clone(), Decision::Kept);
        }
        for replacement in self.replacements {
            let (message, part, call_id) = &self.sites[replacement.output];
            if let Some(Part::ToolResult(result)) =
                conversation.messages[*message].parts.get_mut(*part)
            {
                result.content = ToolOutput::Text(replacement.content.clone());
                result.compacted = Some(replacement.marker.clone());
            }
            log.record(
                call_id.clone(),
                Decision::Replaced {
                    content: replacement.content,
                    marker: replacement.marker,
                },
            );
        }
    }
}

/// The phase of the replacement an output already carries or is about to get from the log.
fn replaced_phase(plan: &Plan<'_>, index: usize) -> Option<Phase> {
    if let Some(marker) = &plan.outputs[index].result.compacted {
        return Some(marker.phase);
    }
    plan.replacements
        .iter()
        .find(|replacement| replacement.output == index)
        .map(|replacement| replacement.marker.phase)
}

fn marker(
    at_ms: u64,
    phase: Phase,
    original_tokens: usize,
    original_chars: usize,
    handle: String,
) -> Compacted {
    Compacted {
        at_ms,
        phase,
        original_tokens,
        original_chars,
        handle,
    }
}

/// What goes to the store: a text output as its UTF-8 bytes (so `condense recall` prints it as
/// it was), an output of blocks as their JSON.
fn original_bytes<'o>(output: &'o Output<'_>) -> Result<Cow<'o, [u8]>, PruneError> {
    crate::store::stored_bytes(&output.result.content).map_err(|error| PruneError::Serialize {
        call_id: output.result.call_id.clone(),
        message: output.message,
        reason: error.to_string(),
    })
}

/// Whether another output of the conversation answers a call of the same id as output `index`
/// (SWE-agent reuses ids). A decision is logged by call id, and the next request repeats it on
/// every output under that id with the same original: a pointer from an older copy to a newer
/// identical one would then replace the newer one too, and the text be sent nowhere.
fn id_reused(plan: &Plan<'_>, index: usize) -> bool {
    let id = &plan.outputs[index].result.call_id;
    plan.outputs
        .iter()
        .filter(|other| &other.result.call_id == id)
        .nth(1)
        .is_some()
}

/// Whether `output` goes out as it is, whole: not replaced (before or by this call), not
/// protected (a protected output is never the one replaced), and not a placeholder already.
fn shown_whole(output: &Output<'_>) -> bool {
    output.result.compacted.is_none()
        && match &output.reason {
            None => true,
            Some(reason) => {
                !reason.replaces() && !matches!(reason, Reason::AlreadyReplaced | Reason::Protected)
            }
        }
}

fn duplicate_key(tool: &str, text: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(
        text.as_bytes(),
        xxhash_rust::xxh3::xxh3_64(tool.as_bytes()),
    )
}
