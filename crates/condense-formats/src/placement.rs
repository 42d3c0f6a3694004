//! Where condense's summary goes in a request body, in every wire format, and how it is taken
//! out again when that body is read back.
//!
//! In condense's model the summary is a system-level message of its own ([`SUMMARY_OPEN`]). On
//! the wire it is written into the person's message beside it, so that no system message follows
//! the conversation's start, no two user messages meet, and no answer of the agent's comes first
//! after the system prompt. The chat templates of many open models refuse each of those (Gemma's
//! and Mistral's raise "Conversation roles must alternate user/assistant/user/assistant/..."),
//! and llama.cpp's server and vLLM render the template a model ships with behind all three of
//! OpenAI's and Anthropic's APIs. A summary in the user's role also keeps what the summary quotes
//! of tool outputs out of the instructions' authority (`developer` outranks `user` in OpenAI's
//! models), and is where Claude Code, Codex and opencode put their own summaries.
//!
//! [`SUMMARY_OPEN`]: condense_core::SUMMARY_OPEN

use std::borrow::Cow;

use condense_core::{
    ContentShape, JsonMap, Message, Part, Role, SUMMARY_CLOSE, SUMMARY_OPEN, Text, WireRecord,
};

/// What parts condense's summary from the text of the message it is written into.
const SUMMARY_SEPARATOR: &str = "\n\n";

/// How a format joins text to a message whose content is one string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Joining {
    /// Into the string, after [`SUMMARY_SEPARATOR`] (Chat Completions, Responses).
    Text,
    /// As a text block of its own, the content becoming a list (Anthropic: a `cache_control`
    /// mark can then end where the task does, before the summary).
    Blocks,
}

/// `messages` as a writer sends them: condense's summary written into the person's message
/// before it (an autonomous run's task kept in front of it, after its text: the prefix the
/// provider cached keeps its bytes), a message of the person's right after it joining them too
/// (the tail can start with one); otherwise before the text of the person's message that comes
/// next, or, before an answer of the agent's, a user message of its own. A summary with nothing
/// after it stays where it is, at the instructions' level. The continuation after the summary
/// (which tells the agent to go on) is left out wherever something follows it. Only the
/// messages written into are copies: the others (a session's tool outputs among them) are
/// borrowed.
pub(crate) fn placed(messages: &[Message], joining: Joining) -> Vec<Cow<'_, Message>> {
    let mut out: Vec<Cow<'_, Message>> = Vec::with_capacity(messages.len());
    let mut pending = None;
    for (index, message) in messages.iter().enumerate() {
        if !is_summary_written_here(message) {
            match pending.take() {
                Some(Pending::Before(summary)) => {
                    let mut next = Cow::Borrowed(message);
                    if !(takes_text(message) && written_first(next.to_mut(), &summary, joining)) {
                        out.push(Cow::Owned(Message::text(Role::User, summary)));
                        next = Cow::Borrowed(message);
                    }
                    out.push(next);
                }
                Some(Pending::Join) => {
                    let joined = out
                        .last_mut()
                        .is_some_and(|into| joined(into.to_mut(), message, joining));
                    if !joined {
                        out.push(Cow::Borrowed(message));
                    }
                }
                None => out.push(Cow::Borrowed(message)),
            }
            continue;
        }
        let next = messages.get(index + 1).map(|next| next.role);
        let summary = without_continuation(message);
        let into_previous = out.last_mut().is_some_and(|previous| {
            takes_text(previous) && appended(previous.to_mut(), &summary, joining)
        });
        if into_previous {
            pending = (next == Some(Role::User)).then_some(Pending::Join);
            continue;
        }
        match next {
            Some(Role::User) => pending = Some(Pending::Before(summary)),
            Some(Role::Assistant | Role::Tool) => {
                out.push(Cow::Owned(Message::text(Role::User, summary)));
            }
            _ => out.push(Cow::Borrowed(message)),
        }
    }
    out
}

/// Whether `message` is condense's own summary, made for this request: a system-level message
/// with no wire record of the client's.
fn is_summary_written_here(message: &Message) -> bool {
    message.role == Role::System && message.is_summary_written_here()
}

/// What [`placed`] does with the message after condense's summary.
enum Pending {
    /// The summary goes before its text ([`written_first`]).
    Before(String),
    /// It joins the person's message the summary went into ([`joined`]).
    Join,
}

