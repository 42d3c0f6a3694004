//! A tool call's input cut to a preview: the last resort of a request the window cannot hold,
//! and, at a compaction whose tail is over its budget, what is cut of the tail's earlier calls
//! before their outputs are.
//!
//! A call's input is what the agent itself sent, and the last exchange is kept whole wherever
//! it can be; but a Write that gave a whole file, in a window whose system prompt and tools
//! leave a few thousand tokens, is more than the request can carry however small the summary.
//! The provider would refuse the request. Cutting that input's text (the file is on disk, the
//! whole input stored) keeps the exchange, its call and its result, where the only other way is
//! to summarize it away. Of the calls before the last exchange, what the agent wrote is applied
//! and on disk where what it read can be had again only by calling again: a tail over its budget
//! has their inputs cut first (`condense-host`'s compactor decides where).
//!
//! A cut is logged ([`crate::DecisionLog::input_cut`]) and made again, byte for byte, on every
//! later request that carries the call ([`Pruner::prune`], with the other frozen decisions;
//! [`crate::PruneReport::inputs`]): the client resends its
//! input whole, and the provider counted the request with the cut. Sent whole again, the next
//! request would be over the window while that count said it fit.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::ops::Range;

use condense_core::{Conversation, Part, ToolCall};
use condense_text::thousands;
use serde_json::Value;

use crate::note::preview;
use crate::{DecisionLog, InputCut, InputReport, PruneError, Pruner, handle_of};

/// One text of a call's input that may be cut.
struct Text {
    message: usize,
    part: usize,
    /// Where it is in the input (a JSON pointer: `/content`, `/edits/0/new_string`; empty for
    /// an input that is a text itself).
    at: String,
    tokens: usize,
}

/// Every string in `value` longer than `limit` bytes, with its JSON pointer under `at`: the
/// texts of an input, wherever its tool put them (a Write's `content`, each of a MultiEdit's
/// `edits`, a custom tool's whole input).
fn long_texts<'v>(value: &'v Value, at: String, limit: usize, out: &mut Vec<(String, &'v str)>) {
    match value {
        Value::String(text) if text.len() > limit => out.push((at, text)),
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                long_texts(item, format!("{at}/{index}"), limit, out);
            }
        }
        Value::Object(fields) => {
            for (key, item) in fields {
                let key = key.replace('~', "~0").replace('/', "~1");
                long_texts(item, format!("{at}/{key}"), limit, out);
            }
        }
        _ => {}
    }
}

