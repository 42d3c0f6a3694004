#!/usr/bin/env python3
"""Seeds fuzz/corpus/* from ../shared/transcripts: each transcript cut to about 60 KB (whole
lines, whole messages) for the readers (as a request body too, for the proxy's reader), its shape as a script of steps for `prepare`, and the
built-in configuration for the loader. Run from fuzz/; the corpora are not committed."""
import glob, json, os, shutil, sys

T = os.environ.get("CONDENSE_TRANSCRIPTS", "../../shared/transcripts")
LIM = 60_000
for d in ("read", "request", "config", "prepare"):
    os.makedirs(f"corpus/{d}", exist_ok=True)
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
