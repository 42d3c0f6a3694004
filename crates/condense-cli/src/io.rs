//! Reading sessions and writing results without ever losing data.
//!
//! The rules, each from a way a careless or hostile run once lost a file:
//! - input, output, report and backup never name the same file (by inode and canonical path, not
//!   by spelling), checked before anything is written;
//! - a regular file is replaced atomically: a temporary file beside it, given the original's
//!   mode and owner before a byte is written, then a rename; a symlink is resolved first, so the
//!   link stays and its target is replaced; a device, FIFO or socket is written through,
//!   never renamed over;
//! - `--in-place` first writes a backup that never overwrites another (`FILE.bak`, `FILE.1.bak`,
//!   …, created with `O_EXCL`), reads it back to verify it, and refuses if the input changed
//!   since it was read;
//! - temporary files are removed on SIGINT, SIGTERM and SIGHUP, and those of dead processes are
//!   removed by the next run that writes into the same directory.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use condense_core::Conversation;
use condense_formats::Format;

use crate::temp;
use crate::usage_error;

/// The UTF-8 byte order mark some editors put in front of JSON.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Where a session came from, for messages.
pub fn label(input: &Option<PathBuf>) -> String {
    match input {
        Some(path) if path.as_os_str() != "-" => path.display().to_string(),
        _ => "<stdin>".to_owned(),
    }
}

/// The input file, or `None` for stdin.
pub fn input_path(input: &Option<PathBuf>) -> Option<&Path> {
    input.as_deref().filter(|path| path.as_os_str() != "-")
}

pub fn read_bytes(input: &Option<PathBuf>) -> Result<Vec<u8>> {
    match input_path(input) {
        Some(path) => {
            if path.is_dir() {
                bail!("{}: is a directory, not a session file", path.display());
            }
            std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))
        }
        None => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context("<stdin>: cannot read")?;
            Ok(bytes)
        }
    }
}

/// A session as read: its bytes (for the in-place check), whether it began with a byte order
/// mark (written back the same way), its format and conversation.
#[derive(Debug)]
pub struct Session {
    pub bytes: Vec<u8>,
    pub bom: bool,
    pub format: Format,
    pub conversation: Conversation,
}

impl Session {
    /// The conversation in the session's format, with its byte order mark if it had one.
    pub fn encode(&self, conversation: &Conversation) -> Result<Vec<u8>> {
        // Nothing changed: the bytes that came, blank lines, line ends and all.
        if *conversation == self.conversation {
            return Ok(self.bytes.clone());
        }
        let mut body = condense_formats::write(self.format, conversation)?;
        if self.format.is_jsonl() {
            body = self.in_its_line_ends(body);
        }
        if !self.bom {
            return Ok(body);
        }
        let mut out = Vec::with_capacity(BOM.len() + body.len());
        out.extend_from_slice(BOM);
        out.extend_from_slice(&body);
        Ok(out)
    }
}

impl Session {
    /// A log written with the input's own line ends: CRLF when every line of the input ended
    /// so (a log that went through Windows), and no newline after the last line when the input
    /// had none. The writer's lines never hold a bare newline of their own (JSON escapes it),
    /// so each is a line end. Blank lines between records are not kept once anything changed.
    fn in_its_line_ends(&self, body: Vec<u8>) -> Vec<u8> {
        let input = self.bytes.strip_prefix(BOM).unwrap_or(&self.bytes);
        let newlines = input.iter().filter(|&&byte| byte == b'\n').count();
        let crlf =
            newlines > 0 && input.windows(2).filter(|pair| pair == b"\r\n").count() == newlines;
        let mut body = if crlf {
            let mut out = Vec::with_capacity(body.len() + body.len() / 64);
            for &byte in &body {
                if byte == b'\n' {
                    out.push(b'\r');
                }
                out.push(byte);
            }
            out
        } else {
            body
        };
        if !input.is_empty() && !input.ends_with(b"\n") {
            while body
                .last()
                .is_some_and(|byte| matches!(byte, b'\n' | b'\r'))
            {
                body.pop();
            }
        }
        body
    }
}

/// Reads and parses a session. A forced `format` that the content contradicts is a usage error
/// (exit 2): reading an Anthropic body as OpenAI would silently mangle it.
pub fn read_session(input: &Option<PathBuf>, format: Option<Format>) -> Result<Session> {
    let bytes = read_bytes(input)?;
    let bom = bytes.starts_with(BOM);
    if let Some(forced) = format
        && let Some(detected) = condense_formats::detect_confidently(&bytes)
        && detected != forced
    {
        return Err(usage_error(format!(
            "{}: --format {forced} contradicts the content, which is {detected}",
            label(input)
        )));
    }
    let (format, conversation) =
        condense_formats::read(&bytes, format).with_context(|| label(input))?;
    Ok(Session {
        bytes,
        bom,
        format,
        conversation,
    })
}

