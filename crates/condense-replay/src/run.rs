//! The replay itself: every policy over every request, priced.

use std::sync::Arc;

use condense_tokenizer::TokenCounter;
use serde::Serialize;
use xxhash_rust::xxh3::xxh3_64;

use crate::cache::{AnthropicCache, OpenAiCache, Ttl, Usage};
use crate::policy::{Model, Policy, Prepared, Recorded, SummarizerCall, SummarizerInput};
use crate::prices::PriceTable;
use crate::prompt::{Calibration, Point, Prompt};
use crate::recording::{Recording, Step};
use crate::retention::Produced;
use crate::{RecordedUsage, ReplayError, SummaryLength};

/// Whose cache and prices the requests are sent against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Explicit breakpoints, 20-block look-back, writes at a premium.
    Anthropic,
    /// Automatic prefix caching.
    #[serde(rename = "openai")]
    OpenAi,
}

impl std::str::FromStr for Provider {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "anthropic" => Ok(Provider::Anthropic),
            "openai" => Ok(Provider::OpenAi),
            other => Err(format!(
                "unknown provider `{other}`: use anthropic or openai"
            )),
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
        })
    }
}

/// What a replay is run against.
#[derive(Debug, Clone)]
pub struct ReplaySettings {
    /// Whose cache model and prices.
    pub provider: Provider,
    /// The cache lifetime (Anthropic's 5 minutes or 1 hour).
    pub ttl: Ttl,
    /// The prices and cache rules.
    pub prices: PriceTable,
    /// The model's context window: a request over it fails.
    pub context_window: usize,
    /// The most the model writes in one reply (the harnesses' reserves depend on it).
    pub max_output_tokens: usize,
}

/// Where a replay is, for a progress display.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// The subagent being replayed ([`replay_session`]); `None` for the session's main thread.
    pub thread: Option<&'a str>,
    /// The policy being replayed.
    pub policy: &'a str,
    /// Its position among the policies, from 0.
    pub policy_index: usize,
    /// How many policies.
    pub policies: usize,
    /// Requests done for this policy.
    pub done: usize,
    /// Requests in all.
    pub requests: usize,
}

/// What a row of the replay is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    /// One of the agent's own requests.
    Agent,
    /// A summarizer call the policy made before the agent's request of the same step, or (for
    /// `recorded`) the harness's own summarizer call that the log records as a request.
    Summarizer,
    /// The agent's request answered cut short at a reply limit the policy lowered: billed as
    /// the provider bills it (the input, and the reply up to the limit), and sent once more
    /// (the [`RowKind::Agent`] row of the same step).
    CutShort,
}

/// One request of one policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The recorded request it belongs to (0-based).
    pub step: usize,
    /// The agent's request or a summarizer call.
    pub kind: RowKind,
    /// Its input, in the provider's tokens.
    pub context_tokens: u64,
    /// How that input was billed (all zero for a request refused over the window).
    pub usage: Usage,
    /// Its output tokens.
    pub output_tokens: u64,
    /// What it cost.
    pub cost_usd: f64,
    /// Refused, its input and reply limit together over the context window (the provider
    /// charges nothing), or answered cut short by a limit the policy lowered when its one more
    /// try was spent (billed to that limit; the agent got no answer it can go on from).
    pub failed: bool,
    /// The reply's limit the request went out with, where the policy lowered it below the
    /// model's for the request to fit the window (condense does); `None`: the model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_limit: Option<u64>,
    /// What the agent's request still showed of what the session had produced by then
    /// ([`crate::retention`]), from 0 to 1 (0 when it failed); `None` for a summarizer call.
    pub retention: Option<f64>,
}

/// The provider's own accounting, summed over the log's requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RecordedFigures {
    /// Requests that carried usage.
    pub recorded_requests: usize,
    /// Sum of `cache_read_input_tokens`.
    pub recorded_cache_read_tokens: u64,
    /// Sum of `cache_creation_input_tokens`.
    pub recorded_cache_write_tokens: u64,
    /// Sum of `input_tokens`.
    pub recorded_uncached_tokens: u64,
    /// Sum of `output_tokens`.
    pub recorded_output_tokens: u64,
    /// Those figures at the replay's prices, its provider's (a write priced as input read uncached
    /// where that provider bills none).
    pub recorded_cost_usd: f64,
}

impl RecordedFigures {
    /// Both threads' figures added up.
    fn plus(&self, other: &RecordedFigures) -> RecordedFigures {
        RecordedFigures {
            recorded_requests: self.recorded_requests + other.recorded_requests,
            recorded_cache_read_tokens: self.recorded_cache_read_tokens
                + other.recorded_cache_read_tokens,
            recorded_cache_write_tokens: self.recorded_cache_write_tokens
                + other.recorded_cache_write_tokens,
            recorded_uncached_tokens: self.recorded_uncached_tokens
                + other.recorded_uncached_tokens,
            recorded_output_tokens: self.recorded_output_tokens + other.recorded_output_tokens,
            recorded_cost_usd: self.recorded_cost_usd + other.recorded_cost_usd,
        }
    }
}

