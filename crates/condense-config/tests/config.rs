#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use condense_compact::DEFAULT_CONTINUATION;
use condense_compact::TailSettings;
use condense_config::{Config, Sources, SummarizerKind, TemplateChoice};
use condense_pruner::PruneSettings;
use condense_summarize::{ExtractiveSettings, RemoteSettings};

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
    // Every key of the schema has its value from the built-in file (the model table follows
    // the sections).
    let sections = &shown[..shown.find("[models.").unwrap()];
    let lines: Vec<&str> = sections.lines().filter(|l| l.contains(" = ")).collect();
    assert_eq!(lines.len(), 63, "{shown}");
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
    // Past what TOML can hold: refused, not clamped to i64::MAX as it once was.
    let sources = Sources {
        flags: vec![(
            "--context-window".into(),
            "model.context_window".into(),
            "18446744073709551615".into(),
        )],
        ..Sources::default()
    };
    let error = Config::load(&sources).unwrap_err();
    assert_eq!(
        error.to_string(),
        "--context-window: `model.context_window`: 18446744073709551615 is too large (at most 9223372036854775807)"
    );
    // The place alone, for a caller that tells its flags' mistakes from a file's.
    assert_eq!(error.at(), Some("--context-window"));
    let sources = Sources {
        env: vec![("CONDENSE_PRUNE_PROTECT_TOKEN".into(), "1".into())],
        ..Sources::default()
    };
    assert_eq!(
        Config::load(&sources).unwrap_err().at(),
        Some("CONDENSE_PRUNE_PROTECT_TOKEN")
    );
}