impl Pruner<'_> {
    /// The whole input of `call` where its texts were cut to previews
    /// ([`Pruner::preview_inputs`]): the stored input a handle in its texts names (each cut
    /// text's note names it), with the same keys as the cut one. What condense's own summary
    /// reads: the command whole, not a preview that may stop inside a path, and the files it
    /// wrote (a heredoc, a redirect) where a command cut to nothing keeps only its note. `None`
    /// where none of its texts names a stored input.
    pub fn whole_input(&self, call: &ToolCall) -> Option<Value> {
        let Value::Object(cut) = &call.input else {
            return None;
        };
        let mut texts = Vec::new();
        long_texts(&call.input, String::new(), 0, &mut texts);
        texts
            .into_iter()
            .flat_map(|(_, text)| crate::handles_in(text.as_bytes()))
            .filter_map(|handle| self.store.get(handle).ok())
            .filter_map(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .find(|whole| {
                whole.as_object().is_some_and(|whole| {
                    whole.len() == cut.len() && whole.keys().all(|key| cut.contains_key(key))
                })
            })
    }

    /// Cuts the texts of the tool calls' inputs in `conversation.messages[within]` until about
    /// `excess` tokens are freed: the largest first, each cut to the same share of tokens
    /// (never more than `prune.preview_bytes`) and followed by `prune.input_note`, which names
    /// the whole input, stored first. A text is any string of an input longer than that note,
    /// wherever it is (a MultiEdit's edits too, an Edit's old and new strings); ids, names and
    /// every other value stay. Calls written inside the assistant's text and protected tools' calls
    /// ([`Pruner::preview_protected_inputs`]) are left alone, and so are calls already cut as
    /// `log` says and texts that are a preview with its note (`prune.input_note`, as a file
    /// condense wrote keeps them): a preview is not cut again.
    /// Each cut is logged in `log`. Returns how many calls' inputs were cut. On error (an
    /// original that could not be stored) nothing has changed.
    pub fn preview_inputs(
        &self,
        conversation: &mut Conversation,
        within: Range<usize>,
        excess: usize,
        log: &mut DecisionLog,
    ) -> Result<usize, PruneError> {
        self.inputs_previewed(conversation, within, excess, false, log)
    }

    /// [`Pruner::preview_inputs`] for the calls of protected tools alone: the last resort of a
    /// request still over the window with everything else cut (a memory the agent stores, larger
    /// than the window leaves). Protection keeps a call from being cut as a saving; a request the
    /// provider refuses keeps nothing.
    pub fn preview_protected_inputs(
        &self,
        conversation: &mut Conversation,
        within: Range<usize>,
        excess: usize,
        log: &mut DecisionLog,
    ) -> Result<usize, PruneError> {
        self.inputs_previewed(conversation, within, excess, true, log)
    }

    /// [`Pruner::preview_inputs`] of the protected tools' calls alone when `protected`, else of
    /// the others'.
    fn inputs_previewed(
        &self,
        conversation: &mut Conversation,
        within: Range<usize>,
        excess: usize,
        protected: bool,
        log: &mut DecisionLog,
    ) -> Result<usize, PruneError> {
        if excess == 0 {
            return Ok(0);
        }
        let texts = self.cuttable_texts(conversation, within, protected, log);
        let sizes: Vec<usize> = texts.iter().map(|text| text.tokens).collect();
        let (cut, share) = shares(
            &sizes,
            excess,
            self.note_tokens(&self.settings.rules.input_note),
        );
        let texts = &texts[..cut];
        let handles = self.inputs_stored(conversation, texts)?;
        let (edited, calls) = self.cut_enough(conversation, texts, share, excess, &handles);
        for &(message, part) in &calls {
            if let (Some(handle), Some(Part::ToolCall(call))) = (
                handles.get(&(message, part)),
                edited.messages[message].parts.get(part),
            ) {
                log.record_input(
                    call.id.clone(),
                    InputCut {
                        handle: handle.clone(),
                        input: call.input.clone(),
                    },
                );
            }
        }
        if !calls.is_empty() {
            *conversation = edited;
        }
        Ok(calls.len())
    }

    /// The texts [`Pruner::preview_inputs`] may cut in `conversation.messages[within]`, the
    /// largest first (among equals, the earliest: a stable sort keeps their order).
    fn cuttable_texts(
        &self,
        conversation: &Conversation,
        within: Range<usize>,
        protected: bool,
        log: &DecisionLog,
    ) -> Vec<Text> {
        // A text is worth cutting where it is longer than the note that would follow its
        // preview: the largest are cut first, and a smaller one only where the larger, cut to
        // nothing, would not free enough ([`shares`]). (Fewer bytes than the note's tokens are
        // fewer tokens too.)
        let note = self.note_tokens(&self.settings.rules.input_note);
        let mut texts = Vec::new();
        for (message, parts) in conversation
            .messages
            .iter()
            .enumerate()
            .filter(|(index, _)| within.contains(index))
            .map(|(index, message)| (index, &message.parts))
        {
            // A call written inside the assistant's text (mini-swe-agent's fenced blocks) is
            // written as that text: cutting its input would change nothing sent. A protected
            // tool's call (a memory the agent stores) is cut only by the last resort, with the
            // protected tools' calls alone.
            for (part, call) in parts
                .iter()
                .enumerate()
                .filter_map(|(at, part)| Some((at, part.as_tool_call()?)))
                .filter(|(_, call)| {
                    !call.embedded
                        && self.settings.rules.protected_tools.contains(&call.name) == protected
                        && log
                            .input_cut(&call.id)
                            .is_none_or(|cut| cut.input != call.input)
                })
            {
                let mut found = Vec::new();
                long_texts(&call.input, String::new(), note, &mut found);
                // A text cut before and written to a file (which keeps no log) is a preview
                // and its note: never cut again, which would store the preview as the "whole"
                // and bury the first note's handle under a second.
                found.retain(|(_, text)| !self.settings.rules.input_note.recognises(text));
                texts.extend(
                    found
                        .into_iter()
                        .map(|(at, text)| Text {
                            message,
                            part,
                            at,
                            tokens: self.counter.count_text(text),
                        })
                        .filter(|text| text.tokens > note),
                );
            }
        }
        texts.sort_by_key(|text| std::cmp::Reverse(text.tokens));
        texts
    }

    /// The tokens of `note` (the input note, or the preview note) at its longest: what each
    /// cut gains back.
    pub(crate) fn note_tokens(&self, note: &crate::note::Note) -> usize {
        self.counter.count_text(&note.render(&[
            ("tool", "a_tool_name"),
            ("tokens", "999,999"),
            ("chars", "9,999,999"),
            ("handle", &handle_of(b"")),
            ("shown", "9,999,999"),
        ]))
    }

    /// The whole input of each call `texts` are in, stored before any of its texts is cut: the
    /// handle of each, by (message, part). A store that fails is an error, and nothing is cut.
    fn inputs_stored(
        &self,
        conversation: &Conversation,
        texts: &[Text],
    ) -> Result<HashMap<(usize, usize), String>, PruneError> {
        let mut handles: HashMap<(usize, usize), String> = HashMap::new();
        for text in texts {
            if let Entry::Vacant(entry) = handles.entry((text.message, text.part)) {
                let Some(Part::ToolCall(call)) =
                    conversation.messages[text.message].parts.get(text.part)
                else {
                    continue;
                };
                let whole = call.input.to_string();
                let handle = handle_of(whole.as_bytes());
                self.store
                    .put(&handle, whole.as_bytes())
                    .map_err(|source| PruneError::StoreInput {
                        call_id: call.id.clone(),
                        message: text.message,
                        source,
                    })?;
                entry.insert(handle);
            }
        }
        Ok(handles)
    }

    /// `conversation` with `texts` cut to `share` tokens each, or less: the share is reckoned in
    /// tokens a text keeps and cut in bytes, so where that frees less than `excess`, a smaller
    /// share, at most a few times, then none. With the calls cut (message, part).
    fn cut_enough(
        &self,
        conversation: &Conversation,
        texts: &[Text],
        mut share: usize,
        excess: usize,
        handles: &HashMap<(usize, usize), String>,
    ) -> (Conversation, Vec<(usize, usize)>) {
        for _ in 0..4 {
            let (edited, freed, calls) = self.cut_to(conversation, texts, share, handles);
            if freed >= excess || share == 0 {
                return (edited, calls);
            }
            share = share.saturating_sub((excess - freed) / texts.len().max(1) + 1);
        }
        let (edited, _, calls) = self.cut_to(conversation, texts, 0, handles);
        (edited, calls)
    }

    /// The cuts `log` holds made again on the calls of `conversation` they were made for (the
    /// whole input's handle tells the call from another under the same id), as [`Pruner::prune`]
    /// makes every frozen decision again: each call cut, with its input's tokens before and
    /// after. A call already as it was sent, or written inside the assistant's text, is left as
    /// it is.
    pub(crate) fn cut_inputs_again(
        &self,
        conversation: &mut Conversation,
        log: &DecisionLog,
    ) -> Vec<InputReport> {
        let mut cut_again = Vec::new();
        for (index, message) in conversation.messages.iter_mut().enumerate() {
            for part in &mut message.parts {
                let Part::ToolCall(call) = part else {
                    continue;
                };
                let Some(cut) = log.input_cut(&call.id) else {
                    continue;
                };
                // A protected tool's call is in the log only as the last resort cut it.
                if call.input == cut.input || call.embedded {
                    continue;
                }
                let whole = call.input.to_string();
                if handle_of(whole.as_bytes()) != cut.handle {
                    continue;
                }
                cut_again.push(InputReport {
                    message: index,
                    call_id: call.id.clone(),
                    tokens_before: self.counter.count_text(&whole),
                    tokens_after: self.counter.count_text(&cut.input.to_string()),
                });
                call.input = cut.input.clone();
                call.raw_input = None;
            }
        }
        cut_again
    }

    /// `conversation` with each of `texts` cut to a preview of about `share` tokens (at most
    /// `prune.preview_bytes`) and the note naming its call's stored input (`handles`), with the
    /// tokens that freed and the calls it cut (message, part).
    fn cut_to(
        &self,
        conversation: &Conversation,
        texts: &[Text],
        share: usize,
        handles: &HashMap<(usize, usize), String>,
    ) -> (Conversation, usize, Vec<(usize, usize)>) {
        let limit = self.settings.rules.preview_bytes;
        let mut edited = conversation.clone();
        let mut calls = HashSet::new();
        let mut freed = 0;
        for text in texts {
            let key = (text.message, text.part);
            let (Some(handle), Some(Part::ToolCall(call))) = (
                handles.get(&key),
                edited.messages[text.message].parts.get_mut(text.part),
            ) else {
                continue;
            };
            let Some(Value::String(value)) = call.input.pointer(&text.at) else {
                continue;
            };
            let bytes = (value.len().saturating_mul(share) / text.tokens.max(1)).min(limit);
            let shown = preview(value, bytes).into_owned();
            let files = names_past(&call.name, &call.input, &text.at, &shown);
            let Some(Value::String(value)) = call.input.pointer_mut(&text.at) else {
                continue;
            };
            let note = self.settings.rules.input_note.render(&[
                ("tool", &call.name),
                ("tokens", &thousands(text.tokens)),
                ("chars", &thousands(value.chars().count())),
                ("handle", handle),
                ("shown", &thousands(shown.chars().count())),
                ("files", &files),
            ]);
            let cut = format!("{shown}{note}");
            if cut.len() >= value.len() {
                continue;
            }
            freed += text.tokens.saturating_sub(self.counter.count_text(&cut));
            *value = cut;
            // The writers serialize the input again (OpenAI's `arguments`, kept as they came
            // for a request sent unchanged).
            call.raw_input = None;
            calls.insert(key);
        }
        let mut calls: Vec<_> = calls.into_iter().collect();
        calls.sort_unstable();
        (edited, freed, calls)
    }
}

