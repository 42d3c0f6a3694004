//! `condense tune`: the user's own recorded sessions replayed under condense's main settings
//! (the levers the cost model says matter), the cost/retention frontier printed, and the
//! cheapest configuration that keeps what matters written as a configuration layer.
//!
//! Each candidate is the user's effective configuration with some of seven settings changed:
//! whether compaction comes before the window is full when that is cheaper
//! (`compaction.cache_rewrite_cost`, 0 for only when it is full; the built-in 11.5 leaves each
//! model its own prices, as a value the configuration already has is not set again), how big
//! the summary may be (`summarizer.budget_tokens`), how much recent context is kept verbatim
//! after it (`compaction.max_tail_tokens`), how many of the agent's latest calls that tail
//! holds (`compaction.min_tail_calls`: each is read on every request until the next compaction,
//! so in a small window the tail is most of what a request pays for; which of ten or five keeps
//! enough is the team's sessions' to say), whether pruning's thresholds follow the window
//! (`prune.adaptive_thresholds`), whether a read a later read of the same file made stale is
//! pruned (`prune.supersede_reads`: every prune rewrites the cached prefix after it, which pays
//! only when it saves a summary or a failure), and whether outputs are cleared once the
//! provider's cache has expired (`microcompact.enabled`). Every candidate is replayed on every
//! session (in parallel), priced against the provider's cache and measured by what its
//! requests still show ([`condense_replay::retention`]); Claude Code's own rules are replayed
//! beside them as the reference. The choice: among the candidates with the fewest failed
//! requests, the cheapest whose mean retention is at least 95 % and at least the reference's;
//! failing that, the one that keeps the most.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};
use condense_host::{Compactor, Config};
use condense_replay::{
    PriceTable, Provider, Recording, ReplaySettings, SummaryLength, Ttl, policy,
};
use condense_tokenizer::{Tiktoken, TokenCounter};
use rayon::prelude::*;

use crate::io::{read_session, write_file};
use crate::settings::{load, sources};
use crate::{TuneArgs, Verbosity, usage_error};

/// The settings tried, each with the values tried; every combination is a candidate.
const LEVERS: [(&str, [&str; 2]); 7] = [
    ("compaction.cache_rewrite_cost", ["0", "11.5"]),
    ("summarizer.budget_tokens", ["2000", "3000"]),
    ("compaction.max_tail_tokens", ["4000", "8000"]),
    ("compaction.min_tail_calls", ["5", "10"]),
    ("prune.adaptive_thresholds", ["false", "true"]),
    ("prune.supersede_reads", ["true", "false"]),
    ("microcompact.enabled", ["true", "false"]),
];

/// The least mean retention a chosen configuration keeps.
const RETENTION_FLOOR: f64 = 0.95;

/// One session to replay.
struct Session {
    name: String,
    recording: Recording,
    provider: Provider,
}

/// A candidate's figures over every session.
#[derive(Debug, Clone)]
struct Outcome {
    /// The settings it changes, `(key, value)`.
    changes: Vec<(&'static str, &'static str)>,
    cost_usd: f64,
    /// The mean of the sessions' mean retention, weighted by their requests.
    retention: f64,
    retention_min: f64,
    failures: usize,
}

