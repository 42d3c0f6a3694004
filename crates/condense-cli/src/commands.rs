//! What each subcommand does.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use condense_core::{Conversation, Part};
use condense_host::{Compaction, CompactionOutcome, Compactor};
use condense_pruner::{DirStore, MemoryStore, Reason, Store};
use condense_template::{BUILTIN, Template};
use condense_tokenizer::{Tiktoken, TokenCounter};
use serde::Serialize;

use crate::io::{Destination, label, read_session, write_atomic};
use crate::settings::{config, plugins};
use crate::spinner::Spinner;
use crate::{
    Command, ConfigAction, CountArgs, InspectArgs, PluginsAction, RecallArgs, RunArgs,
    TemplateAction, Verbosity, human,
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
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn compact(args: RunArgs, verbosity: Verbosity, summarize: bool) -> Result<()> {
    let destination = destination(&args)?;
    let config = config(&args.settings)?;
    let plugins = plugins(&config, verbosity)?;
    let (format, conversation) = read_session(&args.input, args.format)?;
    let store: Box<dyn Store> = if args.dry_run {
        Box::new(MemoryStore::new())
    } else {
        Box::new(DirStore::new(config.store_dir()))
    };
    let compactor = Compactor::with_plugins(&config, &plugins)?.with_store(store);

    let remote = config.summarizer_kind() != "extractive";
    let result = {
        let _spinner = Spinner::start(
            summarize && remote && verbosity != Verbosity::Quiet,
            &format!("summarizing with {}", config.summarizer_kind()),
        );
        let runtime = runtime()?;
        if summarize {
            runtime.block_on(compactor.compact(conversation))
        } else {
            runtime.block_on(compactor.prune(conversation))
        }
    }
    .with_context(|| label(&args.input))?;

    if verbosity != Verbosity::Quiet {
        eprint!(
            "{}",
            human::report(
                &label(&args.input),
                format,
                &config,
                &result.report,
                verbosity
            )
        );
    }
    if let Some(path) = &args.report {
        let json =
            serde_json::to_vec_pretty(&result.report).context("cannot serialise the report")?;
        if !args.dry_run {
            write_atomic(path, &json)?;
        }
    }
    if args.dry_run {
        return Ok(());
    }
    let bytes = condense_formats::write(format, &result.conversation)
        .with_context(|| label(&args.input))?;
    destination.write(&bytes)
}

fn destination(args: &RunArgs) -> Result<Destination> {
    let input = args.input.as_ref().filter(|path| path.as_os_str() != "-");
    if args.in_place {
        let Some(input) = input else {
            bail!("--in-place needs a FILE, not stdin")
        };
        return Ok(Destination::InPlace(input.clone()));
    }
    match (&args.output, input) {
        (Some(output), Some(input)) if same_file(output, input) => {
            bail!(
                "{}: refusing to overwrite the input; use --in-place (it keeps a backup)",
                output.display()
            )
        }
        (Some(output), _) => Ok(Destination::File(output.clone())),
        (None, _) => Ok(Destination::Stdout),
    }
}

fn same_file(a: &PathBuf, b: &PathBuf) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[derive(Serialize)]
struct Counts {
    total: usize,
    messages: usize,
    by_role: BTreeMap<String, usize>,
    /// Tokens of each tool's calls and outputs.
    by_tool: BTreeMap<String, usize>,
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
    }
}

fn count(args: CountArgs) -> Result<()> {
    let config = config(&args.settings)?;
    let (_, conversation) = read_session(&args.input, args.format)?;
    let counter = Tiktoken::new(config.encoding());
    let counts = counts(&conversation, &counter);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&counts).context("cannot serialise the counts")?
        );
        return Ok(());
    }
    println!(
        "{} tokens in {} messages ({})",
        human::thousands(counts.total),
        counts.messages,
        config.encoding()
    );
    println!("by role:");
    for (role, tokens) in &counts.by_role {
        println!("  {role:<10} {:>10}", human::thousands(*tokens));
    }
    if !counts.by_tool.is_empty() {
        println!("by tool (calls and outputs):");
        let mut tools: Vec<(&String, &usize)> = counts.by_tool.iter().collect();
        tools.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (tool, tokens) in tools {
            println!("  {tool:<24} {:>10}", human::thousands(*tokens));
        }
    }
    Ok(())
}

fn inspect(args: InspectArgs, verbosity: Verbosity) -> Result<()> {
    let config = config(&args.settings)?;
    let plugins = plugins(&config, verbosity)?;
    let input = Some(args.input.clone());
    let (_, conversation) = read_session(&input, args.format)?;
    // What compact would do, worked out on a copy with nothing stored and no model asked.
    let mut preview = config.clone();
    if config.summarizer_kind() != "extractive" {
        preview = config_with_extractive(&args)?;
    }
    let compactor =
        Compactor::with_plugins(&preview, &plugins)?.with_store(Box::new(MemoryStore::new()));
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
    println!(
        "{:>5}  {:<9} {:<20} {:>8}  what compact would do",
        "#", "role", "tool", "tokens"
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
        println!(
            "{index:>5}  {:<9} {tool:<20} {:>8}  {action}",
            message.role.as_str(),
            human::thousands(tokens[index])
        );
    }
    println!();
    println!(
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
    let config = config(&args.settings)?;
    let store = DirStore::new(config.store_dir());
    let bytes = store
        .get(&args.handle)
        .with_context(|| format!("store {}", store.root().display()))?;
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(&bytes)
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}

fn config_command(action: ConfigAction, verbosity: Verbosity) -> Result<()> {
    match action {
        ConfigAction::Show(settings) => {
            print!("{}", config(&settings)?.show());
        }
        ConfigAction::Check(settings) => {
            let config = config(&settings)?;
            let plugins = plugins(&config, verbosity)?;
            Compactor::with_plugins(&config, &plugins)?;
            println!(
                "the configuration is valid ({} plugin(s) loaded)",
                plugins.len()
            );
        }
        ConfigAction::Path(settings) => {
            let sources = crate::settings::sources(&settings)?;
            println!("built-in: config/condense.toml (compiled in)");
            let show = |name: &str, path: &Option<PathBuf>| match path {
                Some(path) => println!("{name}: {}", path.display()),
                None => println!("{name}: (none)"),
            };
            show("user", &sources.user);
            show("project", &sources.project);
            show("explicit", &sources.explicit);
        }
    }
    Ok(())
}

fn list_plugins(settings: &crate::SettingArgs, verbosity: Verbosity) -> Result<()> {
    let config = config(settings)?;
    let plugins = plugins(&config, verbosity)?;
    if plugins.is_empty() {
        println!("no plugins configured");
    }
    for plugin in plugins {
        let path = plugin
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(in process)".into());
        println!("{} {}  {path}", plugin.name, plugin.version);
        println!(
            "  protected tools: {}",
            if plugin.protected_tools.is_empty() {
                "none".into()
            } else {
                plugin.protected_tools.join(", ")
            }
        );
        println!(
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

fn template(action: TemplateAction) -> Result<()> {
    match action {
        TemplateAction::List => {
            for (name, _) in BUILTIN {
                let template = Template::builtin(name)?;
                println!("{name:<12} {}", template.sections().join(" | "));
            }
        }
        TemplateAction::Show { name } => print!("{}", Template::builtin(&name)?.source()),
    }
    Ok(())
}
