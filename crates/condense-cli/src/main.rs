//! `condense`: compact, prune, count and inspect saved agent sessions.
// Printing is this binary's job (the libraries it calls never print).
#![allow(clippy::print_stdout, clippy::print_stderr)]
// The flags' doc comments are their `--help` text, where a URL is written bare.
#![allow(rustdoc::bare_urls)]

/// `println!` that returns the error instead of panicking when stdout is gone (a closed pipe):
/// `main` then exits quietly, as other Unix tools do.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*).context("cannot write to stdout")?;
    }};
}

/// `print!` with [`say!`]'s error handling.
macro_rules! say_raw {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*).context("cannot write to stdout")?;
    }};
}

mod commands;
mod human;
mod io;
mod replay;
mod serve;
mod settings;
mod spinner;
mod temp;
mod tune;

/// mimalloc rather than the system's allocator: a proxied request reads, copies and drops
/// thousands of small strings and maps, and glibc's malloc and free were about a fifth of its
/// instructions (docs/benchmarks-history.md, "The proxy under load"). Plugins share no allocations with the
/// host (their ABI passes borrowed bytes only), so they may use any allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use condense_formats::Format;

#[derive(Parser)]
#[command(
    name = "condense",
    version,
    about = "Keep long LLM-agent sessions inside the model's context window without losing what the agent needs.",
    after_help = "Example:\n  condense compact examples/claude-code-d7d349f9.jsonl --context-window 32000 -o compacted.jsonl"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Print nothing but errors.
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Show every decision.
    #[arg(short, long, global = true, conflicts_with = "quiet")]
    verbose: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Prune, then summarize what is still too much; write the session in the same format.
    #[command(
        after_help = "Example:\n  condense compact session.jsonl --context-window 32000 -o compacted.jsonl --report report.json"
    )]
    Compact(RunArgs),
    /// Phase 1 only: replace old tool outputs with placeholders.
    #[command(
        after_help = "Example:\n  condense prune session.json --protect memory_store --dry-run -v"
    )]
    Prune(RunArgs),
    /// Count tokens: in all, by role and by tool.
    #[command(after_help = "Example:\n  condense count session.jsonl --json")]
    Count(CountArgs),
    /// One row per message, with what `compact` would do to it, and the context used.
    #[command(after_help = "Example:\n  condense inspect session.jsonl --context-window 128000")]
    Inspect(InspectArgs),
    /// Print an original that a placeholder replaced, as the tool returned it.
    #[command(after_help = "Example:\n  condense recall 3f2a9c0d1e4b5a697887766554433221")]
    Recall(RecallArgs),
    /// The effective configuration.
    #[command(subcommand, after_help = "Example:\n  condense config show")]
    Config(ConfigAction),
    /// Configured plugins.
    #[command(subcommand, after_help = "Example:\n  condense plugins list")]
    Plugins(PluginsAction),
    /// Compaction templates.
    #[command(subcommand, after_help = "Example:\n  condense template show anchored")]
    Template(TemplateAction),
    /// A compacting proxy: point an agent's base URL at it.
    #[command(
        after_help = "Example:\n  condense serve --listen 127.0.0.1:8787 --anthropic-upstream https://api.anthropic.com\n  ANTHROPIC_BASE_URL=http://127.0.0.1:8787 claude"
    )]
    Serve(ServeArgs),
    /// What each compaction policy would have cost on a recorded session, request by request,
    /// with the provider's prompt cache.
    #[command(
        after_help = "Example:\n  condense replay session.jsonl --context-window 64000 --plot replay.svg\n  condense replay session.json --policy recorded --policy condense --json"
    )]
    Replay(ReplayArgs),
    /// Replays your own recorded sessions under condense's main settings and writes the
    /// cheapest configuration that keeps what matters, as a configuration layer.
    #[command(
        after_help = "Example:\n  condense tune ~/.claude/projects/myrepo --context-window 200000 -o condense.toml\n  condense config check --config condense.toml"
    )]
    Tune(TuneArgs),
    /// Tools condense gives the agent.
    #[command(
        subcommand,
        after_help = "Example:\n  condense tools schema --format anthropic"
    )]
    Tools(ToolsAction),
    /// A completion script for your shell, on stdout.
    #[command(
        after_help = "Example:\n  condense completions bash > ~/.local/share/bash-completion/completions/condense"
    )]
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// The manual page (roff), on stdout.
    #[command(after_help = "Example:\n  condense man > condense.1 && man ./condense.1")]
    Man,
}

