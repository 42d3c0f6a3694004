//! `GET /metrics` in Prometheus' text format: counters kept with atomics (no lock on the request
//! path) and one histogram, the latency condense adds to a request.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds of the added-latency buckets, in milliseconds.
const BUCKETS_MS: [f64; 10] = [
    1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 1_000.0, 10_000.0,
];

/// Everything `/metrics` reports.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Compactable requests, by API: OpenAI Chat Completions, Anthropic, OpenAI Responses.
    pub requests: [AtomicU64; 3],
    /// Requests passed through untouched.
    pub passthrough: AtomicU64,
    /// Requests where phase 1 replaced outputs (frozen replays included).
    pub pruned: AtomicU64,
    /// Requests where time-based microcompact cleared outputs.
    pub microcompacted: AtomicU64,
    /// Requests that got a new summary.
    pub summarized: AtomicU64,
    /// Requests whose earlier summary was put back in place.
    pub head_reused: AtomicU64,
    /// Requests whose history no longer started with the session's summarized head (an edited
    /// or branched conversation, or two conversations under one session key): judged afresh.
    pub diverged: AtomicU64,
    /// Summarizer failures (the request went on pruned).
    pub summarizer_failures: AtomicU64,
    /// Model answers rejected twice by the gate, the extractive summary standing in.
    pub rejected_summaries: AtomicU64,
    /// Requests forwarded still at or over the compaction threshold: a summary that failed,
    /// was skipped (circuit breaker open, nothing new to summarize) or did not get under it.
    /// The one to alert on: the provider may refuse these.
    pub over_threshold: AtomicU64,
    /// Requests whose reply limit was lowered to the room their input leaves in the window
    /// (a provider refuses input and limit together over it).
    pub reply_limits_lowered: AtomicU64,
    /// Answers to those requests that stopped at the lowered limit: replies condense's limit
    /// cut short, which the client's own would not have.
    pub replies_cut_at_lowered_limit: AtomicU64,
    /// Requests the upstream refused as longer than the model's window, giving its count: sent
    /// again, prepared with that count.
    pub refused_as_too_long: AtomicU64,
    /// Whole answers (not streams) cut at a limit condense lowered that were not given: the
    /// request was prepared again, leaving the reply twice that room, and sent once more.
    pub cut_replies_sent_again: AtomicU64,
    /// Summaries asked inside the agent's own request that it answered (`summarizer.fork`).
    pub forked_summaries: AtomicU64,
    /// Forked summary requests that fell back to a separate prompt (no text in the answer,
    /// or too long for the server).
    pub fork_fallbacks: AtomicU64,
    /// Compactions that failed, the request forwarded unchanged (fail open).
    pub failed_open: AtomicU64,
    /// Requests refused by condense itself (malformed, too large).
    pub refused: AtomicU64,
    /// `POST …/responses/compact` answered by condense (`serve.native_compaction`).
    pub emulated_compactions: AtomicU64,
    /// Session states that could not be read in time (store down, stalled or erroring): the
    /// request was prepared on a fresh state, not saved.
    pub state_unavailable: AtomicU64,
    /// Session states that could not be saved in time, or at all.
    pub state_unsaved: AtomicU64,
    /// Stored states set aside for a fresh judgement (damaged, another format, expired).
    pub state_discarded: AtomicU64,
    /// Requests that lost the compare-and-set on every attempt: sent as prepared on the latest
    /// state, that preparation not saved.
    pub state_conflicts: AtomicU64,
    /// Upstream unreachable or timed out.
    pub upstream_errors: AtomicU64,
    /// Originals removed by sweeps (`serve.originals_ttl_hours`).
    pub originals_removed: AtomicU64,
    /// Their bytes.
    pub originals_removed_bytes: AtomicU64,
    /// Tokens of the conversations as the clients sent them.
    pub tokens_before: AtomicU64,
    /// Tokens of the conversations as forwarded.
    pub tokens_after: AtomicU64,
    /// Cumulative bucket counts of the added latency.
    latency_buckets: [AtomicU64; BUCKETS_MS.len()],
    latency_count: AtomicU64,
    /// Sum of the added latency, in microseconds.
    latency_sum_us: AtomicU64,
}

/// Reads one counter of the metrics.
type Read = fn(&Metrics) -> &AtomicU64;

/// A counter `/metrics` shows: its name, its help, and its samples (labels, the value).
type Counter = (&'static str, &'static str, &'static [(&'static str, Read)]);

