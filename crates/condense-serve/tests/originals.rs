//! `serve.originals_ttl_hours`: a long-running proxy sweeps the originals no session names any
//! more, and never one a session's placeholders still name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use condense_core::testing::{backdate as age, transcript};
use condense_host::{Compactor, Config, DirStore, FixedClock, Sources, Store, handle_of};
use condense_serve::testing::{replay_ends, settings_for, spawn, state_naming, upstream};
use condense_serve::{DirSessionStore, OriginalsExpiry, Proxy, SessionStore};
use serde_json::{Value, json};

const DAY: Duration = Duration::from_secs(86_400);

/// Every original in the store, by handle.
fn originals(root: &Path) -> Vec<(String, PathBuf)> {
    let mut found = Vec::new();
    for folder in std::fs::read_dir(root).unwrap() {
        for entry in std::fs::read_dir(folder.unwrap().path()).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            found.push((name, path));
        }
    }
    found.sort();
    found
}

#[test]
fn a_state_directory_names_the_handles_its_states_hold() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirSessionStore::new(dir.path().join("sessions"));
    assert!(
        store.named_handles().unwrap().is_empty(),
        "no directory yet"
    );
    let (a, b, c) = (handle_of(b"a"), handle_of(b"b"), handle_of(b"c"));
    store.save("one", &state_naming(&[&a, &b]), 0).unwrap();
    store.save("two", &state_naming(&[&b, &c]), 0).unwrap();
    // Neither a folder nor another file is a state.
    std::fs::create_dir(dir.path().join("sessions/folder.json")).unwrap();
    std::fs::write(
        dir.path().join("sessions/notes.txt"),
        handle_of(b"not a state"),
    )
    .unwrap();
    let mut named: Vec<String> = store.named_handles().unwrap().into_iter().collect();
    named.sort();
    let mut expected = vec![a, b, c];
    expected.sort();
    assert_eq!(named, expected);
}

/// A long session through a proxy that prunes (originals on disk); then every original is made
/// two days old, and a stranger's original is added. The sweep removes the stranger only: each
/// original the session's state names stays, and the session's next request is sent the same
/// bytes as before the sweep.
#[tokio::test]
async fn a_sweep_removes_only_the_originals_no_session_names() {
    let (upstream, received) = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("originals");
    let config = Config::load(&Sources {
        env: vec![
            ("CONDENSE_MODEL_CONTEXT_WINDOW".into(), "60000".into()),
            ("CONDENSE_MODEL_MAX_OUTPUT_TOKENS".into(), "4096".into()),
            ("CONDENSE_PRUNE_MINIMUM_TOKENS".into(), "2000".into()),
            // Outputs pruned on the way to the window, none summarized away early.
            ("CONDENSE_COMPACTION_CACHE_REWRITE_COST".into(), "0".into()),
        ],
        ..Sources::default()
    })
    .unwrap();
    let compactor = Compactor::from_config(&config)
        .unwrap()
        .with_store(Box::new(DirStore::new(&root)))
        .with_clock(Box::new(FixedClock(1_763_700_000_000)));
    let sessions = Arc::new(DirSessionStore::new(dir.path().join("sessions")));
    let mut settings = settings_for(&format!("http://{upstream}"));
    settings.originals = Some(OriginalsExpiry::new(DirStore::new(&root), DAY));
    let proxy = Arc::new(Proxy::new(settings, compactor, sessions.clone()).unwrap());
    let url = spawn(proxy.clone()).await;

    let session: Value =
        serde_json::from_slice(&transcript("anthropic/claude-code-5f8cbb78").unwrap().bytes)
            .unwrap();
    let all = session["messages"].as_array().unwrap();
    let send = |end: usize| {
        let url = url.clone();
        let mut body = session.clone();
        body["messages"] = json!(&all[..end]);
        async move {
            let response = reqwest::Client::new()
                .post(format!("{url}/v1/messages"))
                .header("x-condense-session", "long")
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
        }
    };
    let ends = replay_ends(all, 8);
    for &end in &ends {
        send(end).await;
    }
    proxy.flushed().await;
    let before_sweep = received.lock().unwrap().last().unwrap().2.clone();

    let kept = originals(&root);
    assert!(kept.len() > 5, "the session pruned: {}", kept.len());
    for (_, path) in &kept {
        age(path, 2 * DAY);
    }
    let stranger = b"an output of a session whose state expired long ago";
    let stranger_handle = handle_of(stranger);
    DirStore::new(&root)
        .put(&stranger_handle, stranger)
        .unwrap();
    age(
        &root.join(&stranger_handle[..2]).join(&stranger_handle),
        2 * DAY,
    );
    let named = sessions.named_handles().unwrap();
    let named_kept = kept
        .iter()
        .filter(|(handle, _)| named.contains(handle))
        .count();
    assert!(named_kept > 0, "the state names originals");

    let swept = proxy.sweep_originals().await.unwrap().unwrap();

    assert_eq!(swept.kept_named, named_kept);
    assert_eq!(swept.removed, kept.len() + 1 - named_kept);
    assert_eq!(swept.failed, 0);
    let left: Vec<String> = originals(&root).into_iter().map(|(h, _)| h).collect();
    assert!(!left.contains(&stranger_handle));
    for handle in &named {
        if kept.iter().any(|(kept, _)| kept == handle) {
            assert!(left.contains(handle), "{handle} is named and stays");
        }
    }
    let metrics = proxy.metrics.render();
    assert!(
        metrics.contains(&format!(
            "condense_originals_removed_total {}",
            swept.removed
        )),
        "{metrics}"
    );

    // The session goes on as if nothing happened: the same request, the same bytes upstream.
    send(*ends.last().unwrap()).await;
    proxy.flushed().await;
    let after_sweep = received.lock().unwrap().last().unwrap().2.clone();
    assert_eq!(after_sweep, before_sweep);
    assert!(
        metrics.contains("condense_failed_open_total 0"),
        "{metrics}"
    );
}

/// A proxy without `serve.originals_ttl_hours` sweeps nothing.
#[tokio::test]
async fn without_a_ttl_nothing_is_swept() {
    let (upstream, _) = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let config = Config::load(&Sources::default()).unwrap();
    let proxy = Proxy::new(
        settings_for(&format!("http://{upstream}")),
        Compactor::from_config(&config).unwrap(),
        Arc::new(DirSessionStore::new(dir.path())),
    )
    .unwrap();
    assert!(proxy.sweep_originals().await.is_none());
}
