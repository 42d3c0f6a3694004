#!/usr/bin/env bash
# A Python virtualenv with the official OpenAI and Anthropic SDKs (from PyPI), for the proxy's
# real-client tests. Idempotent: installs on first use, then only checks. Prints the venv's
# python. Files live in ${CONDENSE_PY_HOME:-$HOME/.cache/condense-python}.
set -euo pipefail
home=${CONDENSE_PY_HOME:-$HOME/.cache/condense-python}
py=$home/venv/bin/python
# The SDK versions the tests were written against; newer ones speak the same wire.
want="openai==3.54.0 anthropic==2.12.0"
if ! { [ "$(cat "$home/venv/.sdks" 2>/dev/null)" = "$want" ] && "$py" -c "import openai, anthropic" 2>/dev/null; }; then
  echo "installing the openai and anthropic SDKs into $home (first run only)" >&2
  rm -rf "$home/venv"; mkdir -p "$home"; python3 -m venv "$home/venv"
  # shellcheck disable=SC2086
  "$home/venv/bin/pip" install -q --no-cache-dir $want >&2
  echo "$want" > "$home/venv/.sdks"
fi
echo "$py"
