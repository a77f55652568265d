"""Switching activity of a design from co-simulation (Verilator ``--trace-saif``).

:func:`measure_activity` runs the generic stimulus of :mod:`zoforge.reports.activity_bench`
on any design's Verilog: reset, then ``cycles`` clock cycles with handshake / enable inputs
held high and the other inputs random every cycle (``mode="random"``) or random once and
held (``mode="hold"``). The SAIF it records gives each net bit's toggle count; the toggle
rate is toggles per clock cycle (Vivado's "toggle rate" divided by 100: a flip-flop that
changes every cycle has 1.0, the clock itself 2.0).

Verilog elaborated for a board's family may instantiate vendor primitives (a DSP48E2: see
:mod:`zoforge.hw.pe.packed_multiply`); :func:`measure_activity` simulates it with their
behavioural models appended (:func:`zoforge.sim.models.with_models`), so the primitive's
registers are nets of the SAIF as the fabric registers they replace were.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from zoforge.errors import check_choice, check_int_range
from zoforge.reports.saif import SaifFile, SaifInstance, read_saif
from zoforge.sim.cosim import run_cocotb
from zoforge.sim.models import with_models

__all__ = ["Port", "verilog_ports", "stimulus_inputs", "Activity", "measure_activity",
           "toggle_rates", "simulator_version", "HIGH_INPUTS", "MODES"]

MODES = ("random", "hold")
# Inputs held at all-ones: stream handshakes and enables, matched on the last name part.
HIGH_INPUTS = ("valid", "ready", "en", "enable", "start", "run", "go", "step")
_CONTROL = ("clk", "rst")


@dataclass(frozen=True)
class Port:
    name: str
    direction: str   # "input" / "output" / "inout"
    width: int


def verilog_ports(verilog: str, top: str) -> list[Port]:
    """The ports of module ``top`` in ``verilog`` (Amaranth's output style)."""
    header = re.search(rf"^module\s+{re.escape(top)}\s*\(", verilog, re.MULTILINE)
    if header is None:
        raise ValueError(f"module {top!r} not found in the Verilog")
    end = verilog.find("endmodule", header.end())
    body = verilog[header.end():end]
    ports = []
    for match in re.finditer(r"^\s*(input|output|inout)\s+(?:wire\s+|reg\s+)?"
                             r"(?:\[(\d+):(\d+)\]\s*)?\\?([^\s;]+)\s*;", body, re.MULTILINE):
        direction, msb, lsb, name = match.groups()
        width = abs(int(msb) - int(lsb)) + 1 if msb is not None else 1
        ports.append(Port(name, direction, width))
    return ports


def stimulus_inputs(ports: list[Port], mode: str = "random") -> list[list]:
    """``[name, width, how]`` for every data input (``how``: "high", "random" or "hold")."""
    check_choice("--activity-mode", mode, MODES)
    out = []
    for port in ports:
        if port.direction != "input" or port.name in _CONTROL:
            continue
        last = port.name.split("__")[-1].lower()
        out.append([port.name, port.width, "high" if last in HIGH_INPUTS else mode])
    return out


@dataclass
class Activity:
    """Measured switching activity.

    saif:          the SAIF file (what the Vivado Tcl reads too)
    cycles:        clock cycles recorded (reset included)
    toggle_rate:   mean toggles per cycle over the design's net bits (clock, reset excluded)
    block_rates:   the same per top-level block (SAIF child instance of the top)
    nets:          number of net bits averaged
    """

    saif: Path
    top: str
    cycles: int
    clock_ns: float
    toggle_rate: float
    block_rates: dict[str, float] = field(default_factory=dict)
    nets: int = 0
    mode: str = "random"
    source: str = "activity-model (Verilator SAIF)"


def simulator_version() -> str:
    """The simulator and test runner that measure activity, with their versions."""
    return (f"verilator {metadata.version('verilator')}, "
            f"cocotb {metadata.version('cocotb')}")


def measure_activity(verilog: str, top: str, cycles: int = 2000, mode: str = "random",
                     seed: int = 1, clock_ns: float = 10.0, data_dir: Path | None = None,
                     reset_cycles: int = 4, bench: tuple[str, dict] | None = None,
                     extra_files: dict[str, str] | None = None) -> Activity:
    """Simulate ``verilog`` with the generic stimulus and measure its toggle rates.

    clock_ns: the simulated clock period; give the report's target clock, because Vivado
    turns the SAIF's toggle counts into rates over its duration in time.
    bench:    a design's own stimulus instead of the generic one: (cocotb test module,
              its bench args); it receives ``cycles``, ``seed`` and ``period_ps`` (the
              clock period it must use) merged into the args.
    """
    check_int_range("--activity-cycles", cycles, 10, 10_000_000)
    period_ps = 2 * max(1, round(clock_ns * 500))     # even, for a 50 % duty cycle
    common = {"cycles": cycles, "seed": seed, "period_ps": period_ps,
              "reset_cycles": reset_cycles}
    if bench is None:
        module = "zoforge.reports.activity_bench"
        args = dict(common, inputs=stimulus_inputs(verilog_ports(verilog, top), mode))
    else:
        module, args = bench[0], dict(bench[1], **common)
        mode = "design bench " + module
    result = run_cocotb(verilog=with_models(verilog), toplevel=top, test_module=module,
                        args=args,
                        saif=True, data_dir=data_dir, extra_files=extra_files)
    if not result.passed or result.waves is None:
        raise RuntimeError(f"activity simulation failed: {result.failures} "
                           f"(see {result.data_dir / 'sim.log'})")
    saif = read_saif(result.waves)
    clock_ns = period_ps / 1000
    total_cycles = round(saif.duration_s / (clock_ns * 1e-9))
    rate, blocks, nets = toggle_rates(saif, top, total_cycles)
    return Activity(saif=Path(result.waves), top=top, cycles=total_cycles, clock_ns=clock_ns,
                    toggle_rate=rate, block_rates=blocks, nets=nets, mode=mode)


def toggle_rates(saif: SaifFile, top: str, cycles: int) -> tuple[float, dict[str, float], int]:
    """(design toggle rate, per-block toggle rates, net bits counted) from ``saif``."""
    root = saif.instances.get(top)
    if root is None:
        raise ValueError(f"SAIF has no instance {top!r}: {sorted(saif.instances)}")
    rate, nets = _mean_rate(root, cycles)
    # Amaranth suffixes an instance name that clashes with a signal (``acc$13``)
    blocks = {re.sub(r"\$\d+$", "", name): _mean_rate(child, cycles)[0]
              for name, child in root.children.items()}
    return rate, blocks, nets


def _mean_rate(instance: SaifInstance, cycles: int) -> tuple[float, int]:
    counts = [count for name, count in instance.walk()
              if name.rsplit("/", 1)[-1] not in _CONTROL]
    if not counts or cycles <= 0:
        return 0.0, len(counts)
    return sum(counts) / len(counts) / cycles, len(counts)
