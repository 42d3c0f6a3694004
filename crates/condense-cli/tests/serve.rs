//! `condense serve` as a process: two replicas sharing one real Redis, and a graceful stop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStderr, Stdio};
use std::time::Duration;

use common::command;
use condense_core::testing::transcript;
use condense_serve::testing::{
    ANTHROPIC_REPLY, Frozen, OPENAI_REPLY, replay_ends, tool_results, upstream,
};
use serde_json::Value;

/// A running `condense serve` and the URL it printed.
struct Replica {
    child: Child,
    url: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `condense serve ARGS` in `dir`, owned from the start (so that a failed check kills it: a live
/// child holding the test's output open would hang the run), and the lines of its stderr.
fn spawn(dir: &Path, args: &[&str]) -> (Replica, std::io::Lines<BufReader<ChildStderr>>) {
    let child = command(dir, args)
        .env("CONDENSE_PRUNE_MINIMUM_TOKENS", "2000")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut replica = Replica {
        child,
        url: String::new(),
    };
    let lines = BufReader::new(replica.child.stderr.take().unwrap()).lines();
    (replica, lines)
}

fn start(dir: &Path, upstream: &str, state: &str, extra: &[&str]) -> Replica {
    let mut args = vec![
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--openai-upstream",
        upstream,
        "--anthropic-upstream",
        upstream,
        "--state",
        state,
        "--store",
        "originals",
    ];
    args.extend_from_slice(extra);
    let (mut replica, mut lines) = spawn(dir, &args);
    let first = lines.next().unwrap().unwrap();
    replica.url = first
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();
    // Where originals go, absolute, for a `condense recall --store` run from anywhere.
    let originals = format!("originals {})", dir.join("originals").display());
    assert!(first.ends_with(&originals), "{first}");
    // Keep draining stderr so the process never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    replica
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// Two replicas behind an imaginary load balancer, one Redis: a session's requests alternate
/// between them, and every output either replica replaced comes back byte for byte from the
/// other on every later request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_redis_keep_one_sessions_decisions() {
    let Some(redis) = condense_core::testing::required_url(
        "two_replicas_on_one_redis_keep_one_sessions_decisions",
        "CONDENSE_REDIS_URL",
        "CONDENSE_REQUIRE_REDIS",
    ) else {
        return;
    };
    let (upstream, received) = upstream().await;
    let upstream = format!("http://{upstream}");
    let dir = tempfile::tempdir().unwrap();
    // Every request walked (not only one due for compaction at the default window), so that
    // there are decisions for the replicas to share; and no summary early, which would take
    // the pruned head away.
    let walk = dir.path().join("walk.toml");
    std::fs::write(
        &walk,
        "[prune]\nwalk_when = \"always\"\n[compaction]\ncache_rewrite_cost = 0\n",
    )
    .unwrap();
    let walk = walk.to_str().unwrap();
    let replicas = [
        start(dir.path(), &upstream, &redis, &["-q", "--config", walk]),
        start(dir.path(), &upstream, &redis, &["-q", "--config", walk]),
    ];
    let value: Value =
        serde_json::from_slice(&transcript("anthropic/claude-code-5f8cbb78").unwrap().bytes)
            .unwrap();
    let all = value["messages"].as_array().unwrap().clone();
    // A session name of its own, so that reruns on the same Redis start afresh.
    let session = format!("replicas-{}", std::process::id());
    let ends = replay_ends(&all, 4);
    let mut frozen = Frozen::default();
    let requests = ends.len();
    for (request, end) in ends.into_iter().enumerate() {
        let mut body = value.clone();
        body["messages"] = Value::Array(all[..end].to_vec());
        let replica = &replicas[request % 2];
        let response = client()
            .post(format!("{}/v1/messages", replica.url))
            .header("x-api-key", "sk-ant-test")
            .header("anthropic-version", "2023-06-01")
            .header("x-condense-session", &session)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), ANTHROPIC_REPLY);
        let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
        let sent: Value = serde_json::from_slice(&sent).unwrap();
        frozen.check(request, tool_results(sent["messages"].as_array().unwrap()));
    }
    assert!(frozen.replaced.len() >= 18, "{}", frozen.replaced.len());
    // One state, written by both: every request saved on the version the other left (the
    // usage recordings add theirs).
    use condense_serve::SessionStore;
    let shared = condense_serve::RedisSessionStore::new(&redis).unwrap();
    let saved = shared.load(&session).unwrap();
    assert!(
        saved.version as usize >= requests,
        "{} < {requests}",
        saved.version
    );
    assert!(saved.state.log.len() >= frozen.replaced.len());
}

