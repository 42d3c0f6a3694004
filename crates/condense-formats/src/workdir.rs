//! The session's working directory, where the wire records it: the directory a relative path
//! in a tool call is relative to.

use condense_core::{Message, Part, Role};
use serde_json::Value;

/// The working directory `message` records, which holds from it on until a later message
/// records another: Claude Code's `cwd` on every line of its log; the `<cwd>` of the
/// `<environment_context>` message Codex sends at the start of a session and again whenever
/// the directory changes (in its logs and in its Responses requests alike); the environment
/// section of a system prompt, `Primary working directory: /w` in Claude Code's requests
/// (2.1) and `Working directory: /w` in older ones and opencode's. `None` for a message that
/// records none.
pub fn working_directory(message: &Message) -> Option<&str> {
    if let Some(cwd) = message
        .wire
        .first()
        .and_then(|record| record.fields.get("cwd"))
        .and_then(Value::as_str)
    {
        return Some(cwd);
    }
    let read: fn(&str) -> Option<&str> = match message.role {
        Role::User if message.generated => environment_cwd,
        Role::System => system_prompt_cwd,
        _ => return None,
    };
    message.parts.iter().find_map(|part| match part {
        Part::Text(text) => read(&text.text),
        _ => None,
    })
}

/// The directory named by a system prompt's environment line, the line as Claude Code writes
/// it (`- Primary working directory: /w`, a bullet of its `# Environment`) or as its older
/// versions and opencode do (`Working directory: /w`, in an `<env>` block).
fn system_prompt_cwd(text: &str) -> Option<&str> {
    // The prompt is long (Claude Code's is tens of kilobytes): one substring search finds the
    // candidates, and only their lines are looked at.
    const LABEL: &str = "orking directory:";
    let mut from = 0;
    while let Some(found) = text[from..].find(LABEL) {
        let at = from + found;
        let line_start = text[..at].rfind('\n').map_or(0, |newline| newline + 1);
        let line_end = text[at..]
            .find('\n')
            .map_or(text.len(), |newline| at + newline);
        let label = text[line_start..at + LABEL.len()].trim_start();
        let label = label.strip_prefix("- ").unwrap_or(label);
        if label == "Primary working directory:" || label == "Working directory:" {
            let directory = text[at + LABEL.len()..line_end].trim();
            if directory.starts_with('/') {
                return Some(directory);
            }
        }
        from = at + LABEL.len();
    }
    None
}

/// The `<cwd>` of a Codex environment context: `<environment_context>\n  <cwd>/w</cwd>\n …`.
fn environment_cwd(text: &str) -> Option<&str> {
    let body = text.trim_start().strip_prefix("<environment_context>")?;
    let end = body.find("</environment_context>").unwrap_or(body.len());
    let (_, from) = body[..end].split_once("<cwd>")?;
    let (cwd, _) = from.split_once("</cwd>")?;
    let cwd = cwd.trim();
    (!cwd.is_empty()).then_some(cwd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(text: &str) -> Message {
        let mut message = Message::text(Role::User, text);
        message.generated = true;
        message
    }

    #[test]
    fn a_codex_environment_context_names_the_directory() {
        let mut message = context(
            "<environment_context>\n  <cwd>/tmp/work</cwd>\n  <shell>bash</shell>\n</environment_context>",
        );
        assert_eq!(working_directory(&message), Some("/tmp/work"));
        // A person's message quoting one is not the harness's context.
        message.generated = false;
        assert_eq!(working_directory(&message), None);
        let empty = context("<environment_context><cwd> </cwd></environment_context>");
        assert_eq!(working_directory(&empty), None);
        let outside = context(
            "<environment_context><shell>bash</shell></environment_context>\n<cwd>/x</cwd>",
        );
        assert_eq!(working_directory(&outside), None, "only inside the context");
    }

    #[test]
    fn a_system_prompt_names_the_directory_in_its_environment_section() {
        let claude_code = Message::text(
            Role::System,
            "You are Claude Code.\n# Environment\nYou have been invoked in the following \
             environment: \n - Primary working directory: /tmp/work\n - Is a git repository: false",
        );
        assert_eq!(working_directory(&claude_code), Some("/tmp/work"));
        let opencode = Message::text(
            Role::System,
            "Here is some useful information about the environment you are running in:\n<env>\n  \
             Working directory: /home/me/project\n  Is directory a git repo: yes\n</env>",
        );
        assert_eq!(working_directory(&opencode), Some("/home/me/project"));
        // The label inside a sentence, or a directory that is not absolute, names nothing.
        let prose = Message::text(
            Role::System,
            "Report the current working directory: /x when asked.\nWorking directory: here",
        );
        assert_eq!(working_directory(&prose), None);
        // A person can paste such a line; only a system prompt is the harness's.
        let pasted = Message::text(Role::User, "Working directory: /tmp/work");
        assert_eq!(working_directory(&pasted), None);
    }

    proptest::proptest! {
        /// Whatever a prompt holds (multi-byte text, labels cut short, several candidates),
        /// reading it never panics, and a directory found is an absolute path on one line of
        /// it, after one of the two labels.
        #[test]
        fn any_prompt_is_read_safely(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::Just("Working directory:".to_owned()),
                    proptest::prelude::Just("- Primary working directory: ".to_owned()),
                    proptest::prelude::Just("\n".to_owned()),
                    proptest::prelude::Just("/".to_owned()),
                    "[a-zé/ \u{1F600}]{0,6}",
                ],
                0..12,
            )
        ) {
            let prompt = pieces.concat();
            let system = Message::text(Role::System, prompt.clone());
            let context = context(&format!("<environment_context><cwd>{prompt}</cwd>"));
            let _ = working_directory(&context);
            if let Some(directory) = working_directory(&system) {
                proptest::prop_assert!(directory.starts_with('/'));
                proptest::prop_assert!(!directory.contains('\n'));
                proptest::prop_assert!(
                    prompt.lines().any(|line| line.contains("orking directory:")
                        && line.trim_end().ends_with(directory)),
                    "{prompt:?}"
                );
            }
        }
    }
}
