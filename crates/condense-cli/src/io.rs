//! Reading sessions and writing results without ever losing data: output goes to a temporary
//! file beside its destination and is renamed into place, and the input is only replaced with
//! `--in-place`, after a backup.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use condense_core::Conversation;
use condense_formats::Format;

/// Where a session came from, for messages.
pub fn label(input: &Option<PathBuf>) -> String {
    match input {
        Some(path) if path.as_os_str() != "-" => path.display().to_string(),
        _ => "<stdin>".to_owned(),
    }
}

pub fn read_bytes(input: &Option<PathBuf>) -> Result<Vec<u8>> {
    match input {
        Some(path) if path.as_os_str() != "-" => {
            if path.is_dir() {
                bail!("{}: is a directory, not a session file", path.display());
            }
            std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))
        }
        _ => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context("<stdin>: cannot read")?;
            Ok(bytes)
        }
    }
}

pub fn read_session(
    input: &Option<PathBuf>,
    format: Option<Format>,
) -> Result<(Format, Conversation)> {
    let bytes = read_bytes(input)?;
    condense_formats::read(&bytes, format).with_context(|| label(input))
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, flushed, then
/// renamed over the destination.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = dir.join(format!(".{name}.{}.condense-tmp", std::process::id()));
    let written = std::fs::File::create(&temporary).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    if let Err(error) = written.and_then(|()| std::fs::rename(&temporary, path)) {
        let _ = std::fs::remove_file(&temporary);
        return Err(error).with_context(|| format!("{}: cannot write", path.display()));
    }
    Ok(())
}

/// Where the result goes: a file, the input itself (after a backup), or stdout.
#[derive(Debug)]
pub enum Destination {
    File(PathBuf),
    InPlace(PathBuf),
    Stdout,
}

impl Destination {
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        match self {
            Destination::File(path) => write_atomic(path, bytes),
            Destination::InPlace(path) => {
                let backup = PathBuf::from(format!("{}.bak", path.display()));
                std::fs::copy(path, &backup)
                    .with_context(|| format!("{}: cannot write the backup", backup.display()))?;
                write_atomic(path, bytes)
            }
            Destination::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)
                    .and_then(|()| out.flush())
                    .context("cannot write to stdout")
            }
        }
    }
}
