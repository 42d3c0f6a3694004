//! The pipeline: prune, then (if still due) split, summarize and reassemble.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use condense_compact::{
    Split, TailSettings, carried, newest_within, previous_summary, reassemble, reposition_side,
};
use condense_core::{Conversation, LiveView, Memos, Message, Role};
use condense_pruner::{Clock, DirStore, PruneRequest, PruneSettings, Pruner, Store, SystemClock};
use condense_summarize::{Anthropic, Extractive, Fork, OpenAi, Summarizer};
use condense_template::{PromptVars, Template, parse_summary, summary_as_written};
use condense_tokenizer::{Tiktoken, TokenCounter, conversation_total, count_each_memoized};

use crate::head::{self, FrozenHead, WholeSummary, message_hash};
use crate::report::{CompactReport, CompactionOutcome, FailureKind, NativeCompaction};
use crate::state::{CacheUse, Counted, ReportedUsage, Sample, SessionState};
use crate::usage::{self, Line, Measure, measure};
use crate::{Config, HostError, LoadedPlugin, SummarizerKind};

/// A compacted conversation and what was done to it.
#[derive(Debug, Clone)]
pub struct Compaction {
    /// The conversation to send next.
    pub conversation: Conversation,
    /// What was done, and why.
    pub report: CompactReport,
}

/// Built once per session (or per process) and called as often as needed.
pub struct Compactor {
    prune: PruneSettings,
    tail: TailSettings,
    template: Template,
    summarizer: Box<dyn Summarizer>,
    counter: Arc<dyn TokenCounter>,
    store: Box<dyn Store>,
    clock: Box<dyn Clock>,
    custom_instructions: Option<String>,
    continuation: Option<String>,
    /// When a harness's requests are walked (`prune.walk_when`).
    walk_when: crate::WalkWhen,
    max_failures: u32,
    /// Each model's window, for a request that names its model; `None`: `tail` for all.
    windows: Option<crate::ModelWindows>,
    /// The prices the team's configuration sets itself, which [`Compactor::price_as`] leaves.
    team_prices: crate::CachePrices,
    /// Whether a layer of the team's own sets `compaction.cache_lifetime_minutes`, which
    /// [`Compactor::cache_lives`] then leaves.
    team_lifetime: bool,
    /// What stands in for a model's rejected answer (the gate, [`crate::gate`]).
    extractive: Extractive,
    /// What a summary may take (`summarizer.budget_tokens`): the room a compaction leaves it,
    /// and what compacting early weighs against the head it replaces where the summarizer
    /// cannot tell its summary before writing it ([`Summarizer::local_summary`]).
    summary_tokens: usize,
    /// `summarizer.on_bad_answer = "fail"`.
    fail_on_bad_answer: bool,
}

/// What [`Compactor::fitted`] cut for a compacted request to fit the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Fitted {
    /// Calls whose inputs were cut.
    inputs: usize,
    /// Protected tools' outputs and inputs cut.
    protected: usize,
    /// Messages of the person's cut.
    person: usize,
    /// The tokens by which the request is still over the window once these are cut
    /// ([`Compactor::over_the_window`]); 0 where it fits.
    excess: usize,
    /// The tokens by which it is still over the point at which compaction is due
    /// ([`Over::due`]); 0 where it is under it.
    over_due: usize,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("template", &self.template.name())
            .field("summarizer", &self.summarizer.name())
            .finish_non_exhaustive()
    }
}

impl Compactor {
    /// The pipeline the configuration describes: its tokenizer, rules, template and summarizer,
    /// originals stored under `store.dir`, the system clock.
    pub fn from_config(config: &Config) -> Result<Compactor, HostError> {
        Compactor::with_plugins(config, &[])
    }

