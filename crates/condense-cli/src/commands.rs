//! What each subcommand does.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use condense_core::{Conversation, Part};
use condense_host::{Clock, Compaction, CompactionOutcome, Compactor, FixedClock, SystemClock};
use condense_pruner::{MemoryStore, ReadThrough, Reason, Store};
use condense_template::{BUILTIN, Template};
use condense_tokenizer::{Tiktoken, TokenCounter};
use serde::Serialize;

use crate::io::{Plan, input_path, label, read_session};
use crate::settings::{config, plugins, refuse_upstream};
use crate::spinner::Spinner;
use crate::{
    Command, ConfigAction, CountArgs, InspectArgs, PluginsAction, RecallArgs, RunArgs,
    TemplateAction, ToolsAction, Verbosity, human,
};

pub fn run(command: Command, verbosity: Verbosity) -> Result<()> {
    match command {
        Command::Compact(args) => compact(args, verbosity, true),
        Command::Prune(args) => compact(args, verbosity, false),
        Command::Count(args) => count(args),
        Command::Inspect(args) => inspect(args, verbosity),
        Command::Recall(args) => recall(args),
        Command::Config(action) => config_command(action, verbosity),
        Command::Plugins(PluginsAction::List(settings)) => list_plugins(&settings, verbosity),
        Command::Template(action) => template(action),
        Command::Tools(ToolsAction::Schema { format }) => tools_schema(format),
        Command::Serve(args) => crate::serve::serve(args, verbosity),
        Command::Replay(args) => crate::replay::replay(args, verbosity),
        Command::Tune(args) => crate::tune::tune(args, verbosity),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut crate::command_line(), "condense", &mut script);
            crate::io::write_stdout(&script)
        }
        Command::Man => {
            let mut page = Vec::new();
            clap_mangen::Man::new(crate::command_line())
                .render(&mut page)
                .context("cannot render the manual page")?;
            crate::io::write_stdout(&page)
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The wall clock, or the time `--now` gave.
fn clock(now: Option<u64>) -> Box<dyn Clock> {
    match now {
        Some(ms) => Box::new(FixedClock(ms)),
        None => Box::new(SystemClock),
    }
}

/// The store of a run that stores nothing (`--dry-run`, `inspect`): it reads the originals the
/// configured store holds, as the real run's summary would, and keeps its own in memory. A
/// store that cannot be opened (a Redis that is down) leaves it only its own: a dry run must
/// not fail for want of what it never writes to.
fn looking_only(config: &condense_host::Config) -> Box<dyn Store> {
    match crate::settings::Originals::of(config).open(config) {
        Ok(below) => Box::new(ReadThrough::new(below)),
        Err(_) => Box::new(MemoryStore::new()),
    }
}

fn compact(args: RunArgs, verbosity: Verbosity, summarize: bool) -> Result<()> {
    // Every file the run touches is checked against the others before anything is read or
    // written: a report or output naming the input must not cost the user their session.
    let plan = Plan::new(
        input_path(&args.input),
        args.output.as_deref(),
        args.in_place,
        args.report.as_deref(),
        args.dry_run,
    )?;
    let config = config(&args.settings)?;
    if summarize {
        refuse_upstream(&config, "compact")?;
    }
    let plugins = plugins(&config, verbosity)?;
    let session = read_session(&args.input, args.format)?;
    let store: Box<dyn Store> = if args.dry_run {
        looking_only(&config)
    } else {
        crate::settings::Originals::of(&config).open(&config)?
    };
    let compactor = Compactor::with_plugins(&config, &plugins)?
        .with_store(store)
        .with_clock(clock(args.now));

    let remote = config.summarizer_kind().is_remote();
    let result = {
        let _spinner = Spinner::start(
            summarize && remote && verbosity != Verbosity::Quiet,
            &format!("summarizing with {}", config.summarizer_kind()),
        );
        let runtime = runtime()?;
        let conversation = session.conversation.clone();
        if summarize {
            runtime.block_on(compactor.compact(conversation))
        } else {
            runtime.block_on(compactor.prune(conversation))
        }
    }
    .with_context(|| label(&args.input))?;

    if let CompactionOutcome::Failed {
        summarizer, error, ..
    } = &result.report.compaction
        && !args.allow_over_threshold
    {
        bail!(
            "{}: the {summarizer} summarizer failed, so nothing was written: {error} (--allow-over-threshold writes the pruned session anyway)",
            label(&args.input)
        );
    }
    if verbosity != Verbosity::Quiet {
        eprint!(
            "{}",
            human::report(
                &label(&args.input),
                session.format,
                &config,
                &result.report,
                verbosity,
                // A dry run stores nothing: no place to recall from.
                (!args.dry_run)
                    .then(|| crate::settings::Originals::of(&config).label())
                    .as_deref(),
            )
        );
    }
    let bytes = session
        .encode(&result.conversation)
        .with_context(|| label(&args.input))?;
    plan.destination.write(&bytes, &session.bytes)?;
    // Last, so that a report on disk always describes a run that succeeded.
    if let Some(report) = &plan.report {
        let json =
            serde_json::to_vec_pretty(&result.report).context("cannot serialise the report")?;
        report.write(&json)?;
    }
    Ok(())
}

#[derive(Serialize)]
struct Counts {
    total: usize,
    messages: usize,
    by_role: BTreeMap<String, usize>,
    /// Tokens of each tool's calls and outputs.
    by_tool: BTreeMap<String, usize>,
    /// Messages before a provider's own compaction: the provider ignores them, so they are not
    /// counted.
    #[serde(skip_serializing_if = "is_zero")]
    ignored_before_compaction: usize,
    /// The tool definitions a request body carries beside its messages, as their JSON: not in
    /// `total`, but in every request the provider counts.
    #[serde(skip_serializing_if = "is_zero")]
    tool_definitions: usize,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

fn counts(conversation: &Conversation, counter: &dyn TokenCounter) -> Counts {
    let pairs = conversation.tool_pairs();
    let mut by_role = BTreeMap::new();
    let mut by_tool = BTreeMap::new();
    for (message, tokens) in conversation
        .messages
        .iter()
        .zip(counter.count_each(&conversation.messages))
    {
        *by_role.entry(message.role.to_string()).or_insert(0) += tokens;
        for part in &message.parts {
            let tool = match part {
                Part::ToolCall(call) => call.name.clone(),
                Part::ToolResult(result) => pairs
                    .tool_name(&conversation.messages, result)
                    .unwrap_or("(unknown tool)")
                    .to_owned(),
                _ => continue,
            };
            *by_tool.entry(tool).or_insert(0) += counter.count_part(part);
        }
    }
    Counts {
        total: counter.count_conversation(conversation),
        messages: conversation.messages.len(),
        by_role,
        by_tool,
        ignored_before_compaction: 0,
        tool_definitions: 0,
    }
}

fn count(args: CountArgs) -> Result<()> {
    let config = config(&args.settings)?;
    let mut conversation = read_session(&args.input, args.format)?.conversation;
    // What the provider reads: from its own last compaction on.
    let ignored =
        condense_core::LiveView::take(&mut conversation).map_or(0, |view| view.ignored_messages());
    let counter = Tiktoken::new(config.encoding());
    let counts = Counts {
        ignored_before_compaction: ignored,
        tool_definitions: condense_host::tools_tokens(&conversation, &counter),
        ..counts(&conversation, &counter)
    };
    if args.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&counts).context("cannot serialise the counts")?
        );
        return Ok(());
    }
    say!(
        "{} tokens in {} messages ({})",
        human::thousands(counts.total),
        counts.messages,
        config.encoding()
    );
    if counts.tool_definitions > 0 {
        say!(
            "and {} tokens of tool definitions beside them, in every request",
            human::thousands(counts.tool_definitions)
        );
    }
    if counts.ignored_before_compaction > 0 {
        say!(
            "({} earlier messages not counted: the provider's own compaction stands for them)",
            counts.ignored_before_compaction
        );
    }
    say!("by role:");
    for (role, tokens) in &counts.by_role {
        say!("  {role:<10} {:>10}", human::thousands(*tokens));
    }
    if !counts.by_tool.is_empty() {
        say!("by tool (calls and outputs):");
        let mut tools: Vec<(&String, &usize)> = counts.by_tool.iter().collect();
        tools.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (tool, tokens) in tools {
            say!("  {tool:<24} {:>10}", human::thousands(*tokens));
        }
    }
    Ok(())
}

