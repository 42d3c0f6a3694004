"""`Compactor.prepare` from Python on the largest shared session condense compacts at 32K
(mini-swe-agent django-11138, a Chat Completions body; a new session each time), its messages
taken as a harness takes them, next to the same call from Rust (`cargo bench -p condense-host
--bench prepare`, which reads the body's bytes and writes the result back): the binding's own
cost is walking the Python objects into JSON values and the result back into Python objects.

    python crates/condense-python/bench/prepare.py  # with a release wheel installed
"""

import json
import os
import pathlib
import statistics
import tempfile
import time

import condense

ROOT = pathlib.Path(__file__).resolve().parents[3]
transcripts = pathlib.Path(os.environ.get("CONDENSE_TRANSCRIPTS", ROOT.parent / "shared" / "transcripts"))
body = json.loads((transcripts / "openai/mini-swe-agent-django__django-11138.json").read_text())
os.environ["CONDENSE_STORE_DIR"] = tempfile.mkdtemp()
compactor = condense.Compactor(context_window=32_000, max_output_tokens=4_096)
assert compactor.prepare(body).report.summarized
times = []
for _ in range(60):
    start = time.perf_counter()
    compactor.prepare(body).messages
    times.append(time.perf_counter() - start)
print(f"prepare from Python: median {statistics.median(times) * 1000:.2f} ms over {len(times)} calls")