/// What an input's note says of the files `input` (a call of `tool`) names that it would no
/// longer name with its text at `at` cut to `shown`: `; past the cut it names a, b`, or nothing.
/// A shell command is such a text: the files of a `git add` before a long commit message go
/// with the rest of its list, and every summary made of the call after reads the cut command.
fn names_past(tool: &str, input: &Value, at: &str, shown: &str) -> String {
    let mut cut = input.clone();
    if let Some(text) = cut.pointer_mut(at) {
        *text = Value::String(shown.to_owned());
    }
    let (still, _) = condense_core::tool_paths::touched(tool, &cut);
    let (named, _) = condense_core::tool_paths::touched(tool, input);
    let past: Vec<&str> = named
        .into_iter()
        .filter(|path| !still.contains(path))
        .collect();
    if past.is_empty() {
        String::new()
    } else {
        format!("; past the cut it names {}", past.join(", "))
    }
}

/// How many of the texts of `tokens` tokens (the largest first) are cut, and the tokens each
/// keeps, for about `excess` tokens to be freed with a note of `note` tokens after each: the same
/// share for each text cut, the largest that frees enough (the tail's outputs share their room
/// so too), so that no text is cut to nothing while another keeps more than it.
pub(crate) fn shares(tokens: &[usize], excess: usize, note: usize) -> (usize, usize) {
    let mut sum = 0;
    for (index, size) in tokens.iter().enumerate() {
        sum += size;
        let cut = index + 1;
        let share = sum.saturating_sub(excess + cut * note) / cut;
        if tokens.get(cut).is_none_or(|next| share >= *next) {
            return (cut, share);
        }
    }
    (tokens.len(), 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use condense_core::testing::tool_step;
    use condense_core::{Message, Role};
    use condense_tokenizer::{Tiktoken, TokenCounter};
    use serde_json::json;

    use super::*;
    use crate::test_support::pruner;
    use crate::{DecisionLog, MemoryStore, PruneSettings, Store};

    /// A file of `lines` numbered lines, as an agent writes one.
    fn file(lines: usize) -> String {
        (0..lines)
            .map(|n| format!("line {n}: let x{n} = {n};\n"))
            .collect()
    }

    /// A task, then a Write of `content` and its result.
    fn writing(content: &str) -> Conversation {
        let mut messages = vec![Message::text(Role::User, "write the module")];
        messages.extend(tool_step(
            "w1",
            "Write",
            json!({"file_path": "/src/big.rs", "content": content}),
            "File created successfully at: /src/big.rs",
        ));
        Conversation::new(messages)
    }

    fn input_of(conversation: &Conversation) -> serde_json::Value {
        conversation.messages[1].parts[0]
            .as_tool_call()
            .unwrap()
            .input
            .clone()
    }

    /// A shell command cut short (a `git add` list before a long commit message, as Claude Code
    /// commits): its note names the files past the cut, so that the request, and every summary
    /// made of the call after, still names them; a cut that leaves every file shown says
    /// nothing of them.
    #[test]
    fn a_command_cut_short_names_the_files_past_the_cut() {
        let settings = PruneSettings::built_in().unwrap();
        let counter = Tiktoken::default();
        let store = MemoryStore::new();
        let pruner = pruner(&settings, &counter, &store);
        let message =
            "Add the review page.\n\n".to_owned() + &"It lists every open note. ".repeat(300);
        let files = [
            "lib/web/review_live.ex",
            "lib/web/router.ex",
            "config/test.exs",
            "mix.exs",
            "mix.lock",
            ".beads/",
        ];
        let command = format!(
            "git add {} && git commit -m \"$(cat <<'EOF'\n{message}\nEOF\n)\"",
            files.join(" ")
        );
        let committing = |command: &str| {
            let mut messages = vec![Message::text(Role::User, "commit it")];
            messages.extend(tool_step(
                "b1",
                "Bash",
                json!({"command": command}),
                "[main 1a2b3c] Add the review page",
            ));
            Conversation::new(messages)
        };
        let named = |conversation: &Conversation| -> Vec<String> {
            let input = input_of(conversation);
            let (touched, _) = condense_core::tool_paths::touched("Bash", &input);
            touched.into_iter().map(str::to_owned).collect()
        };

        // Cut before the list ends (here to nothing: a preview ends at a line's end): the
        // files past the cut named in the note.
        let mut conversation = committing(&command);
        let whole = counter.count_conversation(&conversation);
        pruner
            .preview_inputs(&mut conversation, 0..3, whole - 60, &mut DecisionLog::new())
            .unwrap();
        let cut = input_of(&conversation)["command"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(cut.len() < 400, "{cut}");
        assert!(
            cut.contains(&format!("; past the cut it names {}.", files.join(", "))),
            "{cut}"
        );
        assert_eq!(named(&conversation), files, "{cut}");

        // Cut inside the message, the list shown whole: nothing more is said.
        let mut conversation = committing(&command);
        pruner
            .preview_inputs(&mut conversation, 0..3, 1_000, &mut DecisionLog::new())
            .unwrap();
        let cut = input_of(&conversation)["command"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            cut.starts_with(&format!("git add {}", files.join(" "))),
            "{cut}"
        );
        assert!(!cut.contains("past the cut"), "{cut}");
        assert!(cut.ends_with("]"), "{cut}");
    }

    #[test]
    fn a_large_input_is_cut_until_enough_is_freed_and_kept_whole_in_the_store() {
        let settings = PruneSettings::built_in().unwrap();
        let counter = Tiktoken::default();
        let store = MemoryStore::new();
        let pruner = pruner(&settings, &counter, &store);
        let content = file(600);
        let mut conversation = writing(&content);
        let before = counter.count_conversation(&conversation);
        let whole = input_of(&conversation);

        // Nothing to free, nothing cut; and a range without the call cuts nothing either.
        let mut same = conversation.clone();
        assert_eq!(
            pruner
                .preview_inputs(&mut same, 0..3, 0, &mut DecisionLog::new())
                .unwrap(),
            0
        );
        assert_eq!(
            pruner
                .preview_inputs(&mut same, 2..3, 5_000, &mut DecisionLog::new())
                .unwrap(),
            0
        );
        assert_eq!(same, conversation);
        // Nor a call written inside the assistant's text, which is what is sent of it.
        let mut embedded = conversation.clone();
        if let Part::ToolCall(call) = &mut embedded.messages[1].parts[0] {
            call.embedded = true;
        }
        let before_embedded = embedded.clone();
        assert_eq!(
            pruner
                .preview_inputs(&mut embedded, 0..3, 5_000, &mut DecisionLog::new())
                .unwrap(),
            0
        );
        assert_eq!(embedded, before_embedded);
        // Nor a protected tool's.
        let mut protecting = settings.clone();
        protecting.rules.protected_tools.insert("Write".to_owned());
        let guarded = Pruner {
            settings: &protecting,
            ..pruner
        };
        let mut kept = conversation.clone();
        assert_eq!(
            guarded
                .preview_inputs(&mut kept, 0..3, 5_000, &mut DecisionLog::new())
                .unwrap(),
            0
        );
        assert_eq!(kept, conversation);
        // But by the last resort, the protected tools' calls alone, cut as any other would be.
        let mut last_resort = conversation.clone();
        assert_eq!(
            guarded
                .preview_protected_inputs(&mut last_resort, 0..3, 3_000, &mut DecisionLog::new())
                .unwrap(),
            1
        );
        assert_eq!(
            pruner
                .preview_protected_inputs(&mut kept, 0..3, 3_000, &mut DecisionLog::new())
                .unwrap(),
            0,
            "a tool not protected is not the last resort's"
        );

        let excess = 3_000;
        let mut log = DecisionLog::new();
        assert_eq!(
            pruner
                .preview_inputs(&mut conversation, 0..3, excess, &mut log)
                .unwrap(),
            1
        );
        assert!(before - counter.count_conversation(&conversation) >= excess);
        let input = input_of(&conversation);
        // The path and the call stay; the content keeps its first lines, then the note.
        assert_eq!(input["file_path"], "/src/big.rs");
        let cut = input["content"].as_str().unwrap();
        assert!(cut.starts_with("line 0: let x0 = 0;\n"));
        assert!(cut.len() < content.len());
        let handle = handle_of(whole.to_string().as_bytes());
        assert!(
            cut.ends_with(&format!(
                "tokens in all). Whole input: condense recall {handle}]"
            )),
            "{cut}"
        );
        assert_eq!(store.get(&handle).unwrap(), whole.to_string().into_bytes());
        let call = conversation.messages[1].parts[0].as_tool_call().unwrap();
        assert_eq!((call.id.as_str(), call.raw_input.as_ref()), ("w1", None));
        // The result and the task are untouched.
        assert_eq!(conversation.messages[0], writing(&content).messages[0]);
        assert_eq!(conversation.messages[2], writing(&content).messages[2]);

        // Logged, and made again on the next request, which carries the input whole: the same
        // bytes; a call cut before is not cut again.
        let logged = log.input_cut("w1").unwrap();
        assert_eq!((&logged.handle, &logged.input), (&handle, &input));
        let mut resent = writing(&content);
        let again = pruner.cut_inputs_again(&mut resent, &log);
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].message, again[0].call_id.as_str()), (1, "w1"));
        assert_eq!(
            again[0].tokens_before - again[0].tokens_after,
            counter.count_text(&whole.to_string()) - counter.count_text(&input.to_string())
        );
        assert_eq!(resent, conversation);
        assert!(pruner.cut_inputs_again(&mut resent, &log).is_empty());
        // Nor by a fresh log (a file `condense compact` wrote, resumed): the preview and its
        // note are recognised, never stored as a "whole" under a second note.
        let mut resumed = conversation.clone();
        assert_eq!(
            pruner
                .preview_inputs(&mut resumed, 0..3, excess, &mut DecisionLog::new())
                .unwrap(),
            0
        );
        assert_eq!(resumed, conversation);
        // As the pruner makes every frozen decision again: reported, and counted as frozen.
        let mut pruned = writing(&content);
        let report = pruner
            .prune(
                &mut pruned,
                &mut log.clone(),
                crate::PruneRequest {
                    skip_walk: true,
                    ..crate::PruneRequest::default()
                },
            )
            .unwrap();
        assert_eq!(pruned, conversation);
        assert!(report.changed() && report.replaced() == 0);
        let freed = again[0].tokens_before - again[0].tokens_after;
        assert_eq!(
            (report.frozen_tokens_up_to(0), report.frozen_tokens_up_to(1)),
            (0, freed)
        );
        assert!(
            report
                .to_string()
                .contains("input cut again, as the log says  [w1]")
        );
        assert_eq!(
            pruner
                .preview_inputs(&mut resent, 0..3, excess, &mut log)
                .unwrap(),
            0
        );
        assert_eq!(resent, conversation);
        // Another input under the same id (SWE-agent reuses ids) is not the one cut.
        let mut other = writing(&file(601));
        let before_other = other.clone();
        assert!(pruner.cut_inputs_again(&mut other, &log).is_empty());
        assert_eq!(other, before_other);
        // and is cut where the window needs it, as any other.
        assert_eq!(
            pruner
                .preview_inputs(&mut other, 0..3, excess, &mut log)
                .unwrap(),
            1
        );
        assert_ne!(log.input_cut("w1").unwrap().handle, handle);
    }

    /// An Edit's strings, each under `prune.preview_bytes` (d7d349f9's edits of a header, in a
    /// 16K window its prefix nearly fills): cut where nothing else frees enough, the largest
    /// first; a string no longer than the note that would follow it never.
    #[test]
    fn texts_shorter_than_a_preview_are_cut_where_nothing_larger_frees_enough() {
        let settings = PruneSettings::built_in().unwrap();
        let counter = Tiktoken::default();
        let store = MemoryStore::new();
        let pruner = pruner(&settings, &counter, &store);
        let (old, new) = (file(40), file(60));
        assert!(new.len() < settings.rules.preview_bytes, "{}", new.len());
        let input = json!({"file_path": "/src/tensor.h", "old_string": old, "new_string": new});
        let mut messages = vec![Message::text(Role::User, "add the GPU fields")];
        messages.extend(tool_step(
            "e1",
            "Edit",
            input.clone(),
            "The file was updated.",
        ));
        let mut conversation = Conversation::new(messages);
        let before = counter.count_conversation(&conversation);
        let excess = 100;
        let calls = pruner.preview_inputs(&mut conversation, 0..3, excess, &mut DecisionLog::new());
        assert_eq!(calls.unwrap(), 1);
        assert!(counter.count_conversation(&conversation) + excess <= before);
        let cut = input_of(&conversation);
        // The larger string cut to what the smaller keeps frees enough: the smaller stays.
        assert_eq!(cut["old_string"], input["old_string"]);
        let text = cut["new_string"].as_str().unwrap();
        assert!(text.starts_with("line 0: ") && text.contains("Whole input: condense recall"));
        // A string no longer than the note is never cut, whatever must go.
        let short = json!({"file_path": "/src/tensor.h", "old_string": "a", "new_string": "b"});
        let mut messages = vec![Message::text(Role::User, "rename it")];
        messages.extend(tool_step("e2", "Edit", short, "The file was updated."));
        let mut conversation = Conversation::new(messages);
        let calls = pruner.preview_inputs(&mut conversation, 0..3, 500, &mut DecisionLog::new());
        assert_eq!(calls.unwrap(), 0);
    }

    #[test]
    fn the_texts_of_a_nested_input_are_cut_where_they_are() {
        let settings = PruneSettings::built_in().unwrap();
        let counter = Tiktoken::default();
        let store = MemoryStore::new();
        let pruner = pruner(&settings, &counter, &store);
        let (old, new) = (file(300), file(400));
        let input = json!({"file_path": "/src/a/b.rs", "edits": [
            {"old_string": "fn a() {}", "new_string": "fn a() { b() }"},
            {"old_string": old, "new_string": new, "replace_all/literal": false},
        ]});
        let mut messages = vec![Message::text(Role::User, "rework it")];
        messages.extend(tool_step(
            "m1",
            "MultiEdit",
            input.clone(),
            "Applied 2 edits",
        ));
        let mut conversation = Conversation::new(messages);
        assert_eq!(
            pruner
                .preview_inputs(&mut conversation, 0..3, 5_000, &mut DecisionLog::new())
                .unwrap(),
            1
        );
        let cut = input_of(&conversation);
        // Both texts cut to the same share of tokens, each where it was, the rest as it was.
        let edits = cut["edits"].as_array().unwrap();
        assert_eq!(edits[0], input["edits"][0]);
        assert_eq!(edits[1]["replace_all/literal"], false);
        for field in ["old_string", "new_string"] {
            let text = edits[1][field].as_str().unwrap();
            assert!(text.starts_with("line 0: ") && text.contains("Whole input: condense recall"));
        }
        assert_eq!(cut["file_path"], "/src/a/b.rs");
        let handle = handle_of(input.to_string().as_bytes());
        assert_eq!(store.get(&handle).unwrap(), input.to_string().into_bytes());
    }

    #[test]
    fn an_input_is_not_cut_when_its_original_cannot_be_stored() {
        let settings = PruneSettings::built_in().unwrap();
        let counter = Tiktoken::default();
        let pruner = pruner(&settings, &counter, &crate::test_support::Full);
        let mut conversation = writing(&file(600));
        let before = conversation.clone();
        let mut log = DecisionLog::new();
        let error = pruner
            .preview_inputs(&mut conversation, 0..3, 3_000, &mut log)
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("could not store the whole input of tool call `w1` (message 1)"),
            "{error}"
        );
        assert_eq!(conversation, before);
        assert!(log.is_empty());
    }
}
