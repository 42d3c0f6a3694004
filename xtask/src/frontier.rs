//! `cargo xtask frontier`: the table of BENCHMARKS.md's first section, made again. Every shared
//! session at each window under both providers' cache models, replayed by a release build of
//! `condense` (`condense replay FILE --context-window W --max-output-tokens 4096 --provider P
//! --json`, every policy, the whole session's figures: a Claude Code log's subagents
//! included), one row per point and one column per policy, then the counts the targets
//! are read from. `--before BIN` adds a column of another build's `condense` (an older commit's,
//! built apart), priced and measured by that build. `--transcripts DIR` reads another
//! directory laid out as the shared one (any of its folders).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// The reply limit of every replay: the issue's.
const MAX_OUTPUT_TOKENS: &str = "4096";
/// The providers whose cache models price the replays.
const PROVIDERS: [&str; 2] = ["anthropic", "openai"];
/// The folders of the shared transcripts that hold sessions.
const FOLDERS: [&str; 3] = ["claude-code", "openai", "anthropic"];
/// Replays run at once: the machines CI runs on have two cores.
const WORKERS: usize = 2;

/// What the task was asked for.
struct Options {
    condense: Option<PathBuf>,
    before: Option<PathBuf>,
    transcripts: PathBuf,
    windows: Vec<usize>,
}

/// One policy's figures at one point.
struct Figures {
    name: String,
    cost: f64,
    keeps: f64,
    failures: u64,
    requests: u64,
}

/// One session at one window under one provider.
struct Point {
    session: String,
    provider: &'static str,
    window: usize,
    policies: Vec<Figures>,
    before: Option<Figures>,
}

/// The arguments `frontier` takes: the build to measure (by default this checkout's, built), a
/// build to compare it with, the sessions (by default `../shared/transcripts`) and the windows
/// (by default 32K, 64K and 128K).
const USAGE: &str = "[--condense BIN] [--before BIN] [--transcripts DIR] [--windows W,W,...]";

/// Runs the task with `args` (what follows `frontier`).
pub fn run(args: &[String]) -> Result<()> {
    if args.iter().any(|arg| arg == "-h" || arg == "--help") {
        println!("usage: cargo xtask frontier {USAGE}");
        return Ok(());
    }
    let options = options(args)?;
    let condense = match &options.condense {
        Some(path) => path.clone(),
        None => {
            crate::cargo(&["build", "--release", "-p", "condense-cli"])?;
            crate::root().join("target/release/condense")
        }
    };
    let sessions = sessions(&options.transcripts)?;
    let mut jobs: Vec<(&Path, &'static str, usize)> = Vec::new();
    for path in &sessions {
        for provider in PROVIDERS {
            for &window in &options.windows {
                jobs.push((path, provider, window));
            }
        }
    }
    eprintln!(
        "replaying {} sessions at {} windows under {} cache models ({} replays{})",
        sessions.len(),
        options.windows.len(),
        PROVIDERS.len(),
        jobs.len(),
        if options.before.is_some() {
            ", twice"
        } else {
            ""
        }
    );
    let next = AtomicUsize::new(0);
    let points = Mutex::new(Vec::new());
    let failed = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                while let Some(&(path, provider, window)) =
                    jobs.get(next.fetch_add(1, Ordering::Relaxed))
                {
                    match point(&condense, options.before.as_deref(), path, provider, window) {
                        Ok(point) => lock(&points).push(point),
                        Err(error) => lock(&failed).push(format!("{error:#}")),
                    }
                }
            });
        }
    });
    let failed = failed
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if !failed.is_empty() {
        bail!("{} replays failed:\n{}", failed.len(), failed.join("\n"));
    }
    let mut points = points
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    points.sort_by(|a, b| {
        (&a.session, a.provider, a.window).cmp(&(&b.session, b.provider, b.window))
    });
    print!("{}", table(&points));
    print!("{}", counts(&points));
    Ok(())
}

