use crate::{Template, TemplateError};

/// A summary as it will be kept, and the sections it lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSummary {
    /// The summary text, trimmed.
    pub text: String,
    /// Headings of the template that the summary does not have. Reported, not fatal: a summary
    /// with a missing section is still far better than none.
    pub missing_sections: Vec<String>,
}

/// Takes what the summarizer answered: drops an `<analysis>` block (scratch work the prompt asked
/// for), takes the `<summary>` block when there is one, and checks the template's headings.
///
/// Each block is one the answer opens on a line of its own before any of the template's
/// sections; the summary's runs to the answer's last `</summary>`. A summary quotes what the
/// session holds, and that can hold the same tags (a C# doc comment's `/// <summary>`, Claude
/// Code's `<task-notification>`, whose `<summary>` line says how a background command ended, a
/// harness's own compaction prompt asking for `<analysis>`), which must neither end a block
/// early nor be taken for one. condense's own summary is not a model's answer:
/// [`summary_as_written`].
pub fn parse_summary(answer: &str, template: &Template) -> Result<ParsedSummary, TemplateError> {
    let without_analysis = without_analysis(answer, template);
    let text = summary_block(&without_analysis, template).unwrap_or(&without_analysis);
    summary_as_written(text, template)
}

/// A summary taken as it was written (condense's own, built to the template): trimmed, and its
/// headings checked. Nothing in it is read as markup: the person's requests it quotes may hold
/// any tags.
pub fn summary_as_written(text: &str, template: &Template) -> Result<ParsedSummary, TemplateError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(TemplateError::EmptySummary);
    }
    let present: Vec<String> = text.lines().filter_map(heading_of).collect();
    let missing_sections = template
        .sections()
        .iter()
        .filter(|section| {
            !present
                .iter()
                .any(|heading| heading.eq_ignore_ascii_case(section))
        })
        .cloned()
        .collect();
    Ok(ParsedSummary {
        text: text.to_owned(),
        missing_sections,
    })
}

/// The answer's `<summary>` block ([`parse_summary`]): from the `<summary>` that opens a line
/// before any of `template`'s sections to the last `</summary>` after it, or to the end where
/// none closes it. `None` where there is none: the answer is the summary, unwrapped, and a tag
/// after a section is one it quotes.
fn summary_block<'t>(text: &'t str, template: &Template) -> Option<&'t str> {
    let (_, start) = opening(text, "<summary>", template)?;
    let end = text[start..]
        .rfind("</summary>")
        .map_or(text.len(), |end| start + end);
    Some(&text[start..end])
}

/// The answer without its `<analysis>` block ([`parse_summary`]): from the `<analysis>` that
/// opens a line before any of `template`'s sections to the first `</analysis>` after it, or to
/// the end where none closes it.
fn without_analysis(text: &str, template: &Template) -> String {
    const CLOSE: &str = "</analysis>";
    let Some((open, after)) = opening(text, "<analysis>", template) else {
        return text.to_owned();
    };
    let rest = text[after..]
        .find(CLOSE)
        .map_or("", |end| &text[after + end + CLOSE.len()..]);
    format!("{}{rest}", &text[..open])
}

/// Where `tag` opens a line of `text` before any of `template`'s sections begins: the tag's
/// offset and the offset just after it.
fn opening(text: &str, tag: &str, template: &Template) -> Option<(usize, usize)> {
    let sections = template.sections();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let line_start = at;
        at += line.len();
        let opened = line.trim_start();
        if opened.starts_with(tag) {
            let open = line_start + (line.len() - opened.len());
            return Some((open, open + tag.len()));
        }
        let a_section = heading_of(line).is_some_and(|heading| {
            sections
                .iter()
                .any(|section| heading.eq_ignore_ascii_case(section))
        });
        if a_section {
            return None;
        }
    }
    None
}

