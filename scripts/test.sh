#!/usr/bin/env bash
# Quick start 2/2: set up .venv on first run, then run the test suite. The default run skips
# tests marked slow (synthesis, place-and-route, long training); `scripts/test.sh -m slow`
# runs those, `scripts/test.sh -m ''` runs everything. Extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/bootstrap.sh"
set -euo pipefail
cd "$root"
exec python -m pytest "$@"
