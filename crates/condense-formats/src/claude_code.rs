//! Claude Code session logs: one JSON object per line. `user` and `assistant` lines of the main
//! thread make the conversation; the several lines of one assistant reply (same `message.id`, on
//! consecutive lines) become one message with one wire record per line, so they can be written
//! back as the lines they were. Sidechain (subagent) lines, titles (`summary`) and client notices
//! (`system`) are kept beside the conversation, never mixed into it.
//!
//! Claude Code resumes a session along its `parentUuid` chain, back from the last message: a
//! branch the person left, and everything before the `compact_boundary` line it writes when it
//! compacts the session on its own (a new root, its summary on the line after), are not sent
//! again. Those lines go beside the conversation too, written back as they came (a replay
//! reads the log whole instead, see [`read_as`]).

use std::collections::{HashMap, HashSet};

use condense_core::{
    ContentShape, Conversation, JsonMap, Message, Part, Role, SideKind, SideRecord, WireRecord,
};
use serde_json::Value;

use crate::blocks::{content_from_parts, parts_from_content};
use crate::jsonl::{self, push_line};
use crate::order::{ORDER, ordered_like, skeleton};
use crate::reading::{RESTATES, Reading};
use crate::{FormatError, Location, text};

/// The flag of the user line that holds a compaction's summary: Claude Code's own, and the one
/// condense writes (Claude Code resumes from such a line).
pub(crate) const COMPACT_SUMMARY: &str = "isCompactSummary";

/// Whether `message` was read from a line flagged as a compaction's summary.
pub(crate) fn is_compact_summary(message: &Message) -> bool {
    message
        .wire
        .iter()
        .any(|record| record.fields.get(COMPACT_SUMMARY) == Some(&Value::Bool(true)))
}

/// The model Claude Code names on an assistant line it wrote itself, with no request behind it
/// (an API error, "No response requested." after a local command).
const SYNTHETIC_MODEL: &str = "<synthetic>";

/// The model that wrote an assistant message, where its line names it (`message.model`; the
/// last line of a reply spread over several).
pub(crate) fn model_of(message: &Message) -> Option<&str> {
    last_named(message, "model")
}

/// The id of the reply an assistant message is (part of), where its line names it
/// (`message.id`). Claude Code 2 writes each content block of a reply on a line of its own and,
/// when the reply makes several calls, each call's result right after that call's line: one
/// reply is then read as several messages, between its results, that share this id.
pub(crate) fn reply_id_of(message: &Message) -> Option<&str> {
    last_named(message, "id")
}

/// The string `message.KEY` of the last of a message's lines that has one.
fn last_named<'m>(message: &'m Message, key: &str) -> Option<&'m str> {
    message
        .wire
        .iter()
        .rev()
        .find_map(|record| record.fields.get("message")?.get(key)?.as_str())
}

/// Whether Claude Code wrote `message` in the assistant's place itself: no request answered it.
pub(crate) fn is_synthetic(message: &Message) -> bool {
    model_of(message) == Some(SYNTHETIC_MODEL)
}

pub(crate) fn read(bytes: &[u8]) -> Result<Conversation, FormatError> {
    read_as(bytes, Reading::AsTheModelSeesIt)
}

/// Whether a line is the boundary Claude Code writes when it compacts the session on its own:
/// a `system` line, a new root of the `parentUuid` chain, with its summary on the line after.
fn is_compact_boundary(record: &JsonMap) -> bool {
    record.get("type").and_then(Value::as_str) == Some("system")
        && record.get("subtype").and_then(Value::as_str) == Some("compact_boundary")
}

/// Which thread of a log is its conversation: the session's main thread, or, in a subagent's
/// own log (Claude Code 2 writes each subagent's to `SESSION/subagents/agent-ID.jsonl`, every
/// line `isSidechain: true`), the subagent's. Older logs keep a subagent's lines inline, among
/// the main thread's; those stay beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Thread {
    /// The conversation is the `isSidechain` lines.
    sidechain: bool,
}