    /// The pipeline with what the plugins add: their protected tools join the configured ones;
    /// a plugin's template is used unless configuration sets one (two plugins with templates
    /// need `compaction.template_plugin` to choose).
    pub fn with_plugins(config: &Config, plugins: &[LoadedPlugin]) -> Result<Compactor, HostError> {
        let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::new(config.encoding()));
        let template = select_template(config, plugins)?;
        let summarizer = summarizer_for(config, &template, counter.clone())?;
        let extractive = {
            let mut settings = config.extractive_settings();
            settings.counter = counter.clone();
            Extractive::new(template.clone(), settings)
        };
        let mut prune = config.prune_settings();
        prune.rules.protected_tools.extend(
            plugins
                .iter()
                .flat_map(|plugin| plugin.protected_tools.iter().cloned()),
        );
        Ok(Compactor {
            prune,
            tail: config.tail_settings(),
            template,
            summarizer,
            counter,
            store: Box::new(DirStore::new(config.store_dir())),
            clock: Box::new(SystemClock),
            custom_instructions: config.custom_instructions(),
            continuation: config.continuation(),
            walk_when: config.settings().prune.walk_when,
            max_failures: config.max_failures(),
            windows: None,
            team_prices: config.team_prices(),
            team_lifetime: config
                .origin("compaction.cache_lifetime_minutes")
                .is_some_and(|origin| origin.source != crate::config::Source::BuiltIn),
            extractive,
            summary_tokens: config.settings().extractive.budget_tokens,
            fail_on_bad_answer: config.fail_on_bad_answer(),
        })
    }

    /// Keeps originals in `store` instead of the configured directory.
    pub fn with_store(mut self, store: Box<dyn Store>) -> Self {
        self.store = store;
        self
    }

    /// Sizes each request for the model it names (the body's `model`), by `windows` (the
    /// configuration's `[models]` and the built-in table): the proxy, in front of several
    /// models, does. A request whose model no rule matches, or that names none, keeps the
    /// configured window.
    pub fn with_model_windows(mut self, windows: crate::ModelWindows) -> Self {
        self.windows = Some(windows);
        self
    }

    /// The window `conversation` is sized for: its model's when [`Compactor::with_model_windows`]
    /// gave the rules and one matches, else the configured one. The cache's lifetime is the one
    /// the request names, where it names one ([`condense_formats::cache_lifetime_minutes`]).
    pub fn tail_for(&self, conversation: &Conversation) -> TailSettings {
        let mut tail = self.model_tail(conversation);
        if let Some(minutes) = condense_formats::cache_lifetime_minutes(conversation) {
            tail.rules.cache_lifetime_minutes = minutes;
        }
        tail
    }

    /// The window and prices of `conversation`'s model, where a rule names them.
    fn model_tail(&self, conversation: &Conversation) -> TailSettings {
        let model = conversation.model();
        let rule = self
            .windows
            .as_ref()
            .zip(model)
            .and_then(|(windows, model)| windows.find(model));
        match rule {
            Some(rule) => TailSettings {
                context_window: rule.context_window,
                max_output_tokens: rule
                    .max_output_tokens
                    .unwrap_or(self.tail.max_output_tokens)
                    .min(rule.context_window.saturating_sub(1)),
                rules: priced(self.tail.rules, rule.prices),
                previews_within: self.tail.previews_within,
            },
            None => self.tail,
        }
    }

    /// Weighs early compaction with `prices` (in cache reads a token), whatever model a request
    /// names and with no change to the window, except where the team's configuration sets its
    /// own: the replay, which bills every policy at one model's prices, plans condense's
    /// compactions with the same ones, as the proxy does with each request's model
    /// ([`Compactor::with_model_windows`]).
    pub fn price_as(&mut self, prices: crate::CachePrices) {
        let prices = crate::CachePrices {
            cache_rewrite_cost: prices
                .cache_rewrite_cost
                .filter(|_| self.team_prices.cache_rewrite_cost.is_none()),
            output_cost: prices
                .output_cost
                .filter(|_| self.team_prices.output_cost.is_none()),
        };
        self.tail.rules = priced(self.tail.rules, prices);
    }

    /// Takes the provider's cache to live `minutes` after its last use, for a request that
    /// names no lifetime of its own, unless the team's configuration sets one: the replay,
    /// whose simulated cache lives `--ttl`, plans with the lifetime it bills, as the proxy does
    /// with each request's own.
    pub fn cache_lives(&mut self, minutes: u64) {
        if !self.team_lifetime {
            self.tail.rules.cache_lifetime_minutes = minutes;
        }
    }

    /// Takes the time from `clock` (tests and replays fix it).
    pub fn with_clock(mut self, clock: Box<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Summarizes with `summarizer` instead of the configured one.
    pub fn with_summarizer(mut self, summarizer: Box<dyn Summarizer>) -> Self {
        self.summarizer = summarizer;
        self
    }

    /// The configured summarizer (the one [`Compactor::prepare`] uses).
    pub fn summarizer(&self) -> &dyn Summarizer {
        self.summarizer.as_ref()
    }

    /// The template summaries are written with.
    pub fn template(&self) -> &Template {
        &self.template
    }

    /// Phase 1's rules in force, plugins' protected tools included.
    pub fn prune_settings(&self) -> &PruneSettings {
        &self.prune
    }

    /// Where originals of replaced outputs are kept: what a harness replacing outputs on its
    /// own behalf (the proxy's context edits) keeps them in too.
    pub fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// The token counter (with its cache) the pipeline counts with.
    pub fn counter(&self) -> &dyn TokenCounter {
        self.counter.as_ref()
    }

    /// One-off compaction of a saved session: fresh decisions, no continuation message (a person
    /// runs this; nothing is continuing on its own).
    pub async fn compact(&self, conversation: Conversation) -> Result<Compaction, HostError> {
        self.run(
            conversation,
            &mut SessionState::default(),
            Phases::Both { automatic: false },
            None,
        )
        .await
    }

    /// Summarizes now, due or not, with fresh decisions and no continuation: what a client
    /// asks of a compaction endpoint (`POST /v1/responses/compact`, which condense answers for
    /// an upstream that has none). `summarizer` replaces the configured one for this call.
    pub async fn compact_now(
        &self,
        conversation: Conversation,
        summarizer: Option<&dyn Summarizer>,
    ) -> Result<Compaction, HostError> {
        self.run(
            conversation,
            &mut SessionState::default(),
            Phases::Forced,
            summarizer,
        )
        .await
    }

    /// Phase 1 alone, with fresh decisions: `condense prune`.
    pub async fn prune(&self, conversation: Conversation) -> Result<Compaction, HostError> {
        self.run(
            conversation,
            &mut SessionState::default(),
            Phases::PruneOnly,
            None,
        )
        .await
    }

    /// The per-request path for harnesses: frozen decisions and the per-turn budget applied,
    /// pruned, and compacted only when due; `state` carries the decisions and the circuit breaker
    /// to the next request.
    pub async fn prepare(
        &self,
        conversation: Conversation,
        state: &mut SessionState,
    ) -> Result<Compaction, HostError> {
        self.run(conversation, state, Phases::Both { automatic: true }, None)
            .await
    }

    /// [`Compactor::prepare`] with `summarizer` for this request only: the proxy's
    /// `summarizer.kind = "upstream"` asks the request's own upstream with the client's own
    /// credentials, which only the request knows.
    pub async fn prepare_with(
        &self,
        conversation: Conversation,
        state: &mut SessionState,
        summarizer: &dyn Summarizer,
    ) -> Result<Compaction, HostError> {
        self.run(
            conversation,
            state,
            Phases::Both { automatic: true },
            Some(summarizer),
        )
        .await
    }

    /// [`Compactor::prepare`] (or [`Compactor::prepare_with`], given a `summarizer`) for a
    /// conversation whose messages come with `memos`, as `condense_formats::Request` reads
    /// them: each message's content hash and tokens are computed once and kept, not again on
    /// every request that resends it. The result is what `prepare` gives. Each memo must belong
    /// to the message at its index, unchanged since it was read.
    pub async fn prepare_memoized(
        &self,
        conversation: Conversation,
        memos: &Memos,
        state: &mut SessionState,
        summarizer: Option<&dyn Summarizer>,
    ) -> Result<Compaction, HostError> {
        self.run_memoized(
            conversation,
            memos,
            state,
            Phases::Both { automatic: true },
            summarizer,
        )
        .await
    }

    async fn run(
        &self,
        conversation: Conversation,
        state: &mut SessionState,
        phases: Phases,
        summarizer: Option<&dyn Summarizer>,
    ) -> Result<Compaction, HostError> {
        self.run_memoized(conversation, &Memos::default(), state, phases, summarizer)
            .await
    }

    /// The pipeline on what the provider will read: a history that carries a provider's own
    /// compaction is worked on from that compaction on ([`LiveView`]), what came before it
    /// passed on as it came.
    async fn run_memoized(
        &self,
        mut conversation: Conversation,
        memos: &Memos,
        state: &mut SessionState,
        phases: Phases,
        summarizer: Option<&dyn Summarizer>,
    ) -> Result<Compaction, HostError> {
        let tail = self.tail_for(&conversation);
        let at_message = condense_core::last_native_compaction(&conversation.messages);
        let Some(view) = LiveView::take(&mut conversation) else {
            let mut compaction = self
                .run_live(conversation, memos, state, phases, summarizer, tail)
                .await?;
            compaction.report.native = at_message.map(|(at_message, _)| NativeCompaction {
                at_message,
                ignored_messages: 0,
            });
            state.record_sent(&compaction);
            return Ok(compaction);
        };
        // The provider's count is for a request as the client sent it: in the view it stands
        // at the same answer; a figure from before the compaction counted what the provider now
        // ignores, and says nothing of what it reads.
        let reported = state.reported_usage;
        state.reported_usage = reported.and_then(|usage| {
            view.to_view(usage.message)
                .map(|message| ReportedUsage { message, ..usage })
        });
        let ignored = view.ignored_messages();
        // The memos are by the client's indices, which the view shifts: counted afresh.
        let result = self
            .run_live(
                conversation,
                &Memos::default(),
                state,
                phases,
                summarizer,
                tail,
            )
            .await;
        state.reported_usage = match (reported, state.reported_usage) {
            (Some(original), Some(usage)) => Some(ReportedUsage {
                message: original.message,
                ..usage
            }),
            (original, _) => original,
        };
        let mut compaction = result?;
        view.restore(&mut compaction.conversation);
        compaction.report.native = at_message.map(|(at_message, _)| NativeCompaction {
            at_message,
            ignored_messages: ignored,
        });
        // As it goes out, the provider's compaction and what it hides included: a refusal's
        // count is of all of it, as an answer's is ([`SessionState::record_refusal`]).
        state.record_sent(&compaction);
        Ok(compaction)
    }

    /// The request's run as named steps: what came in, the frozen head put back, phase 1 and
    /// the trigger's measure, the trigger, phase 2 and the head frozen, the report.
    async fn run_live(
        &self,
        mut conversation: Conversation,
        memos: &Memos,
        state: &mut SessionState,
        phases: Phases,
        summarizer: Option<&dyn Summarizer>,
        tail: TailSettings,
    ) -> Result<Compaction, HostError> {
        let started = Instant::now();
        let summarizer = summarizer.unwrap_or(self.summarizer.as_ref());
        let counter = self.counter.as_ref();
        let (hashes, received) = self.received(&conversation, memos);
        let tokens_received = conversation_total(&received);
        let (head, placed) = head::apply(&mut state.head, &mut conversation, &hashes);
        // The harness's last reported usage counted the request it sent; a history that no
        // longer extends it makes that figure meaningless.
        let reported = state
            .reported_usage
            .filter(|_| !matches!(head, Some(crate::HeadOutcome::Diverged { .. })));
        // The trigger's counts: the frozen head's replacement counted here, the client's
        // messages after it taken from the count as received.
        let mut counts = counter.count_each(&conversation.messages[..placed.replaced_by]);
        counts.extend_from_slice(&received[placed.covered.min(received.len())..]);
        let asked = Asked {
            phases,
            summarizer,
            tail,
        };
        let pruned = self.prune_and_measure(&mut conversation, state, &counts, reported, &asked)?;
        let compaction = match self.trigger(&conversation, state, &pruned, &asked) {
            Trigger::Skip(outcome) => *outcome,
            Trigger::Summarize { early } => {
                // What the provider has cached is what it was sent: the messages as phase 1
                // left them (frozen previews and cuts made again), not as the client sent them.
                let sent = counter.count_each(&conversation.messages);
                let due = Due::of(&pruned, &sent, tail, early);
                let automatic = phases == Phases::Both { automatic: true };
                self.summarize_and_freeze(
                    &mut conversation,
                    state,
                    automatic,
                    summarizer,
                    due,
                    (placed, &hashes),
                )
                .await?
            }
        };
        // What goes out, where the compaction changed it: a summary, or, with nothing to
        // summarize, the tail's previews and the cuts that fit it to the window (the reply's
        // limit is sized by it).
        let changed = match compaction {
            CompactionOutcome::Summarized { .. } => true,
            CompactionOutcome::NothingNew {
                previewed_outputs,
                cut_to_fit,
            } => previewed_outputs + cut_to_fit > 0,
            CompactionOutcome::NothingToCompact { cut_to_fit } => cut_to_fit > 0,
            _ => false,
        };
        let tokens_after = if changed {
            counter.count_conversation(&conversation)
        } else {
            pruned.tokens
        };
        let due_after = due_after(&pruned, tokens_after);
        let usable = due_at(&tail, pruned.line);
        let under_threshold = due_after < usable;
        let note = (!under_threshold).then(|| over_threshold_note(&compaction, usable));
        let input = provider_input(&pruned, tokens_after, due_after);
        let reply_limit = crate::reply::fit(&mut conversation, tail.context_window, input);
        Ok(Compaction {
            conversation,
            report: CompactReport {
                head,
                measured: pruned.measured,
                usable,
                tokens_before: tokens_received,
                prune: pruned.prune,
                tokens_after_prune: pruned.tokens,
                compaction,
                tokens_after,
                due_after,
                under_threshold,
                note,
                elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                native: None,
                reply_limit,
            },
        })
    }

    /// The request as it came: each client message's content hash (what a frozen head is
    /// recognised by, now and on the next request) and its count (what the metrics and the
    /// report call the request's size, whatever a frozen head then stands in for), each taken
    /// from the message's memo where the caller has one.
    fn received(&self, conversation: &Conversation, memos: &Memos) -> (Vec<u64>, Vec<usize>) {
        let hashes = conversation
            .messages
            .iter()
            .enumerate()
            .map(|(index, message)| match memos.get(index) {
                Some(memo) => memo.content_hash(|| message_hash(message)),
                None => message_hash(message),
            })
            .collect();
        let counts = count_each_memoized(self.counter.as_ref(), &conversation.messages, |index| {
            memos.get(index)
        });
        (hashes, counts)
    }

    /// Phase 1, then the trigger's measure of what it left: the provider's count where the
    /// harness reported one (less what pruning just removed), else condense's.
    fn prune_and_measure(
        &self,
        conversation: &mut Conversation,
        state: &mut SessionState,
        counts: &[usize],
        reported: Option<ReportedUsage>,
        asked: &Asked<'_>,
    ) -> Result<Pruned, HostError> {
        let counter = self.counter.as_ref();
        let tail = &asked.tail;
        let tokens_in = conversation_total(counts);
        let pruner = self.pruner();
        // A harness's request is walked only when it is due for compaction (`prune.walk_when`):
        // judged on the request as it came, the provider's count where there is one.
        let mut early_as_it_came = None;
        let prefix = usage::prefix_of(conversation);
        let key = usage::cache_key(conversation, prefix);
        // As the agent wrote them: an input cut later (a Write's file) was still its reply.
        let reply = longest_reply(conversation, counts).max(state.longest_reply);
        state.longest_reply = reply;
        let cold = self.cache_is_cold(conversation, state, tail, key);
        let tools = tools_without_a_figure(conversation, reported, counts, counter);
        let skip_walk = asked.phases == (Phases::Both { automatic: true })
            && self.walk_when == crate::WalkWhen::Due
            && {
                let as_measured = measure(conversation, reported, counts, |_| 0, tools).0;
                let sample = usage::sample(&as_measured, as_measured.tokens(), tokens_in);
                let line = line_for(&as_measured, sample, state, prefix, reply);
                let as_it_came =
                    usage::in_providers(&as_measured, as_measured.tokens(), counts, line);
                as_it_came < due_at(tail, line) && {
                    let room = room(tail, as_it_came, tokens_in, self.summary_tokens, line);
                    let early =
                        self.pays_to_compact(conversation, counts, &room, asked.summarizer, cold);
                    early_as_it_came = Some(early);
                    !early
                }
            };
        // A file pruned or compacted on purpose has no cache of the provider's to keep warm.
        let warm = asked.phases == (Phases::Both { automatic: true }) && !cold;
        let request = prune_request(tail, state, skip_walk, warm);
        let prune = pruner.prune_counted(conversation, counts, &mut state.log, request)?;
        let now = self.clock.now_ms();
        state.last_request_ms = Some(now);
        CacheUse::record(&mut state.caches, key, now);
        let (measured, harness_figure) = measure(
            conversation,
            reported,
            counts,
            |message| prune.frozen_tokens_up_to(message),
            tools,
        );
        // Recounted only when something was replaced: on most requests of a long session
        // nothing is, and a recount of every message is a good part of a request's cost.
        let counts_after = if !prune.changed() {
            counts.to_vec()
        } else {
            counter.count_each(&conversation.messages)
        };
        let tokens = conversation_total(&counts_after);
        let due_tokens = due_tokens(measured, &prune, tokens_in, tokens);
        // The harness's figure against condense's count of the same messages, kept beside the
        // session's others: the room a request leaves is sized by the line through them.
        let sample = harness_figure
            .then(|| usage::sample(&measured, due_tokens, tokens))
            .flatten();
        let line = line_for(&measured, sample, state, prefix, reply);
        if let Some(sample) = sample {
            state.counted = Some(Counted::with(state.counted, sample, prefix));
        }
        let due_tokens = usage::in_providers(&measured, due_tokens, &counts_after, line);
        // From now on the harness's figure stands for its request as this call sends it: what
        // was replaced for the first time up to its message comes off it, so that a later call,
        // finding those replacements frozen, does not count them twice (a retry before the
        // harness reports again judges the same). Its next report replaces the figure anyway.
        if harness_figure
            && let (Some(usage), Measure::ProviderUsage { at_message, .. }) =
                (state.reported_usage.as_mut(), measured)
        {
            usage.tokens = usage
                .tokens
                .saturating_sub(prune.fresh_tokens_up_to(at_message));
        }
        // Judged on the request as it came; the same request when pruning changed nothing.
        let early_unpruned = early_as_it_came.filter(|_| !prune.changed());
        Ok(Pruned {
            prune,
            measured,
            counts: counts_after,
            tokens,
            due_tokens,
            line,
            early_unpruned,
            cold,
        })
    }

    /// Whether phase 2 runs: when the window is full, or earlier when that is cheaper
    /// ([`Compactor::pays_to_compact`]); never for prune-only, and not automatically once the
    /// summarizer failed `max_failures` times in a row.
    fn trigger(
        &self,
        conversation: &Conversation,
        state: &SessionState,
        pruned: &Pruned,
        asked: &Asked<'_>,
    ) -> Trigger {
        let phases = asked.phases;
        let full = pruned.due_tokens >= due_at(&asked.tail, pruned.line);
        let early = phases != Phases::Forced
            && !full
            && pruned.early_unpruned.unwrap_or_else(|| {
                let room = room(
                    &asked.tail,
                    pruned.due_tokens,
                    pruned.tokens,
                    self.summary_tokens,
                    pruned.line,
                );
                self.pays_to_compact(
                    conversation,
                    &pruned.counts,
                    &room,
                    asked.summarizer,
                    pruned.cold,
                )
            });
        if phases == Phases::PruneOnly {
            Trigger::Skip(Box::new(CompactionOutcome::PruneOnly))
        } else if phases != Phases::Forced && !full && !early {
            Trigger::Skip(Box::new(CompactionOutcome::NotDue))
        } else if phases == (Phases::Both { automatic: true })
            && state.consecutive_failures >= self.max_failures
        {
            Trigger::Skip(Box::new(CompactionOutcome::CircuitOpen {
                consecutive_failures: state.consecutive_failures,
            }))
        } else {
            Trigger::Summarize { early }
        }
    }

    /// Phase 2, and, when it summarized, the head frozen so that the next request carrying
    /// the same messages gets the same summary in their place; `conversation` becomes the
    /// compacted one. `placed` and `hashes`: where the earlier frozen head stood, and the
    /// client's messages as they came.
    async fn summarize_and_freeze(
        &self,
        conversation: &mut Conversation,
        state: &mut SessionState,
        automatic: bool,
        summarizer: &dyn Summarizer,
        due: Due,
        (placed, hashes): (head::Placed, &[u64]),
    ) -> Result<CompactionOutcome, HostError> {
        let Made {
            outcome,
            sent: compacted,
            whole_summary,
        } = self
            .summarize(conversation, state, automatic, summarizer, due)
            .await?;
        if let (
            Some(previewed),
            CompactionOutcome::NothingNew { .. } | CompactionOutcome::NothingToCompact { .. },
        ) = (&compacted, &outcome)
        {
            // Nothing summarized (the earlier summary stands as it was frozen); only the tail's
            // previews, or the cuts that make it fit the window, are new.
            *conversation = previewed.clone();
        }
        if let (
            Some(compacted),
            CompactionOutcome::Summarized {
                split,
                carried_messages,
                ..
            },
        ) = (compacted, &outcome)
        {
            let earlier = state
                .head
                .as_ref()
                .map_or(&[][..], |frozen| &frozen.outlines[..]);
            state.head = head::freeze(
                split.tail_start,
                split.pinned + 1 + carried_messages,
                placed,
                &compacted.messages,
                hashes,
                &conversation.messages,
                earlier,
            )
            .map(|frozen| FrozenHead {
                whole_summary,
                ..frozen
            });
            *conversation = compacted;
        }
        Ok(outcome)
    }

    /// Phase 2 on an already pruned conversation, measured as `due`.
    async fn summarize(
        &self,
        conversation: &Conversation,
        state: &mut SessionState,
        automatic: bool,
        summarizer: &dyn Summarizer,
        due: Due,
    ) -> Result<Made, HostError> {
        let room = room(
            &due.tail,
            due.tokens,
            due.counted,
            self.summary_tokens,
            due.line,
        );
        // What a summarizer that asks inside the conversation sends: the conversation as the
        // agent's request would carry it, before any preview below, which would change its
        // cached prefix.
        let whole = conversation;
        let cut = self.due_cut(&conversation.messages, &room, due.early, due.cache_cold);
        if cut.nothing_to_compact() {
            let (fitted, cut_to_fit) =
                self.fitted_as_it_is(conversation, cut.pinned, &due, &mut state.log)?;
            return Ok((CompactionOutcome::NothingToCompact { cut_to_fit }, fitted).into());
        }
        let (inputs_first, cut, tail_inputs) =
            self.inputs_first(conversation, cut, &room, &due, &mut state.log)?;
        let conversation = inputs_first.as_ref().unwrap_or(conversation);
        let (previewed, previewed_outputs) = self.tail_previewed(conversation, &cut, state)?;
        let (cut, previewed, previewed_outputs) =
            match self.no_room_for_the_tail(&previewed, &cut, &due, state)? {
                true => (
                    cut.with_no_tail(conversation.messages.len()),
                    Cow::Borrowed(conversation),
                    0,
                ),
                false => (cut, previewed, previewed_outputs),
            };
        let conversation = previewed.as_ref();
        let messages = &conversation.messages;
        let head = &messages[cut.head()];
        let (summary_room, carried, protected_summarized) =
            self.beside_the_tail(messages, &cut, &room, due.tail.rules.min_tail_turns);
        // The tail's previews made above still go out: they are logged, so every later request
        // repeats them, and this one, which may be over the window without them, has them too.
        let again = match nothing_new(head, &carried) {
            false => None,
            true => match self.earlier_to_write_again(head, &previewed, &cut, &due, state)? {
                None => {
                    return self
                        .nothing_new(previewed, previewed_outputs, cut.pinned, &due, state)
                        .map(Made::from);
                }
                earlier => earlier,
            },
        };
        let prepared = Prepared {
            whole,
            previewed: &previewed,
            cut,
            carried,
            summary_room,
            protected_summarized,
            previewed_outputs,
            tail_inputs,
            due,
        };
        self.written_and_sent(prepared, again, summarizer, automatic, state)
            .await
    }

    /// The summary of `prepared`'s head written (or, `again`, condense's earlier summary with
    /// nothing new, to be written again smaller), and the request it goes out in, fitted to
    /// the window ([`Compactor::sent_with`]).
    async fn written_and_sent(
        &self,
        prepared: Prepared<'_>,
        again: Option<String>,
        summarizer: &dyn Summarizer,
        automatic: bool,
        state: &mut SessionState,
    ) -> Result<Made, HostError> {
        let Prepared {
            whole,
            previewed,
            cut,
            carried,
            summary_room,
            protected_summarized,
            previewed_outputs,
            tail_inputs,
            due,
        } = prepared;
        let conversation = previewed.as_ref();
        let messages = &conversation.messages;
        let head = &messages[cut.head()];
        let shrinking_only = again.is_some();
        let summarized = self.summarized_from(whole, cut.head(), summarizer, state);
        let summarized = summarized.as_ref();
        let written = match again {
            Some(text) => Ok(self.as_written(text)),
            None => {
                let fork = self.fork(summarized, &cut, &carried, &due, summary_room);
                self.written_summary(summarizer, fork, head, cut.head_tokens, &due, state)
                    .await?
            }
        };
        let (name, mut parsed, rejected) = match written {
            Ok(written) => written,
            Err(failed) => return Ok((failed, None).into()),
        };
        let assembly = Assembly {
            conversation,
            cut: &cut,
            carried: &carried,
            continuation: self.continuation_for(Phases::Both { automatic }, messages),
            lead: self.task_leads(messages, &cut, &carried),
            due: &due,
        };
        let ours = name == self.extractive.name();
        let head = &summarized.messages[cut.head()];
        let first = std::mem::take(&mut parsed.text);
        let sent = self.sent_with(&assembly, head, first.clone(), ours, shrinking_only, state)?;
        let Some((text, request)) = sent else {
            let previewed = previewed.clone();
            return self
                .nothing_new(previewed, previewed_outputs, cut.pinned, &due, state)
                .map(Made::from);
        };
        let whole_summary = whole_summary_behind(first, &text, shrinking_only, state);
        parsed.text = text;
        let Assembled {
            conversation: compacted,
            fitted,
            log,
        } = request;
        state.log = log;
        let summary = Summary {
            text: &parsed.text,
            continuation: assembly.continuation,
            lead: assembly.lead,
        };
        let summary_at = summary.at(&cut);
        let summary_tokens = self.counter.count_message(&compacted.messages[summary_at]);
        let outcome = CompactionOutcome::Summarized {
            summarizer: name,
            split: cut,
            carried_messages: carried.len(),
            protected_summarized,
            previewed_outputs,
            tail_inputs,
            previewed_inputs: fitted.inputs,
            previewed_protected: fitted.protected,
            cut_person: fitted.person,
            summary_tokens,
            missing_sections: parsed.missing_sections,
            rejected,
            early: due.early,
            cache_cold: due.early && due.cache_cold,
        };
        Ok(Made {
            outcome,
            sent: Some(compacted),
            whole_summary,
        })
    }

    /// What the summary of `whole`'s `head` is written from. A summary written here (condense's
    /// own) tells how each call of the head ended from what its tool returned, not from the
    /// note that replaced it (an exit code is in the output alone), and folds condense's earlier
    /// summary as first written, where that went out written again smaller for its request to
    /// fit ([`FrozenHead::whole_summary`]): what the smaller one gave up for that request is not
    /// given up for every later one. A model reads what the agent's request holds, and is paid
    /// by the token.
    fn summarized_from<'c>(
        &self,
        whole: &'c Conversation,
        head: std::ops::Range<usize>,
        summarizer: &dyn Summarizer,
        state: &SessionState,
    ) -> Cow<'c, Conversation> {
        if !summarizer.runs_locally() {
            return Cow::Borrowed(whole);
        }
        let restored = self.with_originals(whole, head);
        match with_whole_summary(restored.as_ref().unwrap_or(whole), state) {
            Some(unshrunk) => Cow::Owned(unshrunk),
            None => restored.map_or(Cow::Borrowed(whole), Cow::Owned),
        }
    }

    /// Whether the compaction at `cut` keeps the person's opening request in front of its
    /// summary ([`condense_compact::leads_the_summary`], at most a summary's budget).
    fn task_leads(&self, messages: &[Message], cut: &Split, carried: &[Message]) -> bool {
        messages.get(cut.pinned).is_some_and(|first| {
            condense_compact::leads_the_summary(
                messages,
                cut,
                carried,
                self.counter.count_message(first),
                self.summary_tokens,
            )
        })
    }

    /// `compacted` fitted to the window where it is still more than the window holds, the
    /// summary shrunk and the last exchange's outputs cut: first the texts of its `tail`'s call
    /// inputs cut to previews, what the agent itself sent in its last exchange (a whole file
    /// given to a Write, in a window its system prompt and tools nearly fill), cut with the
    /// whole input stored, rather than a request the provider refuses, and cut as far as the
    /// point at which compaction is due, not only the window ([`Over::due`]):
    /// a compaction that leaves its request past that point leaves the reply less room than the
    /// session has shown it needs, and the next request due at once; then, the last resort,
    /// the outputs of protected tools in the tail and then their calls' inputs, since a request
    /// the provider refuses keeps nothing, protected or not
    /// ([`condense_pruner::Pruner::preview_protected_to_fit`],
    /// [`condense_pruner::Pruner::preview_protected_inputs`]); and last of all the person's own
    /// messages in the tail, their images left out and then their longest texts cut
    /// ([`condense_pruner::Pruner::preview_person_to_fit`]): a screenshot in a window the
    /// system prompt and tools nearly fill. With what each step cut. Each cut is logged and
    /// made again on later requests, with the outputs' frozen decisions (phase 1): the provider
    /// counts this request with it, and the next one, which the client sends whole, is judged
    /// by that count. The request is counted again only after a step that cut something.
    fn fitted(
        &self,
        compacted: &mut Conversation,
        tail: std::ops::Range<usize>,
        due: &Due,
        log: &mut condense_pruner::DecisionLog,
    ) -> Result<Fitted, HostError> {
        let pruner = self.pruner();
        let mut over = self.over(compacted, due);
        let inputs = pruner.preview_inputs(compacted, tail.clone(), over.due, log)?;
        if inputs > 0 {
            over = self.over(compacted, due);
        }
        // Protected tools' work and the person's messages only where the window needs it.
        let outputs = pruner.preview_protected_to_fit(compacted, tail.clone(), over.window, log)?;
        if outputs > 0 {
            over = self.over(compacted, due);
        }
        let protected_inputs =
            pruner.preview_protected_inputs(compacted, tail.clone(), over.window, log)?;
        if protected_inputs > 0 {
            over = self.over(compacted, due);
        }
        let person = pruner.preview_person_to_fit(compacted, tail, over.window, log)?;
        if person > 0 {
            over = self.over(compacted, due);
        }
        Ok(Fitted {
            inputs,
            protected: outputs + protected_inputs,
            person,
            excess: over.window,
            over_due: over.due,
        })
    }

    /// The outcome of a compaction with nothing new to summarize, and what goes out: the
    /// conversation with its tail's `previewed_outputs` (`previewed`), fitted to the window
    /// where it is still over it ([`Compactor::fitted_as_it_is`]); nothing where neither cut
    /// anything.
    fn nothing_new(
        &self,
        previewed: Cow<'_, Conversation>,
        previewed_outputs: usize,
        pinned: usize,
        due: &Due,
        state: &mut SessionState,
    ) -> Result<(CompactionOutcome, Option<Conversation>), HostError> {
        let (fitted, cut_to_fit) =
            self.fitted_as_it_is(previewed.as_ref(), pinned, due, &mut state.log)?;
        let sent = fitted.or_else(|| (previewed_outputs > 0).then(|| previewed.into_owned()));
        Ok((
            CompactionOutcome::NothingNew {
                previewed_outputs,
                cut_to_fit,
            },
            sent,
        ))
    }

    /// `conversation`, which has nothing to summarize, fitted to the window where it is more
    /// than the window holds ([`Compactor::fitted`], on everything after its `pinned` messages):
    /// the fitted conversation where something was cut, and how many things were.
    fn fitted_as_it_is(
        &self,
        conversation: &Conversation,
        pinned: usize,
        due: &Due,
        log: &mut condense_pruner::DecisionLog,
    ) -> Result<(Option<Conversation>, usize), HostError> {
        if self.over_the_window(conversation, due) == 0 {
            return Ok((None, 0));
        }
        let mut fitted = conversation.clone();
        let tail = pinned..fitted.messages.len();
        let cut = self.fitted(&mut fitted, tail, due, log)?;
        let count = cut.inputs + cut.protected + cut.person;
        Ok(((count > 0).then_some(fitted), count))
    }

    /// Where `head` is an earlier summary with nothing new after it, that summary's text, for
    /// condense's own summary to be written again smaller in its place, where the request is
    /// over the window even with the cuts made to fit it ([`Compactor::over_as_it_is`]), or,
    /// while a reply cut at a limit condense lowered has not been followed by one that went
    /// through ([`SessionState::reply_floor`]), past the point that leaves the reply that room:
    /// sent as it was, the request would be refused, or answered in the room that cut the
    /// reply and cut again. A model's summary too: it is not asked for again (a second request
    /// for the same head, its answer's size unknown until it comes), and condense's own folds
    /// it. `None` where it is sent as it is ([`Compactor::nothing_new`]): it fits.
    fn earlier_to_write_again(
        &self,
        head: &[Message],
        previewed: &Conversation,
        cut: &Split,
        due: &Due,
        state: &SessionState,
    ) -> Result<Option<String>, HostError> {
        let Some(earlier) = previous_summary(head) else {
            return Ok(None);
        };
        let over = self.over_as_it_is(previewed, cut.pinned, due, state)?;
        let cut_short = state.reply_floor > 0 && over.due > 0;
        Ok((over.window > 0 || cut_short).then_some(earlier))
    }

    /// The summary's request as a summarizer that asks inside the conversation makes it:
    /// `conversation` (the agent's, outputs restored where condense writes the summary) cut
    /// at `cut`, `carried` kept past the summary, within `summary_room` where that is less
    /// than the summary's budget.
    fn fork<'c>(
        &self,
        conversation: &'c Conversation,
        cut: &Split,
        carried: &'c [Message],
        due: &Due,
        summary_room: usize,
    ) -> Fork<'c> {
        Fork {
            conversation,
            head: cut.head(),
            carried,
            tokens: due.tokens,
            window: due.tail.context_window,
            counted: due.counted,
            cached: due.cached,
            summary_tokens: (summary_room < self.summary_tokens).then(|| {
                self.extractive
                    .budget_tokens()
                    .saturating_sub(self.summary_tokens - summary_room)
            }),
        }
    }

    /// `text`, an earlier summary as it stands, as [`Compactor::written_summary`] gives a
    /// summary condense wrote: named condense's, since no model is asked for it (a model's
    /// summary with nothing new is written again as condense's own, folding it, or goes out
    /// as it stood).
    fn as_written(
        &self,
        text: String,
    ) -> (String, condense_template::ParsedSummary, Option<String>) {
        let parsed = condense_template::ParsedSummary {
            text,
            missing_sections: Vec::new(),
        };
        (self.extractive.name().to_owned(), parsed, None)
    }

    /// The request `assembly` makes with the summary `text` (condense's own where `ours`, of
    /// `head`), and the summary it goes out with: written again smaller where that makes an
    /// over-the-window request fit ([`Compactor::shrunk_to_fit`]). `None` where the summary is
    /// only being written again (`shrinking_only`, nothing new) and no smaller one fits: the
    /// request goes out as one with nothing new.
    fn sent_with(
        &self,
        assembly: &Assembly<'_>,
        head: &[Message],
        text: String,
        ours: bool,
        shrinking_only: bool,
        state: &SessionState,
    ) -> Result<Option<(String, Assembled)>, HostError> {
        let request = self.assembled(assembly, &text, state)?;
        if !ours {
            return Ok(Some((text, request)));
        }
        let excess = request.fitted.excess;
        let over_due = request.fitted.over_due;
        Ok(
            match self.shrunk_to_fit(assembly, head, &text, over_due, state)? {
                Some(smaller) => Some(smaller),
                None if shrinking_only && excess > 0 => None,
                None => Some((text, request)),
            },
        )
    }

    /// The conversation `assembly` makes with the summary `text`, fitted to the window
    /// ([`Compactor::fitted`]), with what that cut and the session's decisions as they would
    /// then stand (`state`'s are left as they are, for the caller to keep the one it sends).
    fn assembled(
        &self,
        assembly: &Assembly<'_>,
        text: &str,
        state: &SessionState,
    ) -> Result<Assembled, HostError> {
        let summary = Summary {
            text,
            continuation: assembly.continuation,
            lead: assembly.lead,
        };
        let mut compacted = reassembled(
            assembly.conversation,
            assembly.cut,
            assembly.carried,
            &summary,
        );
        let tail = (assembly.cut.pinned + 1 + assembly.carried.len())..compacted.messages.len();
        let mut log = state.log.clone();
        let fitted = self.fitted(&mut compacted, tail, assembly.due, &mut log)?;
        Ok(Assembled {
            conversation: compacted,
            fitted,
            log,
        })
    }

    /// condense's own summary of `head` written again, strictly within what the window leaves
    /// it ([`Extractive::strictly_within`]) and smaller each time, until the request `assembly`
    /// makes, `excess` tokens over the point at which compaction is due with `text`
    /// ([`Over::due`]), is under it: that summary and the request; else the
    /// smallest written that fits the window, where that is smaller than `text`; or `None`
    /// where none fits the window (the last exchange alone is over it). The
    /// summary's room is reckoned before the tail's cuts, and in condense's count of a window
    /// the provider measures, so a request can still be over it; a model's summary is not asked
    /// for again. What the smaller summary gives up, it gives up for this request only: the
    /// summary as first written is frozen beside the head ([`FrozenHead::whole_summary`]), and
    /// the next summary folds that. Where no summary makes the request fit, the one written
    /// stays: the request fails either way. Nor is it written again before the session's own
    /// figures give condense's count a line to the provider's ([`Line`]): measured by a share
    /// of the request, a prefix the provider adds to every request is taken as growing with the
    /// conversation, and a request far inside the window can seem over it (9cc4a4b0's second
    /// at 18K, 14.3K tokens by the provider's count, lost its summary's files so).
    fn shrunk_to_fit(
        &self,
        assembly: &Assembly<'_>,
        head: &[Message],
        text: &str,
        mut excess: usize,
        state: &SessionState,
    ) -> Result<Option<(String, Assembled)>, HostError> {
        if assembly.due.line.is_none() {
            return Ok(None);
        }
        let mut text = Cow::Borrowed(text);
        // The smallest summary written so far whose request fits the window.
        let mut fits = None;
        while excess > 0 {
            let written = self.counter.count_text(&text);
            let Some(smaller) = self
                .extractive
                .strictly_within(written.saturating_sub(excess))
                .summary_carrying(head, assembly.carried)
                .ok()
                .filter(|smaller| self.counter.count_text(smaller) < written)
            else {
                break;
            };
            let attempt = self.assembled(assembly, &smaller, state)?;
            excess = attempt.fitted.over_due;
            if excess == 0 {
                return Ok(Some((smaller, attempt)));
            }
            if attempt.fitted.excess == 0 {
                fits = Some((smaller.clone(), attempt));
            }
            text = Cow::Owned(smaller);
        }
        Ok(fits)
    }

    /// Whether the tail of `cut` (as `previewed` holds it, its outputs cut to previews) is more
    /// than the window holds beside the pinned messages alone, even fitted to it as a
    /// compaction still over the window is ([`Compactor::fitted`]): no summary, however small,
    /// makes that request one the provider takes ([`condense_compact::TailRule::NoRoom`]).
    /// While a reply cut at a limit condense lowered has not been followed by one that went
    /// through ([`SessionState::reply_floor`]), the bound is the point that leaves the reply
    /// that room instead: a request that holds the tail but not that room is answered cut
    /// again, no more use to the agent than one refused (a last exchange that thought at
    /// length, a block sent only whole, leaving a reply of a few hundred tokens). Counted whole
    /// only where the tail's size says it may be.
    fn no_room_for_the_tail(
        &self,
        previewed: &Conversation,
        cut: &Split,
        due: &Due,
        state: &SessionState,
    ) -> Result<bool, HostError> {
        let messages = &previewed.messages;
        let cut_short = state.reply_floor > 0;
        let bound = if cut_short {
            due_at(&due.tail, due.line)
        } else {
            due.tail.context_window
        };
        let limit = in_ours(bound, due.tokens, due.counted, due.line);
        let pinned = conversation_total(&self.counter.count_each(&messages[..cut.pinned]));
        if cut.tail_start >= messages.len() || pinned + cut.kept_tokens <= limit {
            return Ok(false);
        }
        let alone = Conversation {
            messages: messages[..cut.pinned]
                .iter()
                .chain(&messages[cut.tail_start..])
                .cloned()
                .collect(),
            envelope: previewed.envelope.clone(),
            side: Vec::new(),
        };
        let over = self.over_as_it_is(&alone, cut.pinned, due, state)?;
        Ok(if cut_short { over.due } else { over.window } > 0)
    }

    /// How far `conversation`, with nothing to summarize, is past the window and the point
    /// at which it is due ([`Over`]) once fitted to the window as [`Compactor::nothing_new`]
    /// would fit it (nothing of it is logged here).
    fn over_as_it_is(
        &self,
        conversation: &Conversation,
        pinned: usize,
        due: &Due,
        state: &SessionState,
    ) -> Result<Over, HostError> {
        let mut log = state.log.clone();
        let (fitted, _) = self.fitted_as_it_is(conversation, pinned, due, &mut log)?;
        Ok(self.over(fitted.as_ref().unwrap_or(conversation), due))
    }

    /// The tokens by which `compacted` is more than the window holds of the request `due`
    /// measured (in condense's count, [`in_ours`]); 0 where it fits.
    fn over_the_window(&self, compacted: &Conversation, due: &Due) -> usize {
        self.over(compacted, due).window
    }

    /// How far `compacted` is past the window and past the point at which the request `due`
    /// measured is due for compaction ([`Over`]), counted once for both.
    fn over(&self, compacted: &Conversation, due: &Due) -> Over {
        let total = conversation_total(&self.counter.count_each(&compacted.messages));
        let limit = |tokens| in_ours(tokens, due.tokens, due.counted, due.line);
        Over {
            window: total.saturating_sub(limit(due.tail.context_window)),
            due: total.saturating_sub(limit(due_at(&due.tail, due.line))),
        }
    }

    /// The most the summary may take of `usable` beside a tail of `kept` tokens: its budget, at
    /// most half the room (the tail's budget is the other half); a tail that is more than its
    /// half even so (a last exchange nothing in it can be cut from: the person's own message, a
    /// screenshot in it, the agent's calls) leaves the summary what is left: the summary
    /// shrinks, not the request past the window.
    fn summary_room(&self, usable: usize, kept: usize) -> usize {
        self.summary_tokens
            .min(usable / 2)
            .min(usable.saturating_sub(kept))
    }

    /// The room the summary may take of `room`'s window beside the tail of `cut` and what is
    /// carried past it ([`Compactor::carried_past`]), with what is carried and how many
    /// protected pairs were left to the summary. The person's latest requests the tail could
    /// not hold are carried whole as far as they fit beside the summary and the tail, and left
    /// to the summary's quotes where they do not. The room is what the pinned messages leave (a
    /// system prompt sent as a message, as Chat Completions agents send it, is no less part of
    /// the request than one sent apart, which [`room`] has taken off already).
    fn beside_the_tail(
        &self,
        messages: &[Message],
        cut: &Split,
        room: &TailSettings,
        min_turns: usize,
    ) -> (usize, Vec<Message>, usize) {
        let pinned: usize = self
            .counter
            .count_each(&messages[..cut.pinned])
            .iter()
            .sum();
        let usable = condense_compact::usable(room).saturating_sub(pinned);
        let summary_room = self.summary_room(usable, cut.kept_tokens);
        let (carried, protected_summarized) = self.carried_past(
            messages,
            cut,
            min_turns,
            usable.saturating_sub(summary_room),
        );
        (summary_room, carried, protected_summarized)
    }

    /// What the head holds that outlives the summary, verbatim ([`carried`]): protected tools'
    /// calls and outputs, and the person's last `min_turns` messages the tail could not hold
    /// where they fit beside the tail in `room` (what the summary's room leaves), else none of
    /// the person's: the summary quotes them. Of protected pairs that are more than that room
    /// even so, the newest that fit are carried and the others left to the summary
    /// ([`newest_within`]): with how many were left.
    fn carried_past(
        &self,
        messages: &[Message],
        cut: &Split,
        min_turns: usize,
        room: usize,
    ) -> (Vec<Message>, usize) {
        let carry = |turns| {
            carried(
                messages,
                cut.pinned,
                cut.tail_start,
                &self.prune.rules.protected_tools,
                turns,
            )
        };
        let tokens = |carried: &[Message]| conversation_total(&self.counter.count_each(carried));
        let carried = carry(min_turns);
        if cut.kept_tokens + tokens(&carried) <= room {
            return (carried, 0);
        }
        newest_within(carry(0), room.saturating_sub(cut.kept_tokens), tokens)
    }

    /// Where a compaction cuts `messages` in `room`: as the budget does, but for an early
    /// compaction, which keeps the recent work whole, in the wider tail its check took where
    /// the budget's would not hold it ([`Compactor::pays_to_compact`]; as wide as half the
    /// room at a `cold` cache).
    fn due_cut(&self, messages: &[Message], room: &TailSettings, early: bool, cold: bool) -> Split {
        let counts = self.counter.count_each(messages);
        let cut = self.cut(messages, &counts, room);
        if early
            && !keeps_recent_work(messages, &cut, room)
            && let Some(wider) = holding_recent_work(messages, &counts, room, cold)
        {
            return self.cut(messages, &counts, &wider);
        }
        cut
    }

    /// Where `messages` (their tokens `counts`) are cut ([`condense_compact::split_counted`]),
    /// the tail's outputs sized as the previews [`Compactor::tail_previewed`] would make.
    fn cut(&self, messages: &[Message], counts: &[usize], tail: &TailSettings) -> Split {
        let pruner = self.pruner();
        let sizes = |result: &condense_core::ToolResult, tool: &str, limit: usize| {
            let whole = self.counter.count_output(&result.content);
            // A protected output is never cut.
            if self.prune.rules.protected_tools.contains(tool) {
                (whole, whole)
            } else {
                (whole, pruner.preview_tokens(result, whole, tool, limit))
            }
        };
        condense_compact::split_counted(messages, counts, &sizes, tail)
    }

    /// [`Compactor::cut`] with every output counted whole, none sized as a preview: what the
    /// early check asks, which takes a cut only when no output in it is previewed
    /// ([`keeps_recent_work`]). A cut that would preview one is rejected sized either way, and
    /// one that would not is the same cut, so the check skips making the notes it would throw
    /// away (each hashes its output whole for the handle it names).
    fn cut_unpreviewed(
        &self,
        messages: &[Message],
        counts: &[usize],
        tail: &TailSettings,
    ) -> Split {
        let whole = |result: &condense_core::ToolResult, _: &str, _: usize| {
            let tokens = self.counter.count_output(&result.content);
            (tokens, tokens)
        };
        condense_compact::split_counted(messages, counts, &whole, tail)
    }

    /// `conversation` with the outputs of `head` that condense replaced (pruned, cleared,
    /// previewed, trimmed; in this run, or in an earlier one whose file this is) back as their
    /// tools returned them, from the store: what condense's own summary reads, so that a
    /// failure it lists says what went wrong and an exit code it reads is the command's, where
    /// the agent now sees a placeholder; and the inputs of the head's calls that condense cut to
    /// previews back whole ([`Pruner::whole_input`]). An original the store cannot give back
    /// (another machine's, swept) leaves its placeholder. `None` when the store gives back no
    /// original of the head's (the conversation is cloned only when it does). A model's summary
    /// reads what the agent saw: each output it reads is paid for by the token.
    fn with_originals(
        &self,
        conversation: &Conversation,
        head: std::ops::Range<usize>,
    ) -> Option<Conversation> {
        let pruner = self.pruner();
        // The handle of a replaced output: its marker's, or, for a placeholder read back from a
        // file (which keeps no markers), the last one its text names.
        let handle = |result: &condense_core::ToolResult| match &result.compacted {
            Some(marker) => Some(marker.handle.clone()),
            None if pruner.is_placeholder(&result.content) => {
                let text = result.content.text();
                condense_pruner::handles_in(text.as_bytes())
                    .last()
                    .map(str::to_owned)
            }
            None => None,
        };
        // Each original the store gives back, by where its output stands; and each call's whole
        // input, where condense cut it.
        let mut originals = Vec::new();
        let mut inputs = Vec::new();
        for (at, message) in conversation.messages.get(head.clone())?.iter().enumerate() {
            for (part, content) in message.parts.iter().enumerate() {
                if let condense_core::Part::ToolCall(call) = content {
                    if let Some(whole) = pruner.whole_input(call) {
                        inputs.push((at, part, whole));
                    }
                    continue;
                }
                let Some(result) = content.as_tool_result() else {
                    continue;
                };
                let original = handle(result).and_then(|handle| self.store.get(&handle).ok());
                if let Some(original) = original.as_deref().and_then(condense_pruner::stored_output)
                {
                    originals.push((at, part, original));
                }
            }
        }
        if originals.is_empty() && inputs.is_empty() {
            return None;
        }
        let mut restored = conversation.clone();
        let start = head.start;
        for (at, part, original) in originals {
            if let condense_core::Part::ToolResult(result) =
                &mut restored.messages[start + at].parts[part]
            {
                result.content = original;
            }
        }
        for (at, part, whole) in inputs {
            if let condense_core::Part::ToolCall(call) =
                &mut restored.messages[start + at].parts[part]
            {
                call.input = whole;
                call.raw_input = None;
            }
        }
        Some(restored)
    }

    /// The pruner with this compactor's settings, store and clock.
    fn pruner(&self) -> Pruner<'_> {
        Pruner {
            settings: &self.prune,
            counter: self.counter.as_ref(),
            store: self.store.as_ref(),
            clock: self.clock.as_ref(),
        }
    }

    /// Where `cut`'s tail would have outputs cut to previews to fit its budget (a compaction the
    /// window forces, not an early one), the conversation with the long texts of the inputs of
    /// the tail's calls before its last exchange cut to previews first, the largest first, as
    /// far as the tail is over ([`condense_pruner::Pruner::preview_inputs`]), and the
    /// conversation cut again as those previews leave it: its outputs are then previewed only
    /// for what the inputs did not free, or the tail holds more of the agent's calls whole. The
    /// same where the tail holds fewer than the last `min_tail_calls` calls with no output cut,
    /// the inputs of the calls it did not hold being what kept them out
    /// ([`Compactor::recent_calls_over`]): the new cut is then taken only where it holds more of
    /// them.
    /// What the agent wrote (a Write's file, an Edit's strings) is applied, on disk and stored,
    /// where what it read can be had again only by calling again; the last exchange, what the
    /// agent has just done, stays whole (its input is cut only for the request to fit the
    /// window, [`Compactor::fitted`]). The conversation with the cuts, the new cut and how many
    /// calls' inputs were cut, the cuts logged in `log` (made again on later requests); or no
    /// conversation, `cut` and nothing logged where nothing is cut, where the new cut holds
    /// fewer of the agent's calls, or where it would summarize nothing new (the head an earlier
    /// summary and what it carried).
    fn inputs_first(
        &self,
        conversation: &Conversation,
        cut: Split,
        room: &TailSettings,
        due: &Due,
        log: &mut condense_pruner::DecisionLog,
    ) -> Result<(Option<Conversation>, Split, usize), HostError> {
        let last_exchange = cut.last_exchange;
        // A tail whose previews are the last exchange's holds the calls before it whole, as far
        // as the budget the previews leave goes ([`condense_compact::TailRule::LastExchange`]):
        // the inputs before it kept no call out.
        let last_previewed = cut
            .previews
            .as_ref()
            .is_some_and(|previews| previews.messages.start >= last_exchange);
        if due.early || cut.tail_start >= last_exchange || last_previewed {
            return Ok((None, cut, 0));
        }
        let (within, over) = if cut.previews.is_some() {
            (
                cut.tail_start..last_exchange,
                cut.tail_tokens.saturating_sub(cut.budget),
            )
        } else {
            match self.recent_calls_over(conversation, &cut, room) {
                Some(found) => found,
                None => return Ok((None, cut, 0)),
            }
        };
        let mut first = conversation.clone();
        let mut first_log = log.clone();
        let inputs = self
            .pruner()
            .preview_inputs(&mut first, within, over, &mut first_log)?;
        if inputs == 0 {
            return Ok((None, cut, 0));
        }
        let recut = self.due_cut(&first.messages, room, false, false);
        // Never a tail that shows fewer of the agent's calls than it would have; and, where the
        // cut was for the calls the tail did not hold, one that holds more of them (their larger
        // outputs as previews where the budget needs it, as a tail that goes back for the recent
        // calls shows them).
        let fewer = recut.tail_calls < cut.tail_calls
            || cut.previews.is_none() && recut.tail_calls == cut.tail_calls;
        if recut.nothing_to_compact() || fewer {
            return Ok((None, cut, 0));
        }
        let (_, carried, _) =
            self.beside_the_tail(&first.messages, &recut, room, due.tail.rules.min_tail_turns);
        if nothing_new(&first.messages[recut.head()], &carried) {
            return Ok((None, cut, 0));
        }
        *log = first_log;
        Ok((Some(first), recut, inputs))
    }

    /// Where `cut`'s tail holds fewer than the last `min_tail_calls` calls with no output cut
    /// (the calls before it too large for the budget, their inputs being what makes them so:
    /// outputs alone would have been previewed to hold them), the messages from the first of
    /// those calls to the last exchange, and by how much they are more than the budget: the
    /// inputs [`Compactor::inputs_first`] cuts for the tail to hold them. `None` where the tail
    /// holds them, or they fit the budget as they are.
    fn recent_calls_over(
        &self,
        conversation: &Conversation,
        cut: &Split,
        room: &TailSettings,
    ) -> Option<(std::ops::Range<usize>, usize)> {
        let wanted = room.rules.min_tail_calls;
        if cut.tail_calls >= wanted {
            return None;
        }
        let messages = &conversation.messages;
        let mut calls = 0;
        let mut start = cut.tail_start;
        while start > cut.pinned && calls + cut.tail_calls < wanted {
            start -= 1;
            calls += messages[start]
                .parts
                .iter()
                .filter(|part| part.as_tool_call().is_some())
                .count();
        }
        if calls == 0 {
            return None;
        }
        let counts = self.counter.count_each(&messages[start..]);
        let over = counts.iter().sum::<usize>().checked_sub(cut.budget)?;
        (over > 0).then_some((start..cut.last_exchange, over))
    }

    /// The conversation with the tail's previews made ([`Split::previews`]): the last exchange
    /// when it alone is over the tail budget, or the recent calls' larger outputs when the tail
    /// went back to hold them (originals stored, decisions logged so later requests repeat
    /// them). With how many outputs were cut.
    fn tail_previewed<'c>(
        &self,
        conversation: &'c Conversation,
        cut: &Split,
        state: &mut SessionState,
    ) -> Result<(Cow<'c, Conversation>, usize), HostError> {
        let Some(previews) = &cut.previews else {
            return Ok((Cow::Borrowed(conversation), 0));
        };
        let mut previewed = conversation.clone();
        let outputs = self.pruner().preview_oversized(
            &mut previewed,
            previews.messages.clone(),
            previews.over,
            &mut state.log,
        )?;
        Ok((Cow::Owned(previewed), outputs))
    }

    /// The summary of `head`, gated: who wrote it (the extractive summarizer when it stood in
    /// for a model's rejected answer), the summary with the ledger under a model's, and why the
    /// model's answer was rejected; or, when no summary could be had, the failure, counted
    /// towards the circuit breaker.
    async fn written_summary(
        &self,
        summarizer: &dyn Summarizer,
        fork: Fork<'_>,
        head: &[Message],
        head_tokens: usize,
        due: &Due,
        state: &mut SessionState,
    ) -> Result<
        Result<(String, condense_template::ParsedSummary, Option<String>), CompactionOutcome>,
        HostError,
    > {
        let vars = PromptVars {
            custom_instructions: self.custom_instructions.clone(),
            previous_summary: previous_summary(head),
            context_window: due.tail.context_window,
            date: condense_core::time::date_of(self.clock.now_ms()),
        };
        let mut prompt = self.template.render_prompt(&vars)?;
        // Where the request's room is less than the summary's budget, a model is told what it
        // leaves beside the ledger put under its answer, and an answer over that is rejected
        // like any answer that cannot stand for the head.
        let ledger = (summarizer.name() != self.extractive.name())
            .then(|| condense_summarize::ledger(head))
            .flatten();
        let answer_room = fork.summary_tokens.map(|room| {
            room.saturating_sub(
                ledger
                    .as_deref()
                    .map_or(0, |ledger| self.counter.count_text(ledger)),
            )
        });
        if let Some(room) = answer_room.filter(|_| !summarizer.runs_locally()) {
            prompt.push_str(&format!(
                "\n\nKeep the whole summary within {room} tokens: the agent's next request has no more room for it."
            ));
        }
        let (parsed, rejected) = self
            .gated_summary(summarizer, fork, &prompt, (head, head_tokens), answer_room)
            .await;
        let name = if rejected.is_some() {
            self.extractive.name()
        } else {
            summarizer.name()
        }
        .to_owned();
        let mut parsed = match parsed {
            Ok(parsed) => parsed,
            Err((kind, error)) => {
                state.consecutive_failures += 1;
                return Ok(Err(CompactionOutcome::Failed {
                    summarizer: name,
                    kind,
                    error,
                    consecutive_failures: state.consecutive_failures,
                }));
            }
        };
        state.consecutive_failures = 0;
        // Under a model's summary, the ledger condense reads off the head itself: the model
        // cannot lose a request or a file. (condense's own summary holds the same lists.)
        if name != self.extractive.name()
            && let Some(ledger) = ledger
        {
            parsed.text = format!("{}\n\n{ledger}", parsed.text.trim_end());
        }
        Ok(Ok((name, parsed, rejected)))
    }

    /// Whether summarizing now, before the window needs it, costs less than carrying the head
    /// ([`condense_compact::pays_to_compact`]): the head and tail as the cut would make them in
    /// `tail` (the [`room`] the request leaves, as the compaction itself cuts), the summary the
    /// summarizer would write where it can say so before writing it (condense's own,
    /// [`Summarizer::local_summary`]), else at its budget, and the session's growth per request
    /// as it has gone since its last summary (or its start): the tokens after it over the
    /// answers among them ([`Weighing`]). When that cut would
    /// take the agent's recent work ([`keeps_recent_work`]), the cut of the wider tail that
    /// holds it whole ([`holding_recent_work`]), if that also costs less than the budget's tail
    /// carried to a full window ([`condense_compact::wider_tail_pays`]). Where no such tail
    /// holds it, the budget's own cut ([`Compactor::budget_cut_pays`]). At a `cold` cache, as
    /// before, a wider tail up to half the room where the compaction pays for itself on the spot
    /// ([`condense_compact::pays_at_a_cold_cache`]).
    fn pays_to_compact(
        &self,
        conversation: &Conversation,
        counts: &[usize],
        tail: &TailSettings,
        summarizer: &dyn Summarizer,
        cold: bool,
    ) -> bool {
        let pays = |early: &condense_compact::EarlyCompaction, tail: &TailSettings| {
            condense_compact::pays_to_compact(early, tail)
                || cold && condense_compact::pays_at_a_cold_cache(early, tail)
        };
        if tail.rules.cache_rewrite_cost <= 0.0 {
            return false;
        }
        let messages = &conversation.messages;
        let pinned = condense_compact::pinned(messages);
        let since = messages
            .iter()
            .rposition(Message::is_compaction_summary)
            .map_or(pinned, |summary| summary + 1);
        let answers = messages[since..]
            .iter()
            .filter(|message| message.role == Role::Assistant)
            .count();
        if answers == 0 {
            return false;
        }
        let growth = counts[since..].iter().sum::<usize>() / answers;
        // The most a cut could make of it (everything after the pinned messages summarized,
        // nothing kept, no summarizer to pay, a summary written here as small as can be)
        // first: on most requests even that does not pay, and the cut itself, which indexes
        // every tool call, is not made.
        let best = condense_compact::EarlyCompaction {
            head_tokens: counts[pinned.min(counts.len())..].iter().sum(),
            summary_tokens: if summarizer.runs_locally() {
                0
            } else {
                self.summary_tokens
            },
            tail_tokens: 0,
            growth_tokens: growth,
            summarizer_input_tokens: None,
        };
        if !pays(&best, tail) {
            return false;
        }
        let weigh = Weighing {
            compactor: self,
            messages,
            summarizer,
            growth,
        };
        let cut = self.cut_unpreviewed(messages, counts, tail);
        if cut.nothing_to_compact() {
            return false;
        }
        if keeps_recent_work(messages, &cut, tail) {
            let Some((carried, carried_tokens)) = weigh.carried(&cut) else {
                return false;
            };
            let at = |summary_tokens| pays(&weigh.at(&cut, carried_tokens, summary_tokens), tail);
            // The smaller the summary, the more it pays: where it pays at the budget, or not
            // even with no summary at all, the summary need not be written to know.
            return at(self.summary_tokens) || at(0) && at(weigh.written(&cut, &carried));
        }
        // The budget would cut the recent work to previews: kept whole in a wider tail instead,
        // where that costs less than waiting for the window with the budget's tail; where no
        // tail within the tail's share holds it, the budget's own cut.
        let warm = match holding_recent_work(messages, counts, tail, false) {
            Some(wider) => self
                .holding_whole(&weigh, counts, &wider)
                .is_some_and(|early| {
                    condense_compact::pays_to_compact(&early, &wider)
                        && condense_compact::wider_tail_pays(&early, tail)
                }),
            None => self.budget_cut_pays(&weigh, counts, tail, cold),
        };
        // At a cold cache the compaction rewrites nothing it would not have: a tail as wide as
        // half the room may hold the recent work whole.
        warm || cold
            && holding_recent_work(messages, counts, tail, true).is_some_and(|wider| {
                self.holding_whole(&weigh, counts, &wider)
                    .is_some_and(|early| condense_compact::pays_at_a_cold_cache(&early, &wider))
            })
    }

    /// The early compaction at the cut of `wider` ([`holding_recent_work`]), where that cut
    /// has a head to summarize and keeps the recent work whole.
    fn holding_whole(
        &self,
        weigh: &Weighing<'_>,
        counts: &[usize],
        wider: &TailSettings,
    ) -> Option<condense_compact::EarlyCompaction> {
        let cut = self.cut_unpreviewed(weigh.messages, counts, wider);
        if cut.nothing_to_compact() || !keeps_recent_work(weigh.messages, &cut, wider) {
            return None;
        }
        let (carried, carried_tokens) = weigh.carried(&cut)?;
        Some(weigh.at(&cut, carried_tokens, weigh.written(&cut, &carried)))
    }

    /// Whether the budget's own cut, made early, costs less than carrying the head, where no
    /// tail within the tail's share of the window holds the recent work whole
    /// ([`holding_recent_work`]): the compaction the window forces will cut the recent calls to
    /// the budget's previews too, so made where the window is due before the session is likely
    /// to end ([`due_before_the_end`]), the same cut saves carrying the head until then. Its
    /// previews count as saved, as the summary does: they save what they cut on every request
    /// after. Never a cut of the output the agent has just been given, which it has not acted on
    /// yet: a last exchange over the budget is cut only when the window makes it necessary.
    fn budget_cut_pays(
        &self,
        weigh: &Weighing<'_>,
        counts: &[usize],
        tail: &TailSettings,
        cold: bool,
    ) -> bool {
        let messages = weigh.messages;
        if !due_before_the_end(messages, counts, weigh.growth, tail) {
            return false;
        }
        let cut = self.cut(messages, counts, tail);
        if cut.nothing_to_compact() || cut.rule == condense_compact::TailRule::LastExchange {
            return false;
        }
        let Some((carried, carried_tokens)) = weigh.carried(&cut) else {
            return false;
        };
        let mut early = weigh.at(&cut, carried_tokens, weigh.written(&cut, &carried));
        early.head_tokens += cut.tail_tokens.saturating_sub(cut.kept_tokens);
        condense_compact::pays_to_compact(&early, tail)
            || cold && condense_compact::pays_at_a_cold_cache(&early, tail)
    }

    /// Whether the provider's cache has expired since the session's previous request: its
    /// last answer's time where the conversation records one (as microcompact reads it), else
    /// the harness's own record; or whether the request goes to a cache (`key`: its model and
    /// prefix, [`usage::cache_key`]) none of the session's requests within the lifetime went
    /// to ([`SessionState::caches`]). Never when nothing is known or the lifetime is 0.
    fn cache_is_cold(
        &self,
        conversation: &Conversation,
        state: &SessionState,
        tail: &TailSettings,
        key: u64,
    ) -> bool {
        let lifetime = tail.rules.cache_lifetime_minutes.saturating_mul(60_000);
        let now = self.clock.now_ms();
        let previous = conversation
            .messages
            .iter()
            .rev()
            .find(|message| message.role == Role::Assistant)
            .and_then(Message::timestamp_ms)
            .or(state.last_request_ms);
        let expired = previous.is_some_and(|at| now.saturating_sub(at) > lifetime);
        let elsewhere = !state.caches.is_empty()
            && !state
                .caches
                .iter()
                .any(|used| used.key == key && now.saturating_sub(used.at_ms) <= lifetime);
        lifetime > 0 && (expired || elsewhere)
    }

    /// The summarizer's answer, through the gate ([`crate::gate`]): a model's answer that
    /// cannot stand for the head is asked again once with the reason, then replaced by the
    /// extractive summary (the reason returned beside it) or, with `on_bad_answer = "fail"`,
    /// turned into a failure. An empty answer is a bad answer like any other; a summarizer
    /// that failed (network, key) is a failure, for the breaker to count.
    async fn gated_summary(
        &self,
        summarizer: &dyn Summarizer,
        fork: Fork<'_>,
        prompt: &str,
        (head, head_tokens): (&[Message], usize),
        answer_room: Option<usize>,
    ) -> (
        Result<condense_template::ParsedSummary, (FailureKind, String)>,
        Option<String>,
    ) {
        let sections = self.template.sections().len();
        let room = fork.summary_tokens;
        let judge = |answer: &str| -> Result<condense_template::ParsedSummary, String> {
            // condense's own summary is built to the template: nothing to check, and nothing in
            // it to read as markup (the requests it quotes may hold a `<summary>` line).
            if summarizer.name() == self.extractive.name() {
                return summary_as_written(answer, &self.template)
                    .map_err(|error| error.to_string());
            }
            let parsed =
                parse_summary(answer, &self.template).map_err(|error| error.to_string())?;
            if let Some(room) = answer_room {
                let tokens = self.counter.count_text(&parsed.text);
                if tokens > room {
                    return Err(format!(
                        "{tokens} tokens is more than the {room} the agent's next request has room for"
                    ));
                }
            }
            match crate::gate::judge(
                &parsed.text,
                parsed.missing_sections.len(),
                sections,
                prompt,
                head,
                head_tokens,
                self.counter.as_ref(),
            ) {
                Some(reason) => Err(reason),
                None => Ok(parsed),
            }
        };
        let carried = fork.carried;
        let (whole, range) = (fork.conversation, fork.head.clone());
        // A room the ledger alone nearly fills leaves a model no answer the gate would take.
        let least = crate::gate::least(head_tokens);
        let no_room =
            answer_room.filter(|&room| room < least && summarizer.name() != self.extractive.name());
        let reason = match no_room {
            Some(room) => format!(
                "the agent's next request leaves a model's summary {room} tokens beside the ledger of the head's requests and files, less than the {least} one of this head needs: it was not asked"
            ),
            None => {
                let first = match summarizer.summarize_forked(fork, prompt).await {
                    Ok(answer) => judge(&answer),
                    Err(error) => {
                        return (
                            Err((FailureKind::Summarizer(error.kind()), error.to_string())),
                            None,
                        );
                    }
                };
                let reason = match first {
                    Ok(parsed) => return (Ok(parsed), None),
                    Err(reason) => reason,
                };
                let again = format!(
                    "{prompt}\n\nYour previous answer was rejected: {reason}. Answer again with every section, naming the files and quoting the requests of the conversation."
                );
                match summarizer.summarize(head, &again).await {
                    Ok(answer) => match judge(&answer) {
                        Ok(parsed) => return (Ok(parsed), None),
                        Err(second) => second,
                    },
                    Err(error) => error.to_string(),
                }
            }
        };
        if self.fail_on_bad_answer {
            return (
                Err((
                    FailureKind::BadSummary,
                    format!(
                        "the summarizer's answer was rejected: {reason} (summarizer.on_bad_answer = \"fail\")"
                    ),
                )),
                None,
            );
        }
        (self.stand_in(whole, range, carried, room), Some(reason))
    }

    /// condense's own summary of `conversation`'s `head`, in the place of a model's rejected
    /// answer, within `room`: it reads the head's originals as it does when it is the
    /// summarizer ([`Compactor::with_originals`]).
    fn stand_in(
        &self,
        conversation: &Conversation,
        head: std::ops::Range<usize>,
        carried: &[Message],
        room: Option<usize>,
    ) -> Result<condense_template::ParsedSummary, (FailureKind, String)> {
        let restored = self.with_originals(conversation, head.clone());
        let head = &restored.as_ref().unwrap_or(conversation).messages[head];
        match self.extractive.within(room).summary_carrying(head, carried) {
            Ok(answer) => summary_as_written(&answer, &self.template)
                .map_err(|error| (FailureKind::BadSummary, error.to_string())),
            Err(error) => Err((FailureKind::Summarizer(error.kind()), error.to_string())),
        }
    }

    /// The continuation's text when `phases` add one: automatic compaction (a harness's
    /// request), with a continuation configured, for a request that does not end in an
    /// assistant message. It goes inside the summary's message, as Claude Code puts its own:
    /// the client's last message stays the last one the provider sees, and every later request
    /// resends it with the frozen summary, byte for byte. A request that does is asking the
    /// model to go on from that text (Anthropic's prefill, a server's `continue_final_message`):
    /// a user message after it would turn the prefill into a finished reply and the answer into
    /// a reply to "Continue".
    fn continuation_for(&self, phases: Phases, messages: &[Message]) -> Option<&str> {
        let prefilled = messages
            .last()
            .is_some_and(|message| message.role == Role::Assistant);
        self.continuation
            .as_deref()
            .filter(|_| phases == (Phases::Both { automatic: true }) && !prefilled)
    }
}