/// What a file is, for telling two spellings of one file apart.
#[derive(Debug)]
struct Identity {
    /// The canonical path (the parent's, joined with the name, when the file does not exist yet).
    path: PathBuf,
    /// Device and inode, when it exists.
    inode: Option<(u64, u64)>,
    /// A character device such as `/dev/null`: writing it twice loses nothing.
    char_device: bool,
}

fn identity(path: &Path) -> Identity {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let metadata = std::fs::metadata(path).ok();
    let canonical = path.canonicalize().ok().unwrap_or_else(|| {
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let parent = parent
            .canonicalize()
            .unwrap_or_else(|_| parent.to_path_buf());
        match path.file_name() {
            Some(name) => parent.join(name),
            None => parent,
        }
    });
    Identity {
        path: canonical,
        inode: metadata.as_ref().map(|m| (m.dev(), m.ino())),
        char_device: metadata
            .as_ref()
            .is_some_and(|m| m.file_type().is_char_device()),
    }
}

fn same(a: &Identity, b: &Identity) -> bool {
    if a.char_device && b.char_device {
        return false;
    }
    match (a.inode, b.inode) {
        (Some(x), Some(y)) => x == y,
        _ => a.path == b.path,
    }
}

/// The files one run touches, checked against each other before anything is written.
#[derive(Debug)]
pub struct Plan {
    pub destination: Destination,
    pub report: Option<Report>,
}

/// Where `--report` goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Report {
    File(PathBuf),
    /// `--report -`.
    Stdout,
}

impl Report {
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        match self {
            Report::File(path) => write_file(path, bytes),
            Report::Stdout => write_stdout(bytes),
        }
    }
}

/// `-` names stdout for `-o` and `--report`, as it names stdin for the input.
fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Where the result goes: a file, the input itself (after a backup), or stdout.
#[derive(Debug)]
pub enum Destination {
    File(PathBuf),
    InPlace {
        input: PathBuf,
        backup: PathBuf,
    },
    Stdout,
    /// `--dry-run`: nothing.
    Nowhere,
}

impl Plan {
    /// Refuses any two of input, output, report and backup that are one file.
    pub fn new(
        input: Option<&Path>,
        output: Option<&Path>,
        in_place: bool,
        report: Option<&Path>,
        dry_run: bool,
    ) -> Result<Plan> {
        let destination = match (in_place, output, input) {
            _ if dry_run => Destination::Nowhere,
            (true, _, None) => return Err(usage_error("--in-place needs a FILE, not stdin")),
            (true, _, Some(input)) => Destination::InPlace {
                input: input.to_path_buf(),
                backup: free_backup_name(input, report)?,
            },
            (false, Some(output), _) if !is_stdout(output) => {
                Destination::File(output.to_path_buf())
            }
            (false, _, _) => Destination::Stdout,
        };
        let report = report.map(|path| {
            if is_stdout(path) {
                Report::Stdout
            } else {
                Report::File(path.to_path_buf())
            }
        });
        if matches!(destination, Destination::Stdout) && report == Some(Report::Stdout) {
            return Err(usage_error(
                "--report - and the session would both go to stdout: give the session -o FILE (or --dry-run for the report alone)",
            ));
        }
        let mut named: Vec<(&str, &Path)> = Vec::new();
        if let Some(input) = input {
            named.push(("the input", input));
        }
        match &destination {
            Destination::File(path) => named.push(("--output", path)),
            Destination::InPlace { backup, .. } => named.push(("the backup", backup)),
            Destination::Stdout | Destination::Nowhere => {}
        }
        if let Some(Report::File(report)) = &report {
            named.push(("--report", report));
        }
        refuse_same(&named)?;
        Ok(Plan {
            destination,
            report,
        })
    }
}

/// Refuses any two of `named` (what the user calls each, and its path) that are one file:
/// compared by device and inode where they exist, so a link or a `./` spelling is caught too.
pub fn refuse_same(named: &[(&str, &Path)]) -> Result<()> {
    let identities: Vec<Identity> = named.iter().map(|(_, path)| identity(path)).collect();
    for later in 1..named.len() {
        for earlier in 0..later {
            if same(&identities[earlier], &identities[later]) {
                let hint = if named[earlier].0 == "the input" && named[later].0 == "--output" {
                    "; use --in-place to replace the input (it keeps a backup)"
                } else {
                    ""
                };
                return Err(usage_error(format!(
                    "{} and {} are the same file ({}); nothing was written{hint}",
                    named[earlier].0,
                    named[later].0,
                    named[later].1.display()
                )));
            }
        }
    }
    Ok(())
}

/// `FILE.bak`, else `FILE.1.bak`, `FILE.2.bak`, …: the first name that is free and is not the
/// report's. Taken for real with `O_EXCL` when the backup is written.
fn free_backup_name(input: &Path, report: Option<&Path>) -> Result<PathBuf> {
    let report = report.map(identity);
    for n in 0..10_000u32 {
        let candidate = if n == 0 {
            PathBuf::from(format!("{}.bak", input.display()))
        } else {
            PathBuf::from(format!("{}.{n}.bak", input.display()))
        };
        let taken = std::fs::symlink_metadata(&candidate).is_ok()
            || report
                .as_ref()
                .is_some_and(|report| same(report, &identity(&candidate)));
        if !taken {
            return Ok(candidate);
        }
    }
    bail!(
        "{}: 10,000 backups exist beside it; remove some",
        input.display()
    )
}

