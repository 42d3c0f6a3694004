#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use condense_host::{Config, Sources};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn error_of(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "condense.toml", text);
    let sources = Sources {
        explicit: Some(path.clone()),
        ..Sources::default()
    };
    Config::load(&sources)
        .unwrap_err()
        .to_string()
        .replace(&path.display().to_string(), "condense.toml")
}

#[test]
fn the_layers_merge_later_wins_and_every_value_says_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let user = write(
        dir.path(),
        "user.toml",
        "[model]\ncontext_window = 128000\n[prune]\nprotected_tools = [\"memory_store\"]\n",
    );
    let project = write(
        dir.path(),
        "project.toml",
        "[model]\ncontext_window = 64000\n[compaction]\ntemplate = \"anchored\"\n[prune]\nprotected_tools = [\"todo_read\", \"skill\"]\n",
    );
    let explicit = write(
        dir.path(),
        "explicit.toml",
        "[summarizer]\nbudget_tokens = 3000\n\n[[plugins]]\npath = \"libteam.so\"\nrequired = false\n[plugins.config]\ntools = [\"a\"]\n",
    );
    let sources = Sources {
        user: Some(user),
        project: Some(project),
        explicit: Some(explicit),
        env: vec![
            ("CONDENSE_PRUNE_PROTECT_TOKENS".into(), "30000".into()),
            ("CONDENSE_LLM_URL".into(), "not a setting".into()),
        ],
        flags: vec![(
            "--max-output-tokens".into(),
            "model.max_output_tokens".into(),
            "8192".into(),
        )],
    };
    let config = Config::load(&sources).unwrap();
    assert_eq!(config.context_window(), 64_000);
    assert_eq!(
        config.protected_tools(),
        vec!["skill", "memory_store", "todo_read"]
    );
    assert_eq!(config.prune_settings().protect_tokens, 30_000);
    assert_eq!(config.plugins[0].config, "tools = [\"a\"]\n");
    let shown = config
        .show()
        .replace(&dir.path().display().to_string(), "<dir>");
    insta::assert_snapshot!(shown);
}

#[test]
fn the_schema_and_the_built_in_file_agree() {
    let config = Config::built_in().unwrap();
    let shown = config.show();
    assert!(!shown.contains("  # \n"));
    // Every key of the schema has its value from the built-in file.
    let lines: Vec<&str> = shown.lines().filter(|l| l.contains(" = ")).collect();
    assert_eq!(lines.len(), 39, "{shown}");
    assert!(
        lines.iter().all(|line| line.contains("built-in")),
        "{shown}"
    );
    assert_eq!(config.protected_tools(), vec!["skill"]);
    assert_eq!(config.context_window(), 200_000);
}

#[test]
fn an_unknown_key_names_the_place_and_the_nearest_key() {
    assert_eq!(
        error_of("[prune]\nskip_user_turns = 1\nprotect_token = 5\n"),
        "condense.toml:3:1: unknown key `prune.protect_token` (did you mean `protect_tokens`?)"
    );
    assert_eq!(
        error_of("[prunes]\n"),
        "condense.toml:1:2: unknown key `prunes` (did you mean `prune`?)"
    );
}

#[test]
fn a_wrong_type_names_the_place() {
    assert_eq!(
        error_of("[model]\ncontext_window = \"big\"\n"),
        "condense.toml:2:18: `model.context_window` must be a non-negative integer, not a string"
    );
    assert_eq!(
        error_of("[model]\ncontext_window = -5\n"),
        "condense.toml:2:18: `model.context_window` must be a non-negative integer, not a negative integer"
    );
}

#[test]
fn a_bad_value_names_the_place() {
    assert_eq!(
        error_of("[compaction]\n\ntail_ratio = 2.5\n"),
        "condense.toml:3:14: `compaction.tail_ratio`: must be more than 0 and at most 1, not 2.5"
    );
    assert_eq!(
        error_of("[model]\nencoding = \"p50k\"\n"),
        "condense.toml:2:12: `model.encoding`: unknown encoding `p50k` (expected o200k_base or cl100k_base)"
    );
    assert!(
        error_of("[compaction]\ntemplate = \"fancy\"\n")
            .starts_with("condense.toml:2:12: `compaction.template`: unknown template `fancy`")
    );
    assert!(
        error_of("[prune]\nplaceholder = \"{tool} {size}\"\n")
            .contains("unknown variable `{size}`")
    );
}

#[test]
fn a_syntax_error_names_the_place() {
    assert_eq!(
        error_of("[model]\ncontext_window = = 3\n")
            .split(':')
            .take(3)
            .collect::<Vec<_>>(),
        ["condense.toml", "2", "18"]
    );
}

#[test]
fn a_bad_environment_variable_is_named() {
    let sources = Sources {
        env: vec![("CONDENSE_MODEL_CONTEXT_WINDOW".into(), "lots".into())],
        ..Sources::default()
    };
    assert_eq!(
        Config::load(&sources).unwrap_err().to_string(),
        "CONDENSE_MODEL_CONTEXT_WINDOW: `model.context_window` must be a non-negative integer, not `lots`"
    );
    let sources = Sources {
        env: vec![("CONDENSE_PRUNE_PROTECT_TOKEN".into(), "1".into())],
        ..Sources::default()
    };
    assert_eq!(
        Config::load(&sources).unwrap_err().to_string(),
        "CONDENSE_PRUNE_PROTECT_TOKEN: unknown key `prune.protect_token` (did you mean `protect_tokens`?)"
    );
}

#[test]
fn the_project_file_is_found_upward() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        ".condense.toml",
        "[model]\ncontext_window = 1000\n",
    );
    let nested = dir.path().join("a/b");
    std::fs::create_dir_all(&nested).unwrap();
    let sources = Sources::discover(&nested, None).unwrap();
    assert_eq!(sources.project, Some(dir.path().join(".condense.toml")));
}