/// Which phases a call runs; automatic compaction (a harness's request) adds the continuation
/// to the summary and counts failures for the circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phases {
    PruneOnly,
    Both {
        automatic: bool,
    },
    /// Both, the summary made whether due or not.
    Forced,
}

/// Configuration's template, else the one plugin's that has one, else the built-in default.
fn select_template(config: &Config, plugins: &[LoadedPlugin]) -> Result<Template, HostError> {
    if let Some(path) = config.template_file() {
        let source = std::fs::read_to_string(&path).map_err(|source| HostError::TemplateFile {
            path: path.clone(),
            source,
        })?;
        return Ok(Template::from_source(&path.display().to_string(), &source)?);
    }
    let offering: Vec<&LoadedPlugin> = plugins
        .iter()
        .filter(|plugin| plugin.template.is_some())
        .collect();
    let chosen = match (
        config.template_is_configured(),
        offering.as_slice(),
        config.template_plugin(),
    ) {
        (true, _, _) | (false, [], _) => return Ok(Template::builtin(config.template().name())?),
        (false, [only], None) => *only,
        (false, several, Some(name)) => several
            .iter()
            .find(|plugin| plugin.name == name)
            .copied()
            .ok_or(HostError::NoSuchTemplatePlugin { name })?,
        (false, [first, second, ..], None) => {
            return Err(HostError::TemplateConflict {
                first: first.origin(),
                second: second.origin(),
            });
        }
    };
    let source = chosen.template.as_deref().unwrap_or_default();
    Template::from_source(&chosen.name, source).map_err(|error| HostError::PluginTemplate {
        plugin: chosen.origin(),
        error,
    })
}