impl Thread {
    /// A subagent's log when it has messages and every one is a sidechain's.
    fn of(records: &[(Location, JsonMap)]) -> Thread {
        let mut messages = records
            .iter()
            .map(|(_, record)| record)
            .filter(|record| is_message(record))
            .peekable();
        let sidechain = messages.peek().is_some() && messages.all(is_sidechain);
        Thread { sidechain }
    }

    /// A line of this thread's conversation (a person's, a tool result's, the model's).
    fn is_message(self, record: &JsonMap) -> bool {
        is_message(record) && is_sidechain(record) == self.sidechain
    }

    /// A subagent's line in the main thread's log: kept beside.
    fn is_other_sidechain(self, record: &JsonMap) -> bool {
        !self.sidechain && is_sidechain(record)
    }
}

fn is_message(record: &JsonMap) -> bool {
    matches!(
        record.get("type").and_then(Value::as_str),
        Some("user" | "assistant")
    )
}

fn is_sidechain(record: &JsonMap) -> bool {
    record.get("isSidechain") == Some(&Value::Bool(true))
}

/// The lines (by their place among the log's records) of the branch Claude Code resumes: from
/// the last message line back along `parentUuid` to a root, which is the session's first line
/// or, as the model sees it, the boundary of Claude Code's last compaction (read whole, the
/// walk goes on from a boundary to the line it followed, its `logicalParentUuid`). A line
/// without a `uuid` of its own still names its parent (writing gives it a uuid, below that
/// parent). `None` when the chain cannot be trusted to say what was left: a line on it names
/// no parent (a log without the chain), or one no line has, two lines share a uuid, or the
/// walk loops (a damaged or hand-edited log); then every line counts, and writing relinks the
/// chain.
fn resumed_branch(
    records: &[(Location, JsonMap)],
    thread: Thread,
    reading: Reading,
) -> Option<HashSet<usize>> {
    fn uuid(record: &JsonMap) -> Option<&str> {
        record.get("uuid").and_then(Value::as_str)
    }
    let leaf = records
        .iter()
        .rposition(|(_, record)| thread.is_message(record))?;
    let mut by_uuid: HashMap<&str, usize> = HashMap::with_capacity(records.len());
    for (index, (_, record)) in records.iter().enumerate() {
        // Two lines with one uuid: which is the parent cannot be told.
        if let Some(uuid) = uuid(record)
            && by_uuid.insert(uuid, index).is_some()
        {
            return None;
        }
    }
    let mut branch = HashSet::new();
    let mut at = leaf;
    loop {
        if !branch.insert(at) {
            return None;
        }
        let record = &records[at].1;
        let parent = match (is_compact_boundary(record), reading) {
            (true, Reading::AsTheModelSeesIt) => return Some(branch),
            (true, Reading::Whole) => record.get("logicalParentUuid"),
            (false, _) => record.get("parentUuid"),
        };
        match parent {
            Some(Value::String(parent)) => at = *by_uuid.get(parent.as_str())?,
            // Claude Code 1.0's own compaction leaves no boundary: its summary is a user line
            // flagged `isCompactSummary` that starts a new root. Read whole, the history it
            // replaced is the chain that ended on the last message line before it.
            Some(Value::Null)
                if reading == Reading::Whole
                    && record.get(COMPACT_SUMMARY) == Some(&Value::Bool(true)) =>
            {
                match records[..at]
                    .iter()
                    .rposition(|(_, record)| thread.is_message(record))
                {
                    Some(before) => at = before,
                    None => return Some(branch),
                }
            }
            Some(Value::Null) => return Some(branch),
            _ => return None,
        }
    }
}

