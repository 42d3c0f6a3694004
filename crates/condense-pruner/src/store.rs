//! Where replaced originals are kept, so that nothing condense prunes is lost.
//!
//! Stores are content-addressed: the handle is derived from the bytes ([`handle_of`]), so the
//! same output stored twice is one file, and a handle can be put in a placeholder before the
//! original is written (the pruner writes every original before it changes the conversation).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use condense_core::{Part, ToolOutput};
use sha2::{Digest, Sha256};

/// Hex digits of SHA-256 kept in a handle: 128 bits, collision-free for any store a person will
/// have, and short enough to cost few tokens in every placeholder.
const HANDLE_HEX_DIGITS: usize = 32;

/// Whether `text` has a handle's form: the first 128 bits of a SHA-256, as 32 lowercase hex
/// digits.
pub fn is_handle(text: &str) -> bool {
    text.len() == HANDLE_HEX_DIGITS
        && text
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// The handle of `bytes`: the first 128 bits of their SHA-256, in hex ([`is_handle`]).
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

/// Every handle written in `text`: each run of exactly 32 lowercase hex digits (the length
/// [`handle_of`] gives). A placeholder, a marker's `handle` field and a summary that quotes a placeholder all
/// write a handle so, whatever the surrounding format; what reads as a handle but is not one (a
/// hash of the same length) only keeps an original that a sweep could have removed.
pub fn handles_in(text: &[u8]) -> impl Iterator<Item = &str> {
    let hex = |byte: &u8| byte.is_ascii_digit() || (b'a'..=b'f').contains(byte);
    text.split(move |byte| !hex(byte))
        .filter(|run| run.len() == HANDLE_HEX_DIGITS)
        // Hex digits are ASCII, so a run is always UTF-8.
        .filter_map(|run| std::str::from_utf8(run).ok())
}

/// An output's bytes as the store keeps them: its text (so `condense recall` prints it as it
/// was), or its blocks as condense's parts in JSON. [`stored_output`] reads them back.
pub(crate) fn stored_bytes(
    content: &ToolOutput,
) -> Result<std::borrow::Cow<'_, [u8]>, serde_json::Error> {
    match content {
        ToolOutput::Text(text) => Ok(std::borrow::Cow::Borrowed(text.as_bytes())),
        ToolOutput::Parts(parts) => serde_json::to_vec(parts).map(std::borrow::Cow::Owned),
    }
}

/// An output as the tool returned it, from the bytes the store keeps for it (the pruner's form:
/// an output of blocks as condense's parts in JSON, a text output as its text). `None` when
/// the bytes are neither (a text output is UTF-8 by construction).
pub fn stored_output(bytes: &[u8]) -> Option<ToolOutput> {
    if bytes.starts_with(b"[{\"kind\":")
        && let Ok(parts) = serde_json::from_slice::<Vec<Part>>(bytes)
    {
        return Some(ToolOutput::Parts(parts));
    }
    std::str::from_utf8(bytes)
        .ok()
        .map(|text| ToolOutput::Text(text.to_owned()))
}

/// What [`DirStore::sweep`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Originals removed.
    pub removed: usize,
    /// Their bytes.
    pub removed_bytes: u64,
    /// Originals unused for the whole period but kept, because the caller still names them.
    pub kept_named: usize,
    /// Originals that could not be removed (each is left as it was).
    pub failed: usize,
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
    /// Something that is not a regular file sits where the entry goes (a FIFO, a device, a
    /// directory): reading it could block for ever, and it is not the store's to replace.
    #[error(
        "the original {handle} at {path} is not a regular file; the store neither reads nor replaces it"
    )]
    NotAFile {
        /// The handle.
        handle: String,
        /// The entry.
        path: PathBuf,
    },
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
        if !is_handle(handle) {
            return Err(StoreError::BadHandle(handle.to_owned()));
        }
        Ok(self.root.join(&handle[..2]).join(handle))
    }
}

