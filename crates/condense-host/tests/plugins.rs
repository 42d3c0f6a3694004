//! Plugins loaded for real: the tests build the shared libraries themselves (into
//! `target/plugin-tests`), so `cargo test --workspace` needs nothing built beforehand.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_core::testing::{tool_call, tool_result};
use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use condense_core::{Conversation, Message, Part, Role};
use condense_host::plugins::{load, load_all, register};
use condense_host::{
    Compactor, Config, HostError, LoadedPlugin, Origin, PluginError, PluginSpec, Source, Sources,
};
use condense_plugin::Plugin;
use condense_pruner::{FixedClock, MemoryStore};

static BUILD: Mutex<()> = Mutex::new(());

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Builds `package` with `features` and copies the library to a name of its own (a library
/// loaded once stays loaded, so each variant needs its own file).
fn build(package: &str, features: &[&str], name: &str) -> PathBuf {
    let _serial = BUILD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let target = workspace().join("target/plugin-tests");
    let mut command = Command::new(env!("CARGO"));
    command
        .current_dir(workspace())
        .args(["build", "--quiet", "-p", package, "--target-dir"])
        .arg(&target);
    if !features.is_empty() {
        command.args(["--features", &features.join(",")]);
    }
    let status = command.status().expect("cargo runs");
    assert!(status.success(), "building {package} {features:?} failed");
    let built = target.join("debug").join(format!(
        "{DLL_PREFIX}{}{DLL_SUFFIX}",
        package.replace('-', "_")
    ));
    let copy = target.join(format!("{DLL_PREFIX}{name}{DLL_SUFFIX}"));
    let staging = copy.with_extension("tmp");
    std::fs::copy(&built, &staging).unwrap();
    std::fs::rename(&staging, &copy).unwrap();
    copy
}

fn spec(path: &Path, config: &str, required: bool) -> PluginSpec {
    PluginSpec {
        path: path.to_path_buf(),
        required,
        config: config.into(),
        origin: Origin {
            source: Source::BuiltIn,
            line: None,
            column: None,
        },
    }
}

fn config(env: &[(&str, &str)]) -> Config {
    let env = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Config::load(&Sources {
        env,
        ..Sources::default()
    })
    .unwrap()
}

fn call(id: &str, tool: &str) -> Message {
    Message::new(
        Role::Assistant,
        vec![tool_call(id, tool, serde_json::json!({"key": id}))],
    )
}

fn result(id: &str, text: &str) -> Message {
    Message::new(Role::Tool, vec![tool_result(id, text)])
}

fn session() -> Conversation {
    let memory = "remember: the user prefers tabs, the CI runs on Linux only. ".repeat(40);
    let file = "fn main() { println!(\"hello\"); }\n".repeat(80);
    Conversation::new(vec![
        Message::text(Role::User, "set things up"),
        call("m1", "memory_store"),
        result("m1", &memory),
        call("r1", "read_file"),
        result("r1", &file),
        Message::text(Role::User, "next"),
        Message::text(Role::Assistant, "ok"),
        Message::text(Role::User, "and again"),
    ])
}

fn output_of(conversation: &Conversation, id: &str) -> String {
    conversation
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(Part::as_tool_result)
        .find(|r| r.call_id == id)
        .map(|r| r.content.text().into_owned())
        .unwrap()
}

async fn pruned(plugins: &[LoadedPlugin]) -> Conversation {
    let config = config(&[
        ("CONDENSE_PRUNE_PROTECT_TOKENS", "0"),
        ("CONDENSE_PRUNE_MINIMUM_TOKENS", "0"),
    ]);
    let compactor = Compactor::with_plugins(&config, plugins)
        .unwrap()
        .with_store(Box::new(MemoryStore::new()))
        .with_clock(Box::new(FixedClock(0)));
    compactor.compact(session()).await.unwrap().conversation
}

#[tokio::test]
async fn memory_store_outputs_survive_pruning_only_with_the_plugin() {
    let path = build("condense-plugin-memory-store", &[], "memory_store_test");
    let plugin = load(&path, "tools = [\"memory_delete\"]\n").unwrap();
    assert_eq!(plugin.name, "memory-store");
    assert_eq!(
        plugin.protected_tools,
        ["memory_store", "memory_recall", "memory_delete"]
    );

    let original = session();
    let with = pruned(std::slice::from_ref(&plugin)).await;
    assert_eq!(output_of(&with, "m1"), output_of(&original, "m1"));
    assert!(output_of(&with, "r1").starts_with("[condense: the output of read_file was pruned"));

    let without = pruned(&[]).await;
    assert!(
        output_of(&without, "m1").starts_with("[condense: the output of memory_store was pruned")
    );
}

#[tokio::test]
async fn the_team_template_is_the_one_rendered_unless_configuration_sets_one() {
    let path = build("condense-plugin-team-template", &[], "team_template_test");
    let plugin = load(&path, "").unwrap();
    let compactor = Compactor::with_plugins(&config(&[]), std::slice::from_ref(&plugin)).unwrap();
    assert_eq!(compactor.template().name(), "team-template");
    assert_eq!(
        compactor.template().sections(),
        ["Ticket", "Done", "Next", "Files"]
    );

    let transcript = condense_core::testing::transcript("claude-code/d7d349f9").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let small = config(&[
        ("CONDENSE_MODEL_CONTEXT_WINDOW", "32000"),
        ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS", "4096"),
    ]);
    let compactor = Compactor::with_plugins(&small, std::slice::from_ref(&plugin))
        .unwrap()
        .with_store(Box::new(MemoryStore::new()))
        .with_clock(Box::new(FixedClock(0)));
    let compacted = compactor.compact(conversation).await.unwrap().conversation;
    let summary = compacted
        .messages
        .iter()
        .find(|m| m.is_compaction_summary())
        .unwrap()
        .plain_text();
    assert!(
        summary.contains("## Ticket") && summary.contains("## Next"),
        "{summary}"
    );

    let configured = config(&[("CONDENSE_COMPACTION_TEMPLATE", "anchored")]);
    let compactor = Compactor::with_plugins(&configured, &[plugin]).unwrap();
    assert_eq!(
        compactor.template().name(),
        "anchored",
        "configuration wins over plugins"
    );
}

#[derive(Default)]
struct InHouse;

impl Plugin for InHouse {
    fn name(&self) -> &str {
        "in-house"
    }

    fn version(&self) -> &str {
        "2.0.0"
    }

    fn protected_tools(&self) -> Vec<String> {
        vec!["ledger".into()]
    }

    fn template(&self) -> Option<String> {
        Some("## Ledger\n## Open items\n".into())
    }
}

#[tokio::test]
async fn two_plugins_with_templates_need_configuration_to_choose() {
    let path = build(
        "condense-plugin-team-template",
        &[],
        "team_template_conflict",
    );
    let team = load(&path, "").unwrap();
    let in_house = register(&mut InHouse, "").unwrap();
    assert_eq!(in_house.protected_tools, ["ledger"]);
    let error =
        Compactor::with_plugins(&config(&[]), &[team.clone(), in_house.clone()]).unwrap_err();
    assert!(matches!(error, HostError::TemplateConflict { .. }));
    let message = error.to_string();
    assert!(
        message.contains("`team-template`")
            && message.contains(&path.display().to_string())
            && message.contains("`in-house` (in process)"),
        "{message}"
    );

    let chosen = config(&[("CONDENSE_COMPACTION_TEMPLATE_PLUGIN", "in-house")]);
    let compactor = Compactor::with_plugins(&chosen, &[team, in_house]).unwrap();
    assert_eq!(compactor.template().sections(), ["Ledger", "Open items"]);
    assert!(
        compactor
            .prune_settings()
            .rules
            .protected_tools
            .contains("ledger")
    );
}

#[test]
fn the_same_plugin_type_works_in_process() {
    let mut plugin = condense_plugin_memory_store::MemoryStorePlugin::default();
    let loaded = register(&mut plugin, "tools = [\"notes\"]").unwrap();
    assert_eq!(
        loaded.protected_tools,
        ["memory_store", "memory_recall", "notes"]
    );
    assert_eq!(loaded.path, None);
    let error = register(
        &mut condense_plugin_memory_store::MemoryStorePlugin::default(),
        "tools = 3",
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("(in-process plugin): `configure` failed: memory-store:"),
        "{error}"
    );
}

/// A plugin whose name comes from its configuration, as the trait allows: `configure` is called
/// first. A panic in `name` keeps its message.
#[derive(Default)]
struct NamedByConfig {
    name: Option<String>,
}

impl Plugin for NamedByConfig {
    fn configure(&mut self, config_toml: &str) -> Result<(), String> {
        self.name = config_toml
            .strip_prefix("name = ")
            .map(|name| name.trim().trim_matches('"').to_owned());
        Ok(())
    }

    fn name(&self) -> &str {
        self.name.as_deref().expect("configure comes first")
    }

    fn version(&self) -> &str {
        "1.0.0"
    }
}

#[test]
fn an_in_process_plugin_is_configured_before_it_is_asked_its_name() {
    let loaded = register(&mut NamedByConfig::default(), "name = \"ledger\"").unwrap();
    assert_eq!(loaded.name, "ledger");
    let error = register(&mut NamedByConfig::default(), "").unwrap_err();
    assert!(
        matches!(&error, PluginError::Panicked { function: "name", message, .. } if message == "configure comes first"),
        "{error}"
    );
}

/// A name a report or a terminal would show wrongly is refused, shown escaped: empty, a
/// newline (a forged log line), an ANSI escape.
#[test]
fn a_plugin_name_that_cannot_be_shown_safely_is_refused() {
    for (config, reason) in [
        ("name = \"\"", "is empty"),
        ("name = \"   \"", "is empty"),
        ("name = \"ledger\nINFO forged\"", "holds control characters"),
        ("name = \"\u{1b}[31mred\"", "holds control characters"),
    ] {
        let error = register(&mut NamedByConfig::default(), config).unwrap_err();
        let said = error.to_string();
        assert!(
            matches!(&error, PluginError::BadName { .. }) && said.contains(reason),
            "{config}: {said}"
        );
        assert!(!said.contains('\n') && !said.contains('\u{1b}'), "{said:?}");
    }
}

/// Whether an error is the one a defect should cause.
type IsExpected = fn(&PluginError) -> bool;

#[test]
fn every_bad_plugin_is_a_clear_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("libnothing.so");
    let error = load(&missing, "").unwrap_err();
    assert!(matches!(error, PluginError::Missing { .. }));
    assert_eq!(
        error.to_string(),
        format!("{}: no such plugin file", missing.display())
    );

    let text = dir.path().join("libtext.so");
    std::fs::write(&text, "not a library").unwrap();
    let error = load(&text, "").unwrap_err();
    assert!(matches!(error, PluginError::NotALibrary { .. }), "{error}");
    assert!(error.to_string().starts_with(&format!(
        "{}: not a loadable shared library",
        text.display()
    )));

    let cases: [(&str, IsExpected, &str); 5] = [
        (
            "no-symbol",
            |e| matches!(e, PluginError::NoSymbol { .. }),
            "does not export `condense_plugin_v1`",
        ),
        (
            "wrong-abi",
            |e| {
                matches!(
                    e,
                    PluginError::AbiVersion {
                        found: 99,
                        expected: 1,
                        ..
                    }
                )
            },
            "built for plugin ABI version 99; this condense speaks version 1",
        ),
        (
            "small-table",
            |e| matches!(e, PluginError::TableTooSmall { .. }),
            "its plugin table is 16 bytes, smaller than",
        ),
        (
            "panics",
            |e| {
                matches!(
                    e,
                    PluginError::Panicked {
                        function: "protected_tools",
                        ..
                    }
                )
            },
            "`protected_tools` panicked: index out of bounds",
        ),
        (
            "bad-utf8",
            |e| {
                matches!(
                    e,
                    PluginError::NotUtf8 {
                        function: "name",
                        ..
                    }
                )
            },
            "`name` returned text that is not UTF-8",
        ),
    ];
    for (feature, matches, words) in cases {
        let path = build(
            "condense-plugin-broken",
            &[feature],
            &format!("broken_{}", feature.replace('-', "_")),
        );
        let error = load(&path, "").unwrap_err();
        assert!(matches(&error), "{feature}: {error:?}");
        let message = error.to_string();
        assert!(
            message.starts_with(&path.display().to_string()),
            "{feature}: {message}"
        );
        assert!(message.contains(words), "{feature}: {message}");
    }
}

#[test]
fn an_optional_plugin_that_fails_is_a_warning_and_the_host_carries_on() {
    let good = build("condense-plugin-memory-store", &[], "memory_store_optional");
    let bad = build("condense-plugin-broken", &["wrong-abi"], "broken_optional");
    let (loaded, warnings) = load_all(&[spec(&bad, "", false), spec(&good, "", true)]).unwrap();
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0].name, "memory-store");
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("skipping an optional plugin: ")
            && warnings[0].contains("ABI version 99"),
        "{warnings:?}"
    );

    let error = load_all(&[spec(&bad, "", true)]).unwrap_err();
    assert!(matches!(error, PluginError::AbiVersion { .. }));
}
