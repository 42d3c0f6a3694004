#!/usr/bin/env bash
# OpenAI's Codex CLI (the npm package @openai/codex, which ships its native binary), for the
# proxy's real-client test: Codex talks to `condense serve` over the Responses API. Idempotent:
# installs on first use, then only checks. Prints the path of the `codex` command. Files live
# in ${CONDENSE_CODEX_HOME:-$HOME/.cache/condense-codex} (about 400 MB).
set -euo pipefail
home=${CONDENSE_CODEX_HOME:-$HOME/.cache/condense-codex}
codex=$home/node_modules/.bin/codex
# The version the test was written against: Codex changes its requests between releases.
want=0.169.0
if ! "$codex" --version 2>/dev/null | grep -qx "codex-cli $want"; then
  if ! command -v npm > /dev/null; then
    echo "installing npm with apt-get (first run only)" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >&2
  fi
  echo "installing @openai/codex@$want into $home (first run only)" >&2
  rm -rf "$home"; mkdir -p "$home"
  npm install --prefix "$home" --no-audit --no-fund --loglevel=error "@openai/codex@$want" >&2
  "$codex" --version >&2
fi
echo "$codex"
