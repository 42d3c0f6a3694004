"""The binding on the shared transcripts: what Python prepares is what the CLI writes, byte for
byte; state round-trips and freezes decisions; bad input raises with the CLI's message."""

import asyncio
import json
import subprocess

import pytest

import condense

# The shared sessions in the request formats, and the format each is in.
SESSIONS = [
    ("anthropic/claude-code-5f8cbb78.json", "anthropic"),
    ("anthropic/claude-code-dc7e9081.json", "anthropic"),
    ("openai/openhands-ponylang__ponyc-4588.json", "openai"),
    ("openai/mini-swe-agent-django__django-11138.json", "openai"),
    ("openai/mini-swe-agent-sympy__sympy-13091.json", "openai"),
    ("openai/swe-agent-marshmallow-1867.json", "openai"),
]
SETTINGS = {"context_window": 32_000, "max_output_tokens": 4_096}


def cli_compact(cli, path, fmt, out, extra=()):
    subprocess.run(
        [str(cli), "compact", str(path), "--format", fmt, "--context-window", "32000",
         "--max-output-tokens", "4096", "-o", str(out), "-q", *extra],
        check=True,
    )
    return out.read_text()


@pytest.mark.parametrize("name,fmt", SESSIONS)
def test_compact_and_prepare_write_what_the_cli_writes(name, fmt, transcripts, cli, isolated):
    body = json.loads((transcripts / name).read_text())
    # The CLI is given the bytes Python sends: a body that nothing changed comes back as it came.
    path = isolated / "in.json"
    path.write_text(json.dumps(body, ensure_ascii=False))
    written = cli_compact(cli, path, fmt, isolated / "out.json")
    compactor = condense.Compactor(**SETTINGS)
    compacted = compactor.compact(body, format=fmt)
    assert compacted.body == written
    # The per-request path on a new session makes the same decisions; with the same settings
    # (no continuation, which only a harness's request gets) it writes the same bytes.
    layer = isolated / "no-continuation.toml"
    layer.write_text('[compaction]\ncontinuation = ""\n')
    written = cli_compact(cli, path, fmt, isolated / "out2.json", ["--config", str(layer)])
    prepared = condense.Compactor(layer, **SETTINGS).prepare(body, format=fmt)
    assert prepared.body == written
    assert prepared.messages == json.loads(written)["messages"]


def test_state_round_trips_and_keeps_the_decisions(transcripts, isolated):
    body = json.loads((transcripts / "openai/openhands-ponylang__ponyc-4588.json").read_text())
    compactor = condense.Compactor(context_window=16_000, max_output_tokens=4_096)
    first = compactor.prepare(body)
    assert first.report.summarized
    assert first.report.tokens_after < first.report.tokens_before
    saved = first.state.to_json()
    state = condense.SessionState.from_json(saved)
    assert state == first.state
    # The next request: the same history and one more message. The summary is the frozen one.
    body["messages"].append({"role": "user", "content": "Go on."})
    second = compactor.prepare(body, state)
    assert not second.report.summarized
    assert second.report["head"] == "reused"
    summary = [m for m in first.messages if "<prior-conversation-summary>" in str(m.get("content"))]
    assert summary and summary[0] in second.messages
    assert second.messages[-1] == {"role": "user", "content": "Go on."}
    # A state saved as text is taken as it is.
    assert compactor.prepare(body, saved).messages == second.messages


def test_aprepare_gives_what_prepare_gives(transcripts, isolated):
    body = json.loads((transcripts / "openai/openhands-ponylang__ponyc-4588.json").read_text())
    compactor = condense.Compactor(context_window=16_000, max_output_tokens=4_096)

    async def both():
        return await asyncio.gather(compactor.aprepare(body), compactor.aprepare(body))

    one, two = asyncio.run(both())
    assert one.body == two.body == compactor.prepare(body).body


def test_a_pruned_output_is_recalled(transcripts, isolated):
    body = json.loads((transcripts / "openai/mini-swe-agent-django__django-11138.json").read_text())
    compactor = condense.Compactor(
        context_window=32_000, max_output_tokens=4_096, **{"prune.protect_tokens": 2_000,
                                                            "prune.minimum_tokens": 1_000}
    )
    # Phase 1 alone, as `condense prune` does: the placeholders stay in the messages (a summary
    # tells a failure by what its original says, not by its placeholder).
    prepared = compactor.apply_trim(body)
    text = json.dumps(prepared.messages)
    assert "condense recall " in text
    handle = text.split("condense recall ")[1][:32]
    original = compactor.recall(handle)
    assert original and any(original == message.get("content") for message in body["messages"])
    assert condense.recall(handle, store=isolated / "originals") == original


