"""Fmax estimate: longest register-to-register path of the synthesized netlist.

Yosys' own timing commands (``sta``/``ltp``) know no delays for Xilinx primitives after
``synth_xilinx``, so this module walks the flattened netlist (``netlist.json`` written by
:func:`zoforge.reports.synth.synthesize`) itself and adds up a per-primitive delay table:

    path = T_cko + sum over cells (T_cell + T_net) + T_setup + T_clock_margin
    Fmax = min(1 / longest path, clock-network limit)

Each LUT, MUXF or carry block on the path adds its logic delay plus one average routed net;
carry-chain hops (``CI`` inputs) use the dedicated chain (no net delay). Flip-flops, block
RAMs, shift registers and registered DSP48E2s start and end paths; ports count as
registered outside the design. The delays in :data:`DELAYS` are *typical* UltraScale+ -2
values (assumptions, see each source); routing in a real placement varies by 2x, so this is
an estimate with perhaps +-30 % error, labelled ``yosys-estimate``.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Delay", "DELAYS", "FmaxEstimate", "estimate_fmax", "SOURCE", "MODEL"]

MODEL = ("Longest register-to-register path of the Yosys synth_xilinx netlist: T_cko + "
         "sum over the cells on the path of (cell delay + one routed net; carry-chain hops "
         "use the dedicated chain) + T_net + T_setup + T_margin; Fmax = min(1/path, clock "
         "network limit). Typical UltraScale+ -2 delays below (assumptions); routing in a "
         "real placement varies, so expect perhaps +-30 %.")

SOURCE = "yosys-estimate (netlist path x UltraScale+ delay model)"


@dataclass(frozen=True)
class Delay:
    symbol: str
    ns: float
    meaning: str
    source: str


DELAYS: dict[str, Delay] = {d.symbol: d for d in (
    Delay("T_cko", 0.10, "flip-flop clock-to-output", "assumption: typical UltraScale+ -2"),
    Delay("T_setup", 0.05, "flip-flop setup", "assumption: typical UltraScale+ -2"),
    Delay("T_lut", 0.10, "LUT1..LUT6 logic", "assumption: typical UltraScale+ -2"),
    Delay("T_net", 0.30, "one routed net (average, local fan-out)",
          "assumption: typical post-route net in a compact UltraScale+ design"),
    Delay("T_mux", 0.08, "MUXF7/MUXF8", "assumption"),
    Delay("T_carry", 0.15, "carry block, data input to output", "assumption"),
    Delay("T_chain", 0.03, "carry chain hop CI -> CO (per 4 bits)", "assumption"),
    Delay("T_dsp", 1.80, "unregistered DSP48E2 input to output", "assumption"),
    Delay("T_bram_co", 0.90, "block RAM clock-to-output (no output register)", "assumption"),
    Delay("T_margin", 0.10, "clock uncertainty and skew", "assumption"),
    Delay("F_clock_max", 775.0, "clock network limit (MHz), BUFGCE, -2 speed grade",
          "assumption from the UltraScale+ data sheet family (DS925) maximum"),
)}

_SEQUENTIAL = re.compile(r"^(FD[A-Z_0-9]*|LD[A-Z_0-9]*|SRL[A-Z0-9]*|RAMB\w+|URAM\w+)$")
_CLOCK_PINS = {"C", "CLK", "CLKARDCLK", "CLKBWRCLK", "WCLK", "CLKA", "CLKB"}


@dataclass
class FmaxEstimate:
    fmax_mhz: float
    critical_ns: float
    logic_levels: int             # LUTs on the critical path
    path: list[str]               # cell types along the critical path
    limited_by: str               # "logic" or "clock network"
    source: str = SOURCE
    unresolved_cells: int = 0     # cells in combinational loops (ignored)
    delays: dict = field(default_factory=lambda: {k: v.ns for k, v in DELAYS.items()})

    def to_json(self) -> dict:
        return dict(self.__dict__)


def estimate_fmax(netlist_path: Path | str, top: str | None = None) -> FmaxEstimate:
    """Estimate Fmax from a flattened Yosys JSON netlist of Xilinx primitives."""
    data = json.loads(Path(netlist_path).read_text())
    modules = data["modules"]
    if top is None:
        top = next(name for name, mod in modules.items()
                   if mod.get("attributes", {}).get("top")) if len(modules) > 1 else \
            next(iter(modules))
    module = modules[top]
    return _longest_path(module)


def _d(symbol: str) -> float:
    return DELAYS[symbol].ns


def _cell_delay(cell_type: str, in_port: str) -> float:
    if cell_type.startswith("LUT"):
        return _d("T_lut")
    if cell_type.startswith("MUXF"):
        return _d("T_mux")
    if cell_type.startswith("CARRY"):
        return _d("T_chain") if in_port == "CI" else _d("T_carry")
    if cell_type.startswith("DSP48"):
        return _d("T_dsp")
    if cell_type.startswith("RAM") and not cell_type.startswith("RAMB"):
        return _d("T_lut")          # LUT RAM read: address -> data like a LUT
    if cell_type in ("INV", "BUF", "IBUF", "OBUF", "BUFG", "VCC", "GND"):
        return 0.0
    return _d("T_lut")


def _is_sequential(cell: dict) -> bool:
    kind = cell["type"].lstrip("\\")
    if _SEQUENTIAL.match(kind):
        return True
    if kind.startswith("DSP48"):
        params = cell.get("parameters", {})
        return any(_param_int(params.get(p, "0")) for p in ("AREG", "BREG", "MREG", "PREG"))
    return False


def _param_int(value) -> int:
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        return int(text, 2) if set(text) <= {"0", "1"} and len(text) > 1 else int(text)
    except ValueError:
        return 0


def _longest_path(module: dict) -> FmaxEstimate:
    arrival: dict[int, float] = {}
    levels: dict[int, int] = {}
    trace: dict[int, tuple] = {}       # bit -> (cell type, previous bit)
    for port in module.get("ports", {}).values():
        if port["direction"] in ("input", "inout"):
            for bit in port["bits"]:
                if isinstance(bit, int):
                    arrival[bit], levels[bit] = 0.0, 0
    comb_cells = []
    endpoints: list[tuple[int, float]] = []      # (bit, extra delay at the sink)
    for cell in module.get("cells", {}).values():
        kind = cell["type"].lstrip("\\")
        directions = cell.get("port_directions", {})
        if _is_sequential(cell):
            start = _d("T_bram_co") if kind.startswith(("RAMB", "URAM")) else _d("T_cko")
            for port, bits in cell["connections"].items():
                if directions.get(port) == "output":
                    for bit in bits:
                        if isinstance(bit, int):
                            arrival[bit], levels[bit] = start, 0
                            trace[bit] = (kind, None)
                elif directions.get(port) == "input" and port not in _CLOCK_PINS:
                    endpoints += [(bit, _d("T_net") + _d("T_setup"))
                                  for bit in bits if isinstance(bit, int)]
        else:
            comb_cells.append(cell)
    for port in module.get("ports", {}).values():
        if port["direction"] == "output":
            endpoints += [(bit, 0.0) for bit in port["bits"] if isinstance(bit, int)]

    # Kahn's algorithm over combinational cells, by the bits they wait for.
    driver_of: dict[int, dict] = {}
    for cell in comb_cells:
        for port, bits in cell["connections"].items():
            if cell.get("port_directions", {}).get(port) == "output":
                for bit in bits:
                    if isinstance(bit, int):
                        driver_of[bit] = cell
    waiting: dict[int, int] = {}
    users: dict[int, list[int]] = defaultdict(list)
    for index, cell in enumerate(comb_cells):
        pending = 0
        for port, bits in cell["connections"].items():
            if cell.get("port_directions", {}).get(port) == "input":
                for bit in bits:
                    if isinstance(bit, int) and bit in driver_of and bit not in arrival:
                        pending += 1
                        users[bit].append(index)
        waiting[index] = pending
    ready = deque(index for index, count in waiting.items() if count == 0)
    done = 0
    while ready:
        index = ready.popleft()
        done += 1
        cell = comb_cells[index]
        kind = cell["type"].lstrip("\\")
        directions = cell.get("port_directions", {})
        best, best_levels, best_bit = 0.0, 0, None
        for port, bits in cell["connections"].items():
            if directions.get(port) != "input":
                continue
            for bit in bits:
                if not isinstance(bit, int) or bit not in arrival:
                    continue
                net = 0.0 if port == "CI" else _d("T_net")
                time = arrival[bit] + net + _cell_delay(kind, port)
                if time > best:
                    best, best_levels, best_bit = time, levels[bit], bit
        adds_level = 1 if kind.startswith("LUT") else 0
        for port, bits in cell["connections"].items():
            if directions.get(port) != "output":
                continue
            for bit in bits:
                if not isinstance(bit, int) or bit in arrival:
                    continue
                arrival[bit], levels[bit] = best, best_levels + adds_level
                trace[bit] = (kind, best_bit)
                for user in users.get(bit, ()):
                    waiting[user] -= 1
                    if waiting[user] == 0:
                        ready.append(user)
    worst, worst_bit = 0.0, None
    for bit, extra in endpoints:
        if bit in arrival and arrival[bit] + extra > worst:
            worst, worst_bit = arrival[bit] + extra, bit
    worst += _d("T_margin")
    path = []
    bit = worst_bit
    while bit is not None and bit in trace and len(path) < 10_000:
        kind, bit = trace[bit]
        path.append(kind)
    path.reverse()
    logic_fmax = 1000.0 / worst if worst > 0 else float("inf")
    cap = DELAYS["F_clock_max"].ns
    return FmaxEstimate(
        fmax_mhz=min(logic_fmax, cap), critical_ns=worst,
        logic_levels=levels.get(worst_bit, 0) if worst_bit is not None else 0,
        path=path, limited_by="logic" if logic_fmax < cap else "clock network",
        unresolved_cells=len(comb_cells) - done)