fn inspect(args: InspectArgs, verbosity: Verbosity) -> Result<()> {
    let config = config(&args.settings)?;
    let plugins = plugins(&config, verbosity)?;
    let input = Some(args.input.clone());
    let conversation = read_session(&input, args.format)?.conversation;
    // What compact would do, worked out on a copy with nothing stored and no model asked.
    let mut preview = config.clone();
    if config.summarizer_kind().is_remote() {
        preview = config_with_extractive(&args)?;
    }
    let compactor = Compactor::with_plugins(&preview, &plugins)?
        .with_store(looking_only(&config))
        .with_clock(clock(args.now));
    let Compaction { report, .. } = runtime()?
        .block_on(compactor.compact(conversation.clone()))
        .with_context(|| label(&input))?;
    let counter = compactor.counter();
    let tokens = counter.count_each(&conversation.messages);
    let pairs = conversation.tool_pairs();
    let pruned: BTreeMap<usize, &Reason> = report
        .prune
        .outputs
        .iter()
        .map(|o| (o.message, &o.reason))
        .collect();
    let split = match &report.compaction {
        CompactionOutcome::Summarized { split, .. } => Some(split.clone()),
        _ => None,
    };
    say!(
        "{:>5}  {:<9} {:<20} {:>8}  what compact would do",
        "#",
        "role",
        "tool",
        "tokens"
    );
    for (index, message) in conversation.messages.iter().enumerate() {
        let tools: Vec<&str> = message
            .parts
            .iter()
            .filter_map(|part| match part {
                Part::ToolCall(call) => Some(call.name.as_str()),
                Part::ToolResult(result) => pairs.tool_name(&conversation.messages, result),
                _ => None,
            })
            .collect();
        let mut action = match &split {
            Some(split) if index < split.pinned => "keep (pinned)".to_owned(),
            Some(split) if index < split.tail_start => "summarize".to_owned(),
            Some(_) => "keep (tail)".to_owned(),
            None => "keep".to_owned(),
        };
        if let Some(reason) = pruned.get(&index)
            && matches!(
                reason,
                Reason::Pruned | Reason::OverTurnBudget | Reason::Duplicate { .. }
            )
        {
            action = format!("{action}; output {reason}");
        }
        let tool = human::cut(&tools.join(","), 20);
        say!(
            "{index:>5}  {:<9} {tool:<20} {:>8}  {action}",
            message.role.as_str(),
            human::thousands(tokens[index])
        );
    }
    say!();
    say!(
        "{}",
        human::bar(
            report.measured.tokens(),
            config.context_window(),
            report.usable
        )
    );
    Ok(())
}

