//! Anthropic's `context_management` edits, applied by condense for an upstream that has none
//! (`serve.native_compaction`): an Anthropic-compatible endpoint of another vendor would refuse
//! the field or ignore it. The field is taken off the request; `clear_tool_uses_20250919` and
//! `clear_thinking_20251015` are applied to the request as Anthropic applies them on its side
//! (originals stored, each placeholder naming its handle, recallable as every other); the answer
//! reports them in `context_management.applied_edits`, as Anthropic's does. `compact_20260112`
//! is read here ([`compact_edit`]) and run by the proxy: past its trigger condense summarizes
//! the request now, sends the upstream its compacted form, and answers with a `compaction` block
//! first, as Anthropic does (or with that block alone, `stop_reason: "compaction"`, when
//! `pause_after_compaction` asks).

use condense_core::{Conversation, Part, Role, ToolOutput};
use condense_pruner::{Store, handle_of};
use condense_tokenizer::TokenCounter;
use serde_json::{Value, json};

/// The edit types condense applies.
const CLEAR_TOOL_USES: &str = "clear_tool_uses_20250919";
const CLEAR_THINKING: &str = "clear_thinking_20251015";
const COMPACT: &str = "compact_20260112";

/// Anthropic's defaults for `clear_tool_uses`: cleared past 100,000 input tokens, the 3 most
/// recent tool uses kept.
const DEFAULT_TRIGGER: usize = 100_000;
const DEFAULT_KEEP: usize = 3;
/// Anthropic's default trigger for `compact_20260112`: 150,000 input tokens.
const DEFAULT_COMPACT_TRIGGER: usize = 150_000;

/// The `compact_20260112` edit of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactEdit {
    /// Compacted once the request's input reaches this many tokens.
    pub trigger: usize,
    /// Answer with the compaction block alone (`stop_reason: "compaction"`), the upstream not
    /// asked.
    pub pause: bool,
}

/// One edit as the request asked for it.
#[derive(Debug, Clone, PartialEq)]
enum Edit {
    ClearToolUses {
        trigger: usize,
        keep: usize,
        clear_at_least: usize,
        exclude: Vec<String>,
        /// `true` for every tool, or the tools whose inputs are cleared too.
        clear_inputs: ClearInputs,
    },
    ClearThinking {
        /// The most recent assistant turns whose thinking is kept; `None`: all.
        keep: Option<usize>,
    },
    Compact(CompactEdit),
}

#[derive(Debug, Clone, PartialEq)]
enum ClearInputs {
    None,
    All,
    Of(Vec<String>),
}

/// The edits of a request's `context_management`, taken off its envelope; `Ok(None)` when it
/// has none. An edit condense does not know, or a malformed one, is an error for a 400.
pub fn take(conversation: &mut Conversation) -> Result<Option<Vec<Value>>, String> {
    let Some(envelope) = conversation.envelope.as_mut() else {
        return Ok(None);
    };
    let Some(field) = envelope.shift_remove("context_management") else {
        return Ok(None);
    };
    let edits = field
        .get("edits")
        .and_then(Value::as_array)
        .cloned()
        .ok_or("`context_management` needs an `edits` list")?;
    for edit in &edits {
        parse(edit)?;
    }
    Ok(Some(edits))
}

fn count_field(edit: &Value, key: &str, kind: &str, default: usize) -> Result<usize, String> {
    match edit.get(key) {
        None => Ok(default),
        Some(value) => {
            if value["type"] != kind {
                return Err(format!(
                    "`{key}` of a {} edit is `{{\"type\": \"{kind}\", \"value\": N}}`",
                    edit["type"]
                ));
            }
            value["value"]
                .as_u64()
                .and_then(|value| usize::try_from(value).ok())
                .ok_or_else(|| format!("`{key}.value` must be a whole number"))
        }
    }
}