/// The command line's own description, for completions and the manual.
pub fn command_line() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

#[derive(Subcommand, Debug)]
pub enum ToolsAction {
    /// The `trim_tool_result` tool as the provider expects it in a request's tool list: the
    /// agent calls it to replace a result it has used by its own summary.
    Schema {
        /// openai (Chat Completions `tools` entry), openai-responses (Responses API `tools`
        /// entry; also codex) or anthropic (Messages `tools` entry; also claude-code).
        #[arg(long, value_parser = parse_format, default_value = "openai")]
        format: Format,
    },
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Where to listen (serve.listen).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// The OpenAI-compatible upstream's origin, e.g. https://api.openai.com (serve.openai_upstream).
    #[arg(long, value_name = "URL")]
    openai_upstream: Option<String>,
    /// The Anthropic upstream's origin, e.g. https://api.anthropic.com (serve.anthropic_upstream).
    #[arg(long, value_name = "URL")]
    anthropic_upstream: Option<String>,
    /// The sessions' state: a directory, or redis://HOST:PORT/DB to share it between replicas
    /// (serve.state).
    #[arg(long, value_name = "PATH|URL")]
    state: Option<String>,
    #[command(flatten)]
    settings: SettingArgs,
}

/// Settings that override the configuration for one run.
#[derive(Args, Clone, Default, Debug)]
pub struct SettingArgs {
    /// A configuration file, read after the user's and the project's.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The model's context window, in tokens.
    #[arg(long, value_name = "TOKENS")]
    context_window: Option<u64>,
    /// The most the model may write in one reply.
    #[arg(long, value_name = "TOKENS")]
    max_output_tokens: Option<u64>,
    /// extractive (offline, the default), openai, anthropic, or upstream (`serve` only: the
    /// request's own upstream with the client's credentials).
    #[arg(long, value_name = "KIND")]
    summarizer: Option<String>,
    /// structured, anchored or detailed.
    #[arg(long, value_name = "NAME")]
    template: Option<String>,
    /// Never prune this tool's outputs (repeatable).
    #[arg(long, value_name = "TOOL")]
    protect: Vec<String>,
    /// Where originals of replaced outputs are kept.
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The session file; `-` or nothing reads stdin.
    input: Option<PathBuf>,
    /// The input's format, when detection should not decide.
    #[arg(long, value_parser = parse_format)]
    format: Option<Format>,
    /// Write the result here instead of stdout (`-`: stdout).
    #[arg(short, long, value_name = "FILE", conflicts_with = "in_place")]
    output: Option<PathBuf>,
    /// Replace the input file; a backup is kept as FILE.bak (FILE.1.bak, … when that exists).
    #[arg(long)]
    in_place: bool,
    /// Write the full report as JSON (`-`: stdout, when the session goes elsewhere).
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Report only: write no session, store nothing (a --report is still written).
    #[arg(long)]
    dry_run: bool,
    /// When the summarizer fails, write the pruned session anyway (still over the threshold)
    /// instead of failing.
    #[arg(long)]
    allow_over_threshold: bool,
    /// The time of this request (RFC 3339, e.g. 2025-07-16T21:00:00Z) instead of the wall
    /// clock: time-based microcompact measures the idle gap up to it (tests, replays).
    #[arg(long, value_name = "TIME", value_parser = parse_now)]
    now: Option<u64>,
    #[command(flatten)]
    settings: SettingArgs,
}

