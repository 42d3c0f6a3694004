//! What a request still holds of what the session had produced by then, measured on the
//! request as a policy sent it, never taken from the policy's own account of what it did.
//!
//! Three kinds of thing count, each item alike: every request of the person's (shown verbatim,
//! or quoted in a summary: the first [`PROBE_CHARS`] characters of its text appear somewhere in
//! the request),
//! every file path the agent's calls touched (named anywhere: in a call, a summary, a
//! placeholder), and the [`RECENT_CALLS`] most recent tool calls with their outputs (an output
//! whole counts one, as does one whose result stands in for a text another call's result
//! shows whole in the same request; cut to a preview, a prefix of it, half; replaced or gone,
//! nothing). The
//! share is the items' sum over their number; a request the provider refuses (over the window)
//! shows the model nothing, and holds 0.

use std::collections::{HashMap, HashSet};

use condense_core::{Message, Part, ToolOutput};

/// The recent tool calls whose outputs count.
pub const RECENT_CALLS: usize = 10;
/// The characters of a request that must appear for it to count as shown.
pub const PROBE_CHARS: usize = 200;
/// The characters of an output's start a preview must keep to count as one.
const PREVIEW_PREFIX: usize = 64;

/// What a session had produced by one request: the items retention looks for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Produced {
    /// The start of each of the person's requests, trimmed.
    requests: Vec<String>,
    /// Each path the agent's calls touched, once.
    paths: Vec<String>,
    /// The most recent tool calls with a result: their ids and their outputs' text.
    recent: Vec<(String, String)>,
}

impl Produced {
    /// The items of `history` (the session up to a request, as if no harness had compacted it).
    pub fn of(history: &[Message]) -> Produced {
        let mut produced = Produced::default();
        let mut outputs: HashMap<&str, String> = HashMap::new();
        for message in history {
            if message.is_user_turn() {
                let text = message
                    .parts
                    .iter()
                    .find_map(|part| match part {
                        Part::Text(said) if !said.text.trim().is_empty() => {
                            Some(said.text.as_str())
                        }
                        _ => None,
                    })
                    .unwrap_or_default();
                let probe: String = text.trim().chars().take(PROBE_CHARS).collect();
                let probe = probe.trim().to_owned();
                if !probe.is_empty() && !produced.requests.contains(&probe) {
                    produced.requests.push(probe);
                }
            }
            for part in &message.parts {
                match part {
                    Part::ToolCall(call) => {
                        let (touched, _) =
                            condense_core::tool_paths::touched(&call.name, &call.input);
                        for path in touched {
                            // A directory named with and without its last `/` is one item,
                            // looked for without it (which finds both).
                            let path = condense_core::tool_paths::entry(path);
                            if !produced.paths.iter().any(|seen| seen == path) {
                                produced.paths.push(path.to_owned());
                            }
                        }
                    }
                    Part::ToolResult(result) => {
                        outputs.insert(result.call_id.as_str(), output_text(&result.content));
                    }
                    _ => {}
                }
            }
        }
        // An item counts only as the session itself shows it: a path a tool resolved against
        // the working directory, or a request's text split over blocks, is looked for as the
        // session wrote it, so that the whole history keeps everything.
        let whole = all_text(history);
        let shown =
            |needle: &String| memchr::memmem::find(whole.as_bytes(), needle.as_bytes()).is_some();
        produced.requests.retain(shown);
        produced.paths.retain(shown);
        let calls: Vec<&str> = history
            .iter()
            .flat_map(|message| &message.parts)
            .filter_map(Part::as_tool_call)
            .map(|call| call.id.as_str())
            .filter(|id| outputs.contains_key(id))
            .collect();
        let skip = calls.len().saturating_sub(RECENT_CALLS);
        produced.recent = calls[skip..]
            .iter()
            .map(|id| {
                (
                    (*id).to_owned(),
                    outputs.get(id).cloned().unwrap_or_default(),
                )
            })
            .collect();
        produced
    }

    /// How many items there are.
    pub fn items(&self) -> usize {
        self.requests.len() + self.paths.len() + self.recent.len()
    }

    /// The share of these items that `sent` (a request's messages, as a policy sent them)
    /// still shows, from 0 to 1; 1 when there is nothing to keep.
    pub fn share_in(&self, sent: &[Message]) -> f64 {
        if self.items() == 0 {
            return 1.0;
        }
        let text = all_text(sent);
        let shows =
            |needle: &str| memchr::memmem::find(text.as_bytes(), needle.as_bytes()).is_some();
        let mut kept = 0.0;
        kept += self
            .requests
            .iter()
            .filter(|request| shows(request))
            .count() as f64;
        kept += self.paths.iter().filter(|path| shows(path)).count() as f64;
        let results: HashMap<&str, String> = sent
            .iter()
            .flat_map(|message| &message.parts)
            .filter_map(|part| match part {
                Part::ToolResult(result) => {
                    Some((result.call_id.as_str(), output_text(&result.content)))
                }
                _ => None,
            })
            .collect();
        // Every output the request shows whole, under whichever call.
        let whole: HashSet<&str> = results.values().map(String::as_str).collect();
        for (id, original) in &self.recent {
            kept += match results.get(id.as_str()) {
                Some(shown) if shown == original => 1.0,
                // The call's result is there, pointing elsewhere, and its very text is shown
                // whole by another call's result of the same request (an output identical to a
                // later one, replaced by a pointer to it): nothing of it is missing.
                Some(_) if !original.is_empty() && whole.contains(original.as_str()) => 1.0,
                Some(shown) if is_preview(shown, original) => 0.5,
                _ => 0.0,
            };
        }
        kept / self.items() as f64
    }
}

