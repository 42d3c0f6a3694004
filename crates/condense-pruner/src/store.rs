//! Where replaced originals are kept, so that nothing condense prunes is lost.
//!
//! Stores are content-addressed: the handle is derived from the bytes ([`handle_of`]), so the
//! same output stored twice is one file, and a handle can be put in a placeholder before the
//! original is written (the pruner writes every original before it changes the conversation).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// Hex digits of SHA-256 kept in a handle: 128 bits, collision-free for any store a person will
/// have, and short enough to cost few tokens in every placeholder.
const HANDLE_HEX_DIGITS: usize = 32;

/// The handle of `bytes`: the first 128 bits of their SHA-256, in hex.
pub fn handle_of(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    // Written digit by digit: a `format!` per byte was a quarter of this function's time, and
    // the pruner calls it for every candidate it prices.
    let mut handle = String::with_capacity(HANDLE_HEX_DIGITS);
    for byte in &digest[..HANDLE_HEX_DIGITS / 2] {
        handle.push(char::from(HEX[usize::from(byte >> 4)]));
        handle.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    handle
}

#[derive(Debug, thiserror::Error)]
/// Why the store could not keep or give back an original.
#[non_exhaustive]
pub enum StoreError {
    #[error("cannot write the original {handle} to {path}: {source}")]
    /// An original could not be written.
    Write {
        /// Its handle.
        handle: String,
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    /// An entry could not be read.
    Read {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    #[error("no original is stored under `{0}`")]
    /// Nothing is stored under this handle.
    NotFound(String),
    /// The entry's bytes do not hash to its handle: corrupted, truncated or replaced.
    #[error("the original {handle} at {path} is corrupt: its content does not match its handle")]
    Corrupt {
        /// The handle.
        handle: String,
        /// The entry.
        path: PathBuf,
    },
    /// The entry (or its folder) is a symlink, which could point anywhere outside the store.
    #[error("the original {handle} at {path} is a symlink; the store never follows one")]
    Symlink {
        /// The handle.
        handle: String,
        /// The entry.
        path: PathBuf,
    },
    #[error("`{0}` is not a handle (expected {HANDLE_HEX_DIGITS} hex digits)")]
    /// Not a handle.
    BadHandle(String),
}

/// A store of originals, keyed by [`handle_of`] their bytes.
pub trait Store: Send + Sync {
    /// Keeps `bytes` under `handle` (which is `handle_of(bytes)`). Storing what is already there
    /// is not an error.
    fn put(&self, handle: &str, bytes: &[u8]) -> Result<(), StoreError>;
    /// The bytes stored under `handle`.
    fn get(&self, handle: &str) -> Result<Vec<u8>, StoreError>;
}

/// Originals as files under a directory: `<dir>/<first two hex digits>/<handle>`. Each file is
/// written to a temporary name beside it and renamed, so a crash never leaves half an original.
///
/// Every read checks the bytes against the handle, and symlinks inside the store are never
/// followed: a corrupted, truncated or replaced entry is an error that names it, never an
/// original returned with a wrong content. Storing again over a damaged entry repairs it, since
/// the caller holds the true bytes, so a new placeholder never points at a corrupt original.
#[derive(Debug, Clone)]
pub struct DirStore {
    root: PathBuf,
}

impl DirStore {
    /// A store rooted at `root` (created when the first original is kept).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DirStore { root: root.into() }
    }

    /// The directory it keeps originals in.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path_of(&self, handle: &str) -> Result<PathBuf, StoreError> {
        let valid = handle.len() == HANDLE_HEX_DIGITS
            && handle
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !valid {
            return Err(StoreError::BadHandle(handle.to_owned()));
        }
        Ok(self.root.join(&handle[..2]).join(handle))
    }
}

impl DirStore {
    /// The entry's state: absent, a regular file, or something that must not be trusted (a
    /// symlink at the entry or its folder).
    fn entry(&self, handle: &str, path: &Path) -> Result<Option<()>, StoreError> {
        let symlink = |path: &Path| {
            std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink())
        };
        if let Some(folder) = path.parent()
            && symlink(folder)
        {
            return Err(StoreError::Symlink {
                handle: handle.to_owned(),
                path: folder.to_path_buf(),
            });
        }
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => Err(StoreError::Symlink {
                handle: handle.to_owned(),
                path: path.to_path_buf(),
            }),
            Ok(_) => Ok(Some(())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StoreError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }
}

impl Store for DirStore {
    fn put(&self, handle: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.path_of(handle)?;
        let failed = |source| StoreError::Write {
            handle: handle.to_owned(),
            path: path.clone(),
            source,
        };
        match self.entry(handle, &path) {
            // Already there and intact: content addressing makes this the same original.
            Ok(Some(())) if std::fs::read(&path).is_ok_and(|stored| stored == bytes) => {
                return Ok(());
            }
            // A symlink in place of the entry is replaced below (the rename replaces the link,
            // not what it points at); a symlinked folder cannot be written without following it.
            Err(StoreError::Symlink { path: at, .. }) if at == path => {}
            Err(error) => return Err(error),
            // Absent or damaged: (re)written below.
            Ok(_) => {}
        }
        let dir = path.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(dir).map_err(failed)?;
        remove_stale_temporaries(dir);
        let temporary = dir.join(format!(".{handle}.{}.tmp", std::process::id()));
        let written = std::fs::File::create(&temporary).and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        });
        if let Err(error) = written.and_then(|()| std::fs::rename(&temporary, &path)) {
            let _ = std::fs::remove_file(&temporary);
            return Err(failed(error));
        }
        Ok(())
    }

    fn get(&self, handle: &str) -> Result<Vec<u8>, StoreError> {
        let path = self.path_of(handle)?;
        if self.entry(handle, &path)?.is_none() {
            return Err(StoreError::NotFound(handle.to_owned()));
        }
        let bytes = std::fs::read(&path).map_err(|source| StoreError::Read {
            path: path.clone(),
            source,
        })?;
        if handle_of(&bytes) != handle {
            return Err(StoreError::Corrupt {
                handle: handle.to_owned(),
                path,
            });
        }
        Ok(bytes)
    }
}