fn parse(edit: &Value) -> Result<Edit, String> {
    match edit["type"].as_str() {
        Some(CLEAR_TOOL_USES) => Ok(Edit::ClearToolUses {
            trigger: count_field(edit, "trigger", "input_tokens", DEFAULT_TRIGGER)?,
            keep: count_field(edit, "keep", "tool_uses", DEFAULT_KEEP)?,
            clear_at_least: count_field(edit, "clear_at_least", "input_tokens", 0)?,
            exclude: names(edit.get("exclude_tools"))?,
            clear_inputs: match edit.get("clear_tool_inputs") {
                None | Some(Value::Bool(false)) => ClearInputs::None,
                Some(Value::Bool(true)) => ClearInputs::All,
                Some(list) => ClearInputs::Of(names(Some(list))?),
            },
        }),
        Some(CLEAR_THINKING) => Ok(Edit::ClearThinking {
            keep: match edit.get("keep") {
                None => Some(1),
                Some(Value::String(all)) if all == "all" => None,
                Some(_) => Some(count_field(edit, "keep", "thinking_turns", 1)?),
            },
        }),
        Some(COMPACT) => Ok(Edit::Compact(CompactEdit {
            trigger: count_field(edit, "trigger", "input_tokens", DEFAULT_COMPACT_TRIGGER)?,
            pause: match edit.get("pause_after_compaction") {
                None => false,
                Some(Value::Bool(pause)) => *pause,
                Some(_) => return Err("`pause_after_compaction` is true or false".into()),
            },
        })),
        Some(other) => Err(format!(
            "condense does not apply the context edit `{other}` (it applies {CLEAR_TOOL_USES}, {CLEAR_THINKING} and {COMPACT})"
        )),
        None => Err("a context edit needs a `type`".into()),
    }
}

fn names(value: Option<&Value>) -> Result<Vec<String>, String> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| "tool names are strings".to_owned())
            })
            .collect(),
        Some(_) => Err("a list of tool names is expected".into()),
    }
}

/// Applies `edits` to `conversation` in order; what each did, in Anthropic's
/// `applied_edits` shape (an edit whose trigger was not reached is not listed).
pub fn apply(
    edits: &[Value],
    conversation: &mut Conversation,
    counter: &dyn TokenCounter,
    store: &dyn Store,
) -> Result<Vec<Value>, String> {
    let mut applied = Vec::new();
    for edit in edits {
        match parse(edit)? {
            Edit::ClearToolUses {
                trigger,
                keep,
                clear_at_least,
                exclude,
                clear_inputs,
            } => {
                if counter.count_conversation(conversation) < trigger {
                    continue;
                }
                if let Some(done) = clear_tool_uses(
                    conversation,
                    counter,
                    store,
                    keep,
                    clear_at_least,
                    &exclude,
                    &clear_inputs,
                )? {
                    applied.push(done);
                }
            }
            Edit::ClearThinking { keep } => {
                if let Some(done) = clear_thinking(conversation, counter, keep) {
                    applied.push(done);
                }
            }
            // Run by the proxy, after these: it needs the summarizer.
            Edit::Compact(_) => {}
        }
    }
    Ok(applied)
}

/// The `compact_20260112` edit among `edits`, if any (the last one when several).
pub fn compact_edit(edits: &[Value]) -> Result<Option<CompactEdit>, String> {
    let mut found = None;
    for edit in edits {
        if let Edit::Compact(compact) = parse(edit)? {
            found = Some(compact);
        }
    }
    Ok(found)
}

/// The placeholder a cleared tool result holds.
fn cleared(handle: &str) -> String {
    format!("[tool result cleared by context management; original: condense recall {handle}]")
}

/// Every tool call, oldest first: its message, its part, its id and its tool.
fn calls_of(conversation: &Conversation) -> Vec<(usize, usize, String, String)> {
    conversation
        .messages
        .iter()
        .enumerate()
        .flat_map(|(index, message)| {
            message
                .parts
                .iter()
                .enumerate()
                .filter_map(move |(part, p)| {
                    p.as_tool_call()
                        .map(|call| (index, part, call.id.clone(), call.name.clone()))
                })
        })
        .collect()
}

