//! Phase 1's settings, as the configuration writes them.

use std::collections::BTreeSet;

use condense_defaults::DefaultsError;
use serde::{Deserialize, Deserializer};

use crate::Note;

/// Phase 1's settings: the `[prune]`, `[trim]` and `[microcompact]` sections of the
/// configuration, each read as it is written there. Their defaults are written once, with their
/// reasons, in `config/condense.toml`: [`PruneSettings::built_in`] reads them, and the host reads
/// the same structs out of the merged layers.
#[derive(Debug, Clone, PartialEq)]
pub struct PruneSettings {
    /// `[prune]`.
    pub rules: PruneRules,
    /// `[trim]`.
    pub trim: TrimRules,
    /// `[microcompact]`: what is cleared once the provider's cache has expired.
    pub microcompact: crate::MicrocompactSettings,
}

impl PruneSettings {
    /// The built-in defaults (`config/condense.toml`).
    pub fn built_in() -> Result<PruneSettings, DefaultsError> {
        Ok(PruneSettings {
            rules: condense_defaults::section("prune")?,
            trim: condense_defaults::section("trim")?,
            microcompact: condense_defaults::section("microcompact")?,
        })
    }
}

/// `[prune]`: which outputs phase 1 replaces, and with what.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PruneRules {
    /// Tools whose outputs are never touched (opencode's `PRUNE_PROTECTED_TOOLS`: `skill`).
    /// Every configuration layer and every plugin adds to it; none removes one.
    pub protected_tools: BTreeSet<String>,
    /// Nothing at or after this many user turns from the end is touched (opencode: 2), except
    /// an output larger than the whole context window, which becomes a preview, and one
    /// identical to a fresh result, which points to it ([`PruneRules::duplicates_of_fresh`]).
    pub skip_user_turns: usize,
    /// When what follows the user-turn boundary is more than half the context window (an
    /// autonomous run: one task, hundreds of steps), the boundary is the call this many tool
    /// calls from the end instead. See [`crate::boundary_for`].
    pub skip_tool_calls: usize,
    /// The newest outputs up to this many tokens stay (opencode/Kilo `PRUNE_PROTECT`).
    /// `0` prunes every unprotected output before the boundary (the seed's T9).
    pub protect_tokens: usize,
    /// Prune only if more than this many tokens are freed: each prune rewrites the prompt cache
    /// from the first changed output on (opencode `PRUNE_MINIMUM`).
    pub minimum_tokens: usize,
    /// Scale `protect_tokens` and `minimum_tokens` with the model's context window (hermes-agent
    /// #513). See [`Thresholds::for_window`].
    pub adaptive_thresholds: bool,
    /// When the fresh results of one turn exceed this many characters, the largest are replaced
    /// by previews (Claude Code's `MAX_TOOL_RESULTS_PER_MESSAGE_CHARS`).
    pub turn_budget_chars: usize,
    /// Bytes of an output kept in its preview.
    pub preview_bytes: usize,
    /// Outputs shorter than this are never replaced as duplicates: the pointer would not be much
    /// shorter than the output.
    pub duplicate_min_chars: usize,
    /// An output identical to one of the request's fresh results becomes a pointer to it,
    /// inside the skip boundary too, where that pays on the request itself
    /// ([`crate::PruneRequest::cache_rewrite_cost`]): the request still shows every byte of it once.
    pub duplicates_of_fresh: bool,
    /// A read whose path a later call edits, writes or reads again is stale (Claude Code's
    /// supersede stage): it becomes a candidate of the walk before the protect window is
    /// counted, outside the skip boundary only.
    pub supersede_reads: bool,
    /// When a harness's requests are walked (the host asks; the pruner prunes when called).
    pub walk_when: WalkWhen,
    /// What stands in for a pruned output.
    #[serde(deserialize_with = "plain_note")]
    pub placeholder: Note,
    /// Appended to a preview.
    #[serde(deserialize_with = "preview_note")]
    pub preview_note: Note,
    /// Appended to a tool call's input cut to a preview so that a request fits the window
    /// ([`crate::Pruner::preview_inputs`]).
    #[serde(deserialize_with = "input_note")]
    pub input_note: Note,
    /// Stands in for an image of the person's left out so that a request fits the window
    /// ([`crate::Pruner::preview_person_to_fit`]).
    #[serde(deserialize_with = "plain_note")]
    pub image_note: Note,
    /// Appended to a text of the person's cut to a preview so that a request fits the window
    /// ([`crate::Pruner::preview_person_to_fit`]).
    #[serde(deserialize_with = "preview_note")]
    pub message_note: Note,
    /// Stands in for an output identical to a newer one.
    #[serde(deserialize_with = "duplicate_note")]
    pub duplicate_note: Note,
    /// Stands in for a superseded read.
    #[serde(deserialize_with = "superseded_note")]
    pub superseded_note: Note,
}

/// `[trim]`: what the agent may trim with `trim_tool_result`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrimRules {
    /// Whether a result older than the most recent one may be trimmed (off: that rewrites the
    /// cached prefix from the trimmed result on).
    pub allow_older: bool,
}

/// When the walk may replace outputs in a harness's requests (`prune.walk_when`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum WalkWhen {
    /// Only when the request is due for compaction.
    #[default]
    Due,
    /// On every request.
    Always,
}

impl WalkWhen {
    /// Every value, in the order the documentation lists them.
    pub const ALL: [WalkWhen; 2] = [WalkWhen::Due, WalkWhen::Always];

    /// The name configuration uses.
    pub fn name(self) -> &'static str {
        match self {
            WalkWhen::Due => "due",
            WalkWhen::Always => "always",
        }
    }
}

