"""Fmax estimate: longest register-to-register path of a synthesized netlist.

Yosys' own timing commands know no delays for vendor primitives, so this module walks the
flattened Yosys JSON netlist itself (``netlist.json`` of :func:`zoforge.reports.synth.
synthesize` for ``synth_xilinx``, or the ``synth_ecp5`` netlist nextpnr places) and adds up
one family's delay table (:data:`DELAY_MODELS`)::

    path = T_cko + sum over cells (T_net(loads) + T_cell) + T_net(loads) + T_setup + T_margin
    T_net(loads) = T_net + T_fanout * log2(loads)       (loads: input pins the net drives)
    Fmax = min(1 / longest path, clock-network limit)

A cell's inputs fed by a dedicated wire inside the slice (a carry chain's carry-in, a wide
mux's LUT inputs) add no net delay. Carry chains are timed as the family's physical carry
block: CARRY8 on UltraScale+ (a CARRY4 of the netlist is half of one, ``T_chain`` x 4/8),
CCU2C (2 bits) on ECP5. Flip-flops, block RAMs, shift registers and registered multipliers
start and end paths; ports count as registered outside the design (``ports_registered``),
or, for a netlist with its own board harness, are left out as nextpnr's clock Fmax leaves
out its I/O paths.

How good it is: :func:`measured_error` (from :mod:`zoforge.reports.fmax_calibration`,
written by ``benchmarks/bench_fmax_model.py --write``) is the model with the ECP5 table
against nextpnr's post-route Fmax of the same netlists. The UltraScale+ table is not
calibrated against a router (no Vivado here); every report quotes the ECP5 error beside
the estimate and says so.
"""
from __future__ import annotations

import json
import math
import re
from collections import defaultdict, deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from zoforge.errors import ConfigError, check_choice
from zoforge.reports import fmax_calibration

__all__ = ["Delay", "DelayModel", "DELAY_MODELS", "DELAYS", "FmaxEstimate", "ModelError",
           "estimate_fmax", "measured_error", "error_pct", "net_delay", "SOURCE", "MODEL",
           "FAMILIES"]

MODEL = ("Longest register-to-register path of the synthesized netlist: T_cko + sum over "
         "the cells on the path of (T_net(loads) + cell delay; dedicated carry and wide-mux "
         "inputs have no net) + T_net(loads) + T_setup + T_margin, with T_net(loads) = T_net "
         "+ T_fanout x log2(loads driven); Fmax = min(1/path, clock network limit). Carry "
         "chains are timed as the family's carry block (CARRY8 on UltraScale+, CCU2C on "
         "ECP5). The delay table below names each value's source.")

SOURCE = "yosys-estimate (netlist path x family delay model)"


@dataclass(frozen=True)
class Delay:
    symbol: str
    ns: float
    meaning: str
    source: str


@dataclass(frozen=True)
class DelayModel:
    """One family's delay table.

    carry / carry_bits: the physical carry block and the bits it spans (CI -> CO of one
    block is ``T_chain``); device: the speed grade the values are for.
    """

    family: str
    device: str
    carry: str
    carry_bits: int
    delays: dict[str, Delay]

    def ns(self, symbol: str) -> float:
        return self.delays[symbol].ns


# Where the values come from (the ``source`` of each entry says which):
_ASSUMED = "assumption: typical UltraScale+ -2 value (no published table; not calibrated)"
_TRELLIS = ("speed file: prjtrellis ECP5 speed-6 timing database, as nextpnr-ecp5 reports "
            "it on the critical paths of benchmarks/bench_fmax_model.py's designs and of its "
            "--primitives probes")
_FIT = ("calibration fit (benchmarks/bench_fmax_model.py --write, "
        f"{fmax_calibration.MEASURED_AT or 'not yet run'}): T_fanout the least-squares slope "
        "of routed delay on log2(loads) over every load of every flip-flop-driven net; T_net "
        "such that the mean log error against nextpnr's Fmax over the designs is zero")