def test_counts_what_the_trigger_counts(transcripts, isolated):
    body = json.loads((transcripts / "openai/openhands-ponylang__ponyc-4588.json").read_text())
    compactor = condense.Compactor(context_window=200_000)
    assert compactor.count(body) == compactor.prepare(body).report.tokens_before > 10_000


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "responses"])
def test_the_trim_tool_is_the_clis(fmt, cli):
    shown = subprocess.run(
        [str(cli), "tools", "schema", "--format", "openai-responses" if fmt == "responses" else fmt],
        check=True, capture_output=True, text=True,
    ).stdout
    assert condense.tools_schema(fmt) == json.loads(shown)


def test_an_agents_trim_is_applied(isolated):
    big = "line of output\n" * 400
    messages = [
        {"role": "user", "content": "look at the log"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"cat log\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": big},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_2", "type": "function", "function": {"name": "trim_tool_result",
             "arguments": json.dumps({"summary": "the log repeats one line 400 times"})}}]},
        {"role": "tool", "tool_call_id": "call_2", "content": "ok"},
    ]
    done = condense.Compactor().apply_trim(messages)
    trimmed = done.messages[2]["content"]
    assert trimmed.startswith("[trimmed by the agent: the log repeats one line 400 times")
    assert done.report["prune"]["trims"][0]["outcome"] == "trimmed"


def test_responses_bodies_are_prepared(isolated):
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    prepared = condense.Compactor().prepare(items, format="responses", system="be brief")
    assert prepared.messages == items
    assert json.loads(prepared.body)["instructions"] == "be brief"


def test_bad_input_raises_with_the_clis_message(isolated, tmp_path):
    with pytest.raises(condense.CondenseError, match=r"unknown key `context_windw` \(did you mean `context_window`\?\)"):
        condense.Compactor(context_windw=32_000)
    with pytest.raises(condense.CondenseError, match="expected openai, anthropic or responses"):
        condense.Compactor().prepare([], format="gemini")
    with pytest.raises(condense.CondenseError, match="is not a handle"):
        condense.recall("nope")
    with pytest.raises(condense.CondenseError, match="message 1: unknown role `wizard`"):
        condense.Compactor().prepare([{"role": "user", "content": "x"}, {"role": "wizard", "content": "y"}])
    with pytest.raises(condense.CondenseError, match="not valid JSON"):
        condense.Compactor().prepare([], state="{garbage")
    bad = tmp_path / "bad.toml"
    bad.write_text("[model]\ncontext_windw = 3\n")
    with pytest.raises(condense.CondenseError, match=r"bad.toml:2:1: unknown key"):
        condense.Compactor(config=bad)