/// SIGTERM while a request is in flight: the request is answered, then the process exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_request_in_flight_finish() {
    let (upstream, _received) = upstream().await;
    let upstream = format!("http://{upstream}");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("sessions");
    let mut replica = start(dir.path(), &upstream, state.to_str().unwrap(), &[]);
    let url = replica.url.clone();
    let in_flight = tokio::spawn(async move {
        client()
            .post(format!("{url}/v1/chat/completions"))
            .header("x-test", "slow")
            .json(
                &serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
            )
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = replica.child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(in_flight.await.unwrap(), OPENAI_REPLY);
    let status = replica.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    // The state of the session it served was saved.
    assert_eq!(std::fs::read_dir(&state).unwrap().count(), 1);
}

#[test]
fn a_bad_address_or_upstream_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::condense(dir.path(), &["serve", "--listen", "localhost"]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("serve.listen") && said.contains("localhost"),
        "{said}"
    );
    // A value the configuration refuses where a flag gave it: a usage error too.
    let out = common::condense(dir.path(), &["serve", "--context-window", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--context-window"));
    let out = common::condense(
        dir.path(),
        &["serve", "--openai-upstream", "api.openai.com"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("serve.openai_upstream"));
    std::fs::write(
        dir.path().join("ttl.toml"),
        "[serve]\nstate_ttl_hours = 9999999\n",
    )
    .unwrap();
    let out = common::condense(dir.path(), &["serve", "--config", "ttl.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("serve.state_ttl_hours") && said.contains("9999999"),
        "{said}"
    );
    std::fs::write(
        dir.path().join("originals.toml"),
        "[serve]\noriginals_ttl_hours = 9999999\n",
    )
    .unwrap();
    let out = common::condense(dir.path(), &["serve", "--config", "originals.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("serve.originals_ttl_hours"));
    for bad in ["http://a b", "https://api.anthropic.com/?key=1", "https://"] {
        let out = common::condense(dir.path(), &["serve", "--anthropic-upstream", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("serve.anthropic_upstream") && said.contains(bad),
            "{said}"
        );
    }
    // A key variable that is not set: refused, never served open by mistake.
    std::fs::write(
        dir.path().join("auth.toml"),
        "[serve]\nauth_token_env = \"CONDENSE_TEST_UNSET_KEY\"\nstate_timeout_ms = 100\n",
    )
    .unwrap();
    let out = common::condense(dir.path(), &["serve", "--config", "auth.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("serve.auth_token_env") && said.contains("CONDENSE_TEST_UNSET_KEY"),
        "{said}"
    );
    std::fs::write(
        dir.path().join("timeout.toml"),
        "[serve]\nstate_timeout_ms = 0\n",
    )
    .unwrap();
    let out = common::condense(dir.path(), &["serve", "--config", "timeout.toml"]);
    assert_eq!(out.status.code(), Some(1), "a bad configuration file");
    assert!(String::from_utf8_lossy(&out.stderr).contains("serve.state_timeout_ms"));
}

/// A state directory that cannot be one (here a file) stops the proxy before it listens: it
/// would otherwise serve every request uncompacted, each failing open at its save.
#[test]
fn a_state_path_that_is_not_a_directory_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("state"), "a file").unwrap();
    let out = common::condense(
        dir.path(),
        &["serve", "--listen", "127.0.0.1:0", "--state", "state"],
    );
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("serve.state") && said.contains("state"),
        "{said}"
    );
    assert!(!said.contains("listening"), "{said}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("state")).unwrap(),
        "a file"
    );
}

/// A Redis that is not up yet (a replica started first) is said at start, and the proxy serves:
/// requests go upstream uncompacted until it can be reached.
#[test]
fn an_unreachable_redis_is_a_warning_and_the_proxy_serves() {
    let dir = tempfile::tempdir().unwrap();
    let warning = warned_then_listened(dir.path(), &["--state", "redis://:hunter2@127.0.0.1:1/0"]);
    assert!(
        warning.contains("warning") && warning.contains("127.0.0.1:1"),
        "{warning}"
    );
    assert!(
        !warning.contains("hunter2"),
        "no password in the log: {warning}"
    );
}

/// `condense serve --listen 127.0.0.1:0 ARGS` in `dir`: its first line, which must be followed
/// by the line that says it listens (a warning, then serving).
fn warned_then_listened(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["serve", "--listen", "127.0.0.1:0"];
    all.extend_from_slice(args);
    let (replica, mut lines) = spawn(dir, &all);
    let warning = lines.next().unwrap().unwrap();
    let listening = lines.next().unwrap().unwrap();
    drop(replica);
    assert!(listening.contains("listening on"), "{listening}");
    warning
}

/// Listening beyond loopback with no key asked is said at start (anyone who reaches it can
/// use it); the proxy still serves.
#[test]
fn an_open_address_without_a_key_is_a_warning_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (replica, mut lines) = spawn(
        dir.path(),
        &["serve", "--listen", "0.0.0.0:0", "--state", "state"],
    );
    let warning = lines.next().unwrap().unwrap();
    let listening = lines.next().unwrap().unwrap();
    drop(replica);
    assert!(
        warning.contains("warning") && warning.contains("serve.auth_token_env"),
        "{warning}"
    );
    assert!(listening.contains("listening on"), "{listening}");
}

/// A remote summarizer whose key variable is unset would fail every summary: said once at
/// start, naming the variable, and the proxy serves (it still prunes, and fails open).
#[test]
fn a_summarizer_without_its_key_is_a_warning_at_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("key.toml"),
        "[summarizer]\nkind = \"openai\"\napi_key_env = \"CONDENSE_TEST_UNSET_KEY\"\n",
    )
    .unwrap();
    let warning = warned_then_listened(dir.path(), &["--state", "state", "--config", "key.toml"]);
    assert!(
        warning.contains("warning") && warning.contains("CONDENSE_TEST_UNSET_KEY"),
        "{warning}"
    );
}

/// With `serve.originals_ttl_hours` the proxy sweeps its store of originals as it starts (and
/// every hour): an original unused for longer that no session's state names goes, one a state
/// names stays, and the start line says the store is swept.
#[test]
fn originals_no_state_names_are_swept_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let store = condense_host::DirStore::new(dir.path().join("originals"));
    let mut paths = Vec::new();
    for bytes in [&b"named by a session"[..], b"named by nobody"] {
        let handle = condense_host::handle_of(bytes);
        condense_host::Store::put(&store, &handle, bytes).unwrap();
        let path = dir
            .path()
            .join("originals")
            .join(&handle[..2])
            .join(&handle);
        condense_core::testing::backdate(&path, Duration::from_secs(3 * 3_600));
        paths.push((handle, path));
    }
    let sessions = condense_serve::DirSessionStore::new(dir.path().join("state"));
    let state = condense_serve::testing::state_naming(&[&paths[0].0]);
    condense_serve::SessionStore::save(&sessions, "a session", &state, 0).unwrap();
    std::fs::write(
        dir.path().join("sweep.toml"),
        "[serve]\noriginals_ttl_hours = 2\n",
    )
    .unwrap();
    let (replica, mut lines) = spawn(
        dir.path(),
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--state",
            "state",
            "--store",
            "originals",
            "--config",
            "sweep.toml",
        ],
    );
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.by_ref().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    let listening = receive.recv_timeout(Duration::from_secs(60)).unwrap();
    assert!(
        listening.contains("swept of what no state names after 2 h unused"),
        "{listening}"
    );
    let swept = loop {
        let line = receive.recv_timeout(Duration::from_secs(60)).unwrap();
        if line.contains("originals swept") {
            break line;
        }
    };
    drop(replica);
    assert!(
        swept.contains("removed=1") && swept.contains("kept_named=1"),
        "{swept}"
    );
    assert!(paths[0].1.exists(), "named: kept");
    assert!(!paths[1].1.exists(), "named by nobody: removed");
}

/// `--store redis://…`: the CLI keeps originals in Redis, says so in its report, and
/// `condense recall --store redis://… HANDLE` gives one back from any directory.
#[test]
fn originals_in_redis_are_recalled_by_the_cli() {
    let Some(url) = condense_core::testing::required_url(
        "originals_in_redis_are_recalled_by_the_cli",
        "CONDENSE_REDIS_URL",
        "CONDENSE_REQUIRE_REDIS",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("condense.toml"),
        "[prune]\nprotect_tokens = 0\nminimum_tokens = 0\n",
    )
    .unwrap();
    let source =
        condense_core::testing::transcripts_dir().join("anthropic/claude-code-5f8cbb78.json");
    let out = common::condense(
        dir.path(),
        &[
            "prune",
            source.to_str().unwrap(),
            "--store",
            &url,
            "-o",
            "p.json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("originals: redis://"), "{said}");
    let handle = common::handles(&dir.path().join("p.json")).remove(0);
    let elsewhere = tempfile::tempdir().unwrap();
    let back = common::condense(elsewhere.path(), &["recall", &handle, "--store", &url]);
    assert!(
        back.status.success(),
        "{}",
        String::from_utf8_lossy(&back.stderr)
    );
    assert!(!back.stdout.is_empty());
}
