#!/usr/bin/env bash
# Quick start 2/2: set up .venv on first run, then run the test suite. The default run leaves
# out the tests marked slow (synthesis, place-and-route, long training, deep fuzzing, every
# variant) and the Icarus Verilog runs of the co-simulation tests (marked icarus; a few
# representatives run on both simulators by default). `scripts/test.sh -m "not slow"` adds
# the Icarus runs (what CI runs), `scripts/test.sh -m slow` runs the slow tests,
# `scripts/test.sh -m ''` everything. Extra arguments go to pytest. Tests run on every core
# (pytest-xdist `-n auto`) unless the arguments choose (`-n 0`: one process). At the end it
# prints the wall-clock and CPU time the tests took.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/bootstrap.sh"
set -euo pipefail
cd "$root"
parallel=(-n auto)
for arg in "$@"; do
  case "$arg" in -n|-n*|--numprocesses|--numprocesses=*) parallel=() ;; esac
done
started=$SECONDS
status=0
python -m pytest "${parallel[@]}" "$@" || status=$?
# CPU time of the test processes (this shell's children: pytest and its workers; `times`
# runs in this shell, not in a pipeline's subshell, which would count none of them)
times_file=$(mktemp)
times > "$times_file"
cpu=$(tail -n 1 "$times_file" | awk '{
  n = 0; for (i = 1; i <= 2; i++) { split($i, t, "m"); n += t[1] * 60 + t[2] }; printf "%.1f", n / 60 }')
rm -f "$times_file"
wall=$((SECONDS - started))
printf 'zoforge: the tests took %d:%02d wall-clock, %s CPU-minutes on %s cores\n' \
  $((wall / 60)) $((wall % 60)) "$cpu" "$(nproc)" >&2
exit "$status"
