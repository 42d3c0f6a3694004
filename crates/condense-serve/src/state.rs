//! Where each session's state lives between requests: frozen decisions, the frozen summary, the
//! last request's time, the provider's reported usage and the circuit breaker.
//!
//! Every save is a compare-and-set on a version, so two replicas that prepared the same session
//! at once cannot both win: the loser reloads and prepares again on the winner's state.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use condense_host::{SessionState, handles_in};

use sha2::{Digest, Sha256};

/// How often, at most, the proxy sweeps what expires (states, originals): a sweep reads every
/// entry.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(3_600);

/// A session's state and the version it was read at (`0`: never saved).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Versioned {
    /// The state.
    pub state: SessionState,
    /// What a save must name to win.
    pub version: u64,
    /// Why the stored state was not used, when it was not: it did not parse (damaged, or
    /// written by another version of condense) or it had expired. The state is then a fresh
    /// one at the stored version, so the next save replaces what was there: a session is
    /// judged afresh once, not failed open until its state expires.
    pub discarded: Option<String>,
}

/// The outcome of a save.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    /// Stored; the new version.
    Stored(u64),
    /// Someone saved first: the version was no longer the one read.
    Conflict,
}

/// Why a state could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateStoreError {
    /// The file system said no.
    #[error("session state {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Redis refused or could not be reached.
    #[error("session state in Redis ({url}): {reason}")]
    Redis {
        /// The server, without its password.
        url: String,
        /// Why.
        reason: String,
    },
    /// A saved state that does not parse.
    #[error("session state {path} is damaged: {reason}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// How long the compaction key is.
const SECRET_BYTES: usize = 32;

/// A fresh key from the operating system's random source.
fn random_secret() -> Result<Vec<u8>, String> {
    let mut key = vec![0u8; SECRET_BYTES];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key)
        .map_err(|_| "the system's random source failed".to_owned())?;
    Ok(key)
}