fn config_with_extractive(args: &InspectArgs) -> Result<condense_host::Config> {
    let mut settings = args.settings.clone();
    settings.summarizer = Some("extractive".into());
    config(&settings)
}

fn recall(args: RecallArgs) -> Result<()> {
    // A handle that cannot be one is a usage mistake (status 2), not a failed recall.
    if !condense_pruner::is_handle(&args.handle) {
        return Err(crate::usage_error(format!(
            "`{}` is not a handle: a handle is the 32 lowercase hex digits after `condense recall` in a placeholder",
            args.handle
        )));
    }
    let config = config(&args.settings)?;
    let originals = crate::settings::Originals::of(&config);
    let bytes = originals
        .open(&config)?
        .get(&args.handle)
        .with_context(|| format!("store {}", originals.label()))?;
    crate::io::write_stdout(&recalled(&bytes, args.format)?)
}

/// What the tool returned, from a stored original: a text output is stored as its bytes and
/// printed as they are; an output of blocks is stored as condense's parts and printed in the
/// session's wire form, text alone as its text.
fn recalled(bytes: &[u8], format: condense_formats::Format) -> Result<Vec<u8>> {
    let Some(condense_core::ToolOutput::Parts(parts)) = condense_pruner::stored_output(bytes)
    else {
        return Ok(bytes.to_vec());
    };
    if parts.iter().all(|part| matches!(part, Part::Text(_))) {
        return Ok(condense_core::ToolOutput::Parts(parts)
            .text()
            .into_owned()
            .into_bytes());
    }
    let mut out = serde_json::to_vec_pretty(&condense_formats::output_blocks(format, &parts))
        .context("cannot serialise the original")?;
    out.push(b'\n');
    Ok(out)
}