/// Reads the log as the model sees it now, or whole. Claude Code resumes a session by following
/// the `parentUuid` chain back from its last message: a branch the person left (`/rewind`, a
/// command run from an earlier point) and, after Claude Code compacted the session on its own,
/// everything before its compact boundary are not sent again. So as the model sees it, message
/// lines off that chain go beside the conversation, as they came. Read whole, the chain goes on
/// through each boundary to the history it replaced, and the summary after each boundary is
/// flagged ([`RESTATES`]); a branch the person left is still beside.
pub(crate) fn read_as(bytes: &[u8], reading: Reading) -> Result<Conversation, FormatError> {
    let input = text::utf8(bytes)?;
    let records = jsonl::records(input).collect::<Result<Vec<_>, _>>()?;
    let thread = Thread::of(&records);
    let branch = resumed_branch(&records, thread, reading);
    let mut conversation = Conversation::default();
    // The `message.id` of the last main-thread assistant line, to merge the lines of one reply.
    let mut open_reply: Option<String> = None;
    // Whether the last main-thread line was a compact boundary: the next is its summary.
    let mut after_boundary = false;

    for (index, (at, record)) in records.into_iter().enumerate() {
        let kind = record
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let off_branch = branch.as_ref().is_some_and(|branch| {
            !branch.contains(&index) && record.contains_key("uuid") && thread.is_message(&record)
        });
        let side_kind = match kind.as_str() {
            _ if thread.is_other_sidechain(&record) => Some(SideKind::Sidechain),
            _ if off_branch => Some(SideKind::Other),
            "user" | "assistant" => None,
            "summary" => Some(SideKind::Summary),
            "system" => Some(SideKind::System),
            _ => Some(SideKind::Other),
        };
        if let Some(kind) = side_kind {
            after_boundary |= is_compact_boundary(&record);
            conversation.side.push(SideRecord {
                kind,
                before_message: conversation.messages.len(),
                value: Value::Object(record),
            });
            open_reply = None;
            continue;
        }

        // A summary after a boundary (2.x), or one that is a root of its own (1.0).
        let restarts = std::mem::take(&mut after_boundary)
            || (record.get("parentUuid") == Some(&Value::Null) && !conversation.is_empty());
        let MessageLine {
            role,
            parts,
            wire,
            reply_id,
            generated,
        } = message_line(at, &kind, record, reading, restarts)?;
        let continues_reply =
            role == Role::Assistant && reply_id.is_some() && reply_id == open_reply;
        match conversation.messages.last_mut() {
            Some(last) if continues_reply => {
                last.parts.extend(parts);
                last.wire.push(wire);
            }
            _ => conversation.messages.push(Message {
                role,
                parts,
                generated,
                wire: vec![wire],
            }),
        }
        open_reply = if role == Role::Assistant {
            reply_id
        } else {
            None
        };
    }
    Ok(conversation)
}

/// A `user` or `assistant` line of the log read as a message (to be merged with the line
/// before it when both are one reply).
struct MessageLine {
    role: Role,
    parts: Vec<Part>,
    wire: WireRecord,
    /// The reply's `message.id`: the lines of one reply share it.
    reply_id: Option<String>,
    generated: bool,
}

/// Reads one message line. `restarts`: it follows a compact boundary, or is a root of its own:
/// read whole, a compaction summary there is flagged as restating history ([`RESTATES`]).
fn message_line(
    at: Location,
    kind: &str,
    mut record: JsonMap,
    reading: Reading,
    restarts: bool,
) -> Result<MessageLine, FormatError> {
    let role = if kind == "assistant" {
        Role::Assistant
    } else {
        Role::User
    };
    let Some(Value::Object(message)) = record.get_mut("message") else {
        return Err(FormatError::malformed(
            at,
            format!("a `{kind}` line has no `message` object"),
        ));
    };
    if let Some(Value::String(wire_role)) = message.get("role")
        && *wire_role != kind
    {
        return Err(FormatError::UnknownRole {
            at,
            role: wire_role.clone(),
        });
    }
    let reply_id = message.get("id").and_then(Value::as_str).map(str::to_owned);
    // `content` is taken, but its place is kept (a null until written back), so that a line
    // comes back with its keys in their order.
    let content = message.get_mut("content").map(Value::take);
    let order = content.as_ref().map(skeleton);
    let (parts, shape) =
        parts_from_content(content).map_err(|problem| FormatError::malformed(at, problem))?;
    if let Some(order) = order {
        record.insert(ORDER.into(), order);
    }
    if restarts
        && reading == Reading::Whole
        && record.get(COMPACT_SUMMARY) == Some(&Value::Bool(true))
    {
        record.insert(RESTATES.into(), Value::Bool(true));
    }
    let generated = role == Role::User && is_generated(&record, &parts);
    let wire = WireRecord {
        fields: record,
        parts: parts.len(),
        shape,
    };
    Ok(MessageLine {
        role,
        parts,
        wire,
        reply_id,
        generated,
    })
}