/// Whether `shown` is `original` cut to its start (a preview), with a note after it or not.
fn is_preview(shown: &str, original: &str) -> bool {
    let start: String = original.chars().take(PREVIEW_PREFIX).collect();
    !start.trim().is_empty() && shown.len() < original.len() && shown.starts_with(&start)
}

/// An output's text: its text parts, or its blocks as JSON.
fn output_text(output: &ToolOutput) -> String {
    output.text().into_owned()
}

/// Everything a request shows, in one text to search: what is said, the calls' inputs and the
/// outputs.
fn all_text(messages: &[Message]) -> String {
    let mut text = String::new();
    for message in messages {
        for part in &message.parts {
            match part {
                Part::Text(said) => text.push_str(&said.text),
                Part::ToolCall(call) => {
                    text.push_str(&call.name);
                    text.push(' ');
                    text.push_str(&call.input.to_string());
                    // A path is searched as written, not as JSON escapes it.
                    for value in call
                        .input
                        .as_object()
                        .into_iter()
                        .flat_map(|map| map.values())
                    {
                        if let Some(value) = value.as_str() {
                            text.push('\n');
                            text.push_str(value);
                        }
                    }
                }
                Part::ToolResult(result) => text.push_str(&output_text(&result.content)),
                _ => {}
            }
            text.push('\n');
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_core::{Role, ToolCall, ToolResult};
    use serde_json::json;

    fn call(id: &str, path: &str) -> Message {
        Message::new(
            Role::Assistant,
            vec![Part::ToolCall(ToolCall {
                id: id.into(),
                name: "Read".into(),
                input: json!({"file_path": path}),
                raw_input: None,
                embedded: false,
                extra: Default::default(),
            })],
        )
    }

    fn result(id: &str, text: &str) -> Message {
        Message::new(
            Role::Tool,
            vec![Part::ToolResult(ToolResult {
                call_id: id.into(),
                content: ToolOutput::Text(text.into()),
                is_error: None,
                embedded: false,
                compacted: None,
                extra: Default::default(),
            })],
        )
    }

    #[test]
    fn requests_paths_and_recent_outputs_each_count() {
        let output = "fn main() {}\n".repeat(50);
        let history = vec![
            Message::text(Role::User, "Fix the parser in src/parse.rs please"),
            call("c1", "/repo/src/parse.rs"),
            result("c1", &output),
        ];
        let produced = Produced::of(&history);
        assert_eq!(produced.items(), 3);
        assert_eq!(produced.share_in(&history), 1.0);
        // The output cut to a preview: half of one item.
        let mut previewed = history.clone();
        previewed[2] = result("c1", &format!("{}\n[cut]", &output[..200]));
        assert!((produced.share_in(&previewed) - 2.5 / 3.0).abs() < 1e-9);
        // Replaced by a placeholder that names the path: the output is gone, the path is not.
        let mut pruned = history.clone();
        pruned[2] = result("c1", "[output of Read /repo/src/parse.rs cleared]");
        assert!((produced.share_in(&pruned) - 2.0 / 3.0).abs() < 1e-9);
        // A summary that quotes the request and names the file, and nothing else.
        let summary = vec![Message::text(
            Role::User,
            "Summary: 1. Fix the parser in src/parse.rs please. Read /repo/src/parse.rs.",
        )];
        assert!((produced.share_in(&summary) - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(produced.share_in(&[]), 0.0);
        assert_eq!(Produced::default().share_in(&[]), 1.0);
    }

    /// An output replaced by a pointer to a later call's identical output is shown whole, as
    /// long as the request shows that later output whole; dropped, or pointing at an output
    /// the request no longer shows whole, it is not.
    #[test]
    fn an_output_shown_whole_under_a_later_call_counts_whole() {
        let output = "fn main() {}\n".repeat(50);
        let history = vec![
            Message::text(Role::User, "Fix the parser in src/parse.rs please"),
            call("c1", "/repo/src/parse.rs"),
            result("c1", &output),
            call("c2", "/repo/src/parse.rs"),
            result("c2", &output),
        ];
        let produced = Produced::of(&history);
        assert_eq!(produced.items(), 4);
        let mut pointed = history.clone();
        pointed[2] = result("c1", "[condense: same output as the later Read call c2]");
        assert_eq!(produced.share_in(&pointed), 1.0);
        // The later one cut to a preview as well: neither is shown whole any more.
        let mut both = pointed.clone();
        both[4] = result("c2", &format!("{}\n[cut]", &output[..200]));
        assert!((produced.share_in(&both) - 2.5 / 4.0).abs() < 1e-9);
        // The call and its result gone: the text elsewhere does not bring it back.
        let dropped = vec![history[0].clone(), history[3].clone(), history[4].clone()];
        assert!((produced.share_in(&dropped) - 3.0 / 4.0).abs() < 1e-9);
    }

    /// A directory named with and without its last `/` is one item, shown by either form.
    #[test]
    fn a_directory_with_and_without_its_slash_is_one_item() {
        let history = vec![
            call("c1", "tests/archive/"),
            result("c1", "a.c"),
            call("c2", "tests/archive"),
            result("c2", "a.c"),
        ];
        let produced = Produced::of(&history);
        assert_eq!(produced.items(), 3);
        let named = |text: &str| vec![Message::text(Role::User, text)];
        assert!((produced.share_in(&named("Read: tests/archive")) - 1.0 / 3.0).abs() < 1e-9);
        assert!((produced.share_in(&named("Read: tests/archive/")) - 1.0 / 3.0).abs() < 1e-9);
    }
}