pub fn tune(args: TuneArgs, verbosity: Verbosity) -> Result<()> {
    let files = session_files_told(&args.sessions, verbosity)?;
    let base_sources = sources(&args.settings)?;
    let base = load(&base_sources)?;
    let counter: Arc<dyn TokenCounter> = Arc::new(Tiktoken::new(base.encoding()));
    let sessions = sessions_of(&files, args.provider)?;
    let summary_length = summary_length_of(&sessions, &counter)?;
    let prices = PriceTable::built_in()?;
    let tail = base.tail_settings();
    let settings_for = |provider| ReplaySettings {
        provider,
        ttl: Ttl::FiveMinutes,
        prices: prices.clone(),
        context_window: tail.context_window,
        max_output_tokens: tail.max_output_tokens,
    };

    let candidates = candidates();
    let progress = Progress::new((candidates.len() + 1) * sessions.len(), verbosity);
    // One policy replayed on one session: its figures, the progress told, and whether the
    // log's own usage bears out its messages.
    let replayed =
        |session: &Session, policy: Box<dyn condense_replay::Policy>| -> Result<(Figures, bool)> {
            let replay = condense_replay::replay_sized(
                &session.recording,
                &mut [policy],
                &settings_for(session.provider),
                counter.clone(),
                summary_length.as_ref(),
                &mut |_| {},
            )
            .with_context(|| session.name.clone())?;
            progress.tick();
            let result = &replay.policies[0];
            let figures = (
                result.cost_usd,
                result.retention,
                result.retention_min,
                result.failures,
                replay.agent_requests,
            );
            Ok((figures, replay.calibration.fits_the_log()))
        };
    let figures_of = |session: &Session, policy| Ok(replayed(session, policy)?.0);
    // Claude Code's rules on every session: the reference.
    let (reference, fits): (Vec<Figures>, Vec<bool>) = sessions
        .par_iter()
        .map(|session| {
            let policy = policy::named("claude-code", counter.clone())
                .ok_or_else(|| usage_error("the claude-code policy is missing"))?;
            replayed(session, policy)
        })
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    let outcomes: Vec<Outcome> = candidates
        .par_iter()
        .map(|changes| {
            let config = load(&candidate_sources(&base_sources, &base, changes))?;
            let requests = policy::SummaryRequests::from_config(&config);
            let figures = sessions
                .iter()
                .map(|session| {
                    let compactor = Compactor::from_config(&config)?;
                    figures_of(
                        session,
                        Box::new(policy::Condense::new("condense", compactor, requests)?),
                    )
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(outcome(changes.clone(), &figures))
        })
        .collect::<Result<_>>()?;
    progress.clear();
    name_logs_not_borne_out(&sessions, &fits, verbosity);
    let reference = outcome(Vec::new(), &reference);
    let frontier = frontier(&outcomes);
    let groups = alike(&outcomes, &base);
    let chosen = groups
        .iter()
        .find(|group| group.contains(&choose(&outcomes, &reference)))
        .map_or(0, |group| group[0]);
    print(
        &outcomes,
        &groups,
        &frontier,
        chosen,
        &reference,
        &base,
        (&sessions, summary_length.as_ref()),
    )?;
    if let Some(path) = &args.output {
        let text = layer(&outcomes[chosen], &base, &sessions, &reference);
        write_layer(path, &text, &base_sources, verbosity)?;
    }
    Ok(())
}

/// Each session whose log's own usage its messages do not bear out
/// ([`condense_replay::Calibration::fits_the_log`], `fits` false), named on stderr: what tune
/// reports of it prices the log as it is.
fn name_logs_not_borne_out(sessions: &[Session], fits: &[bool], verbosity: Verbosity) {
    if verbosity == Verbosity::Quiet {
        return;
    }
    for (session, _) in sessions.iter().zip(fits).filter(|(_, fits)| !**fits) {
        eprintln!(
            "condense: {}: the log's own usage does not bear out its messages (its text redacted or cut, or messages missing): its figures price the log as it is, not what the provider billed",
            session.name
        );
    }
}

/// How many replays are done, told on one line of a terminal's stderr.
struct Progress {
    done: AtomicUsize,
    total: usize,
    show: bool,
}

impl Progress {
    fn new(total: usize, verbosity: Verbosity) -> Self {
        Progress {
            done: AtomicUsize::new(0),
            total,
            show: verbosity != Verbosity::Quiet && std::io::stderr().is_terminal(),
        }
    }

    /// One more replay done.
    fn tick(&self) {
        let now = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if self.show {
            eprint!("\rcondense: tune: {now}/{} replays", self.total);
        }
    }

    /// The line taken away once every replay is done.
    fn clear(&self) {
        if self.show {
            eprint!("\r{:60}\r", "");
        }
    }
}

/// Each session file read as a recording, priced by `provider` or by the API it speaks.
fn sessions_of(files: &[PathBuf], provider: Option<Provider>) -> Result<Vec<Session>> {
    files
        .iter()
        .map(|path| {
            let session = read_session(&Some(path.clone()), None)?;
            let recording = crate::replay::recording_of(&session, &path.display().to_string())?;
            Ok(Session {
                name: path.display().to_string(),
                recording,
                provider: provider
                    .unwrap_or_else(|| crate::replay::provider_speaking(session.format)),
            })
        })
        .collect()
}

/// How long the harness's model writes its summaries, measured once on every log of
/// `sessions` that holds one of its own and pooled: the stand-ins of the policies whose summary
/// a model writes are sized by it in every session, the short ones the harness never compacted
/// too; `None` where no log holds one.
fn summary_length_of(
    sessions: &[Session],
    counter: &Arc<dyn TokenCounter>,
) -> Result<Option<SummaryLength>> {
    let measured: Vec<SummaryLength> = sessions
        .par_iter()
        .map(|session| {
            SummaryLength::of(&session.recording, counter).with_context(|| session.name.clone())
        })
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    Ok(SummaryLength::pooled(&measured))
}

/// The chosen layer written to `path`, once it is known to load over the user's own layers:
/// the same check as `condense config check --config`.
fn write_layer(
    path: &Path,
    text: &str,
    base_sources: &condense_host::Sources,
    verbosity: Verbosity,
) -> Result<()> {
    let mut check = base_sources.clone();
    let probe = std::env::temp_dir().join(format!("condense-tune-{}.toml", std::process::id()));
    std::fs::write(&probe, text).context("cannot write the configuration to check it")?;
    check.explicit = Some(probe.clone());
    let loaded = load(&check);
    let _ = std::fs::remove_file(&probe);
    loaded.context("the chosen configuration does not load")?;
    write_file(path, text.as_bytes())?;
    if verbosity != Verbosity::Quiet {
        eprintln!(
            "condense: wrote the chosen configuration to {} (use it with --config, or as the project's condense.toml)",
            path.display()
        );
    }
    Ok(())
}

/// One replay's `(cost, mean retention, least retention, failures, requests)`.
type Figures = (f64, f64, f64, usize, usize);

/// The sources of a candidate: the user's, then the changes it makes to the user's effective
/// configuration (`base`), the summarizer the extractive one (a replay is offline and
/// deterministic). A value the user's configuration already has is not set again: set by a
/// layer of the user's, a price would hold for every model in place of each model's own.
fn candidate_sources(
    sources: &condense_host::Sources,
    base: &Config,
    changes: &[(&'static str, &'static str)],
) -> condense_host::Sources {
    let mut layered = sources.clone();
    let changed = changes
        .iter()
        .filter(|(key, value)| base.value_text(key).as_deref() != Some(*value));
    for (key, value) in changed.chain([&("summarizer.kind", "extractive")]) {
        layered
            .flags
            .push(("tune".to_owned(), (*key).to_owned(), (*value).to_owned()));
    }
    layered
}

/// Every combination of the levers' values.
fn candidates() -> Vec<Vec<(&'static str, &'static str)>> {
    let mut all: Vec<Vec<(&'static str, &'static str)>> = vec![Vec::new()];
    for (key, values) in LEVERS {
        all = all
            .into_iter()
            .flat_map(|so_far| {
                values.iter().map(move |value| {
                    let mut next = so_far.clone();
                    next.push((key, *value));
                    next
                })
            })
            .collect();
    }
    all
}

/// The figures of one candidate (or the reference) from each session's
/// `(cost, retention, least retention, failures, requests)`.
fn outcome(changes: Vec<(&'static str, &'static str)>, figures: &[Figures]) -> Outcome {
    let requests: usize = figures.iter().map(|figure| figure.4).sum();
    let weighted: f64 = figures
        .iter()
        .map(|figure| figure.1 * figure.4 as f64)
        .sum();
    Outcome {
        changes,
        cost_usd: figures.iter().map(|figure| figure.0).sum(),
        retention: if requests == 0 {
            1.0
        } else {
            weighted / requests as f64
        },
        retention_min: figures.iter().map(|figure| figure.2).fold(1.0, f64::min),
        failures: figures.iter().map(|figure| figure.3).sum(),
    }
}

/// Whether `a` is at least as good as `b` on every measure and better on one.
fn dominates(a: &Outcome, b: &Outcome) -> bool {
    let as_good =
        a.cost_usd <= b.cost_usd && a.retention >= b.retention && a.failures <= b.failures;
    let better = a.cost_usd < b.cost_usd || a.retention > b.retention || a.failures < b.failures;
    as_good && better
}

/// The candidates no other dominates.
fn frontier(outcomes: &[Outcome]) -> Vec<bool> {
    outcomes
        .iter()
        .map(|candidate| !outcomes.iter().any(|other| dominates(other, candidate)))
        .collect()
}

/// The index of the chosen candidate (see the module's documentation).
fn choose(outcomes: &[Outcome], reference: &Outcome) -> usize {
    let fewest = outcomes
        .iter()
        .map(|outcome| outcome.failures)
        .min()
        .unwrap_or(0);
    let floor = RETENTION_FLOOR.max(reference.retention);
    let by_cost =
        |a: &(usize, &Outcome), b: &(usize, &Outcome)| a.1.cost_usd.total_cmp(&b.1.cost_usd);
    let eligible = outcomes
        .iter()
        .enumerate()
        .filter(|(_, outcome)| outcome.failures == fewest);
    eligible
        .clone()
        .filter(|(_, outcome)| outcome.retention >= floor)
        .min_by(by_cost)
        .or_else(|| {
            eligible.max_by(|a, b| {
                a.1.retention
                    .total_cmp(&b.1.retention)
                    .then(b.1.cost_usd.total_cmp(&a.1.cost_usd))
            })
        })
        .map_or(0, |(index, _)| index)
}

/// A candidate's changes against the effective configuration, `(key, value)`.
fn changed<'o>(outcome: &'o Outcome, base: &Config) -> Vec<&'o (&'static str, &'static str)> {
    outcome
        .changes
        .iter()
        .filter(|(key, value)| base.value_text(key).as_deref() != Some(*value))
        .collect()
}