/// The point of `path` at `window` under `provider`: every policy as `condense` replays it, and
/// the `before` build's condense.
fn point(
    condense: &Path,
    before: Option<&Path>,
    path: &Path,
    provider: &'static str,
    window: usize,
) -> Result<Point> {
    let policies = replay(condense, path, provider, window)?;
    let before = match before {
        Some(bin) => replay(bin, path, provider, window)?
            .into_iter()
            .find(|figures| figures.name == "condense"),
        None => None,
    };
    Ok(Point {
        session: session_name(path),
        provider,
        window,
        policies,
        before,
    })
}

/// The lock, whoever held it last: a worker that panicked leaves its points as they were.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn options(args: &[String]) -> Result<Options> {
    let mut options = Options {
        condense: None,
        before: None,
        transcripts: std::env::var_os("CONDENSE_TRANSCRIPTS").map_or_else(
            || crate::root().join("../shared/transcripts"),
            PathBuf::from,
        ),
        windows: vec![32_000, 64_000, 128_000],
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--condense" => options.condense = Some(PathBuf::from(value()?)),
            "--before" => options.before = Some(PathBuf::from(value()?)),
            "--transcripts" => options.transcripts = PathBuf::from(value()?),
            "--windows" => {
                options.windows = value()?
                    .split(',')
                    .map(|window| {
                        window.trim().parse().with_context(|| {
                            format!("--windows: {window:?} is not a number of tokens")
                        })
                    })
                    .collect::<Result<_>>()?;
            }
            other => bail!("frontier: unknown argument {other:?} ({USAGE})"),
        }
    }
    Ok(options)
}

/// The session files under `dir`'s folders, sorted, and those that hold nothing left out and
/// named on stderr: Claude Code leaves an empty log for a session that never got a message on
/// its main thread, and `condense replay` rightly refuses such a file (as `condense tune` leaves
/// it out of a directory).
fn sessions(dir: &Path) -> Result<Vec<PathBuf>> {
    let (files, empty) = session_files(dir)?;
    if !empty.is_empty() {
        let names: Vec<String> = empty
            .iter()
            .map(|path| path.display().to_string())
            .collect();
        eprintln!(
            "left out {} file(s) that hold nothing: {}",
            names.len(),
            names.join(", ")
        );
    }
    Ok(files)
}

/// [`sessions`]' files, and apart those that hold nothing but whitespace.
fn session_files(dir: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let mut files = Vec::new();
    let mut empty = Vec::new();
    for folder in FOLDERS {
        let folder = dir.join(folder);
        // A directory of one harness's logs has only its folder.
        if !folder.exists() {
            continue;
        }
        let entries = std::fs::read_dir(&folder)
            .with_context(|| format!("cannot read the transcripts in {}", folder.display()))?;
        for entry in entries {
            let path = entry
                .with_context(|| format!("cannot read the transcripts in {}", folder.display()))?
                .path();
            if path
                .extension()
                .is_some_and(|extension| extension == "json" || extension == "jsonl")
            {
                if holds_nothing(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?
                {
                    empty.push(path);
                } else {
                    files.push(path);
                }
            }
        }
    }
    if files.is_empty() {
        bail!(
            "no sessions in {}: the logs go in its {} folders",
            dir.display(),
            FOLDERS.join(", ")
        );
    }
    files.sort();
    empty.sort();
    Ok((files, empty))
}

/// Whether the file at `path` holds nothing but whitespace (read only when it is small).
fn holds_nothing(path: &Path) -> std::io::Result<bool> {
    let len = std::fs::metadata(path)?.len();
    Ok(len <= 4096 && std::fs::read(path)?.iter().all(u8::is_ascii_whitespace))
}

/// A session's name in the table: its file's, without the extension, the folder before it for
/// the Messages API copies (`anthropic/claude-code-5f8cbb78`), a Claude Code log by the first
/// part of its id.
fn session_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let folder = path
        .parent()
        .and_then(Path::file_name)
        .map(|folder| folder.to_string_lossy().into_owned())
        .unwrap_or_default();
    match folder.as_str() {
        "claude-code" => stem.split('-').next().unwrap_or(&stem).to_owned(),
        "anthropic" => format!("anthropic/{stem}"),
        _ => stem,
    }
}

