#!/usr/bin/env python3
"""Seeds fuzz/corpus/* from ../shared/transcripts: each transcript cut to about 60 KB (whole
lines, whole messages) for the readers (as a request body too, for the proxy's reader, and each
Chat Completions one as a Responses body as well), its shape as a script of steps for
`prepare`, and the built-in configuration for the loader. Run from fuzz/; the corpora are not committed."""
import glob, json, os, shutil, sys


def responses(chat):
    """A Chat Completions body as the Responses body Codex would send (as
    condense_core::testing::responses_from_chat builds it)."""
    def text(content):
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
        return ""
    body = {k: v for k, v in chat.items() if k != "messages"}
    items = []
    for i, m in enumerate(chat["messages"]):
        role, t = m.get("role"), text(m.get("content"))
        if role == "system" and i == 0:
            body["instructions"] = t
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": m.get("tool_call_id"), "output": t})
        elif role == "assistant":
            if t:
                items.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t}]})
            for c in m.get("tool_calls") or []:
                f = c.get("function", {})
                items.append({"type": "function_call", "call_id": c.get("id"), "name": f.get("name"), "arguments": f.get("arguments")})
        else:
            items.append({"type": "message", "role": role, "content": [{"type": "input_text", "text": t}]})
    body["input"] = items
    return body


T = os.environ.get("CONDENSE_TRANSCRIPTS", "../../shared/transcripts")
LIM = 60_000
for d in ("read", "request", "config", "prepare"):
    os.makedirs(f"corpus/{d}", exist_ok=True)
# The Codex log Codex wrote (crates/condense-formats/tests/data), read by detection.
for path in glob.glob("../crates/condense-formats/tests/data/*.jsonl"):
    data = open(path, "rb").read()
    open(f"corpus/read/{os.path.basename(path)}", "wb").write(b"\x00" + data)
# Chat Completions' older function calling (`function_call`, `role: "function"`), which the
# shared transcripts do not use.
legacy = {"model": "gpt-3.5-turbo-0613", "messages": [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None,
     "function_call": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
    {"role": "function", "name": "get_weather", "content": "{\"temp\": 21}"},
    {"role": "assistant", "content": "21 degrees.", "function_call": None}]}
open("corpus/read/legacy-functions.json", "wb").write(b"\x01" + json.dumps(legacy).encode())
open("corpus/request/legacy-functions.json", "wb").write(b"\x00" + json.dumps(legacy).encode())
for path in sorted(glob.glob(T + "/*/*.json*")):
    data = open(path, "rb").read()
    name = os.path.basename(path)[:40]
    if path.endswith(".jsonl"):
        out = b""
        for line in data.splitlines(keepends=True):
            if len(out) + len(line) > LIM:
                if out:
                    break
                continue
            out += line
        open(f"corpus/read/{name}", "wb").write(b"\x00" + out)
        continue
    doc = json.loads(data)
    msgs = doc["messages"] if isinstance(doc, dict) else doc
    keep = []
    for m in msgs:
        trial = keep + [m]
        d = dict(doc, messages=trial) if isinstance(doc, dict) else trial
        if len(json.dumps(d)) > LIM:
            break
        keep = trial
    d = dict(doc, messages=keep) if isinstance(doc, dict) else keep
    open(f"corpus/read/{name}", "wb").write(b"\x00" + json.dumps(d, indent=1).encode())
    body = d if isinstance(d, dict) else {"model": "m", "messages": d}
    choice = b"\x01" if "/anthropic/" in path else b"\x00"
    open(f"corpus/request/{name}", "wb").write(choice + json.dumps(body).encode())
    if "/openai/" in path:
        # The same conversation as a Responses body (the request target's choice 2).
        resp = json.dumps(responses(body)).encode()
        open(f"corpus/read/resp-{name}", "wb").write(b"\x00" + resp)
        open(f"corpus/request/resp-{name}", "wb").write(b"\x02" + resp)
    ops = bytearray()
    for m in msgs[:200]:
        role, size = m.get("role"), len(json.dumps(m))
        content = m.get("content")
        if role == "user" and isinstance(content, str) and "<returncode>" not in content:
            ops += bytes([0, 20])
        elif role == "assistant" and m.get("tool_calls"):
            ops += bytes([2, min(255, size // 40)])
        elif role == "assistant":
            ops += bytes([1, min(255, size // 40)])
        else:
            ops += bytes([6, min(255, size // 80)])
    open(f"corpus/prepare/{name}", "wb").write(bytes(ops))
shutil.copy("../config/condense.toml", "corpus/config/built-in.toml")
open("corpus/config/small.toml", "w").write(
    '[model]\ncontext_window = 32000\nmax_output_tokens = 4096\n[prune]\nprotected_tools = ["memory_store"]\n')
print("seeded", sum(len(os.listdir(f"corpus/{d}")) for d in ("read", "request", "config", "prepare")), "inputs", file=sys.stderr)
