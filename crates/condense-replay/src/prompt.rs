//! A request as the prompt cache sees it: a chain of prefixes, each ending at a message boundary.
//!
//! A provider caches a prefix of the prompt: it hits only when every byte before the cached point
//! is the same. Each message's end is one candidate point, named by a hash chained over every
//! message up to it (so two requests share a point exactly when they share the whole prefix),
//! with the tokens and the content blocks up to it (Anthropic's look-back counts blocks).

use condense_core::{Message, Part, Role, ToolOutput};
use condense_tokenizer::TokenCounter;
use serde::Serialize;
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

/// How condense's token counts are turned into the provider's, fitted on the log's own accounting
/// where it has some ([`Calibration::fit`]).
///
/// Claude Code sends a system prompt and tool definitions that its log does not record (about 14K
/// tokens on the shared sessions), and Anthropic's tokenizer counts the same text differently from
/// o200k. Both show in the recorded input totals: `recorded ≈ hidden_prefix + scale × ours`.
///
/// A harness that compacted on its own may also have sent, after its summary, what its log
/// does not hold: Claude Code 1.0 attaches the files it had read again (a log's first request
/// after its summary counts 14K to 89K tokens more than the summary and the system prompt). Those
/// tokens stay in every request until its next summary, so they show as a step in the line
/// after each summary: [`Calibration::after_summaries`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// Tokens every request carries before its first recorded message (system prompt and tools
    /// the log leaves out), in the provider's tokens.
    pub hidden_prefix: u64,
    /// Provider tokens per condense token.
    pub scale: f64,
    /// Requests the fit was made on (0: no recorded usage, the identity).
    pub fitted_on: usize,
    /// The part of the hidden prefix that was already cached when the session began: Claude
    /// Code's base system prompt and tools are the same for every session, so a session started
    /// soon after another reads them (the log's first request reads this many tokens). 0 when
    /// the first request read nothing.
    pub warm_prefix: u64,
    /// How far the log's requests lie from the fitted line: the mean of `|recorded - line|`
    /// over `recorded` (0 with no recorded usage). A log whose messages are what the model read
    /// lies on it within a few hundredths; a log whose text was redacted or cut does not
    /// ([`Calibration::fits_the_log`]).
    pub fit_error: f64,
    /// The provider tokens per condense token the log's usage gave: `scale` as fitted, kept
    /// where [`Calibration::unscaled`] sets `scale` to 1.
    pub fitted_scale: f64,
    /// What the harness sent after each of its own summaries that the log does not hold
    /// ([`Calibration::fit_after_summaries`]); empty where it never compacted on its own.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after_summaries: Vec<AfterSummary>,
}

/// What a harness sent after one of its own summaries beyond what its log holds, for as long
/// as that summary was the latest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AfterSummary {
    /// The summary's [`crate::content_hash`].
    pub summary: u64,
    /// The provider's tokens, every request after it.
    pub tokens: u64,
}

impl Default for Calibration {
    fn default() -> Self {
        IDENTITY.clone()
    }
}

/// No recorded usage to fit: condense's counts as they are, with nothing hidden
/// ([`Calibration::default`]), for a [`crate::Model`] that borrows one for as long as it lives.
pub static IDENTITY: Calibration = Calibration {
    hidden_prefix: 0,
    scale: 1.0,
    fitted_on: 0,
    warm_prefix: 0,
    fit_error: 0.0,
    fitted_scale: 1.0,
    after_summaries: Vec::new(),
};