/// Every counter `/metrics` shows, in order.
const COUNTERS: &[Counter] = &[
    (
        "condense_requests_total",
        "Compactable requests received.",
        &[
            ("{provider=\"openai\"}", |m| &m.requests[0]),
            ("{provider=\"anthropic\"}", |m| &m.requests[1]),
            ("{provider=\"openai-responses\"}", |m| &m.requests[2]),
        ],
    ),
    (
        "condense_passthrough_requests_total",
        "Requests passed through untouched.",
        &[("", |m| &m.passthrough)],
    ),
    (
        "condense_compactions_total",
        "Requests changed by condense, by phase.",
        &[
            ("{phase=\"prune\"}", |m| &m.pruned),
            ("{phase=\"microcompact\"}", |m| &m.microcompacted),
            ("{phase=\"summary\"}", |m| &m.summarized),
            ("{phase=\"frozen_summary\"}", |m| &m.head_reused),
        ],
    ),
    (
        "condense_diverged_histories_total",
        "Requests whose history no longer started with the session's summarized head; judged afresh.",
        &[("", |m| &m.diverged)],
    ),
    (
        "condense_summarizer_failures_total",
        "Summaries that failed; the request went on pruned.",
        &[("", |m| &m.summarizer_failures)],
    ),
    (
        "condense_rejected_summaries_total",
        "Model summaries rejected twice (too short, sections missing, the prompt repeated, nothing of the head named); the extractive summary stood in.",
        &[("", |m| &m.rejected_summaries)],
    ),
    (
        "condense_over_threshold_total",
        "Requests forwarded still at or over the compaction threshold.",
        &[("", |m| &m.over_threshold)],
    ),
    (
        "condense_reply_limits_lowered_total",
        "Requests whose reply limit (max_tokens) was lowered to the room their input leaves in the window.",
        &[("", |m| &m.reply_limits_lowered)],
    ),
    (
        "condense_replies_cut_at_lowered_limit_total",
        "Answers to requests whose reply limit condense lowered that stopped at that limit: replies it cut short.",
        &[("", |m| &m.replies_cut_at_lowered_limit)],
    ),
    (
        "condense_refused_as_too_long_total",
        "Requests the upstream refused as longer than the model's window, giving its count of them: prepared again with that count and sent once more.",
        &[("", |m| &m.refused_as_too_long)],
    ),
    (
        "condense_cut_replies_sent_again_total",
        "Whole answers cut at the reply limit condense lowered, not given: the request prepared again with twice that room and sent once more.",
        &[("", |m| &m.cut_replies_sent_again)],
    ),
    (
        "condense_forked_summaries_total",
        "Summaries asked inside the agent's own request, sharing its cached prefix: answered, or fallen back to a separate prompt.",
        &[
            ("{outcome=\"answered\"}", |m| &m.forked_summaries),
            ("{outcome=\"fell_back\"}", |m| &m.fork_fallbacks),
        ],
    ),
    (
        "condense_failed_open_total",
        "Compactions that failed; the request was forwarded unchanged.",
        &[("", |m| &m.failed_open)],
    ),
    (
        "condense_refused_total",
        "Requests condense refused (malformed or too large).",
        &[("", |m| &m.refused)],
    ),
    (
        "condense_emulated_compactions_total",
        "Compaction requests (POST /responses/compact) condense answered itself for an upstream without them.",
        &[("", |m| &m.emulated_compactions)],
    ),
    (
        "condense_state_store_errors_total",
        "Session-state reads and saves that failed or ran past serve.state_timeout_ms, states set aside (damaged or expired), and requests that lost every compare-and-set.",
        &[
            ("{kind=\"load\"}", |m| &m.state_unavailable),
            ("{kind=\"save\"}", |m| &m.state_unsaved),
            ("{kind=\"discarded\"}", |m| &m.state_discarded),
            ("{kind=\"conflict\"}", |m| &m.state_conflicts),
        ],
    ),
    (
        "condense_upstream_errors_total",
        "Upstream unreachable or timed out.",
        &[("", |m| &m.upstream_errors)],
    ),
    (
        "condense_originals_removed_total",
        "Originals removed by sweeps: unused for serve.originals_ttl_hours, named by no session state.",
        &[("", |m| &m.originals_removed)],
    ),
    (
        "condense_originals_removed_bytes_total",
        "Bytes of the originals removed by sweeps.",
        &[("", |m| &m.originals_removed_bytes)],
    ),
    (
        "condense_tokens_total",
        "Tokens of the conversations, as received and as forwarded.",
        &[
            ("{stage=\"before\"}", |m| &m.tokens_before),
            ("{stage=\"after\"}", |m| &m.tokens_after),
        ],
    ),
];

impl Metrics {
    /// Counts one.
    pub fn add(counter: &AtomicU64, by: u64) {
        counter.fetch_add(by, Ordering::Relaxed);
    }

    /// Records the latency condense added to one request.
    pub fn observe_added(&self, micros: u64) {
        let ms = micros as f64 / 1_000.0;
        for (bound, bucket) in BUCKETS_MS.iter().zip(&self.latency_buckets) {
            if ms <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us.fetch_add(micros, Ordering::Relaxed);
    }

    /// The text `/metrics` serves.
    pub fn render(&self) -> String {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let mut out = String::new();
        for (name, help, samples) in COUNTERS {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (labels, read) in *samples {
                let _ = writeln!(out, "{name}{labels} {}", get(read(self)));
            }
        }
        let name = "condense_added_latency_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time condense adds to a request before forwarding it.\n# TYPE {name} histogram"
        );
        for (bound, bucket) in BUCKETS_MS.iter().zip(&self.latency_buckets) {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{}\"}} {}",
                bound / 1_000.0,
                get(bucket)
            );
        }
        let count = get(&self.latency_count);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(
            out,
            "{name}_sum {}",
            get(&self.latency_sum_us) as f64 / 1_000_000.0
        );
        let _ = writeln!(out, "{name}_count {count}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_is_cumulative_and_the_text_is_prometheus() {
        let metrics = Metrics::default();
        metrics.observe_added(1_500);
        metrics.observe_added(30_000);
        Metrics::add(&metrics.requests[1], 2);
        let text = metrics.render();
        assert!(text.contains("condense_requests_total{provider=\"anthropic\"} 2"));
        assert!(text.contains("condense_added_latency_seconds_bucket{le=\"0.001\"} 0"));
        assert!(text.contains("condense_added_latency_seconds_bucket{le=\"0.002\"} 1"));
        assert!(text.contains("condense_added_latency_seconds_bucket{le=\"0.05\"} 2"));
        assert!(text.contains("condense_added_latency_seconds_count 2"));
        assert!(text.contains("condense_added_latency_seconds_sum 0.0315"));
    }
}