#[test]
fn a_reply_of_no_tokens_is_refused() {
    assert_eq!(
        error_of("[model]\nmax_output_tokens = 0\n"),
        "condense.toml:2:21: `model.max_output_tokens`: must be more than 0"
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

/// `config/condense.toml` is where a default is written. The phase crates, usable without the
/// host, keep `Default` impls of their own; this proves them equal to the file, key by key, so the
/// two can never drift.
#[test]
fn the_phase_crates_defaults_are_the_built_in_file_key_by_key() {
    let config = Config::built_in().unwrap();
    let settings = config.settings();

    let (file, rust) = (config.prune_settings(), PruneSettings::default());
    assert_eq!(
        file.protected_tools, rust.protected_tools,
        "prune.protected_tools"
    );
    assert_eq!(
        file.skip_user_turns, rust.skip_user_turns,
        "prune.skip_user_turns"
    );
    assert_eq!(
        file.skip_tool_calls, rust.skip_tool_calls,
        "prune.skip_tool_calls"
    );
    assert_eq!(
        file.protect_tokens, rust.protect_tokens,
        "prune.protect_tokens"
    );
    assert_eq!(
        file.minimum_tokens, rust.minimum_tokens,
        "prune.minimum_tokens"
    );
    assert_eq!(
        file.adaptive_thresholds, rust.adaptive_thresholds,
        "prune.adaptive_thresholds"
    );
    assert_eq!(
        file.turn_budget_chars, rust.turn_budget_chars,
        "prune.turn_budget_chars"
    );
    assert_eq!(
        file.preview_bytes, rust.preview_bytes,
        "prune.preview_bytes"
    );
    assert_eq!(
        file.duplicate_min_chars, rust.duplicate_min_chars,
        "prune.duplicate_min_chars"
    );
    assert_eq!(
        file.trim_allow_older, rust.trim_allow_older,
        "trim.allow_older"
    );
    assert_eq!(
        file.supersede_reads, rust.supersede_reads,
        "prune.supersede_reads"
    );
    assert_eq!(
        file.superseded_note, rust.superseded_note,
        "prune.superseded_note"
    );
    assert_eq!(file.placeholder, rust.placeholder, "prune.placeholder");
    assert_eq!(file.preview_note, rust.preview_note, "prune.preview_note");
    assert_eq!(
        file.duplicate_note, rust.duplicate_note,
        "prune.duplicate_note"
    );
    let (micro, rust_micro) = (&file.microcompact, &rust.microcompact);
    assert_eq!(micro.enabled, rust_micro.enabled, "microcompact.enabled");
    assert_eq!(
        micro.idle_minutes, rust_micro.idle_minutes,
        "microcompact.idle_minutes"
    );
    assert_eq!(
        micro.keep_recent, rust_micro.keep_recent,
        "microcompact.keep_recent"
    );
    assert_eq!(micro.tools, rust_micro.tools, "microcompact.tools");
    assert_eq!(micro.note, rust_micro.note, "microcompact.note");

    let (file, rust) = (config.tail_settings(), TailSettings::default());
    assert_eq!(
        file.context_window, rust.context_window,
        "model.context_window"
    );
    assert_eq!(
        file.max_output_tokens, rust.max_output_tokens,
        "model.max_output_tokens"
    );
    assert_eq!(file.reserve_cap, rust.reserve_cap, "compaction.reserve_cap");
    assert_eq!(file.tail_ratio, rust.tail_ratio, "compaction.tail_ratio");
    assert_eq!(
        file.min_tail_tokens, rust.min_tail_tokens,
        "compaction.min_tail_tokens"
    );
    assert_eq!(
        file.max_tail_tokens, rust.max_tail_tokens,
        "compaction.max_tail_tokens"
    );
    assert_eq!(
        file.min_tail_turns, rust.min_tail_turns,
        "compaction.min_tail_turns"
    );
    assert_eq!(
        file.cache_rewrite_cost, rust.cache_rewrite_cost,
        "compaction.cache_rewrite_cost"
    );
    assert_eq!(file.output_cost, rust.output_cost, "compaction.output_cost");

    let summarizer = &settings.summarizer;
    let (file, rust) = (
        config.remote_settings(),
        RemoteSettings::new(&summarizer.base_url, &summarizer.model),
    );
    assert_eq!(file.timeout, rust.timeout, "summarizer.timeout_secs");
    assert_eq!(
        file.max_attempts, rust.max_attempts,
        "summarizer.max_attempts"
    );
    assert_eq!(
        file.tool_output_chars, rust.tool_output_chars,
        "summarizer.tool_output_chars"
    );
    assert_eq!(
        file.context_window, rust.context_window,
        "summarizer.context_window"
    );
    assert_eq!(
        file.max_summary_tokens, rust.max_summary_tokens,
        "summarizer.max_summary_tokens"
    );

    let (file, rust) = (config.extractive_settings(), ExtractiveSettings::default());
    // The file bounds the summary's message, the library the summary's text: the same figure,
    // and the host gives the summarizer that less what wraps the summary.
    assert_eq!(
        config.settings().summarizer.budget_tokens,
        rust.budget_tokens,
        "summarizer.budget_tokens"
    );
    assert!(
        file.budget_tokens < rust.budget_tokens && file.budget_tokens > rust.budget_tokens - 100
    );
    assert_eq!(file.quote_chars, rust.quote_chars, "summarizer.quote_chars");

    assert_eq!(
        config.continuation().as_deref(),
        Some(DEFAULT_CONTINUATION),
        "compaction.continuation"
    );
    assert_eq!(settings.summarizer.kind, SummarizerKind::Extractive);
    assert_eq!(settings.compaction.template, TemplateChoice::Structured);
}

/// Summaries are forked inside the agent's request only where the agent's cache can be shared:
/// the request's own upstream (`kind = "upstream"`), `fork` on, and the agent's own model.
#[test]
fn summaries_fork_only_on_the_upstream_with_the_agents_own_model() {
    let forks = |env: &[(&str, &str)]| {
        let sources = Sources {
            env: env
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
            ..Sources::default()
        };
        Config::load(&sources).unwrap().forks_summaries()
    };
    assert!(!forks(&[]), "the offline default never forks");
    assert!(forks(&[("CONDENSE_SUMMARIZER_KIND", "upstream")]));
    assert!(!forks(&[
        ("CONDENSE_SUMMARIZER_KIND", "upstream"),
        ("CONDENSE_SUMMARIZER_FORK", "false")
    ]));
    assert!(!forks(&[
        ("CONDENSE_SUMMARIZER_KIND", "upstream"),
        ("CONDENSE_SUMMARIZER_COMPACTION_MODEL", "cheap-model")
    ]));
    assert!(!forks(&[("CONDENSE_SUMMARIZER_KIND", "openai")]));
}

/// `[models]` sizes each model: a layer's rule is tried before the built-in table (a team
/// overrides or adds a model), the first pattern that matches wins, an unknown model takes
/// `model.context_window`, and `config show` prints every rule as it resolves.
#[test]
fn models_have_their_own_windows() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "condense.toml",
        "[model]\ncontext_window = 32000\nmax_output_tokens = 4096\n\n[models.\"claude-haiku-4*\"]\ncontext_window = 100000\n\n[models.\"gateway/llama-*\"]\ncontext_window = 131072\nmax_output_tokens = 8192\n",
    );
    let config = Config::load(&Sources {
        project: Some(path.clone()),
        ..Sources::default()
    })
    .unwrap();
    assert_eq!(
        config.window_for("claude-haiku-4-5-20251001"),
        (100_000, 4_096)
    );
    assert_eq!(config.window_for("gateway/llama-3.3-70b"), (131_072, 8_192));
    // The built-in table, behind the layer's rules.
    assert_eq!(config.window_for("claude-sonnet-4-5"), (200_000, 64_000));
    assert_eq!(config.window_for("gpt-4o-mini"), (128_000, 16_384));
    assert_eq!(config.window_for("someone-elses-model"), (32_000, 4_096));
    let shown = config
        .show()
        .replace(&path.display().to_string(), "condense.toml");
    let haiku = shown
        .find("[models.\"claude-haiku-4*\"]  # project condense.toml")
        .unwrap();
    let built_in = shown
        .find("[models.\"claude-haiku-4*\"]  # built-in")
        .unwrap();
    assert!(haiku < built_in, "{shown}");
    assert!(shown.contains("[models.\"gateway/llama-*\"]  # project condense.toml\ncontext_window = 131072\nmax_output_tokens = 8192\n"), "{shown}");
}