#: Fitted on ECP5 (see :data:`_FIT`; recorded with the error it gives): the base routed net
#: and its growth per doubling of the loads. UltraScale+ takes the same growth relative to
#: its base net (scaled).
_ECP5_NET, _ECP5_FANOUT = fmax_calibration.NET_FIT

_XCUP_NET = 0.30

DELAY_MODELS: dict[str, DelayModel] = {
    "xcup": DelayModel("xcup", "UltraScale+ -2", "CARRY8", 8, {d.symbol: d for d in (
        Delay("T_cko", 0.10, "flip-flop clock-to-output", _ASSUMED),
        Delay("T_setup", 0.05, "flip-flop setup", _ASSUMED),
        Delay("T_lut", 0.10, "LUT1..LUT6 logic", _ASSUMED),
        Delay("T_net", _XCUP_NET, "one routed net driving one load",
              "assumption: typical post-route net in a compact UltraScale+ design"),
        Delay("T_fanout", round(_XCUP_NET * _ECP5_FANOUT / _ECP5_NET, 3),
              "added net delay per doubling of the loads a net drives",
              f"calibration fit on ECP5 (T_fanout/T_net = {_ECP5_FANOUT}/{_ECP5_NET}), "
              "scaled by this table's T_net"),
        Delay("T_mux", 0.08, "MUXF7/MUXF8 (LUT inputs on the dedicated wire)", _ASSUMED),
        Delay("T_carry", 0.20, "CARRY8, data input S/DI to an output", _ASSUMED),
        Delay("T_chain", 0.06, "CARRY8 chain hop CI -> CO7 (8 bits; a CARRY4 of the "
              "netlist is half a block)", _ASSUMED),
        Delay("T_dsp", 1.80, "unregistered DSP48E2 input to output", _ASSUMED),
        Delay("T_bram_co", 0.90, "block RAM clock-to-output (no output register)", _ASSUMED),
        Delay("T_margin", 0.10, "clock uncertainty and skew", _ASSUMED),
        Delay("F_clock_max", 775.0, "clock network limit (MHz), BUFGCE, -2 speed grade",
              "assumption from the UltraScale+ data sheet family (DS925) maximum"),
    )}),
    "ecp5": DelayModel("ecp5", "ECP5 speed grade 6", "CCU2C", 2, {d.symbol: d for d in (
        Delay("T_cko", 0.525, "TRELLIS_FF clock-to-output", _TRELLIS),
        Delay("T_setup", 0.0, "TRELLIS_FF setup (nextpnr reports 0 at DI and M)", _TRELLIS),
        Delay("T_lut", 0.236, "LUT4 logic", _TRELLIS),
        Delay("T_net", _ECP5_NET, "one routed net driving one load", _FIT),
        Delay("T_fanout", _ECP5_FANOUT, "added net delay per doubling of the loads a net "
              "drives", _FIT),
        Delay("T_mux", 0.24, "PFUMX / L6MUX21 data to output (nextpnr: 0.165 after a LUT4, "
              "0.24 through an L6MUX21; 0.256 from the select)", _TRELLIS),
        Delay("T_carry", 0.447, "CCU2C, data input to carry-out (0.403 from carry-in to "
              "sum)", _TRELLIS),
        Delay("T_chain", 0.071, "CCU2C chain hop CIN -> COUT (2 bits)", _TRELLIS),
        Delay("T_dsp", 3.927, "unregistered MULT18X18D input to output (ALU54B taken alike)",
              _TRELLIS),
        Delay("T_bram_co", 5.83, "DP16KD clock-to-output, REGMODE NOREG", _TRELLIS),
        Delay("T_bram_co_reg", 1.0, "DP16KD clock-to-output, REGMODE OUTREG",
              "assumption: no design here registers its block-RAM output yet"),
        Delay("T_margin", 0.0, "clock uncertainty (nextpnr's Fmax adds none)", _TRELLIS),
        Delay("F_clock_max", 400.0, "clock network limit (MHz), primary clock",
              "assumption: the primary clock tree fMAX of the ECP5 family data sheet "
              "(FPGA-DS-02012), not checked here for speed grade 6"),
    )}),
}
FAMILIES = tuple(DELAY_MODELS)

