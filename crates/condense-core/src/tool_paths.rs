//! Which files a tool call touched, and whether it read them or changed them: shared by the
//! extractive summarizer (the files of a summary) and the pruner (a read made stale by a later
//! call on the same path).

use std::borrow::Cow;

use serde_json::Value;

/// Input keys that name a file or directory in the tools seen in real sessions (Claude Code's
/// `file_path`, OpenHands' `path`, SWE-agent's `filename`, notebooks, search roots).
const PATH_KEYS: [&str; 6] = [
    "file_path",
    "path",
    "notebook_path",
    "filename",
    "filepath",
    "dir",
];

/// Tools that write the files they name.
const WRITING_TOOLS: [&str; 10] = [
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "write_file",
    "edit_file",
    "create_file",
    "apply_patch",
    "create",
    "edit",
];

/// Tools whose output shows the content of the file they name.
const READING_TOOLS: [&str; 6] = ["Read", "read", "read_file", "view_file", "open", "cat"];

/// Whether the call's output showed the content of the files it names (a read, not a listing
/// or a search): Claude Code's `Read`, opencode's `read`, OpenHands' editor `view` of a file, a
/// shell `cat`, `head`, `tail` or `nl` of named files.
pub fn shows_content(tool: &str, input: &Value) -> bool {
    if READING_TOOLS.contains(&tool) {
        return true;
    }
    if tool == "str_replace_editor" {
        return input.get("command").and_then(Value::as_str) == Some("view")
            && input
                .get("path")
                .and_then(Value::as_str)
                .is_some_and(|path| {
                    path.rsplit('/')
                        .next()
                        .is_some_and(|name| name.contains('.'))
                });
    }
    command_of(input).is_some_and(|command| {
        let first = command.split_whitespace().next().unwrap_or_default();
        ["cat", "head", "tail", "nl"].contains(&first)
            && !command.contains('|')
            && !command.contains('>')
            && !command.contains("&&")
            && !command.contains(';')
    })
}

/// Tools that search or list files and change nothing.
const LOOKING_TOOLS: [&str; 12] = [
    "Grep",
    "Glob",
    "LS",
    "grep",
    "glob",
    "list",
    "ls",
    "list_dir",
    "list_directory",
    "find_file",
    "search_file",
    "search_dir",
];

/// Programs that print what they find and change no file (without a redirection): reads,
/// searches, listings, comparisons. `sed` without `-i`, `find` without an action that writes or
/// runs, and `git`'s reading subcommands are looked at more closely.
const LOOKING_PROGRAMS: [&str; 29] = [
    "cat", "nl", "head", "tail", "less", "more", "grep", "egrep", "fgrep", "rg", "ag", "ack", "ls",
    "tree", "wc", "file", "stat", "du", "pwd", "which", "type", "sort", "uniq", "cut", "diff",
    "cmp", "echo", "printf", "cd",
];

/// `git` subcommands that only read the repository.
const LOOKING_GIT: [&str; 7] = ["status", "log", "diff", "show", "grep", "blame", "ls-files"];

/// Whether a call only looked: read, searched or listed files, and changed nothing: a reading,
/// searching or listing tool, an editor's `view`, or a shell command every part of which runs
/// a program that only prints (`cat`, `grep`, `ls`, `sed` without `-i`, `git log`, …) with no
/// redirection into a file and no here-document. What it found is in its output; a summary that lists the files read says what
/// such a call did. Anything not known to only look does not.
pub fn only_looks(tool: &str, input: &Value) -> bool {
    if READING_TOOLS.contains(&tool) || LOOKING_TOOLS.contains(&tool) {
        return true;
    }
    if tool == "str_replace_editor" {
        return input.get("command").and_then(Value::as_str) == Some("view");
    }
    let Some(command) = command_of(input) else {
        return false;
    };
    let parts = simple_commands(&command);
    !parts.is_empty() && parts.iter().all(|part| part_only_looks(part))
}

/// Whether the call only wrote the files it names, through an editor rather than a command:
/// Claude Code's `Write`, `Edit`, `MultiEdit`, opencode's `write` and `edit`, a patch tool,
/// OpenHands' editor other than its `view`. A shell command that writes (`sed -i`, `cat >`)
/// runs something, and says what in its words.
pub fn only_writes(tool: &str, input: &Value) -> bool {
    if tool == "str_replace_editor" {
        return input
            .get("command")
            .and_then(Value::as_str)
            .is_some_and(|command| command != "view");
    }
    WRITING_TOOLS.contains(&tool) && command_of(input).is_none()
}