/// A line as a heading: markdown `#`s, bold markers, numbering and a trailing colon removed.
fn heading_of(line: &str) -> Option<String> {
    let trimmed = line.trim();
    let is_heading =
        trimmed.starts_with('#') || (trimmed.starts_with("**") && trimmed.ends_with("**"));
    if !is_heading {
        return None;
    }
    let mut heading = trimmed
        .trim_start_matches('#')
        .trim()
        .trim_matches('*')
        .trim();
    if let Some((number, rest)) = heading.split_once(". ")
        && number.chars().all(|c| c.is_ascii_digit())
    {
        heading = rest.trim();
    }
    Some(
        heading
            .trim_end_matches(':')
            .trim()
            .trim_matches('*')
            .trim()
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn structured() -> Template {
        Template::builtin("structured").unwrap()
    }

    #[test]
    fn the_analysis_is_dropped_and_the_summary_block_taken() {
        let answer = "<analysis>thinking hard</analysis>\nPreamble chatter\n<summary>\n## Goal\nfix it\n## Instructions\n## Discoveries\n## Accomplished\n## Relevant files / directories\n</summary>\ntrailing";
        let parsed = parse_summary(answer, &structured()).unwrap();
        assert!(parsed.text.starts_with("## Goal\nfix it"));
        assert!(!parsed.text.contains("thinking") && !parsed.text.contains("trailing"));
        assert!(parsed.missing_sections.is_empty());
    }

    /// A summary that quotes the session's own tags: a block opened inside a line (a C# doc
    /// comment) is not the answer's, and one quoted inside the answer's block does not end it.
    #[test]
    fn a_summary_tag_quoted_in_the_summary_is_not_its_block() {
        let quoted = "## Goal\nDocument `/// <summary>Parses it</summary>` in parser.cs\n## Accomplished\nnothing";
        assert_eq!(parse_summary(quoted, &structured()).unwrap().text, quoted);
        // An answer not wrapped in a block that quotes a notification's line under a section.
        let unwrapped = "## Goal\nFinish the port\n## Discoveries\nThe person was told:\n<summary>Background command done</summary>\n## Accomplished\nall";
        assert_eq!(
            parse_summary(unwrapped, &structured()).unwrap().text,
            unwrapped
        );
        let nested = "<analysis>x</analysis>\n<summary>\n## Goal\nThe person wrote:\n<task-notification>\n<summary>Background command done</summary>\n</task-notification>\n## Accomplished\nall\n</summary>\nafter";
        let parsed = parse_summary(nested, &structured()).unwrap();
        assert!(
            parsed.text.starts_with("## Goal\nThe person wrote:"),
            "{}",
            parsed.text
        );
        assert!(
            parsed.text.ends_with("## Accomplished\nall"),
            "{}",
            parsed.text
        );
    }

    /// A summary about a harness's own prompts names `<analysis>` in a sentence: only a block
    /// the answer opens on a line of its own, before its sections, is scratch work.
    #[test]
    fn an_analysis_tag_the_summary_names_is_not_its_scratch_work() {
        let answer = "<analysis>\nfirst I read it\n</analysis>\n<summary>\n## Goal\nMake the prompt ask for <analysis> before the summary\n## Accomplished\nthe prompt file\n</summary>";
        let parsed = parse_summary(answer, &structured()).unwrap();
        assert_eq!(
            parsed.text,
            "## Goal\nMake the prompt ask for <analysis> before the summary\n## Accomplished\nthe prompt file"
        );
        let unwrapped = "## Goal\nMake the prompt ask for <analysis> first\n## Accomplished\nall";
        assert_eq!(
            parse_summary(unwrapped, &structured()).unwrap().text,
            unwrapped
        );
    }

    /// condense's own summary quoting a request that holds a `<summary>` line is kept whole.
    #[test]
    fn a_summary_as_written_reads_no_markup() {
        let ours = "## Goal\nx\n## Instructions\n1. <task-notification>\n<summary>Background command done</summary>\n</task-notification>\n## Discoveries\n## Accomplished\n## Relevant files / directories\n- src/a.rs";
        let parsed = summary_as_written(ours, &structured()).unwrap();
        assert_eq!(parsed.text, ours);
        assert!(parsed.missing_sections.is_empty());
        assert_eq!(
            summary_as_written(" \n", &structured()),
            Err(TemplateError::EmptySummary)
        );
    }

    #[test]
    fn missing_headings_are_reported_and_variants_accepted() {
        let answer = "# 1. Goal:\nx\n**Instructions**\ny\n### discoveries\nz";
        let parsed = parse_summary(answer, &structured()).unwrap();
        assert_eq!(
            parsed.missing_sections,
            vec!["Accomplished", "Relevant files / directories"]
        );
    }

    #[test]
    fn an_empty_summary_is_an_error() {
        assert_eq!(
            parse_summary("  \n", &structured()),
            Err(TemplateError::EmptySummary)
        );
        assert_eq!(
            parse_summary("<analysis>only this", &structured()),
            Err(TemplateError::EmptySummary)
        );
        assert_eq!(
            parse_summary("<summary> </summary>", &structured()),
            Err(TemplateError::EmptySummary)
        );
    }
}