def test_a_request_the_provider_refused_is_prepared_again_by_its_count(transcripts, isolated):
    """A resumed session under a 32K window by condense's count, over it by a provider that
    counts 1.4 of its tokens per condense token: the provider's refusal, given back with the
    state the request was prepared with, has the same messages compacted to what the provider
    takes. Another error is not condense's to act on."""
    whole = json.loads((transcripts / "openai/mini-swe-agent-django__django-11138.json").read_text())
    compactor = condense.Compactor(context_window=32_000, max_output_tokens=4_096,
                                   **{"compaction.cache_rewrite_cost": 0})
    # The longest start of the run, ending with an observation, that condense counts under the
    # window less the reply's reserve.
    messages = []
    for message in whole["messages"]:
        if compactor.count(messages + [message]) > 26_000:
            break
        messages.append(message)
    while messages[-1]["role"] != "user":
        messages.pop()
    provider = lambda sent: compactor.count(sent) * 7 // 5  # noqa: E731
    first = compactor.prepare(messages)
    assert not first.report.summarized and not first.changed
    counted = provider(first.messages)
    assert counted > 32_000
    error = {"error": {"message": f"This model's maximum context length is 32000 tokens. However, your messages resulted in {counted} tokens. Please reduce the length of the messages.",
                       "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
    again = compactor.prepare(messages, first.state, refused=error)
    assert again.report.summarized
    assert provider(again.messages) + 4_096 <= 32_000
    # The error as text, or the count it gave, do the same.
    assert compactor.prepare(messages, first.state, refused=json.dumps(error)).body == again.body
    assert compactor.prepare(messages, first.state, refused=counted).body == again.body
    with pytest.raises(condense.CondenseError, match="not a refusal of the request as longer"):
        compactor.prepare(messages, first.state, refused={"error": {"message": "Invalid API key"}})
    with pytest.raises(condense.CondenseError, match="no request was prepared from this state"):
        compactor.prepare(messages, None, refused=counted)
    with pytest.raises(condense.CondenseError, match="two different requests"):
        compactor.prepare(messages, first.state, usage=100, refused=counted)


def test_a_reply_cut_at_the_limit_condense_lowered_gets_twice_the_room(isolated):
    """A harness whose provider counts 11,000 tokens of system prompt and tools beside the
    messages, in a 16K window, and gives condense its usage on every request: as the session
    grows condense lowers the reply's limit to what the conversation leaves. The reply to the
    seventh request stops there; given back as ``cut_short`` (the provider's usage, or its
    input count), the same request prepared again leaves the reply twice that limit, and is
    compacted to fit beside it. A reply cut at the harness's own limit is not condense's to
    act on."""
    compactor = condense.Compactor(context_window=16_000, max_output_tokens=4_096)
    tools = [{"name": f"tool_{n}",
              "description": f"Tool {n} checks one part of the build. " * 25,
              "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
             for n in range(40)]
    prefix = 11_000

    def step(n):
        output = "".join(f"turn 0 step {n} line {line} ok\n" for line in range(50))
        return [{"role": "assistant", "content": [
                    {"type": "tool_use", "id": f"call_{n}", "name": "bash",
                     "input": {"command": f"run check 0 {n}"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": f"call_{n}", "content": output}]}]

    def provider(messages):
        return compactor.count({"messages": messages}, format="anthropic") + prefix

    messages = [{"role": "user", "content": "make the checks pass"}]
    state, usage = None, None
    for n in range(7):
        body = {"model": "m", "max_tokens": 4_096, "tools": tools, "messages": list(messages)}
        prepared = compactor.prepare(body, state, format="anthropic", usage=usage)
        state, sent = prepared.state, json.loads(prepared.body)
        # What the provider counted: the request as sent, and its answer.
        usage = provider(sent["messages"] + step(n)[:1])
        if n < 6:
            messages += step(n)
    cut = sent["max_tokens"]
    assert prepared.report["reply_limit"]["sent"] == cut < 2_048
    counted = provider(sent["messages"])
    again = compactor.prepare(body, state, format="anthropic",
                              cut_short={"input_tokens": 3, "cache_read_input_tokens": counted - 3,
                                         "output_tokens": cut})
    assert json.loads(again.body)["max_tokens"] >= 2 * cut
    assert provider(json.loads(again.body)["messages"]) + 2 * cut <= 16_000
    # The input's count alone does the same.
    assert compactor.prepare(body, state, format="anthropic", cut_short=counted).body == again.body
    with pytest.raises(condense.CondenseError, match="did not lower the reply's limit"):
        compactor.prepare(body, None, format="anthropic", cut_short=counted)
    with pytest.raises(condense.CondenseError, match="got no answer to count"):
        compactor.prepare(body, state, format="anthropic", usage=100, cut_short=counted)


def test_usage_counts_the_answer_it_stands_at(isolated):
    """A provider's usage object is the request's input and the answer's output: the figure
    stands at that answer, which the next request sends too."""
    messages = [
        {"role": "user", "content": "fix the parser"},
        {"role": "assistant", "content": "I will read it first. " * 50},
        {"role": "user", "content": "go on"},
    ]
    compactor = condense.Compactor()
    for usage, reported in [
        ({"prompt_tokens": 900, "completion_tokens": 300, "total_tokens": 1200}, 1200),
        ({"input_tokens": 10, "cache_read_input_tokens": 800, "output_tokens": 300}, 1110),
        (1200, 1200),
    ]:
        measured = compactor.prepare(messages, usage=usage).report["measured"]
        assert measured["source"] == "provider_usage"
        assert measured["reported"] == reported