impl DirStore {
    /// Removes the originals not written (nor stored again, see [`Store::put`]) for
    /// `unused_for` that `named` does not claim: a long-running proxy keeps an original for
    /// every output it ever pruned, and without this its store only grows. `named` answers for
    /// the handles something still points at (the proxy: every saved session state); an
    /// original it claims stays whatever its age.
    ///
    /// Only regular files whose name is a handle, in the folder of their first two digits, are
    /// ever removed: a symlink, a temporary file or anything a person put there is left alone.
    /// Only the root that cannot be read is an error; an entry that cannot be removed is counted
    /// in [`Swept::failed`] and left as it was.
    pub fn sweep(
        &self,
        unused_for: Duration,
        named: &dyn Fn(&str) -> bool,
    ) -> Result<Swept, StoreError> {
        let mut swept = Swept::default();
        let folders = match std::fs::read_dir(&self.root) {
            Ok(folders) => folders,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(swept),
            Err(source) => {
                return Err(StoreError::Read {
                    path: self.root.clone(),
                    source,
                });
            }
        };
        let now = SystemTime::now();
        for folder in folders.flatten() {
            let prefix = folder.file_name();
            let is_folder = folder
                .path()
                .symlink_metadata()
                .is_ok_and(|meta| meta.is_dir());
            let Some(prefix) = prefix.to_str().filter(|name| name.len() == 2 && is_folder) else {
                continue;
            };
            let Ok(entries) = std::fs::read_dir(folder.path()) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(handle) = name.to_str() else {
                    continue;
                };
                if !handle.starts_with(prefix) || self.path_of(handle).is_err() {
                    continue;
                }
                let Ok(meta) = entry.path().symlink_metadata() else {
                    continue;
                };
                let unused = meta
                    .modified()
                    .ok()
                    .and_then(|modified| now.duration_since(modified).ok())
                    .is_some_and(|age| age > unused_for);
                if !meta.is_file() || !unused {
                    continue;
                }
                if named(handle) {
                    swept.kept_named += 1;
                    continue;
                }
                match std::fs::remove_file(entry.path()) {
                    Ok(()) => {
                        swept.removed += 1;
                        swept.removed_bytes += meta.len();
                    }
                    Err(_) => swept.failed += 1,
                }
            }
            // An emptied folder stays: a put may be about to write into it (there are at most
            // 256 of them).
        }
        Ok(swept)
    }

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
            Ok(meta) if meta.is_file() => Ok(Some(())),
            Ok(_) => Err(StoreError::NotAFile {
                handle: handle.to_owned(),
                path: path.to_path_buf(),
            }),
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
            // Already there and intact: content addressing makes this the same original. Its
            // time is renewed, since a new placeholder now names it: a sweep of unused originals
            // ([`DirStore::sweep`]) goes by that time, and must not take an original between
            // this put and the save of the state that names it. Best effort: a store this
            // process may read but not write still serves.
            Ok(Some(())) if std::fs::read(&path).is_ok_and(|stored| stored == bytes) => {
                let _ = std::fs::File::options()
                    .append(true)
                    .open(&path)
                    .and_then(|file| file.set_modified(SystemTime::now()));
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

/// The store of a run that must leave nothing behind (a dry run, a preview of what a run would
/// do): what it is given is kept in memory; what it is asked for is looked up there, then in
/// the store below it (the configured one, read and never written), so that the run reads the
/// originals an earlier run kept, as the real run would.
pub struct ReadThrough {
    memory: MemoryStore,
    below: Box<dyn Store>,
}

impl std::fmt::Debug for ReadThrough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadThrough")
            .field("kept", &self.memory.len())
            .finish_non_exhaustive()
    }
}

impl ReadThrough {
    /// Over `below`, with nothing of its own yet.
    pub fn new(below: Box<dyn Store>) -> Self {
        ReadThrough {
            memory: MemoryStore::new(),
            below,
        }
    }
}

impl Store for ReadThrough {
    fn put(&self, handle: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.memory.put(handle, bytes)
    }

    fn get(&self, handle: &str) -> Result<Vec<u8>, StoreError> {
        match self.memory.get(handle) {
            Err(StoreError::NotFound(_)) => self.below.get(handle),
            found => found,
        }
    }
}

#[cfg(test)]
mod tests {
    use condense_core::testing::backdate as age;

    use super::*;
    use std::os::unix::fs::FileTypeExt;

    /// A dry run reads what earlier runs kept and keeps what it is given to itself: the
    /// directory below it is never written.
    #[test]
    fn a_read_through_store_reads_below_and_writes_nothing_there() {
        let dir = tempfile::tempdir().unwrap();
        let kept = b"an original an earlier run kept";
        let earlier = handle_of(kept);
        DirStore::new(dir.path()).put(&earlier, kept).unwrap();
        let store = ReadThrough::new(Box::new(DirStore::new(dir.path())));
        assert_eq!(store.get(&earlier).unwrap(), kept);
        let fresh = b"an original of this run";
        let handle = handle_of(fresh);
        store.put(&handle, fresh).unwrap();
        assert_eq!(store.get(&handle).unwrap(), fresh);
        assert!(matches!(
            DirStore::new(dir.path()).get(&handle),
            Err(StoreError::NotFound(_))
        ));
        let missing = handle_of(b"never stored");
        assert!(matches!(store.get(&missing), Err(StoreError::NotFound(_))));
    }

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

