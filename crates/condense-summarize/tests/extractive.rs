//! The extractive summary of the head of every recorded session, at a 32,000-token window.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use condense_compact::{TailSettings, split};
use condense_core::testing::transcripts;
use condense_core::{Message, Part};
use condense_summarize::{Extractive, ExtractiveSettings};
use condense_template::{BUILTIN, Template, parse_summary};
use condense_tokenizer::Tiktoken;
use serde_json::Value;

fn head_at_32k(messages: &[Message]) -> Vec<Message> {
    let settings = TailSettings::built_in(32_000, 4_096).unwrap();
    let split = split(messages, &Tiktoken::default(), &settings);
    messages[split.head()].to_vec()
}

/// Paths named by the head's tool calls, found independently of the summarizer: the path keys of
/// structured inputs, and in shell commands the runs of path characters with a `/` that end in
/// `.py`.
fn touched_paths(head: &[Message]) -> Vec<String> {
    let mut paths = Vec::new();
    for call in head
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(Part::as_tool_call)
    {
        for key in ["file_path", "path", "notebook_path", "filename"] {
            if let Some(Value::String(path)) = call.input.get(key) {
                paths.push(path.clone());
            }
        }
        if let Some(command) = call.input.get("command").and_then(Value::as_str) {
            for word in command.split(|c: char| !(c.is_ascii_alphanumeric() || "_./-".contains(c)))
            {
                if word.contains('/') && word.ends_with(".py") {
                    paths.push(word.to_owned());
                }
            }
        }
    }
    paths
}

