//! The official Python SDKs (`openai`, `anthropic`) as the proxy's clients: `.ci/run` installs
//! them in a virtualenv with `scripts/python-sdks.sh` and sets `CONDENSE_PYTHON`; elsewhere the
//! test says it was skipped. The upstream is the scripted one, which records every body.
#![allow(clippy::print_stderr, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use condense_host::{Compactor, Config, Sources};
use condense_pruner::{FixedClock, MemoryStore};
use condense_serve::testing::{Frozen, settings_for, spawn, upstream};
use condense_serve::{DirSessionStore, Proxy};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_get_what_the_upstream_sent() {
    let Some(python) = condense_core::testing::required_url(
        "the_official_sdks_get_what_the_upstream_sent",
        "CONDENSE_PYTHON",
        "CONDENSE_REQUIRE_PYTHON_SDKS",
    ) else {
        return;
    };
    let (upstream, received) = upstream().await;
    let config = Config::load(&Sources {
        // Thresholds the replayed session crosses early, so decisions have later requests to
        // stay frozen through.
        env: vec![
            ("CONDENSE_PRUNE_MINIMUM_TOKENS".into(), "2000".into()),
            ("CONDENSE_PRUNE_PROTECT_TOKENS".into(), "5000".into()),
            ("CONDENSE_PRUNE_WALK_WHEN".into(), "always".into()),
            // Pruning is what is checked: no summary early, which would take the head away.
            ("CONDENSE_COMPACTION_CACHE_REWRITE_COST".into(), "0".into()),
        ],
        ..Sources::default()
    })
    .unwrap();
    let compactor = Compactor::from_config(&config)
        .unwrap()
        .with_store(Box::new(MemoryStore::new()))
        .with_clock(Box::new(FixedClock(1_763_700_000_000)));
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings_for(&format!("http://{upstream}"));
    settings.body_limit_bytes = 2_000_000;
    let proxy = Arc::new(
        Proxy::new(
            settings,
            compactor,
            Arc::new(DirSessionStore::new(dir.path())),
        )
        .unwrap(),
    );
    let url = spawn(proxy.clone()).await;

    let transcript =
        condense_core::testing::transcripts_dir().join("anthropic/claude-code-5f8cbb78.json");
    let chat: Value = serde_json::from_slice(
        &condense_core::testing::transcript("openai/openhands-ponylang__ponyc-4588")
            .unwrap()
            .bytes,
    )
    .unwrap();
    let responses_body = condense_core::testing::responses_from_chat(&chat);
    let responses_session = dir.path().join("responses.json");
    std::fs::write(&responses_session, responses_body.to_string()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/sdks.py");
    // The SDKs block; the proxy runs on this runtime's other threads meanwhile.
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&python)
            .arg(script)
            .arg(&url)
            .arg(&transcript)
            .arg(&responses_session)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();

    assert_eq!(out["openai"]["content"], "ok");
    assert_eq!(out["openai"]["usage"], 903);
    let chunks = out["openai_stream"].as_array().unwrap();
    assert_eq!(chunks.len(), 4, "{chunks:?}");
    assert_eq!(chunks[1]["choices"][0]["delta"]["content"], "ok");
    assert_eq!(chunks[3]["usage"]["total_tokens"], 701);
    // Unasked, the usage the proxy asked for is not in what the SDK reads.
    let chunks = out["openai_stream_unasked"].as_array().unwrap();
    assert_eq!(chunks.len(), 3, "{chunks:?}");
    assert_eq!(chunks[1]["choices"][0]["delta"]["content"], "ok");
    assert!(
        chunks.iter().all(|chunk| chunk.get("usage").is_none()),
        "{chunks:?}"
    );
    // Both Chat Completions streams went up asking for it: the first as the SDK asked, the
    // second as the proxy did.
    let asked = received
        .lock()
        .unwrap()
        .iter()
        .filter(|(path, _, body)| {
            path.ends_with("/chat/completions")
                && serde_json::from_slice::<Value>(body).is_ok_and(|body| {
                    body["stream"] == true
                        && body["stream_options"] == serde_json::json!({"include_usage": true})
                })
        })
        .count();
    assert_eq!(
        asked, 2,
        "the proxy asked the upstream for the stream's usage"
    );
    assert_eq!(out["anthropic"]["text"], "ok");
    assert_eq!(out["anthropic"]["cache_read"], 800);
    let events: Vec<&str> = out["anthropic_stream"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        events.contains(&"message_start") && events.contains(&"message_stop"),
        "{events:?}"
    );
    assert_eq!(out["anthropic_stream"]["text"], "ok");
    assert_eq!(out["anthropic_stream"]["output"], 5);

    assert_eq!(out["responses"]["text"], "ok");
    assert_eq!(out["responses"]["usage"], 884);
    let kinds: Vec<&str> = out["responses_stream"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(kinds.first(), Some(&"response.created"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"response.completed"), "{kinds:?}");
    assert!(kinds.contains(&"response.output_text.delta"), "{kinds:?}");
    assert_eq!(out["responses_stream"]["text"], "ok");
    assert_eq!(out["responses_stream"]["usage"], 702);

    assert_eq!(out["too_large"]["status"], 413);
    assert_eq!(out["too_large"]["type"], "request_too_large");
    assert!(
        out["too_large"]["message"]
            .as_str()
            .unwrap()
            .contains("serve.body_limit_bytes")
    );
    assert_eq!(out["openai_too_large"]["status"], 413);

    // What the SDK sent for the replayed session arrived compacted, valid and frozen.
    let replayed = out["replayed"].as_u64().unwrap();
    assert!(replayed >= 5, "{replayed}");
    let mut frozen = Frozen::default();
    let bodies: Vec<Value> = received
        .lock()
        .unwrap()
        .iter()
        .filter(|(path, headers, _)| {
            path == "/v1/messages" && headers.contains_key("anthropic-version")
        })
        .filter_map(|(_, _, body)| serde_json::from_slice::<Value>(body).ok())
        // The replay's requests are the ones with the session's system prompt.
        .filter(|body| body["system"] == "You are a coding agent.")
        .collect();
    assert_eq!(bodies.len() as u64, replayed);
    for (request, body) in bodies.iter().enumerate() {
        frozen.check_body(request, condense_formats::Format::Anthropic, body);
    }
    eprintln!(
        "{replayed} SDK requests, {} outputs replaced",
        frozen.replaced.len()
    );
    assert!(frozen.replaced.len() >= 18, "{}", frozen.replaced.len());

    // The Responses session the SDK replayed: one user turn of 22K tokens is under half this
    // 200K window, so the whole run is inside the skip boundary and nothing is due (the proxy
    // test compacts the same session at 16K). Each body reaches the upstream valid, with the
    // items the SDK sent, in order, and the SDK's own settings.
    let items = responses_body["input"].as_array().unwrap();
    let ends: Vec<usize> = (1..items.len())
        .filter(|&end| items[end]["type"] == "function_call")
        .step_by(4)
        .chain([items.len()])
        .collect();
    assert_eq!(out["responses_replayed"].as_u64(), Some(ends.len() as u64));
    let bodies: Vec<Value> = received
        .lock()
        .unwrap()
        .iter()
        .filter(|(path, _, _)| path == "/v1/responses")
        .filter_map(|(_, _, body)| serde_json::from_slice::<Value>(body).ok())
        .filter(|body| body["model"] == "gpt-5-codex")
        .collect();
    assert_eq!(bodies.len(), ends.len());
    let mut frozen = Frozen::default();
    for (request, (body, end)) in bodies.iter().zip(&ends).enumerate() {
        assert_eq!(body["store"], false);
        assert_eq!(body["instructions"], responses_body["instructions"]);
        assert_eq!(body["input"].as_array().unwrap()[..], items[..*end]);
        frozen.check_body(request, condense_formats::Format::Responses, body);
    }

    // Anthropic's context editing through the SDK: applied here, reported as Anthropic does.
    let edits = &out["context_edits"];
    assert_eq!(edits["text"], "ok");
    assert_eq!(
        edits["applied"][0]["type"], "clear_tool_uses_20250919",
        "{edits}"
    );
    assert!(edits["applied"][0]["cleared_tool_uses"].as_u64().unwrap() > 0);

    // The SDK's responses.compact, answered by condense (the upstream has none): one
    // compaction item first, condense's envelope; the follow-up reached the upstream with the
    // summary in the item's place; a changed item raised the SDK's BadRequestError.
    let compact = &out["compact"];
    assert_eq!(compact["object"], "response.compaction");
    let types: Vec<&str> = compact["types"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(types.first(), Some(&"compaction"), "{types:?}");
    assert_eq!(
        types.iter().filter(|kind| **kind == "compaction").count(),
        1
    );
    assert_eq!(compact["envelope"], "condense.v1.");
    assert_eq!(compact["follow"], "ok");
    assert_eq!(compact["forged"], 400);
    let received = received.lock().unwrap();
    assert!(
        !received
            .iter()
            .any(|(path, _, _)| path.ends_with("/responses/compact")),
        "answered by condense, not asked of the upstream"
    );
    let follow: Vec<Value> = received
        .iter()
        .filter(|(path, _, _)| path == "/v1/responses")
        .filter_map(|(_, _, body)| serde_json::from_slice::<Value>(body).ok())
        .filter(|body| body["model"] == "compact-model")
        .collect();
    assert_eq!(follow.len(), 1, "the forged request was not sent");
    let text = follow[0].to_string();
    assert!(!text.contains("condense.v1."));
    let edited: Vec<&(String, axum::http::HeaderMap, bytes::Bytes)> = received
        .iter()
        .filter(|(_, _, body)| {
            String::from_utf8_lossy(body).contains("cleared by context management")
        })
        .collect();
    assert_eq!(edited.len(), 1);
    assert!(!String::from_utf8_lossy(&edited[0].2).contains("context_management"));
    assert!(text.contains("<prior-conversation-summary>") && text.contains("Now run the tests."));
}
