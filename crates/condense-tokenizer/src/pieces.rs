//! tiktoken's counts without its backtracking regex.
//!
//! tiktoken splits text into pieces with a pattern that has one look-ahead (`\s+(?!\S)`: a run
//! of spaces before a word leaves its last space to the word), so tiktoken-rs runs it on
//! `fancy-regex`'s backtracking engine, which was 85 % of what counting a request's new text
//! cost the proxy (callgrind, `cargo bench -p condense-serve --bench stages`). Without that one
//! branch the pattern is a plain regular expression, which `regex-automata` matches in linear
//! time; the branch is then applied by hand to the runs of spaces the plain pattern finds (the
//! rule below). Each piece is then one token when the encoding has it whole, else its byte-pair
//! merges, exactly as tiktoken does. That the pieces and counts are tiktoken's own is tested on
//! every string of the shared transcripts and on generated text built from the characters where
//! the two patterns could part (the tests below).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::panic::{RefUnwindSafe, UnwindSafe};

use regex_automata::meta::{Cache, Regex};
use regex_automata::util::pool::Pool;
use regex_automata::{Anchored, Input};
use rustc_hash::FxHashMap;
use tiktoken_rs::Rank;

use crate::Encoding;

/// `o200k_base`'s pattern (tiktoken-rs's `O200K_BASE_PAT_STR`) without its `\s+(?!\S)` branch.
const O200K_PIECES: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s*[\r\n]+",
    r"|\s+",
);

/// `cl100k_base`'s pattern without its `\s+(?!\S)` branch, and without its possessive
/// quantifiers, which the `regex` crate does not have and which change nothing here: in each
/// place, what follows cannot match what a backtrack would give back.
const CL100K_PIECES: &str = concat!(
    r"'(?i:[sdmt]|ll|ve|re)",
    r"|[^\r\n\p{L}\p{N}]?\p{L}+",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"|\s+$",
    r"|\s*[\r\n]",
    r"|\s+",
);

/// Pieces this long or longer that the encoding does not hold whole are merged with a heap
/// ([`Pieces::merged_len`]): tiktoken-rs's exported merge rescans the piece after every merge,
/// which is fastest on short pieces and quadratic on long ones. tiktoken switches at the same
/// length.
const LONG_PIECE: usize = 100;

/// Pieces longer than this are merged a chunk of this many bytes at a time (cut at a
/// character boundary), each chunk's tokens added up. A piece this long is a run of one class
/// of characters (a megabyte of one letter, of spaces, of `=`): merging it whole kept four
/// words per byte of it in memory (a 32 MiB body of one repeated character took 22 s to
/// count), and no token of any encoding is near this long, so a cut costs at most a token or
/// two per chunk, a few in a hundred thousand. Counts of every real piece (the transcripts' and
/// the generated ones in the tests) are tiktoken's exactly.
const CHUNKED_PIECE: usize = 64 * 1024;

/// Makes a search cache for the pattern (the type `meta::Regex` keeps its own pool with).
type MakeCache = Box<dyn Fn() -> Cache + Send + Sync + UnwindSafe + RefUnwindSafe>;

/// One encoding's pieces and ranks.
pub(crate) struct Pieces {
    pattern: Regex,
    /// Search caches, taken once per text: `Regex::search` takes one from the regex's own pool
    /// for every piece, which off the pool's first thread is a lock per piece (counting on two
    /// threads was slower than on one).
    caches: Pool<Cache, MakeCache>,
    ranks: FxHashMap<Vec<u8>, Rank>,
}

impl Pieces {
    /// Built from tiktoken-rs's own tables: every ordinary rank decoded to its bytes. `None`
    /// only if the pattern does not compile (it does; the counter then falls back to tiktoken).
    pub(crate) fn new(encoding: Encoding) -> Option<Pieces> {
        let pattern = match encoding {
            Encoding::O200kBase => O200K_PIECES,
            Encoding::Cl100kBase => CL100K_PIECES,
        };
        let pattern = Regex::new(pattern).ok()?;
        let for_caches = pattern.clone();
        let caches: Pool<Cache, MakeCache> = Pool::new(Box::new(move || for_caches.create_cache()));
        let bpe = encoding.bpe();
        // Ordinary ranks run from 0 without a gap; the special tokens come after the first gap.
        let mut ranks = FxHashMap::default();
        for rank in 0.. {
            match bpe.decode_bytes(&[rank]) {
                Ok(bytes) => ranks.insert(bytes, rank),
                Err(_) => break,
            };
        }
        Some(Pieces {
            pattern,
            caches,
            ranks,
        })
    }

