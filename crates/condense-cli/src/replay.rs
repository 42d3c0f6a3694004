//! `condense replay`: what each compaction policy would have cost on a recorded session.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use condense_host::{Compactor, Config, LoadedPlugin};
use condense_replay::{
    Agreement, PolicyResult, PriceTable, Provider, Recording, Replay, ReplaySettings, Ttl, policy,
};
use condense_tokenizer::{Tiktoken, TokenCounter};

use crate::io::{read_session, refuse_same, write_file};
use crate::settings::{load, plugins, sources};
use crate::{ReplayArgs, Verbosity, usage_error};

pub fn replay(args: ReplayArgs, verbosity: Verbosity) -> Result<()> {
    let names = policy_names(&args)?;
    if let Some(plot) = &args.plot {
        plot_kind(plot)?;
        let mut named = vec![("--plot", plot.as_path())];
        if let Some(input) = &args.input {
            named.insert(0, ("the input", input.as_path()));
        }
        refuse_same(&named)?;
    }
    let prices = match &args.prices {
        None => PriceTable::built_in()?,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the price table {}", path.display()))?;
            PriceTable::with_overrides(&path.display().to_string(), &text)?
        }
    };
    let configured = replay_config(&args, None)?;
    let config = &configured.0;
    let session = read_session(&args.input, args.format)?;
    let subagents = subagents(&args, &session)?;
    let recording = recording_of(&session, &session_name(&args))?;
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::new(config.encoding()));
    let builder = PolicyBuilder::new(&args, &configured, names, counter.clone(), verbosity)?;
    let mut policies = builder.build()?;
    let mut subagents = subagents
        .into_iter()
        .map(|subagent| {
            Ok(condense_replay::SubagentRecording::new(
                subagent.name,
                Recording::of(subagent.conversation),
                builder.build()?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let tail = config.tail_settings();
    let settings = ReplaySettings {
        provider: args
            .provider
            .unwrap_or_else(|| provider_speaking(session.format)),
        ttl: args.ttl,
        prices,
        context_window: tail.context_window,
        max_output_tokens: tail.max_output_tokens,
    };
    let mut progress = Progress::new(verbosity != Verbosity::Quiet);
    let replay = condense_replay::replay_session(
        &recording,
        &mut policies,
        &mut subagents,
        &settings,
        counter,
        &mut |step| progress.show(&step),
    )?;
    progress.clear();

    if let Some(plot) = &args.plot {
        let title = session_name(&args);
        let chart = match plot_kind(plot)? {
            PlotKind::Svg => condense_replay::plot::svg(&replay, &title)?,
            PlotKind::Html => condense_replay::plot::html(&replay, &title)?,
        };
        write_file(plot, chart.as_bytes())?;
        if verbosity != Verbosity::Quiet {
            eprintln!("condense: wrote the chart to {}", plot.display());
        }
    }
    if args.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&replay).context("cannot serialise the replay")?
        );
        return Ok(());
    }
    print_table(&replay, &recording, &subagents, &session_name(&args))
}

/// The requests of a recorded session, named `name` in errors. A harness's own compactions are
/// replayed, not taken as where the session starts: its log is read whole.
pub(crate) fn recording_of(session: &crate::io::Session, name: &str) -> Result<Recording> {
    let conversation = if session.format.is_jsonl() {
        condense_formats::read_whole(&session.bytes, session.format)
            .with_context(|| name.to_owned())?
    } else {
        session.conversation.clone()
    };
    Ok(Recording::of(conversation))
}

/// The policies asked for, each once, in the order given; all of them when none is named.
/// The provider whose wire format a session is in: a session recorded from an OpenAI client was
/// paid at OpenAI's prices, so that is what its replay prices unless `--provider` says otherwise.
pub(crate) fn provider_speaking(format: condense_formats::Format) -> Provider {
    match format {
        condense_formats::Format::OpenAi
        | condense_formats::Format::Responses
        | condense_formats::Format::Codex => Provider::OpenAi,
        condense_formats::Format::Anthropic | condense_formats::Format::ClaudeCode => {
            Provider::Anthropic
        }
    }
}