fn summarizer_for(
    config: &Config,
    template: &Template,
    counter: Arc<dyn TokenCounter>,
) -> Result<Box<dyn Summarizer>, HostError> {
    Ok(match config.summarizer_kind() {
        SummarizerKind::OpenAi => Box::new(OpenAi::new(remote_settings(config, counter))?),
        SummarizerKind::Anthropic => Box::new(Anthropic::new(remote_settings(config, counter))?),
        SummarizerKind::Upstream => Box::new(NeedsUpstream),
        SummarizerKind::Extractive => {
            let mut settings = config.extractive_settings();
            settings.counter = counter;
            Box::new(Extractive::new(template.clone(), settings))
        }
    })
}

/// `summarizer.kind = "upstream"` outside the proxy: there is no client request to summarize
/// with, so every summary fails with a message saying so (the proxy passes its own summarizer
/// to [`Compactor::prepare_with`] instead).
#[derive(Debug)]
struct NeedsUpstream;

#[async_trait::async_trait]
impl Summarizer for NeedsUpstream {
    fn name(&self) -> &str {
        "upstream"
    }

    async fn summarize(
        &self,
        _head: &[condense_core::Message],
        _prompt: &str,
    ) -> Result<String, condense_summarize::SummarizeError> {
        Err(condense_summarize::SummarizeError::Client {
            message: "summarizer.kind = \"upstream\" summarizes through condense serve's upstream with the client's own credentials; outside the proxy choose extractive, openai or anthropic".to_owned(),
        })
    }
}

