//! The short report of a compaction, in words.

use condense_compact::TailRule;
use condense_text::thousands;

use crate::{CompactReport, CompactionOutcome, Config, Measure};

/// An idle gap people read at a glance: minutes, hours or days.
fn idle(minutes: u64) -> String {
    match minutes {
        0..120 => format!("{minutes} min"),
        120..2_880 => format!("{} h", minutes / 60),
        _ => format!("{} days", thousands((minutes / 1_440) as usize)),
    }
}

/// The short report of a compaction people read (what `condense compact` prints on stderr, and
/// the Python binding's `str(report)`): what was counted and against what, what pruning and the
/// summary did, the result, and where the originals are. `verbose` adds every pruning decision.
pub fn render_report(
    input: &str,
    format: &str,
    config: &Config,
    report: &CompactReport,
    verbose: bool,
    originals: Option<&str>,
) -> String {
    let mut out = heading(input, format, config, report);
    if let Some(native) = report.native {
        out.push_str(&format!(
            "  native:  the provider's own compaction at message {}: the {} messages before it are passed on as they came, not counted\n",
            native.at_message, native.ignored_messages
        ));
    }
    out.push_str(&pruned(report));
    if let Some(compact) = compacted(&report.compaction) {
        out.push_str(&format!("  compact: {compact}\n"));
    }
    let verdict = if report.under_threshold {
        "under the threshold".to_owned()
    } else {
        report.note.clone().unwrap_or_default()
    };
    out.push_str(&format!(
        "  result:  {} tokens, {verdict}\n",
        thousands(report.tokens_after)
    ));
    if let Some(limit) = report.reply_limit {
        out.push_str(&format!(
            "  reply:   limit lowered from {} to {} tokens, the room the input leaves in the window\n",
            thousands(limit.asked as usize),
            thousands(limit.sent as usize)
        ));
    }
    // Where the originals of what was replaced are: a placeholder names a handle, not a place.
    let replaced = report.prune.changed()
        || matches!(report.compaction, CompactionOutcome::Summarized { previewed_outputs, tail_inputs, previewed_inputs, previewed_protected, cut_person, .. } if previewed_outputs + tail_inputs + previewed_inputs + previewed_protected + cut_person > 0);
    if let Some(store) = originals.filter(|_| replaced) {
        out.push_str(&format!("  originals: {store} (condense recall HANDLE)\n"));
    }
    if verbose {
        out.push_str(&format!("{}", report.prune));
    }
    out
}

/// The first line: what was counted, against which window.
fn heading(input: &str, format: &str, config: &Config, report: &CompactReport) -> String {
    let measured = match report.measured {
        Measure::Tokenizer { tokens, tools: 0 } => format!("{} tokens", thousands(tokens)),
        Measure::Tokenizer { tokens, tools } => format!(
            "{} tokens ({} of them the tool definitions)",
            thousands(tokens),
            thousands(tools)
        ),
        Measure::ProviderUsage {
            tokens, reported, ..
        } => {
            format!(
                "{} tokens (the provider reported {}; condense counts {})",
                thousands(tokens),
                thousands(reported),
                thousands(report.tokens_before)
            )
        }
    };
    format!(
        "{input} ({format}): {measured}; window {}, compaction due at {}\n",
        thousands(config.context_window()),
        thousands(report.usable)
    )
}

/// What pruning did, with the notes that explain it: a protect window wider than the window,
/// microcompact after an idle gap.
fn pruned(report: &CompactReport) -> String {
    let mut out = String::new();
    let prune = &report.prune;
    out.push_str(&format!(
        "  prune:   {} of {} tool outputs replaced, {} tokens freed -> {} tokens\n",
        prune.replaced(),
        prune.outputs.len(),
        thousands(prune.tokens_freed),
        thousands(report.tokens_after_prune)
    ));
    // opencode's 40,000-token protect window was set for 200K models; on a small one it can
    // cover more than the whole usable window, and then pruning, by design, keeps everything.
    let window_kept = prune
        .outputs
        .iter()
        .filter(|output| output.reason == condense_pruner::Reason::InsideWindow)
        .count();
    if prune.thresholds.protect_tokens >= report.usable && window_kept > 0 {
        out.push_str(&format!(
            "  note:    the protect window ({} tokens) is wider than the {} usable, so {window_kept} outputs it covers were kept; prune.adaptive_thresholds = true scales it to the window\n",
            thousands(prune.thresholds.protect_tokens),
            thousands(report.usable)
        ));
    }
    if let Some(micro) = prune.microcompact.as_ref().filter(|micro| micro.cache_cold) {
        out.push_str(&format!(
            "  microcompact: idle {} since the previous request (over {} min, the provider's cache has expired): {} old tool outputs cleared
",
            idle(micro.idle_minutes),
            micro.threshold_minutes,
            micro.cleared
        ));
    }
    out
}

/// What a request with nothing (new) to summarize had cut to fit the window, as the end of its
/// line; nothing where nothing was.
fn over_the_window(cut_to_fit: usize) -> String {
    match cut_to_fit {
        0 => String::new(),
        n => format!(
            "; over the window, so {n} cut to fit (calls' inputs, protected outputs, the person's messages)"
        ),
    }
}