/// A user message of one record, with nothing of a call in it, and some content: one that text
/// can be written into without losing anything of it.
fn takes_text(message: &Message) -> bool {
    message.role == Role::User
        && message.wire.len() <= 1
        && !message.parts.is_empty()
        && message
            .parts
            .iter()
            .all(|part| !matches!(part, Part::ToolCall(_) | Part::ToolResult(_)))
}

/// The one string `message`'s content is, where it is one, not empty, and the format joins text
/// into it. (An empty one takes the summary as a part of its own: read back, the text before
/// the summary must be there to tell the two apart.)
fn own_string(message: &mut Message, joining: Joining) -> Option<&mut String> {
    let string = message
        .wire
        .first()
        .is_none_or(|record| record.shape == ContentShape::String);
    match message.parts.as_mut_slice() {
        [Part::Text(text)]
            if string
                && joining == Joining::Text
                && text.extra.is_empty()
                && !text.text.is_empty() =>
        {
            Some(&mut text.text)
        }
        _ => None,
    }
}

/// `text` as a part of its own.
fn text_part(text: &str) -> Part {
    Part::Text(Text {
        text: text.to_owned(),
        extra: JsonMap::new(),
    })
}

/// The message's record counting its parts again, after parts were added.
fn recounted(message: &mut Message) {
    if let Some(record) = message.wire.first_mut() {
        record.parts = message.parts.len();
    }
}

/// Whether `summary` was written into `previous`, after its text.
fn appended(previous: &mut Message, summary: &str, joining: Joining) -> bool {
    if !takes_text(previous) {
        return false;
    }
    match own_string(previous, joining) {
        Some(text) => {
            text.push_str(SUMMARY_SEPARATOR);
            text.push_str(summary);
        }
        None => previous.parts.push(text_part(summary)),
    }
    recounted(previous);
    true
}

/// Whether `summary` was written into `next`, before its text.
fn written_first(next: &mut Message, summary: &str, joining: Joining) -> bool {
    if !takes_text(next) {
        return false;
    }
    match own_string(next, joining) {
        Some(text) => {
            text.insert_str(0, SUMMARY_SEPARATOR);
            text.insert_str(0, summary);
        }
        None => next.parts.insert(0, text_part(summary)),
    }
    recounted(next);
    true
}

/// Whether the person's message `next` joined `into`, which holds condense's summary: its text
/// after the summary's. Only a message with the same wire fields joins (the same `role`, and for
/// Responses the same `type`), so that nothing of it is lost.
fn joined(into: &mut Message, next: &Message, joining: Joining) -> bool {
    let fields = |message: &Message| message.wire.first().map(|record| record.fields.clone());
    if !takes_text(next) || fields(into) != fields(next) {
        return false;
    }
    let mut next = next.clone();
    match (own_string(into, joining), own_string(&mut next, joining)) {
        (Some(text), Some(after)) => {
            text.push_str(SUMMARY_SEPARATOR);
            text.push_str(after);
        }
        // The summary went into a string, which a list of parts cannot follow: read back, the
        // string is split at the summary's tags, and parts after it would not be told apart.
        (Some(_), None) => return false,
        (None, _) => into.parts.append(&mut next.parts),
    }
    recounted(into);
    true
}

/// The summary's text up to its closing tag: the continuation after it, which tells the agent
/// to go on, is for a summary that ends the request.
fn without_continuation(summary: &Message) -> String {
    let mut text = summary.plain_text();
    if let Some(at) = text.rfind(SUMMARY_CLOSE) {
        text.truncate(at + SUMMARY_CLOSE.len());
    }
    text
}

/// Takes condense's summary out of the person's message it was written into ([`placed`]): the
/// message's text before it, the summary, and the text after it become the messages they were;
/// whether it took one. Only where condense writes it is it looked for: the user messages right
/// after the leading system messages, the summary's tags (`<prior-conversation-summary>` ...
/// `</prior-conversation-summary>`) at the start of a string or after [`SUMMARY_SEPARATOR`], and
/// only [`SUMMARY_SEPARATOR`] and more text after them, or as a text part of their own. A tool's
/// output that quotes such tags, later in the session, is left as it is.
pub(crate) fn split_summaries(messages: &mut Vec<Message>) -> bool {
    let start = messages
        .iter()
        .take_while(|message| message.role == Role::System)
        .count();
    let found = messages[start..]
        .iter()
        .take_while(|message| message.role == Role::User)
        .enumerate()
        .find_map(|(offset, message)| Some((start + offset, summary_written_into(message)?)));
    let Some((at, split)) = found else {
        return false;
    };
    messages.splice(at..=at, split);
    true
}

