//! `condense`: compact, prune, count and inspect saved agent sessions.

mod commands;
mod human;
mod io;
mod settings;
mod spinner;

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
    /// Print an original that a placeholder replaced.
    #[command(after_help = "Example:\n  condense recall 3f2a9c0d1e4b5a6978877665544332211")]
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
    /// extractive (offline, the default), openai or anthropic.
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
    /// Write the result here instead of stdout.
    #[arg(short, long, value_name = "FILE", conflicts_with = "in_place")]
    output: Option<PathBuf>,
    /// Replace the input file (a backup is kept as FILE.bak).
    #[arg(long)]
    in_place: bool,
    /// Write the full report as JSON.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Report only: write nothing, store nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    settings: SettingArgs,
}

#[derive(Args, Debug)]
pub struct CountArgs {
    input: Option<PathBuf>,
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
    input: PathBuf,
    #[arg(long, value_parser = parse_format)]
    format: Option<Format>,
    #[command(flatten)]
    settings: SettingArgs,
}

#[derive(Args, Debug)]
pub struct RecallArgs {
    handle: String,
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
    Show { name: String },
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

fn main() -> ExitCode {
    // A bug must still end in one line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("condense: internal error (please report it): {message}{at}");
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            use clap::error::ErrorKind;
            if matches!(
                error.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = error.print();
                return ExitCode::SUCCESS;
            }
            let text = error.to_string();
            let first = text
                .lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("error: ");
            eprintln!("condense: {first} (see condense --help)");
            return ExitCode::from(2);
        }
    };
    let verbosity = match (cli.quiet, cli.verbose) {
        (true, _) => Verbosity::Quiet,
        (_, true) => Verbosity::Verbose,
        _ => Verbosity::Normal,
    };
    match std::panic::catch_unwind(|| commands::run(cli.command, verbosity)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(error)) => {
            eprintln!("condense: {}", one_line(&format!("{error:#}")));
            ExitCode::from(1)
        }
        Err(_) => ExitCode::from(1),
    }
}

fn one_line(text: &str) -> String {
    text.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