/// What the summary did, in one line; `None` when only pruning was asked.
fn compacted(outcome: &CompactionOutcome) -> Option<String> {
    match outcome {
        CompactionOutcome::PruneOnly => None,
        CompactionOutcome::NotDue => {
            Some("not needed: under the threshold after pruning".to_owned())
        }
        CompactionOutcome::NothingToCompact { cut_to_fit } => Some(format!(
            "nothing to summarize: the recent turns are all there is{}",
            over_the_window(*cut_to_fit)
        )),
        CompactionOutcome::NothingNew {
            previewed_outputs,
            cut_to_fit,
        } => Some(format!(
            "nothing new to summarize: before the recent turns are only the earlier summary and what it carries{}{}",
            match previewed_outputs {
                0 => String::new(),
                1 => "; 1 output of the tail cut to a preview".to_owned(),
                n => format!("; {n} outputs of the tail cut to previews"),
            },
            over_the_window(*cut_to_fit)
        )),
        CompactionOutcome::CircuitOpen {
            consecutive_failures,
        } => Some(format!(
            "stopped after {consecutive_failures} failures in a row"
        )),
        CompactionOutcome::Failed {
            summarizer, error, ..
        } => Some(format!("{summarizer} failed: {error}")),
        CompactionOutcome::Summarized { .. } => summarized(outcome),
    }
}

/// What a summary did, in one line: what it replaced, why then, and what else was cut or left
/// to it for the request to fit.
fn summarized(outcome: &CompactionOutcome) -> Option<String> {
    let CompactionOutcome::Summarized {
        summarizer,
        split,
        carried_messages,
        protected_summarized,
        previewed_outputs,
        tail_inputs,
        previewed_inputs,
        previewed_protected,
        cut_person,
        summary_tokens,
        missing_sections,
        rejected,
        early,
        cache_cold,
    } = outcome
    else {
        return None;
    };
    let mut line = format!(
        "messages {}..{} summarized by {summarizer} ({} tokens -> a {}-token summary); {} kept",
        split.pinned,
        split.tail_start,
        thousands(split.head_tokens),
        thousands(*summary_tokens),
        report_kept(split.tail_start, *carried_messages)
    );
    if *cache_cold {
        line.push_str(
            "; early, the provider's cache holding nothing of the request (expired since the previous one, or another model or system prompt): nothing it held to rewrite (compaction.cache_lifetime_minutes)",
        );
    } else if *early {
        line.push_str(
            "; early, before the window is full: cheaper than carrying the head (compaction.cache_rewrite_cost)",
        );
    }
    if split.rule == TailRule::NoRoom {
        line.push_str(
            "; the last exchange alone over the window even with its inputs cut, so summarized too: the request the provider would refuse otherwise",
        );
    }
    if *tail_inputs > 0 {
        line.push_str(&format!(
            "; the tail over its budget, so first {tail_inputs} of its earlier tool calls' inputs cut to previews (prune.input_note)"
        ));
    }
    if *previewed_outputs > 0 {
        line.push_str(&match split.rule {
            TailRule::RecentCalls => format!(
                "; the tail holds the last {} tool calls, {previewed_outputs} of their outputs cut to previews",
                split.tail_calls
            ),
            _ => format!(
                "; the last exchange is over the tail budget, {previewed_outputs} of its outputs cut to previews"
            ),
        });
    }
    if *protected_summarized > 0 {
        line.push_str(&format!(
            "; {protected_summarized} of the protected tools' oldest calls summarized: more than the room beside the tail"
        ));
    }
    if *previewed_inputs > 0 {
        line.push_str(&format!(
            "; still over the window with the summary shrunk, so {previewed_inputs} of the last exchange's tool call inputs cut to previews (prune.input_note)"
        ));
    }
    if *previewed_protected > 0 {
        line.push_str(&format!(
            "; still over the window, so {previewed_protected} of the protected tools' outputs or inputs in the tail cut to previews"
        ));
    }
    if *cut_person > 0 {
        line.push_str(&format!(
            "; still over the window, so {cut_person} of the person's messages in the tail cut, images left out first (prune.image_note, prune.message_note)"
        ));
    }
    if let Some(reason) = rejected {
        line.push_str(&format!(
            "; the model's answer was rejected twice ({reason}): the extractive summary stands in"
        ));
    }
    if !missing_sections.is_empty() {
        line.push_str(&format!(
            "; missing sections: {}",
            missing_sections.join(", ")
        ));
    }
    Some(line)
}

fn report_kept(tail_start: usize, carried: usize) -> String {
    if carried == 0 {
        format!("the tail from message {tail_start}")
    } else {
        format!("the tail from message {tail_start} and {carried} carried message(s)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request with nothing to summarize, or nothing new, says what it had cut to fit the
    /// window, and says nothing of it where nothing was.
    #[test]
    fn nothing_to_summarize_says_what_was_cut_to_fit() {
        let line = |outcome: CompactionOutcome| compacted(&outcome).unwrap();
        assert_eq!(
            line(CompactionOutcome::NothingNew {
                previewed_outputs: 1,
                cut_to_fit: 2,
            }),
            "nothing new to summarize: before the recent turns are only the earlier summary and \
             what it carries; 1 output of the tail cut to a preview; over the window, so 2 cut to \
             fit (calls' inputs, protected outputs, the person's messages)"
        );
        assert_eq!(
            line(CompactionOutcome::NothingNew {
                previewed_outputs: 0,
                cut_to_fit: 0,
            }),
            "nothing new to summarize: before the recent turns are only the earlier summary and \
             what it carries"
        );
        assert_eq!(
            line(CompactionOutcome::NothingToCompact { cut_to_fit: 1 }),
            "nothing to summarize: the recent turns are all there is; over the window, so 1 cut \
             to fit (calls' inputs, protected outputs, the person's messages)"
        );
    }
}
