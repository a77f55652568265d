#!/usr/bin/env bash
# Quick start 2/2: set up .venv on first run, then run the test suite. The default run skips
# tests marked slow (synthesis, place-and-route, long training); `scripts/test.sh -m slow`
# runs those, `scripts/test.sh -m ''` runs everything. Extra arguments go to pytest. Tests run
# on every core (pytest-xdist `-n auto`) unless the arguments choose (`-n 0`: one process).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/bootstrap.sh"
set -euo pipefail
cd "$root"
parallel=(-n auto)
for arg in "$@"; do
  case "$arg" in -n|-n*|--numprocesses|--numprocesses=*) parallel=() ;; esac
done
exec python -m pytest "${parallel[@]}" "$@"