/// One policy's totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyResult {
    /// The policy.
    pub name: String,
    /// Requests sent: the agent's, plus the summarizer calls.
    pub requests: usize,
    /// Of those, summarizer calls.
    pub summarizer_requests: usize,
    /// Agent requests that got no answer to go on from: refused over the context window, or
    /// answered cut short at a lowered limit once more when sent again.
    pub failures: usize,
    /// Agent requests sent once more: refused by the provider as longer than the window, and
    /// prepared again by the policy with the provider's count ([`crate::Policy::refused`]; the
    /// refusal is not billed, and not a request in the figures), or answered cut short at a
    /// reply limit the policy lowered (billed, a [`RowKind::CutShort`] row beside the second
    /// try).
    #[serde(skip_serializing_if = "is_zero")]
    pub resent: usize,
    /// Summaries made: the summarizer calls and those written without a request (condense's
    /// extractive summarizer).
    pub compactions: usize,
    /// Outputs pruned or cleared, each counted once.
    pub pruned_outputs: usize,
    /// The largest agent request, in tokens.
    pub peak_context_tokens: u64,
    /// The mean agent request, in tokens.
    pub mean_context_tokens: u64,
    /// Input read from the cache.
    pub cache_read_tokens: u64,
    /// Input written to the cache.
    pub cache_write_tokens: u64,
    /// Input neither read nor written.
    pub uncached_tokens: u64,
    /// Output.
    pub output_tokens: u64,
    /// The total, in US dollars.
    pub cost_usd: f64,
    /// The mean share of what the session had produced that each agent request still showed
    /// ([`crate::retention`]).
    pub retention: f64,
    /// The least any agent request showed.
    pub retention_min: f64,
    /// `cost_usd` over the `recorded` policy's, when it was replayed.
    pub cost_vs_recorded: Option<f64>,
    /// The log's own figures (the `recorded` policy, on a log that has them).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<RecordedFigures>,
    /// Every request, in order (for charts and checks; not in the JSON summary).
    #[serde(skip)]
    pub rows: Vec<Row>,
}

/// A whole replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Replay {
    /// Whose cache and prices.
    pub provider: Provider,
    /// The model the prices are for.
    pub model: String,
    /// The cache lifetime.
    pub ttl: Ttl,
    /// The context window.
    pub context_window: usize,
    /// The agent's requests in the log.
    pub agent_requests: usize,
    /// How condense's counts were turned into the provider's.
    pub calibration: Calibration,
    /// How long the summaries the session's harness wrote itself run against the stand-ins
    /// for a model's ([`SummaryLength`]); `None` when the log holds none, and the stand-ins
    /// keep their own length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary_length: Option<SummaryLength>,
    /// One result per policy, in the order asked.
    pub policies: Vec<PolicyResult>,
    /// What the log accounts for beside its main thread, which no policy replays. `None` when
    /// there is nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_replayed: Option<NotReplayed>,
    /// The subagents the session started, each replayed on its own ([`replay_session`]); in
    /// none of `policies`' figures.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subagents: Vec<SubagentReplay>,
    /// When there are subagents, the whole session under each policy (in `policies`' order):
    /// the main thread's figures and every subagent's added up, the peak the largest of them,
    /// the mean over every agent request, the rows the main thread's and then each
    /// subagent's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub session: Vec<PolicyResult>,
}

/// A subagent's thread, replayed on its own: a subagent works in a context of its own (its
/// own system prompt and tools, which the log does not keep but the calibration on its own
/// requests' usage stands for), so a policy compacts it and the provider caches it apart from
/// the session's main thread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubagentReplay {
    /// Which subagent ([`condense_formats::Subagent::name`]).
    pub name: String,
    /// Its requests in the log.
    pub agent_requests: usize,
    /// Its own calibration.
    pub calibration: Calibration,
    /// One result per policy, in the order asked.
    pub policies: Vec<PolicyResult>,
}

/// A subagent to replay with the session ([`replay_session`]).
#[non_exhaustive]
pub struct SubagentRecording {
    /// Its name ([`condense_formats::Subagent::name`]).
    pub name: String,
    /// Its requests.
    pub recording: Recording,
    /// Policies of its own, the same as the main thread's and in the same order: a policy keeps
    /// state from request to request, and a subagent's context is not the main thread's.
    pub policies: Vec<Box<dyn Policy>>,
}

impl SubagentRecording {
    /// `recording` under `policies` (see the fields).
    pub fn new(name: String, recording: Recording, policies: Vec<Box<dyn Policy>>) -> Self {
        SubagentRecording {
            name,
            recording,
            policies,
        }
    }
}

impl std::fmt::Debug for SubagentRecording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let policies: Vec<&str> = self.policies.iter().map(|policy| policy.name()).collect();
        f.debug_struct("SubagentRecording")
            .field("name", &self.name)
            .field("requests", &self.recording.steps.len())
            .field("policies", &policies)
            .finish()
    }
}

