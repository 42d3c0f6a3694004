//! Temporary files: named so that their owner can be found, removed when a signal ends the run,
//! and swept up by a later run when their process died without removing them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Suffix of every temporary file the CLI makes: `.NAME.PID.condense-tmp`.
const SUFFIX: &str = ".condense-tmp";

/// Temporary files that exist right now; a signal removes them before the process exits.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn pending() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PENDING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The temporary name for a file called `name`, owned by this process.
pub fn name(name: &str) -> String {
    format!(".{name}.{}{SUFFIX}", std::process::id())
}

/// A temporary path, registered for removal on a signal from before it is created, and removed
/// on drop unless it was renamed into place.
#[derive(Debug)]
pub struct Registered {
    path: PathBuf,
    renamed: bool,
}

impl Registered {
    pub fn new(path: PathBuf) -> Registered {
        pending().push(path.clone());
        Registered {
            path,
            renamed: false,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// It is the destination now: nothing to remove.
    pub fn renamed(mut self) {
        self.renamed = true;
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if !self.renamed {
            let _ = std::fs::remove_file(&self.path);
        }
        pending().retain(|path| path != &self.path);
    }
}

/// On SIGINT, SIGTERM or SIGHUP: remove the temporary files, then exit with 128 + the signal's
/// number, as a shell reports a process the signal killed.
pub fn install_signal_cleanup() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            for path in pending().drain(..) {
                let _ = std::fs::remove_file(path);
            }
            std::process::exit(128 + signal);
        }
    });
}

/// Removes `.NAME.PID.condense-tmp` files in `dir` whose process is gone. Only where `/proc`
/// tells which processes live; a file of a live process, or of a PID that cannot be checked, is
/// left alone.
pub fn remove_stale(dir: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let own = std::process::id();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(name) = file_name.to_str() else {
            continue;
        };
        let Some(pid) = owner(name) else { continue };
        if pid != own
            && !Path::new("/proc").join(pid.to_string()).exists()
            && entry.file_type().is_ok_and(|kind| kind.is_file())
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The PID in `.NAME.PID.condense-tmp`.
fn owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?.strip_suffix(SUFFIX)?;
    let (_, pid) = rest.rsplit_once('.')?;
    pid.parse().ok()
}

/// Tests of the signal path need a run that is inside a write when the signal comes:
/// `CONDENSE_TEST_HOLD_WRITE_MS` makes the run wait that long with its temporary file written and
/// not yet renamed. Nothing else reads it.
pub fn hold_for_tests() {
    if let Some(ms) = std::env::var("CONDENSE_TEST_HOLD_WRITE_MS")
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

#[cfg(test)]
mod tests {
    use super::owner;

    #[test]
    fn the_owner_is_read_from_the_name() {
        assert_eq!(owner(".out.jsonl.4242.condense-tmp"), Some(4242));
        assert_eq!(owner(".a.b.c.7.condense-tmp"), Some(7));
        assert_eq!(owner("out.jsonl"), None);
        assert_eq!(owner(".out.jsonl.x.condense-tmp"), None);
    }
}