/// A session key as a name any store accepts (a file name, a Redis key): the first 16 bytes of
/// its SHA-256, in hex. Keys come from clients and may hold anything.
fn digest(session: &str) -> String {
    Sha256::digest(session.as_bytes())[..16]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Keeps sessions' states. Blocking calls: the proxy runs them off the async threads.
pub trait SessionStore: Send + Sync + std::fmt::Debug {
    /// Where the states are, as logs may show it (a Redis password is never part of it).
    fn location(&self) -> String;
    /// The session's state, or a fresh one at version 0.
    fn load(&self, session: &str) -> Result<Versioned, StateStoreError>;
    /// Whether this process alone writes these states, so nothing can change a session between
    /// its load and its save while the proxy holds the session's lock: the proxy then saves after
    /// forwarding, off the request's path. A store replicas share answers `false` (the default),
    /// and its compare-and-set decides before anything is sent.
    fn exclusive(&self) -> bool {
        false
    }
    /// Whether a load is quick local I/O (a small file), cheaper to do on the request's own
    /// task than to hand to a thread for blocking work. `false` (the default) for a store
    /// behind a network round trip.
    fn local(&self) -> bool {
        false
    }
    /// Whether the store can be used now: called once when the proxy starts, so that a state
    /// directory that cannot be written or a Redis that cannot be reached is said then, not only
    /// in each request's log line (every request would fail open without a state).
    fn check(&self) -> Result<(), StateStoreError> {
        Ok(())
    }
    /// Every original's handle that a saved state names (a frozen placeholder, a summary's
    /// carried messages): what a sweep of unused originals must keep. An error when any state
    /// could not be read, since a sweep must not go on a partial list.
    fn named_handles(&self) -> Result<HashSet<String>, StateStoreError>;
    /// The key condense's own compaction items are signed with ([`crate::native`]): made on
    /// first use and kept with the states, so every replica sharing the store verifies what any
    /// of them made. A store that keeps none says so, and the proxy then refuses to emulate
    /// compaction rather than sign with a key it would lose.
    fn secret(&self) -> Result<Vec<u8>, StateStoreError> {
        Err(StateStoreError::Redis {
            url: self.location(),
            reason: "this state store keeps no key for compaction envelopes".into(),
        })
    }
    /// Stores `state` if the session is still at `expected`.
    fn save(
        &self,
        session: &str,
        state: &SessionState,
        expected: u64,
    ) -> Result<Saved, StateStoreError>;
}

/// The embedded store: one JSON file per session in a directory, written atomically (a
/// temporary file renamed over the old one), named by a hash of the session key so that any
/// key is a safe file name. The version check is made by the one process that owns the
/// directory; replicas on several machines share Redis instead.
#[derive(Debug)]
pub struct DirSessionStore {
    dir: PathBuf,
    /// Serializes compare-and-set within the process.
    lock: std::sync::Mutex<()>,
    /// How long a state is kept after its last save; `None`: forever.
    ttl: Option<Duration>,
    /// When the directory was last swept of expired states (`None`: not yet).
    swept: std::sync::Mutex<Option<Instant>>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    version: u64,
    state: SessionState,
}

impl DirSessionStore {
    /// A store in `dir` (made when first written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DirSessionStore {
            dir: dir.into(),
            lock: std::sync::Mutex::new(()),
            ttl: None,
            swept: std::sync::Mutex::new(None),
        }
    }

    /// States not saved for `ttl` are removed (`serve.state_ttl_hours`), by a sweep made after a
    /// save at most once an hour; `None` keeps them forever. A session whose state expired is
    /// judged afresh when it comes back: the client holds its whole history, so nothing is
    /// lost but one new summary and one cache write.
    pub fn expire_after(mut self, ttl: Option<Duration>) -> Self {
        self.ttl = ttl;
        self
    }

    /// Removes the states (and temporary files a crash left) not written for the ttl, when the
    /// last sweep is an hour old. Only regular files are removed; a failure is logged, never an
    /// error of the save that triggered it.
    fn sweep_if_due(&self) {
        let Some(ttl) = self.ttl else { return };
        {
            let mut swept = self
                .swept
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if swept.is_some_and(|at| at.elapsed() < SWEEP_EVERY) {
                return;
            }
            *swept = Some(Instant::now());
        }
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        let mut removed = 0usize;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !(name.ends_with(".json") || name.ends_with(".tmp")) {
                continue;
            }
            let Ok(metadata) = entry.path().symlink_metadata() else {
                continue;
            };
            let age = metadata
                .modified()
                .ok()
                .and_then(|modified| now.duration_since(modified).ok());
            if metadata.is_file() && age.is_some_and(|age| age > ttl) {
                match std::fs::remove_file(entry.path()) {
                    Ok(()) => removed += 1,
                    Err(error) => {
                        tracing::warn!(path = %entry.path().display(), %error, "an expired session state was not removed")
                    }
                }
            }
        }
        if removed > 0 {
            tracing::debug!(removed, dir = %self.dir.display(), "expired session states removed");
        }
    }

    /// The default directory: `$XDG_STATE_HOME/condense/sessions`, else
    /// `~/.local/state/condense/sessions`, else `.condense/sessions`.
    pub fn default_dir() -> PathBuf {
        let base = std::env::var_os("XDG_STATE_HOME")
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|value| !value.is_empty())
                    .map(|home| Path::new(&home).join(".local/state"))
            });
        match base {
            Some(base) => base.join("condense/sessions"),
            None => PathBuf::from(".condense/sessions"),
        }
    }

    fn path(&self, session: &str) -> PathBuf {
        self.dir.join(format!("{}.json", digest(session)))
    }

    fn read(&self, path: &Path) -> Result<Versioned, StateStoreError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Versioned::default());
            }
            Err(source) => {
                return Err(StateStoreError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        let stored: Stored = match serde_json::from_str(&text) {
            Ok(stored) => stored,
            // Without a version to compare, the next save (at version 0) replaces it.
            Err(error) => {
                return Ok(Versioned {
                    discarded: Some(format!("{} is damaged: {error}", path.display())),
                    ..Versioned::default()
                });
            }
        };
        // Expired but not swept yet (the sweep runs at most once an hour): the session is
        // judged afresh, as it would be had the sweep come first.
        let expired = self.ttl.is_some_and(|ttl| {
            std::fs::symlink_metadata(path)
                .and_then(|metadata| metadata.modified())
                .ok()
                .and_then(|modified| SystemTime::now().duration_since(modified).ok())
                .is_some_and(|age| age > ttl)
        });
        if expired {
            return Ok(Versioned {
                state: SessionState::default(),
                version: stored.version,
                discarded: Some(format!("{} expired", path.display())),
            });
        }
        Ok(Versioned {
            state: stored.state,
            version: stored.version,
            discarded: None,
        })
    }
}

