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
pub fn parse_summary(answer: &str, template: &Template) -> Result<ParsedSummary, TemplateError> {
    let without_analysis = strip_block(answer, "analysis");
    let text = inner_block(&without_analysis, "summary")
        .unwrap_or(&without_analysis)
        .trim();
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

/// `text` without `<tag>…</tag>`; an unclosed block runs to the end.
fn strip_block(text: &str, tag: &str) -> String {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        out.push_str(&rest[..start]);
        rest = match rest[start..].find(&close) {
            Some(end) => &rest[start + end + close.len()..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// The text inside the first `<tag>…</tag>`, the rest of the text when it is not closed.
fn inner_block<'t>(text: &'t str, tag: &str) -> Option<&'t str> {
    let open = format!("<{tag}>");
    let start = text.find(&open)? + open.len();
    let end = text[start..]
        .find(&format!("</{tag}>"))
        .map_or(text.len(), |end| start + end);
    Some(&text[start..end])
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
