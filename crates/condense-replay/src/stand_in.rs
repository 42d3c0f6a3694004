//! How long a summary written by a model runs in the replay.
//!
//! The policies whose summary a model writes (Claude Code's, opencode's, hermes-agent's) cannot
//! ask one offline, so each has a stand-in: condense's extractive summary with the template
//! nearest its prompt ([`crate::policy`]). Its words are what retention reads, and they hold
//! what the session shows. Its length is another matter, and a compaction pays for the length
//! twice: once at the output price, when the summary is written, and again on every later
//! request that reads it.
//!
//! A model asked for a summary writes far more than the extract. Five Claude Code 2.1 logs,
//! each compacted once by Claude Code itself, hold summaries of 12,181 to 16,162 characters:
//! 1.7x to 5.2x the detailed stand-in written at the same points, 1.2x to 2.7x the structured
//! one (`condense replay` prints the figures for each log). So where a log holds
//! summaries the harness wrote itself, every stand-in is sized as those were. The factor is
//! their length over the stand-in's at the same points, per template: a longer summary is
//! padded with filler that names nothing, and a shorter one keeps its start. Where the log holds
//! none, a stand-in keeps its own length: the replay has no measure of the model's, and it
//! guesses none.
//!
//! This changes no policy's rules, only what the policies that ask a model pay for its answer,
//! and it applies to all of them alike. condense's own summary is never a stand-in: the
//! extractive one is what condense sends, and a model's is asked of the model.

use std::borrow::Cow;
use std::sync::Arc;

use condense_core::{Message, Part};
use condense_tokenizer::TokenCounter;
use serde::Serialize;

use crate::policy::{STAND_IN_TEMPLATES, summary_of};
use crate::{Recording, ReplayError};

/// Where filler starts, so that a reader of a replayed request sees what it is.
const FILLER_NOTE: &str =
    "\n\n[replay: filler, to the length of the summaries this session's harness wrote]\n";
/// The filler's unit: names no path and quotes no request, so retention finds nothing in it.
const FILLER_UNIT: &str = " ·";

/// The length of the summaries a session's harness wrote itself, against the stand-in's at the
/// same points.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryLength {
    /// The harness's own summaries in the log.
    pub samples: usize,
    /// Their mean length, in condense's tokens.
    pub mean_tokens: usize,
    /// For each stand-in template: the harness's summaries' length over the stand-in's, both
    /// summed over the samples.
    pub factors: Vec<(String, f64)>,
}

impl SummaryLength {
    /// The summaries `recording`'s harness wrote itself, each measured against the stand-ins
    /// of the session before it; `None` when the log holds none (or none with anything before
    /// it to summarize).
    pub fn of(
        recording: &Recording,
        counter: &Arc<dyn TokenCounter>,
    ) -> Result<Option<SummaryLength>, ReplayError> {
        let mut own = 0usize;
        let mut samples = 0usize;
        let mut stand_ins = vec![0usize; STAND_IN_TEMPLATES.len()];
        for (session, summary) in recording.harness_summaries() {
            let mut lengths = Vec::with_capacity(STAND_IN_TEMPLATES.len());
            for template in STAND_IN_TEMPLATES {
                match summary_of(session, template, counter.clone())? {
                    Some(text) => lengths.push(counter.count_text(&text)),
                    None => break,
                }
            }
            let written = counter.count_text(&summary.plain_text());
            if lengths.len() < STAND_IN_TEMPLATES.len() || written == 0 {
                continue;
            }
            samples += 1;
            own += written;
            for (sum, length) in stand_ins.iter_mut().zip(lengths) {
                *sum += length;
            }
        }
        if samples == 0 {
            return Ok(None);
        }
        let factors = STAND_IN_TEMPLATES
            .iter()
            .zip(stand_ins)
            .filter(|(_, length)| *length > 0)
            .map(|(template, length)| ((*template).to_owned(), own as f64 / length as f64))
            .collect();
        Ok(Some(SummaryLength {
            samples,
            mean_tokens: own / samples,
            factors,
        }))
    }