    /// A FIFO where an entry goes (made by mistake or by someone else) would block a read for
    /// ever: both reading and storing say what it is, at once.
    #[test]
    fn a_fifo_at_an_entry_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::new(dir.path());
        let bytes = b"an output";
        let handle = handle_of(bytes);
        let path = store.path_of(&handle).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(matches!(
            store.get(&handle),
            Err(StoreError::NotAFile { .. })
        ));
        assert!(matches!(
            store.put(&handle, bytes),
            Err(StoreError::NotAFile { .. })
        ));
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_fifo()
        );
    }

    #[test]
    fn a_sweep_removes_only_old_unnamed_originals() {
        const DAY: Duration = Duration::from_secs(86_400);
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::new(dir.path());
        let put = |bytes: &[u8]| {
            let handle = handle_of(bytes);
            store.put(&handle, bytes).unwrap();
            let path = dir.path().join(&handle[..2]).join(&handle);
            (handle, path)
        };
        let (old, old_path) = put(b"old and unnamed");
        let (named, named_path) = put(b"old but a state names it");
        let (fresh, _) = put(b"written an hour ago");
        age(&old_path, 3 * DAY);
        age(&named_path, 3 * DAY);
        age(&dir.path().join(&fresh[..2]).join(&fresh), DAY / 24);
        // Things a sweep never touches, however old: a symlink, a file whose name is no handle,
        // a handle outside its folder.
        let stranger = dir.path().join(&old[..2]).join("notes.txt");
        std::fs::write(&stranger, b"mine").unwrap();
        age(&stranger, 3 * DAY);
        let misplaced = dir.path().join(&fresh);
        std::fs::write(&misplaced, b"misplaced").unwrap();
        age(&misplaced, 3 * DAY);
        let link = dir.path().join(&named[..2]).join(handle_of(b"a link"));
        std::os::unix::fs::symlink(&named_path, &link).unwrap();

        let swept = store.sweep(2 * DAY, &|handle| handle == named).unwrap();

        assert_eq!(
            swept,
            Swept {
                removed: 1,
                removed_bytes: b"old and unnamed".len() as u64,
                kept_named: 1,
                failed: 0,
            }
        );
        assert!(matches!(store.get(&old), Err(StoreError::NotFound(_))));
        assert_eq!(store.get(&named).unwrap(), b"old but a state names it");
        assert_eq!(store.get(&fresh).unwrap(), b"written an hour ago");
        assert!(stranger.exists() && misplaced.exists() && link.symlink_metadata().is_ok());
        // Nothing to sweep in a store never written.
        let empty = DirStore::new(dir.path().join("never"));
        assert_eq!(empty.sweep(DAY, &|_| false).unwrap(), Swept::default());
    }

    /// Storing an original again renews its time: a new placeholder names it, and the state
    /// that holds the placeholder is saved after the put.
    #[test]
    fn storing_again_renews_an_original() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::new(dir.path());
        let bytes = b"pruned again by another session";
        let handle = handle_of(bytes);
        store.put(&handle, bytes).unwrap();
        let path = dir.path().join(&handle[..2]).join(&handle);
        age(&path, Duration::from_secs(30 * 86_400));
        store.put(&handle, bytes).unwrap();
        let age = SystemTime::now()
            .duration_since(std::fs::metadata(&path).unwrap().modified().unwrap())
            .unwrap_or_default();
        assert!(age < Duration::from_secs(3_600), "{age:?}");
        let swept = store
            .sweep(Duration::from_secs(86_400), &|_| false)
            .unwrap();
        assert_eq!(swept.removed, 0);
    }

    #[test]
    fn handles_are_found_in_any_text() {
        let a = handle_of(b"a");
        let b = handle_of(b"b");
        let text = format!(
            r#"{{"content":"[output pruned; condense recall {a}]","marker":{{"handle":"{b}"}},"sha":"{a}0","short":"{}"}}"#,
            &b[..31]
        );
        let found: Vec<&str> = handles_in(text.as_bytes()).collect();
        assert_eq!(
            found,
            [a.as_str(), b.as_str()],
            "a longer or shorter run is no handle"
        );
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