fn policy_names(args: &ReplayArgs) -> Result<Vec<String>> {
    let mut names: Vec<String> = if args.policy.is_empty() {
        policy::NAMES
            .iter()
            .map(|name| (*name).to_owned())
            .collect()
    } else {
        Vec::new()
    };
    for name in &args.policy {
        if !policy::NAMES.contains(&name.as_str()) && name != "condense-b" {
            return Err(usage_error(format!(
                "unknown policy `{name}`: use {}, or condense-b with --config-b",
                policy::NAMES.join(", ")
            )));
        }
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    match (
        &args.config_b,
        names.iter().any(|name| name == "condense-b"),
    ) {
        (Some(_), false) => names.push("condense-b".to_owned()),
        (None, true) => {
            return Err(usage_error(
                "the condense-b policy needs --config-b FILE (the second configuration)",
            ));
        }
        _ => {}
    }
    Ok(names)
}

/// The effective configuration, and how its remote summarizer would ask for summaries (what
/// the replay prices them as); for condense-b, `explicit` (its `--config-b` file) takes the
/// place of `--config`. The summarizer is the extractive one whatever is configured: a replay
/// is offline and deterministic.
fn replay_config(
    args: &ReplayArgs,
    explicit: Option<PathBuf>,
) -> Result<(Config, policy::SummaryRequests)> {
    let mut sources = sources(&args.settings)?;
    if let Some(explicit) = explicit {
        if !explicit.is_file() {
            return Err(usage_error(format!(
                "--config-b {}: no such configuration file",
                explicit.display()
            )));
        }
        sources.explicit = Some(explicit);
    }
    let requests = policy::SummaryRequests::from_config(&load(&sources)?);
    sources.flags.push((
        "replay".to_owned(),
        "summarizer.kind".to_owned(),
        "extractive".to_owned(),
    ));
    Ok((load(&sources)?, requests))
}

/// Builds the policies asked for, once for the main thread and once more for each subagent (a
/// policy keeps state from request to request); the plugins of each condense configuration are
/// loaded once.
struct PolicyBuilder {
    names: Vec<String>,
    counter: Arc<dyn TokenCounter>,
    /// The configuration, its summary requests and its plugins, for `condense` and
    /// `condense-b`.
    condense: Vec<(String, Config, policy::SummaryRequests, Vec<LoadedPlugin>)>,
}

impl PolicyBuilder {
    fn new(
        args: &ReplayArgs,
        configured: &(Config, policy::SummaryRequests),
        names: Vec<String>,
        counter: Arc<dyn TokenCounter>,
        verbosity: Verbosity,
    ) -> Result<Self> {
        let mut condense = Vec::new();
        for name in &names {
            let (config, requests) = match name.as_str() {
                "condense" => configured.clone(),
                "condense-b" => replay_config(args, args.config_b.clone())?,
                _ => continue,
            };
            let loaded = plugins(&config, verbosity)?;
            condense.push((name.clone(), config, requests, loaded));
        }
        Ok(PolicyBuilder {
            names,
            counter,
            condense,
        })
    }

    fn build(&self) -> Result<Vec<Box<dyn condense_replay::Policy>>> {
        self.names
            .iter()
            .map(
                |name| match self.condense.iter().find(|(condense, ..)| condense == name) {
                    Some((name, config, requests, loaded)) => {
                        let compactor = Compactor::with_plugins(config, loaded)?;
                        let built: Box<dyn condense_replay::Policy> =
                            Box::new(policy::Condense::new(name, compactor, *requests)?);
                        Ok(built)
                    }
                    None => policy::named(name, self.counter.clone())
                        .ok_or_else(|| usage_error(format!("unknown policy `{name}`"))),
                },
            )
            .collect()
    }
}

/// The subagents the session started: the threads a Claude Code log keeps inline, and the logs
/// of their own Claude Code 2 keeps beside it (`SESSION/subagents/agent-ID.jsonl`), in the
/// order of their names. A subagent log that cannot be read is an error that names it: the
/// figures would otherwise leave it out unsaid.
fn subagents(
    args: &ReplayArgs,
    session: &crate::io::Session,
) -> Result<Vec<condense_formats::Subagent>> {
    let mut found = condense_formats::subagents(&session.bytes, session.format)
        .with_context(|| session_name(args))?;
    if session.format == condense_formats::Format::ClaudeCode {
        for path in subagent_logs(args.input.as_deref()) {
            let bytes =
                std::fs::read(&path).with_context(|| format!("{}: cannot read", path.display()))?;
            let conversation = condense_formats::read_whole(&bytes, session.format)
                .with_context(|| path.display().to_string())?;
            let name = path
                .file_stem()
                .map_or_else(String::new, |stem| stem.to_string_lossy().into_owned());
            found.push(condense_formats::Subagent { name, conversation });
        }
    }
    Ok(found)
}

#[derive(Debug, Clone, Copy)]
enum PlotKind {
    Svg,
    Html,
}

fn plot_kind(path: &std::path::Path) -> Result<PlotKind> {
    match path.extension().and_then(|ext| ext.to_str()) {
        Some("svg") => Ok(PlotKind::Svg),
        Some("html" | "htm") => Ok(PlotKind::Html),
        _ => Err(usage_error(format!(
            "--plot {}: the chart is written as .svg or .html",
            path.display()
        ))),
    }
}

/// The subagent logs Claude Code 2 keeps beside a session's log (`SESSION/subagents/
/// agent-ID.jsonl` next to `SESSION.jsonl`; directories of that name aside), in the order of
/// their names: their requests are not in the session's log.
///
/// Claude Code 2 keeps the request of its own compaction there too (`agent-acompact-ID.jsonl`:
/// the agent's messages, its summary prompt and the summary). That is no subagent: no policy
/// but Claude Code's makes it, and the main thread's replay already does (the `recorded`
/// policy at the summary line, Claude Code's rules at each compaction of their own). Replayed
/// as a thread, every policy would pay for it, and fail it in any window smaller than the
/// session it summarized.
fn subagent_logs(input: Option<&std::path::Path>) -> Vec<PathBuf> {
    /// How Claude Code 2 names the log of its own compaction request.
    const COMPACTION_LOG: &str = "agent-acompact-";
    let Some(dir) = input.map(|input| input.with_extension("").join("subagents")) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut logs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.starts_with("agent-")
                && !name.starts_with(COMPACTION_LOG)
                && name.ends_with(".jsonl")
                && !entry.path().is_dir()
        })
        .map(|entry| entry.path())
        .collect();
    logs.sort();
    logs
}