impl Calibration {
    /// The least-squares line through `(ours, recorded)` pairs of whole requests, its hidden
    /// prefix no more than the provider counted for the request that shows the fewest of the
    /// log's tokens, less those (every request sends it; where the line passes above that
    /// request, the prefix is that bound and the scale the least squares through it). Fewer
    /// than two distinct points, or a fit that makes no sense (a negative slope or intercept),
    /// fall back to the scale 1 and the mean difference as the hidden prefix.
    pub fn fit(points: &[(u64, u64)]) -> Calibration {
        let n = points.len();
        if n == 0 {
            return Calibration::default();
        }
        let count = n as f64;
        let mean_x = points.iter().map(|(x, _)| *x as f64).sum::<f64>() / count;
        let mean_y = points.iter().map(|(_, y)| *y as f64).sum::<f64>() / count;
        let var: f64 = points
            .iter()
            .map(|(x, _)| (*x as f64 - mean_x).powi(2))
            .sum();
        let cov: f64 = points
            .iter()
            .map(|(x, y)| (*x as f64 - mean_x) * (*y as f64 - mean_y))
            .sum();
        let (scale, prefix) = if var > 0.0 {
            let scale = cov / var;
            (scale, mean_y - scale * mean_x)
        } else {
            (0.0, 0.0)
        };
        let (prefix, scale) = if var > 0.0 && scale > 0.0 && prefix >= 0.0 {
            bounded(points, prefix, scale)
        } else {
            ((mean_y - mean_x).max(0.0), 1.0)
        };
        let fit_error = points
            .iter()
            .map(|&(x, y)| {
                let line = prefix + scale * x as f64;
                (y as f64 - line).abs() / (y as f64).max(1.0)
            })
            .sum::<f64>()
            / count;
        Calibration {
            hidden_prefix: prefix.round() as u64,
            scale,
            fitted_on: n,
            warm_prefix: 0,
            fit_error,
            fitted_scale: scale,
            after_summaries: Vec::new(),
        }
    }

    /// [`Calibration::fit`] for a log whose harness compacted on its own: each point also
    /// names the latest summary of the harness's that its request sent (`None` before the
    /// first). The line is fitted on the requests before the first summary, where the log
    /// holds all that was sent; each summary's step ([`AfterSummary`]) is then the mean of
    /// its requests' distances above that line, none below it. A log with fewer than two
    /// distinct requests before its first summary is fitted whole, as before.
    pub fn fit_after_summaries(points: &[(u64, u64, Option<u64>)]) -> Calibration {
        let whole: Vec<(u64, u64)> = points.iter().map(|&(x, y, _)| (x, y)).collect();
        let before: Vec<(u64, u64)> = points
            .iter()
            .filter(|(_, _, summary)| summary.is_none())
            .map(|&(x, y, _)| (x, y))
            .collect();
        let distinct = before.windows(2).any(|pair| pair[0].0 != pair[1].0);
        if before.len() == points.len() || !distinct {
            return Calibration::fit(&whole);
        }
        let mut calibration = Calibration::fit(&before);
        let (prefix, scale) = (calibration.hidden_prefix as f64, calibration.scale);
        let line = |x: u64| prefix + scale * x as f64;
        let mut steps: Vec<(u64, f64, usize)> = Vec::new();
        for &(x, y, summary) in points {
            let Some(summary) = summary else { continue };
            let above = y as f64 - line(x);
            match steps.iter_mut().find(|(seen, _, _)| *seen == summary) {
                Some((_, sum, count)) => {
                    *sum += above;
                    *count += 1;
                }
                None => steps.push((summary, above, 1)),
            }
        }
        calibration.after_summaries = steps
            .into_iter()
            .map(|(summary, sum, count)| AfterSummary {
                summary,
                tokens: (sum / count as f64).max(0.0).round() as u64,
            })
            .filter(|after| after.tokens > 0)
            .collect();
        calibration.fit_error = points
            .iter()
            .map(|&(x, y, summary)| {
                let step = summary.map_or(0, |summary| calibration.after_summary(summary));
                let expected = line(x) + step as f64;
                (y as f64 - expected).abs() / (y as f64).max(1.0)
            })
            .sum::<f64>()
            / points.len() as f64;
        calibration.fitted_on = points.len();
        calibration
    }

    /// The tokens the harness sent after the summary whose [`crate::content_hash`] is `summary`
    /// beyond what the log holds (0 for any other message).
    pub fn after_summary(&self, summary: u64) -> u64 {
        self.after_summaries
            .iter()
            .find(|after| after.summary == summary)
            .map_or(0, |after| after.tokens)
    }