/// The subagent threads a main-thread log keeps inline (Claude Code before 2.0 wrote a
/// subagent's lines, `isSidechain: true`, among the session's), each read whole as the log of
/// its own that Claude Code 2 would have written for it. A thread is a sidechain line whose
/// parent is no sidechain line (Claude Code starts each with `parentUuid: null`) and the lines
/// chained below it. An error in a thread names the line of the session's log. Empty for a
/// subagent's own log.
pub(crate) fn subagents(bytes: &[u8]) -> Result<Vec<crate::Subagent>, FormatError> {
    let input = text::utf8(bytes)?;
    let records = jsonl::records(input).collect::<Result<Vec<_>, _>>()?;
    if Thread::of(&records).sidechain {
        return Ok(Vec::new());
    }
    // (name, its lines in the log's order, 1-based)
    let mut threads: Vec<(String, Vec<usize>)> = Vec::new();
    let mut thread_of: HashMap<&str, usize> = HashMap::new();
    for (at, record) in &records {
        let Location::Line(line) = *at else {
            continue;
        };
        if !is_message(record) || !is_sidechain(record) {
            continue;
        }
        let parent = record
            .get("parentUuid")
            .and_then(Value::as_str)
            .and_then(|parent| thread_of.get(parent))
            .copied();
        let thread = parent.unwrap_or_else(|| {
            let name = match record.get("agentId").and_then(Value::as_str) {
                Some(agent) => format!("agent-{agent}"),
                None => format!("sidechain from line {line}"),
            };
            threads.push((name, Vec::new()));
            threads.len() - 1
        });
        threads[thread].1.push(line);
        if let Some(uuid) = record.get("uuid").and_then(Value::as_str) {
            thread_of.insert(uuid, thread);
        }
    }
    let lines: Vec<&str> = input.lines().collect();
    threads
        .into_iter()
        .map(|(name, numbers)| {
            let mut own = String::new();
            for &number in &numbers {
                own.push_str(lines[number - 1]);
                own.push('\n');
            }
            let conversation = read_as(own.as_bytes(), Reading::Whole)
                .map_err(|error| error.on_lines(&numbers))?;
            Ok(crate::Subagent { name, conversation })
        })
        .collect()
}

/// Lines Claude Code itself writes into the user's side of the log: meta notes (`isMeta`) and the
/// captured output of local slash commands. A person did not type them.
fn is_generated(record: &JsonMap, parts: &[Part]) -> bool {
    if record.get("isMeta") == Some(&Value::Bool(true)) {
        return true;
    }
    matches!(parts, [Part::Text(text)]
        if text.text.starts_with("<local-command-stdout>") || text.text.starts_with("<local-command-stderr>"))
}

pub(crate) fn write(conversation: &Conversation) -> Result<Vec<u8>, FormatError> {
    let mut out = Vec::new();
    let mut chain = Chain::new(conversation);
    let mut side = conversation.side.iter().peekable();
    for (index, message) in conversation.messages.iter().enumerate() {
        while let Some(record) = side.next_if(|record| record.before_message <= index) {
            push_line(&mut out, &chain.side_line(&record.value))?;
        }
        for mut line in message_lines(message) {
            chain.link(&mut line, message);
            push_line(&mut out, &line)?;
        }
    }
    for record in side {
        push_line(&mut out, &chain.side_line(&record.value))?;
    }
    Ok(out)
}