fn session_name(args: &ReplayArgs) -> String {
    args.input
        .as_ref()
        .and_then(|path| path.file_name())
        .map_or_else(
            || "stdin".to_owned(),
            |name| name.to_string_lossy().into_owned(),
        )
}

/// The replay as a table: what was replayed, each policy's figures (and the whole session's,
/// with its subagents), what was not replayed, and the log's own figures beside the model's.
fn print_table(
    replay: &Replay,
    recording: &Recording,
    subagents: &[condense_replay::SubagentRecording],
    name: &str,
) -> Result<()> {
    print_heading(replay, name)?;
    print_policies(replay)?;
    print_not_replayed(replay)?;
    print_recorded(replay, recording, subagents)
}

fn thousands(n: u64) -> String {
    crate::human::thousands(usize::try_from(n).unwrap_or(usize::MAX))
}

/// What was replayed against what, and the calibration the log gave.
fn print_heading(replay: &Replay, name: &str) -> Result<()> {
    say!(
        "{name}: {} requests replayed against {} ({}), cache lifetime {}, context window {}",
        replay.agent_requests,
        replay.provider,
        replay.model,
        match replay.ttl {
            Ttl::FiveMinutes => "5 minutes",
            Ttl::OneHour => "1 hour",
        },
        thousands(replay.context_window as u64),
    );
    let calibration = &replay.calibration;
    if calibration.fitted_on > 0 {
        say!(
            "calibrated on the log's own usage ({} requests): {} tokens of system prompt and tools not in the log, {:.3} provider tokens per condense token",
            calibration.fitted_on,
            thousands(calibration.hidden_prefix),
            calibration.scale
        );
    }
    if !calibration.after_summaries.is_empty() {
        let steps: Vec<String> = calibration
            .after_summaries
            .iter()
            .map(|after| thousands(after.tokens))
            .collect();
        say!(
            "and after the harness's own summaries, what it sent beyond the log (files it attached again), on every request until the next: {} tokens",
            steps.join(", ")
        );
    }
    if !calibration.fits_the_log() {
        say!("{}", unfit_log_warning(calibration));
    }
    if let Some(length) = &replay.summary_length {
        say!("{}", summary_length_line(length, "this log"));
    }
    say!("");
    Ok(())
}