impl Destination {
    /// Writes the result. For `--in-place`, `read` is what was read from the input: the backup
    /// holds exactly that, and the input is not replaced if it changed since.
    pub fn write(&self, bytes: &[u8], read: &[u8]) -> Result<()> {
        match self {
            Destination::File(path) => write_file(path, bytes),
            Destination::InPlace { input, backup } => {
                write_backup(input, backup, read)?;
                write_file(input, bytes)
            }
            Destination::Stdout => write_stdout(bytes),
            Destination::Nowhere => Ok(()),
        }
    }
}

pub fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}

/// Copies `read` to a new `backup` (never over an existing file), verifies it, and checks that
/// `input` still holds `read`.
fn write_backup(input: &Path, backup: &Path, read: &[u8]) -> Result<()> {
    let metadata =
        std::fs::metadata(input).with_context(|| format!("{}: cannot read", input.display()))?;
    let failed = || format!("{}: cannot write the backup", backup.display());
    let mut file = match OpenOptions::new().write(true).create_new(true).open(backup) {
        Ok(file) => file,
        // The name was free when the run began: another run on the same file took it since.
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => bail!(
            "{}: appeared while condense ran (another run on the same file?); the input was not replaced",
            backup.display()
        ),
        Err(error) => return Err(error).with_context(failed),
    };
    // The input's permissions before a byte is written: a private session stays private.
    keep_mode_and_owner(&file, &metadata);
    let written = file.write_all(read).and_then(|()| file.sync_all());
    drop(file);
    let back = written.and_then(|()| std::fs::read(backup));
    if back.as_deref().ok() != Some(read) {
        // Ours (made with O_EXCL above), and not a backup: a truncated copy left beside the
        // input (a full disk) would pass for one on the next run.
        let _ = std::fs::remove_file(backup);
    }
    let back = back.with_context(failed)?;
    if back != read {
        bail!(
            "{}: the backup does not read back as the input; the input was not replaced",
            backup.display()
        );
    }
    let now = std::fs::read(input).with_context(|| format!("{}: cannot read", input.display()))?;
    if now != read {
        bail!(
            "{}: changed while condense ran (another run?); it was not replaced, and {} holds what was read",
            input.display(),
            backup.display()
        );
    }
    Ok(())
}

/// Writes `bytes` to `path` without ever leaving it half-written or replacing what is not a
/// regular file (see the module's rules).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    // Asked of the path itself, the kernel following its links: `/dev/stdout` is a link to
    // `/proc/self/fd/1`, whose target, a pipe, has no name to resolve to.
    let metadata = std::fs::metadata(path).ok();
    if let Some(metadata) = &metadata {
        if metadata.is_dir() {
            bail!("{}: is a directory", path.display());
        }
        if !metadata.is_file() {
            // A device, FIFO or socket: write through it; renaming would replace it.
            let mut file = OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("{}: cannot open for writing", path.display()))?;
            return file
                .write_all(bytes)
                .and_then(|()| file.flush())
                .with_context(|| format!("{}: cannot write", path.display()));
        }
    }
    // A regular file (or none yet): the temporary file goes beside the link's target, and the
    // rename replaces the target, not the link.
    let target = resolve_symlinks(path)?;
    write_atomic(&target, bytes, metadata.as_ref())
        .with_context(|| format!("{}: cannot write", path.display()))
}

/// The file a chain of symlinks ends at (which may not exist yet).
fn resolve_symlinks(path: &Path) -> Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                let link = std::fs::read_link(&current)
                    .with_context(|| format!("{}: cannot read the link", current.display()))?;
                current = match current.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(current),
        }
    }
    bail!("{}: too many levels of symbolic links", path.display())
}

fn write_atomic(path: &Path, bytes: &[u8], existing: Option<&Metadata>) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    temp::remove_stale(dir);
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = temp::Registered::new(dir.join(temp::name(&name)));
    let result = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temporary.path())
        .and_then(|mut file| {
            // Permissions first, so not even the empty file is ever more open than the original.
            if let Some(metadata) = existing {
                keep_mode_and_owner(&file, metadata);
            }
            file.write_all(bytes)?;
            file.sync_all()?;
            temp::hold_for_tests();
            std::fs::rename(temporary.path(), path)
        });
    if result.is_ok() {
        temporary.renamed();
    }
    result
}

/// The replaced file's permissions and, where the process may, its owner.
fn keep_mode_and_owner(file: &File, metadata: &Metadata) {
    use std::os::unix::fs::MetadataExt;
    let _ = file.set_permissions(metadata.permissions());
    // Only root may give a file away; anyone else keeps ownership and that is fine.
    let _ = std::os::unix::fs::fchown(file, Some(metadata.uid()), Some(metadata.gid()));
}