#: The UltraScale+ table (the ZCU102's), the one the Xilinx reports use.
DELAYS: dict[str, Delay] = DELAY_MODELS["xcup"].delays


def net_delay(model: DelayModel, loads: int) -> float:
    """Delay of a routed net driving ``loads`` input pins under ``model``."""
    return model.ns("T_net") + model.ns("T_fanout") * math.log2(max(loads, 1))


@dataclass(frozen=True)
class ModelError:
    """The model against a real router: per design the model's and the router's Fmax of
    the same netlist, and the error (model - router) / router in percent; also the model
    with its net parameters fitted without that design (leave-one-out: the error to expect
    on a design the calibration never saw).

    rows: [design, model MHz, router MHz, error %, leave-one-out MHz, its error %];
    measured_at: the commit (and date); command: what produced it; router: the router and
    its version.
    """

    _derived: ClassVar = ("mean_abs_pct", "max_abs_pct", "bias_pct", "loo_mean_abs_pct",
                          "loo_max_abs_pct")

    family: str
    board: str
    router: str
    rows: list[list]
    measured_at: str
    command: str

    @property
    def errors_pct(self) -> list[float]:
        return [row[3] for row in self.rows]

    @property
    def mean_abs_pct(self) -> float:
        return sum(abs(e) for e in self.errors_pct) / len(self.rows)

    @property
    def max_abs_pct(self) -> float:
        return max(abs(e) for e in self.errors_pct)

    @property
    def bias_pct(self) -> float:
        return sum(self.errors_pct) / len(self.rows)

    @property
    def loo_mean_abs_pct(self) -> float:
        return sum(abs(row[5]) for row in self.rows) / len(self.rows)

    @property
    def loo_max_abs_pct(self) -> float:
        return max(abs(row[5]) for row in self.rows)

    def summary(self) -> str:
        """One line: mean and max |error| against the router, on how many designs, when."""
        router = "nextpnr" if "nextpnr" in self.router else self.router
        return (f"measured error vs {router} on {self.family} "
                f"({self.board}, {len(self.rows)} designs, {self.measured_at}): mean |error| "
                f"{self.mean_abs_pct:.0f} %, max {self.max_abs_pct:.0f} %, bias "
                f"{self.bias_pct:+.0f} %; on a design left out of the fit: mean "
                f"{self.loo_mean_abs_pct:.0f} %, max {self.loo_max_abs_pct:.0f} %")

    def to_json(self) -> dict:
        return dict(self.__dict__, **{name: getattr(self, name) for name in self._derived})


def error_pct(model_mhz: float, router_mhz: float) -> float:
    """(model - router) / router, in percent."""
    return 100.0 * (model_mhz - router_mhz) / router_mhz


def measured_error() -> ModelError | None:
    """The model's measured error (:mod:`zoforge.reports.fmax_calibration`), or None if
    it was never measured."""
    cal = fmax_calibration
    if not cal.ROWS:
        return None
    rows = [[name, model, router, round(error_pct(model, router), 1), loo,
             round(error_pct(loo, router), 1)] for name, model, router, loo in cal.ROWS]
    return ModelError(family=cal.FAMILY, board=cal.BOARD, router=cal.ROUTER, rows=rows,
                      measured_at=cal.MEASURED_AT, command=cal.COMMAND)


@dataclass
class FmaxEstimate:
    fmax_mhz: float
    critical_ns: float
    logic_levels: int             # LUTs on the critical path
    path: list[str]               # cell types along the critical path
    limited_by: str               # "logic" or "clock network"
    path_loads: list[int] = field(default_factory=list)   # loads of each net on the path
    family: str = "xcup"
    source: str = SOURCE
    unresolved_cells: int = 0     # cells in combinational loops (ignored)
    delays: dict = field(default_factory=lambda: {k: v.ns for k, v in DELAYS.items()})

    def to_json(self) -> dict:
        return dict(self.__dict__)