/// The configured remote settings, sizing chunks with the pipeline's own (warm) counter.
fn remote_settings(
    config: &Config,
    counter: Arc<dyn TokenCounter>,
) -> condense_summarize::RemoteSettings {
    let mut settings = config.remote_settings();
    settings.counter = counter;
    settings
}

/// What the caller asked of this run: the phases, the summarizer, the window.
struct Asked<'s> {
    phases: Phases,
    summarizer: &'s dyn Summarizer,
    tail: TailSettings,
}

/// Phase 1's result and the trigger's measure of what it left.
struct Pruned {
    prune: condense_pruner::PruneReport,
    measured: Measure,
    /// condense's count of each message after pruning.
    counts: Vec<usize>,
    /// Their total.
    tokens: usize,
    /// What the trigger measures: the provider's count where there is one.
    due_tokens: usize,
    /// The provider's count as a line in condense's, where the session's figures give one.
    line: Option<Line>,
    /// Whether compacting early pays, when the walk's gate already judged it on the same
    /// messages (pruning changed nothing): not judged twice.
    early_unpruned: Option<bool>,
    /// Whether the provider's cache holds nothing of the request ([`Compactor::cache_is_cold`]).
    cold: bool,
}

/// What the trigger decided.
enum Trigger {
    /// Phase 2 does not run, for this reason (boxed: the outcome of a summary is large, and
    /// this one never is).
    Skip(Box<CompactionOutcome>),
    /// Phase 2 runs; `early`: before the window needs it, because it is cheaper.
    Summarize { early: bool },
}