/// Clears the results of call `id` not cleared yet, each original kept in `store` under the
/// handle its placeholder names; whether any was.
fn clear_results_of(
    conversation: &mut Conversation,
    id: &str,
    store: &dyn Store,
) -> Result<bool, String> {
    let mut any = false;
    for result in conversation
        .messages
        .iter_mut()
        .flat_map(|message| message.parts.iter_mut())
        .filter_map(|part| match part {
            Part::ToolResult(result) if result.call_id == id => Some(result),
            _ => None,
        })
    {
        if result.compacted.is_some()
            || matches!(&result.content, ToolOutput::Text(text) if text.starts_with("[tool result cleared"))
        {
            continue;
        }
        let bytes = match &result.content {
            ToolOutput::Text(text) => text.as_bytes().to_vec(),
            ToolOutput::Parts(parts) => {
                serde_json::to_vec(parts).map_err(|error| error.to_string())?
            }
        };
        let handle = handle_of(&bytes);
        store
            .put(&handle, &bytes)
            .map_err(|error| format!("condense could not keep a cleared result: {error}"))?;
        result.content = ToolOutput::Text(cleared(&handle));
        any = true;
    }
    Ok(any)
}

/// Anthropic's `clear_tool_uses`: the results of all but the `keep` most recent calls cleared
/// (not those of `exclude`'s tools), and their inputs too as `clear_inputs` says; nothing when
/// it would free less than `clear_at_least` tokens.
fn clear_tool_uses(
    conversation: &mut Conversation,
    counter: &dyn TokenCounter,
    store: &dyn Store,
    keep: usize,
    clear_at_least: usize,
    exclude: &[String],
    clear_inputs: &ClearInputs,
) -> Result<Option<Value>, String> {
    let calls = calls_of(conversation);
    let clearable = calls.len().saturating_sub(keep);
    let chosen: Vec<&(usize, usize, String, String)> = calls[..clearable]
        .iter()
        .filter(|(_, _, _, name)| !exclude.contains(name))
        .collect();
    let before = counter.count_conversation(conversation);
    let mut edited = conversation.clone();
    let mut count = 0;
    for (message, part, id, name) in chosen {
        let mut any = clear_results_of(&mut edited, id, store)?;
        let inputs = match clear_inputs {
            ClearInputs::None => false,
            ClearInputs::All => true,
            ClearInputs::Of(tools) => tools.contains(name),
        };
        if inputs && let Some(Part::ToolCall(call)) = edited.messages[*message].parts.get_mut(*part)
        {
            call.input = json!({});
            call.raw_input = None;
            any = true;
        }
        count += usize::from(any);
    }
    let freed = before.saturating_sub(counter.count_conversation(&edited));
    // Anthropic clears nothing when it cannot clear at least this much: a cache written again
    // for less is not worth it.
    if count == 0 || freed < clear_at_least {
        return Ok(None);
    }
    *conversation = edited;
    Ok(Some(json!({
        "type": CLEAR_TOOL_USES,
        "cleared_tool_uses": count,
        "cleared_input_tokens": freed,
    })))
}

