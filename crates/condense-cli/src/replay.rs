//! `condense replay`: what each compaction policy would have cost on a recorded session.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use condense_host::{Compactor, Config};
use condense_replay::{
    Agreement, PolicyResult, PriceTable, Provider, Recording, Replay, Settings, Ttl, policy,
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
    // A harness's own compactions are replayed, not taken as where the session starts: its log
    // is read whole.
    let conversation = if session.format.is_jsonl() {
        condense_formats::read_whole(&session.bytes, session.format)
            .with_context(|| session_name(&args))?
    } else {
        session.conversation
    };
    let recording = Recording::of(conversation);
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::new(config.encoding()));
    let mut policies = Vec::with_capacity(names.len());
    for name in &names {
        let built = match name.as_str() {
            "condense" => condense(&configured, "condense", verbosity)?,
            "condense-b" => {
                let configured = replay_config(&args, args.config_b.clone())?;
                condense(&configured, "condense-b", verbosity)?
            }
            other => policy::named(other, counter.clone())
                .ok_or_else(|| usage_error(format!("unknown policy `{other}`")))?,
        };
        policies.push(built);
    }
    let tail = config.tail_settings();
    let settings = Settings {
        provider: args
            .provider
            .unwrap_or_else(|| provider_speaking(session.format)),
        ttl: args.ttl,
        prices,
        context_window: tail.context_window,
        max_output_tokens: tail.max_output_tokens,
    };
    let mut progress = Progress::new(verbosity != Verbosity::Quiet);
    let replay =
        condense_replay::replay(&recording, &mut policies, &settings, counter, &mut |step| {
            progress.show(&step)
        })?;
    progress.clear();
    if verbosity != Verbosity::Quiet
        && let Some(subagents) = subagent_logs(args.input.as_deref())
    {
        let (count, logs) = match subagents.count {
            1 => ("a".to_owned(), "log"),
            count => (count.to_string(), "logs"),
        };
        eprintln!(
            "condense: {count} subagent {logs} beside this session ({}), in none of these figures: replay each on its own",
            subagents.dir.display()
        );
    }

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
    print_table(&replay, &recording, &session_name(&args))
}

/// The policies asked for, each once, in the order given; all of them when none is named.
/// The provider whose wire format a session is in: a session recorded from an OpenAI client was
/// paid at OpenAI's prices, so that is what its replay prices unless `--provider` says otherwise.
fn provider_speaking(format: condense_formats::Format) -> Provider {
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

fn condense(
    (config, requests): &(Config, policy::SummaryRequests),
    name: &str,
    verbosity: Verbosity,
) -> Result<Box<dyn condense_replay::Policy>> {
    let loaded = plugins(config, verbosity)?;
    let compactor = Compactor::with_plugins(config, &loaded)?;
    Ok(Box::new(policy::Condense::new(name, compactor, *requests)?))
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
/// agent-ID.jsonl` next to `SESSION.jsonl`): their requests are not in the session's log.
struct SubagentLogs {
    dir: std::path::PathBuf,
    count: usize,
}

fn subagent_logs(input: Option<&std::path::Path>) -> Option<SubagentLogs> {
    let dir = input?.with_extension("").join("subagents");
    let count = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.starts_with("agent-") && name.ends_with(".jsonl")
        })
        .count();
    (count > 0).then_some(SubagentLogs { dir, count })
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

fn print_table(replay: &Replay, recording: &Recording, name: &str) -> Result<()> {
    let thousands = |n: u64| crate::human::thousands(usize::try_from(n).unwrap_or(usize::MAX));
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
    say!("");
    let header = [
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
    ];
    let rows: Vec<[String; 13]> = replay
        .policies
        .iter()
        .map(|result| row(result, &thousands))
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|column| {
            rows.iter()
                .map(|row| row[column].chars().count())
                .chain([header[column].len()])
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
    say!("{}", line(header.to_vec()));
    for cells in &rows {
        say!("{}", line(cells.iter().map(String::as_str).collect()));
    }
    if let Some(beside) = &replay.not_replayed {
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
    }
    if let Some(recorded) = replay
        .policies
        .iter()
        .find(|result| result.name == "recorded")
    {
        if let Some(figures) = &recorded.recorded {
            say!("");
            say!(
                "the log's own figures ({} requests): cache read {}, cache write {}, uncached {}, output {}: ${:.2} at these prices",
                figures.recorded_requests,
                thousands(figures.recorded_cache_read_tokens),
                thousands(figures.recorded_cache_write_tokens),
                thousands(figures.recorded_uncached_tokens),
                thousands(figures.recorded_output_tokens),
                figures.recorded_cost_usd
            );
        }
        if replay.provider == Provider::Anthropic
            && let Some(agreement) = Agreement::of(recording, recorded)
        {
            say!(
                "cache-hit share: simulated {:.1} %, recorded {:.1} %; large cache writes recognised: {} of {}",
                agreement.simulated_hit_share * 100.0,
                agreement.recorded_hit_share * 100.0,
                agreement.large_writes_flagged,
                agreement.large_writes
            );
        }
    }
    Ok(())
}

fn row(result: &PolicyResult, thousands: &dyn Fn(u64) -> String) -> [String; 13] {
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
        let _ = write!(
            stderr,
            "\r\x1b[2Kreplaying {} ({}/{}): request {}/{}",
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