#[test]
fn a_bad_models_entry_says_where() {
    assert_eq!(
        error_of("[models.\"x*\"]\nmax_output_tokens = 10\n"),
        "condense.toml:1:9: `models.\"x*\"`: needs a `context_window`"
    );
    assert_eq!(
        error_of("[models.\"x*\"]\ncontext_window = 0\n"),
        "condense.toml:2:1: `models.\"x*\".context_window`: must be a whole number of tokens, more than 0"
    );
    assert_eq!(
        error_of("[models.\"x*\"]\ncontext_window = 1000\nmax_output_tokens = 1000\n"),
        "condense.toml:1:9: `models.\"x*\"`: max_output_tokens must be less than its context_window (1000)"
    );
    assert!(error_of("[models.\"x*\"]\ncontext_windw = 1000\n").contains("context_window"));
}

/// Zeros that would turn a feature into nothing are refused where they are written, and so is
/// a native_compaction mode that is none of the three.
#[test]
fn zeros_that_disable_a_feature_by_typo_are_refused() {
    for (text, expected) in [
        (
            "[summarizer]\nmax_summary_tokens = 0\n",
            "`summarizer.max_summary_tokens`: must be more than 0",
        ),
        (
            "[microcompact]\nkeep_recent = 0\n",
            "`microcompact.keep_recent`: must be at least 1",
        ),
        (
            "[serve]\nbody_limit_bytes = 0\n",
            "`serve.body_limit_bytes`: must be more than 0",
        ),
        (
            "[serve]\nstate_timeout_ms = 0\n",
            "`serve.state_timeout_ms`: must be more than 0",
        ),
        (
            "[serve]\nnative_compaction = \"sometimes\"\n",
            "`serve.native_compaction`: `sometimes` is none of auto, pass, emulate",
        ),
    ] {
        let error = error_of(text);
        assert!(error.contains(expected), "{text}: {error}");
        assert!(error.starts_with("condense.toml:2:"), "{text}: {error}");
    }
}

/// The proxy's address, upstreams and state load as types (an address, checked origins, a kind
/// of store), each refused where it is written when it is not one.
#[test]
fn the_proxys_address_upstreams_and_state_load_as_types() {
    assert_eq!(
        error_of("[serve]\nlisten = \"localhost\"\n"),
        "condense.toml:2:10: `serve.listen`: `localhost` is not an IP address and port (e.g. 127.0.0.1:8787)"
    );
    assert_eq!(
        error_of("[serve]\nanthropic_upstream = \"https://gw.example/v1?key=1\"\n"),
        "condense.toml:2:22: `serve.anthropic_upstream`: `https://gw.example/v1?key=1` has a query or fragment: give the origin (and a path prefix) only"
    );
    assert_eq!(
        error_of("[serve]\nstate = \" \"\n"),
        "condense.toml:2:9: `serve.state`: must name a directory or a redis:// URL (or be \"\" for the user's state directory)"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "condense.toml",
        "[serve]\nlisten = \"0.0.0.0:9000\"\nstate = \"redis://127.0.0.1:6379/2\"\n",
    );
    let config = Config::load(&Sources {
        explicit: Some(path),
        ..Sources::default()
    })
    .unwrap();
    let serve = &config.settings().serve;
    assert_eq!(serve.listen, "0.0.0.0:9000".parse().unwrap());
    assert_eq!(
        serve.state,
        condense_config::StateLocation::Redis("redis://127.0.0.1:6379/2".into())
    );
    assert_eq!(serve.openai_upstream.as_str(), "https://api.openai.com");
    assert_eq!(
        Config::load(&Sources::default())
            .unwrap()
            .settings()
            .serve
            .state,
        condense_config::StateLocation::UserDirectory
    );
}