/// Every policy's whole-session figures from `condense` at one point.
fn replay(condense: &Path, path: &Path, provider: &str, window: usize) -> Result<Vec<Figures>> {
    let window_text = window.to_string();
    let output = Command::new(condense)
        .arg("replay")
        .arg(path)
        .args([
            "--context-window",
            &window_text,
            "--max-output-tokens",
            MAX_OUTPUT_TOKENS,
            "--provider",
            provider,
            "--json",
            "-q",
        ])
        .output()
        .with_context(|| format!("cannot run {}", condense.display()))?;
    let what = format!("{} at {window} ({provider})", path.display());
    if !output.status.success() {
        bail!(
            "{what}: {} exited {}: {}",
            condense.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let json: Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("{what}: the replay's --json is not JSON"))?;
    // The whole session where the build reports it (subagents included), else the main thread.
    let policies = json
        .get("session")
        .filter(|session| session.as_array().is_some_and(|list| !list.is_empty()))
        .or_else(|| json.get("policies"))
        .and_then(Value::as_array)
        .with_context(|| format!("{what}: the replay names no policies"))?;
    policies
        .iter()
        .map(|policy| {
            let number = |key: &str| {
                policy
                    .get(key)
                    .and_then(Value::as_f64)
                    .with_context(|| format!("{what}: a policy without {key}"))
            };
            Ok(Figures {
                name: policy
                    .get("name")
                    .and_then(Value::as_str)
                    .with_context(|| format!("{what}: a policy without a name"))?
                    .to_owned(),
                cost: number("cost_usd")?,
                keeps: number("retention")?,
                failures: number("failures")? as u64,
                requests: number("requests")? as u64,
            })
        })
        .collect()
}

/// A cell: cost, mean keeps, and the failed requests where there are any.
fn cell(figures: &Figures) -> String {
    let mut cell = format!("${:.2} / {:.1} %", figures.cost, figures.keeps * 100.0);
    if figures.failures > 0 {
        cell.push_str(&format!(" ({} failed)", figures.failures));
    }
    cell
}

/// The points whose sessions cost something: a log of side records only sends nothing.
fn priced(points: &[Point]) -> impl Iterator<Item = &Point> {
    points
        .iter()
        .filter(|point| point.policies.iter().any(|figures| figures.requests > 0))
}

fn figures<'a>(point: &'a Point, name: &str) -> Option<&'a Figures> {
    point.policies.iter().find(|figures| figures.name == name)
}

