//! The Redis session store against a real `redis-server` (`.ci/run` starts one with
//! `scripts/redis.sh` and requires it; elsewhere the test says it was skipped).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::sync::Arc;

use condense_host::SessionState;
use condense_serve::{RedisSessionStore, Saved, SessionStore};

fn store(test: &str) -> Option<RedisSessionStore> {
    let url =
        condense_core::testing::required_url(test, "CONDENSE_REDIS_URL", "CONDENSE_REQUIRE_REDIS")?;
    Some(RedisSessionStore::new(&url).unwrap())
}

/// A save wins only at the version it read; of many concurrent writers at one version exactly
/// one wins, and what it wrote is what every reader sees.
#[test]
fn a_compare_and_set_lets_exactly_one_writer_win() {
    let Some(store) = store("a_compare_and_set_lets_exactly_one_writer_win") else {
        return;
    };
    let session = format!("cas-{}-{}", std::process::id(), line!());
    assert_eq!(store.load(&session).unwrap().version, 0);
    let first = SessionState {
        consecutive_failures: 1,
        ..SessionState::default()
    };
    assert_eq!(store.save(&session, &first, 0).unwrap(), Saved::Stored(1));
    assert_eq!(store.save(&session, &first, 0).unwrap(), Saved::Conflict);
    let loaded = store.load(&session).unwrap();
    assert_eq!((loaded.version, loaded.state), (1, first));

    let store = Arc::new(store);
    let winners: Vec<(u32, Saved)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8u32)
            .map(|writer| {
                let store = store.clone();
                let session = session.clone();
                scope.spawn(move || {
                    let state = SessionState {
                        consecutive_failures: 10 + writer,
                        ..SessionState::default()
                    };
                    (writer, store.save(&session, &state, 1).unwrap())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let won: Vec<u32> = winners
        .iter()
        .filter(|(_, saved)| *saved == Saved::Stored(2))
        .map(|(writer, _)| *writer)
        .collect();
    assert_eq!(won.len(), 1, "{winners:?}");
    let loaded = store.load(&session).unwrap();
    assert_eq!(loaded.version, 2);
    assert_eq!(loaded.state.consecutive_failures, 10 + won[0]);
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let store = RedisSessionStore::new(&format!("redis://user:secret@127.0.0.1:{port}/0")).unwrap();
    let error = store.load("s").unwrap_err().to_string();
    assert!(error.contains("Redis"), "{error}");
    assert!(
        !error.contains("secret"),
        "the password is never shown: {error}"
    );
}

/// With a ttl each save sets the session's key to expire that long after it; without one the
/// key is kept (and a key saved with one is made persistent again).
#[test]
fn a_saved_state_expires_after_the_ttl() {
    let Some(store) = store("a_saved_state_expires_after_the_ttl") else {
        return;
    };
    let url = std::env::var("CONDENSE_REDIS_URL").unwrap();
    let mut redis = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let session = format!("ttl-{}-{}", std::process::id(), line!());
    let key = RedisSessionStore::key(&session);
    let pttl = |redis: &mut redis::Connection| -> i64 {
        redis::cmd("PTTL").arg(&key).query(redis).unwrap()
    };
    let store = store.expire_after(Some(std::time::Duration::from_secs(3_600)));
    store.save(&session, &SessionState::default(), 0).unwrap();
    let left = pttl(&mut redis);
    assert!((3_590_000..=3_600_000).contains(&left), "{left} ms left");
    let store = store.expire_after(None);
    store.save(&session, &SessionState::default(), 1).unwrap();
    assert_eq!(pttl(&mut redis), -1, "kept forever");
}

/// Every handle a saved state names is found (other tests' sessions may share the server:
/// their handles may be there too); one no state names is not.
#[test]
fn the_handles_saved_states_name_are_listed() {
    let Some(store) = store("the_handles_saved_states_name_are_listed") else {
        return;
    };
    let run = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let handle = |what: &str| condense_host::handle_of(format!("{run} {what}").as_bytes());
    let (a, b, unnamed) = (handle("a"), handle("b"), handle("unnamed"));
    for (session, handles) in [("one", vec![a.as_str()]), ("two", vec![&a, &b])] {
        let session = format!("named-{run}-{session}");
        let state = condense_serve::testing::state_naming(&handles);
        assert_eq!(store.save(&session, &state, 0).unwrap(), Saved::Stored(1));
    }
    let named = store.named_handles().unwrap();
    assert!(
        named.contains(&a) && named.contains(&b),
        "{} named",
        named.len()
    );
    assert!(!named.contains(&unnamed));
}

/// A `redis-server` of this test's own (the shared one must keep answering the other tests),
/// on a free port, that the test can stop with SIGSTOP and resume with SIGCONT.
struct OwnRedis {
    child: std::process::Child,
    url: String,
}

impl OwnRedis {
    fn start() -> OwnRedis {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let child = std::process::Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server (scripts/redis.sh installs it)");
        // Owned from here: dropped (killed and waited for) however the test ends.
        let redis = OwnRedis {
            child,
            url: format!("redis://127.0.0.1:{port}/0"),
        };
        for _ in 0..100 {
            let answered = redis::Client::open(redis.url.as_str())
                .and_then(|client| client.get_connection())
                .and_then(|mut connection| redis::cmd("PING").query::<String>(&mut connection));
            if answered.is_ok() {
                return redis;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("redis-server on {port} did not answer");
    }

    fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url.as_str())
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.signal("-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The proxy on `store`, at a 16K window, in front of a scripted upstream.
async fn proxy_on(
    store: Arc<dyn SessionStore>,
) -> (
    String,
    Arc<condense_serve::Proxy>,
    condense_serve::testing::Received,
) {
    let (upstream, received) = condense_serve::testing::upstream().await;
    let compactor = condense_serve::testing::compactor(&condense_serve::testing::WINDOW_16K);
    let mut settings = condense_serve::testing::settings_for(&format!("http://{upstream}"));
    settings.state_timeout = std::time::Duration::from_millis(250);
    let proxy = Arc::new(condense_serve::Proxy::new(settings, compactor, store).unwrap());
    let url = condense_serve::testing::spawn(proxy.clone()).await;
    (url, proxy, received)
}

/// A long recorded session as a Chat Completions body.
fn long_session() -> serde_json::Value {
    let bytes = condense_core::testing::transcript("openai/openhands-ponylang__ponyc-4588")
        .unwrap()
        .bytes;
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    serde_json::json!({"model": "m", "messages": value["messages"]})
}

/// Sends `body` to the proxy as `session`; gives the tokens of what the upstream received.
async fn send(
    url: &str,
    session: &str,
    body: &serde_json::Value,
    received: &condense_serve::testing::Received,
) -> usize {
    let started = std::time::Instant::now();
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .header("x-condense-session", session)
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // A hang detector, not a timing: the request once waited 300 s on a stopped Redis.
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let (_, _, sent) = received.lock().unwrap().last().cloned().unwrap();
    let (_, conversation) =
        condense_formats::read(&sent, Some(condense_formats::Format::OpenAi)).unwrap();
    use condense_tokenizer::TokenCounter;
    condense_tokenizer::Tiktoken::default().count_conversation(&conversation)
}

fn metric(proxy: &condense_serve::Proxy, kind: &str) -> u64 {
    let name = format!("condense_state_store_errors_total{{kind=\"{kind}\"}}");
    let text = proxy.metrics.render();
    text.lines()
        .find_map(|line| line.strip_prefix(name.as_str())?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

/// `kill -STOP` on the Redis behind the proxy: requests are still answered, compacted, each
/// held up at most by `serve.state_timeout_ms`; after `kill -CONT` the state is saved again.
/// A state damaged in the hash is replaced by a fresh judgement, not failed open for a week.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_or_damaged_redis_never_hangs_the_proxy_nor_uncompacts_a_request() {
    if store("a_stopped_or_damaged_redis_never_hangs_the_proxy_nor_uncompacts_a_request").is_none()
    {
        return;
    }
    let redis = OwnRedis::start();
    let store = RedisSessionStore::new(&redis.url)
        .unwrap()
        .with_timeout(std::time::Duration::from_millis(250));
    let (url, proxy, received) = proxy_on(Arc::new(store)).await;
    let body = long_session();
    let session = "stalled";
    let window = 16_000 - 4_096;
    assert!(send(&url, session, &body, &received).await < window);
    proxy.flushed().await;
    assert_eq!(metric(&proxy, "load"), 0);

    redis.signal("-STOP");
    for _ in 0..2 {
        assert!(send(&url, session, &body, &received).await < window);
    }
    assert!(metric(&proxy, "load") >= 2, "{}", proxy.metrics.render());
    redis.signal("-CONT");
    assert!(send(&url, session, &body, &received).await < window);
    proxy.flushed().await;
    let errors = metric(&proxy, "load");

    // Damage the stored state, as a bad write or another version's format would.
    let key = RedisSessionStore::key(session);
    let mut connection = redis.connection();
    redis::cmd("HSET")
        .arg(&key)
        .arg("state")
        .arg("{garbage")
        .query::<i64>(&mut connection)
        .unwrap();
    assert!(send(&url, session, &body, &received).await < window);
    proxy.flushed().await;
    assert_eq!(metric(&proxy, "discarded"), 1);
    assert_eq!(metric(&proxy, "load"), errors, "read, just not usable");
    let repaired = RedisSessionStore::new(&redis.url)
        .unwrap()
        .load(session)
        .unwrap();
    assert_eq!(repaired.discarded, None, "replaced on save");
    assert!(
        repaired.state.head.is_some(),
        "the fresh judgement's summary"
    );
}

/// A server that accepts connections and never answers (a wedged Redis, a wrong port with
/// something else on it): the start-up check and every request are bounded by the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_never_answers_costs_a_request_the_timeout_only() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    // Accepted by the kernel's backlog, never read.
    let store = RedisSessionStore::new(&format!("redis://127.0.0.1:{port}/0"))
        .unwrap()
        .with_timeout(std::time::Duration::from_millis(250));
    let started = std::time::Instant::now();
    assert!(store.check().is_err());
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let (url, proxy, received) = proxy_on(Arc::new(store)).await;
    let tokens = send(&url, "silent", &long_session(), &received).await;
    assert!(tokens < 16_000 - 4_096, "{tokens}");
    assert!(metric(&proxy, "load") >= 1);
    // Serving, but not ready: a load balancer should send sessions elsewhere.
    let ready = reqwest::get(format!("{url}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 503);
    let why = ready.text().await.unwrap();
    assert!(why.contains("state store"), "{why}");
    drop(silent);
}

/// The load of the last round: 50 sessions on two replicas sharing one Redis, each step sent
/// six times at once (three to each replica), so the compare-and-set is lost over and over.
/// No request reaches the upstream over the window (a loser used to send the whole history),
/// and nothing fails open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sessions_on_two_replicas_under_contention_stay_under_the_window() {
    let Some(_) = store("fifty_sessions_on_two_replicas_under_contention_stay_under_the_window")
    else {
        return;
    };
    let url = std::env::var("CONDENSE_REDIS_URL").unwrap();
    let replica = || Arc::new(RedisSessionStore::new(&url).unwrap());
    let (first, first_proxy, first_received) = proxy_on(replica()).await;
    let (second, second_proxy, second_received) = proxy_on(replica()).await;
    let all = long_session()["messages"].as_array().unwrap().clone();
    let ends: Vec<usize> = (2..=all.len())
        .filter(|&end| all[end - 1]["role"] == "assistant")
        .step_by(3)
        .collect();
    let run = format!("contended-{}", std::process::id());
    let mut sessions = Vec::new();
    for session in 0..50 {
        let (first, second, all, ends) = (first.clone(), second.clone(), all.clone(), ends.clone());
        let name = format!("{run}-{session}");
        sessions.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            for end in ends {
                let body = serde_json::json!({"model": "m", "messages": &all[..end - 1]});
                let copies = (0..6).map(|copy| {
                    let url = if copy % 2 == 0 { &first } else { &second };
                    client
                        .post(format!("{url}/v1/chat/completions"))
                        .header("x-condense-session", &name)
                        .json(&body)
                        .send()
                });
                for response in futures_util::future::join_all(copies).await {
                    assert_eq!(response.unwrap().status(), 200);
                }
            }
        }));
    }
    for session in sessions {
        session.await.unwrap();
    }
    // Every body either replica sent upstream.
    let mut bodies = first_received.lock().unwrap().clone();
    bodies.extend(second_received.lock().unwrap().iter().cloned());
    assert_eq!(bodies.len(), 50 * ends.len() * 6);
    let mut over_window = 0;
    for (_, _, body) in &bodies {
        let (_, conversation) =
            condense_formats::read(body, Some(condense_formats::Format::OpenAi)).unwrap();
        use condense_tokenizer::TokenCounter;
        let tokens = condense_tokenizer::Tiktoken::default().count_conversation(&conversation);
        over_window += usize::from(tokens >= 16_000 - 4_096);
    }
    assert_eq!(over_window, 0, "of {} bodies", bodies.len());
    for proxy in [&first_proxy, &second_proxy] {
        let metrics = proxy.metrics.render();
        assert!(
            metrics.contains("condense_failed_open_total 0"),
            "{metrics}"
        );
    }
    eprintln!(
        "{} requests on two replicas; compare-and-set lost on every attempt: {} and {}",
        bodies.len(),
        metric(&first_proxy, "conflict"),
        metric(&second_proxy, "conflict")
    );
}

/// Originals in Redis (`--store redis://…`): kept and given back verified; a changed value is
/// an error, never a wrong original; a sweep removes those unused and named by no state, and
/// keeps the named ones.
#[test]
fn originals_live_in_redis_verified_and_swept() {
    let Some(states) = store("originals_live_in_redis_verified_and_swept") else {
        return;
    };
    use condense_host::Store;
    let url = std::env::var("CONDENSE_REDIS_URL").unwrap();
    let originals =
        condense_serve::RedisOriginals::new(&url, std::time::Duration::from_secs(5)).unwrap();
    let run = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    let named_bytes = format!("{run}: an output a state names").into_bytes();
    let loose_bytes = format!("{run}: an output nobody names").into_bytes();
    let (named, loose) = (
        condense_host::handle_of(&named_bytes),
        condense_host::handle_of(&loose_bytes),
    );
    originals.put(&named, &named_bytes).unwrap();
    originals.put(&loose, &loose_bytes).unwrap();
    assert_eq!(originals.get(&named).unwrap(), named_bytes);
    assert!(matches!(
        originals.put(&named, b"other bytes"),
        Err(condense_host::StoreError::BadHandle(_))
    ));
    // Changed behind the store's back: refused, never returned.
    let mut redis = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let changed = format!("{run}: changed");
    let changed_handle = condense_host::handle_of(changed.as_bytes());
    originals.put(&changed_handle, changed.as_bytes()).unwrap();
    redis::cmd("SET")
        .arg(format!("condense:original:{changed_handle}"))
        .arg("tampered")
        .query::<()>(&mut redis)
        .unwrap();
    assert!(matches!(
        originals.get(&changed_handle),
        Err(condense_host::StoreError::Corrupt { .. })
    ));
    // A state names one; a sweep of what is unused for no time at all takes the other.
    let session = format!("originals-{run}");
    states
        .save(
            &session,
            &condense_serve::testing::state_naming(&[&named]),
            0,
        )
        .unwrap();
    let named_now = states.named_handles().unwrap();
    let swept = originals
        .sweep(std::time::Duration::ZERO, &named_now)
        .unwrap();
    assert!(swept.removed >= 1 && swept.kept_named >= 1, "{swept:?}");
    assert!(originals.get(&named).is_ok());
    assert!(matches!(
        originals.get(&loose),
        Err(condense_host::StoreError::NotFound(_))
    ));
}
