//! Where the workspace's tests find the recorded agent sessions.
//!
//! They live in `../shared/transcripts` beside the checkout (not copied in: see that folder's
//! README for their provenance and licence). `CONDENSE_TRANSCRIPTS` points elsewhere.

use std::path::PathBuf;

/// One recorded session.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// A short stable name for snapshots: folder and file stem, Claude Code ids cut to 8 characters
    /// (`claude-code/5f8cbb78`, `openai/swe-agent-marshmallow-1867`).
    pub name: String,
    pub path: PathBuf,
    pub bytes: Vec<u8>,
}

pub fn transcripts_dir() -> PathBuf {
    match std::env::var_os("CONDENSE_TRANSCRIPTS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/transcripts"),
    }
}

/// Every transcript, sorted by name. An error names the folder it could not read.
pub fn transcripts() -> std::io::Result<Vec<Transcript>> {
    let root = transcripts_dir();
    let mut found = Vec::new();
    for folder in ["anthropic", "claude-code", "openai"] {
        let dir = root.join(folder);
        let entries = std::fs::read_dir(&dir).map_err(|error| {
            std::io::Error::new(error.kind(), format!("{}: {error}", dir.display()))
        })?;
        for entry in entries {
            let path = entry?.path();
            let Some(stem) = path.file_stem().and_then(|stem| stem.to_str()) else {
                continue;
            };
            if !matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("json" | "jsonl")
            ) {
                continue;
            }
            let short = if folder == "claude-code" {
                &stem[..stem.len().min(8)]
            } else {
                stem
            };
            found.push(Transcript {
                name: format!("{folder}/{short}"),
                bytes: std::fs::read(&path)?,
                path,
            });
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// The transcript with this name.
pub fn transcript(name: &str) -> std::io::Result<Transcript> {
    transcripts()?
        .into_iter()
        .find(|t| t.name == name)
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no transcript named {name}"),
            )
        })
}