impl SessionStore for DirSessionStore {
    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn load(&self, session: &str) -> Result<Versioned, StateStoreError> {
        self.read(&self.path(session))
    }

    /// Makes the directory and writes (then removes) a file in it.
    fn check(&self) -> Result<(), StateStoreError> {
        let io = |source| StateStoreError::Io {
            path: self.dir.clone(),
            source,
        };
        if self.dir.exists() && !self.dir.is_dir() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "it exists and is not a directory",
            )));
        }
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let probe = self.dir.join(format!(".check.{}.tmp", std::process::id()));
        std::fs::write(&probe, b"").map_err(io)?;
        std::fs::remove_file(&probe).map_err(io)
    }

    /// Reads every state file; one removed meanwhile (expired) names nothing.
    fn named_handles(&self) -> Result<HashSet<String>, StateStoreError> {
        let io = |path: &Path, source| StateStoreError::Io {
            path: path.to_owned(),
            source,
        };
        let mut named = HashSet::new();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(named),
            Err(source) => return Err(io(&self.dir, source)),
        };
        for entry in entries {
            let entry = entry.map_err(|source| io(&self.dir, source))?;
            let path = entry.path();
            let state = entry.file_type().is_ok_and(|kind| kind.is_file())
                && path
                    .extension()
                    .is_some_and(|extension| extension == "json");
            if !state {
                continue;
            }
            match std::fs::read(&path) {
                Ok(bytes) => named.extend(handles_in(&bytes).map(str::to_owned)),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(io(&path, source)),
            }
        }
        Ok(named)
    }

    /// `.compaction-key` in the directory: 32 random bytes, written once (a second process
    /// that races the first reads what the first wrote).
    fn secret(&self) -> Result<Vec<u8>, StateStoreError> {
        let path = self.dir.join(".compaction-key");
        let io = |source| StateStoreError::Io {
            path: path.clone(),
            source,
        };
        match std::fs::read(&path) {
            Ok(key) if key.len() == SECRET_BYTES => return Ok(key),
            Ok(_) => {
                return Err(StateStoreError::Damaged {
                    path: path.clone(),
                    reason: format!("a compaction key is {SECRET_BYTES} bytes"),
                });
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(io(source)),
        }
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let key = random_secret().map_err(|reason| StateStoreError::Damaged {
            path: path.clone(),
            reason,
        })?;
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut file| std::io::Write::write_all(&mut file, &key));
        match written {
            Ok(()) => Ok(key),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                std::fs::read(&path).map_err(io)
            }
            Err(source) => Err(io(source)),
        }
    }

    /// The directory belongs to one proxy process (see the type's documentation).
    fn exclusive(&self) -> bool {
        true
    }

    /// One small file on a local disk.
    fn local(&self) -> bool {
        true
    }

    fn save(
        &self,
        session: &str,
        state: &SessionState,
        expected: u64,
    ) -> Result<Saved, StateStoreError> {
        let path = self.path(session);
        let guard = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A damaged file reads as version 0 and is overwritten: the state is a cache of
        // decisions, and a fresh one is always safe (the session is judged afresh).
        let current = self.read(&path).map(|v| v.version).unwrap_or(expected);
        if current != expected {
            return Ok(Saved::Conflict);
        }
        let io = |source| StateStoreError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let version = expected + 1;
        let text = serde_json::to_vec(&Stored {
            version,
            state: state.clone(),
        })
        .map_err(|error| StateStoreError::Damaged {
            path: path.clone(),
            reason: error.to_string(),
        })?;
        let temp = self.dir.join(format!(
            ".{}.{}.tmp",
            path.file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id()
        ));
        std::fs::write(&temp, &text).map_err(io)?;
        std::fs::rename(&temp, &path).map_err(|source| {
            let _ = std::fs::remove_file(&temp);
            io(source)
        })?;
        // Saves wait for no sweep.
        drop(guard);
        self.sweep_if_due();
        Ok(Saved::Stored(version))
    }
}