    /// Whether the log's own usage bears out its messages: the requests on the fitted line
    /// within [`FIT_TOLERANCE`], at a scale one real tokenizer can have against another
    /// ([`SCALES`]). Where it does not, the log is not what the model read (its text redacted,
    /// its outputs cut, messages missing), and what a replay of it says a policy would cost
    /// prices another session than the one recorded. True where the log records no usage.
    pub fn fits_the_log(&self) -> bool {
        self.fitted_on == 0
            || self.fit_error <= FIT_TOLERANCE && SCALES.contains(&self.fitted_scale)
    }

    /// `tokens` of condense's count in the provider's.
    pub fn scaled(&self, tokens: usize) -> u64 {
        (tokens as f64 * self.scale).round() as u64
    }

    /// The same calibration for a provider whose tokenizer is condense's (OpenAI's o200k): the
    /// hidden prefix in condense tokens, no scaling.
    pub fn unscaled(&self) -> Calibration {
        let unscale = |tokens: u64| {
            if self.scale > 0.0 {
                (tokens as f64 / self.scale).round() as u64
            } else {
                tokens
            }
        };
        Calibration {
            hidden_prefix: unscale(self.hidden_prefix),
            scale: 1.0,
            warm_prefix: unscale(self.warm_prefix),
            after_summaries: self
                .after_summaries
                .iter()
                .map(|after| AfterSummary {
                    tokens: unscale(after.tokens),
                    ..*after
                })
                .collect(),
            ..self.clone()
        }
    }
}

/// The line's hidden prefix held to what the log shows it can be: every request sends it, so it
/// is at most what the provider counted for the request that showed fewest of the log's tokens
/// (a session's first: the system prompt, the tools and the person's first message), less that
/// request's own messages. Where the line passes above that request (Claude Code 2 logs a
/// reply's thinking summarized, while the provider counts it whole on every later request, so
/// the later requests lie above any line the first ones lie on, and the least squares, weighed
/// by the large requests, lift the prefix past the first request's whole input), the prefix is
/// that bound and the scale the least squares through it. A line at or below that request is
/// kept as it is.
fn bounded(points: &[(u64, u64)], prefix: f64, scale: f64) -> (f64, f64) {
    let Some(&(least_x, least_y)) = points.iter().min_by_key(|(x, y)| (*x, *y)) else {
        return (prefix, scale);
    };
    let (least_x, least_y) = (least_x as f64, least_y as f64);
    if prefix + scale * least_x <= least_y {
        return (prefix, scale);
    }
    let squares: f64 = points.iter().map(|&(x, _)| (x as f64).powi(2)).sum();
    if squares <= 0.0 {
        return (prefix, scale);
    }
    let mut scale = scale;
    // The bound moves with the scale by the least request's own tokens, a few dozen: three
    // rounds settle it.
    for _ in 0..3 {
        let prefix = (least_y - scale * least_x).max(0.0);
        let through: f64 = points
            .iter()
            .map(|&(x, y)| x as f64 * (y as f64 - prefix))
            .sum();
        if through <= 0.0 {
            break;
        }
        scale = through / squares;
    }
    ((least_y - scale * least_x).max(0.0), scale)
}

/// The most [`Calibration::fit_error`] taken for a log whose messages are what the model read:
/// the Claude Code logs here (the shared ones and two of Claude Code 2.1) lie within 0.4-7 % of
/// their lines, where a log with its text redacted lies 5-16 % off, or (a fixture with made-up
/// figures) hundreds. The scale ([`SCALES`]) is what tells most of them apart; this catches
/// the usage that no line explains.
pub const FIT_TOLERANCE: f64 = 0.25;
/// The provider tokens per condense token one real tokenizer can count against another (o200k
/// against Claude's: 1.14-1.53 on the Claude Code logs here, up to 1.71 on Claude Code 2.1
/// logs whose thinking the provider counts whole and the log holds summarized). Codex logs with
/// their text redacted fit at 4.8-23.9.
pub const SCALES: std::ops::RangeInclusive<f64> = 0.5..=2.5;

/// One candidate cache point: the end of a message (or of the hidden prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// Names the whole prefix up to here.
    pub chain: u64,
    /// Tokens from the start of the prompt to here.
    pub tokens: u64,
    /// Content blocks from the start of the prompt to here.
    pub blocks: u64,
}