/// Removes `.HANDLE.PID.tmp` files in `dir` whose process is gone: a run killed while writing
/// an original leaves one, and no later run would ever use that name again. Only where `/proc`
/// tells which processes live; anything else is left alone.
fn remove_stale_temporaries(dir: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix('.')?.strip_suffix(".tmp"))
            .and_then(|rest| rest.rsplit_once('.'))
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Originals in memory, for tests and for harnesses that keep them elsewhere themselves.
#[derive(Debug, Default)]
pub struct MemoryStore {
    entries: Mutex<HashMap<String, Vec<u8>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// How many originals it holds.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<u8>>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Store for MemoryStore {
    fn put(&self, handle: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.lock()
            .entry(handle.to_owned())
            .or_insert_with(|| bytes.to_vec());
        Ok(())
    }

    fn get(&self, handle: &str) -> Result<Vec<u8>, StoreError> {
        self.lock()
            .get(handle)
            .cloned()
            .ok_or_else(|| StoreError::NotFound(handle.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dir_store_gives_back_what_it_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::new(dir.path());
        let bytes = "fn main() {}\n".repeat(1000);
        let handle = handle_of(bytes.as_bytes());
        store.put(&handle, bytes.as_bytes()).unwrap();
        store.put(&handle, bytes.as_bytes()).unwrap();
        assert_eq!(store.get(&handle).unwrap(), bytes.as_bytes());
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join(&handle[..2]))
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(
            leftovers,
            vec![std::ffi::OsString::from(&handle)],
            "no temporary file left"
        );
    }

    #[test]
    fn a_dead_writer_s_temporary_is_swept_by_the_next_put() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::new(dir.path());
        let bytes = b"an original";
        let handle = handle_of(bytes);
        let shard = dir.path().join(&handle[..2]);
        std::fs::create_dir_all(&shard).unwrap();
        let stale = shard.join(format!(".{handle}.999999999.tmp"));
        std::fs::write(&stale, b"half").unwrap();
        store.put(&handle, bytes).unwrap();
        assert!(!stale.exists());
        assert_eq!(store.get(&handle).unwrap(), bytes);
    }

    #[test]
    fn unknown_and_malformed_handles_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::new(dir.path());
        let missing = handle_of(b"never stored");
        assert!(matches!(store.get(&missing), Err(StoreError::NotFound(_))));
        assert!(matches!(
            store.get("../../etc/passwd"),
            Err(StoreError::BadHandle(_))
        ));
    }

    #[test]
    fn handles_are_content_addresses() {
        assert_eq!(handle_of(b"abc"), handle_of(b"abc"));
        assert_ne!(handle_of(b"abc"), handle_of(b"abd"));
        assert_eq!(handle_of(b"abc").len(), HANDLE_HEX_DIGITS);
        // The first 128 bits of SHA-256("abc") (FIPS 180-2's example), lowercase: handles made
        // by earlier versions stay valid.
        assert_eq!(handle_of(b"abc"), "ba7816bf8f01cfea414140de5dae2223");
    }
}