/// condense's count of the tool definitions `conversation`'s request carries
/// ([`usage::tools_tokens`]) where no figure of the provider's covers them, else 0. Pruning
/// only makes a harness's figure likelier to hold (it is measured against what is left), so a
/// request measured with a figure before pruning is measured with one after.
fn tools_without_a_figure(
    conversation: &Conversation,
    reported: Option<ReportedUsage>,
    counts: &[usize],
    counter: &dyn TokenCounter,
) -> usize {
    match measure(conversation, reported, counts, |_| 0, 0).0 {
        Measure::Tokenizer { .. } => usage::tools_tokens(conversation, counter),
        Measure::ProviderUsage { .. } => 0,
    }
}

/// The line a request `measured` so is sized by, with the agent's longest `reply` and the
/// room a reply cut short asked for ([`SessionState::reply_floor`]): through its `sample` (the
/// provider's figure against condense's count) and the session's counted requests of the same
/// `prefix`, where they give one; else through the sample alone ([`Line::of_one`]). Before
/// the provider has reported any
/// figure: the request's tool definitions as the fixed part, in condense's count
/// ([`Line::of_tools`]), where it carries any; the room a compaction leaves the summary and the
/// tail is then the window less them, not a share of the request that shrinks with the
/// conversation.
fn line_for(
    measured: &Measure,
    sample: Option<Sample>,
    state: &SessionState,
    prefix: u64,
    reply: usize,
) -> Option<Line> {
    let line = match *measured {
        Measure::Tokenizer { tools, .. } => Line::of_tools(tools),
        Measure::ProviderUsage { .. } => sample.and_then(|sample| {
            Line::through(state.counted.as_ref(), sample, prefix).or_else(|| Line::of_one(sample))
        }),
    };
    line.map(|line| line.with_reply(reply).with_reply_floor(state.reply_floor))
}

/// The result judged on the trigger's own measure: the provider's count (when the trigger used
/// it) scaled by what condense's count of the same messages went down by; a result nothing
/// changed measures exactly what the trigger measured.
fn due_after(pruned: &Pruned, tokens_after: usize) -> usize {
    match pruned.measured {
        Measure::Tokenizer { tools, .. } => tokens_after + tools,
        Measure::ProviderUsage { .. } if tokens_after == pruned.tokens => pruned.due_tokens,
        Measure::ProviderUsage { .. } => (tokens_after as f64 * pruned.due_tokens as f64
            / pruned.tokens.max(1) as f64)
            .round() as usize,
    }
}

/// The provider's count of the request as it goes out, for the reply's limit, and the margin
/// its uncertain part asks ([`crate::reply::Estimate`]). Where the session's figures give the
/// provider's count as a line in condense's: the trigger's measure where nothing changed it,
/// else the line at the result's count; the uncertain part is what condense counted (what
/// came since the provider's figure, or the whole request a summary rewrote) at the line's
/// scale, the margin [`crate::reply::ESTIMATE_MARGIN`] of it. Before they do: what the
/// provider's figure counted beyond condense's count of the same messages, as if it were all
/// system prompt and tools (the trigger's own scaling, [`due_after`], takes those to shrink
/// with the conversation: 11,914 tokens counted 7,945 at a 16K window, a request the provider
/// refuses), and condense's count of the rest, which may be as many of the provider's per
/// token as its figure counted per token of condense's, up to [`usage::MOST_SCALE`], the
/// margin. Before any figure, condense's count of the messages, the system prompt and tools
/// unknown.
fn provider_input(
    pruned: &Pruned,
    tokens_after: usize,
    due_after: usize,
) -> crate::reply::Estimate {
    use crate::reply::{ESTIMATE_MARGIN, Estimate};
    let Measure::ProviderUsage { at_message, .. } = pruned.measured else {
        return Estimate {
            tokens: due_after,
            margin: 0,
        };
    };
    let unchanged = tokens_after == pruned.tokens;
    let since: usize = pruned
        .counts
        .get(at_message + 1..)
        .unwrap_or_default()
        .iter()
        .sum();
    match pruned.line {
        Some(line) => {
            let uncertain = line.scale * if unchanged { since } else { tokens_after } as f64;
            Estimate {
                tokens: if unchanged {
                    due_after
                } else {
                    (line.fixed + line.scale * tokens_after as f64).ceil() as usize
                },
                margin: (uncertain * ESTIMATE_MARGIN).ceil() as usize,
            }
        }
        None => {
            // Everything the provider counted beyond condense's count of the messages its
            // figure covers, taken as fixed (too much, where its tokenizer counts more), and
            // condense's count of the rest at a scale not yet known: at most the figure over
            // condense's count of what it covered (which a fixed part only makes larger), and
            // at most the most a tokenizer condense sizes for counts over its own.
            let uncertain = if unchanged { since } else { tokens_after };
            let covered = pruned.tokens.saturating_sub(since);
            let figure = pruned.due_tokens.saturating_sub(since);
            let most = (figure as f64 / covered.max(1) as f64).min(usage::MOST_SCALE);
            Estimate {
                tokens: if unchanged {
                    due_after
                } else {
                    figure.saturating_sub(covered) + tokens_after
                },
                margin: ((most - 1.0).max(0.0) * uncertain as f64).ceil() as usize,
            }
        }
    }
}

/// Why a result is still at or over the `usable` threshold.
fn over_threshold_note(compaction: &CompactionOutcome, usable: usize) -> String {
    match compaction {
        CompactionOutcome::NothingToCompact { .. } => "the recent turns alone are over the threshold: there is no older part to summarize".to_owned(),
        CompactionOutcome::NothingNew { .. } => "what is older than the kept turns is the earlier summary and what it carries: summarizing it again would change nothing".to_owned(),
        CompactionOutcome::CircuitOpen { .. } => "automatic compaction is stopped for this session after repeated summarizer failures".to_owned(),
        CompactionOutcome::Failed { error, .. } => format!("the summarizer failed: {error}"),
        CompactionOutcome::PruneOnly => format!(
            "still over the {} usable after pruning alone (the summary phase was not run)",
            condense_text::thousands(usable)
        ),
        _ => format!(
            "the pinned messages, the summary and the kept turns are larger than the {} usable; not retried",
            condense_text::thousands(usable)
        ),
    }
}

/// How large the pruned conversation is when a summary is due.
#[derive(Debug, Clone, Copy)]
struct Due {
    /// The window this request is sized for (its model's, see [`Compactor::with_model_windows`]).
    tail: TailSettings,
    /// As the provider counts it: its reported usage when known, else condense's count.
    tokens: usize,
    /// condense's count of the conversation. What the provider counts beyond it (tool
    /// definitions, a system prompt sent apart, its own tokenizer) is left out of the room the
    /// tail and the summary are sized for ([`room`]).
    counted: usize,
    /// condense's count of its leading messages the provider most likely has cached (see
    /// [`Fork::cached`]).
    cached: usize,
    /// Due because compacting now is cheaper, not because the window is full.
    early: bool,
    /// The provider's cache held nothing of the request ([`Compactor::cache_is_cold`]).
    cache_cold: bool,
    /// The provider's count as a line in condense's, where the session's figures give one.
    line: Option<Line>,
}

