//! What the proxy's benches replay: the largest shared session as the requests its harness sent.

use serde_json::Value;

/// The largest shared session (Claude Code 5f8cbb78) as Anthropic request bodies, one per
/// second assistant step: each body holds every message before that step, as a client that
/// resends its history sends it.
pub fn bodies() -> Vec<Vec<u8>> {
    let value: Value = serde_json::from_slice(
        &condense_core::testing::transcript("anthropic/claude-code-5f8cbb78")
            .unwrap()
            .bytes,
    )
    .unwrap();
    let all = value["messages"].as_array().unwrap();
    (1..all.len())
        .filter(|&end| all[end]["role"] == "assistant")
        .step_by(2)
        .map(|end| {
            let mut body = value.clone();
            body["messages"] = Value::Array(all[..end].to_vec());
            body["max_tokens"] = 1024.into();
            serde_json::to_vec(&body).unwrap()
        })
        .collect()
}