/// `message` (a user message read from the wire) as the messages it was before condense wrote
/// its summary into it: its text before the summary, the summary, its text after; `None` where
/// it holds no summary condense wrote, or nothing but the summary.
fn summary_written_into(message: &Message) -> Option<Vec<Message>> {
    let [record] = message.wire.as_slice() else {
        return None;
    };
    let (before, summary, after): (Vec<Part>, String, Vec<Part>) =
        match (record.shape, message.parts.as_slice()) {
            (ContentShape::String, [Part::Text(text)]) => {
                let whole = text.text.as_str();
                let open = if whole.starts_with(SUMMARY_OPEN) {
                    0
                } else {
                    whole.find(&format!("{SUMMARY_SEPARATOR}{SUMMARY_OPEN}"))?
                        + SUMMARY_SEPARATOR.len()
                };
                let close = open + whole[open..].find(SUMMARY_CLOSE)? + SUMMARY_CLOSE.len();
                let rest = &whole[close..];
                let after = match rest.strip_prefix(SUMMARY_SEPARATOR) {
                    None if rest.is_empty() => None,
                    Some(after) if !after.is_empty() => Some(after),
                    _ => return None,
                };
                let before = (open > 0).then(|| &whole[..open - SUMMARY_SEPARATOR.len()]);
                (
                    before.map(|text| vec![text_part(text)]).unwrap_or_default(),
                    whole[open..close].to_owned(),
                    after.map(|text| vec![text_part(text)]).unwrap_or_default(),
                )
            }
            (ContentShape::Blocks, parts) => {
                let (at, summary) = parts.iter().enumerate().find_map(|(at, part)| match part {
                    Part::Text(text)
                        if plain(&text.extra)
                            && text.text.starts_with(SUMMARY_OPEN)
                            && text.text.ends_with(SUMMARY_CLOSE) =>
                    {
                        Some((at, text.text.clone()))
                    }
                    _ => None,
                })?;
                (parts[..at].to_vec(), summary, parts[at + 1..].to_vec())
            }
            _ => return None,
        };
    if before.is_empty() && after.is_empty() {
        return None;
    }
    let with = |parts: Vec<Part>, fields: JsonMap| Message {
        role: Role::User,
        wire: vec![WireRecord {
            fields,
            parts: parts.len(),
            shape: record.shape,
        }],
        parts,
        generated: message.generated,
    };
    let mut split = Vec::with_capacity(3);
    // The message's own fields go with its text before the summary and with the text after it
    // (a person's message that joined it had the same).
    if !before.is_empty() {
        split.push(with(before, record.fields.clone()));
    }
    split.push(Message::text(Role::System, summary));
    if !after.is_empty() {
        split.push(with(after, record.fields.clone()));
    }
    Some(split)
}

/// A text part's wire fields as condense writes its own: none, or only the text `type` a format
/// names it by (Responses keeps `input_text` there), and a `cache_control` mark a client may
/// have put on it (an Anthropic client marks the last block of a message it wants cached; the
/// summary is condense's, written again with condense's own marks, so the client's goes with
/// it).
fn plain(extra: &JsonMap) -> bool {
    extra.iter().all(|(key, value)| {
        key == "cache_control"
            || key == "type"
                && matches!(value.as_str(), Some("text" | "input_text" | "output_text"))
    })
}

/// What the writers' tests place: a summary as condense writes one.
#[cfg(test)]
pub(crate) mod testing {
    /// A summary of condense's, and the same with the continuation after it, as a compaction
    /// hands it to a writer.
    pub(crate) fn summary() -> (String, String) {
        let summary = format!(
            "{}\nwork so far\n{}",
            condense_core::SUMMARY_OPEN,
            condense_core::SUMMARY_CLOSE
        );
        let continued = format!("{summary}\n\nContinue if you have next steps.");
        (summary, continued)
    }
}