def estimate_fmax(netlist_path: Path | str, top: str | None = None, family: str = "xcup",
                  ports_registered: bool = True,
                  delays: dict[str, float] | None = None,
                  clock: str | None = None) -> FmaxEstimate:
    """Estimate Fmax from a flattened Yosys JSON netlist of ``family``'s primitives.

    ports_registered: top-level ports start and end paths (a design's own netlist); False
                      leaves them out (a netlist with a board harness, as nextpnr times it)
    delays:           symbol -> ns overriding entries of the family's table (calibration)
    clock:            a top-level input port: only the paths between the sequential cells
                      clocked by it (their clock pin on that port's net) and the ports, the
                      clock's own Fmax in a design of several clock domains (a path from
                      one domain into another crosses through a synchronizer: asynchronous,
                      not timed); None: every path, whatever clocks its ends
    """
    check_choice("family", family, FAMILIES)
    model = DELAY_MODELS[family]
    if delays:
        model = replace(model, delays={
            k: replace(d, ns=delays.get(k, d.ns)) for k, d in model.delays.items()})
    data = json.loads(Path(netlist_path).read_text())
    modules = data["modules"]
    if top is None:
        top = next((name for name, mod in modules.items()
                    if mod.get("attributes", {}).get("top")), next(iter(modules)))
    clock_bits = None
    if clock is not None:
        ports = modules[top].get("ports", {})
        inputs = sorted(name for name, port in ports.items() if port["direction"] == "input")
        if clock not in inputs:
            raise ConfigError("clock", "an input port of the netlist's top (" + ", ".join(
                inputs) + ")", clock)
        clock_bits = frozenset(_bits(ports[clock]["bits"]))
    return _longest_path(modules[top], model, ports_registered, clock_bits)


# -- the families' primitives --------------------------------------------------------------

@dataclass(frozen=True)
class _Role:
    """How a cell times: ``start`` (the clock-to-out symbol of a sequential cell), else a
    combinational ``delay`` symbol; ``dedicated``: inputs with no net delay; ``chain``:
    carry-in ports (hop = T_chain x bits / carry_bits); ``through``: the only inputs that
    reach the outputs (others are setup endpoints), None for all; ``ignore``: not timed."""

    start: str | None = None
    delay: str | None = None
    bits: int = 0
    dedicated: frozenset = frozenset()
    chain: frozenset = frozenset()
    through: frozenset | None = None
    ignore: bool = False
    level: bool = False


_IGNORED = _Role(ignore=True)
_FREE = _Role(delay=None)
_CLOCK_PINS = {"C", "CLK", "CLKARDCLK", "CLKBWRCLK", "WCLK", "CLKA", "CLKB", "WCK",
               "CLK0", "CLK1", "CLK2", "CLK3"}


def _xcup_role(kind: str, params: dict) -> _Role:
    if re.match(r"^(FD|LD|SRL)", kind):
        return _Role(start="T_cko")
    if kind.startswith(("RAMB", "URAM")):
        return _Role(start="T_bram_co")
    if kind.startswith("DSP48"):
        registered = any(_param_int(params.get(p, "0")) for p in ("AREG", "BREG", "MREG",
                                                                   "PREG"))
        return _Role(start="T_cko") if registered else _Role(delay="T_dsp")
    if kind.startswith("LUT"):
        return _Role(delay="T_lut", level=True)
    if kind.startswith("MUXF"):
        return _Role(delay="T_mux", dedicated=frozenset({"I0", "I1"}))
    if kind in ("CARRY4", "CARRY8"):
        return _Role(delay="T_carry", bits=int(kind[-1]), chain=frozenset({"CI", "CI_TOP"}))
    if kind in ("INV", "BUF", "IBUF", "OBUF", "BUFG", "BUFGCE", "VCC", "GND"):
        return _FREE
    return _Role(delay="T_lut")     # LUT RAM read (address -> data) and anything else