    /// How many ordinary ranks the encoding has.
    #[cfg(test)]
    pub(crate) fn ranks(&self) -> usize {
        self.ranks.len()
    }

    /// The pieces tiktoken splits `text` into.
    pub(crate) fn split<'t>(&self, text: &'t str) -> impl Iterator<Item = &'t str> {
        let mut at = 0;
        let mut cache = self.caches.get();
        std::iter::from_fn(move || {
            if at >= text.len() {
                return None;
            }
            // Pieces follow each other without a gap (some branch matches any character), so
            // the next one starts where the last ended: an anchored search finds its end
            // without the backward scan an unanchored one needs for the start. Were there a
            // gap, the unanchored search skips it, as tiktoken's does.
            let rest = Input::new(text).range(at..);
            let found = self
                .pattern
                .search_with(&mut cache, &rest.clone().anchored(Anchored::Yes))
                .or_else(|| self.pattern.search_with(&mut cache, &rest))?;
            let (start, mut end) = (found.start(), found.end());
            let piece = &text[start..end];
            // tiktoken's `\s+(?!\S)`: a run of spaces (no line break: those end in an earlier
            // branch) that a non-space follows gives its last space to what follows, when it
            // has one to give. Only the `\s+` branch matches all-space text without a line
            // break short of the text's end (cl100k's `\s+$` reaches the end), and it matches
            // the run whole, so the next character is not a space.
            if end < text.len()
                && !piece.contains(['\r', '\n'])
                && piece.chars().all(char::is_whitespace)
                && let Some((last, _)) = piece.char_indices().last()
                && last > 0
            {
                end = start + last;
            }
            // Never an empty piece (no branch matches nothing), but a loop must not hang on one.
            at = if end > at {
                end
            } else {
                at + text[at..].chars().next().map_or(1, char::len_utf8)
            };
            Some(&text[start..end])
        })
    }

    /// tiktoken's count of `text`'s tokens (`encode_ordinary(text).len()`).
    pub(crate) fn count(&self, text: &str) -> usize {
        self.split(text).map(|piece| self.count_piece(piece)).sum()
    }

    fn count_piece(&self, piece: &str) -> usize {
        let bytes = piece.as_bytes();
        if bytes.is_empty() {
            0
        } else if bytes.len() == 1 || self.ranks.contains_key(bytes) {
            // Every single byte is a token, and so is every piece the encoding holds whole.
            1
        } else if bytes.len() < LONG_PIECE {
            tiktoken_rs::byte_pair_split(bytes, &self.ranks).len()
        } else if bytes.len() <= CHUNKED_PIECE {
            self.merged_len(bytes)
        } else {
            let mut rest = piece;
            let mut tokens = 0;
            // A chunk like the one before it (a run of one character) merges the same way.
            let mut previous: Option<(&str, usize)> = None;
            while !rest.is_empty() {
                let mut cut = CHUNKED_PIECE.min(rest.len());
                while !rest.is_char_boundary(cut) {
                    cut -= 1;
                }
                let (chunk, after) = rest.split_at(cut);
                let count = match previous {
                    Some((same, count)) if same == chunk => count,
                    _ => self.merged_len(chunk.as_bytes()),
                };
                previous = Some((chunk, count));
                tokens += count;
                rest = after;
            }
            tokens
        }
    }

    /// How many tokens byte-pair merging leaves of `piece`: tiktoken's merges (always the
    /// adjacent pair whose join has the lowest rank, the leftmost of equals), found with a heap
    /// of candidate merges instead of a scan per merge, so that a piece of a megabyte (a run of
    /// spaces in a tool's output) takes milliseconds. A candidate is stale once either of its
    /// parts has merged; it is then skipped when it comes up.
    fn merged_len(&self, piece: &[u8]) -> usize {
        let len = piece.len();
        let rank_of = |start: usize, stop: usize| {
            if stop > len {
                return Rank::MAX;
            }
            self.ranks
                .get(&piece[start..stop])
                .copied()
                .unwrap_or(Rank::MAX)
        };
        // The parts, a list over their start offsets: where each ends, which part comes before
        // it, and the rank of joining it to the next one (`Rank::MAX`: none, or merged away).
        let mut end: Vec<usize> = (1..=len).collect();
        let mut before: Vec<Option<usize>> = (0..len).map(|start| start.checked_sub(1)).collect();
        let mut join: Vec<Rank> = (0..len).map(|start| rank_of(start, start + 2)).collect();
        let mut heap: BinaryHeap<Reverse<(Rank, usize)>> = join
            .iter()
            .enumerate()
            .filter(|(_, rank)| **rank != Rank::MAX)
            .map(|(start, rank)| Reverse((*rank, start)))
            .collect();
        let mut parts = len;
        while let Some(Reverse((rank, left))) = heap.pop() {
            if join[left] != rank {
                continue;
            }
            let right = end[left];
            end[left] = end[right];
            join[right] = Rank::MAX;
            parts -= 1;
            if let Some(after) = end.get(end[left]).copied() {
                before[end[left]] = Some(left);
                join[left] = rank_of(left, after);
            } else {
                join[left] = Rank::MAX;
            }
            if join[left] != Rank::MAX {
                heap.push(Reverse((join[left], left)));
            }
            if let Some(previous) = before[left] {
                join[previous] = rank_of(previous, end[left]);
                if join[previous] != Rank::MAX {
                    heap.push(Reverse((join[previous], previous)));
                }
            }
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ENCODINGS: [Encoding; 2] = [Encoding::O200kBase, Encoding::Cl100kBase];

    fn pieces(encoding: Encoding) -> &'static Pieces {
        encoding.pieces().unwrap()
    }

    /// tiktoken's own pattern, on the backtracking engine tiktoken-rs runs it on.
    fn reference(encoding: Encoding) -> fancy_regex::Regex {
        let pattern = match encoding {
            Encoding::O200kBase => tiktoken_rs::O200K_BASE_PAT_STR,
            Encoding::Cl100kBase => {
                r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"
            }
        };
        fancy_regex::Regex::new(pattern).unwrap()
    }

    /// tiktoken's pieces and tiktoken's count.
    fn assert_same(encoding: Encoding, reference: &fancy_regex::Regex, text: &str) {
        let expected: Vec<&str> = reference
            .find_iter(text)
            .map(|found| found.unwrap().as_str())
            .collect();
        let pieces = pieces(encoding);
        assert_eq!(
            pieces.split(text).collect::<Vec<_>>(),
            expected,
            "{encoding} pieces of {text:?}"
        );
        let count = encoding.bpe().encode_ordinary(text).len();
        assert_eq!(pieces.count(text), count, "{encoding} count of {text:?}");
        // The heap's merges are the scan's, on short pieces too.
        for piece in expected.iter().map(|piece| piece.as_bytes()) {
            if piece.len() > 1 && piece.len() < 2_000 && !pieces.ranks.contains_key(piece) {
                assert_eq!(
                    pieces.merged_len(piece),
                    tiktoken_rs::byte_pair_split(piece, &pieces.ranks).len(),
                    "{encoding} merges of {piece:?}"
                );
            }
        }
    }

    fn assert_all_same<'a>(texts: impl IntoIterator<Item = &'a str> + Clone) {
        for encoding in ENCODINGS {
            let reference = reference(encoding);
            for text in texts.clone() {
                assert_same(encoding, &reference, text);
            }
        }
    }

    fn strings(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::String(text) => out.push(text.clone()),
            serde_json::Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
            serde_json::Value::Object(map) => {
                for (key, item) in map {
                    out.push(key.clone());
                    strings(item, out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn the_ranks_are_every_ordinary_token() {
        assert_eq!(pieces(Encoding::O200kBase).ranks(), 199_998);
        assert_eq!(pieces(Encoding::Cl100kBase).ranks(), 100_256);
    }

    /// Every string of every shared transcript (messages, tool outputs, arguments, keys).
    #[test]
    fn every_transcript_string_is_split_and_counted_as_tiktoken_does() {
        let mut texts = Vec::new();
        for transcript in condense_core::testing::transcripts().unwrap() {
            let stream = serde_json::Deserializer::from_slice(&transcript.bytes)
                .into_iter::<serde_json::Value>();
            for value in stream {
                strings(&value.unwrap(), &mut texts);
            }
        }
        assert!(texts.len() > 30_000, "only {} strings", texts.len());
        assert_all_same(texts.iter().map(String::as_str));
    }

    #[test]
    fn the_runs_where_the_look_ahead_decides() {
        let cases = [
            "",
            " ",
            "  ",
            "a  b",
            "a \tb",
            "a\t\tb",
            "a   ",
            "   a",
            "a \n b",
            "a  \n\n  b",
            "x\r\n  y",
            "\u{3000}\u{3000}字",
            "a\u{a0}\u{a0}b",
            "a \u{2028} b",
            "a\u{85} b",
            "a \u{180e} b",
            "a \u{200b} b",
            "it's  I'LL   we've",
            "  123456 7",
            "a  !!  /b",
            "    fn main() {\n        let x = 1;\n    }\n",
            "é\u{301}  ü",
            "👍🏽  ok",
        ];
        assert_all_same(cases);
    }

    /// Long runs, where a backtracking engine works hardest and the long-piece merge is used.
    #[test]
    fn long_runs_count_as_tiktoken() {
        let texts = [
            format!("{}x", " ".repeat(5_000)),
            format!("x{}", " \t".repeat(3_000)),
            "abcdefghij".repeat(500),
            format!("{}\n", "=-".repeat(2_000)),
            "9".repeat(1_000),
            "\u{4e2d}\u{6587}".repeat(1_000),
        ];
        assert_all_same(texts.iter().map(String::as_str));
    }

    /// tiktoken-rs itself panics here: its backtracking engine gives up on the look-ahead over a
    /// run this long (`encode_ordinary` unwraps the error). A tool's output can hold such a run.
    #[test]
    fn a_megabyte_of_spaces_is_counted() {
        let text = format!("{}x", " ".repeat(1_200_000));
        for encoding in ENCODINGS {
            let count = pieces(encoding).count(&text);
            // The run less its last space, which joins the `x`; the run merges into long tokens.
            assert!(count > 1 && count < 40_000, "{encoding}: {count}");
            let run = pieces(encoding).count(&" ".repeat(1_199_999));
            assert_eq!(count, run + 1, "{encoding}");
        }
    }

    /// Pieces past [`CHUNKED_PIECE`] are counted by chunks: within a token or two per chunk
    /// of the whole merge, and a run of many megabytes is counted in memory proportional to a
    /// chunk.
    #[test]
    fn a_piece_of_megabytes_is_counted_by_chunks_within_a_token_per_chunk() {
        for (text, encoding) in [
            ("a".repeat(1 << 20), Encoding::O200kBase),
            (" ".repeat(1 << 20), Encoding::Cl100kBase),
            ("=".repeat(1 << 20), Encoding::O200kBase),
            ("\u{4e2d}".repeat(400_000), Encoding::O200kBase),
        ] {
            let pieces = pieces(encoding);
            let whole = pieces.merged_len(text.as_bytes());
            let chunked = pieces.count_piece(&text);
            let chunks = text.len().div_ceil(CHUNKED_PIECE);
            assert!(
                chunked.abs_diff(whole) <= 2 * chunks,
                "{encoding}: {chunked} by chunks, {whole} whole, {chunks} chunks"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Text built from the characters where the two patterns could part: spaces of every
        /// kind, line breaks, letters of each case, marks, digits, apostrophes, slashes.
        #[test]
        fn generated_text_is_split_and_counted_as_tiktoken_does(
            text in "[ \t\r\n\u{a0}\u{85}\u{2028}\u{3000}\u{180e}\u{200b}aZé\u{301}\u{4e2d}7'/!sS,😀]{0,60}"
        ) {
            assert_all_same([text.as_str()]);
        }

        #[test]
        fn any_text_counts_as_tiktoken(text in "\\PC{0,200}") {
            assert_all_same([text.as_str()]);
        }
    }
}
