//! The Redis session store against a real `redis-server` (`.ci/run` starts one with
//! `scripts/redis.sh` and requires it; elsewhere the test says it was skipped).
#![allow(clippy::unwrap_used, clippy::expect_used)]

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
