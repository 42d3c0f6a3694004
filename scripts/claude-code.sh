#!/usr/bin/env bash
# Anthropic's Claude Code (the npm package @anthropic-ai/claude-code), for the real-client tests:
# Claude Code talks to `condense serve`, and resumes the session logs condense compacted.
# Idempotent: installs on first use, then only checks. Prints the path of the `claude` command.
# Files live in ${CONDENSE_CLAUDE_CODE_HOME:-$HOME/.cache/condense-claude-code} (about 240 MB).
set -euo pipefail
home=${CONDENSE_CLAUDE_CODE_HOME:-$HOME/.cache/condense-claude-code}
claude=$home/node_modules/.bin/claude
# The version the tests were written against: Claude Code changes its requests and its log.
want=2.1.197
if ! "$claude" --version 2>/dev/null | grep -q "^$want "; then
  if ! command -v npm > /dev/null; then
    echo "installing npm with apt-get (first run only)" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >&2
  fi
  echo "installing @anthropic-ai/claude-code@$want into $home (first run only)" >&2
  rm -rf "$home"; mkdir -p "$home"
  npm install --prefix "$home" --no-audit --no-fund --loglevel=error "@anthropic-ai/claude-code@$want" >&2
  "$claude" --version >&2
fi
echo "$claude"