/// Whether a call changed nothing though it names files to change: an editor's call
/// ([`only_writes`]) whose result is an error (`is_error`: Claude Code's "String to replace not
/// found", a `Write` of a file not read first). An editor refuses the whole edit; a shell command
/// that failed may have written part of what it meant to, and is not one.
pub fn edit_failed(tool: &str, input: &Value, is_error: Option<bool>) -> bool {
    is_error == Some(true) && only_writes(tool, input)
}

/// The simple commands of `command`, split where a shell runs the next one (`|`, `&&`, `||`,
/// `;`, a line break) outside quotes; `None` in place of a part that redirects into a file or
/// feeds a here-document, which may write.
fn simple_commands(command: &str) -> Vec<Option<&str>> {
    let bytes = command.as_bytes();
    let mut parts = Vec::new();
    let mut start = 0;
    let mut writes = false;
    let mut quote: Option<u8> = None;
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        match quote {
            Some(open) => {
                if byte == b'\\' && open == b'"' {
                    at += 1;
                } else if byte == open {
                    quote = None;
                }
            }
            None => match byte {
                b'\'' | b'"' => quote = Some(byte),
                b'\\' => at += 1,
                b'>' => {
                    // Into /dev/null or another descriptor (`2>&1`) writes no file.
                    let target = command[at + 1..].trim_start_matches('>').trim_start();
                    writes |= !(target.starts_with("/dev/null") || target.starts_with('&'));
                }
                b'<' if bytes.get(at + 1) == Some(&b'<') => writes = true,
                b'|' | b'&' | b';' | b'\n' => {
                    // A lone `&` after `>` or `<` is part of a redirection; elsewhere a
                    // background job, which ends the command like `;`.
                    let redirection = byte == b'&' && at > 0 && b"<>".contains(&bytes[at - 1]);
                    if !redirection {
                        parts.push((!writes).then_some(&command[start..at]));
                        writes = false;
                        if bytes.get(at + 1) == Some(&byte) && byte != b'\n' && byte != b';' {
                            at += 1;
                        }
                        start = at + 1;
                    }
                }
                _ => {}
            },
        }
        at += 1;
    }
    parts.push((!writes).then_some(&command[start.min(command.len())..]));
    parts.retain(|part| part.is_none_or(|part| !part.trim().is_empty()));
    parts
}

/// Whether one simple command (see [`simple_commands`]) only looks.
fn part_only_looks(part: &Option<&str>) -> bool {
    let Some(part) = part else {
        return false;
    };
    let mut words = part.split_whitespace();
    let Some(program) = words.next() else {
        return false;
    };
    let program = program.rsplit('/').next().unwrap_or(program);
    let mut args = words;
    match program {
        "sed" => !args.any(|arg| arg.starts_with("-i") || arg.starts_with("--in-place")),
        "find" => !args.any(|arg| {
            [
                "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fls",
            ]
            .iter()
            .any(|action| arg.starts_with(action))
        }),
        "git" => args
            .find(|arg| !arg.starts_with('-'))
            .is_some_and(|sub| LOOKING_GIT.contains(&sub)),
        _ => LOOKING_PROGRAMS.contains(&program),
    }
}

/// `path` as one entry of a list of files, whatever its last `/`: a directory is named with it
/// and without it (`ls src/`, `cd src`), and a summary's list and the replay's count take the two
/// for one; looked for without it, it finds both. The root stays `/`.
pub fn entry(path: &str) -> &str {
    match path.trim_end_matches('/') {
        "" => path,
        trimmed => trimmed,
    }
}

/// `path` as an absolute, lexically normal path: relative to `cwd` when it is relative and the
/// session recorded a working directory, `.` and `..` resolved without touching the disk.
pub fn normalize(path: &str, cwd: Option<&str>) -> String {
    let joined = match cwd {
        Some(cwd) if !path.starts_with('/') && !path.starts_with('~') => format!("{cwd}/{path}"),
        _ => path.to_owned(),
    };
    let absolute = joined.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|last| *last != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            part => parts.push(part),
        }
    }
    let body = parts.join("/");
    if absolute { format!("/{body}") } else { body }
}

