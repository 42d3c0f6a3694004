//! The gate on a model's summary: an answer that cannot stand for the head is rejected before it
//! replaces anything. A summarizer answered "ok, noted." (every section missing) and it became
//! the summary; the small model of the tests echoes the prompt's section descriptions back.
//! Each rule follows from what a summary is for, not from a fitted constant:
//!
//! - **too short for the head**: under a fiftieth of the head (capped at 400 tokens, so a long
//!   head does not demand a long summary; at least 64), nothing of the head can be in it;
//! - **most sections missing**: the template's sections are what the agent reads it for;
//! - **the prompt repeated**: more than half of its 8-word runs are runs of the prompt's own
//!   text (the instructions, not the head);
//! - **nothing of the head named**: the head touched files or the person asked for things, and
//!   the answer names none of those files (by their last path component) and quotes no run of
//!   five words from any request. Which files were touched is what every published method
//!   summarizes worst (Factory's probe evaluation).

use std::collections::HashSet;

use condense_core::{Message, Part};
use condense_tokenizer::TokenCounter;

/// Why `answer` cannot be the summary of `head`, or `None` when it can. `missing` of `sections`
/// template sections are absent from it; `prompt` is the instruction it answered.
pub fn judge(
    answer: &str,
    missing: usize,
    sections: usize,
    prompt: &str,
    head: &[Message],
    head_tokens: usize,
    counter: &dyn TokenCounter,
) -> Option<String> {
    let tokens = counter.count_text(answer);
    let least = least(head_tokens);
    if tokens < least {
        return Some(format!(
            "{tokens} tokens is too short to stand for a head of {head_tokens} (at least {least})"
        ));
    }
    if sections > 0 && missing * 2 > sections {
        return Some(format!(
            "{missing} of the template's {sections} sections are missing"
        ));
    }
    let echoed = overlap(answer, prompt, 8);
    if echoed > 0.5 {
        return Some(format!(
            "{:.0} % of it repeats the prompt's own text",
            echoed * 100.0
        ));
    }
    let (files, requests) = what_the_head_holds(head);
    if files.is_empty() && requests.is_empty() {
        return None;
    }
    let lower = answer.to_lowercase();
    let names_a_file = files.iter().any(|file| lower.contains(file.as_str()));
    let quotes_a_request = requests
        .iter()
        .any(|request| overlap(request, answer, 5) > 0.0);
    (!names_a_file && !quotes_a_request).then(|| {
        format!(
            "it names none of the {} files the head touched and quotes none of the person's {} requests",
            files.len(),
            requests.len()
        )
    })
}

/// The fewest tokens a summary of a head of `head_tokens` may take: a fiftieth of it, at least
/// 64 and at most 400.
pub(crate) fn least(head_tokens: usize) -> usize {
    (head_tokens / 50).clamp(64, 400)
}

/// The share of `text`'s runs of `n` words that are also runs of `other` (lowercased).
fn overlap(text: &str, other: &str, n: usize) -> f64 {
    let runs = |text: &str| -> Vec<String> {
        let words: Vec<String> = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty())
            .map(str::to_lowercase)
            .collect();
        words.windows(n).map(|run| run.join(" ")).collect()
    };
    let ours = runs(text);
    if ours.is_empty() {
        return 0.0;
    }
    let theirs: HashSet<String> = runs(other).into_iter().collect();
    ours.iter().filter(|run| theirs.contains(*run)).count() as f64 / ours.len() as f64
}

/// The last path components of the files the head's calls touched (lowercased, long enough to
/// mean something), and the person's requests.
fn what_the_head_holds(head: &[Message]) -> (HashSet<String>, Vec<String>) {
    let mut files = HashSet::new();
    let mut requests = Vec::new();
    for message in head {
        if message.is_user_turn() {
            requests.push(message.plain_text());
        }
        for part in &message.parts {
            let Part::ToolCall(call) = part else { continue };
            let (paths, _) = condense_core::tool_paths::touched(&call.name, &call.input);
            for path in paths {
                let name = path.rsplit('/').next().unwrap_or(path).to_lowercase();
                if name.len() >= 3 {
                    files.insert(name);
                }
            }
        }
    }
    (files, requests)
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_core::Role;
    use condense_core::testing::tool_step;
    use condense_tokenizer::Tiktoken;

    fn head() -> Vec<Message> {
        let mut head = vec![Message::text(
            Role::User,
            "Please fix the failing parser test in the tokenizer crate",
        )];
        head.extend(tool_step(
            "c1",
            "Read",
            serde_json::json!({"file_path": "/repo/src/parser.rs"}),
            "fn parse() {}\n".repeat(2_000),
        ));
        head
    }

    const PROMPT: &str = "Write a summary of the conversation so far. Goal: what the person asked for, in their words. Relevant files: every file read or changed, with why it matters.";

    fn judged(answer: &str, missing: usize) -> Option<String> {
        judge(
            answer,
            missing,
            5,
            PROMPT,
            &head(),
            6_000,
            &Tiktoken::default(),
        )
    }

    #[test]
    fn bad_answers_are_rejected_each_for_its_reason() {
        assert!(judged("", 5).unwrap().contains("too short"));
        assert!(judged("ok, noted.", 5).unwrap().contains("too short"));
        let padded = format!(
            "## Goal\n{}",
            "We worked on things and made progress. ".repeat(20)
        );
        assert!(judged(&padded, 4).unwrap().contains("sections are missing"));
        let echo = format!("## Goal\n{}", PROMPT.repeat(8));
        assert!(judged(&echo, 0).unwrap().contains("repeats the prompt"));
        let vague = format!(
            "## Goal\nFix a problem.\n## Discoveries\n{}",
            "Some code was looked at and it seemed fine overall. ".repeat(12)
        );
        assert!(
            judged(&vague, 0)
                .unwrap()
                .contains("names none of the 1 files")
        );
    }

    #[test]
    fn a_summary_that_names_the_head_passes() {
        let good = format!(
            "## Goal\nThe person asked: fix the failing parser test in the tokenizer crate.\n## Relevant files\n- /repo/src/parser.rs: holds parse().\n## Discoveries\n{}",
            "parse() returns early on empty input, which the test exercises. ".repeat(8)
        );
        assert_eq!(judged(&good, 0), None);
    }
}