/// A request's prompt as the cache sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompt {
    /// One point per message end, in order.
    pub points: Vec<Point>,
    /// The points a harness marks for caching (Claude Code: the end of the system prompt and the
    /// last message). Indexes into `points`, ascending.
    pub breakpoints: Vec<usize>,
}

impl Prompt {
    /// The prompt of a request whose messages are `messages`, after the hidden prefix, sent to
    /// the model named by `model` (a hash of its name: each model has a cache of its own).
    pub fn of(
        messages: &[Message],
        counter: &dyn TokenCounter,
        calibration: &Calibration,
        model: u64,
    ) -> Self {
        let counts = counter.count_each(messages);
        let mut chain = Chain::new(model, messages.len() + 2);
        let warm = calibration.warm_prefix.min(calibration.hidden_prefix);
        if warm > 0 {
            chain.push(
                xxh3_64(b"condense-replay: the harness's shared system prompt"),
                warm,
                1,
            );
        }
        if calibration.hidden_prefix > warm {
            chain.push(
                xxh3_64(b"condense-replay: the session's system prompt"),
                calibration.hidden_prefix - warm,
                1,
            );
        }
        let hidden_points = chain.points.len();
        for (message, count) in messages.iter().zip(counts) {
            let hash = content_hash(message);
            chain.push(
                hash,
                calibration.scaled(count),
                message.parts.len().max(1) as u64,
            );
            // What the harness attached after its own summary: a block of its own, the same
            // on every request that sends the summary.
            let after = calibration.after_summary(hash);
            if after > 0 {
                chain.push(
                    xxh3_64(b"condense-replay: what the harness sent after its summary"),
                    after,
                    1,
                );
            }
        }
        let points = chain.points;
        // The system part: the hidden prefix and the leading System messages the request sends
        // as its system prompt. A summary condense wrote goes out after it, as the first user
        // message (`condense-formats`' Anthropic writer): the harness's mark at the end of its
        // system prompt stays where it was, and the prompt stays cached across compactions.
        let leading_system = messages
            .iter()
            .take_while(|message| {
                message.role == Role::System && !message.is_summary_written_here()
            })
            .count();
        let system_end = hidden_points + leading_system;
        let mut breakpoints = Vec::with_capacity(3);
        if system_end > 0 {
            breakpoints.push(system_end - 1);
        }
        // An autonomous run's task kept in front of condense's summary: the Anthropic writer
        // marks its end as well (`condense-formats`' `mark_the_task`).
        if condense_core::task_leads_a_summary_written_here(&messages[leading_system..]) {
            breakpoints.push(system_end);
        }
        if let Some(last) = points.len().checked_sub(1)
            && breakpoints.last() != Some(&last)
        {
            breakpoints.push(last);
        }
        Prompt {
            points,
            breakpoints,
        }
    }

    /// All the prompt's tokens.
    pub fn tokens(&self) -> u64 {
        self.points.last().map_or(0, |point| point.tokens)
    }
}

/// The points of a prompt as they are made: each names the whole prefix up to it by a hash
/// chained over every part before it.
struct Chain {
    points: Vec<Point>,
    chain: u64,
    tokens: u64,
    blocks: u64,
}

impl Chain {
    /// A prompt to the model whose name hashes to `model` (each model has a cache of its own).
    fn new(model: u64, capacity: usize) -> Chain {
        Chain {
            points: Vec::with_capacity(capacity),
            chain: model,
            tokens: 0,
            blocks: 0,
        }
    }

    /// A part whose content hashes to `next`, `tokens` and `blocks` long, and the point at its end.
    fn push(&mut self, next: u64, tokens: u64, blocks: u64) {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.chain.to_le_bytes());
        bytes[8..].copy_from_slice(&next.to_le_bytes());
        self.chain = xxh3_64(&bytes);
        self.tokens += tokens;
        self.blocks += blocks;
        self.points.push(Point {
            chain: self.chain,
            tokens: self.tokens,
            blocks: self.blocks,
        });
    }
}