/// The requests a log accounts for that the replay does not simulate, with the provider's own
/// figures for them at the table's prices: every policy's figures, `recorded`'s included, leave
/// them out. A subagent works in a context of its own: [`replay`] follows the main thread only
/// and counts its subagents' requests here, [`replay_session`] replays them beside it. A branch
/// the person left is no longer what the session sends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NotReplayed {
    /// Requests of subagents (Claude Code's sidechains).
    pub subagent_requests: usize,
    /// What they cost, by the log's usage.
    pub subagent_cost_usd: f64,
    /// Requests on branches the person left.
    pub left_branch_requests: usize,
    /// What they cost, by the log's usage.
    pub left_branch_cost_usd: f64,
}

/// Replays `recording` under each policy. `counter` is the tokenizer the policies count with;
/// `progress` is told after every request.
pub fn replay(
    recording: &Recording,
    policies: &mut [Box<dyn Policy>],
    settings: &ReplaySettings,
    counter: Arc<dyn TokenCounter>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Replay, ReplayError> {
    let length = SummaryLength::of(recording, &counter)?;
    replay_sized(
        recording,
        policies,
        settings,
        counter,
        length.as_ref(),
        progress,
    )
}

/// [`replay`] with the stand-ins for a model's summary sized by `length`, measured elsewhere
/// ([`SummaryLength::pooled`] over a team's logs, once for every replay of them), where
/// [`replay`] measures the log's own; `None` keeps the stand-ins' own length.
pub fn replay_sized(
    recording: &Recording,
    policies: &mut [Box<dyn Policy>],
    settings: &ReplaySettings,
    counter: Arc<dyn TokenCounter>,
    length: Option<&SummaryLength>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Replay, ReplayError> {
    replay_thread(
        recording,
        policies,
        settings,
        counter,
        (None, length),
        progress,
    )
}

/// Replays a session's main thread (`recording`, under `policies`) and each of the subagents
/// it started, and adds them up in [`Replay::session`]. The subagents are taken to be those the
/// log accounts for beside its main thread: [`Replay::not_replayed`] then names only the
/// branches a person left.
pub fn replay_session(
    recording: &Recording,
    policies: &mut [Box<dyn Policy>],
    subagents: &mut [SubagentRecording],
    settings: &ReplaySettings,
    counter: Arc<dyn TokenCounter>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Replay, ReplayError> {
    // A subagent asks the session's model, whose summaries the main thread's log shows.
    let length = SummaryLength::of(recording, &counter)?;
    let mut whole = replay_thread(
        recording,
        policies,
        settings,
        counter.clone(),
        (None, length.as_ref()),
        progress,
    )?;
    if subagents.is_empty() {
        return Ok(whole);
    }
    let names: Vec<&str> = policies.iter().map(|policy| policy.name()).collect();
    for subagent in subagents.iter_mut() {
        let theirs: Vec<&str> = subagent
            .policies
            .iter()
            .map(|policy| policy.name())
            .collect();
        if theirs != names {
            return Err(ReplayError::Policy {
                policy: theirs.join(", "),
                message: format!(
                    "subagent {} is given other policies than the main thread's ({})",
                    subagent.name,
                    names.join(", ")
                ),
            });
        }
        let thread = replay_thread(
            &subagent.recording,
            &mut subagent.policies,
            settings,
            counter.clone(),
            (Some(&subagent.name), length.as_ref()),
            progress,
        )?;
        whole.subagents.push(SubagentReplay {
            name: subagent.name.clone(),
            agent_requests: thread.agent_requests,
            calibration: thread.calibration,
            policies: thread.policies,
        });
    }
    whole.session = session_totals(&whole);
    whole.not_replayed = whole.not_replayed.and_then(|beside| {
        (beside.left_branch_requests > 0).then_some(NotReplayed {
            subagent_requests: 0,
            subagent_cost_usd: 0.0,
            ..beside
        })
    });
    Ok(whole)
}

/// Each policy's figures over the main thread and every subagent.
fn session_totals(replay: &Replay) -> Vec<PolicyResult> {
    let mut totals: Vec<PolicyResult> = replay.policies.clone();
    for subagent in &replay.subagents {
        for (total, theirs) in totals.iter_mut().zip(&subagent.policies) {
            total.requests += theirs.requests;
            total.summarizer_requests += theirs.summarizer_requests;
            total.failures += theirs.failures;
            total.compactions += theirs.compactions;
            total.pruned_outputs += theirs.pruned_outputs;
            total.cache_read_tokens += theirs.cache_read_tokens;
            total.cache_write_tokens += theirs.cache_write_tokens;
            total.uncached_tokens += theirs.uncached_tokens;
            total.output_tokens += theirs.output_tokens;
            total.cost_usd += theirs.cost_usd;
            total.recorded = match (total.recorded, theirs.recorded) {
                (Some(ours), Some(theirs)) => Some(ours.plus(&theirs)),
                (ours, theirs) => ours.or(theirs),
            };
            total.rows.extend(theirs.rows.iter().cloned());
        }
    }
    for total in &mut totals {
        let (peak, mean) = context_figures(&total.rows);
        total.peak_context_tokens = peak;
        total.mean_context_tokens = mean;
        (total.retention, total.retention_min) = retention_figures(&total.rows);
    }
    relate_to_recorded(&mut totals);
    totals
}

/// The largest and the mean input of the agent's requests among `rows`.
fn context_figures(rows: &[Row]) -> (u64, u64) {
    let agent = rows.iter().filter(|row| row.kind == RowKind::Agent);
    let (count, sum, peak) = agent.fold((0u64, 0u64, 0u64), |(count, sum, peak), row| {
        (
            count + 1,
            sum + row.context_tokens,
            peak.max(row.context_tokens),
        )
    });
    (peak, sum.checked_div(count).unwrap_or(0))
}

/// The mean and the least retention of the agent's requests among `rows` (1 and 1 when
/// there are none).
fn retention_figures(rows: &[Row]) -> (f64, f64) {
    let shares: Vec<f64> = rows.iter().filter_map(|row| row.retention).collect();
    if shares.is_empty() {
        return (1.0, 1.0);
    }
    let mean = shares.iter().sum::<f64>() / shares.len() as f64;
    let least = shares.iter().copied().fold(1.0, f64::min);
    (mean, least)
}

/// Sets each result's `cost_vs_recorded` from the `recorded` policy's cost, when it is there.
fn relate_to_recorded(results: &mut [PolicyResult]) {
    let baseline = results
        .iter()
        .find(|result| result.name == "recorded")
        .map(|result| result.cost_usd);
    for result in results {
        result.cost_vs_recorded = baseline
            .filter(|cost| *cost > 0.0)
            .map(|cost| result.cost_usd / cost);
    }
}

fn replay_thread(
    recording: &Recording,
    policies: &mut [Box<dyn Policy>],
    settings: &ReplaySettings,
    counter: Arc<dyn TokenCounter>,
    (thread, summary_length): (Option<&str>, Option<&SummaryLength>),
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Replay, ReplayError> {
    let mut fitted = calibrate(recording, counter.as_ref());
    if let Some(first) = recording.steps.first().and_then(|step| step.recorded) {
        fitted.warm_prefix = first.cache_read.min(fitted.hidden_prefix);
    }
    let calibration = match settings.provider {
        Provider::Anthropic => fitted,
        Provider::OpenAi => fitted.unscaled(),
    };
    let model = Model {
        counter: counter.as_ref(),
        context_window: settings.context_window,
        max_output_tokens: settings.max_output_tokens,
        calibration: &calibration,
        prices: settings
            .prices
            .cache_prices(settings.provider, settings.ttl),
        cache_lifetime_minutes: settings.ttl.ms() / 60_000,
        answering: None,
        summary_length,
    };
    // What the session had produced by each request: the same for every policy.
    let produced: Vec<Produced> = recording
        .steps
        .iter()
        .map(|step| Produced::of(recording.history(step, false)))
        .collect();
    let count = policies.len();
    let mut results = Vec::with_capacity(count);
    for (index, policy) in policies.iter_mut().enumerate() {
        let name = policy.name().to_owned();
        let result = run_policy(
            recording,
            &produced,
            policy.as_mut(),
            settings,
            &model,
            &mut |done| {
                progress(Progress {
                    thread,
                    policy: &name,
                    policy_index: index,
                    policies: count,
                    done,
                    requests: recording.steps.len(),
                })
            },
        )?;
        results.push(result);
    }
    relate_to_recorded(&mut results);
    for result in &mut results {
        if result.name == "recorded" {
            result.recorded = recorded_figures(recording, settings);
        }
    }
    let model_name = match settings.provider {
        Provider::Anthropic => settings.prices.anthropic.model.clone(),
        Provider::OpenAi => settings.prices.openai.model.clone(),
    };
    Ok(Replay {
        provider: settings.provider,
        model: model_name,
        ttl: settings.ttl,
        context_window: settings.context_window,
        agent_requests: recording.steps.len(),
        calibration,
        summary_length: summary_length.cloned(),
        policies: results,
        not_replayed: not_replayed(recording, settings),
        subagents: Vec::new(),
        session: Vec::new(),
    })
}

/// The log's own figures for the requests beside its main thread
/// ([`condense_formats::side_usage`]).
fn not_replayed(recording: &Recording, settings: &ReplaySettings) -> Option<NotReplayed> {
    let beside = condense_formats::side_usage(&recording.conversation);
    if beside.is_empty() {
        return None;
    }
    // The log's usage is Anthropic's (Claude Code's), priced as such whatever is simulated.
    let anthropic = ReplaySettings {
        provider: Provider::Anthropic,
        ..settings.clone()
    };
    let mut figures = NotReplayed {
        subagent_requests: 0,
        subagent_cost_usd: 0.0,
        left_branch_requests: 0,
        left_branch_cost_usd: 0.0,
    };
    for (thread, logged) in beside {
        let usage = Usage {
            cache_read: logged.cache_read,
            cache_write: logged.cache_write,
            uncached: logged.uncached(),
        };
        let paid = cost(&anthropic, &usage, logged.output);
        let (requests, cost_usd) = match thread {
            condense_formats::SideThread::Subagent => (
                &mut figures.subagent_requests,
                &mut figures.subagent_cost_usd,
            ),
            _ => (
                &mut figures.left_branch_requests,
                &mut figures.left_branch_cost_usd,
            ),
        };
        *requests += 1;
        *cost_usd += paid;
    }
    Some(figures)
}

/// The provider's cache for one policy's run.
enum Cache {
    Anthropic(AnthropicCache),
    OpenAi(OpenAiCache),
}

impl Cache {
    fn request(&mut self, prompt: &Prompt, now_ms: u64) -> Usage {
        match self {
            Cache::Anthropic(cache) => cache.request(prompt, now_ms),
            Cache::OpenAi(cache) => cache.request(prompt, now_ms),
        }
    }

    fn warm(&mut self, point: Point, now_ms: u64) {
        match self {
            Cache::Anthropic(cache) => cache.warm(point, now_ms),
            Cache::OpenAi(cache) => cache.warm(point, now_ms),
        }
    }
}

/// Whether a request of `context_tokens` fails: the provider refuses one whose input and reply
/// limit together exceed the window (Anthropic's "input length and `max_tokens` exceed context
/// limit", Chat Completions' the same), the limit being the model's `max_output_tokens` as a
/// harness asks it, or the lower one a policy sent (`reply_limit`). A reply the lowered limit
/// cuts short of the recorded answer's `output_tokens` fails as well: the agent did not get the
/// answer the session went on from. (A recorded answer longer than the model's limit would be
/// cut under every policy alike, and is not counted, lowered limit or not.)
fn refused(
    context_tokens: u64,
    output_tokens: u64,
    reply_limit: Option<usize>,
    settings: &ReplaySettings,
) -> bool {
    let limit = reply_limit.unwrap_or(settings.max_output_tokens) as u64;
    over_the_window(context_tokens, reply_limit, settings)
        || reply_limit.is_some()
            && output_tokens > limit
            && output_tokens <= settings.max_output_tokens as u64
}

/// Whether the provider refuses a request of `context_tokens` outright, saying how long it
/// counted it: its input and reply limit (the model's, or the lower one a policy sent) over the
/// window. ([`refused`] also fails an answer such a limit cuts short, which the provider takes.)
fn over_the_window(
    context_tokens: u64,
    reply_limit: Option<usize>,
    settings: &ReplaySettings,
) -> bool {
    let limit = reply_limit.unwrap_or(settings.max_output_tokens) as u64;
    context_tokens + limit > settings.context_window as u64
}

/// The recorded answer to `step`, in the provider's tokens (the calibration's scale).
fn recorded_output(recording: &Recording, step: &Step, model: &Model<'_>) -> u64 {
    model.calibration.scaled(
        recording.conversation.messages[step.answer..step.answer_end]
            .iter()
            .filter(|message| message.role == condense_core::Role::Assistant)
            .map(|message| model.counter.count_message(message))
            .sum(),
    )
}

/// Names the cache of the model that answered `step` (one per model).
fn model_key(step: &Step) -> u64 {
    xxh3_64(step.model.as_deref().unwrap_or_default().as_bytes())
}

fn run_policy(
    recording: &Recording,
    produced: &[Produced],
    policy: &mut dyn Policy,
    settings: &ReplaySettings,
    model: &Model<'_>,
    progress: &mut dyn FnMut(usize),
) -> Result<PolicyResult, ReplayError> {
    let mut run = Run {
        settings,
        model,
        cache: warmed_cache(recording, settings, model),
        rows: Vec::with_capacity(recording.steps.len()),
        pruned_outputs: 0,
        local_summaries: 0,
        resent: 0,
        // Times the log does not give are taken as "right after the previous request".
        clock: 0,
    };
    for (index, step) in recording.steps.iter().enumerate() {
        run.clock = step.time_ms.unwrap_or(run.clock);
        if step.harness_summarizer && !policy.follows_the_harness() {
            progress(index + 1);
            continue;
        }
        let history = recording.history(step, policy.follows_the_harness());
        let asked = Model {
            answering: step.model.as_deref(),
            ..*model
        };
        let output_tokens = recorded_output(recording, step, model);
        // One more try for a request, whatever the cause, as the proxy gives it: a request
        // the provider refuses as longer than the window (input and reply limit over it) is
        // billed nothing, and a policy that prepares it again with the count the refusal gives
        // ([`Policy::refused`]) sends it once more; an answer cut short at a limit the policy
        // lowered is billed (the input, and the reply up to the limit), and the request,
        // prepared again after the policy saw the cut, goes once more (the proxy asks again
        // for a whole answer; a client that streams meets the cut and sends it again).
        let mut resend = true;
        let (prepared, prompt, failed) = loop {
            let (prepared, prompt) =
                run.prepared(policy, history, (index, step), &asked, &mut resend)?;
            let context_tokens = prompt.tokens();
            let failed = refused(
                context_tokens,
                output_tokens,
                prepared.reply_limit,
                settings,
            );
            let over = over_the_window(context_tokens, prepared.reply_limit, settings);
            if failed && !over && resend {
                resend = false;
                run.resent += 1;
                run.answered(
                    (index, RowKind::CutShort, false),
                    &prompt,
                    cut_at(prepared.reply_limit, settings),
                    prepared.reply_limit,
                    None,
                );
                policy.observe(context_tokens, output_tokens);
                continue;
            }
            break (prepared, prompt, failed);
        };
        let context_tokens = prompt.tokens();
        let retention = (!step.harness_summarizer).then(|| {
            if failed {
                0.0
            } else {
                produced[index].share_in(&prepared.input)
            }
        });
        let kind = if step.harness_summarizer {
            RowKind::Summarizer
        } else {
            RowKind::Agent
        };
        run.answered(
            (index, kind, failed),
            &prompt,
            output_tokens,
            prepared.reply_limit,
            retention,
        );
        policy.observe(context_tokens, output_tokens);
        progress(index + 1);
    }
    let mut result = totals(
        policy.name(),
        run.rows,
        run.pruned_outputs,
        run.local_summaries,
    );
    result.resent = run.resent;
    Ok(result)
}

/// One policy's replay as it goes: the provider's cache, the rows so far and the counts.
struct Run<'a> {
    settings: &'a ReplaySettings,
    model: &'a Model<'a>,
    cache: Cache,
    rows: Vec<Row>,
    pruned_outputs: usize,
    local_summaries: usize,
    resent: usize,
    clock: u64,
}

impl Run<'_> {
    /// `step`'s request as `policy` prepares it, with the summarizer call it made first
    /// recorded; prepared again, once, where the provider refuses it as too long and the
    /// policy takes the refusal's count (`resend`, the one more try a request has, spent).
    fn prepared<'h>(
        &mut self,
        policy: &mut dyn Policy,
        history: &'h [condense_core::Message],
        (index, step): (usize, &Step),
        asked: &Model<'_>,
        resend: &mut bool,
    ) -> Result<(Prepared<'h>, Prompt), ReplayError> {
        let (settings, model) = (self.settings, self.model);
        let key = model_key(step);
        loop {
            let prepared = policy.prepare(history, step.time_ms, asked)?;
            self.pruned_outputs += prepared.pruned_outputs;
            if let Some(call) = &prepared.summarizer {
                match summarizer_row(
                    call,
                    index,
                    &mut self.cache,
                    self.clock,
                    settings,
                    model,
                    key,
                ) {
                    Some(row) => self.rows.push(row),
                    None => self.local_summaries += 1,
                }
            }
            let prompt = Prompt::of(&prepared.input, model.counter, model.calibration, key);
            let over = over_the_window(prompt.tokens(), prepared.reply_limit, settings);
            if over && *resend && policy.refused(prompt.tokens()) {
                *resend = false;
                self.resent += 1;
                continue;
            }
            return Ok((prepared, prompt));
        }
    }

    /// A request as it ended: refused over the window, billed nothing; or answered,
    /// `output_tokens` long, or (`failed`) cut short at its lowered limit when its one more
    /// try was spent, billed to that limit.
    fn answered(
        &mut self,
        (step, kind, failed): (usize, RowKind, bool),
        prompt: &Prompt,
        output_tokens: u64,
        reply_limit: Option<usize>,
        retention: Option<f64>,
    ) {
        let (usage, output_tokens) = if over_the_window(prompt.tokens(), reply_limit, self.settings)
        {
            (Usage::default(), 0)
        } else if failed {
            (
                self.cache.request(prompt, self.clock),
                cut_at(reply_limit, self.settings),
            )
        } else {
            (self.cache.request(prompt, self.clock), output_tokens)
        };
        self.rows.push(Row {
            step,
            kind,
            context_tokens: prompt.tokens(),
            usage,
            output_tokens,
            cost_usd: cost(self.settings, &usage, output_tokens),
            failed,
            reply_limit: reply_limit.map(|limit| limit as u64),
            retention,
        });
    }
}

/// The reply a lowered `reply_limit` cut short: the limit's tokens, billed as written.
fn cut_at(reply_limit: Option<usize>, settings: &ReplaySettings) -> u64 {
    reply_limit.unwrap_or(settings.max_output_tokens) as u64
}

/// The provider's cache for `settings`, holding what the harness had cached before its first
/// request (the calibration's warm prefix: a system prompt and tools shared across sessions).
fn warmed_cache(recording: &Recording, settings: &ReplaySettings, model: &Model<'_>) -> Cache {
    let mut cache = match settings.provider {
        Provider::Anthropic => Cache::Anthropic(AnthropicCache::new(
            &settings.prices.anthropic,
            settings.ttl,
        )),
        Provider::OpenAi => Cache::OpenAi(OpenAiCache::new(&settings.prices.openai, settings.ttl)),
    };
    if let Some(first) = recording.steps.first()
        && model.calibration.warm_prefix > 0
    {
        let prefix = Prompt::of(&[], model.counter, model.calibration, model_key(first));
        if let Some(shared) = prefix.points.first() {
            cache.warm(*shared, first.time_ms.unwrap_or(0));
        }
    }
    cache
}

/// The row of a summarizer request a policy made before request `step`, priced as it was sent
/// (forked: reading the agent's cached prefix; separate: uncached); `None` for a summary made
/// without a request, which nothing bills.
fn summarizer_row(
    call: &SummarizerCall,
    step: usize,
    cache: &mut Cache,
    clock: u64,
    settings: &ReplaySettings,
    model: &Model<'_>,
    key: u64,
) -> Option<Row> {
    let calibration = model.calibration;
    let usage = match &call.input {
        SummarizerInput::Forked(input) => {
            cache.request(&Prompt::of(input, model.counter, calibration, key), clock)
        }
        SummarizerInput::Separate(tokens) => Usage::uncached(calibration.scaled(*tokens)),
        SummarizerInput::Local => return None,
    };
    let output_tokens = calibration.scaled(call.output_tokens);
    Some(Row {
        step,
        kind: RowKind::Summarizer,
        context_tokens: usage.input(),
        usage,
        output_tokens,
        cost_usd: cost(settings, &usage, output_tokens),
        failed: false,
        reply_limit: None,
        retention: None,
    })
}

/// `local_summaries`: summaries made without a request (counted among the compactions only).
fn totals(
    name: &str,
    rows: Vec<Row>,
    pruned_outputs: usize,
    local_summaries: usize,
) -> PolicyResult {
    let agent: Vec<&Row> = rows
        .iter()
        .filter(|row| row.kind == RowKind::Agent)
        .collect();
    let sum = |field: fn(&Row) -> u64| rows.iter().map(field).sum::<u64>();
    let summarizer_requests = rows
        .iter()
        .filter(|row| row.kind == RowKind::Summarizer)
        .count();
    let (peak_context_tokens, mean_context_tokens) = context_figures(&rows);
    let (retention, retention_min) = retention_figures(&rows);
    PolicyResult {
        name: name.to_owned(),
        requests: rows.len(),
        summarizer_requests,
        failures: agent.iter().filter(|row| row.failed).count(),
        resent: 0,
        compactions: summarizer_requests + local_summaries,
        pruned_outputs,
        peak_context_tokens,
        mean_context_tokens,
        cache_read_tokens: sum(|row| row.usage.cache_read),
        cache_write_tokens: sum(|row| row.usage.cache_write),
        uncached_tokens: sum(|row| row.usage.uncached),
        output_tokens: sum(|row| row.output_tokens),
        cost_usd: rows.iter().fold(0.0, |total, row| total + row.cost_usd),
        retention,
        retention_min,
        cost_vs_recorded: None,
        recorded: None,
        rows,
    }
}

/// Whether a count is nothing, which the JSON leaves out.
fn is_zero(count: &usize) -> bool {
    *count == 0
}

/// Dollars for `usage` and `output` tokens.
fn cost(settings: &ReplaySettings, usage: &Usage, output: u64) -> f64 {
    let per_token = |per_mtok: f64| per_mtok / 1_000_000.0;
    match settings.provider {
        Provider::Anthropic => {
            let prices = &settings.prices.anthropic;
            let write = match settings.ttl {
                Ttl::FiveMinutes => prices.cache_write_5m_multiplier,
                Ttl::OneHour => prices.cache_write_1h_multiplier,
            };
            let input = per_token(prices.input_per_mtok);
            usage.uncached as f64 * input
                + usage.cache_write as f64 * input * write
                + usage.cache_read as f64 * input * prices.cache_read_multiplier
                + output as f64 * per_token(prices.output_per_mtok)
        }
        Provider::OpenAi => {
            let prices = &settings.prices.openai;
            // OpenAI bills no write: a token a log says was written to a cache (an Anthropic
            // log priced at OpenAI's rates) is input read uncached.
            (usage.uncached + usage.cache_write) as f64 * per_token(prices.input_per_mtok)
                + usage.cache_read as f64 * per_token(prices.cached_input_per_mtok)
                + output as f64 * per_token(prices.output_per_mtok)
        }
    }
}

/// The line through the log's own totals (see [`Calibration`]): condense's count of each
/// recorded request's input against the provider's, with the latest of the harness's own
/// summaries the request sent ([`Calibration::fit_after_summaries`]).
fn calibrate(recording: &Recording, counter: &dyn TokenCounter) -> Calibration {
    let messages = &recording.conversation.messages;
    // Each message is counted once; a request's count is a sum over the messages it sent.
    let counts = counter.count_each(messages);
    let summaries: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, message)| {
            condense_formats::harness_compaction(message)
                == Some(condense_formats::HarnessCompaction::Summary)
        })
        .map(|(index, _)| index)
        .collect();
    let points: Vec<(u64, u64, Option<u64>)> = recording
        .steps
        .iter()
        .filter_map(|step| {
            let recorded = step.recorded?;
            let sent = Recorded::sent(&messages[..step.answer]);
            let ours: usize = sent.map(|index| counts[index]).sum();
            let summary = summaries
                .iter()
                .rev()
                .find(|&&index| index < step.answer)
                .map(|&index| crate::prompt::content_hash(&messages[index]));
            Some((ours as u64, recorded.input(), summary))
        })
        .collect();
    Calibration::fit_after_summaries(&points)
}