    /// The measures of several logs of the same harness taken as one, each summary weighing
    /// its own length (a team's sessions: the long ones its harness compacted measure the
    /// model for the short ones it never did); `None` when none of them measured anything.
    pub fn pooled<'a>(lengths: impl IntoIterator<Item = &'a SummaryLength>) -> Option<Self> {
        let mut samples = 0usize;
        let mut own = 0f64;
        let mut stand_ins: Vec<(String, f64)> = Vec::new();
        for length in lengths {
            let theirs = (length.mean_tokens * length.samples) as f64;
            samples += length.samples;
            own += theirs;
            for (template, factor) in &length.factors {
                let stand_in = theirs / factor;
                match stand_ins.iter_mut().find(|(name, _)| name == template) {
                    Some((_, sum)) => *sum += stand_in,
                    None => stand_ins.push((template.clone(), stand_in)),
                }
            }
        }
        (samples > 0).then(|| SummaryLength {
            samples,
            mean_tokens: (own / samples as f64).round() as usize,
            factors: stand_ins
                .into_iter()
                .filter(|(_, stand_in)| *stand_in > 0.0)
                .map(|(template, stand_in)| (template, own / stand_in))
                .collect(),
        })
    }

    /// The factor for stand-ins written with `template`; 1 for a template not measured.
    pub fn factor(&self, template: &str) -> f64 {
        self.factors
            .iter()
            .find(|(name, _)| name == template)
            .map_or(1.0, |(_, factor)| *factor)
    }
}

/// `summary` made `factor` times its length in `counter`'s tokens: padded with filler after it
/// when longer, its start kept when shorter (a model that writes less says less).
pub(crate) fn sized(summary: String, factor: f64, counter: &dyn TokenCounter) -> String {
    let length = counter.count_text(&summary);
    let target = (length as f64 * factor).round() as usize;
    if target < length {
        let chars = summary.chars().count() * target / length.max(1);
        return summary.chars().take(chars).collect();
    }
    let mut sized = summary;
    let mut missing = target - length;
    if missing <= counter.count_text(FILLER_NOTE) {
        return sized;
    }
    sized.push_str(FILLER_NOTE);
    // Each round adds what is still missing at the unit's own count, so that a tokenizer
    // merging units only takes another round; a few rounds come within a token or two.
    let per_unit = counter.count_text(&FILLER_UNIT.repeat(64)).max(1) as f64 / 64.0;
    for _ in 0..8 {
        missing = target.saturating_sub(counter.count_text(&sized));
        let units = (missing as f64 / per_unit).floor() as usize;
        if units == 0 {
            break;
        }
        sized.push_str(&FILLER_UNIT.repeat(units));
    }
    sized
}

/// The stand-in for a model's summary of `head` with `template`, sized as `length` measures
/// the session's own ([`SummaryLength`]); `None` when there is nothing in `head` to summarize.
pub(crate) fn stand_in(
    head: &[Message],
    template: &str,
    counter: &Arc<dyn TokenCounter>,
    length: Option<&SummaryLength>,
) -> Result<Option<String>, ReplayError> {
    // A summary folds the one before it, which must not bring its filler: each stand-in is
    // sized from its own words, as the factor was measured.
    let filled = |message: &Message| {
        message.parts.iter().any(|part| match part {
            Part::Text(said) => said.text.contains(FILLER_NOTE),
            _ => false,
        })
    };
    let head: Cow<'_, [Message]> = if head.iter().any(filled) {
        Cow::Owned(head.iter().map(without_filler).collect())
    } else {
        Cow::Borrowed(head)
    };
    let Some(summary) = summary_of(&head, template, counter.clone())? else {
        return Ok(None);
    };
    Ok(Some(match length {
        Some(length) => sized(summary, length.factor(template), counter.as_ref()),
        None => summary,
    }))
}