def _ecp5_role(kind: str, params: dict) -> _Role:
    if kind == "TRELLIS_FF":
        return _Role(start="T_cko")
    if kind == "DP16KD":
        registered = "OUTREG" in (params.get("REGMODE_A", ""), params.get("REGMODE_B", ""))
        return _Role(start="T_bram_co_reg" if registered else "T_bram_co")
    if kind in ("MULT18X18D", "ALU54B"):
        registered = any(str(v).strip() not in ("NONE", "") for k, v in params.items()
                         if k.startswith("REG_"))
        return _Role(start="T_cko") if registered else _Role(delay="T_dsp")
    if kind == "LUT4":
        return _Role(delay="T_lut", level=True)
    if kind == "PFUMX":
        return _Role(delay="T_mux", dedicated=frozenset({"ALUT", "BLUT"}))
    if kind == "L6MUX21":
        return _Role(delay="T_mux", dedicated=frozenset({"D0", "D1"}))
    if kind == "CCU2C":
        return _Role(delay="T_carry", bits=2, chain=frozenset({"CIN"}))
    if kind == "TRELLIS_DPR16X4":      # asynchronous read; the write port is clocked
        return _Role(delay="T_lut", through=frozenset({"RAD"}))
    if kind in ("TRELLIS_IO", "SGSR", "GSR", "DCCA", "EHXPLLL", "USRMCLK", "$scopeinfo"):
        return _IGNORED
    if kind in ("VCC", "VLO", "VHI", "GND"):
        return _FREE
    return _Role(delay="T_lut")


_ROLES = {"xcup": _xcup_role, "ecp5": _ecp5_role}


def _param_int(value) -> int:
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        return int(text, 2) if set(text) <= {"0", "1"} and len(text) > 1 else int(text)
    except ValueError:
        return 0


# -- the walk ------------------------------------------------------------------------------

def _bits(bits) -> list[int]:
    return [bit for bit in bits if isinstance(bit, int)]


def _clocked_by(cell: dict, clock_bits: frozenset) -> bool:
    """A sequential cell's clock pin is on one of ``clock_bits``."""
    return any(bit in clock_bits for port, bits in cell["connections"].items()
               if port in _CLOCK_PINS for bit in _bits(bits))