fn recorded_figures(recording: &Recording, settings: &ReplaySettings) -> Option<RecordedFigures> {
    let usages: Vec<RecordedUsage> = recording
        .steps
        .iter()
        .filter_map(|step| step.recorded)
        .collect();
    if usages.is_empty() {
        return None;
    }
    let sum = |field: fn(&RecordedUsage) -> u64| usages.iter().map(field).sum::<u64>();
    let usage = Usage {
        cache_read: sum(|u| u.cache_read),
        cache_write: sum(|u| u.cache_write),
        uncached: sum(|u| u.uncached),
    };
    let output = sum(|u| u.output);
    Some(RecordedFigures {
        recorded_requests: usages.len(),
        recorded_cache_read_tokens: usage.cache_read,
        recorded_cache_write_tokens: usage.cache_write,
        recorded_uncached_tokens: usage.uncached,
        recorded_output_tokens: output,
        recorded_cost_usd: cost(settings, &usage, output),
    })
}

/// How closely the `recorded` policy's simulated cache reproduces the log's own accounting.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Agreement {
    /// Requests compared (those with recorded usage that did not fail).
    pub requests: usize,
    /// Cache reads ÷ all input, as recorded.
    pub recorded_hit_share: f64,
    /// The same share, simulated.
    pub simulated_hit_share: f64,
    /// Requests with a large recorded cache write ([`Agreement::is_large_write`]).
    pub large_writes: usize,
    /// Of those, how many the simulation also wrote at least half as much for.
    pub large_writes_flagged: usize,
}