/// A limit in the provider's count (`limit`) in condense's count of a request's messages: what
/// the provider counts beyond them (`due` its count of the request, `ours` condense's) taken
/// out, a fixed part and a scale where the session's figures give a `line`, else a share of the
/// request. The whole window so is the most a request may hold that the provider takes;
/// the limit the trigger compacts at so is the room a summary and tail have ([`overhead`]).
fn in_ours(limit: usize, due: usize, ours: usize, line: Option<Line>) -> usize {
    match line {
        Some(line) => ((limit as f64 - line.fixed).max(0.0) / line.scale).floor() as usize,
        None if due > ours => (limit as f64 * ours as f64 / due as f64).floor() as usize,
        None => limit,
    }
}

/// How far a request is past the window and past the point at which compaction is due
/// ([`Compactor::over`]), in condense's count.
#[derive(Debug, Clone, Copy)]
struct Over {
    /// Tokens over the window; 0 where it fits.
    window: usize,
    /// Tokens past the point at which the request is due for compaction ([`due_at`]: the
    /// window less the reply's room, as the harness's reserve and the session's replies size
    /// it); 0 where it is under it. A compaction shrinks its own summary and cuts the agent's
    /// inputs to it, not only to the window: a request it leaves past that point has less room
    /// for the reply than the agent's longest reply so far, or than a reply cut short asked
    /// for, and is due again on the next request.
    due: usize,
}

/// Whether `head` is an earlier summary and the very messages it carried (`carried` again): a
/// compaction that could not get under the threshold, met again. Summarizing it again would
/// make a new summary of the old one on every request, each rewriting the provider's cached
/// prefix. Over the window even so (the earlier summary cannot shrink, the tail holds the last
/// exchange whole), the request is fitted as one with nothing to summarize is.
fn nothing_new(head: &[Message], carried: &[Message]) -> bool {
    head.first().is_some_and(Message::is_compaction_summary) && head[1..] == carried[..]
}

/// A compaction once its cut is made, its tail's previews made and what it carries chosen
/// ([`Compactor::summarize`]), for [`Compactor::written_and_sent`].
struct Prepared<'a> {
    /// The conversation as the agent's request carries it.
    whole: &'a Conversation,
    /// The conversation with its tail's previews.
    previewed: &'a Cow<'a, Conversation>,
    /// Where it is cut.
    cut: Split,
    /// The head's messages kept past the summary.
    carried: Vec<Message>,
    /// The most the summary may take.
    summary_room: usize,
    /// Protected pairs of the head left to the summary.
    protected_summarized: usize,
    /// Tail outputs cut to previews.
    previewed_outputs: usize,
    /// Tail inputs cut to previews.
    tail_inputs: usize,
    /// The request as measured.
    due: Due,
}

/// What a compacted request is made of but its summary ([`Compactor::assembled`]).
struct Assembly<'a> {
    /// The conversation compacted, its tail's previews made.
    conversation: &'a Conversation,
    /// Where it is cut.
    cut: &'a Split,
    /// The head's messages kept past the summary.
    carried: &'a [Message],
    /// What the agent is told after the summary.
    continuation: Option<&'a str>,
    /// Whether the person's opening request goes in front of the summary.
    lead: bool,
    /// The request as measured.
    due: &'a Due,
}

/// A compacted request as [`Compactor::assembled`] made it.
struct Assembled {
    /// The request.
    conversation: Conversation,
    /// What was cut for it to fit the window.
    fitted: Fitted,
    /// The session's decisions once it is sent.
    log: condense_pruner::DecisionLog,
}

/// The summary a compaction puts in, and where.
struct Summary<'a> {
    /// Its text.
    text: &'a str,
    /// What the agent is told after it, in the same message.
    continuation: Option<&'a str>,
    /// Whether the first message carried (the person's opening request) goes in front of it
    /// ([`condense_compact::leads_the_summary`]).
    lead: bool,
}

impl Summary<'_> {
    /// Where its message stands in the conversation compacted at `cut`.
    fn at(&self, cut: &Split) -> usize {
        cut.pinned + usize::from(self.lead)
    }
}

/// The compacted conversation: what is pinned, the summary message (with the continuation),
/// the messages carried past it, the tail; side records moved with the messages they stood
/// before. The person's opening request, where it leads the summary, comes before it instead.
fn reassembled(
    conversation: &Conversation,
    cut: &Split,
    carried: &[Message],
    summary: &Summary<'_>,
) -> Conversation {
    let messages = &conversation.messages;
    let mut out = reassemble(
        messages,
        cut.pinned,
        cut.tail_start,
        summary.text,
        summary.continuation,
    );
    let summary_at = cut.pinned + 1;
    out.splice(summary_at..summary_at, carried.iter().cloned());
    if summary.lead {
        // The opening request, carried first, goes back in front of the summary.
        out[cut.pinned..=summary_at].rotate_left(1);
    }
    let side = reposition_side(
        &conversation.side,
        cut.pinned,
        cut.tail_start,
        summary_at + carried.len(),
    );
    Conversation {
        messages: out,
        envelope: conversation.envelope.clone(),
        side,
    }
}

impl Due {
    /// The request as phase 1 left it, due for phase 2.
    fn of(pruned: &Pruned, counts: &[usize], tail: TailSettings, early: bool) -> Due {
        // What the provider most likely has cached: what the previous request sent, up to the
        // first output this one replaced for the first time; nothing where its cache holds
        // nothing of the request (a pause past its lifetime, another model), where a fork would
        // write all it reads at a premium.
        let previous_end = match pruned.measured {
            _ if pruned.cold => 0,
            Measure::ProviderUsage { at_message, .. } => at_message,
            Measure::Tokenizer { .. } => counts.len(),
        };
        let first_change = pruned.prune.first_fresh_message().unwrap_or(counts.len());
        let cached_end = previous_end.min(first_change).min(counts.len());
        Due {
            tail,
            tokens: pruned.due_tokens,
            counted: pruned.tokens,
            cached: counts[..cached_end].iter().sum(),
            early,
            cache_cold: pruned.cold,
            line: pruned.line,
        }
    }
}

/// The trigger's measure of a pruned request: condense's count, or the provider's less what
/// pruning just removed (by condense's count). Not less what it never counted: an output
/// replaced by an earlier request (a frozen decision, applied again to the client's resent
/// original), or an input one cut, up to the reported message was a placeholder or a preview in
/// the request the provider counted.
fn due_tokens(
    measured: Measure,
    prune: &condense_pruner::PruneReport,
    tokens_in: usize,
    tokens: usize,
) -> usize {
    match measured {
        Measure::Tokenizer { tools, .. } => tokens + tools,
        Measure::ProviderUsage {
            tokens: provider,
            at_message,
            ..
        } => {
            let freed = tokens_in.saturating_sub(tokens);
            provider.saturating_sub(freed.saturating_sub(prune.frozen_tokens_up_to(at_message)))
        }
    }
}

/// What phase 1 is told of a request: its window, when the session's last request went out,
/// whether the walk is left out, and what a rewrite of the provider's cached prefix costs
/// (nothing but where the provider's cache is `warm`: a cold one has the whole request written
/// again anyway, and a file compacted on purpose has none).
fn prune_request(
    tail: &TailSettings,
    state: &SessionState,
    skip_walk: bool,
    warm: bool,
) -> PruneRequest {
    PruneRequest {
        context_window: Some(tail.context_window),
        previous_request_ms: state.last_request_ms,
        skip_walk,
        cache_rewrite_cost: if warm {
            tail.rules.cache_rewrite_cost
        } else {
            0.0
        },
    }
}

/// `rules` with the prices a model's entry sets in place of the configured ones.
fn priced(
    rules: condense_compact::CompactionRules,
    prices: crate::CachePrices,
) -> condense_compact::CompactionRules {
    condense_compact::CompactionRules {
        cache_rewrite_cost: prices
            .cache_rewrite_cost
            .unwrap_or(rules.cache_rewrite_cost),
        output_cost: prices.output_cost.unwrap_or(rules.output_cost),
        ..rules
    }
}

/// The window `tail` is sized for, less what the request carries beyond condense's count of
/// its messages ([`overhead`]; `due` the provider's measure, `ours` condense's): what the
/// summary (`summary_tokens`, its budget) and the tail must fit in, with a tail budget no
/// smaller than the window's own unless it would take more than half of it (and never more than
/// that half, whatever `min_tail_tokens` says), and the recent
/// calls' previews allowed the window's own budget as far as the summary's is left.
fn room(
    tail: &TailSettings,
    due: usize,
    ours: usize,
    summary_tokens: usize,
    line: Option<Line>,
) -> TailSettings {
    let overhead = overhead(tail, due, ours, line);
    let mut room = TailSettings {
        context_window: tail.context_window.saturating_sub(overhead),
        ..*tail
    };
    // The tail's budget stays the window's own as far as half the room allows: the recent work
    // an agent acts on is no smaller because its request carries a large system prompt and
    // tools (Claude Code's take 12K-28K tokens), and the other half is left to the summary and
    // to what comes next.
    let own = condense_compact::tail_budget(tail);
    let usable = condense_compact::usable(&room);
    // Never more than that half: where the room is smaller than the configured floor, a tail
    // of the floor alone would leave the request over the window.
    room.rules.min_tail_tokens = room.rules.min_tail_tokens.max(own).min(usable / 2);
    // Where that half is all the last exchange leaves room for, the calls the agent made just
    // before it are still shown, cut to previews, within the window's own budget: what the
    // agent was acting on, at the cost of room to grow, never of the summary's.
    room.previews_within = own.min(usable.saturating_sub(summary_tokens));
    room
}

/// Whether `cut` keeps the agent's recent work as it is: its last `min_tail_calls` tool calls
/// (all of them, when it has made fewer) in the tail, no output cut to a preview. An early
/// compaction is a saving, not a necessity: it keeps the recent calls whole, in a wider tail
/// where they are more than the budget and that pays ([`holding_recent_work`]), or waits for
/// the window to fill; it takes from the agent what it is acting on only where no tail within
/// the tail's share of the window holds it and the window is due before the session is likely
/// to end ([`due_before_the_end`]), making early the cut the window would force.
fn keeps_recent_work(messages: &[Message], cut: &Split, tail: &TailSettings) -> bool {
    let calls: usize = condense_core::answered_calls_from_end(&messages[cut.pinned..])
        .map(|(_, calls)| calls)
        .sum();
    cut.previews.is_none() && cut.tail_calls >= calls.min(tail.rules.min_tail_calls)
}

/// An early compaction at a cut of `messages` as the cost model weighs it
/// ([`Compactor::pays_to_compact`]), the session growing `growth` tokens a request.
struct Weighing<'a> {
    compactor: &'a Compactor,
    messages: &'a [Message],
    summarizer: &'a dyn Summarizer,
    growth: usize,
}

impl Weighing<'_> {
    /// The protected tools' pairs of `cut`'s head, carried past the summary, and their tokens:
    /// not saved by it, and rewritten with the tail. (The person's last requests the tail does
    /// not hold are carried only as far as they fit beside it, and are left out here: counted,
    /// the rule compacted later and cost more on the shared sessions, $45.29 against $44.93
    /// over the 120 points.)
    ///
    /// `None` where the head is the earlier summary and what it carried, nothing more
    /// ([`nothing_new`]): the compaction would find nothing to summarize and make none, so it
    /// saves nothing, whatever a summary of the summary would weigh.
    fn carried(&self, cut: &Split) -> Option<(Vec<Message>, usize)> {
        let carried = carried(
            self.messages,
            cut.pinned,
            cut.tail_start,
            &self.compactor.prune.rules.protected_tools,
            0,
        );
        if nothing_new(&self.messages[cut.head()], &carried) {
            return None;
        }
        let tokens = self.compactor.counter.count_each(&carried).iter().sum();
        Some((carried, tokens))
    }

    /// The compaction at `cut`, `carried` tokens of its head carried past a summary of
    /// `summary_tokens`.
    fn at(
        &self,
        cut: &Split,
        carried: usize,
        summary_tokens: usize,
    ) -> condense_compact::EarlyCompaction {
        condense_compact::EarlyCompaction {
            head_tokens: cut.head_tokens.saturating_sub(carried),
            summary_tokens,
            tail_tokens: cut.kept_tokens + carried,
            growth_tokens: self.growth,
            summarizer_input_tokens: (!self.summarizer.runs_locally()).then_some(cut.head_tokens),
        }
    }

    /// The tokens of the summary of `cut`'s head as the summarizer would write it where it can
    /// say so (condense's own, [`Summarizer::local_summary`]), at most its budget; else the
    /// budget.
    fn written(&self, cut: &Split, carried: &[Message]) -> usize {
        let budget = self.compactor.summary_tokens;
        self.summarizer
            .local_summary(&self.messages[cut.head()], carried)
            .map_or(budget, |summary| {
                self.compactor.counter.count_text(&summary).min(budget)
            })
    }
}

/// `tail` with a budget that holds the agent's last `min_tail_calls` tool calls whole (all of
/// them, when it has made fewer): the tokens from the step that made the earliest of them to
/// the end, as far as the tail's share of the usable room (`tail_ratio`, and never past half
/// of it, what [`room`] leaves the tail at most), or as far as that half at a `cold` cache
/// (where the compaction rewrites nothing it would not have). `None` when the budget holds them
/// already, when that bound does, or when there are none. An early compaction that would
/// otherwise wait for the window to fill keeps the recent work so
/// ([`Compactor::pays_to_compact`]).
///
/// The share bounds it because the budget's cap (`max_tail_tokens`) is what a large window
/// widens past: in a window whose budget is already the tail's whole share (32K), a tail past
/// it leaves too little room to grow into and is rewritten at every compaction the cost model
/// then makes. Measured (BENCHMARKS.md, "The recent work in a small window"): with half the
/// room as the bound, condense cost more than Claude Code's rules at 16 of the 120 points of
/// the frontier test, all but one at 32K, keeping 97.7-100 %.
fn holding_recent_work(
    messages: &[Message],
    counts: &[usize],
    tail: &TailSettings,
    cold: bool,
) -> Option<TailSettings> {
    let pinned = condense_compact::pinned(messages);
    let answered = || condense_core::answered_calls_from_end(&messages[pinned..]);
    let wanted = answered()
        .map(|(_, calls)| calls)
        .sum::<usize>()
        .min(tail.rules.min_tail_calls);
    if wanted == 0 {
        return None;
    }
    let mut seen = 0;
    let (offset, _) = answered().find(|&(_, calls)| {
        seen += calls;
        seen >= wanted
    })?;
    let start = pinned + offset;
    let needed: usize = counts[start..].iter().sum();
    let budget = condense_compact::tail_budget(tail);
    let usable = condense_compact::usable(tail);
    let share = (usable as f64 * tail.rules.tail_ratio).floor() as usize;
    let widest = if cold {
        usable / 2
    } else {
        share.min(usable / 2)
    };
    if needed <= budget || budget >= widest {
        return None;
    }
    let mut wider = *tail;
    wider.rules.min_tail_tokens = needed.min(widest);
    wider.rules.max_tail_tokens = wider.rules.min_tail_tokens;
    Some(wider)
}