/// What a replay says of a log whose own usage does not bear out its messages
/// ([`condense_replay::Calibration::fits_the_log`]).
fn unfit_log_warning(calibration: &condense_replay::Calibration) -> String {
    format!(
        "warning: the log's own usage does not bear out its messages ({:.2} provider tokens per condense token, the requests {:.0} % off that line; a log of what the model read gives {}-{} within {:.0} %): its text was redacted or cut, or messages are missing, so these figures price the log as it is, not the requests the provider billed",
        calibration.fitted_scale,
        calibration.fit_error * 100.0,
        condense_replay::SCALES.start(),
        condense_replay::SCALES.end(),
        condense_replay::FIT_TOLERANCE * 100.0
    )
}

/// What the stand-ins for a model's summary were sized by, measured in `whose` logs.
pub(crate) fn summary_length_line(length: &condense_replay::SummaryLength, whose: &str) -> String {
    let factors: Vec<String> = length
        .factors
        .iter()
        .map(|(template, factor)| format!("{factor:.2}x ({template})"))
        .collect();
    format!(
        "summaries a model writes sized as the harness's own in {whose} ({} of {} tokens on average): {} the stand-in's",
        length.samples,
        thousands(length.mean_tokens as u64),
        factors.join(", ")
    )
}

/// The table's columns.
const HEADER: [&str; 15] = [
    "policy",
    "requests",
    "failures",
    "summaries",
    "pruned",
    "peak ctx",
    "mean ctx",
    "cache read",
    "cache write",
    "uncached",
    "output",
    "cost $",
    "vs recorded",
    "keeps",
    "keeps min",
];