#[derive(Args, Debug)]
pub struct CountArgs {
    /// The session file; `-` or nothing reads stdin.
    input: Option<PathBuf>,
    /// The input's format, when detection should not decide.
    #[arg(long, value_parser = parse_format)]
    format: Option<Format>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    settings: SettingArgs,
}

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// The session file.
    input: PathBuf,
    /// The input's format, when detection should not decide.
    #[arg(long, value_parser = parse_format)]
    format: Option<Format>,
    /// The time of this request (RFC 3339) instead of the wall clock, as for `compact`.
    #[arg(long, value_name = "TIME", value_parser = parse_now)]
    now: Option<u64>,
    #[command(flatten)]
    settings: SettingArgs,
}

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// Recorded sessions: files, or directories whose .json and .jsonl files are read.
    #[arg(required = true)]
    sessions: Vec<PathBuf>,
    /// Whose prompt cache and prices: anthropic or openai (by default, each session's own).
    #[arg(long, value_parser = parse_provider)]
    provider: Option<condense_replay::Provider>,
    /// Write the chosen configuration here (a commented TOML layer for `--config`).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    settings: SettingArgs,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The session file; `-` or nothing reads stdin.
    input: Option<PathBuf>,
    /// The input's format, when detection should not decide.
    #[arg(long, value_parser = parse_format)]
    format: Option<Format>,
    /// recorded, none, claude-code, opencode, hermes, condense, condense-b (repeatable; all
    /// when none is named).
    #[arg(long, value_name = "NAME")]
    policy: Vec<String>,
    /// Whose prompt cache and prices: anthropic or openai (by default, the one whose wire
    /// format the session is in: openai for Chat Completions and Responses bodies).
    #[arg(long, value_parser = parse_provider)]
    provider: Option<condense_replay::Provider>,
    /// Prices and cache rules read on top of config/prices.toml.
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
    /// The cache lifetime: 5m or 1h (Anthropic's extended cache, written at 2x).
    #[arg(long, default_value = "5m", value_parser = parse_ttl)]
    ttl: condense_replay::Ttl,
    /// A second configuration of condense, in place of --config: replayed as `condense-b`.
    #[arg(long, value_name = "FILE")]
    config_b: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Draw context per request and cumulative cost for each policy (.svg, or .html).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    #[command(flatten)]
    settings: SettingArgs,
}

#[derive(Args, Debug)]
pub struct RecallArgs {
    /// The handle a placeholder names (32 hex digits, after `condense recall`).
    handle: String,
    /// The wire form for an output of several blocks (text and images): anthropic (the
    /// default, also Claude Code's), openai, or openai-responses (also Codex's). A text output
    /// is printed as its text.
    #[arg(long, value_parser = parse_format, default_value = "anthropic")]
    format: Format,
    #[command(flatten)]
    settings: SettingArgs,
}

#[derive(Subcommand, Debug)]
pub enum ConfigAction {
    /// Every key's effective value and the layer it came from.
    Show(SettingArgs),
    /// Load the configuration and its plugins, and say whether they are valid.
    Check(SettingArgs),
    /// The configuration files that are read, in order.
    Path(SettingArgs),
}

#[derive(Subcommand, Debug)]
pub enum PluginsAction {
    /// Path, name, version, protected tools and template of each configured plugin.
    List(SettingArgs),
}

#[derive(Subcommand, Debug)]
pub enum TemplateAction {
    /// The built-in templates.
    List,
    /// A built-in template's text.
    Show {
        /// structured, anchored or detailed.
        name: String,
    },
}

fn parse_now(text: &str) -> Result<u64, String> {
    condense_core::time::parse_rfc3339(text)
}

fn parse_provider(text: &str) -> Result<condense_replay::Provider, String> {
    text.parse()
}

fn parse_ttl(text: &str) -> Result<condense_replay::Ttl, String> {
    text.parse()
}

fn parse_format(text: &str) -> Result<Format, String> {
    text.parse()
        .map_err(|error: condense_formats::UnknownFormat| error.to_string())
}

/// How much to say on stderr.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Verbosity {
    Quiet,
    Normal,
    Verbose,
}

