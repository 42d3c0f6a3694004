//! The markers a summary is laid out with: written by the summarizer and the ledger, read back
//! by [`super::previous`] when a later compaction folds the summary in. One place, so the writer
//! and the reader cannot drift apart (and so neither module imports the other for them).

/// The heading the ledger starts with.
pub const LEDGER_HEADING: &str = "## Ledger";
/// What follows a path in the ledger: the last tool that touched it.
pub(crate) const LAST_TOOL: &str = " (last: ";
/// How the line before a quoted summary of an agent's own compaction opens; the agent's name
/// and how it is quoted follow.
pub(crate) const EARLIER_BY: &str = "Earlier summary by ";
/// How a whole quoted summary is said to be quoted.
pub(crate) const IN_FULL: &str = "quoted in full";
/// Where a quote was cut.
pub(crate) const CUT_MARK: &str = " […]";
/// How the line that says where the budget cut a section starts (after the section's last item,
/// a request's quote among them).
pub(crate) const CUT_NOTE: &str = "[…";
/// What follows the start of a request that the compaction keeps whole beside the summary (after
/// it, or, an autonomous run's task, before it): the summary quotes only enough of it to say
/// which request it is.
pub(crate) const KEPT_WHOLE: &str = " (kept whole in the conversation)";
/// [`KEPT_WHOLE`] as summaries said it before the task could come first, still read in theirs.
pub(crate) const KEPT_WHOLE_AFTER: &str = " (kept whole after this summary)";
/// The line the agent's plan follows, one `- [status] step` line a step.
pub(crate) const PLAN: &str = "Plan:";
/// The lines that head the lists of files and failures, after the requests.
pub(crate) const LIST_LABELS: [&str; 4] = ["Modified:", "Read:", "Failed:", PLAN];

/// Whether `line` heads a section: `## `, or `### ` where the template writes its headings at
/// that level (the summary keeps the template's level).
pub(crate) fn is_heading(line: &str) -> bool {
    line.starts_with("## ") || line.starts_with("### ")
}

/// The `number`th of the numbered quotes of the person's requests, `N. text`. A request holding
/// a line that the reader would take for the summary's own layout (a numbered line, a heading, a
/// list's label, a note of the budget's cut, the line before an agent's quoted summary), or
/// opening with a fence, is
/// fenced instead: `N. ~~~`, its text verbatim, then the same fence, longer than any line of
/// tildes in it. The text stays whole and unchanged (what the agent reads, and what a later
/// summary quotes), and [`super::previous::read`] takes it back as one request.
pub(crate) fn numbered_quote(number: impl std::fmt::Display, text: &str) -> String {
    let mut lines = text.lines();
    let opens_with_a_fence = lines.next().is_some_and(is_fence);
    if !opens_with_a_fence && !lines.any(reads_as_layout) {
        return format!("{number}. {text}");
    }
    let mut fence = "~~~".to_owned();
    while text.lines().any(|line| line == fence) {
        fence.push('~');
    }
    format!("{number}. {fence}\n{text}\n{fence}")
}

/// The text of a quote as [`numbered_quote`] wrote it after the number: fenced or not.
pub(crate) fn unfenced(quote: &str) -> &str {
    let Some((fence, rest)) = quote.split_once('\n') else {
        return quote;
    };
    rest.strip_suffix(fence)
        .and_then(|text| text.strip_suffix('\n'))
        .filter(|_| is_fence(fence))
        .unwrap_or(quote)
}

/// Whether `rest` (what follows an item's number) opens a fenced quote: three tildes or more.
pub(crate) fn is_fence(rest: &str) -> bool {
    rest.len() >= 3 && rest.bytes().all(|byte| byte == b'~')
}

/// Whether a line of a quote would read, unfenced, as the summary's layout: an item's number
/// (`2. `, ending the quote before it), a heading or a list's label (ending the requests), the
/// note of a cut (ending the quote), or the line an agent's quoted summary follows.
fn reads_as_layout(line: &str) -> bool {
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    let numbered = digits > 0
        && line[digits..]
            .strip_prefix('.')
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '));
    numbered
        || is_heading(line)
        || LIST_LABELS.contains(&line)
        || line.starts_with(CUT_NOTE)
        || line.starts_with(EARLIER_BY)
}
