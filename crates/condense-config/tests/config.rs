#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

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
    assert_eq!(config.prune_settings().rules.protect_tokens, 30_000);
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
    assert_eq!(lines.len(), 70, "{shown}");
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
    assert_eq!(
        error_of("[compaction]\ntemplate = \"fancy\"\n"),
        "condense.toml:2:12: `compaction.template`: unknown template `fancy` (one of structured, anchored, detailed)"
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

/// A window no larger than the reply's reserve (an 8K model with the built-in 32,000-token
/// reply) says why and what to give.
#[test]
fn a_window_the_reply_fills_says_what_to_give() {
    assert_eq!(
        error_of("[model]\ncontext_window = 8000\n"),
        "condense.toml:2:18: `model.context_window`: 8000 leaves no room: it must be larger than \
         the 20000 tokens reserved for the reply (model.max_output_tokens = 32000 from built-in, \
         at most compaction.reserve_cap = 20000); give the most the model may write in a reply \
         (`--max-output-tokens`, or `model.max_output_tokens`)"
    );
    assert!(
        Config::load(&Sources {
            flags: vec![
                ("test".into(), "model.context_window".into(), "8000".into()),
                (
                    "test".into(),
                    "model.max_output_tokens".into(),
                    "1000".into()
                ),
            ],
            ..Sources::default()
        })
        .is_ok()
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

/// `config/condense.toml` is where a default is written, and the phase crates read their
/// defaults from it too ([`PruneSettings::built_in`] and the like): with no layer over it, the
/// configuration gives each phase exactly that.
#[test]
fn the_phase_crates_built_in_settings_are_the_configurations_own() {
    let config = Config::built_in().unwrap();
    let settings = config.settings();
    assert_eq!(config.prune_settings(), PruneSettings::built_in().unwrap());
    assert_eq!(
        config.tail_settings(),
        TailSettings::built_in(
            settings.model.context_window,
            settings.model.max_output_tokens
        )
        .unwrap()
    );
    let remote = RemoteSettings::new(&settings.remote.base_url, &settings.remote.model).unwrap();
    assert_eq!(
        format!("{:?}", config.remote_settings()),
        format!("{remote:?}")
    );
    // The file bounds the summary's message, the library the summary's text: the host gives
    // the summarizer the setting less what wraps the summary.
    let extractive = ExtractiveSettings::built_in().unwrap();
    assert_eq!(settings.extractive.budget_tokens, extractive.budget_tokens);
    let own = config.extractive_settings().budget_tokens;
    assert!(own < extractive.budget_tokens && own > extractive.budget_tokens - 100);
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
    assert_eq!(
        error_of("[models.\"x*\"]\ncontext_window = 1000\ncache_rewrite_cost = -1.0\n"),
        "condense.toml:3:1: `models.\"x*\".cache_rewrite_cost`: must be a number of cache reads, 0 or more"
    );
    assert!(
        error_of("[models.\"x*\"]\ncontext_window = 1000\noutput_cots = 1\n")
            .contains("output_cost")
    );
}

/// A model's prices (`[models]`: OpenAI's models carry their own, Anthropic's are the
/// `[compaction]` defaults) weigh its early compactions, unless the team's own configuration
/// sets the price: then that value holds for every model, in every layer's rules.
#[test]
fn a_models_prices_stand_unless_the_team_sets_its_own() {
    let prices = |config: &Config, model: &str| config.model_windows().find(model).unwrap().prices;
    let built_in = Config::built_in().unwrap();
    let gpt = prices(&built_in, "gpt-4.1-2025-04-14");
    assert_eq!(
        (gpt.cache_rewrite_cost, gpt.output_cost),
        (Some(3.0), Some(16.0))
    );
    let claude = prices(&built_in, "claude-sonnet-4-5");
    assert_eq!(
        (claude.cache_rewrite_cost, claude.output_cost),
        (None, None)
    );
    assert_eq!(
        built_in.team_prices(),
        condense_config::CachePrices::default()
    );

    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "condense.toml",
        "[compaction]\ncache_rewrite_cost = 0\n\n[models.\"gateway/*\"]\ncontext_window = 100000\ncache_rewrite_cost = 2.0\noutput_cost = 9.0\n",
    );
    let config = Config::load(&Sources {
        project: Some(path),
        ..Sources::default()
    })
    .unwrap();
    assert_eq!(config.team_prices().cache_rewrite_cost, Some(0.0));
    assert_eq!(config.team_prices().output_cost, None);
    let gpt = prices(&config, "gpt-4.1");
    assert_eq!(
        (gpt.cache_rewrite_cost, gpt.output_cost),
        (None, Some(16.0))
    );
    let gateway = prices(&config, "gateway/llama");
    assert_eq!(
        (gateway.cache_rewrite_cost, gateway.output_cost),
        (None, Some(9.0))
    );
    assert!(config.show().contains("[models.\"gpt-4.1*\"]  # built-in\ncontext_window = 1047576\nmax_output_tokens = 32768\noutput_cost = 16.0\n"));
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
            "`serve.native_compaction`: unknown mode `sometimes` (one of auto, pass, emulate)",
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
