#!/usr/bin/env bash
# The Python binding, built and installed as a user would get it: a wheel made by `maturin
# build` (crates/condense-python), installed into a virtualenv with pytest and LangChain (from
# PyPI), for the binding's tests. Idempotent: the tools are installed on first use; the wheel is
# built and installed every time (cargo rebuilds only what changed). Prints the venv's python.
# Files live in ${CONDENSE_BINDING_HOME:-$HOME/.cache/condense-binding}.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
home=${CONDENSE_BINDING_HOME:-$HOME/.cache/condense-binding}
py=$home/venv/bin/python
# The versions the tests were written against.
want="maturin==1.16.0 pytest==9.2.0 langchain==1.5.2"
if ! { [ "$(cat "$home/venv/.tools" 2>/dev/null)" = "$want" ] && "$py" -c "import langchain, pytest" 2>/dev/null; }; then
  echo "installing maturin, pytest and langchain into $home (first run only)" >&2
  rm -rf "$home/venv"; mkdir -p "$home"; python3 -m venv "$home/venv"
  # shellcheck disable=SC2086
  "$home/venv/bin/pip" install -q --no-cache-dir $want >&2
  echo "$want" > "$home/venv/.tools"
fi
# The workspace's own target directory: the crates the binding shares with the CLI are built
# once. A debug build, as the other tests are.
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
(cd "$root/crates/condense-python" &&
  CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target} "$home/venv/bin/maturin" build -q \
    --interpreter "$py" -o "$wheels" >&2)
"$home/venv/bin/pip" install -q --no-deps --force-reinstall "$wheels"/condense-*.whl >&2
echo "$py"