/// A candidate's changes against the effective configuration, as `key=value` pairs (the
/// defaults when none differ).
fn label(outcome: &Outcome, base: &Config) -> String {
    let changed: Vec<String> = changed(outcome, base)
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    if changed.is_empty() {
        "(your configuration as it is)".to_owned()
    } else {
        changed.join(" ")
    }
}

/// The candidates whose figures are the same to the last digit, each group led by the one that
/// changes the fewest settings (then in the candidates' order), in the candidates' order of
/// their leaders. A setting that changes nothing on a team's sessions (no output a pruning
/// rule would touch, no pause for microcompact) makes two candidates of every one: a table of
/// 128 rows where a few dozen results differ.
fn alike(outcomes: &[Outcome], base: &Config) -> Vec<Vec<usize>> {
    let figures = |outcome: &Outcome| {
        (
            outcome.cost_usd.to_bits(),
            outcome.retention.to_bits(),
            outcome.retention_min.to_bits(),
            outcome.failures,
        )
    };
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (index, outcome) in outcomes.iter().enumerate() {
        match groups
            .iter_mut()
            .find(|group| figures(&outcomes[group[0]]) == figures(outcome))
        {
            Some(group) => group.push(index),
            None => groups.push(vec![index]),
        }
    }
    for group in &mut groups {
        group.sort_by_key(|&index| (changed(&outcomes[index], base).len(), index));
    }
    groups.sort_by_key(|group| group[0]);
    groups
}