/// Each policy's row, then, for a session with subagents, the whole session's, in columns as
/// wide as the widest cell of either table.
fn print_policies(replay: &Replay) -> Result<()> {
    let rows: Vec<[String; 15]> = replay.policies.iter().map(row).collect();
    let session_rows: Vec<[String; 15]> = replay.session.iter().map(row).collect();
    let widths: Vec<usize> = (0..HEADER.len())
        .map(|column| {
            rows.iter()
                .chain(&session_rows)
                .map(|row| row[column].chars().count())
                .chain([HEADER[column].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .enumerate()
            .map(|(column, cell)| {
                if column == 0 {
                    format!("{cell:<width$}", width = widths[column])
                } else {
                    format!("{cell:>width$}", width = widths[column])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    say!("{}", line(HEADER.to_vec()));
    for cells in &rows {
        say!("{}", line(cells.iter().map(String::as_str).collect()));
    }
    if !session_rows.is_empty() {
        let requests: usize = replay
            .subagents
            .iter()
            .map(|subagent| subagent.agent_requests)
            .sum();
        let (count, them) = match replay.subagents.len() {
            1 => ("a subagent".to_owned(), "its"),
            count => (format!("{count} subagents"), "their"),
        };
        say!("");
        say!(
            "with {count} the session started ({requests} requests, each replayed in a context of its own, calibrated on {them} own usage; --json has each), the whole session:"
        );
        say!("{}", line(HEADER.to_vec()));
        for cells in &session_rows {
            say!("{}", line(cells.iter().map(String::as_str).collect()));
        }
    }
    Ok(())
}

/// The requests the log accounts for that no policy replayed, with their cost.
fn print_not_replayed(replay: &Replay) -> Result<()> {
    let Some(beside) = &replay.not_replayed else {
        return Ok(());
    };
    let parts: Vec<String> = [
        (
            beside.subagent_requests,
            "subagent requests",
            beside.subagent_cost_usd,
        ),
        (
            beside.left_branch_requests,
            "requests on branches left",
            beside.left_branch_cost_usd,
        ),
    ]
    .into_iter()
    .filter(|(requests, _, _)| *requests > 0)
    .map(|(requests, what, cost)| format!("{requests} {what} (${cost:.2})"))
    .collect();
    say!("");
    say!(
        "not replayed, and in no policy's figures (costs by the log's own usage): {}",
        parts.join(", ")
    );
    Ok(())
}

/// The log's own figures, and how the cache model's hits agree with them (Anthropic).
fn print_recorded(
    replay: &Replay,
    recording: &Recording,
    subagents: &[condense_replay::SubagentRecording],
) -> Result<()> {
    let Some(recorded) = replay
        .policies
        .iter()
        .find(|result| result.name == "recorded")
    else {
        return Ok(());
    };
    let figures_line = |figures: &condense_replay::RecordedFigures, what: &str| -> Result<()> {
        say!("");
        say!(
            "the log's own figures{what} ({} requests): cache read {}, cache write {}, uncached {}, output {}: ${:.2} at these prices",
            figures.recorded_requests,
            thousands(figures.recorded_cache_read_tokens),
            thousands(figures.recorded_cache_write_tokens),
            thousands(figures.recorded_uncached_tokens),
            thousands(figures.recorded_output_tokens),
            figures.recorded_cost_usd
        );
        Ok(())
    };
    let main = if replay.subagents.is_empty() {
        ""
    } else {
        ", the main thread"
    };
    if let Some(figures) = &recorded.recorded {
        figures_line(figures, main)?;
    }
    let agreement_line = |agreement: Option<Agreement>, of: &str| -> Result<()> {
        if replay.provider == Provider::Anthropic
            && let Some(agreement) = agreement
        {
            say!(
                "cache-hit share{of}: simulated {:.1} %, recorded {:.1} %; large cache writes recognised: {} of {}",
                agreement.simulated_hit_share * 100.0,
                agreement.recorded_hit_share * 100.0,
                agreement.large_writes_flagged,
                agreement.large_writes
            );
        }
        Ok(())
    };
    agreement_line(Agreement::of(recording, recorded), "")?;
    if let Some(figures) = replay
        .session
        .iter()
        .find(|result| result.name == "recorded")
        .and_then(|result| result.recorded.as_ref())
    {
        figures_line(figures, ", the whole session")?;
        // Each subagent's `recorded` result, with its requests.
        let theirs = subagents
            .iter()
            .zip(&replay.subagents)
            .filter_map(|(subagent, replayed)| {
                let result = replayed
                    .policies
                    .iter()
                    .find(|result| result.name == "recorded")?;
                Some((&subagent.recording, result))
            });
        agreement_line(Agreement::over(theirs), " on the subagents")?;
    }
    Ok(())
}

fn row(result: &PolicyResult) -> [String; 15] {
    [
        result.name.clone(),
        result.requests.to_string(),
        result.failures.to_string(),
        result.compactions.to_string(),
        result.pruned_outputs.to_string(),
        thousands(result.peak_context_tokens),
        thousands(result.mean_context_tokens),
        thousands(result.cache_read_tokens),
        thousands(result.cache_write_tokens),
        thousands(result.uncached_tokens),
        thousands(result.output_tokens),
        format!("{:.2}", result.cost_usd),
        result
            .cost_vs_recorded
            .map_or_else(|| "-".to_owned(), |ratio| format!("{ratio:.3}")),
        format!("{:.1} %", result.retention * 100.0),
        format!("{:.1} %", result.retention_min * 100.0),
    ]
}

/// "replaying claude-code: 40/119" on a terminal, redrawn in place.
struct Progress {
    shown: bool,
    enabled: bool,
}

impl Progress {
    fn new(wanted: bool) -> Self {
        Progress {
            shown: false,
            enabled: wanted && std::io::stderr().is_terminal(),
        }
    }

    fn show(&mut self, step: &condense_replay::Progress<'_>) {
        if !self.enabled || (!step.done.is_multiple_of(10) && step.done != step.requests) {
            return;
        }
        let mut stderr = std::io::stderr().lock();
        let thread = step
            .thread
            .map_or_else(String::new, |name| format!("subagent {name}, "));
        let _ = write!(
            stderr,
            "\r\x1b[2Kreplaying {thread}{} ({}/{}): request {}/{}",
            step.policy,
            step.policy_index + 1,
            step.policies,
            step.done,
            step.requests
        );
        let _ = stderr.flush();
        self.shown = true;
    }

    fn clear(&mut self) {
        if self.shown {
            eprint!("\r\x1b[2K");
            self.shown = false;
        }
    }
}