/// The directory a call runs in when it names one (Codex's `shell` and `exec_command` take a
/// `workdir`, its `local_shell` action a `working_directory`): the paths of its command are
/// relative to it, not to the session's working directory.
pub fn call_directory(input: &Value) -> Option<&str> {
    ["workdir", "working_directory"]
        .iter()
        .find_map(|key| input.get(*key).and_then(Value::as_str))
        .filter(|dir| !dir.is_empty())
}

/// Shell commands that change the files they name.
const WRITING_COMMANDS: [&str; 10] = [
    "sed -i",
    "tee ",
    "mv ",
    "cp ",
    "rm ",
    "touch ",
    "mkdir ",
    "patch ",
    "git apply",
    "git checkout",
];

/// The paths in a call's input (borrowed from it: the pruner asks this of every call on every
/// request), and whether the call changed them.
pub fn touched<'i>(tool: &str, input: &'i Value) -> (Vec<&'i str>, bool) {
    let mut paths = Vec::new();
    if let Value::Object(fields) = input {
        for key in PATH_KEYS {
            match fields.get(key) {
                Some(Value::String(path)) if !path.is_empty() => paths.push(path.as_str()),
                Some(Value::Array(list)) => {
                    paths.extend(list.iter().filter_map(Value::as_str));
                }
                _ => {}
            }
        }
    }
    for piece in command_pieces(input) {
        paths.extend(paths_in_command(piece));
    }
    let patched = patch_paths(input);
    let patches = !patched.is_empty();
    paths.extend(patched);
    let command = command_of(input);
    let editor_writes = tool == "str_replace_editor"
        && input
            .get("command")
            .and_then(Value::as_str)
            .is_some_and(|c| c != "view");
    let writes = WRITING_TOOLS.contains(&tool)
        || editor_writes
        || patches
        || command.is_some_and(|command| {
            WRITING_COMMANDS.iter().any(|w| command.contains(w))
                || command.contains(" > ")
                || command.contains(" >> ")
                || command.contains("cat <<")
        });
    paths.dedup();
    (paths, writes)
}

/// The shell command of a call, for the tools that run one: a string (`command`, or `cmd` as
/// Codex's `exec_command` has it), Codex's `shell` argument list, whose script is the last
/// word of `["bash", "-lc", SCRIPT]` and otherwise the words joined, or the shell tool's
/// `commands`, whole command lines run one after another (one script, a line each).
pub fn command_of(input: &Value) -> Option<Cow<'_, str>> {
    let pieces = command_pieces(input);
    let between = if input.get("commands").is_some() {
        "\n"
    } else {
        " "
    };
    let command = match pieces.as_slice() {
        [] => return None,
        [one] => Cow::Borrowed(*one),
        several => Cow::Owned(several.join(between)),
    };
    let shell_like = command.contains(' ') || command.contains('/') || command.len() > 12;
    shell_like.then_some(command)
}

/// A call's command as words borrowed from its input: the one string, the script of a shell
/// invoked with `-c`, each word of an argument list, or each of the shell tool's `commands`.
fn command_pieces(input: &Value) -> Vec<&str> {
    if let Some(Value::Array(commands)) = input.get("commands") {
        return commands.iter().filter_map(Value::as_str).collect();
    }
    match input.get("command").or_else(|| input.get("cmd")) {
        Some(Value::String(command)) => vec![command.as_str()],
        Some(Value::Array(words)) => {
            let words: Vec<&str> = words.iter().filter_map(Value::as_str).collect();
            match words.as_slice() {
                [shell, flag, script]
                    if shell
                        .rsplit('/')
                        .next()
                        .is_some_and(|name| name.ends_with("sh"))
                        && flag.starts_with('-')
                        && flag.contains('c') =>
                {
                    vec![*script]
                }
                _ => words,
            }
        }
        _ => Vec::new(),
    }
}

