#!/usr/bin/env bash
# sst's opencode (the npm package opencode-ai), for the real-client test: opencode talks to
# `condense serve` as its Anthropic provider's base URL.
# Idempotent: installs on first use, then only checks. Prints the path of the `opencode` command.
# Files live in ${CONDENSE_OPENCODE_HOME:-$HOME/.cache/condense-opencode} (about 350 MB).
set -euo pipefail
home=${CONDENSE_OPENCODE_HOME:-$HOME/.cache/condense-opencode}
opencode=$home/node_modules/.bin/opencode
# The version the test was written against: opencode changes its requests and its options.
want=1.18.33
if [ "$("$opencode" --version 2>/dev/null)" != "$want" ]; then
  if ! command -v npm > /dev/null; then
    echo "installing npm with apt-get (first run only)" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >&2
  fi
  echo "installing opencode-ai@$want into $home (first run only)" >&2
  rm -rf "$home"; mkdir -p "$home"
  npm install --prefix "$home" --no-audit --no-fund --loglevel=error "opencode-ai@$want" >&2
  "$opencode" --version >&2
fi
echo "$opencode"
