"""``verilator --lint-only -Wall`` on generated Verilog, with the project's waivers.

All waivers live in one file, ``hw/lint_waivers.vlt`` (Verilator configuration format), each
with the reason it is safe. :func:`lint_verilog` returns the warnings that remain.
"""
from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import zoforge.hw
from zoforge.sim.toolchain import apply_toolchain_env

__all__ = ["LintResult", "lint_verilog", "WAIVERS"]

WAIVERS = Path(__file__).resolve().parent.parent / "hw" / "lint_waivers.vlt"


@dataclass
class LintResult:
    clean: bool
    messages: list[str]   # remaining %Warning/%Error lines

    def __str__(self) -> str:
        return "lint clean" if self.clean else "\n".join(self.messages)


def lint_verilog(verilog: str, top: str) -> LintResult:
    """Lint ``verilog`` (text) with top module ``top`` under ``-Wall`` and the waivers."""
    apply_toolchain_env()
    with tempfile.TemporaryDirectory(prefix="zoforge-lint-") as tmp:
        source = Path(tmp) / f"{top}.v"
        source.write_text(verilog)
        command = ["verilator", "--lint-only", "-Wall", "--top-module", top,
                   str(_waivers_path()), str(source)]
        proc = subprocess.run(command, capture_output=True, text=True)
    messages = [line for line in (proc.stdout + proc.stderr).splitlines()
                if line.startswith(("%Warning", "%Error"))]
    return LintResult(clean=proc.returncode == 0 and not messages, messages=messages)


def _waivers_path() -> Path:
    # Installed editable, hw/ is beside sim/; the waiver file also ships as package data.
    if WAIVERS.exists():
        return WAIVERS
    return Path(zoforge.hw.__file__).parent / "lint_waivers.vlt"