/// The files a patch in Codex's `apply_patch` format names (`*** Add File: P`, `*** Update
/// File: P`, `*** Delete File: P`, `*** Move to: P`): the custom tool's whole input, or the
/// `input` (or `patch`) argument of the function form.
fn patch_paths(input: &Value) -> Vec<&str> {
    let text = match input {
        Value::String(text) => Some(text.as_str()),
        Value::Object(fields) => ["input", "patch"]
            .iter()
            .find_map(|key| fields.get(*key).and_then(Value::as_str)),
        _ => None,
    };
    let Some(text) = text.filter(|text| text.trim_start().starts_with("*** Begin Patch")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            [
                "*** Add File: ",
                "*** Update File: ",
                "*** Delete File: ",
                "*** Move to: ",
            ]
            .iter()
            .find_map(|marker| line.strip_prefix(marker))
        })
        .map(str::trim)
        .filter(|path| !path.is_empty())
        .collect()
}

/// Words of a shell command that look like file paths: they hold a `/` or end in an extension.
/// The command is read as a shell reads it: a quoted string is one word (a pattern, a `sed`
/// expression or a script passed with `-c` names no file by its pieces), a search's pattern is
/// not a file, nor is a word directly before `(`, nor the body of a here-document fed to `cat`
/// or `tee` (what the command writes, not what it names); the body of one fed to an
/// interpreter is a script it runs, whose quoted paths count.
pub fn paths_in_command(command: &str) -> Vec<&str> {
    let mut paths = Vec::new();
    // After a search command, its first word that is not an option is the pattern (unless
    // `-e` gave it): `grep -rn "sys.exit" src/` names `src/`, not `sys.exit`.
    let mut pattern_next = false;
    let mut words = shell_words(command).into_iter();
    let (mut previous, mut key_next) = ("", false);
    while let Some(word) = words.next() {
        if SEARCHES.contains(&word.rsplit('/').next().unwrap_or(word)) {
            pattern_next = true;
            continue;
        }
        // What follows `-m` is a module (`python -m pkg.mod`), a message or a mode; the first
        // word after `git config` and its options a key (`user.email`), after `mix` a task
        // (`deps.get`): none is a file.
        if word == "-m" {
            words.next();
            continue;
        }
        let names_next = previous == "git" && word == "config" || word == "mix";
        previous = word;
        if key_next && !word.starts_with('-') {
            key_next = false;
            continue;
        }
        key_next |= names_next;
        if pattern_next {
            match word {
                "-e" | "--regexp" => {
                    words.next();
                    pattern_next = false;
                }
                option if option.starts_with('-') => {
                    pattern_next &= !option.starts_with("--regexp=");
                }
                _ => {
                    pattern_next = false;
                    continue;
                }
            }
        }
        // A test's node id (`tests/test_a.py::test_b`, pytest's) names its file.
        let word = word.split_once("::").map_or(word, |(file, _)| file);
        let word = word.trim_end_matches([':', '.', ',']);
        if is_path_like(word) {
            paths.push(word);
        }
    }
    paths
}

/// Commands whose first word that is not an option is a pattern to search for.
const SEARCHES: [&str; 6] = ["grep", "egrep", "fgrep", "rg", "ag", "ack"];

/// Where a shell command's words part: blanks, and the operators around a file name
/// (`;|&<>()`, `` ` ``, and `=` and `,` of an option's value).
fn parts_words(c: char) -> bool {
    c.is_whitespace() || ";|&<>()`=,".contains(c)
}

/// The words of a shell command, outside what it writes: a quoted run stays in its word (a
/// word quoted whole is given without its quotes); a here-string's word (`<<<`) and the body of
/// a here-document fed to `cat` or `tee` (after `<<WORD`, to the line `WORD`: a file's content)
/// are left out, and so is a word directly before `(` (a call in a script, not a file). The
/// body of a here-document fed to anything else (`python3 - <<'PY'`) is a script the command
/// runs: its words are read, the paths it quotes among them.
fn shell_words(command: &str) -> Vec<&str> {
    let mut words = Vec::new();
    // Here-documents whose bodies (a file's content) start on the next line: their ending
    // words, and whether tabs before the ending word are allowed (`<<-`).
    let mut pending: Vec<(&str, bool)> = Vec::new();
    // The first word of the command the scan is in (`cat`, `python3`), once it has one.
    let mut first: Option<&str> = None;
    let mut at = 0;
    while at < command.len() {
        let rest = &command[at..];
        if rest.starts_with('\n') && !pending.is_empty() {
            at = past_bodies(command, at + 1, &mut pending);
            first = None;
        } else if let Some(after) = rest.strip_prefix("<<<") {
            let (_, end) = word_at(command, command.len() - after.len());
            at = end;
        } else if let Some(after) = rest.strip_prefix("<<") {
            let dash = after.starts_with('-');
            let start = command.len() - after.len() + usize::from(dash || after.starts_with('~'));
            let (ending, end) = word_at(command, start);
            let ending = unquoted(ending).trim_start_matches('\\');
            let content = first
                .and_then(|first| first.rsplit('/').next())
                .is_some_and(|name| name == "cat" || name == "tee");
            if content && !ending.is_empty() {
                pending.push((ending, dash));
            }
            at = end;
        } else if let Some(c) = rest.chars().next().filter(|&c| parts_words(c)) {
            if ";|&()`\n".contains(c) {
                first = None;
            }
            at += c.len_utf8();
        } else {
            let (word, end) = word_at(command, at);
            let word = unquoted(word);
            first = first.or(Some(word));
            if !command[end..].starts_with('(') {
                words.push(word);
            }
            at = end;
        }
    }
    words
}