/// Sessions in Redis, shared by every proxy replica behind a load balancer. Each session is a
/// hash (`version`, `state`) under `condense:session:<sha-256 of the key>`; a save is a Lua
/// script that compares the version and writes in one step, so two replicas preparing the same
/// session at once cannot both win (the loser prepares again on the winner's state).
pub struct RedisSessionStore {
    client: redis::Client,
    /// How long a session's key lives after its last save; `None`: forever.
    ttl: Option<Duration>,
    /// The URL without credentials, for messages.
    shown: String,
    connection: std::sync::Mutex<Option<redis::Connection>>,
    script: redis::Script,
    /// The longest a connection attempt, a read or a write may take.
    timeout: Duration,
}

impl std::fmt::Debug for RedisSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSessionStore")
            .field("url", &self.shown)
            .finish_non_exhaustive()
    }
}

/// How long a Redis call may take unless [`RedisSessionStore::with_timeout`] says otherwise.
const DEFAULT_REDIS_TIMEOUT: Duration = Duration::from_secs(5);

/// Compare the version, then write version and state together, and set the key to expire
/// `ARGV[4]` milliseconds from now (`0`: never).
const SAVE_SCRIPT: &str = r"
local current = redis.call('HGET', KEYS[1], 'version')
if not current then current = '0' end
if current ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'state', ARGV[3])
if tonumber(ARGV[4]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
else
  redis.call('PERSIST', KEYS[1])
end
return 1
";

impl RedisSessionStore {
    /// A store on the Redis server at `url` (`redis://HOST:PORT/DB`); the connection is made on
    /// first use and made again after an error.
    pub fn new(url: &str) -> Result<Self, StateStoreError> {
        let shown = match url.split_once('@') {
            Some((_, host)) => format!("redis://…@{host}"),
            None => url.to_owned(),
        };
        let client = redis::Client::open(url).map_err(|error| StateStoreError::Redis {
            url: shown.clone(),
            reason: error.to_string(),
        })?;
        Ok(RedisSessionStore {
            client,
            ttl: None,
            shown,
            connection: std::sync::Mutex::new(None),
            script: redis::Script::new(SAVE_SCRIPT),
            timeout: DEFAULT_REDIS_TIMEOUT,
        })
    }

    /// Bounds every connection attempt, read and write by `timeout` (`serve.state_timeout_ms`):
    /// a Redis that stops answering (stopped, partitioned, swapping) is an error after that
    /// long, never a call that waits for ever.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Each save sets the session's key to expire `ttl` later (`serve.state_ttl_hours`); `None`
    /// keeps it forever. See [`DirSessionStore::expire_after`] for what an expired state costs.
    pub fn expire_after(mut self, ttl: Option<Duration>) -> Self {
        self.ttl = ttl;
        self
    }

    /// The key of a session's hash.
    pub fn key(session: &str) -> String {
        format!("condense:session:{}", digest(session))
    }

    fn error(&self, error: impl std::fmt::Display) -> StateStoreError {
        StateStoreError::Redis {
            url: self.shown.clone(),
            reason: error.to_string(),
        }
    }

    /// Runs `work` on the shared connection, connecting first if there is none; a failed call
    /// drops the connection so the next one reconnects.
    pub(crate) fn with<T>(
        &self,
        work: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, StateStoreError> {
        let mut slot = self
            .connection
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            let connection = self
                .client
                .get_connection_with_timeout(self.timeout)
                .map_err(|error| self.error(error))?;
            connection
                .set_read_timeout(Some(self.timeout))
                .and_then(|()| connection.set_write_timeout(Some(self.timeout)))
                .map_err(|error| self.error(error))?;
            *slot = Some(connection);
        }
        let Some(connection) = slot.as_mut() else {
            return Err(self.error("no connection"));
        };
        work(connection).map_err(|error| {
            *slot = None;
            self.error(error)
        })
    }
}

impl SessionStore for RedisSessionStore {
    fn location(&self) -> String {
        self.shown.clone()
    }

    /// Connects and sends `PING`.
    fn check(&self) -> Result<(), StateStoreError> {
        self.with(|connection| redis::cmd("PING").query::<String>(connection))
            .map(drop)
    }

    /// Walks the sessions' keys with `SCAN` (never `KEYS`, which stops the server while it
    /// runs) and reads each state; a key that expired meanwhile names nothing.
    fn named_handles(&self) -> Result<HashSet<String>, StateStoreError> {
        self.with(|connection| {
            let mut keys: Vec<String> = Vec::new();
            let mut cursor = 0u64;
            loop {
                let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg("condense:session:*")
                    .arg("COUNT")
                    .arg(1_000)
                    .query(connection)?;
                keys.extend(batch);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            let mut named = HashSet::new();
            for key in keys {
                let state: Option<Vec<u8>> = redis::cmd("HGET")
                    .arg(&key)
                    .arg("state")
                    .query(connection)?;
                if let Some(state) = state {
                    named.extend(handles_in(&state).map(str::to_owned));
                }
            }
            Ok(named)
        })
    }

    /// `condense:compaction-key`, set once (`SET … NX`) by whichever replica comes first.
    fn secret(&self) -> Result<Vec<u8>, StateStoreError> {
        let fresh: String = random_secret()
            .map_err(|reason| self.error(reason))?
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        let stored: String = self.with(|connection| {
            redis::cmd("SET")
                .arg("condense:compaction-key")
                .arg(&fresh)
                .arg("NX")
                .query::<Option<String>>(connection)?;
            redis::cmd("GET")
                .arg("condense:compaction-key")
                .query(connection)
        })?;
        (0..stored.len())
            .step_by(2)
            .map(|at| {
                stored
                    .get(at..at + 2)
                    .and_then(|pair| u8::from_str_radix(pair, 16).ok())
            })
            .collect::<Option<Vec<u8>>>()
            .filter(|key| key.len() == SECRET_BYTES)
            .ok_or_else(|| self.error("condense:compaction-key is not a key condense wrote"))
    }

    fn load(&self, session: &str) -> Result<Versioned, StateStoreError> {
        let key = Self::key(session);
        let (version, state): (Option<String>, Option<String>) = self.with(|connection| {
            redis::cmd("HMGET")
                .arg(&key)
                .arg("version")
                .arg("state")
                .query(connection)
        })?;
        let damaged = |why: String| format!("{}/{key} is damaged: {why}", self.shown);
        let version = match version.map(|version| version.parse::<u64>()) {
            None => return Ok(Versioned::default()),
            Some(Ok(version)) => version,
            // No version to compare against: the hash goes, and the next save starts it again.
            Some(Err(error)) => {
                self.with(|connection| redis::cmd("DEL").arg(&key).query::<i64>(connection))?;
                return Ok(Versioned {
                    discarded: Some(damaged(format!("its version: {error}"))),
                    ..Versioned::default()
                });
            }
        };
        let parsed = state
            .as_deref()
            .map(serde_json::from_str::<SessionState>)
            .unwrap_or_else(|| Ok(SessionState::default()));
        Ok(match parsed {
            Ok(state) => Versioned {
                state,
                version,
                discarded: None,
            },
            Err(error) => Versioned {
                state: SessionState::default(),
                version,
                discarded: Some(damaged(error.to_string())),
            },
        })
    }

    fn save(
        &self,
        session: &str,
        state: &SessionState,
        expected: u64,
    ) -> Result<Saved, StateStoreError> {
        let key = Self::key(session);
        let text = serde_json::to_string(state).map_err(|error| self.error(error))?;
        let won: i64 = self.with(|connection| {
            self.script
                .key(&key)
                .arg(expected.to_string())
                .arg((expected + 1).to_string())
                .arg(&text)
                .arg(self.ttl.map_or(0, |ttl| ttl.as_millis()).to_string())
                .invoke(connection)
        })?;
        Ok(if won == 1 {
            Saved::Stored(expected + 1)
        } else {
            Saved::Conflict
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_save_wins_only_at_the_version_it_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirSessionStore::new(dir.path().join("sessions"));
        let fresh = store.load("s/../weird key").unwrap();
        assert_eq!(fresh.version, 0);
        let state = SessionState {
            consecutive_failures: 2,
            ..SessionState::default()
        };
        assert_eq!(
            store.save("s/../weird key", &state, 0).unwrap(),
            Saved::Stored(1)
        );
        assert_eq!(
            store.save("s/../weird key", &state, 0).unwrap(),
            Saved::Conflict
        );
        let loaded = store.load("s/../weird key").unwrap();
        assert_eq!((loaded.version, loaded.state), (1, state));
        assert_eq!(store.load("another").unwrap().version, 0);
        // One file, named by hash, inside the directory.
        let files: Vec<_> = std::fs::read_dir(dir.path().join("sessions"))
            .unwrap()
            .collect();
        assert_eq!(files.len(), 1);
    }

    #[test]
    fn a_damaged_state_reads_as_a_fresh_one_and_is_replaced_on_save() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirSessionStore::new(dir.path());
        let path = store.path("s");
        std::fs::write(&path, "{not json").unwrap();
        let loaded = store.load("s").unwrap();
        assert_eq!(
            (loaded.version, &loaded.state),
            (0, &SessionState::default())
        );
        let why = loaded.discarded.unwrap();
        assert!(why.contains("damaged"), "{why}");
        assert_eq!(
            store.save("s", &SessionState::default(), 0).unwrap(),
            Saved::Stored(1)
        );
        assert_eq!(store.load("s").unwrap().version, 1);
    }

    /// A state older than the ttl is not used even before a sweep removes it: the session is
    /// judged afresh, and the next save (at the stored version) replaces it.
    #[test]
    fn an_expired_state_is_not_reused_before_the_sweep() {
        let dir = tempfile::tempdir().unwrap();
        let day = Duration::from_secs(86_400);
        let store = DirSessionStore::new(dir.path()).expire_after(Some(7 * day));
        let state = SessionState {
            consecutive_failures: 1,
            last_request_ms: Some(1),
            ..SessionState::default()
        };
        store.save("old", &state, 0).unwrap();
        assert_eq!(store.load("old").unwrap().state, state);
        condense_core::testing::backdate(&store.path("old"), 8 * day);
        let loaded = store.load("old").unwrap();
        assert_eq!(loaded.state, SessionState::default());
        assert_eq!(loaded.version, 1);
        assert!(loaded.discarded.unwrap().contains("expired"));
        assert_eq!(store.save("old", &state, 1).unwrap(), Saved::Stored(2));
        assert_eq!(store.load("old").unwrap().state, state);
    }

    /// A save sweeps the directory of states not written for the ttl (and of temporary files a
    /// crash left), at most once an hour; what is recent, and what is not a regular file, stays.
    #[test]
    fn states_not_saved_for_the_ttl_are_swept_after_a_save() {
        let dir = tempfile::tempdir().unwrap();
        let day = Duration::from_secs(86_400);
        let age = |path: &Path| condense_core::testing::backdate(path, 2 * day);
        let forever = DirSessionStore::new(dir.path());
        forever.save("stale", &SessionState::default(), 0).unwrap();
        forever.save("recent", &SessionState::default(), 0).unwrap();
        age(&forever.path("stale"));
        let crashed = dir.path().join(".abc.json.4242.tmp");
        std::fs::write(&crashed, "half").unwrap();
        age(&crashed);
        let not_a_file = dir.path().join("directory.json");
        std::fs::create_dir(&not_a_file).unwrap();
        // Without a ttl nothing is removed.
        forever.save("recent", &SessionState::default(), 1).unwrap();
        assert_eq!(forever.load("stale").unwrap().version, 1);

        let store = DirSessionStore::new(dir.path()).expire_after(Some(day));
        store.save("recent", &SessionState::default(), 2).unwrap();
        assert_eq!(store.load("stale").unwrap().version, 0, "expired: removed");
        assert!(!crashed.exists());
        assert_eq!(store.load("recent").unwrap().version, 3);
        assert!(not_a_file.is_dir());
        // Swept at most once an hour: a state aged now stays until the next sweep.
        age(&store.path("recent"));
        store.save("other", &SessionState::default(), 0).unwrap();
        assert_eq!(store.load("recent").unwrap().version, 3);
    }
}