/// The settings the members of `group` after its leader set otherwise than it, in the levers'
/// order: settings that changed nothing on these sessions.
fn differing(outcomes: &[Outcome], group: &[usize]) -> Vec<&'static str> {
    let Some((&leader, others)) = group.split_first() else {
        return Vec::new();
    };
    let value = |index: usize, key: &str| {
        outcomes[index]
            .changes
            .iter()
            .find(|(changed, _)| *changed == key)
            .map(|(_, value)| *value)
    };
    LEVERS
        .iter()
        .map(|(key, _)| *key)
        .filter(|key| {
            others
                .iter()
                .any(|&other| value(other, key) != value(leader, key))
        })
        .collect()
}

/// The table: one row for each group of candidates [`alike`], cheapest first, then the
/// reference.
fn print(
    outcomes: &[Outcome],
    groups: &[Vec<usize>],
    frontier: &[bool],
    chosen: usize,
    reference: &Outcome,
    base: &Config,
    (sessions, summary_length): (&[Session], Option<&SummaryLength>),
) -> Result<()> {
    let requests: usize = sessions
        .iter()
        .map(|session| session.recording.steps.len())
        .sum();
    say!(
        "{} session(s), {requests} requests, context window {}: {} candidate configurations, {} results",
        sessions.len(),
        crate::human::thousands(base.context_window()),
        outcomes.len(),
        groups.len()
    );
    if let Some(length) = summary_length {
        say!(
            "{}",
            crate::replay::summary_length_line(length, "these logs")
        );
    }
    say!("");
    say!("   cost $   keeps   least  failures  settings");
    let line = |mark: &str, outcome: &Outcome, name: String| {
        format!(
            "{mark} {:>7.2}  {:>5.1}%  {:>5.1}%  {:>8}  {name}",
            outcome.cost_usd,
            outcome.retention * 100.0,
            outcome.retention_min * 100.0,
            outcome.failures
        )
    };
    let mut order: Vec<&Vec<usize>> = groups.iter().collect();
    order.sort_by(|a, b| outcomes[a[0]].cost_usd.total_cmp(&outcomes[b[0]].cost_usd));
    for group in order {
        let index = group[0];
        let mark = if index == chosen {
            "*"
        } else if frontier[index] {
            "+"
        } else {
            " "
        };
        let mut name = label(&outcomes[index], base);
        if group.len() > 1 {
            name.push_str(&format!(" (+{} alike)", group.len() - 1));
        }
        say!("{}", line(mark, &outcomes[index], name));
    }
    say!(
        "{}",
        line(
            "=",
            reference,
            "claude-code's own rules (the reference)".to_owned()
        )
    );
    say!("");
    say!("+ on the cost/retention frontier (nothing else is as cheap and keeps as much); * chosen");
    let mut inert: Vec<&str> = Vec::new();
    for key in groups.iter().flat_map(|group| differing(outcomes, group)) {
        if !inert.contains(&key) {
            inert.push(key);
        }
    }
    if !inert.is_empty() {
        say!(
            "+N alike: N other candidates had the very same figures, differing only in settings that changed nothing there (some of {})",
            inert.join(", ")
        );
    }
    Ok(())
}