/// The word that starts at `start` (after any blanks), and where it ends: up to what parts
/// words outside quotes, quoted runs and escaped characters included.
fn word_at(command: &str, start: usize) -> (&str, usize) {
    let bytes = command.as_bytes();
    let mut start = start;
    while start < bytes.len() && (bytes[start] == b' ' || bytes[start] == b'\t') {
        start += 1;
    }
    let mut at = start;
    while at < bytes.len() {
        match bytes[at] {
            quote @ (b'\'' | b'"') => {
                let mut close = at + 1;
                while close < bytes.len() && bytes[close] != quote {
                    // Within double quotes a backslash escapes the quote.
                    close += if quote == b'"' && bytes[close] == b'\\' {
                        2
                    } else {
                        1
                    };
                }
                at = (close + 1).min(bytes.len());
            }
            b'\\' => {
                at += 1 + command[at + 1..].chars().next().map_or(0, char::len_utf8);
            }
            _ => {
                let Some(c) = command[at..].chars().next() else {
                    break;
                };
                if parts_words(c) {
                    break;
                }
                at += c.len_utf8();
            }
        }
    }
    let at = at.min(bytes.len());
    // A quote's close may fall inside a character only when the command ends there.
    let end = (at..=bytes.len())
        .find(|&end| command.is_char_boundary(end))
        .unwrap_or(bytes.len());
    (&command[start..end], end)
}

/// `word` without the quotes around it, when it is quoted whole (`'a.py'`, `"src/x.rs"`).
fn unquoted(word: &str) -> &str {
    ['\'', '"']
        .iter()
        .find_map(|&quote| {
            word.strip_prefix(quote)
                .and_then(|inner| inner.strip_suffix(quote))
                .filter(|inner| !inner.contains(quote))
        })
        .unwrap_or(word)
}

/// Where the command goes on after the bodies of the `pending` here-documents, which start at
/// `at`, each to its ending word alone on a line.
fn past_bodies<'c>(command: &'c str, mut at: usize, pending: &mut Vec<(&'c str, bool)>) -> usize {
    for (ending, tabs) in pending.drain(..) {
        while at < command.len() {
            let end = command[at..]
                .find('\n')
                .map_or(command.len(), |line| at + line);
            let line = &command[at..end];
            let line = if tabs {
                line.trim_start_matches('\t')
            } else {
                line
            };
            at = (end + 1).min(command.len());
            if line.trim_end() == ending {
                break;
            }
        }
    }
    at
}