/// Whether the window will be due before the session is likely to end: the request's
/// `counts`, grown by `growth` tokens a request for as many requests again as the session has
/// answered so far, reach the usable window. A session seen part of the way through has, as
/// like as not, as long again to run (the only forecast its own length gives); with no summary
/// yet, the growth is the request (less its pinned messages) over its answers, and this is the
/// request at about half the usable window. An early compaction that takes the recent work
/// ([`Compactor::budget_cut_pays`]) makes only a cut the window is expected to force: where the
/// session ends first, a policy that never compacts keeps everything.
fn due_before_the_end(
    messages: &[Message],
    counts: &[usize],
    growth: usize,
    tail: &TailSettings,
) -> bool {
    let answers = messages
        .iter()
        .filter(|message| message.role == Role::Assistant)
        .count();
    let now: usize = counts.iter().sum();
    now.saturating_add(growth.saturating_mul(answers)) >= condense_compact::usable(tail)
}

/// condense's count of the longest of `conversation`'s answers (`counts`, each message's).
fn longest_reply(conversation: &Conversation, counts: &[usize]) -> usize {
    conversation
        .messages
        .iter()
        .zip(counts)
        .filter(|(message, _)| message.role == Role::Assistant)
        .map(|(_, count)| *count)
        .max()
        .unwrap_or(0)
}

/// The provider's count at which a request is due for compaction: the usable window
/// ([`condense_compact::is_due`]), or more where the session's figures show a system prompt and
/// tools that leave the reply's reserve little else ([`Line::limit`]).
fn due_at(tail: &TailSettings, line: Option<Line>) -> usize {
    let usable = condense_compact::usable(tail);
    line.map_or(usable, |line| line.limit(usable, tail.context_window))
}

/// How much of the usable window the request's part beyond condense's count takes, in
/// condense's tokens: the provider's measure `due` against condense's count `ours` of the same
/// messages. The difference is part fixed (tool definitions, a system prompt sent apart) and
/// part a tokenizer that counts more.
///
/// Where the session's figures give the two apart (`line`, from two requests of different
/// sizes), the room is what the window less the fixed part leaves, in condense's tokens: exact
/// wherever the provider's count is a line in condense's. Otherwise both are taken as a share of
/// the request, which is exact for the second; for the first it overstates the room of a
/// request over the window (the fixed part counts as if it shrank with the conversation),
/// by `fixed × (due − usable) / due`: a compaction the window forces could then keep a summary
/// and tail the window cannot hold (Claude Code's 14K-token system prompt and tools at a 16K
/// window). Taking it all as fixed would, on a long log, count the tokenizer's difference over
/// every message as overhead and leave no room at all.
fn overhead(tail: &TailSettings, due: usize, ours: usize, line: Option<Line>) -> usize {
    let usable = condense_compact::usable(tail);
    // With a line, up to the limit the trigger compacts at, which leaves the reply less than its
    // reserve where the system prompt and tools would leave the conversation nothing.
    let limit = line.map_or(usable, |_| due_at(tail, line));
    usable.saturating_sub(in_ours(limit, due, ours, line))
}

/// What phase 2 made of a request: its outcome, the request to send where it changed, and,
/// where condense's own summary went out written again smaller to fit the window, the summary
/// as first written ([`FrozenHead::whole_summary`]).
struct Made {
    outcome: CompactionOutcome,
    sent: Option<Conversation>,
    whole_summary: Option<WholeSummary>,
}

impl From<(CompactionOutcome, Option<Conversation>)> for Made {
    fn from((outcome, sent): (CompactionOutcome, Option<Conversation>)) -> Made {
        Made {
            outcome,
            sent,
            whole_summary: None,
        }
    }
}

/// What stands behind the summary `sent`, written from `first`
/// ([`FrozenHead::whole_summary`]): `first`, where `sent` is it written again smaller; where
/// `first` is the earlier summary with nothing new after it (`shrinking_only`), itself written
/// again smaller before, what that was first written as; nothing where `sent` is `first`.
fn whole_summary_behind(
    first: String,
    sent: &str,
    shrinking_only: bool,
    state: &SessionState,
) -> Option<WholeSummary> {
    let earlier = state
        .head
        .as_ref()
        .and_then(|frozen| frozen.whole_summary.as_ref())
        .filter(|earlier| shrinking_only && earlier.sent == first);
    match earlier {
        Some(earlier) => Some(WholeSummary {
            sent: sent.to_owned(),
            whole: earlier.whole.clone(),
        }),
        None => (sent != first).then(|| WholeSummary {
            sent: sent.to_owned(),
            whole: first,
        }),
    }
}

/// `conversation` with the earlier summary of `state`'s frozen head as first written, where it
/// went out written again smaller ([`FrozenHead::whole_summary`]); `None` where it did not.
fn with_whole_summary(conversation: &Conversation, state: &SessionState) -> Option<Conversation> {
    let whole = state.head.as_ref()?.whole_summary.as_ref()?;
    let mut unshrunk = conversation.clone();
    whole.restore_in(&mut unshrunk.messages).then_some(unshrunk)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::{CachePrices, Sources};

    fn naming(model: &str) -> Conversation {
        let mut conversation = Conversation::new(Vec::new());
        let mut envelope = serde_json::Map::new();
        envelope.insert("model".into(), model.into());
        conversation.envelope = Some(envelope);
        conversation
    }

    fn sized_by_model(config: &Config) -> Compactor {
        Compactor::from_config(config)
            .unwrap()
            .with_model_windows(config.model_windows().clone())
    }

    /// Each request is weighed at its model's prices (OpenAI's GPT-4.1 at its own, a Claude
    /// model at the `[compaction]` defaults, Anthropic's), and the replay's compactor at the
    /// prices it is billed at; a price the team sets holds for every model and every replay.
    #[test]
    fn a_request_is_weighed_at_its_models_prices_unless_the_team_set_them() {
        let built_in = Config::built_in().unwrap();
        let compactor = sized_by_model(&built_in);
        let rules = |compactor: &Compactor, model: &str| {
            let rules = compactor.tail_for(&naming(model)).rules;
            (rules.cache_rewrite_cost, rules.output_cost)
        };
        assert_eq!(rules(&compactor, "gpt-4.1-mini"), (3.0, 16.0));
        assert_eq!(rules(&compactor, "claude-sonnet-4-5"), (11.5, 50.0));
        let hour = CachePrices {
            cache_rewrite_cost: Some(19.0),
            output_cost: Some(50.0),
        };
        let mut replayed = Compactor::from_config(&built_in).unwrap();
        replayed.price_as(hour);
        assert_eq!(rules(&replayed, "anything"), (19.0, 50.0));

        let team = Config::load(&Sources {
            flags: vec![(
                "test".into(),
                "compaction.cache_rewrite_cost".into(),
                "0".into(),
            )],
            ..Sources::default()
        })
        .unwrap();
        let mut compactor = sized_by_model(&team);
        assert_eq!(rules(&compactor, "gpt-4.1"), (0.0, 16.0));
        compactor.price_as(hour);
        assert_eq!(rules(&compactor, "claude-sonnet-4-5"), (0.0, 50.0));
    }

    /// The cache's lifetime a compaction at a cold cache is judged by: the one a request
    /// names (an hour on an Anthropic request's breakpoint), else the replay's (`--ttl`), else
    /// the configured one; a lifetime the team sets holds against the replay's, never against
    /// the request's own.
    #[test]
    fn a_request_names_its_cache_lifetime_or_the_harness_or_the_team_does() {
        let lifetime = |compactor: &Compactor, conversation: &Conversation| {
            compactor
                .tail_for(conversation)
                .rules
                .cache_lifetime_minutes
        };
        let hourly = condense_formats::read_json(
            condense_formats::Format::Anthropic,
            serde_json::json!({
                "model": "claude-sonnet-4-5",
                "system": [{"type": "text", "text": "You are",
                            "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
                "messages": [{"role": "user", "content": "Hi"}],
            }),
        )
        .unwrap();
        let built_in = Config::built_in().unwrap();
        let mut compactor = sized_by_model(&built_in);
        assert_eq!(lifetime(&compactor, &naming("claude-sonnet-4-5")), 5);
        assert_eq!(lifetime(&compactor, &hourly), 60);
        compactor.cache_lives(60);
        assert_eq!(lifetime(&compactor, &naming("gpt-4.1")), 60);

        let team = Config::load(&Sources {
            flags: vec![(
                "test".into(),
                "compaction.cache_lifetime_minutes".into(),
                "0".into(),
            )],
            ..Sources::default()
        })
        .unwrap();
        let mut compactor = sized_by_model(&team);
        compactor.cache_lives(5);
        assert_eq!(lifetime(&compactor, &naming("claude-sonnet-4-5")), 0);
        assert_eq!(lifetime(&compactor, &hourly), 60);
    }

    /// The early check sizes its cut with every output whole ([`Compactor::cut_unpreviewed`])
    /// and decides as it would with the previews made: on every request of every shared
    /// session, at a window that previews and one that seldom does, it takes the same cuts and
    /// rejects the same, in the budget's tail and in the wider one it tries next
    /// ([`holding_recent_work`]), and a cut it takes is the same cut.
    #[test]
    fn the_early_check_decides_the_same_without_sizing_previews() {
        let compactor = Compactor::from_config(&Config::built_in().unwrap()).unwrap();
        let (mut taken, mut rejected, mut widened) = (0, 0, 0);
        for transcript in condense_core::testing::transcripts().unwrap() {
            let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
            let messages = &conversation.messages;
            let counts = compactor.counter.count_each(messages);
            for window in [32_000, 64_000] {
                let tail = TailSettings::built_in(window, 4_096).unwrap();
                for end in
                    (2..=messages.len()).filter(|&end| messages[end - 1].role != Role::Assistant)
                {
                    let (messages, counts) = (&messages[..end], &counts[..end]);
                    let at = format!("{} at {window}, {end} messages", transcript.name);
                    // The two cuts in `tail` decide alike and, taken, are the same cut: whether
                    // taken, and whether the sized one previews.
                    let compare = |tail: &TailSettings| {
                        let sized = compactor.cut(messages, counts, tail);
                        let whole = compactor.cut_unpreviewed(messages, counts, tail);
                        let takes = |cut: &Split| {
                            !cut.nothing_to_compact() && keeps_recent_work(messages, cut, tail)
                        };
                        assert_eq!(takes(&sized), takes(&whole), "{at}, {tail:?}");
                        if takes(&sized) {
                            assert_eq!(
                                (sized.tail_start, sized.head_tokens, sized.kept_tokens),
                                (whole.tail_start, whole.head_tokens, whole.kept_tokens),
                                "{at}, {tail:?}"
                            );
                        }
                        (takes(&sized), sized.previews.is_some())
                    };
                    match compare(&tail) {
                        (true, _) => taken += 1,
                        // And the wider tail the check then tries (half the room, as at a
                        // cold cache: the share's, where there is one, is the same tail).
                        (false, previewed) => {
                            rejected += usize::from(previewed);
                            if let Some(wider) = holding_recent_work(messages, counts, &tail, true)
                            {
                                widened += usize::from(compare(&wider).0);
                            }
                        }
                    }
                }
            }
        }
        // All three occur, so the comparison is not between cuts that never differ.
        assert!(
            taken > 100 && rejected > 100 && widened > 100,
            "{taken} taken, {rejected} previewed, {widened} taken wider"
        );
    }

    /// condense's own summary reads the inputs it cut whole: a command whose input was cut to
    /// a preview (its script past the cut, and the file it writes at the end) is read from the
    /// store, so the summary lists the file it wrote as modified; read from the cut command, its
    /// note naming the file, it listed it as read. The agent's request keeps the cut.
    #[test]
    fn the_summary_reads_a_cut_input_whole() {
        let compactor = Compactor::from_config(&Config::built_in().unwrap())
            .unwrap()
            .with_store(Box::new(condense_pruner::MemoryStore::new()));
        let script: String = (0..300)
            .map(|line| format!("print('row {line}', compute_row({line}))\n"))
            .collect();
        let command = format!("python3 - <<'EOF'\n{script}EOF\n > build/reports/rows_summary.txt");
        let mut conversation =
            Conversation::new(vec![Message::text(Role::User, "write the rows report")]);
        conversation
            .messages
            .extend(condense_core::testing::tool_step(
                "call_1",
                "Bash",
                serde_json::json!({ "command": command }),
                "done".to_owned(),
            ));
        let whole = conversation.clone();
        let mut log = condense_pruner::DecisionLog::default();
        let cut = compactor
            .pruner()
            .preview_inputs(&mut conversation, 1..2, 2_000, &mut log)
            .unwrap();
        assert_eq!(cut, 1);
        assert_ne!(conversation, whole);
        let head = 0..conversation.messages.len();
        let restored = compactor
            .with_originals(&conversation, head.clone())
            .unwrap();
        assert_eq!(restored.messages, whole.messages);
        let summary = |conversation: &Conversation| {
            compactor
                .extractive
                .summary_carrying(&conversation.messages[head.clone()], &[])
                .unwrap()
        };
        let from_whole = summary(&restored);
        assert!(
            from_whole.contains("build/reports/rows_summary.txt"),
            "{from_whole}"
        );
        assert_eq!(from_whole, summary(&whole));
        let listed = "Modified:\n- build/reports/rows_summary.txt";
        assert!(from_whole.contains(listed), "{from_whole}");
        // Read from the cut command, the file it wrote was listed as read.
        let from_cut = summary(&conversation);
        assert!(!from_cut.contains(listed), "{from_cut}");
    }
}