/// `condense --config FILE SUBCOMMAND …` as `condense SUBCOMMAND … --config FILE`: the file is
/// each subcommand's setting, and people write it first, as with most tools. Moved to the end
/// of the arguments (before a `--`), where any subcommand that takes it reads it.
fn config_first(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let Some(first) = args.get(1).and_then(|arg| arg.to_str()) else {
        return args;
    };
    let taken: Vec<std::ffi::OsString> = if first == "--config" && args.len() > 2 {
        args.drain(1..3).collect()
    } else if first.starts_with("--config=") {
        args.drain(1..2).collect()
    } else {
        return args;
    };
    let at = args
        .iter()
        .position(|arg| arg == "--")
        .unwrap_or(args.len());
    args.splice(at..at, taken);
    args
}

fn main() -> ExitCode {
    // A bug must still end in one line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let message = condense_plugin::panic_message(info.payload()).unwrap_or_default();
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("condense: internal error (please report it): {message}{at}");
    }));
    let cli = match Cli::try_parse_from(config_first(std::env::args_os().collect())) {
        Ok(cli) => cli,
        Err(error) => {
            use clap::error::ErrorKind;
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) {
                let _ = error.print();
                return ExitCode::SUCCESS;
            }
            if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                // `condense` alone is a usage error: the help goes to stderr, the status says so.
                eprint!("{}", error.render());
                return ExitCode::from(2);
            }
            eprintln!(
                "condense: {} (see condense --help)",
                clap_message(&error.to_string())
            );
            return ExitCode::from(2);
        }
    };
    let verbosity = match (cli.quiet, cli.verbose) {
        (true, _) => Verbosity::Quiet,
        (_, true) => Verbosity::Verbose,
        _ => Verbosity::Normal,
    };
    // The proxy handles its own signals: SIGTERM lets in-flight requests finish.
    if !matches!(cli.command, Command::Serve(_)) {
        temp::install_signal_cleanup();
    }
    match std::panic::catch_unwind(|| commands::run(cli.command, verbosity)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        // A reader that went away (`condense inspect … | head -1`) is not a failure.
        Ok(Err(error)) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Ok(Err(error)) => {
            eprintln!("condense: {}", message(&error));
            let usage = error.chain().any(|cause| cause.is::<UsageError>());
            ExitCode::from(if usage { 2 } else { 1 })
        }
        Err(_) => ExitCode::from(1),
    }
}

/// A request that cannot be carried out as given (contradicting flags, files that clash): exit
/// status 2, like clap's own usage errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(String);

/// An error that exits with status 2.
pub fn usage_error(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|error| error.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The error and its causes on one line, each cause once: library errors often show their
/// source in their own text too (`cannot read x: No such file`), and printing the chain would
/// repeat it.
fn message(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        let text = one_line(&cause.to_string());
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// clap's message on one line, like every other error of condense, without the usage block
/// that follows it: its first line alone can end in a colon whose list (the missing arguments)
/// is on the next lines, and its tip ("a similar argument exists") is the useful part.
fn clap_message(text: &str) -> String {
    let text = text.trim_start().trim_start_matches("error: ");
    let mut paragraphs = Vec::new();
    for paragraph in text.split("\n\n") {
        let paragraph = one_line(paragraph);
        if paragraph.starts_with("Usage:") || paragraph.starts_with("For more information") {
            break;
        }
        if !paragraph.is_empty() {
            paragraphs.push(paragraph);
        }
    }
    paragraphs.join("; ")
}

fn one_line(text: &str) -> String {
    text.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// `--help` is the documentation most people read: the command structure itself checks,
    /// and every argument of every command says what it is.
    #[test]
    fn every_command_and_argument_has_help() {
        Cli::command().debug_assert();
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            let path = format!("{path} {}", command.get_name());
            if command.get_about().is_none() {
                missing.push(path.clone());
            }
            for arg in command.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if !builtin && arg.get_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in command.get_subcommands() {
                if sub.get_name() != "help" {
                    walk(sub, &path, missing);
                }
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:?}");
    }
}