fn is_path_like(word: &str) -> bool {
    if word.len() < 3 || word.starts_with('-') || word.contains("://") || word.starts_with("/dev/")
    {
        return false;
    }
    // A sed substitution (`s/old/new/g`, `316s/old/new/`, `1,9s|a|b|`) is not a path.
    let command = word.trim_start_matches(|c: char| c.is_ascii_digit() || c == ',' || c == '$');
    if command.starts_with("s/") && command.matches('/').count() >= 3 {
        return false;
    }
    if !word
        .chars()
        .all(|c| c.is_alphanumeric() || "/._-~+@".contains(c))
    {
        return false;
    }
    // An address (`git log --author=a@b.com`), not a file: `@` names a file only in a
    // path (`node_modules/@types/x`).
    if word.contains('@') && !word.contains('/') {
        return false;
    }
    // A revision (`origin/main~15`, `HEAD^2`): a name, then `~` or `^` and a count, if any.
    if let Some(at) = word.rfind(['~', '^'])
        && at > 0
        && word[at + 1..].chars().all(|c| c.is_ascii_digit())
    {
        return false;
    }
    // A revision range (`master..HEAD`, `v1.2...origin/main`): two dots or three between two
    // names. A path's `..` is a whole step of it (`../src`, `a/..`), between slashes or at an
    // end.
    if word.match_indices("..").any(|(at, _)| {
        let after = word[at..].trim_start_matches('.');
        at > 0 && !word[..at].ends_with('/') && !after.is_empty() && !after.starts_with('/')
    }) {
        return false;
    }
    let has_letter = word.chars().any(char::is_alphabetic);
    let extension = word.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && (1..=5).contains(&ext.len())
            && ext.chars().all(|c| c.is_ascii_alphanumeric())
            && ext.chars().any(|c| c.is_ascii_alphabetic())
    });
    has_letter && (word.contains('/') || extension)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn only_an_editors_call_marked_as_an_error_changed_nothing() {
        let edit = json!({ "file_path": "/a/b.rs", "old_string": "a", "new_string": "b" });
        assert!(edit_failed("Edit", &edit, Some(true)));
        assert!(!edit_failed("Edit", &edit, Some(false)));
        assert!(!edit_failed("Edit", &edit, None));
        let view = json!({ "command": "view", "path": "/w/a.c" });
        assert!(!edit_failed("str_replace_editor", &view, Some(true)));
        let shell = json!({ "command": "sed -i 's/a/b/' a.c" });
        assert!(!edit_failed("bash", &shell, Some(true)));
    }

    #[test]
    fn a_call_only_looks_when_it_reads_searches_or_lists_and_writes_nothing() {
        let bash = |command: &str| only_looks("bash", &json!({ "command": command }));
        assert!(only_looks("Read", &json!({ "file_path": "/a/b.rs" })));
        assert!(only_looks("Grep", &json!({ "pattern": "fn main" })));
        assert!(only_looks(
            "str_replace_editor",
            &json!({ "command": "view", "path": "/w/src/a.c" })
        ));
        assert!(!only_looks(
            "str_replace_editor",
            &json!({ "command": "str_replace", "path": "/w/src/a.c" })
        ));
        assert!(!only_looks("Edit", &json!({ "file_path": "/a/b.rs" })));
        assert!(bash("nl -ba django/db/utils.py | sed -n '150,170p'"));
        assert!(bash(
            "cd /testbed && grep -rn \"a|b; c\" src/ 2>/dev/null | head -20"
        ));
        assert!(bash("find . -name '*.py' | wc -l"));
        assert!(bash("git diff && git status"));
        assert!(bash("ls -la 2>&1"));
        // What writes, runs or is not known to only look does not.
        assert!(!bash("sed -i 's/a/b/' x.py"));
        assert!(!bash("grep x a.py > hits.txt"));
        assert!(!bash("cat <<'EOF' > a.py\nprint(1)\nEOF"));
        assert!(!bash("find . -name '*.pyc' -delete"));
        assert!(!bash("git checkout a.py"));
        assert!(!bash("python3 reproduce.py"));
        assert!(!bash("ls && rm -rf build"));
        assert!(!bash(""));
        assert!(!only_looks("TodoWrite", &json!({ "todos": [] })));
    }

    proptest! {
        /// Any command, quotes unfinished, escapes and here-documents cut anywhere, multi-byte
        /// text included: its paths are read without a panic, each a piece of the command
        /// without blanks or quotes; and whether it only looks is told without a panic, never
        /// for one that redirects into a file (quotes and descriptors aside).
        #[test]
        fn any_command_gives_pieces_of_itself(
            command in "([a-z./_]{1,8}|[ '\"\\\\<>|;()=&\n\t-]|é|<<-?'?EOF'?|EOF|<<<){0,24}"
        ) {
            let looks = only_looks("bash", &serde_json::json!({ "command": command }));
            let plain = !command.contains(['\'', '"', '\\', '&']) && !command.contains("/dev/null");
            prop_assert!(!(looks && plain && command.contains('>')), "{command:?}");
            for path in paths_in_command(&command) {
                prop_assert!(command.contains(path), "{path:?} in {command:?}");
                prop_assert!(!path.contains([' ', '\'', '"', '\n']), "{path:?}");
            }
        }
    }

    #[test]
    fn structured_inputs_name_their_paths() {
        assert_eq!(
            touched("Read", &json!({"file_path": "/src/lib.rs"})),
            (vec!["/src/lib.rs"], false)
        );
        assert_eq!(
            touched("Edit", &json!({"file_path": "a.rs", "old_string": "x"})),
            (vec!["a.rs"], true)
        );
        let view = json!({"command": "view", "path": "/w/src/main.c"});
        assert_eq!(
            touched("str_replace_editor", &view),
            (vec!["/w/src/main.c"], false)
        );
        let edit = json!({"command": "str_replace", "path": "/w/src/main.c"});
        assert!(touched("str_replace_editor", &edit).1);
    }

    /// Codex's tools: `shell` takes an argument list (a script after `bash -lc`, or the words
    /// of one command), `exec_command` a `cmd`, and `apply_patch` a patch in its own format.
    #[test]
    fn codex_calls_name_their_paths() {
        let script = json!({"command": ["bash", "-lc", "cat src/lib.rs"], "workdir": "/w"});
        assert!(shows_content("shell", &script));
        assert_eq!(touched("shell", &script), (vec!["src/lib.rs"], false));
        assert_eq!(command_of(&script).as_deref(), Some("cat src/lib.rs"));
        let words = json!({"command": ["sed", "-n", "1,80p", "src/main.rs"]});
        assert_eq!(touched("shell", &words), (vec!["src/main.rs"], false));
        assert_eq!(
            command_of(&words).as_deref(),
            Some("sed -n 1,80p src/main.rs")
        );
        let exec = json!({"cmd": "nl -ba crates/a/src/lib.rs", "yield_time_ms": 1000});
        assert!(shows_content("exec_command", &exec));
        let patch = json!(
            "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** Add File: docs/new.md\n+hi\n*** End Patch"
        );
        assert_eq!(
            touched("apply_patch", &patch),
            (vec!["src/lib.rs", "docs/new.md"], true)
        );
        // The function form, under another tool name: still a write of those files.
        let function = json!({"input": patch});
        assert_eq!(
            touched("patch", &function),
            (vec!["src/lib.rs", "docs/new.md"], true)
        );
        assert_eq!(touched("note", &json!("no patch here")), (vec![], false));
    }

    #[test]
    fn reads_and_paths_are_recognised() {
        assert!(shows_content("Read", &json!({"file_path": "/a.rs"})));
        assert!(shows_content("bash", &json!({"command": "cat src/lib.rs"})));
        assert!(!shows_content(
            "bash",
            &json!({"command": "cat a.rs | grep x"})
        ));
        assert!(!shows_content("Grep", &json!({"pattern": "x"})));
        assert!(shows_content(
            "str_replace_editor",
            &json!({"command": "view", "path": "/w/a.c"})
        ));
        assert!(!shows_content(
            "str_replace_editor",
            &json!({"command": "view", "path": "/w/src"})
        ));
        assert_eq!(normalize("src/../lib.rs", Some("/w")), "/w/lib.rs");
        assert_eq!(normalize("/w/./a.rs", None), "/w/a.rs");
        assert_eq!(normalize("a.rs", None), "a.rs");
    }

    #[test]
    fn commands_name_their_paths() {
        let sed = json!({"command": "sed -i 's/a/b/' django/forms.py && cat setup.cfg"});
        let (paths, writes) = touched("bash", &sed);
        assert_eq!(paths, vec!["django/forms.py", "setup.cfg"]);
        assert!(writes);
        let grep = json!({"command": "grep -rn \"class Foo\" src/ 2>&1 | head -n 20"});
        let (paths, writes) = touched("bash", &grep);
        assert_eq!(paths, vec!["src/"]);
        assert!(!writes);
        assert!(paths_in_command("curl https://x.org/a.py -o /dev/null 3.14 v1.2").is_empty());
        assert_eq!(
            paths_in_command("git log --author=me@example.com && ls node_modules/@types/x"),
            ["node_modules/@types/x"]
        );
        assert_eq!(
            paths_in_command("pytest tests/test_domain_py.py::test_xref -x"),
            ["tests/test_domain_py.py"]
        );
    }

    /// The shell tool's `commands` are whole command lines, run one after another: each names
    /// its paths, a writing one makes the call a write, and the call only looks when every line
    /// does.
    #[test]
    fn the_shell_tool_s_commands_are_lines_of_one_script() {
        let reads = json!({"commands": ["cat src/lib.rs", "grep -n parse src/parser.rs"],
            "timeout_ms": 10000, "max_output_length": null});
        assert_eq!(
            touched("shell", &reads),
            (vec!["src/lib.rs", "src/parser.rs"], false)
        );
        assert!(only_looks("shell", &reads));
        assert_eq!(
            command_of(&reads).as_deref(),
            Some("cat src/lib.rs\ngrep -n parse src/parser.rs")
        );
        let writes = json!({"commands": ["ls src/", "sed -i 's/a/b/' src/lib.rs"]});
        assert_eq!(
            touched("shell", &writes),
            (vec!["src/", "src/lib.rs"], true)
        );
        assert!(!only_looks("shell", &writes));
    }

    /// What a command writes or searches for is not a file it names: a here-document's body
    /// (the script a heredoc writes), a quoted pattern or script (`grep "a.b c"`, `python -c`,
    /// a sed expression, with or without an address), a here-string. A path quoted whole is
    /// one, and the words after a here-document's body are read again.
    #[test]
    fn what_a_command_writes_or_searches_names_no_file() {
        let heredoc = "cat <<'EOF' > reproduce_issue.py\nimport subprocess, sys\nsubprocess.run(['pylint', 'a/b.py'])\nsys.exit(0)\nEOF\npython3 reproduce_issue.py";
        assert_eq!(
            paths_in_command(heredoc),
            ["reproduce_issue.py", "reproduce_issue.py"]
        );
        let tabs = "cat <<-END >> notes.md\n\tsee src/x.rs\n\tEND\ncat docs/y.md";
        assert_eq!(paths_in_command(tabs), ["notes.md", "docs/y.md"]);
        assert_eq!(
            paths_in_command(
                "python -c \"import os; print(os.path.join('a', 'b.py'))\" && ls src/"
            ),
            ["src/"]
        );
        assert_eq!(
            paths_in_command(
                "sed -i '316s/return NotImplemented/return False/' sympy/core/basic.py"
            ),
            ["sympy/core/basic.py"]
        );
        assert_eq!(
            paths_in_command("sed -i 1261s/a/b/ x/basic.py && sed -n '/def f/,/^$/p' y.py"),
            ["x/basic.py", "y.py"]
        );
        assert_eq!(
            paths_in_command("grep -rn \"sys.exit\" pylint/ | grep -v 'test_x.py'"),
            ["pylint/"]
        );
        assert_eq!(
            paths_in_command("cat <<< 'a.py' && cat 'src/é.rs' \"b.rs\""),
            ["src/é.rs", "b.rs"]
        );
        // A module, a message, a configuration key, a task and a revision are no files.
        assert_eq!(
            paths_in_command("python -m pytest.main tests/a.py && git commit -m fix.py"),
            ["tests/a.py"]
        );
        assert_eq!(
            paths_in_command(
                "git config --global user.email && git log origin/main~15 HEAD^ -- src/a.rs"
            ),
            ["src/a.rs"]
        );
        assert_eq!(
            paths_in_command("mix deps.get && mix test test/a_test.exs"),
            ["test/a_test.exs"]
        );
        assert_eq!(
            paths_in_command(
                "git log --oneline master..HEAD v1.2...origin/main -- ../docs/a.md src/../b.py"
            ),
            ["../docs/a.md", "src/../b.py"]
        );
        // Unfinished quotes and a lone backslash end the command without a panic.
        assert!(paths_in_command("echo 'a.py").is_empty());
        assert!(paths_in_command("echo \"é\\").is_empty());
        assert_eq!(paths_in_command("cat a\\ b.py c.py"), ["c.py"]);
        // A script fed to an interpreter is run: the paths it quotes are the command's, its
        // calls are not.
        let script = "python3 - <<'PY'\nimport sys\ntext = open('src/app.py').read()\nsys.stdout.write(text)\nPY\ncat notes.md";
        assert_eq!(paths_in_command(script), ["src/app.py", "notes.md"]);
    }
}
