//! Phase 1's rules and their defaults. Each default says where it comes from; each is a
//! configuration key once the host maps TOML onto these fields.

use std::collections::BTreeSet;

use crate::Note;

/// The placeholder for a pruned output. It names the tool, the size and the handle, so the agent
/// knows what it no longer sees and how to get it back.
pub const DEFAULT_PLACEHOLDER: &str = "[condense: the output of {tool} was pruned ({tokens} tokens). Original: condense recall {handle}]";
/// Appended to the preview of an output cut by the per-turn budget.
pub const DEFAULT_PREVIEW_NOTE: &str = "\n[condense: output of {tool} cut to its first {shown} of {chars} characters ({tokens} tokens in all). Full output: condense recall {handle}]";
/// Stands in for a read that a later call on the same path made stale.
pub const DEFAULT_SUPERSEDED_NOTE: &str = "[condense: this {tool} output is stale: superseded by {by} at message {at} ({tokens} tokens). Original: condense recall {handle}]";
/// Stands in for an output that a newer identical one makes redundant.
pub const DEFAULT_DUPLICATE_NOTE: &str = "[condense: same output as the later {tool} call {newer} ({tokens} tokens). Original: condense recall {handle}]";

#[derive(Debug, Clone)]
/// Phase 1's rules; each default is the one `config/condense.toml` gives, and `config/condense.toml` (a host test proves
/// the two equal).
pub struct PruneSettings {
    /// Tools whose outputs are never touched (opencode's `PRUNE_PROTECTED_TOOLS`: `skill`).
    /// Configuration and plugins add to it.
    pub protected_tools: BTreeSet<String>,
    /// Nothing at or after this many user turns from the end is touched (opencode: 2), except
    /// an output larger than the whole context window, which becomes a preview.
    pub skip_user_turns: usize,
    /// When what follows the user-turn boundary is more than half the context window (an
    /// autonomous run: one task, hundreds of steps), the boundary is the call this many tool
    /// calls from the end instead (condense: 10). See [`crate::boundary_for`].
    pub skip_tool_calls: usize,
    /// The newest outputs up to this many tokens stay (opencode/Kilo `PRUNE_PROTECT`: 40,000).
    /// `0` prunes every unprotected output before the boundary (the seed's T9).
    pub protect_tokens: usize,
    /// Prune only if more than this many tokens are freed: each prune rewrites the prompt cache
    /// from the first changed output on (opencode `PRUNE_MINIMUM`: 20,000).
    pub minimum_tokens: usize,
    /// Scale `protect_tokens` and `minimum_tokens` with the model's context window (hermes-agent
    /// #513); off by default. See [`Thresholds::for_window`].
    pub adaptive_thresholds: bool,
    /// When the fresh results of one turn exceed this many characters, the largest are replaced
    /// by previews (Claude Code's `MAX_TOOL_RESULTS_PER_MESSAGE_CHARS`: 200,000).
    pub turn_budget_chars: usize,
    /// Bytes of an output kept in its preview (Claude Code: 2 KB).
    pub preview_bytes: usize,
    /// Outputs shorter than this are never replaced as duplicates: the pointer would not be much
    /// shorter than the output.
    pub duplicate_min_chars: usize,
    /// A read whose path a later call edits, writes or reads again is stale (Claude Code's
    /// supersede stage): it becomes a candidate of the walk before the protect window is
    /// counted, outside the skip boundary only.
    pub supersede_reads: bool,
    /// Whether `trim_tool_result` may trim a result older than the most recent one (off: that
    /// rewrites the cached prefix from the trimmed result on).
    pub trim_allow_older: bool,
    /// What stands in for a pruned output.
    pub placeholder: Note,
    /// Appended to a preview.
    pub preview_note: Note,
    /// Stands in for an output identical to a newer one.
    pub duplicate_note: Note,
    /// Stands in for a superseded read.
    pub superseded_note: Note,
    /// Time-based microcompact: what it clears once the provider's cache has expired.
    pub microcompact: crate::MicrocompactSettings,
}

impl Default for PruneSettings {
    fn default() -> Self {
        PruneSettings {
            protected_tools: BTreeSet::from(["skill".to_owned()]),
            skip_user_turns: 2,
            skip_tool_calls: 10,
            protect_tokens: 40_000,
            minimum_tokens: 20_000,
            adaptive_thresholds: false,
            turn_budget_chars: 200_000,
            preview_bytes: 2_048,
            duplicate_min_chars: 200,
            supersede_reads: true,
            trim_allow_older: false,
            placeholder: default_note(DEFAULT_PLACEHOLDER, &[]),
            preview_note: default_note(DEFAULT_PREVIEW_NOTE, PREVIEW_VARIABLES),
            duplicate_note: default_note(DEFAULT_DUPLICATE_NOTE, DUPLICATE_VARIABLES),
            superseded_note: default_note(DEFAULT_SUPERSEDED_NOTE, SUPERSEDED_VARIABLES),
            microcompact: crate::MicrocompactSettings::default(),
        }
    }
}

/// Variables a preview note may use beyond [`Note::COMMON`].
pub const PREVIEW_VARIABLES: &[&str] = &["shown"];
/// Variables a duplicate note may use beyond [`Note::COMMON`].
pub const DUPLICATE_VARIABLES: &[&str] = &["newer"];
/// Variables a superseded note may use beyond [`Note::COMMON`]: the later call's tool and its
/// message.
pub const SUPERSEDED_VARIABLES: &[&str] = &["by", "at"];

pub(crate) fn default_note(text: &str, extra: &[&str]) -> Note {
    // The built-in texts use only known variables (a unit test checks), so this cannot fail;
    // falling back to the bare text keeps library code free of panics all the same.
    Note::new(text, extra).unwrap_or_else(|_| Note::verbatim(text))
}

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
            protect_tokens: settings.protect_tokens,
            minimum_tokens: settings.minimum_tokens,
        };
        let Some(window) = context_window.filter(|_| settings.adaptive_thresholds) else {
            return configured;
        };
        let factor = curve(window as f64) / ANCHOR_PROTECT;
        Thresholds {
            protect_tokens: (settings.protect_tokens as f64 * factor).round() as usize,
            minimum_tokens: (settings.minimum_tokens as f64 * factor).round() as usize,
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
    fn the_built_in_notes_are_valid() {
        Note::new(DEFAULT_PLACEHOLDER, &[]).unwrap();
        Note::new(DEFAULT_PREVIEW_NOTE, PREVIEW_VARIABLES).unwrap();
        Note::new(DEFAULT_DUPLICATE_NOTE, DUPLICATE_VARIABLES).unwrap();
        Note::new(DEFAULT_SUPERSEDED_NOTE, SUPERSEDED_VARIABLES).unwrap();
    }

    #[test]
    fn adaptive_thresholds_follow_the_curve() {
        let settings = PruneSettings {
            adaptive_thresholds: true,
            ..PruneSettings::default()
        };
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
        let settings = PruneSettings::default();
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