/// Keeps the `parentUuid` chain of the main thread whole when messages were removed (a compacted
/// head) or added (the summary, the continuation): Claude Code follows that chain to resume a
/// session. A line whose parent is still there keeps it, so an untouched session is written back
/// as it came.
struct Chain {
    emitted: std::collections::HashSet<String>,
    last: Option<String>,
    /// When the last line linked is one condense made (the summary, the continuation), the
    /// parent it was given: a line that came below that same parent now comes below the made
    /// line instead, or it would start a branch beside it.
    made_below: Option<Option<String>>,
    /// Session fields (`sessionId`, `cwd`, `version`, `userType`, and in a subagent's log
    /// `isSidechain` and `agentId`) for lines condense creates.
    session: JsonMap,
    timestamp: Option<Value>,
}

impl Chain {
    fn new(conversation: &Conversation) -> Chain {
        let first = conversation
            .messages
            .iter()
            .flat_map(|m| &m.wire)
            .map(|r| &r.fields)
            .find(|f| f.contains_key("sessionId"));
        let mut session = JsonMap::new();
        if let Some(fields) = first {
            for key in [
                "userType",
                "cwd",
                "sessionId",
                "version",
                "isSidechain",
                "agentId",
            ] {
                if let Some(value) = fields.get(key) {
                    session.insert(key.to_owned(), value.clone());
                }
            }
        }
        Chain {
            emitted: Default::default(),
            last: None,
            made_below: None,
            session,
            timestamp: None,
        }
    }

    /// A line kept beside the messages, as it is written: as it came, unless it hangs below a
    /// line that is gone (an attachment or a note among messages a summary replaced), which
    /// would end Claude Code's walk back along the chain there, short of the summary; it then
    /// hangs below the last line linked.
    fn side_line<'v>(&mut self, value: &'v Value) -> std::borrow::Cow<'v, Value> {
        let orphaned = matches!(value.get("parentUuid"),
            Some(Value::String(parent)) if !self.emitted.contains(parent));
        let line = if orphaned {
            let mut line = value.clone();
            line["parentUuid"] = self.last.clone().map_or(Value::Null, Value::String);
            std::borrow::Cow::Owned(line)
        } else {
            std::borrow::Cow::Borrowed(value)
        };
        if let Some(uuid) = line.get("uuid").and_then(Value::as_str) {
            self.emitted.insert(uuid.to_owned());
        }
        line
    }

    fn link(&mut self, line: &mut Value, message: &Message) {
        let Value::Object(fields) = line else { return };
        let made = !fields.contains_key("uuid");
        let made_below = std::mem::take(&mut self.made_below);
        if made {
            self.made_below = Some(self.last.clone());
            let uuid = synthetic_uuid(
                self.last.as_deref().unwrap_or(""),
                &fields
                    .get("message")
                    .map(Value::to_string)
                    .unwrap_or_default(),
            );
            fields.insert(
                "parentUuid".into(),
                self.last.clone().map_or(Value::Null, Value::String),
            );
            // A line condense makes belongs to the thread it is written into: a subagent's
            // log is all sidechain.
            let sidechain = self
                .session
                .get("isSidechain")
                .cloned()
                .unwrap_or(Value::Bool(false));
            fields.insert("isSidechain".into(), sidechain);
            for (key, value) in &self.session {
                fields.entry(key.clone()).or_insert_with(|| value.clone());
            }
            if message.is_compaction_summary() {
                fields.insert(COMPACT_SUMMARY.into(), Value::Bool(true));
            }
            fields.insert("uuid".into(), Value::String(uuid));
            if let Some(timestamp) = &self.timestamp {
                fields.insert("timestamp".into(), timestamp.clone());
            }
        } else if match fields.get("parentUuid") {
            Some(Value::String(parent)) => {
                !self.emitted.contains(parent) || made_below.as_ref() == Some(&Some(parent.clone()))
            }
            // The session's first message, now after a summary condense put before it: a
            // root there would start a second chain, and Claude Code, which resumes by
            // following the last line's parents, would never reach the summary.
            Some(Value::Null) => made_below == Some(None),
            _ => false,
        } {
            fields.insert(
                "parentUuid".into(),
                self.last.clone().map_or(Value::Null, Value::String),
            );
        }
        if let Some(timestamp) = fields.get("timestamp") {
            self.timestamp = Some(timestamp.clone());
        }
        if let Some(uuid) = fields.get("uuid").and_then(Value::as_str) {
            self.emitted.insert(uuid.to_owned());
            self.last = Some(uuid.to_owned());
        }
    }
}

