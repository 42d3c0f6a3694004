//! How an agent's own earlier summary is quoted when it takes more room than it is given.
//!
//! A summary Claude Code or Codex wrote when it compacted on its own is all that is left of the
//! session before it, so the next summary quotes it. But it is written by a model asked for
//! detail (12,000 to 16,000 characters in the Claude Code 2.1 logs read for this), about the
//! size of the whole extractive budget, and the work the agent did after it is what the next
//! request needs most. So the quote gives way to that work, down to half the budget
//! ([`super::Extractive`] sets the room): its code blocks go first (what they showed is in the
//! files and the transcript), then, where that is not enough, every section of it keeps its
//! start and the longest give way first: the goal, the pending tasks and the current work are
//! short sections and stay whole, while the long lists (the files and their code, the errors
//! met, the person's messages) keep their first lines.

use condense_tokenizer::TokenCounter;

use super::facts::cut;

/// The fewest tokens of a line worth keeping as its start, cut: a clause.
const CLAUSE_TOKENS: usize = 16;

/// What stands in a section of the quote for the lines cut from it.
fn left_out(lines: usize) -> String {
    format!("[… {lines} more line(s) of this section left out]")
}

/// `text` within about `room` tokens, quoted a line at a time: whole where it fits (`None`).
/// Else its fenced blocks go first (the code it showed is in the files, the output in the
/// transcript: both can be had again), each for a line that says how long it was; and where
/// that is still over, every section keeps its first lines, a cap on each section's tokens the
/// same for all and as high as `room` allows (the longest sections are the ones cut), the line
/// where a section is cut keeping its start. A section starts at a line that is not indented
/// and opens a heading (`#`) or a numbered item (`3. `): the layout of Claude Code's summary
/// (`1. Primary Request and Intent:`) and of a markdown one. A text with none is one section,
/// which keeps its start.
pub(crate) fn fitted(text: &str, room: usize, counter: &dyn TokenCounter) -> Option<String> {
    // Each line as the summary quotes it, `> ` before it, and its line break.
    let cost = |line: &str| counter.count_text(&format!("> {line}")) + 1;
    if text.lines().map(cost).sum::<usize>() <= room {
        return None;
    }
    let lines = without_blocks(text);
    // Each line counted once: the sections' sizes and their cut read the same figures.
    let costs: Vec<usize> = lines.iter().map(|line| cost(line)).collect();
    if costs.iter().sum::<usize>() <= room {
        return Some(lines.join("\n"));
    }
    let sections = sections(&lines);
    let sizes: Vec<usize> = sections
        .iter()
        .map(|section| costs[section.clone()].iter().sum())
        .collect();
    let cap = level(&sizes, room);
    let mut kept: Vec<String> = Vec::new();
    for section in sections {
        let mut used = 0;
        let mut taken = 0;
        for (line, &line_cost) in lines[section.clone()].iter().zip(&costs[section.clone()]) {
            if used + line_cost > cap {
                // The line that does not fit keeps its start where what is left of the cap
                // holds a clause of it, and the section's first line always does.
                let left = cap.saturating_sub(used);
                if taken == 0 || left >= CLAUSE_TOKENS {
                    let chars = line.chars().count() * left.saturating_sub(1) / line_cost;
                    kept.push(cut(line, chars));
                    taken += 1;
                }
                break;
            }
            used += line_cost;
            kept.push(line.clone());
            taken += 1;
        }
        if taken < section.len() {
            kept.push(left_out(section.len() - taken));
        }
    }
    Some(kept.join("\n"))
}

/// The lines of `text` with each fenced block (``` or ~~~, to its closing fence) in place of a
/// line, as indented as its fence, that says how many lines it had. A fence never closed (a
/// summary cut short) runs to the next section's start, not over the sections after it.
fn without_blocks(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let line = lines[at];
        let body = line.trim_start();
        let marker = body.chars().next().filter(|c| *c == '`' || *c == '~');
        let Some(marker) = marker.filter(|m| body.chars().take_while(|c| c == m).count() >= 3)
        else {
            kept.push(line.to_owned());
            at += 1;
            continue;
        };
        let fence = body.chars().take_while(|c| *c == marker).count();
        let rest = &lines[at + 1..];
        // A closing fence: the marker alone, at least as long as the opening one.
        let closing = rest.iter().position(|inner| {
            let inner = inner.trim();
            inner.len() >= fence && inner.chars().all(|c| c == marker)
        });
        let length = match closing {
            Some(closing) => closing + 2,
            None => {
                1 + rest
                    .iter()
                    .take_while(|inner| !opens_a_section(inner))
                    .count()
            }
        };
        let indent = &line[..line.len() - body.len()];
        kept.push(format!("{indent}[… a block of {length} line(s) left out]"));
        at += length;
    }
    kept
}

/// Whether `line` starts a section: a heading or a numbered item, not indented.
fn opens_a_section(line: &str) -> bool {
    line.starts_with('#') || super::numbered(line).is_some()
}

