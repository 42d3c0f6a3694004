//! Originals in Redis (`--store redis://…`), beside the session states, so replicas on several
//! machines need nothing but Redis. Each original is one string key,
//! `condense:original:<handle>`, holding its bytes; every read checks them against the handle,
//! as the directory store does, so a changed value is an error, never a wrong original. The
//! proxy's sweep (`serve.originals_ttl_hours`) removes those no saved state names and nobody
//! read or wrote for that long (Redis's own idle time of the key).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use condense_host::{Store, StoreError, Swept, handle_of};

use crate::state::{RedisSessionStore, StateStoreError};

/// The key prefix of originals.
const PREFIX: &str = "condense:original:";

/// A store of originals in Redis.
#[derive(Debug)]
pub struct RedisOriginals {
    /// The connection (shared code with the state store: one way to talk to Redis).
    link: RedisSessionStore,
    shown: String,
}

impl RedisOriginals {
    /// Originals on the Redis server at `url`, each call bounded by `timeout`.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, StateStoreError> {
        let link = RedisSessionStore::new(url)?.with_timeout(timeout);
        let shown = crate::SessionStore::location(&link);
        Ok(RedisOriginals { link, shown })
    }

    /// Whether `location` names Redis rather than a directory.
    pub fn is_redis(location: &str) -> bool {
        location.starts_with("redis://") || location.starts_with("rediss://")
    }

    fn place(&self, handle: &str) -> PathBuf {
        PathBuf::from(format!("{}/{PREFIX}{handle}", self.shown))
    }

    /// Removes the originals nobody read or wrote for `unused_for` that `named` does not claim.
    pub fn sweep(
        &self,
        unused_for: Duration,
        named: &HashSet<String>,
    ) -> Result<Swept, StateStoreError> {
        let keys: Vec<String> = self.link.with(|connection| {
            let mut keys = Vec::new();
            let mut cursor = 0u64;
            loop {
                let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(format!("{PREFIX}*"))
                    .arg("COUNT")
                    .arg(1_000)
                    .query(connection)?;
                keys.extend(batch);
                if next == 0 {
                    return Ok(keys);
                }
                cursor = next;
            }
        })?;
        let mut swept = Swept::default();
        for key in keys {
            let handle = key.trim_start_matches(PREFIX);
            let (idle, size): (Option<u64>, u64) = self.link.with(|connection| {
                let idle = redis::cmd("OBJECT")
                    .arg("IDLETIME")
                    .arg(&key)
                    .query(connection)?;
                let size = redis::cmd("STRLEN").arg(&key).query(connection)?;
                Ok((idle, size))
            })?;
            if idle.is_none_or(|idle| idle < unused_for.as_secs()) {
                continue;
            }
            if named.contains(handle) {
                swept.kept_named += 1;
                continue;
            }
            match self
                .link
                .with(|connection| redis::cmd("DEL").arg(&key).query::<i64>(connection))
            {
                Ok(_) => {
                    swept.removed += 1;
                    swept.removed_bytes += size;
                }
                Err(_) => swept.failed += 1,
            }
        }
        Ok(swept)
    }
}

impl Store for RedisOriginals {
    fn put(&self, handle: &str, bytes: &[u8]) -> Result<(), StoreError> {
        if !condense_host::is_handle(handle) || handle_of(bytes) != handle {
            return Err(StoreError::BadHandle(handle.to_owned()));
        }
        self.link
            .with(|connection| {
                redis::cmd("SET")
                    .arg(format!("{PREFIX}{handle}"))
                    .arg(bytes)
                    .query::<()>(connection)
            })
            .map_err(|error| StoreError::Write {
                handle: handle.to_owned(),
                path: self.place(handle),
                source: std::io::Error::other(error.to_string()),
            })
    }

    fn get(&self, handle: &str) -> Result<Vec<u8>, StoreError> {
        if !condense_host::is_handle(handle) {
            return Err(StoreError::BadHandle(handle.to_owned()));
        }
        let bytes: Option<Vec<u8>> = self
            .link
            .with(|connection| {
                redis::cmd("GET")
                    .arg(format!("{PREFIX}{handle}"))
                    .query(connection)
            })
            .map_err(|error| StoreError::Read {
                path: self.place(handle),
                source: std::io::Error::other(error.to_string()),
            })?;
        let bytes = bytes.ok_or_else(|| StoreError::NotFound(handle.to_owned()))?;
        if handle_of(&bytes) != handle {
            return Err(StoreError::Corrupt {
                handle: handle.to_owned(),
                path: self.place(handle),
            });
        }
        Ok(bytes)
    }
}