fn clear_thinking(
    conversation: &mut Conversation,
    counter: &dyn TokenCounter,
    keep: Option<usize>,
) -> Option<Value> {
    let keep = keep?;
    let thinking = |part: &Part| {
        matches!(part, Part::Thinking(_))
            || matches!(part, Part::Opaque { value } if value["type"] == "redacted_thinking")
    };
    let turns: Vec<usize> = conversation
        .messages
        .iter()
        .enumerate()
        .filter(|(_, message)| {
            message.role == Role::Assistant && message.parts.iter().any(thinking)
        })
        .map(|(index, _)| index)
        .collect();
    let cleared_turns = turns.len().saturating_sub(keep);
    if cleared_turns == 0 {
        return None;
    }
    let before = counter.count_conversation(conversation);
    for &index in &turns[..cleared_turns] {
        let message = &mut conversation.messages[index];
        let kept_parts: Vec<bool> = message.parts.iter().map(|part| !thinking(part)).collect();
        // Each wire record keeps its share of what is left.
        let mut at = 0;
        for record in &mut message.wire {
            let share =
                &kept_parts[at.min(kept_parts.len())..(at + record.parts).min(kept_parts.len())];
            at += record.parts;
            record.parts = share.iter().filter(|kept| **kept).count();
        }
        let mut flags = kept_parts.into_iter();
        message.parts.retain(|_| flags.next().unwrap_or(true));
    }
    Some(json!({
        "type": CLEAR_THINKING,
        "cleared_thinking_turns": cleared_turns,
        "cleared_input_tokens": before.saturating_sub(counter.count_conversation(conversation)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_pruner::MemoryStore;
    use condense_tokenizer::Tiktoken;

    fn body(edits: Value) -> Conversation {
        let mut messages = vec![json!({"role": "user", "content": "fix it"})];
        for step in 0..6 {
            messages.push(json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": format!("step {step}"), "signature": "sig"},
                {"type": "tool_use", "id": format!("t{step}"), "name": if step == 1 { "memory" } else { "Read" }, "input": {"file_path": format!("f{step}.rs")}}
            ]}));
            messages.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": format!("t{step}"), "content": format!("line {step}\n").repeat(400)}
            ]}));
        }
        condense_formats::read_json(
            condense_formats::Format::Anthropic,
            json!({"model": "m", "max_tokens": 10, "context_management": {"edits": edits}, "messages": messages}),
        )
        .unwrap()
    }

    #[test]
    fn old_tool_results_and_thinking_are_cleared_as_anthropic_clears_them() {
        let mut conversation = body(json!([
            {"type": CLEAR_TOOL_USES, "trigger": {"type": "input_tokens", "value": 1000},
             "keep": {"type": "tool_uses", "value": 2}, "exclude_tools": ["memory"]},
            {"type": CLEAR_THINKING, "keep": {"type": "thinking_turns", "value": 1}},
        ]));
        let edits = take(&mut conversation).unwrap().unwrap();
        assert!(
            !conversation
                .envelope
                .as_ref()
                .unwrap()
                .contains_key("context_management")
        );
        let store = MemoryStore::new();
        let applied = apply(&edits, &mut conversation, &Tiktoken::default(), &store).unwrap();
        assert_eq!(applied[0]["type"], CLEAR_TOOL_USES);
        // Six calls, the last two kept, `memory` excluded: three cleared.
        assert_eq!(applied[0]["cleared_tool_uses"], 3);
        assert!(applied[0]["cleared_input_tokens"].as_u64().unwrap() > 1_000);
        assert_eq!(applied[1]["cleared_thinking_turns"], 5);
        let written =
            condense_formats::write_compact(condense_formats::Format::Anthropic, &conversation)
                .unwrap();
        let text = String::from_utf8(written).unwrap();
        assert_eq!(text.matches("cleared by context management").count(), 3);
        assert_eq!(text.matches("\"type\":\"thinking\"").count(), 1);
        assert!(conversation.validate().is_empty());
        // The originals can be recalled.
        let handle = text.split("condense recall ").nth(1).unwrap()[..32].to_owned();
        assert!(store.get(&handle).unwrap().starts_with(b"line "));
    }

    #[test]
    fn under_the_trigger_or_clear_at_least_nothing_changes_and_unknown_edits_are_refused() {
        let mut conversation = body(json!([
            {"type": CLEAR_TOOL_USES, "clear_at_least": {"type": "input_tokens", "value": 1000000}},
        ]));
        let before = conversation.clone();
        let edits = take(&mut conversation).unwrap().unwrap();
        let applied = apply(
            &edits,
            &mut conversation,
            &Tiktoken::default(),
            &MemoryStore::new(),
        )
        .unwrap();
        assert!(applied.is_empty());
        assert_eq!(conversation.messages, before.messages);
        let mut unknown = body(json!([{"type": "clear_everything_20990101"}]));
        let error = take(&mut unknown).unwrap_err();
        assert!(error.contains("clear_everything_20990101"), "{error}");
    }
}