/// The chosen configuration as a commented TOML layer: only the settings it changes.
fn layer(chosen: &Outcome, base: &Config, sessions: &[Session], reference: &Outcome) -> String {
    let mut out = format!(
        "# Written by `condense tune` on {} recorded session(s) at a {}-token window.\n\
         # Replayed against each provider's prompt cache: ${:.2} in all, keeping {:.1} % of what\n\
         # the sessions had produced (the least any request kept: {:.1} %), {} failed requests.\n\
         # Claude Code's own rules on the same sessions: ${:.2}, keeping {:.1} %.\n",
        sessions.len(),
        base.context_window(),
        chosen.cost_usd,
        chosen.retention * 100.0,
        chosen.retention_min * 100.0,
        chosen.failures,
        reference.cost_usd,
        reference.retention * 100.0,
    );
    let mut sections: Vec<(&str, Vec<(&str, &str)>)> = Vec::new();
    for (key, value) in &chosen.changes {
        if base.value_text(key).as_deref() == Some(*value) {
            continue;
        }
        let Some((section, name)) = key.split_once('.') else {
            continue;
        };
        match sections.iter_mut().find(|(seen, _)| *seen == section) {
            Some((_, keys)) => keys.push((name, value)),
            None => sections.push((section, vec![(name, value)])),
        }
    }
    if sections.is_empty() {
        out.push_str(
            "# Your configuration as it is was the best of the candidates: nothing to change.\n",
        );
    }
    for (section, keys) in sections {
        out.push_str(&format!("\n[{section}]\n"));
        for (name, value) in keys {
            out.push_str(&format!("{name} = {value}\n"));
        }
    }
    out
}