def _longest_path(module: dict, model: DelayModel, ports_registered: bool,
                  clock_bits: frozenset | None = None) -> FmaxEstimate:
    role_of = _ROLES[model.family]
    d = model.ns
    timed = []
    for cell in module.get("cells", {}).values():
        role = role_of(cell["type"].lstrip("\\"), cell.get("parameters", {}))
        if not role.ignore:
            timed.append((cell, role))
    # another clock's register (with ``clock_bits``): no path starts or ends there; its
    # inputs still load the nets that reach it
    cells = [(cell, role) for cell, role in timed if clock_bits is None or role.start is None
             or _clocked_by(cell, clock_bits)]
    loads: dict[int, int] = defaultdict(int)
    for cell, _ in timed:
        directions = cell.get("port_directions", {})
        for port, bits in cell["connections"].items():
            if directions.get(port) == "input" and port not in _CLOCK_PINS:
                for bit in _bits(bits):
                    loads[bit] += 1
    ports = module.get("ports", {}).values()
    if ports_registered:
        for port in ports:
            if port["direction"] == "output":
                for bit in _bits(port["bits"]):
                    loads[bit] += 1

    def net(bit: int) -> float:
        return net_delay(model, loads.get(bit, 1))

    arrival: dict[int, float] = {}
    levels: dict[int, int] = {}
    trace: dict[int, tuple] = {}       # bit -> (cell type, previous bit)
    endpoints: list[tuple[int, float]] = []      # (bit, delay after the bit's arrival)
    if ports_registered:
        for port in ports:
            if port["direction"] in ("input", "inout"):
                for bit in _bits(port["bits"]):
                    arrival[bit], levels[bit] = 0.0, 0
            if port["direction"] == "output":
                endpoints += [(bit, 0.0) for bit in _bits(port["bits"])]
    comb: list[tuple[dict, _Role]] = []
    for cell, role in cells:
        directions = cell.get("port_directions", {})
        kind = cell["type"].lstrip("\\")
        if role.start is not None:
            for port, bits in cell["connections"].items():
                if directions.get(port) == "output":
                    for bit in _bits(bits):
                        arrival[bit], levels[bit] = d(role.start), 0
                        trace[bit] = (kind, None)
                elif directions.get(port) == "input" and port not in _CLOCK_PINS:
                    endpoints += [(bit, net(bit) + d("T_setup")) for bit in _bits(bits)]
            continue
        if role.through is not None:      # inputs that do not reach the outputs: endpoints
            for port, bits in cell["connections"].items():
                if (directions.get(port) == "input" and port not in role.through
                        and port not in _CLOCK_PINS):
                    endpoints += [(bit, net(bit) + d("T_setup")) for bit in _bits(bits)]
        comb.append((cell, role))

    def timed_inputs(cell: dict, role: _Role):
        directions = cell.get("port_directions", {})
        for port, bits in cell["connections"].items():
            if directions.get(port) == "input" and port not in _CLOCK_PINS and (
                    role.through is None or port in role.through):
                yield port, _bits(bits)

    # Kahn's algorithm over combinational cells, by the bits they wait for.
    driver_of: dict[int, int] = {}
    for index, (cell, _) in enumerate(comb):
        for port, bits in cell["connections"].items():
            if cell.get("port_directions", {}).get(port) == "output":
                for bit in _bits(bits):
                    driver_of[bit] = index
    waiting: dict[int, int] = {}
    users: dict[int, list[int]] = defaultdict(list)
    for index, (cell, role) in enumerate(comb):
        pending = 0
        for _, bits in timed_inputs(cell, role):
            for bit in bits:
                if bit in driver_of and bit not in arrival:
                    pending += 1
                    users[bit].append(index)
        waiting[index] = pending
    ready = deque(index for index, count in waiting.items() if count == 0)
    done = 0
    while ready:
        index = ready.popleft()
        done += 1
        cell, role = comb[index]
        kind = cell["type"].lstrip("\\")
        best, best_levels, best_bit = 0.0, 0, None
        for port, bits in timed_inputs(cell, role):
            if port in role.chain:
                logic = d("T_chain") * role.bits / model.carry_bits
            else:
                logic = d(role.delay) if role.delay else 0.0
            routed = port not in role.chain and port not in role.dedicated
            for bit in bits:
                if bit not in arrival:
                    continue
                time = arrival[bit] + (net(bit) if routed else 0.0) + logic
                if time > best:
                    best, best_levels, best_bit = time, levels[bit], bit
        adds_level = 1 if role.level else 0
        # one clock's paths: logic no timed input reaches (fed by another clock's registers
        # or constants only) starts no path
        untimed = clock_bits is not None and best_bit is None
        for port, bits in cell["connections"].items():
            if cell.get("port_directions", {}).get(port) != "output":
                continue
            for bit in _bits(bits):
                if bit in arrival:
                    continue
                if not untimed:
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
    worst += d("T_margin")
    path, path_loads = [], [loads.get(worst_bit, 1)] if worst_bit is not None else []
    bit = worst_bit
    while bit is not None and bit in trace and len(path) < 10_000:
        kind, bit = trace[bit]
        path.append(kind)
        if bit is not None:
            path_loads.append(loads.get(bit, 1))
    path.reverse()
    path_loads.reverse()
    logic_fmax = 1000.0 / worst if worst > 0 else float("inf")
    cap = d("F_clock_max")
    return FmaxEstimate(
        fmax_mhz=min(logic_fmax, cap), critical_ns=worst,
        logic_levels=levels.get(worst_bit, 0) if worst_bit is not None else 0,
        path=path, path_loads=path_loads,
        limited_by="logic" if logic_fmax < cap else "clock network",
        family=model.family, unresolved_cells=len(comb) - done,
        delays={k: v.ns for k, v in model.delays.items()})