/// Where the sections of `lines` are, each starting at a heading or a numbered item that is not
/// indented (the lines before the first are a section of their own).
fn sections(lines: &[String]) -> Vec<std::ops::Range<usize>> {
    let mut starts: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, line)| opens_a_section(line))
        .map(|(at, _)| at)
        .collect();
    if starts.first() != Some(&0) {
        starts.insert(0, 0);
    }
    starts
        .iter()
        .zip(starts.iter().skip(1).chain(std::iter::once(&lines.len())))
        .map(|(&start, &end)| start..end)
        .collect()
}

/// The highest cap `c` with `Σ min(size, c) <= room`: the sections under it stay whole, the
/// others are cut to it.
fn level(sizes: &[usize], room: usize) -> usize {
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    let mut left = room;
    for (at, &size) in sorted.iter().enumerate() {
        let sharing = sorted.len() - at;
        if size * sharing > left {
            return left / sharing;
        }
        left -= size;
    }
    room
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A word a token, a line break one more.
    struct Words;
    impl TokenCounter for Words {
        fn count_text(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
    }

    #[test]
    fn a_quote_that_fits_is_left_whole() {
        assert_eq!(fitted("1. Goal:\n   port it", 10, &Words), None);
    }

    /// Sections of 8, 44 and 9 tokens (a word a token, `> ` one more) in 33: the short two
    /// whole, the long one cut to the 16 they leave, its first line and the lines that fit, and a line saying how many went.
    #[test]
    fn the_longest_sections_give_way_first_each_keeping_its_start() {
        let long: Vec<String> = (0..10).map(|n| format!("   - file{n}.rs")).collect();
        let text = format!(
            "1. Goal:\n   port it\n3. Files:\n{}\n9. Next Step:\n   run tests",
            long.join("\n")
        );
        let fitted = fitted(&text, 33, &Words).unwrap();
        assert_eq!(
            fitted,
            "1. Goal:\n   port it\n3. Files:\n   - file0.rs\n   - file1.rs\n   - file2.rs\n\
             [… 7 more line(s) of this section left out]\n9. Next Step:\n   run tests"
        );
    }

    /// Fenced blocks go first, each for a line; the prose around them stays whole.
    #[test]
    fn code_blocks_go_before_any_prose() {
        let code = "     let x = a + b + c + d + e + f + g;";
        let text = format!(
            "3. Files:\n   - a.rs\n     ```rust\n{code}\n{code}\n     ```\n   - b.rs\n\
             8. Current Work:\n   ```\n   an output left unclosed, as a cut summary may"
        );
        assert_eq!(
            fitted(&text, 40, &Words).unwrap(),
            "3. Files:\n   - a.rs\n     [… a block of 4 line(s) left out]\n   - b.rs\n\
             8. Current Work:\n   [… a block of 2 line(s) left out]"
        );
    }

    /// A text with no sections, one long line: its start, cut within the line.
    #[test]
    fn one_long_line_keeps_its_start() {
        let text = "word ".repeat(100);
        let fitted = fitted(text.trim(), 20, &Words).unwrap();
        assert!(fitted.starts_with("word word"), "{fitted}");
        assert!(fitted.contains(" […]"), "{fitted}");
        assert!(Words.count_text(&fitted) <= 20, "{fitted}");
    }

    /// Lines a summary's sections are made of: prose, a long line, a fence and its code.
    const LINES: [&str; 5] = [
        "   - src/a.rs: the parser, changed to take the new tokens",
        "   word word word word word word word word word word word word word word word word word",
        "   ```rust",
        "   fn a() { let x = 1; }",
        "",
    ];

    proptest::proptest! {
        /// Whatever the sections and the room: the quote is whole exactly where it fits; cut,
        /// it keeps every section's start, in order, and goes over the room by no more than a
        /// note and a cut's mark a section.
        #[test]
        fn a_cut_quote_keeps_each_sections_start_within_the_room(
            bodies in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(LINES.to_vec()), 0..12),
                1..6,
            ),
            room in 30usize..300,
        ) {
            let text: String = bodies
                .iter()
                .enumerate()
                .map(|(n, body)| format!("{}. Section {n}:\n{}", n + 1, body.join("\n")))
                .collect::<Vec<_>>()
                .join("\n");
            let cost = |text: &str| -> usize {
                text.lines().map(|line| Words.count_text(&format!("> {line}")) + 1).sum()
            };
            let out = fitted(&text, room, &Words);
            proptest::prop_assert_eq!(out.is_none(), cost(&text) <= room);
            let Some(out) = out else { return Ok(()) };
            let mut lines = out.lines();
            for n in 0..bodies.len() {
                let start = format!("{}. Section {n}:", n + 1);
                proptest::prop_assert!(lines.any(|line| line == start), "{}\n---\n{}", start, out);
            }
            let slack = bodies.len() * (cost(&left_out(99)) + 1);
            proptest::prop_assert!(cost(&out) <= room + slack, "{} > {} + {}\n{}", cost(&out), room, slack, out);
            proptest::prop_assert_eq!(fitted(&text, room, &Words), Some(out));
        }
    }

    #[test]
    fn the_level_shares_the_room_among_the_sections_over_it() {
        assert_eq!(level(&[3, 3, 21], 15), 9);
        assert_eq!(level(&[10, 10], 8), 4);
        assert_eq!(level(&[1, 2], 100), 100);
    }
}