/// [`session_files`], the files left out named on stderr.
fn session_files_told(inputs: &[PathBuf], verbosity: Verbosity) -> Result<Vec<PathBuf>> {
    let (files, empty) = session_files(inputs)?;
    if !empty.is_empty() && verbosity != Verbosity::Quiet {
        let names: Vec<String> = empty
            .iter()
            .map(|path| path.display().to_string())
            .collect();
        eprintln!(
            "condense: left out {} file(s) that hold nothing: {}",
            names.len(),
            names.join(", ")
        );
    }
    Ok(files)
}

/// The session files `inputs` name: files as they are, directories' `.json` and `.jsonl`
/// files (recursively, in order; a Claude Code session's `subagents` directory aside), and
/// those of the directories' files that hold nothing, left out. Claude Code leaves an empty
/// log for a session that never got a message on its main thread (its subagents' logs beside
/// it); in a directory of sessions that is no error, where a file named alone that holds
/// nothing is one.
fn session_files(inputs: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let mut files = Vec::new();
    let mut empty = Vec::new();
    for input in inputs {
        if input.is_dir() {
            walk(input, &mut files, &mut empty)
                .with_context(|| format!("cannot read the directory {}", input.display()))?;
        } else if input.is_file() {
            files.push(input.clone());
        } else {
            return Err(usage_error(format!(
                "{}: no such file or directory",
                input.display()
            )));
        }
    }
    if files.is_empty() {
        return Err(usage_error(
            "no recorded sessions found (.json or .jsonl files) in what was given",
        ));
    }
    Ok((files, empty))
}

/// Whether the file at `path` holds nothing but whitespace (read only when it is small).
fn holds_nothing(path: &Path) -> std::io::Result<bool> {
    let len = std::fs::metadata(path)?.len();
    if len == 0 {
        return Ok(true);
    }
    Ok(len <= 4096 && std::fs::read(path)?.iter().all(u8::is_ascii_whitespace))
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>, empty: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name != "subagents") {
                walk(&path, files, empty)?;
            }
        } else if path
            .extension()
            .is_some_and(|ext| ext == "json" || ext == "jsonl")
        {
            if holds_nothing(&path)? {
                empty.push(path);
            } else {
                files.push(path);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(changes: Vec<(&'static str, &'static str)>, cost_usd: f64) -> Outcome {
        Outcome {
            changes,
            cost_usd,
            retention: 0.99,
            retention_min: 0.5,
            failures: 0,
        }
    }

    /// Candidates with the same figures share a group, led by the one that changes the fewest
    /// settings against the configuration as it is; the rest differ only in what changed
    /// nothing, which the table names.
    #[test]
    fn candidates_alike_are_one_row_led_by_the_fewest_changes() {
        let base = Config::built_in().unwrap();
        assert_eq!(
            base.value_text("microcompact.enabled").as_deref(),
            Some("true")
        );
        let outcomes = [
            outcome(
                vec![
                    ("compaction.min_tail_calls", "5"),
                    ("microcompact.enabled", "false"),
                ],
                1.0,
            ),
            outcome(vec![("microcompact.enabled", "false")], 2.0),
            outcome(
                vec![
                    ("compaction.min_tail_calls", "5"),
                    ("microcompact.enabled", "true"),
                ],
                1.0,
            ),
            outcome(vec![("microcompact.enabled", "true")], 2.0 + 1e-12),
        ];
        let groups = alike(&outcomes, &base);
        assert_eq!(groups, [vec![1], vec![2, 0], vec![3]]);
        assert_eq!(differing(&outcomes, &groups[1]), ["microcompact.enabled"]);
        assert!(differing(&outcomes, &groups[0]).is_empty());
    }
}