impl Agreement {
    /// A large write: at least 2,048 tokens and a tenth of the request's input. A cold cache
    /// (the first request, one after an idle gap) writes the whole prompt, a compaction the
    /// whole new prefix; an ordinary step writes only the last answer and its tool results.
    pub fn is_large_write(usage: &RecordedUsage) -> bool {
        usage.cache_write >= 2_048 && usage.cache_write * 10 >= usage.input()
    }

    /// The agreement of `result` (the `recorded` policy's, replayed against Anthropic's cache)
    /// with `recording`'s own figures; `None` when the log has none.
    pub fn of(recording: &Recording, result: &PolicyResult) -> Option<Agreement> {
        Agreement::over([(recording, result)])
    }

    /// The agreement of several threads taken together (a session's subagents, each with the
    /// `recorded` policy's result on it): their tokens and requests added up.
    pub fn over<'a>(
        threads: impl IntoIterator<Item = (&'a Recording, &'a PolicyResult)>,
    ) -> Option<Agreement> {
        let mut recorded = (0u64, 0u64);
        let mut simulated = (0u64, 0u64);
        let mut requests = 0;
        let mut large_writes = 0;
        let mut large_writes_flagged = 0;
        // Each agent request with the step it answered: a harness's own summarizer request
        // (Claude Code's compaction) is a step too, with a row of another kind.
        let steps = threads.into_iter().flat_map(|(recording, result)| {
            result
                .rows
                .iter()
                .filter(|row| row.kind == RowKind::Agent)
                .filter_map(|row| Some((recording.steps.get(row.step)?, row)))
        });
        for (step, row) in steps {
            let Some(usage) = step.recorded.filter(|_| !row.failed) else {
                continue;
            };
            requests += 1;
            recorded.0 += usage.cache_read;
            recorded.1 += usage.input();
            simulated.0 += row.usage.cache_read;
            simulated.1 += row.usage.input();
            if Agreement::is_large_write(&usage) {
                large_writes += 1;
                if row.usage.cache_write * 2 >= usage.cache_write {
                    large_writes_flagged += 1;
                }
            }
        }
        let share = |(read, all): (u64, u64)| {
            if all == 0 {
                0.0
            } else {
                read as f64 / all as f64
            }
        };
        (requests > 0).then(|| Agreement {
            requests,
            recorded_hit_share: share(recorded),
            simulated_hit_share: share(simulated),
            large_writes,
            large_writes_flagged,
        })
    }
}
