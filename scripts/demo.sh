#!/usr/bin/env bash
# Quick start 1/2: set up .venv on first run, then run zoforge's main job on its embedded
# defaults (`zoforge demo`). Extra arguments go to `zoforge demo` (see --help).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
set -euo pipefail
exec zoforge demo "$@"
