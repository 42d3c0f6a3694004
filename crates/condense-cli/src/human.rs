//! The short report on stderr, and the small formatting helpers the tables use.

use condense_formats::Format;
use condense_host::{CompactReport, Config};
pub use condense_text::thousands;

use crate::Verbosity;

/// The short report of a compaction, as `condense compact` prints it
/// ([`condense_host::render_report`]).
pub fn report(
    input: &str,
    format: Format,
    config: &Config,
    report: &CompactReport,
    verbosity: Verbosity,
    originals: Option<&str>,
) -> String {
    condense_host::render_report(
        input,
        format.name(),
        config,
        report,
        verbosity == Verbosity::Verbose,
        originals,
    )
}

/// A bar of the context used against the window.
pub fn bar(tokens: usize, window: usize, usable: usize) -> String {
    const WIDTH: usize = 50;
    let share = |n: usize| (n.min(window) * WIDTH).checked_div(window).unwrap_or(0);
    let filled = share(tokens);
    let mark = share(usable).min(WIDTH - 1);
    let cells: String = (0..WIDTH)
        .map(|cell| match (cell < filled, cell == mark) {
            (_, true) => '|',
            (true, false) => '#',
            (false, false) => '.',
        })
        .collect();
    let percent = (tokens * 100).checked_div(window).unwrap_or(0);
    format!(
        "[{cells}] {} / {} tokens ({percent}%); | marks where compaction is due ({})",
        thousands(tokens),
        thousands(window),
        thousands(usable)
    )
}

pub fn cut(text: &str, width: usize) -> String {
    condense_text::cut(
        text,
        condense_text::Limit::Chars(width),
        condense_text::Marker::Within("…"),
    )
    .into_owned()
}
