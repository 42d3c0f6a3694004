"""The official OpenAI and Anthropic Python SDKs talking to `condense serve`.

Run by tests/sdk_clients.rs with the proxy's URL, a shared transcript (an Anthropic request
body) and a Responses request body (a shared Chat Completions transcript as Codex would send
it); prints one JSON object of what each call returned, for the Rust test to check against
what the scripted upstream sent.
"""

import json
import sys

import anthropic
import openai

url, transcript, responses_session = sys.argv[1], sys.argv[2], sys.argv[3]
out = {}

oa = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-openai-test", max_retries=0)
reply = oa.chat.completions.create(
    model="m", messages=[{"role": "user", "content": "hello"}]
)
out["openai"] = {
    "content": reply.choices[0].message.content,
    "usage": reply.usage.total_tokens,
}
chunks = []
for chunk in oa.chat.completions.create(
    model="m",
    messages=[{"role": "user", "content": "hello"}],
    stream=True,
    stream_options={"include_usage": True},
):
    chunks.append(chunk.model_dump(exclude_none=True))
out["openai_stream"] = chunks
# Without stream_options: the proxy asks for the usage itself; what the SDK reads is each
# chunk's fields as sent (exclude_unset), to show that no usage reached it.
out["openai_stream_unasked"] = [
    chunk.model_dump(exclude_unset=True)
    for chunk in oa.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}], stream=True
    )
]

# The Responses API, as Codex and the Agents SDK use it.
response = oa.responses.create(model="m", input="hello")
out["responses"] = {"text": response.output_text, "usage": response.usage.total_tokens}
kinds = []
with oa.responses.stream(
    model="m", input=[{"role": "user", "content": "hello"}]
) as stream:
    for event in stream:
        kinds.append(event.type)
    final = stream.get_final_response()
out["responses_stream"] = {"events": kinds, "text": final.output_text,
                           "usage": final.usage.total_tokens}
session = json.load(open(responses_session))
items = session["input"]
calls = [end for end in range(1, len(items)) if items[end]["type"] == "function_call"]
sent = 0
for end in calls[::4] + [len(items)]:
    oa.responses.create(
        model="gpt-5-codex",
        instructions=session["instructions"],
        input=items[:end],
        store=False,
        extra_headers={"x-condense-session": "sdk-responses"},
    )
    sent += 1
out["responses_replayed"] = sent

an = anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0)
message = an.messages.create(
    model="m", max_tokens=10, messages=[{"role": "user", "content": "hello"}]
)
out["anthropic"] = {
    "text": message.content[0].text,
    "input": message.usage.input_tokens,
    "cache_read": message.usage.cache_read_input_tokens,
}
events = []
with an.messages.stream(
    model="m", max_tokens=10, messages=[{"role": "user", "content": "hello"}]
) as stream:
    for event in stream:
        events.append(event.type)
    final = stream.get_final_message()
out["anthropic_stream"] = {"events": events, "text": final.content[0].text,
                           "output": final.usage.output_tokens}

# A long session, request by request, as an agent built on the SDK sends it.
body = json.load(open(transcript))
messages = body["messages"]
sent = 0
steps = [end for end in range(1, len(messages)) if messages[end]["role"] == "assistant"]
# Every fourth step and the last, to keep the test quick.
for end in steps[::4] + [len(messages)]:
    an.messages.create(
        model=body["model"],
        max_tokens=1024,
        system=body["system"],
        messages=messages[:end],
        extra_headers={"x-condense-session": "sdk-replay"},
    )
    sent += 1
out["replayed"] = sent

# condense's own refusal, in the provider's shape: the SDK raises it as the provider's error.
try:
    an.messages.create(
        model="m", max_tokens=10,
        messages=[{"role": "user", "content": "x" * 2_100_000}],
    )
    out["too_large"] = None
except anthropic.APIStatusError as error:
    out["too_large"] = {"status": error.status_code, "type": error.body["error"]["type"],
                        "message": error.message}
try:
    oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "x" * 2_100_000}])
    out["openai_too_large"] = None
except openai.APIStatusError as error:
    out["openai_too_large"] = {"status": error.status_code, "message": error.message}

# Anthropic's context editing through the SDK, for an upstream that refuses the field (the
# scripted one, as another vendor's Anthropic-compatible endpoint does): condense applies it.
raw = an.messages.with_raw_response.create(
    model=body["model"],
    max_tokens=1024,
    # Its own system prompt: the replay's requests above are found by theirs.
    system="You are a coding agent, with context editing.",
    messages=messages,
    extra_body={"context_management": {"edits": [
        {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 20000}},
    ]}},
    extra_headers={"x-condense-session": "sdk-edits", "anthropic-beta": "context-management-2025-06-27"},
)
answer = json.loads(raw.http_response.text)
out["context_edits"] = {
    "applied": answer.get("context_management", {}).get("applied_edits", []),
    "text": raw.parse().content[0].text,
}

# Native compaction through the SDK: the scripted upstream has no /responses/compact (404, as
# llama.cpp), so condense answers it; the SDK goes on from the compacted window.
compacted = oa.responses.compact(model="compact-model", input=items, instructions=session["instructions"])
window = [item.model_dump(exclude_none=True) for item in compacted.output]
follow = oa.responses.create(
    model="compact-model",
    instructions=session["instructions"],
    input=window + [{"role": "user", "content": "Now run the tests."}],
    store=False,
)
forged = [dict(item) for item in window]
forged[0]["encrypted_content"] = forged[0]["encrypted_content"][:-4] + "AAAA"
try:
    oa.responses.create(model="compact-model", input=forged, store=False)
    forged_status = None
except openai.BadRequestError as error:
    forged_status = error.status_code
out["compact"] = {
    "object": compacted.object,
    "types": [item["type"] for item in window],
    "envelope": window[0].get("encrypted_content", "")[:12],
    "follow": follow.output_text,
    "forged": forged_status,
}

print(json.dumps(out))