fn config_command(action: ConfigAction, verbosity: Verbosity) -> Result<()> {
    match action {
        ConfigAction::Show(settings) => {
            say_raw!("{}", config(&settings)?.show());
        }
        ConfigAction::Check(settings) => {
            let config = config(&settings)?;
            let plugins = plugins(&config, verbosity)?;
            Compactor::with_plugins(&config, &plugins)?;
            say!(
                "the configuration is valid ({} plugin(s) loaded)",
                plugins.len()
            );
        }
        ConfigAction::Path(settings) => {
            let sources = crate::settings::sources(&settings)?;
            say!("built-in: config/condense.toml (compiled in)");
            for (name, path) in [
                ("user", &sources.user),
                ("project", &sources.project),
                ("explicit", &sources.explicit),
            ] {
                match path {
                    Some(path) => say!("{name}: {}", path.display()),
                    None => say!("{name}: (none)"),
                }
            }
        }
    }
    Ok(())
}

fn list_plugins(settings: &crate::SettingArgs, verbosity: Verbosity) -> Result<()> {
    let config = config(settings)?;
    let plugins = plugins(&config, verbosity)?;
    if plugins.is_empty() {
        say!("no plugins configured");
    }
    for plugin in plugins {
        let path = plugin
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(in process)".into());
        say!("{} {}  {path}", plugin.name, plugin.version);
        say!(
            "  protected tools: {}",
            if plugin.protected_tools.is_empty() {
                "none".into()
            } else {
                plugin.protected_tools.join(", ")
            }
        );
        say!(
            "  template: {}",
            if plugin.template.is_some() {
                "yes"
            } else {
                "no"
            }
        );
    }
    Ok(())
}

/// The trim tool in the provider's own tool-list shape (Claude Code's format is Anthropic's,
/// Codex's the Responses API's).
fn tools_schema(format: condense_formats::Format) -> Result<()> {
    use condense_pruner::{TRIM_TOOL, TRIM_TOOL_DESCRIPTION, trim_tool_parameters};
    let tool = condense_formats::tool_definition(
        format,
        TRIM_TOOL,
        TRIM_TOOL_DESCRIPTION,
        trim_tool_parameters(),
    );
    say!(
        "{}",
        serde_json::to_string_pretty(&tool).context("cannot serialise the tool")?
    );
    Ok(())
}

fn template(action: TemplateAction) -> Result<()> {
    match action {
        TemplateAction::List => {
            for (name, _) in BUILTIN {
                let template = Template::builtin(name)?;
                say!("{name:<12} {}", template.sections().join(" | "));
            }
        }
        TemplateAction::Show { name } => say_raw!("{}", Template::builtin(&name)?.source()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::recalled;
    use condense_core::Part;
    use condense_formats::Format;

    /// The pruner stores an output of blocks as condense's parts; recall gives back what the tool
    /// returned, in the wire form, and text alone as text.
    #[test]
    fn an_original_of_blocks_is_recalled_in_wire_form() {
        let image = Part::Image(condense_core::Image {
            source: serde_json::json!({"type": "base64", "media_type": "image/png", "data": "iVBOR"}),
            extra: Default::default(),
        });
        let stored = serde_json::to_vec(&vec![Part::text("a screenshot"), image]).unwrap();
        let anthropic: serde_json::Value =
            serde_json::from_slice(&recalled(&stored, Format::Anthropic).unwrap()).unwrap();
        assert_eq!(
            anthropic,
            serde_json::json!([
                {"type": "text", "text": "a screenshot"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}
            ])
        );
        assert!(
            !String::from_utf8(recalled(&stored, Format::OpenAi).unwrap())
                .unwrap()
                .contains("\"kind\"")
        );

        let texts = serde_json::to_vec(&vec![Part::text("one"), Part::text("two")]).unwrap();
        assert_eq!(recalled(&texts, Format::Anthropic).unwrap(), b"one\ntwo");
        assert_eq!(
            recalled(b"plain output", Format::Anthropic).unwrap(),
            b"plain output"
        );
    }
}