fn cap(text: &str, chars: usize) -> &str {
    match text.char_indices().nth(chars) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

#[test]
fn every_head_is_summarized_with_its_requests_and_files() {
    let template = Template::builtin("structured").unwrap();
    let settings = ExtractiveSettings::built_in().unwrap();
    let summarizer = Extractive::new(template.clone(), settings.clone());
    for transcript in transcripts().unwrap() {
        let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        let head = head_at_32k(&conversation.messages);
        let name = transcript.name.replace('/', "__");
        let summary = match summarizer.summary_of(&head) {
            Ok(summary) => summary,
            Err(error) => {
                assert!(
                    head.iter()
                        .all(|m| !m.is_user_turn()
                            && m.parts.iter().all(|p| p.as_tool_call().is_none())),
                    "{name}: {error}"
                );
                continue;
            }
        };
        insta::assert_snapshot!(name.clone(), summary);

        let parsed = parse_summary(&summary, &template).unwrap();
        assert!(
            parsed.missing_sections.is_empty(),
            "{name}: missing {:?}",
            parsed.missing_sections
        );
        for path in touched_paths(&head) {
            assert!(
                summary.contains(&path),
                "{name}: the summary does not name {path}"
            );
        }
        for turn in head.iter().filter(|m| m.is_user_turn()) {
            let quoted = cap(&turn.plain_text(), settings.quote_chars).to_owned();
            assert!(
                summary.contains(&quoted),
                "{name}: a user turn is not quoted: {:?}",
                cap(&quoted, 80)
            );
        }
    }
}

#[test]
fn every_built_in_template_is_filled() {
    let transcript = condense_core::testing::transcript("claude-code/d7d349f9").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let head = head_at_32k(&conversation.messages);
    for (name, _) in BUILTIN {
        let template = Template::builtin(name).unwrap();
        let summary = Extractive::new(template.clone(), ExtractiveSettings::built_in().unwrap())
            .summary_of(&head)
            .unwrap();
        let parsed = parse_summary(&summary, &template).unwrap();
        assert!(
            parsed.missing_sections.is_empty(),
            "{name}: missing {:?}",
            parsed.missing_sections
        );
    }
}

#[test]
fn the_budget_cuts_the_tool_log_and_says_so() {
    let transcript = condense_core::testing::transcript("claude-code/5f8cbb78").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let head = head_at_32k(&conversation.messages);
    let settings = {
        let mut s = ExtractiveSettings::built_in().unwrap();
        s.budget_tokens = 1_000;
        s
    };
    let summary = Extractive::new(Template::builtin("structured").unwrap(), settings)
        .summary_of(&head)
        .unwrap();
    assert!(
        summary.contains("more item(s) cut here: the summary is kept within 1000 tokens"),
        "{summary}"
    );
    assert!(
        summary.contains("/home/kenth56/vsla"),
        "files are never cut"
    );
}

/// A fork that names a smaller room than the budget (a request whose system prompt and tools
/// leave little of the window) gets a summary within it, as a summarizer built with that
/// budget writes it; one that names none, or a larger one, gets the budget's.
#[tokio::test]
async fn a_fork_s_room_smaller_than_the_budget_bounds_the_summary() {
    use condense_summarize::{Fork, Summarizer};
    use condense_tokenizer::TokenCounter;
    let transcript = condense_core::testing::transcript("claude-code/5f8cbb78").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let head = head_at_32k(&conversation.messages);
    let template = Template::builtin("structured").unwrap();
    let with_budget = |budget_tokens| {
        let mut settings = ExtractiveSettings::built_in().unwrap();
        settings.budget_tokens = budget_tokens;
        Extractive::new(template.clone(), settings)
    };
    let summarizer = with_budget(2_900);
    let whole = condense_core::Conversation::new(head.clone());
    let fork = |summary_tokens| Fork {
        conversation: &whole,
        head: 0..head.len(),
        carried: &[],
        tokens: 0,
        window: 32_000,
        counted: 0,
        cached: 0,
        summary_tokens,
    };
    let counter = Tiktoken::default();
    let small = summarizer
        .summarize_forked(fork(Some(1_200)), "")
        .await
        .unwrap();
    assert_eq!(small, with_budget(1_200).summary_of(&head).unwrap());
    assert!(
        counter.count_text(&small) <= 1_300,
        "{}",
        counter.count_text(&small)
    );
    let configured = with_budget(2_900).summary_of(&head).unwrap();
    assert!(counter.count_text(&configured) > 1_300);
    for room in [None, Some(2_900), Some(5_000)] {
        assert_eq!(
            summarizer.summarize_forked(fork(room), "").await.unwrap(),
            configured
        );
    }
}

/// Codex's own summary, opening a head, is quoted whole under a line naming Codex, and not as
/// the person's request; one longer than the summary's budget keeps its start, and the line says
/// so.
#[test]
fn codexs_own_summary_is_quoted_under_its_name() {
    let summary_of = |theirs: &str, budget_tokens: usize| {
        let head = vec![
            Message::text(condense_core::Role::User, theirs),
            Message::text(condense_core::Role::User, "now add the tests"),
            Message::text(condense_core::Role::Assistant, "Adding them."),
        ];
        let settings = {
            let mut s = ExtractiveSettings::built_in().unwrap();
            s.budget_tokens = budget_tokens;
            s
        };
        Extractive::new(Template::builtin("structured").unwrap(), settings)
            .summary_of(&head)
            .unwrap()
    };
    let opening = "Another language model started to solve this problem and produced a summary \
                   of its thinking process. Here is the summary:";
    let theirs = format!("{opening}\nSUMMARY: the parser is fixed.");
    let summary = summary_of(&theirs, 4_000);
    assert!(
        summary.contains(&format!(
            "Earlier summary by Codex, quoted in full:\n> {opening}\n> SUMMARY: the parser is fixed.\n1. now add the tests"
        )),
        "{summary}"
    );

    let long = format!("{opening}\n{}", "SUMMARY: long. ".repeat(400));
    let summary = summary_of(&long, 1_000);
    assert!(
        summary.contains("Earlier summary by Codex, quoted in part (within "),
        "{summary}"
    );
    assert!(summary.contains(&format!("> {opening}\n> SUMMARY: long.")));
    assert!(summary.contains("[…]"), "{summary}");
}

/// A head that is Claude Code's own summary and the work after it, with no request of the
/// person's since, has its goal in that summary: the Goal section says where, not "None
/// recorded."
#[test]
fn a_goal_given_only_by_an_earlier_summary_is_pointed_to() {
    let theirs = "This session is being continued from a previous conversation that ran out of \
                  context. The summary below covers the earlier portion of the conversation.\n\n\
                  Summary:\n1. Primary Request and Intent:\n   Port the parser.";
    let mut head = vec![Message::text(condense_core::Role::User, theirs)];
    head.extend(condense_core::testing::tool_step(
        "a",
        "Bash",
        serde_json::json!({ "command": "cargo test" }),
        "test result: ok",
    ));
    let summarizer = Extractive::new(
        Template::builtin("structured").unwrap(),
        ExtractiveSettings::built_in().unwrap(),
    );
    let summary = summarizer.summary_of(&head).unwrap();
    assert!(
        summary.starts_with(
            "## Goal\nAs the earlier summary by Claude Code gives it (quoted under Instructions)\n\n\
             ## Instructions\nEarlier summary by Claude Code, quoted in full:\n"
        ),
        "{summary}"
    );
    // Folded again with a request of the person's, the goal is that request, and the pointer
    // is not taken for one.
    let next = vec![
        summary_message(&summary),
        Message::text(condense_core::Role::User, "and the docs"),
    ];
    let again = summarizer.summary_of(&next).unwrap();
    assert!(
        again.starts_with("## Goal\nand the docs (quoted in full below)\n"),
        "{again}"
    );
    assert!(!again.contains("1. As the earlier summary"), "{again}");
    assert!(again.contains("Port the parser."), "{again}");
}

/// Claude Code's own summary comes with its model's analysis before it (`Analysis:`, then
/// `Summary:`): quoted without that scratch work, the summary's last sections (the current work,
/// the next step) fit the quote, where a quote cut to its budget lost them first.
#[test]
fn claude_codes_summary_is_quoted_without_its_analysis() {
    let theirs = format!(
        "This session is being continued from a previous conversation that ran out of context. \
         The summary below covers the earlier portion of the conversation.\n\nAnalysis:\n\
         Let me chronologically analyze the conversation:\n{}\n\nSummary:\n\
         1. Primary Request and Intent:\n   Port the parser.\n{}\n\
         9. Optional Next Step:\n   Run THE_LAST_STEP.",
        "1. **Initial request**: the user asked me to port it.\n".repeat(60),
        "   - src/parse.rs: the parser.\n".repeat(60),
    );
    let head = vec![
        Message::text(condense_core::Role::User, theirs.clone()),
        Message::text(condense_core::Role::User, "now add the tests"),
        Message::text(condense_core::Role::Assistant, "Adding them."),
    ];
    let settings = {
        let mut s = ExtractiveSettings::built_in().unwrap();
        s.budget_tokens = 1_000;
        s
    };
    let summarizer = Extractive::new(Template::builtin("structured").unwrap(), settings);
    let summary = summarizer.summary_of(&head).unwrap();
    // Whole, the summary is over the quote's 4,000 characters; without its analysis it is not.
    assert!(theirs.chars().count() > 4_000, "{}", theirs.len());
    assert!(
        summary.contains(
            "Earlier summary by Claude Code, quoted in full:\n> This session is being continued"
        ),
        "{summary}"
    );
    assert!(
        summary.contains("> [… the analysis it wrote before its summary left out]\n>\n> Summary:\n> 1. Primary Request and Intent:"),
        "{summary}"
    );
    assert!(
        summary.contains("> 9. Optional Next Step:\n>    Run THE_LAST_STEP.\n1. now add the tests"),
        "{summary}"
    );
    assert!(!summary.contains("chronologically"), "{summary}");
    // Folded again, it is quoted as it was.
    let next = vec![
        summary_message(&summary),
        Message::text(condense_core::Role::User, "and the docs"),
    ];
    let again = summarizer.summary_of(&next).unwrap();
    assert!(again.contains("Run THE_LAST_STEP."), "{again}");
    assert_eq!(again.matches("the analysis it wrote").count(), 1, "{again}");
}

/// Claude Code's own summary, as long as the whole budget (its files' code quoted, as its prompt
/// asks), followed by a dozen builds the agent ran after it: the work after it is listed whole,
/// and the quote gives way: its code blocks first, then its longest section, each of its
/// sections keeping its start, the pending tasks, the current work and the next step whole.
/// Quoted whole up to four characters a token of the budget, it left room for none of that work
/// and lost its own last sections.
#[test]
fn the_work_after_an_agents_summary_comes_before_that_summarys_detail() {
    let files: String = (0..80)
        .map(|n| {
            format!(
                "   - src/module_{n}.rs: the parser's part {n}, changed to take the new tokens.\n\
                 ```rust\n   pub fn parse_{n}(input: &str) -> Result<Tree, Error> {{\n       \
                 let tokens = lex(input)?;\n       build(tokens)\n   }}\n   ```\n"
            )
        })
        .collect();
    let theirs = format!(
        "This session is being continued from a previous conversation that ran out of context. \
         The summary below covers the earlier portion of the conversation.\n\nSummary:\n\
         1. Primary Request and Intent:\n   Port the parser to the new lexer.\n\n\
         3. Files and Code Sections:\n{files}\n\
         7. Pending Tasks:\n   - Port the pretty-printer.\n\n\
         8. Current Work:\n   Porting module_79.\n\n\
         9. Optional Next Step:\n   Run THE_LAST_STEP."
    );
    let mut head = vec![Message::text(condense_core::Role::User, theirs)];
    for n in 0..12 {
        head.extend(condense_core::testing::tool_step(
            &format!("c{n}"),
            "Bash",
            serde_json::json!({ "command": format!("cargo build -p crate_{n}") }),
            "Finished",
        ));
    }
    let budget = 1_500;
    let settings = {
        let mut s = ExtractiveSettings::built_in().unwrap();
        s.budget_tokens = budget;
        s
    };
    let counter = settings.counter.clone();
    let summarizer = Extractive::new(Template::builtin("structured").unwrap(), settings);
    let summary = summarizer.summary_of(&head).unwrap();
    assert!(counter.count_text(&summary) <= budget, "{summary}");
    for n in 0..12 {
        assert!(
            summary.contains(&format!("cargo build -p crate_{n}")),
            "{n}: {summary}"
        );
    }
    assert!(!summary.contains("more item(s) cut here"), "{summary}");
    assert!(
        summary.contains("Earlier summary by Claude Code, quoted in part (within "),
        "{summary}"
    );
    for kept in [
        "> 1. Primary Request and Intent:\n>    Port the parser to the new lexer.",
        "> 3. Files and Code Sections:\n>    - src/module_0.rs: the parser's part 0",
        "> [… a block of 6 line(s) left out]",
        "> 7. Pending Tasks:\n>    - Port the pretty-printer.",
        "> 8. Current Work:\n>    Porting module_79.",
        "> 9. Optional Next Step:\n>    Run THE_LAST_STEP.",
    ] {
        assert!(summary.contains(kept), "{kept}: {summary}");
    }
    assert!(!summary.contains("pub fn parse_"), "{summary}");
    assert!(
        summary.contains("more line(s) of this section left out]\n> 7. Pending Tasks:"),
        "{summary}"
    );
    // Folded again, the quote is read back as the agent's summary and quoted as it is.
    let next = vec![
        summary_message(&summary),
        Message::text(condense_core::Role::User, "and the docs"),
    ];
    let again = summarizer.summary_of(&next).unwrap();
    assert!(again.contains("> 9. Optional Next Step:"), "{again}");
    assert!(!again.contains("1. > "), "{again}");
}

/// A file the agent named both whole and relative to the working directory (Claude Code's Read
/// and Edit take a whole path, its shell commands a relative one) is listed once, whole, and as
/// changed where either name changed it. A relative name the whole one does not spell out
/// (`./c.rs`), or one that a call resolved elsewhere (in a directory of its own), stays.
#[test]
fn a_file_named_whole_and_relative_is_listed_once() {
    use condense_core::Role;
    let mut head = vec![
        Message::text(Role::System, "You are an agent.\nWorking directory: /w\n"),
        Message::text(Role::User, "fix the parser"),
    ];
    let steps = [
        ("Read", serde_json::json!({ "file_path": "/w/src/a.rs" })),
        (
            "Bash",
            serde_json::json!({ "command": "sed -i 's/a/b/' src/a.rs" }),
        ),
        ("Bash", serde_json::json!({ "command": "cat src/b.rs" })),
        ("Bash", serde_json::json!({ "command": "cat ./src/c.rs" })),
        ("Read", serde_json::json!({ "file_path": "/w/src/c.rs" })),
        ("Read", serde_json::json!({ "file_path": "/w/src/d.rs" })),
        ("Bash", serde_json::json!({ "command": "cat src/d.rs" })),
        // Codex's shell, in a directory of its own.
        (
            "shell",
            serde_json::json!({ "command": "cat src/d.rs", "workdir": "/v" }),
        ),
    ];
    for (index, (tool, input)) in steps.into_iter().enumerate() {
        head.extend(condense_core::testing::tool_step(
            &format!("c{index}"),
            tool,
            input,
            "ok",
        ));
    }
    let summarizer = Extractive::new(
        Template::builtin("structured").unwrap(),
        ExtractiveSettings::built_in().unwrap(),
    );
    let summary = summarizer.summary_of(&head).unwrap();
    let files = &summary[summary.find("Modified:").expect("a file changed")..];
    assert_eq!(
        files.lines().collect::<Vec<_>>(),
        [
            "Modified:",
            "- /w/src/a.rs",
            "Read:",
            "- src/b.rs",
            "- ./src/c.rs",
            "- /w/src/c.rs",
            "- /w/src/d.rs",
            "- src/d.rs",
        ],
        "{summary}"
    );
}

/// opencode's own summary is its answer to "What did we do so far?" (how opencode sends the
/// request of its own compaction), and opencode 1.18 merges its next step into the same message:
/// the answer's text is quoted whole under opencode's name, the step's call is in the tool log,
/// and neither the question nor the summary is quoted as the person's request or the assistant's
/// last words.
#[test]
fn opencodes_own_summary_is_its_answer_and_is_quoted_under_its_name() {
    use condense_core::Role::{Assistant, User};
    use condense_core::testing::{tool_call, tool_result};
    let head = vec![
        Message::text(User, condense_core::OPENCODE_SUMMARY_REQUEST),
        Message::new(
            Assistant,
            vec![
                Part::text("## Goal\nFix the parser.\n## Done\nThe lexer handles tabs."),
                tool_call(
                    "toolu_1",
                    "bash",
                    serde_json::json!({"command": "cargo test -q"}),
                ),
            ],
        ),
        Message::new(User, vec![tool_result("toolu_1", "test result: ok")]),
        Message::text(User, "now add the tests"),
        Message::text(Assistant, "Adding them."),
    ];
    let summary = Extractive::new(
        Template::builtin("structured").unwrap(),
        ExtractiveSettings::built_in().unwrap(),
    )
    .summary_of(&head)
    .unwrap();
    assert!(
        summary.contains(
            "Earlier summary by opencode, quoted in full:\n> ## Goal\n> Fix the parser.\n> ## Done\n> The lexer handles tabs.\n1. now add the tests\n"
        ),
        "{summary}"
    );
    assert!(summary.contains("cargo test -q"), "{summary}");
    assert_eq!(
        summary.matches("What did we do so far?").count(),
        0,
        "{summary}"
    );
    assert_eq!(summary.matches("Fix the parser.").count(), 1, "{summary}");
}

/// The ledger a model's summary gets, for two shared sessions' heads at a 32,000-token window.
#[test]
fn the_ledger_of_two_shared_sessions() {
    for name in [
        "claude-code/5f8cbb78",
        "openai/mini-swe-agent-django__django-11138",
    ] {
        let transcript = condense_core::testing::transcript(name).unwrap();
        let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
        let head = head_at_32k(&conversation.messages);
        let ledger = condense_summarize::ledger(&head).unwrap();
        for path in touched_paths(&head) {
            assert!(ledger.contains(&path), "{name}: the ledger lacks {path}");
        }
        insta::assert_snapshot!(format!("ledger__{}", name.replace('/', "__")), ledger);
    }
}

/// A session's one long request and a few of the agent's steps.
fn long_request_and_steps(steps: &[&str]) -> (Message, Vec<Message>) {
    use condense_core::Role;
    let request = format!(
        "Fix the parser.\n{}\nthe word FAR_IN_THE_REQUEST\n{}",
        "It fails on byte-order marks. ".repeat(40),
        "More detail on what fails. ".repeat(100)
    );
    let request = Message::text(Role::User, request);
    let mut head = vec![request.clone()];
    for (index, command) in steps.iter().enumerate() {
        let input = serde_json::json!({ "command": command });
        head.extend(condense_core::testing::tool_step(
            &format!("c{index}"),
            "bash",
            input,
            "ok",
        ));
    }
    (request, head)
}

/// The summary's message as a later head begins with it.
fn summary_message(summary: &str) -> Message {
    Message::text(
        condense_core::Role::System,
        format!(
            "{}\n{summary}\n{}",
            condense_core::SUMMARY_OPEN,
            condense_core::SUMMARY_CLOSE
        ),
    )
}

/// A request the compaction keeps whole beside the summary is named by its start, not quoted a
/// second time (every later request would read it twice); and a later summary, which meets it
/// again after this one, still lists it once, quoted again once it is no longer kept.
#[test]
fn a_request_kept_after_the_summary_is_named_not_quoted_and_listed_once_after() {
    let summarizer = Extractive::new(
        Template::builtin("structured").unwrap(),
        ExtractiveSettings::built_in().unwrap(),
    );
    let (request, head) = long_request_and_steps(&["ls", "cat src/parse.rs"]);
    let carried = std::slice::from_ref(&request);
    let first = summarizer.summary_carrying(&head, carried).unwrap();
    assert!(first.contains("Fix the parser."), "{first}");
    assert!(
        first.contains("(kept whole in the conversation)"),
        "{first}"
    );
    assert!(!first.contains("FAR_IN_THE_REQUEST"), "{first}");
    // Quoted, the request is there up to `quote_chars`.
    let quoted = summarizer.summary_of(&head).unwrap();
    assert!(quoted.contains("FAR_IN_THE_REQUEST"), "{quoted}");

    // A summary written before the task could come first named it so: still read as the same
    // request.
    let older = first.replace(
        "(kept whole in the conversation)",
        "(kept whole after this summary)",
    );
    for earlier in [first, quoted, older] {
        let (_, steps) = long_request_and_steps(&["cargo test"]);
        let mut next = vec![summary_message(&earlier), request.clone()];
        next.extend(steps.into_iter().skip(1));
        for (summary, kept) in [
            (summarizer.summary_carrying(&next, carried).unwrap(), true),
            (summarizer.summary_of(&next).unwrap(), false),
        ] {
            assert_eq!(summary.matches("Fix the parser.").count(), 2, "{summary}");
            assert!(!summary.contains("\n2. "), "one request: {summary}");
            assert_eq!(summary.contains("FAR_IN_THE_REQUEST"), !kept, "{summary}");
        }
    }
}

/// What was done, in the structured template's Accomplished: the agent's plan as its last todo
/// call left it, then the calls that changed or ran something; the calls that only read,
/// searched or listed are counted on one line (their files are listed), a failure is under
/// Discoveries alone (the same command's latest only), and no todo call is logged. A later
/// summary, whose head holds no todo call, keeps the plan the earlier one carried.
#[test]
fn what_was_done_is_the_plan_and_the_calls_that_changed_or_ran_something() {
    use condense_core::testing::tool_step;
    let summarizer = Extractive::new(
        Template::builtin("structured").unwrap(),
        ExtractiveSettings::built_in().unwrap(),
    );
    let todo = |status: &str| {
        serde_json::json!({ "todos": [
            { "content": "Find the cause", "status": "completed" },
            { "content": "Fix the parser", "status": status },
        ]})
    };
    let bash = |command: &str| serde_json::json!({ "command": command });
    let mut head = vec![Message::text(condense_core::Role::User, "Fix the parser.")];
    head.extend(tool_step("t1", "TodoWrite", todo("pending"), "ok"));
    head.extend(tool_step(
        "r1",
        "Read",
        serde_json::json!({ "file_path": "src/parse.rs" }),
        "fn parse() {}",
    ));
    head.extend(tool_step(
        "g1",
        "bash",
        bash("grep -rn 'fn parse' src | head"),
        "src/parse.rs:1",
    ));
    head.extend(tool_step(
        "f0",
        "bash",
        bash("cargo test"),
        "error: 3 tests failed\nexit code 101",
    ));
    head.extend(tool_step(
        "e1",
        "bash",
        bash("sed -i 's/a/b/' src/parse.rs"),
        "ok",
    ));
    head.extend(tool_step(
        "f1",
        "bash",
        bash("cargo test"),
        "error: 1 test failed\nexit code 101",
    ));
    head.extend(tool_step("t2", "TodoWrite", todo("in_progress"), "ok"));
    let summary = summarizer.summary_of(&head).unwrap();
    let done = summary
        .split("## Accomplished\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap();
    assert_eq!(
        done.trim(),
        "Plan:\n- [completed] Find the cause\n- [in_progress] Fix the parser\n\
         - bash: sed -i 's/a/b/' src/parse.rs → ok\n\
         - and 2 call(s) that only read, searched or listed files",
        "{summary}"
    );
    // The same command failing again: its latest error stands, once.
    assert_eq!(
        summary.matches("bash `cargo test` failed").count(),
        1,
        "{summary}"
    );
    assert!(summary.contains("1 test failed"), "{summary}");
    assert!(!summary.contains("3 tests failed"), "{summary}");
    assert!(summary.contains("- src/parse.rs"), "{summary}");

    let mut next = vec![summary_message(&summary)];
    next.extend(tool_step(
        "r2",
        "Read",
        serde_json::json!({ "file_path": "src/lib.rs" }),
        "mod parse;",
    ));
    let later = summarizer.summary_of(&next).unwrap();
    assert!(
        later.contains("Plan:\n- [completed] Find the cause\n- [in_progress] Fix the parser\n"),
        "{later}"
    );
    assert_eq!(later.matches("Plan:").count(), 1, "{later}");
}

/// A failure is told by what names it: a Python traceback by its exception (its first lines are
/// only the frames that led there), a search that found nothing as "no output", never by
/// mini-swe-agent's wrapper tags. A failure the same command later ran past is gone, and a
/// command run again and again is one line, where it last ran, with its count.
#[test]
fn a_failure_is_told_by_its_exception_and_gone_once_the_command_succeeds() {
    let summarizer = Extractive::new(
        Template::builtin("structured").unwrap(),
        ExtractiveSettings::built_in().unwrap(),
    );
    let bash = |command: &str| serde_json::json!({ "command": command });
    let wrapped = |code: u8, output: &str| {
        format!("<returncode>{code}</returncode>\n<output>\n{output}</output>")
    };
    let traceback = "Traceback (most recent call last):\n  File \"run.py\", line 3, in <module>\n    \
                     main()\n  File \"run.py\", line 2, in main\n    import yaml\n\
                     ModuleNotFoundError: No module named 'yaml'\n";
    let mut head = vec![Message::text(condense_core::Role::User, "Fix the loader.")];
    for (id, command, output) in [
        ("a", "python3 run.py", wrapped(1, traceback)),
        ("b", "grep -n 'def load' src/loader.py", wrapped(1, "")),
        ("c", "python3 check.py", wrapped(1, "AssertionError\n")),
        ("d", "sed -i 's/a/b/' src/loader.py", wrapped(0, "")),
        ("e", "python3 run.py", wrapped(0, "ok\n")),
        ("f", "sed -i 's/b/c/' src/loader.py", wrapped(0, "")),
        ("g", "python3 run.py", wrapped(0, "ok\n")),
    ] {
        head.extend(condense_core::testing::tool_step(
            id,
            "bash",
            bash(command),
            &output,
        ));
    }
    let summary = summarizer.summary_of(&head).unwrap();
    assert!(
        summary.contains(
            "bash `grep -n 'def load' src/loader.py` failed: no output\n\
             - bash `python3 check.py` failed: AssertionError\n"
        ),
        "{summary}"
    );
    assert!(!summary.contains("</output>"), "{summary}");
    // The run failed with the exception above, then ran twice: no failure stands for it.
    assert!(
        !summary.contains("bash `python3 run.py` failed"),
        "{summary}"
    );
    assert!(!summary.contains("ModuleNotFoundError"), "{summary}");
    assert!(
        summary.contains(
            "- bash: sed -i 's/a/b/' src/loader.py → ok\n\
             - bash: sed -i 's/b/c/' src/loader.py → ok\n\
             - bash: python3 run.py → ok (×2)\n"
        ),
        "{summary}"
    );

    // The same traceback where the command never succeeded: its exception is what is said.
    let failed = summarizer.summary_of(&head[..3]).unwrap();
    assert!(
        failed.contains(
            "bash `python3 run.py` failed: Traceback (most recent call last): / … / \
             ModuleNotFoundError: No module named 'yaml'"
        ),
        "{failed}"
    );
}

/// An edit that went through says nothing the files' list does not (Claude Code's `Edit` and
/// `Write`, OpenHands' editor): it is counted under what was done, its file listed as changed,
/// where a command that edits (`sed -i`) is written out, and an edit that failed is told with
/// its error.
#[test]
fn edits_that_went_through_are_counted_their_files_listed() {
    let summarizer = Extractive::new(
        Template::builtin("structured").unwrap(),
        ExtractiveSettings::built_in().unwrap(),
    );
    let mut head = vec![Message::text(condense_core::Role::User, "Fix the parser.")];
    let steps = [
        (
            "a",
            "Edit",
            serde_json::json!({ "file_path": "/w/src/parse.rs", "old_string": "a", "new_string": "b" }),
            "The file /w/src/parse.rs has been updated.",
        ),
        (
            "b",
            "Write",
            serde_json::json!({ "file_path": "/w/tests/parse.rs", "content": "#[test] fn t() {}" }),
            "File created successfully at: /w/tests/parse.rs",
        ),
        (
            "c",
            "Edit",
            serde_json::json!({ "file_path": "/w/src/parse.rs", "old_string": "b", "new_string": "c" }),
            "The file /w/src/parse.rs has been updated.",
        ),
        (
            "d",
            "str_replace_editor",
            serde_json::json!({ "command": "create", "path": "/w/README.md", "file_text": "# parse" }),
            "File created successfully at: /w/README.md",
        ),
        (
            "e",
            "Bash",
            serde_json::json!({ "command": "sed -i 's/x/y/' src/lib.rs" }),
            "",
        ),
        (
            "f",
            "Edit",
            serde_json::json!({ "file_path": "/w/src/lib.rs", "old_string": "q", "new_string": "r" }),
            "<tool_use_error>String to replace not found in file.</tool_use_error>",
        ),
    ];
    for (id, tool, input, output) in steps {
        head.extend(condense_core::testing::tool_step(id, tool, input, output));
    }
    // The failed edit's result is an error, as Claude Code marks it.
    if let Some(condense_core::Part::ToolResult(result)) =
        head.last_mut().and_then(|m| m.parts.first_mut())
    {
        result.is_error = Some(true);
    }
    let summary = summarizer.summary_of(&head).unwrap();
    assert!(
        summary.contains(
            "## Accomplished\n\
             - Bash: sed -i 's/x/y/' src/lib.rs → ok\n\
             - and 4 call(s) that only edited files listed as modified\n"
        ),
        "{summary}"
    );
    assert!(
        summary.contains("- Edit `/w/src/lib.rs` failed: "),
        "{summary}"
    );
    for path in [
        "/w/src/parse.rs",
        "/w/tests/parse.rs",
        "/w/README.md",
        "src/lib.rs",
    ] {
        assert!(
            summary.contains(&format!("- {path}\n")),
            "{path} listed:\n{summary}"
        );
    }
    assert!(!summary.contains("Edit: /w/src/parse.rs"), "{summary}");
    // The edit that failed changed nothing: its file is among those read, not those modified.
    // (The summary's last line has no line break after it.)
    let summary = format!("{summary}\n");
    let modified = summary
        .split("Modified:\n")
        .nth(1)
        .and_then(|rest| rest.split("Read:\n").next())
        .unwrap_or_default();
    assert!(modified.contains("- /w/src/parse.rs\n"), "{summary}");
    assert!(!modified.contains("- /w/src/lib.rs\n"), "{summary}");
    assert!(summary.contains("Read:\n- /w/src/lib.rs\n"), "{summary}");
}

/// A build that failed after pages of warnings is told by its first error, the one to fix; an
/// output whose first lines say what went wrong is told by them.
#[test]
fn a_failed_build_is_told_by_its_first_error() {
    let summarizer = Extractive::new(
        Template::builtin("structured").unwrap(),
        ExtractiveSettings::built_in().unwrap(),
    );
    let mut head = vec![Message::text(condense_core::Role::User, "Fix the build.")];
    let warnings: String = (0..40)
        .map(|line| format!("src/a.c:{line}:5: warning: unused variable 'x{line}'\n"))
        .collect();
    for (id, command, output) in [
        (
            "a",
            "make -j4",
            format!(
                "<returncode>2</returncode>\n<output>\n{warnings}src/b.c:9:1: error: expected ';' \
                 before '}}' token\nsrc/c.c:2:1: error: unknown type name 'T'\n\
                 make: *** [all] Error 1\n</output>"
            ),
        ),
        (
            "b",
            "cargo build",
            "<returncode>101</returncode>\n<output>\nerror[E0433]: cannot find `tracing`\n\
             --> src/lib.rs:9:5\n</output>"
                .to_owned(),
        ),
    ] {
        head.extend(condense_core::testing::tool_step(
            id,
            "bash",
            serde_json::json!({ "command": command }),
            &output,
        ));
    }
    let summary = summarizer.summary_of(&head).unwrap();
    assert!(
        summary.contains(
            "- bash `make -j4` failed: … / src/b.c:9:1: error: expected ';' before '}' token\n\
             - bash `cargo build` failed: error[E0433]: cannot find `tracing` / --> src/lib.rs:9:5\n"
        ),
        "{summary}"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

    /// Whatever a failed command printed (tags, tracebacks, any text at all), its summary is
    /// written, and says the failure in one line of at most 240 characters and the cut's mark.
    #[test]
    fn any_failure_is_told_in_one_short_line(
        lines in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::string::string_regex("<[a-z/]{0,8}>").unwrap(),
                proptest::strategy::Just("Traceback (most recent call last):".to_owned()),
                proptest::string::string_regex("[ -~é…<>]{0,300}").unwrap(),
            ],
            0..12,
        ),
        code in 1u8..3,
    ) {
        let summarizer = Extractive::new(
            Template::builtin("structured").unwrap(),
            ExtractiveSettings::built_in().unwrap(),
        );
        let output = format!("<returncode>{code}</returncode>\n{}", lines.join("\n"));
        let mut head = vec![Message::text(condense_core::Role::User, "Run it.")];
        head.extend(condense_core::testing::tool_step(
            "a",
            "bash",
            serde_json::json!({ "command": "python3 run.py" }),
            &output,
        ));
        let summary = summarizer.summary_of(&head).unwrap();
        let told = summary
            .lines()
            .find_map(|line| line.strip_prefix("- bash `python3 run.py` failed: "));
        let told = told.expect("the failure is listed");
        proptest::prop_assert!(told.chars().count() <= 240 + " […]".chars().count(), "{told}");
        proptest::prop_assert!(!told.is_empty());
    }
}

/// A budget smaller than what every summary holds (the person's requests, the files): the room
/// a request has left when its system prompt and tools take nearly all of the window. The
/// summary keeps within it, for the request to fit at all: the files read give way first,
/// then the files changed, then the requests, shortened and then dropped, the earliest first,
/// the latest kept longest; and it says where.
#[test]
fn a_budget_under_the_requests_and_files_sheds_them_and_keeps_within_it() {
    use condense_tokenizer::TokenCounter;
    let transcript = condense_core::testing::transcript("claude-code/5f8cbb78").unwrap();
    let (_, conversation) = condense_formats::read(&transcript.bytes, None).unwrap();
    let head = head_at_32k(&conversation.messages);
    let summary_within = |budget_tokens| {
        Extractive::new(
            Template::builtin("structured").unwrap(),
            ExtractiveSettings::built_in().unwrap(),
        )
        .strictly_within(budget_tokens)
        .summary_of(&head)
        .unwrap()
    };
    let counter = Tiktoken::default();
    // The files the summary lists, changed and read, in its order.
    let files = |summary: &str| {
        let (mut modified, mut read, mut list) = (Vec::new(), Vec::new(), None);
        for line in summary.lines() {
            match line {
                "Modified:" => list = Some(true),
                "Read:" => list = Some(false),
                _ => match (line.strip_prefix("- "), list) {
                    (Some(path), Some(true)) => modified.push(path.to_owned()),
                    (Some(path), Some(false)) => read.push(path.to_owned()),
                    _ => list = None,
                },
            }
        }
        (modified, read)
    };
    let whole = summary_within(3_000);
    let needed = counter.count_text(&whole);
    let (all_modified, all_read) = files(&whole);
    assert!(!all_modified.is_empty() && !all_read.is_empty());
    let request = "1. Look at status.md and lets keep working on getting to 100% please.";
    assert!(whole.contains(request));
    let mut shed_requests = false;
    // (150: about the least a summary of this template can be, its headings, the goal and
    // one note a section.)
    for budget in [needed * 3 / 4, needed / 2, needed / 4, 150] {
        let summary = summary_within(budget);
        assert!(
            counter.count_text(&summary) <= budget,
            "{budget}: {summary}"
        );
        assert!(
            summary.contains(&format!(
                "cut here: the summary is kept within {budget} tokens"
            )),
            "{summary}"
        );
        let (modified, read) = files(&summary);
        // What is left of each list is its latest entries, and a changed file goes only once
        // no file read is left.
        assert!(all_read.ends_with(&read), "{budget}: {read:?}");
        assert!(all_modified.ends_with(&modified), "{budget}: {modified:?}");
        assert!(read.is_empty() || modified == all_modified, "{budget}");
        // The request goes only once the files have, and the goal still names it.
        if !summary.contains(request) {
            shed_requests = true;
            assert!(modified.is_empty() && read.is_empty(), "{summary}");
        }
        assert!(summary.contains("## Goal\nLook at status.md"), "{summary}");
    }
    assert!(shed_requests, "the smallest budget sheds the request too");
    // A budget alone, not strict, never cuts them: it is reckoned before the request is
    // measured, and a summary over it most often still fits.
    let mut settings = ExtractiveSettings::built_in().unwrap();
    settings.budget_tokens = 150;
    let soft = Extractive::new(Template::builtin("structured").unwrap(), settings)
        .summary_of(&head)
        .unwrap();
    assert_eq!(files(&soft), (all_modified.clone(), all_read.clone()));
    assert!(soft.contains(request));
    assert!(files(&summary_within(needed / 4)).1.len() < all_read.len());
}

/// An earlier summary that lists files alone (its requests shed to fit a window a system prompt
/// nearly filled, or never made) still has them to hand on: summarized again, for a request
/// with nothing new that its summary alone keeps over the window, it gives a summary of them,
/// not "nothing to summarize" (which counted as a failed compaction, and three of them in a
/// row stopped compacting for the session).
#[test]
fn a_summary_of_files_alone_is_summarized_again() {
    let summarizer = Extractive::new(
        Template::builtin("structured").unwrap(),
        ExtractiveSettings::built_in().unwrap(),
    );
    let read: Vec<String> = (1..=8).map(|n| format!("docs/chapter-{n}.md")).collect();
    let earlier = format!(
        "## Goal\nNone recorded.\n\n## Relevant files / directories\nModified:\n- src/lib.rs\n- src/main.rs\nRead:\n{}",
        read.iter()
            .map(|path| format!("- {path}\n"))
            .collect::<String>()
    );
    let again = summarizer.summary_of(&[summary_message(&earlier)]).unwrap();
    let listed =
        |summary: &str, path: &str| summary.lines().any(|line| line == format!("- {path}"));
    for path in ["src/lib.rs", "src/main.rs"]
        .into_iter()
        .chain(read.iter().map(String::as_str))
    {
        assert!(listed(&again, path), "{again}");
    }
    // Within 30 tokens less, the earliest files read go first (the note that says so costs
    // some of the room), and the files changed stay.
    let budget = counter_of(&again) - 30;
    let shed = summarizer
        .strictly_within(budget)
        .summary_of(&[summary_message(&earlier)])
        .unwrap();
    assert!(counter_of(&shed) <= budget, "{shed}");
    assert!(
        shed.contains("- src/lib.rs\n- src/main.rs\nRead:\n"),
        "{shed}"
    );
    assert!(
        !listed(&shed, "docs/chapter-1.md") && listed(&shed, "docs/chapter-8.md"),
        "{shed}"
    );
}

fn counter_of(text: &str) -> usize {
    use condense_tokenizer::TokenCounter;
    Tiktoken::default().count_text(text)
}

/// The person's requests hold lines of the summary's own layout: a numbered list, a heading, a
/// line that names a list of files. Folded into the next summary, each still comes back as the
/// request it was, whole and once, in order (where the reader took such a line for the next
/// request or the end of the list, one request was split in two, and a quote cut at
/// `quote_chars` lost the end of the next; a heading dropped every request after it).
#[test]
fn requests_holding_the_summary_s_own_layout_come_back_whole() {
    use condense_core::Role;
    let summarizer = Extractive::new(
        Template::builtin("structured").unwrap(),
        ExtractiveSettings::built_in().unwrap(),
    );
    let filler = "Keep the public names as they are. ".repeat(40);
    let requests = [
        format!("Do these:\n1. rename the parser\n2. add a test for BOMs\n{filler}END_OF_FIRST"),
        format!(
            "Then the docs:\n## Usage\nexplain the flags\nRead:\n- the old README\n{filler}END_OF_SECOND"
        ),
        format!("~~~\nsome pasted block\n~~~\n3. and last, {filler}END_OF_THIRD"),
    ];
    let mut head = Vec::new();
    for (index, request) in requests.iter().enumerate() {
        head.push(Message::text(Role::User, request.clone()));
        head.extend(condense_core::testing::tool_step(
            &format!("c{index}"),
            "bash",
            serde_json::json!({ "command": format!("cargo test part{index}") }),
            "ok",
        ));
    }
    let mut summary = summarizer.summary_of(&head).unwrap();
    // Folded twice: what a summary wrote, the next reads back and writes again.
    for fold in 0..3 {
        for request in &requests {
            assert_eq!(
                summary.matches(request.as_str()).count(),
                1,
                "fold {fold}: {summary}"
            );
        }
        let first = summary.find("END_OF_FIRST").unwrap();
        let second = summary.find("END_OF_SECOND").unwrap();
        assert!(first < second && second < summary.find("END_OF_THIRD").unwrap());
        let mut next = vec![summary_message(&summary)];
        next.extend(condense_core::testing::tool_step(
            &format!("n{fold}"),
            "bash",
            serde_json::json!({ "command": "cargo build" }),
            "ok",
        ));
        summary = summarizer.summary_of(&next).unwrap();
    }
    // Within a budget that shortens the quotes to their starts, each stays fenced, and comes
    // back as one request with its start.
    let whole = summarizer.summary_of(&head).unwrap();
    let short = summarizer
        .strictly_within(counter_of(&whole) - 500)
        .summary_of(&head)
        .unwrap();
    assert!(short.contains("1. ~~~\nDo these:\n1. rename"), "{short}");
    assert!(!short.contains("END_OF_FIRST"), "{short}");
    let mut next = vec![summary_message(&short)];
    next.extend(condense_core::testing::tool_step(
        "s",
        "bash",
        serde_json::json!({ "command": "cargo build" }),
        "ok",
    ));
    let again = summarizer.summary_of(&next).unwrap();
    for request in &requests {
        let start: String = request.chars().take(150).collect();
        assert_eq!(again.matches(start.as_str()).count(), 1, "{again}");
    }
    assert!(
        again.contains("\n3. ~~~~\n~~~\nsome pasted block"),
        "{again}"
    );
    assert!(
        !again.contains("kept within"),
        "the note is no request's: {again}"
    );
}