/// A UUID-shaped id derived from the previous line's id and this line's content, so the same
/// conversation is always written with the same ids (FNV-1a, twice, for 128 bits).
fn synthetic_uuid(parent: &str, content: &str) -> String {
    let fnv = |seed: u64| {
        let mut hash = seed;
        for byte in parent.bytes().chain([0]).chain(content.bytes()) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash
    };
    let (high, low) = (fnv(0xcbf2_9ce4_8422_2325), fnv(0x6c62_272e_07bb_0142));
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xffff,
        high & 0xfff,
        (low >> 48) & 0xfff,
        low & 0xffff_ffff_ffff
    )
}

/// Claude Code keeps a second copy of each tool's output beside the message, in the line's
/// `toolUseResult` (for its own display). When condense replaced the output in the message, that
/// copy goes too, replaced by the same text: otherwise a pruned session would still carry every
/// original on disk, and what the user asked to drop would leak into every copy of the file.
fn forget_replaced_results(fields: &mut JsonMap, parts: &[Part]) {
    let replaced: Vec<String> = parts
        .iter()
        .filter_map(|part| match part {
            Part::ToolResult(result) if result.compacted.is_some() => {
                Some(result.content.text().into_owned())
            }
            _ => None,
        })
        .collect();
    if replaced.is_empty() || !fields.contains_key("toolUseResult") {
        return;
    }
    fields.insert("toolUseResult".into(), Value::String(replaced.join("\n")));
}

/// The lines one message is written as: one per wire record while the records still account for
/// every part, otherwise a single line (the first record's envelope, or a plain one for a message
/// condense made).
fn message_lines(message: &Message) -> Vec<Value> {
    let accounted: usize = message.wire.iter().map(|record| record.parts).sum();
    if !message.wire.is_empty() && accounted == message.parts.len() {
        let mut lines = Vec::with_capacity(message.wire.len());
        let mut start = 0;
        for record in &message.wire {
            let parts = &message.parts[start..start + record.parts];
            start += record.parts;
            lines.push(line(
                message.role,
                record.fields.clone(),
                parts,
                record.shape,
            ));
        }
        return lines;
    }
    let (fields, shape) = match message.wire.first() {
        Some(record) => (record.fields.clone(), record.shape),
        None => (JsonMap::new(), ContentShape::Blocks),
    };
    vec![line(message.role, fields, &message.parts, shape)]
}

fn line(role: Role, mut fields: JsonMap, parts: &[Part], shape: ContentShape) -> Value {
    let order = fields.shift_remove(ORDER).unwrap_or(Value::Null);
    forget_replaced_results(&mut fields, parts);
    let (kind, wire_role) = match role {
        Role::Assistant => ("assistant", "assistant"),
        Role::User | Role::Tool | Role::System => ("user", "user"),
    };
    if !fields.contains_key("type") {
        fields.insert("type".into(), kind.into());
    }
    // The message stays where the line had it: a line read and written back keeps its key order,
    // so writing is a fixed point and an untouched line comes back as it was.
    if !matches!(fields.get("message"), Some(Value::Object(_))) {
        let mut message = JsonMap::new();
        message.insert("role".into(), wire_role.into());
        fields.shift_remove("message");
        fields.insert("message".into(), Value::Object(message));
    }
    if let Some(Value::Object(message)) = fields.get_mut("message") {
        match content_from_parts(parts, shape) {
            Some(content) => {
                // Keys where the line had them (Claude Code 2 writes a result's
                // `tool_use_id` before its `type`).
                message.insert("content".into(), ordered_like(content, &order));
            }
            None => {
                message.shift_remove("content");
            }
        }
    }
    Value::Object(fields)
}