/// A note read from configuration, checked against the variables it may use.
pub(crate) fn note_with<'de, D: Deserializer<'de>>(
    deserializer: D,
    extra: &[&str],
) -> Result<Note, D::Error> {
    let text = String::deserialize(deserializer)?;
    Note::new(text, extra).map_err(serde::de::Error::custom)
}

pub(crate) fn plain_note<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Note, D::Error> {
    note_with(deserializer, &[])
}

fn preview_note<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Note, D::Error> {
    note_with(deserializer, PREVIEW_VARIABLES)
}

fn input_note<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Note, D::Error> {
    note_with(deserializer, INPUT_VARIABLES)
}

fn duplicate_note<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Note, D::Error> {
    note_with(deserializer, DUPLICATE_VARIABLES)
}

fn superseded_note<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Note, D::Error> {
    note_with(deserializer, SUPERSEDED_VARIABLES)
}

/// Variables a preview note may use beyond [`Note::COMMON`].
pub const PREVIEW_VARIABLES: &[&str] = &["shown"];
/// Variables an input's note may use beyond [`Note::COMMON`]: those of a preview, and `files`,
/// the files the whole input names that its preview no longer shows (`; past the cut it names
/// a.rs, b.rs`, or nothing): a shell command's `git add` list cut short would otherwise take
/// them from every summary made of it after.
pub const INPUT_VARIABLES: &[&str] = &["shown", "files"];
/// Variables a duplicate note may use beyond [`Note::COMMON`].
pub const DUPLICATE_VARIABLES: &[&str] = &["newer"];
/// Variables a superseded note may use beyond [`Note::COMMON`]: the later call's tool and its
/// message.
pub const SUPERSEDED_VARIABLES: &[&str] = &["by", "at"];

/// The protect window and minimum reclaim in force for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Thresholds {
    /// The protect window.
    pub protect_tokens: usize,
    /// The minimum reclaim.
    pub minimum_tokens: usize,
}

/// hermes-agent's protect window by context window; linear between the points.
const ADAPTIVE_CURVE: [(f64, f64); 3] = [
    (32_000.0, 10_000.0),
    (128_000.0, 40_000.0),
    (1_000_000.0, 100_000.0),
];
/// The window at which the configured values apply unchanged.
const ANCHOR_PROTECT: f64 = 40_000.0;

impl Thresholds {
    /// The thresholds for a model with `context_window` tokens. With adaptive thresholds off (the
    /// default) these are the configured values. With them on, both scale by the factor that takes
    /// 40,000 to hermes-agent's protect window for that size (32K → 10K, 128K → 40K,
    /// 1M → 100K, linear between, proportional below 32K, flat above 1M): the configured values
    /// are what a 128K model gets, and the defaults reproduce the curve exactly.
    pub fn for_window(settings: &PruneSettings, context_window: Option<usize>) -> Thresholds {
        let configured = Thresholds {
            protect_tokens: settings.rules.protect_tokens,
            minimum_tokens: settings.rules.minimum_tokens,
        };
        let Some(window) = context_window.filter(|_| settings.rules.adaptive_thresholds) else {
            return configured;
        };
        let factor = curve(window as f64) / ANCHOR_PROTECT;
        Thresholds {
            protect_tokens: (settings.rules.protect_tokens as f64 * factor).round() as usize,
            minimum_tokens: (settings.rules.minimum_tokens as f64 * factor).round() as usize,
        }
    }
}

fn curve(window: f64) -> f64 {
    let [first, .., last] = ADAPTIVE_CURVE;
    if window <= first.0 {
        return first.1 * window / first.0;
    }
    if window >= last.0 {
        return last.1;
    }
    for pair in ADAPTIVE_CURVE.windows(2) {
        let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
        if window <= x1 {
            return y0 + (y1 - y0) * (window - x0) / (x1 - x0);
        }
    }
    last.1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_settings_load_and_their_notes_are_valid() {
        let settings = PruneSettings::built_in().unwrap();
        assert!(settings.rules.placeholder.text().contains("{handle}"));
        assert!(settings.microcompact.keep_recent >= 1);
    }

    #[test]
    fn adaptive_thresholds_follow_the_curve() {
        let mut settings = PruneSettings::built_in().unwrap();
        settings.rules.adaptive_thresholds = true;
        let at = |window| Thresholds::for_window(&settings, Some(window));
        assert_eq!(
            at(32_000),
            Thresholds {
                protect_tokens: 10_000,
                minimum_tokens: 5_000
            }
        );
        assert_eq!(
            at(128_000),
            Thresholds {
                protect_tokens: 40_000,
                minimum_tokens: 20_000
            }
        );
        assert_eq!(
            at(1_000_000),
            Thresholds {
                protect_tokens: 100_000,
                minimum_tokens: 50_000
            }
        );
        assert_eq!(at(2_000_000).protect_tokens, 100_000);
        assert_eq!(at(16_000).protect_tokens, 5_000);
        assert_eq!(at(80_000).protect_tokens, 25_000);
        // 200K: 40K + 60K * 72/872.
        assert_eq!(at(200_000).protect_tokens, 44_954);
    }

    #[test]
    fn without_adaptive_thresholds_the_window_does_not_matter() {
        let settings = PruneSettings::built_in().unwrap();
        for window in [None, Some(8_000), Some(1_000_000)] {
            assert_eq!(
                Thresholds::for_window(&settings, window),
                Thresholds {
                    protect_tokens: 40_000,
                    minimum_tokens: 20_000
                }
            );
        }
    }
}