/// A hash of what the provider sees of `message`: its role and its parts, not the log's own
/// fields around them (times, ids), which never reach the model. Texts are hashed as bytes, so
/// this runs at memory speed on every message of every request.
pub fn content_hash(message: &Message) -> u64 {
    let mut hasher = Xxh3::new();
    hasher.update(message.role.as_str().as_bytes());
    for part in &message.parts {
        hash_part(&mut hasher, part);
    }
    hasher.digest()
}

fn hash_part(hasher: &mut Xxh3, part: &Part) {
    // Each field is followed by its length, so that no two different parts feed the same bytes.
    let mut field = |bytes: &[u8]| {
        hasher.update(bytes);
        hasher.update(&(bytes.len() as u64).to_le_bytes());
    };
    match part {
        Part::Text(text) => {
            field(b"text");
            field(text.text.as_bytes());
        }
        Part::Thinking(thinking) => {
            field(b"thinking");
            field(thinking.text.as_bytes());
        }
        Part::ToolCall(call) => {
            field(b"call");
            field(call.id.as_bytes());
            field(call.name.as_bytes());
            field(call.input.to_string().as_bytes());
        }
        Part::ToolResult(result) => {
            field(b"result");
            field(result.call_id.as_bytes());
            match &result.content {
                ToolOutput::Text(text) => field(text.as_bytes()),
                ToolOutput::Parts(parts) => {
                    for inner in parts {
                        hash_part(hasher, inner);
                    }
                }
            }
        }
        Part::Image(image) => {
            field(b"image");
            field(image.source.to_string().as_bytes());
        }
        Part::Opaque { value } => {
            field(b"opaque");
            field(value.to_string().as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use condense_tokenizer::Tiktoken;

    /// Requests on a line of a tokenizer's scale fit it; the same usage over messages a
    /// fourteenth of their size (the text redacted) or scattered about no line does not. The
    /// fit is kept where a provider that counts as condense does drops the scale.
    #[test]
    fn a_log_fits_its_line_only_where_its_messages_are_what_the_model_read() {
        let line: Vec<(u64, u64)> = [1_000u64, 4_000, 9_000, 20_000]
            .iter()
            .map(|&ours| (ours, 14_000 + ours * 13 / 10))
            .collect();
        let fitted = Calibration::fit(&line);
        assert!(fitted.fit_error < 0.001, "{fitted:?}");
        assert!((fitted.fitted_scale - 1.3).abs() < 0.001, "{fitted:?}");
        assert!(fitted.fits_the_log());
        let unscaled = fitted.unscaled();
        assert_eq!(unscaled.scale, 1.0);
        assert_eq!(
            (unscaled.fitted_scale, unscaled.fit_error),
            (fitted.fitted_scale, fitted.fit_error)
        );
        assert!(unscaled.fits_the_log());

        let redacted: Vec<(u64, u64)> =
            line.iter().map(|&(ours, sent)| (ours / 14, sent)).collect();
        let fitted = Calibration::fit(&redacted);
        assert!(fitted.fitted_scale > 10.0, "{fitted:?}");
        assert!(!fitted.fits_the_log() && !fitted.unscaled().fits_the_log());

        // No line through them (the fit falls back to a prefix alone): far off it.
        let scattered = [
            (1_000, 90_000),
            (2_000, 10_000),
            (3_000, 60_000),
            (4_000, 5_000),
        ];
        let fitted = Calibration::fit(&scattered);
        assert!(fitted.fit_error > FIT_TOLERANCE, "{fitted:?}");
        assert!(!fitted.fits_the_log());

        // No usage: nothing to judge.
        assert!(Calibration::fit(&[]).fits_the_log());
    }

    /// Every request sends the hidden prefix, so it is never more than the request that shows
    /// the fewest of the log's tokens held, less those. Claude Code 2's later requests lie
    /// above the line its first ones lie on (a reply's thinking, logged summarized, is counted
    /// whole on every request after it), and the least squares through them all, weighed by
    /// the large ones, put the prefix past the first request's whole input: the shape of the
    /// unseen 2.1 logs, whose first request is 25.9K tokens and whose line put the prefix at
    /// 32K-37K. A line at or below the first request keeps its least squares.
    #[test]
    fn the_hidden_prefix_is_never_more_than_the_first_request_shows() {
        // 26,000 hidden, 1.25 a token, and 20,000 more counted from the fourth request on.
        let points: Vec<(u64, u64)> = [40u64, 1_000, 3_000, 20_000, 30_000, 50_000, 80_000]
            .iter()
            .enumerate()
            .map(|(at, &ours)| {
                let thinking = if at >= 3 { 20_000 } else { 0 };
                (ours, 26_000 + ours * 5 / 4 + thinking)
            })
            .collect();
        let fitted = Calibration::fit(&points);
        let (least, least_sent) = points[0];
        assert!(
            fitted.hidden_prefix as f64 + fitted.scale * least as f64 <= least_sent as f64 + 1.0,
            "{fitted:?}"
        );
        assert!(fitted.hidden_prefix > 25_000, "{fitted:?}");
        // Through the bound, the least squares for the scale: every request is on or above the
        // line's start, and the line still follows the large ones.
        assert!(fitted.fit_error < 0.1, "{fitted:?}");
        assert!(fitted.fits_the_log(), "{fitted:?}");

        // Requests on a line with the first request above it: the least squares, as they were.
        let below: Vec<(u64, u64)> = [(40u64, 15_000u64), (1_000, 15_300), (9_000, 25_300)]
            .into_iter()
            .collect();
        let fitted = Calibration::fit(&below);
        assert_eq!(fitted.hidden_prefix, 14_556, "{fitted:?}");
        assert!(fitted.hidden_prefix as f64 + fitted.scale * 40.0 < 15_000.0);
    }

    /// Claude Code 1.0 sends, after its own summary, the files it had read again, which its log
    /// does not hold: every request after the summary lies a step above the line the requests
    /// before it lie on, the same step until the next summary (the unseen f67ab274: 86K
    /// tokens after its first summary, 27K after its second). One line through them all is
    /// far off both and steeper than any tokenizer; the line through the requests before the
    /// first summary, with a step for each summary, is on every request.
    #[test]
    fn each_harness_summary_is_a_step_above_the_line() {
        let sent = |ours: u64, step: u64| 14_000 + ours * 7 / 5 + step;
        let mut points: Vec<(u64, u64, Option<u64>)> = [1_000u64, 20_000, 50_000, 90_000]
            .iter()
            .map(|&ours| (ours, sent(ours, 0), None))
            .collect();
        points.extend([3_000u64, 9_000, 20_000].map(|ours| (ours, sent(ours, 86_000), Some(11))));
        points.extend([4_000u64, 12_000].map(|ours| (ours, sent(ours, 27_000), Some(22))));

        let whole: Vec<(u64, u64)> = points.iter().map(|&(x, y, _)| (x, y)).collect();
        assert!(!Calibration::fit(&whole).fits_the_log());

        let fitted = Calibration::fit_after_summaries(&points);
        assert!(fitted.fits_the_log(), "{fitted:?}");
        assert!(fitted.fit_error < 0.001, "{fitted:?}");
        assert_eq!(fitted.fitted_on, points.len());
        assert!((fitted.scale - 1.4).abs() < 0.001, "{fitted:?}");
        let steps: Vec<(u64, u64)> = fitted
            .after_summaries
            .iter()
            .map(|after| (after.summary, after.tokens))
            .collect();
        assert_eq!(steps, [(11, 86_000), (22, 27_000)]);
        assert_eq!(fitted.after_summary(33), 0);
        // A provider that counts as condense does: the steps in condense's tokens.
        let unscaled = fitted.unscaled();
        assert_eq!(unscaled.after_summary(11), 61_429);

        // A step below the line is none: the harness sends what its log holds, at least.
        let below = [
            (1_000, sent(1_000, 0), None),
            (9_000, sent(9_000, 0), None),
            (5_000, sent(5_000, 0) - 3_000, Some(11)),
        ];
        assert!(
            Calibration::fit_after_summaries(&below)
                .after_summaries
                .is_empty()
        );
        // Nothing before the first summary to fit a line on: the line through them all.
        let after_only = [(1_000, 30_000, Some(11)), (9_000, 41_000, Some(11))];
        assert_eq!(
            Calibration::fit_after_summaries(&after_only),
            Calibration::fit(&[(1_000, 30_000), (9_000, 41_000)])
        );
    }

    /// What the harness sent after its summary is a block of the prompt right after the
    /// summary: the request's tokens count it, and the next request, which sends the same
    /// summary, finds the prefix through it the same (cached).
    #[test]
    fn what_the_harness_sent_after_its_summary_follows_the_summary() {
        let counter = Tiktoken::default();
        let summary =
            crate::recording::claude_code_summary_line("This session is being continued.");
        let calibration = Calibration {
            hidden_prefix: 5_000,
            fitted_on: 10,
            after_summaries: vec![AfterSummary {
                summary: content_hash(&summary),
                tokens: 20_000,
            }],
            ..Calibration::default()
        };
        let ask = Message::text(Role::User, "go on");
        let answer = Message::text(Role::Assistant, "going");
        let plain = Prompt::of(
            &[summary.clone(), ask.clone()],
            &counter,
            &Calibration {
                after_summaries: Vec::new(),
                ..calibration.clone()
            },
            1,
        );
        let first = Prompt::of(&[summary.clone(), ask.clone()], &counter, &calibration, 1);
        assert_eq!(first.tokens(), plain.tokens() + 20_000);
        assert_eq!(first.points.len(), plain.points.len() + 1);
        assert_eq!(first.points[2].tokens, first.points[1].tokens + 20_000);
        let next = Prompt::of(&[summary, ask, answer], &counter, &calibration, 1);
        assert_eq!(next.points[..3], first.points[..3]);
        // Any other message has nothing after it.
        let other = Prompt::of(
            &[Message::text(Role::User, "hello")],
            &counter,
            &calibration,
            1,
        );
        assert_eq!(other.points.len(), 2);
    }

    /// The harness marks the end of its system prompt and the last message. A summary condense
    /// wrote is sent after the system prompt, as a user message, so the first mark stays at
    /// the system prompt's end, where every request after a compaction finds it cached; a
    /// System message the session itself sent is part of the system prompt.
    #[test]
    fn the_system_mark_stays_before_condenses_summary() {
        let counter = Tiktoken::default();
        let calibration = Calibration {
            hidden_prefix: 5_000,
            fitted_on: 10,
            ..Calibration::default()
        };
        let system = Message::text(Role::System, "You are a careful agent.");
        let summary = Message::text(
            Role::System,
            format!(
                "{}\n## Goal\nfix it\n{}",
                condense_core::SUMMARY_OPEN,
                condense_core::SUMMARY_CLOSE
            ),
        );
        let ask = Message::text(Role::User, "go on");

        let plain = Prompt::of(&[system.clone(), ask.clone()], &counter, &calibration, 1);
        assert_eq!(plain.breakpoints, vec![1, 2]);

        let summarized = Prompt::of(
            &[system.clone(), summary.clone(), ask.clone()],
            &counter,
            &calibration,
            1,
        );
        assert_eq!(summarized.breakpoints, vec![1, 3]);
        assert_eq!(summarized.points[1], plain.points[1]);

        // An autonomous run's task kept in front of the summary: marked as the Anthropic writer
        // marks it, the prefix through it shared with the run's first request.
        let task = Message::text(Role::User, "fix the parser");
        let first = Prompt::of(&[system.clone(), task.clone()], &counter, &calibration, 1);
        let led = Prompt::of(&[system, task, summary, ask], &counter, &calibration, 1);
        assert_eq!(led.breakpoints, vec![1, 2, 4]);
        assert_eq!(led.points[2], first.points[2]);

        let two_system = Prompt::of(
            &[
                Message::text(Role::System, "one"),
                Message::text(Role::System, "two"),
                Message::text(Role::User, "go"),
            ],
            &counter,
            &calibration,
            1,
        );
        assert_eq!(two_system.breakpoints, vec![2, 3]);
    }
}