/// `message` with the filler of a stand-in it holds left out.
fn without_filler(message: &Message) -> Message {
    let mut message = message.clone();
    for part in &mut message.parts {
        if let Part::Text(said) = part
            && let Some(at) = said.text.find(FILLER_NOTE)
        {
            said.text.truncate(at);
        }
    }
    message
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::policy::{ClaudeCode, Model, Policy, SUMMARY_INTRO};
    use condense_core::{Conversation, Role};
    use condense_tokenizer::Tiktoken;

    fn counter() -> Arc<dyn TokenCounter> {
        Arc::new(Tiktoken::default())
    }

    /// A session of `rounds` of the agent reading a file, after the person's request.
    fn session(rounds: usize) -> Vec<Message> {
        let mut messages = vec![
            Message::text(Role::System, "You are a coding agent."),
            Message::text(Role::User, "fix the parser in src/parser.rs"),
        ];
        for round in 0..rounds {
            messages.push(Message::text(
                Role::Assistant,
                format!("I will read src/module{round}.rs next."),
            ));
            messages.push(Message::text(
                Role::User,
                format!(
                    "contents of src/module{round}.rs\n{}",
                    "let x = 1;\n".repeat(80)
                ),
            ));
        }
        messages
    }

    #[test]
    fn a_stand_in_is_padded_to_the_length_measured_or_keeps_its_start() {
        let counter = counter();
        let summary = summary_of(&session(6), "detailed", counter.clone())
            .unwrap()
            .unwrap();
        let length = counter.count_text(&summary);

        let longer = sized(summary.clone(), 2.5, counter.as_ref());
        let target = (length as f64 * 2.5).round() as usize;
        let got = counter.count_text(&longer);
        assert!(got <= target && got + 3 >= target, "{got} for {target}");
        assert!(longer.starts_with(&summary) && longer.contains(FILLER_NOTE));
        // The filler adds no item retention looks for.
        let filler = &longer[summary.len()..];
        assert!(!filler.contains('/') && !filler.contains("fix the parser"));

        let shorter = sized(summary.clone(), 0.5, counter.as_ref());
        assert!(summary.starts_with(&shorter));
        assert!(counter.count_text(&shorter) <= length / 2 + 2);

        assert_eq!(sized(summary.clone(), 1.0, counter.as_ref()), summary);
    }

    #[test]
    fn the_factor_is_the_harness_summaries_over_the_stand_ins_at_the_same_points() {
        let counter = counter();
        let before = session(8);
        let written = format!(
            "The conversation is summarized below:\n{}",
            "word ".repeat(12_000)
        );
        let mut messages = before.clone();
        messages.push(crate::recording::claude_code_summary_line(&written));
        messages.push(Message::text(Role::Assistant, "Continuing."));
        let recording = Recording::of(Conversation::new(messages));

        let length = SummaryLength::of(&recording, &counter).unwrap().unwrap();
        assert_eq!(length.samples, 1);
        assert_eq!(length.mean_tokens, counter.count_text(&written));
        for template in STAND_IN_TEMPLATES {
            let stand_in = summary_of(&before, template, counter.clone())
                .unwrap()
                .unwrap();
            let expected = length.mean_tokens as f64 / counter.count_text(&stand_in) as f64;
            assert!(
                (length.factor(template) - expected).abs() < 1e-9,
                "{template}"
            );
            assert!(
                length.factor(template) > 1.0,
                "{template}: {}",
                length.factor(template)
            );
        }
        assert_eq!(length.factor("anchored"), 1.0);

        // A log the harness never compacted measures nothing.
        let plain = Recording::of(Conversation::new(before));
        assert_eq!(SummaryLength::of(&plain, &counter).unwrap(), None);
    }

    /// Pooled, each summary weighs its own length: the factor is the harness's summaries'
    /// length over the stand-ins', both summed over every log.
    #[test]
    fn logs_pooled_weigh_each_summary_by_its_length() {
        let one = SummaryLength {
            samples: 1,
            mean_tokens: 3_000,
            factors: vec![("detailed".to_owned(), 3.0), ("structured".to_owned(), 2.0)],
        };
        let two = SummaryLength {
            samples: 2,
            mean_tokens: 1_000,
            factors: vec![("detailed".to_owned(), 1.0)],
        };
        let pooled = SummaryLength::pooled([&one, &two]).unwrap();
        assert_eq!(pooled.samples, 3);
        // 5,000 tokens of the harness's over 1,000 + 2,000 of the detailed stand-in.
        assert_eq!(pooled.mean_tokens, 1_667);
        assert!((pooled.factor("detailed") - 5_000.0 / 3_000.0).abs() < 1e-9);
        // Measured on the first log alone for the structured template.
        assert!((pooled.factor("structured") - 5_000.0 / 1_500.0).abs() < 1e-9);
        assert_eq!(SummaryLength::pooled([]), None);
    }

    /// A length measured elsewhere sizes the stand-ins of a log that holds no summary of its
    /// harness's; [`crate::replay`] measures that log's own, and finds none.
    #[test]
    fn a_length_measured_elsewhere_sizes_a_log_that_measures_none() {
        let counter = counter();
        let recording = Recording::of(Conversation::new(session(120)));
        let settings = crate::ReplaySettings {
            provider: crate::Provider::Anthropic,
            ttl: crate::Ttl::FiveMinutes,
            prices: crate::PriceTable::built_in().unwrap(),
            context_window: 12_000,
            max_output_tokens: 1_000,
        };
        let run = |length: Option<&SummaryLength>| {
            let mut policies = vec![crate::policy::named("claude-code", counter.clone()).unwrap()];
            crate::replay_sized(
                &recording,
                &mut policies,
                &settings,
                counter.clone(),
                length,
                &mut |_| {},
            )
            .unwrap()
        };
        let length = SummaryLength {
            samples: 1,
            mean_tokens: 0,
            factors: vec![("detailed".to_owned(), 3.0)],
        };
        let own = crate::replay(
            &recording,
            &mut [crate::policy::named("claude-code", counter.clone()).unwrap()],
            &settings,
            counter.clone(),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(own.summary_length, None);
        assert_eq!(own.policies, run(None).policies);
        let sized = run(Some(&length));
        assert_eq!(sized.summary_length.as_ref(), Some(&length));
        let (plain, longer) = (&own.policies[0], &sized.policies[0]);
        assert!(plain.compactions > 0);
        assert!(
            longer.output_tokens > plain.output_tokens,
            "{} vs {}",
            longer.output_tokens,
            plain.output_tokens
        );
        assert!(longer.cost_usd > plain.cost_usd);
    }

    /// Claude Code's rules, over a session that compacts again and again: each summary sent is
    /// its stand-in at the factor measured, the filler once, however many summaries it folds.
    #[test]
    fn each_summary_is_sized_from_its_own_words_not_from_the_filler_it_folds() {
        let counter = counter();
        let length = SummaryLength {
            samples: 1,
            mean_tokens: 0,
            factors: vec![("detailed".to_owned(), 3.0)],
        };
        let model = Model {
            counter: counter.as_ref(),
            context_window: 12_000,
            max_output_tokens: 1_000,
            calibration: &crate::IDENTITY,
            prices: condense_host::CachePrices::default(),
            cache_lifetime_minutes: 5,
            answering: None,
            summary_length: Some(&length),
        };
        let history = session(120);
        let mut policy = ClaudeCode::new(counter.clone());
        let mut summaries = 0;
        for end in (3..=history.len()).step_by(2) {
            let prepared = policy.prepare(&history[..end], None, &model).unwrap();
            let Some(call) = prepared.summarizer else {
                continue;
            };
            summaries += 1;
            let sent = prepared
                .input
                .iter()
                .find(|message| message.plain_text().contains(FILLER_NOTE))
                .unwrap();
            assert_eq!(call.output_tokens, counter.count_message(sent));
            let text = sent.plain_text();
            // The filler once, at the end: none of it in the words, where the summary quotes
            // the one it folds.
            assert_eq!(text.matches(FILLER_NOTE.trim()).count(), 1, "{text}");
            let summary = text.strip_prefix(SUMMARY_INTRO).unwrap();
            let words = &summary[..summary.find(FILLER_NOTE).unwrap()];
            let target = counter.count_text(words) * 3;
            let got = counter.count_text(summary);
            assert!(
                got <= target && got + 3 >= target,
                "summary {summaries}: {got} tokens for {target}"
            );
        }
        assert!(summaries >= 3, "{summaries} summaries");
    }
}
