//! What the proxy's benches replay: a shared session as the requests its harness sent.

use serde_json::Value;

/// The session replayed unless `CONDENSE_BENCH_SESSION` names another shared Anthropic body:
/// the longest (Claude Code 5f8cbb78, 119 steps). `anthropic/claude-code-dc7e9081` has the
/// largest requests (20 steps, up to 700 KB).
const DEFAULT_SESSION: &str = "anthropic/claude-code-5f8cbb78";

/// The session's name and its requests as Anthropic bodies, one per second assistant step:
/// each body holds every message before that step, as a client that resends its history sends
/// it.
pub fn bodies() -> (String, Vec<Vec<u8>>) {
    let name = std::env::var("CONDENSE_BENCH_SESSION")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| DEFAULT_SESSION.to_owned());
    let value: Value =
        serde_json::from_slice(&condense_core::testing::transcript(&name).unwrap().bytes).unwrap();
    let all = value["messages"].as_array().unwrap();
    let bodies = (1..all.len())
        .filter(|&end| all[end]["role"] == "assistant")
        .step_by(2)
        .map(|end| {
            let mut body = value.clone();
            body["messages"] = Value::Array(all[..end].to_vec());
            body["max_tokens"] = 1024.into();
            serde_json::to_vec(&body).unwrap()
        })
        .collect();
    (name, bodies)
}