/// The markdown table: a row per point, a column per policy (the `before` build's condense
/// beside this one's), and condense's cost over Claude Code's rules' where theirs finish.
fn table(points: &[Point]) -> String {
    let Some(first) = priced(points).next() else {
        return String::new();
    };
    let names: Vec<&str> = first
        .policies
        .iter()
        .map(|figures| figures.name.as_str())
        .collect();
    let before = points.iter().any(|point| point.before.is_some());
    let mut header = vec!["session", "provider", "window"];
    for name in &names {
        if *name == "condense" && before {
            header.push("condense before");
        }
        header.push(name);
    }
    header.push("vs claude-code");
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str(&format!("|{}---:|\n", "---|".repeat(header.len() - 1)));
    for point in priced(points) {
        let mut row = vec![
            point.session.clone(),
            point.provider.to_owned(),
            format!("{}K", point.window / 1000),
        ];
        for name in &names {
            if *name == "condense" && before {
                row.push(point.before.as_ref().map_or_else(String::new, cell));
            }
            row.push(figures(point, name).map_or_else(String::new, cell));
        }
        row.push(
            match (figures(point, "condense"), figures(point, "claude-code")) {
                (Some(ours), Some(theirs)) if theirs.failures == 0 && theirs.cost > 0.0 => {
                    format!("{:.3}", ours.cost / theirs.cost)
                }
                _ => String::new(),
            },
        );
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}

/// What the targets are read from, for this build's condense and the `before` build's
/// where there is one ([`targets`]); then each policy's bill and mean keeps over every point.
fn counts(points: &[Point]) -> String {
    let mut out = String::from("\n");
    out.push_str(&targets(points, "condense", |point| {
        figures(point, "condense")
    }));
    if points.iter().any(|point| point.before.is_some()) {
        out.push_str(&targets(points, "condense before", |point| {
            point.before.as_ref()
        }));
    }
    out.push('\n');
    out.push_str(
        "| policy | bill over every point | mean keeps | failed requests |\n|---|---:|---:|---:|\n",
    );
    let mut columns: Vec<(String, Vec<&Figures>)> = Vec::new();
    for point in priced(points) {
        let mut each: Vec<(&str, &Figures)> = point
            .policies
            .iter()
            .map(|figures| (figures.name.as_str(), figures))
            .collect();
        if let Some(before) = &point.before {
            each.push(("condense before", before));
        }
        for (name, figures) in each {
            match columns.iter_mut().find(|(seen, _)| seen == name) {
                Some((_, list)) => list.push(figures),
                None => columns.push((name.to_owned(), vec![figures])),
            }
        }
    }
    for (name, list) in &columns {
        let bill: f64 = list.iter().map(|figures| figures.cost).sum();
        let keeps = list.iter().map(|figures| figures.keeps).sum::<f64>() / list.len() as f64;
        let failures: u64 = list.iter().map(|figures| figures.failures).sum();
        out.push_str(&format!(
            "| {name} | ${bill:.3} | {:.2} % | {failures} |\n",
            keeps * 100.0
        ));
    }
    out
}

/// Over the points where Claude Code's rules finish: where `ours` (named `name`) costs more,
/// keeps less, or keeps under 95 %; and where it fails a request and another policy finishes.
fn targets<'a>(
    points: &'a [Point],
    name: &str,
    ours: impl Fn(&'a Point) -> Option<&'a Figures>,
) -> String {
    let (mut theirs_finish, mut dearer, mut less, mut under, mut ratios) = (0, 0, 0, 0, Vec::new());
    let mut failing = 0;
    for point in priced(points) {
        let (Some(ours), Some(theirs)) = (ours(point), figures(point, "claude-code")) else {
            continue;
        };
        if ours.failures > 0 && point.policies.iter().any(|other| other.failures == 0) {
            failing += 1;
        }
        if theirs.failures != 0 || theirs.cost <= 0.0 {
            continue;
        }
        theirs_finish += 1;
        ratios.push(ours.cost / theirs.cost);
        dearer += usize::from(ours.cost > theirs.cost + 1e-9);
        less += usize::from(ours.keeps < theirs.keeps - 1e-9);
        under += usize::from(ours.failures == 0 && ours.keeps < 0.95);
    }
    let geometric = if ratios.is_empty() {
        0.0
    } else {
        (ratios.iter().map(|ratio| ratio.ln()).sum::<f64>() / ratios.len() as f64).exp()
    };
    format!(
        "{name}: where Claude Code's rules finish and cost anything ({theirs_finish} points), \
         costs more than they do at {dearer}, {geometric:.3}x theirs in geometric mean; keeps \
         less than they do at {less}; keeps under 95 % on average at {under}. Points where it \
         fails a request and another policy finishes: {failing}.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(name: &str, cost: f64, keeps: f64, failures: u64) -> Figures {
        Figures {
            name: name.to_owned(),
            cost,
            keeps,
            failures,
            requests: 10,
        }
    }

    fn point(window: usize, theirs: Figures, ours: Figures) -> Point {
        Point {
            session: "s".to_owned(),
            provider: "openai",
            window,
            policies: vec![figures("none", 2.0, 1.0, 0), theirs, ours],
            before: None,
        }
    }

    /// A point where condense costs more and keeps more, one where it costs less, and one where
    /// their rules fail: counted over the two where they finish.
    #[test]
    fn the_counts_are_read_where_claude_codes_rules_finish() {
        let points = [
            point(
                32_000,
                figures("claude-code", 1.0, 0.8, 0),
                figures("condense", 1.2, 1.0, 0),
            ),
            point(
                64_000,
                figures("claude-code", 2.0, 1.0, 0),
                figures("condense", 1.0, 0.9, 0),
            ),
            point(
                128_000,
                figures("claude-code", 2.0, 0.0, 3),
                figures("condense", 1.0, 0.5, 1),
            ),
        ];
        let counts = counts(&points);
        assert!(
            counts.contains(
                "condense: where Claude Code's rules finish and cost anything (2 points), costs \
                 more than they do at 1, 0.775x theirs in geometric mean; keeps less than they \
                 do at 1; keeps under 95 % on average at 1. Points where it fails a request and \
                 another policy finishes: 1."
            ),
            "{counts}"
        );
        assert!(
            counts.contains("| condense | $3.200 | 80.00 % | 1 |"),
            "{counts}"
        );
        let table = table(&points);
        assert!(
            table.contains(
                "| s | openai | 32K | $2.00 / 100.0 % | $1.00 / 80.0 % | $1.20 / 100.0 % | 1.200 |"
            ),
            "{table}"
        );
        assert!(
            table.contains("| s | openai | 128K | $2.00 / 100.0 % | $2.00 / 0.0 % (3 failed) | $1.00 / 50.0 % (1 failed) |  |"),
            "{table}"
        );
    }

    #[test]
    fn a_directory_of_one_harnesss_logs_is_read_and_an_empty_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("claude-code");
        std::fs::create_dir(&logs).unwrap();
        let error = sessions(dir.path()).unwrap_err().to_string();
        assert!(error.contains("no sessions in"), "{error}");
        std::fs::write(logs.join("b.jsonl"), "{}").unwrap();
        std::fs::write(logs.join("a.jsonl"), "{}").unwrap();
        std::fs::write(logs.join("notes.md"), "").unwrap();
        assert_eq!(
            sessions(dir.path()).unwrap(),
            [logs.join("a.jsonl"), logs.join("b.jsonl")]
        );
    }

    #[test]
    fn a_log_that_holds_nothing_is_left_out_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("claude-code");
        std::fs::create_dir(&logs).unwrap();
        std::fs::write(logs.join("a.jsonl"), "{}").unwrap();
        std::fs::write(logs.join("empty.jsonl"), "").unwrap();
        std::fs::write(logs.join("blank.jsonl"), "\n \n").unwrap();
        let (files, empty) = session_files(dir.path()).unwrap();
        assert_eq!(files, [logs.join("a.jsonl")]);
        assert_eq!(empty, [logs.join("blank.jsonl"), logs.join("empty.jsonl")]);
        // Only empty files: nothing to replay, said as for an empty directory.
        std::fs::remove_file(logs.join("a.jsonl")).unwrap();
        let error = sessions(dir.path()).unwrap_err().to_string();
        assert!(error.contains("no sessions in"), "{error}");
    }

    /// `--help` prints the usage and measures nothing; an argument it does not know is an
    /// error that gives the usage.
    #[test]
    fn help_prints_the_usage_and_an_unknown_argument_is_refused_with_it() {
        assert!(run(&["--help".to_owned()]).is_ok());
        let error = options(&["--bogus".to_owned()]).err().unwrap().to_string();
        assert!(error.contains("\"--bogus\""), "{error}");
        assert!(error.contains(USAGE), "{error}");
        let windows = options(&["--windows".to_owned(), "40000,48000".to_owned()]).unwrap();
        assert_eq!(windows.windows, [40_000, 48_000]);
    }

    #[test]
    fn sessions_are_named_as_the_table_names_them() {
        let name = |path: &str| session_name(Path::new(path));
        assert_eq!(
            name("/t/claude-code/069508a5-1193-487c-a9b5-a6f5f3ae4f98.jsonl"),
            "069508a5"
        );
        assert_eq!(
            name("/t/anthropic/claude-code-5f8cbb78.json"),
            "anthropic/claude-code-5f8cbb78"
        );
        assert_eq!(
            name("/t/openai/swe-agent-marshmallow-1867.json"),
            "swe-agent-marshmallow-1867"
        );
    }
}
