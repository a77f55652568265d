"""Put any design on a board, and write the Vivado project files for it.

A design's ports are far more than a board has pins, and logic without pins is optimised
away. :class:`BoardHarness` keeps it alive with a known, small overhead that Vivado's
hierarchical report shows separately from the design's instance ``dut``:

* every design input is driven from a shift register (as wide as all inputs together) fed
  one bit per cycle from switch 0;
* all design outputs are registered, then XOR-reduced into one bit that drives LED 0 by a
  tree of registered 4-input XORs (:func:`xor_tree`), so that the harness adds no path
  longer than one LUT between two registers (the stimulus bits are registers too);
* a clock domain the design names besides ``sync`` (its ``clock_domains``: the
  accelerator's softmax units) runs on the board's clock and reset, so the Vivado project
  and nextpnr time it at the board's clock, no slower than the unit's own.

:func:`write_vivado_project` writes ``top.v``, ``top.xdc``, ``top.tcl`` and
``build_top.sh`` from the platform's build plan (``do_build=False``); the Tcl reads
``activity.saif`` (:data:`SAIF_NAME`) if there is one beside it, with ``read_saif
-strip_path zoforge_tb``, so a SAIF whose design is re-rooted at ``zoforge_tb/dut``
(:data:`SAIF_ROOT`, :data:`DUT`) matches the harness; the report pipeline writes that file.
The Tcl then writes the utilization, timing and power reports that ``zoforge build
--vivado-reports`` parses. It stops before the bitstream.
"""
from __future__ import annotations

from pathlib import Path

from amaranth import Cat, ClockDomain, ClockSignal, Elaboratable, Module, ResetSignal, Signal
from amaranth.lib import io, wiring

from zoforge.boards.registry import Board
from zoforge.outputs import make_out_dir

__all__ = ["BoardHarness", "write_vivado_project", "xor_tree", "SAIF_NAME", "SAIF_ROOT", "DUT",
           "TOP", "XOR_FAN_IN"]

SAIF_NAME = "activity.saif"     # the SAIF the Vivado Tcl reads, beside it
SAIF_ROOT = "zoforge_tb"        # the path prefix ``read_saif -strip_path`` removes
DUT = "dut"                     # the design's instance name in the harness
TOP = "top"
XOR_FAN_IN = 4                  # bits per XOR of the output tree: one ECP5 LUT4


class BoardHarness(Elaboratable):
    """Wraps ``design`` (a ``wiring.Component``) as submodule ``dut`` of a board top."""

    def __init__(self, design):
        self.design = design

    def elaborate(self, platform):
        m = Module()
        m.submodules[DUT] = dut = self.design
        for domain in getattr(dut, "clock_domains", ()):
            m.domains += ClockDomain(domain)
            m.d.comb += [ClockSignal(domain).eq(ClockSignal("sync")),
                         ResetSignal(domain).eq(ResetSignal("sync", allow_reset_less=True))]
        inputs, outputs = [], []
        for _path, member, value in dut.signature.flatten(dut):
            (inputs if member.flow == wiring.In else outputs).append(value)
        m.submodules.switch = switch = io.Buffer("i", platform.request("switch", 0, dir="-"))
        m.submodules.led = led = io.Buffer("o", platform.request("led", 0, dir="-"))
        serial = switch.i
        width = sum(len(value) for value in inputs)
        if width:
            stimulus = Signal(width)
            m.d.sync += stimulus.eq(Cat(serial, stimulus[:-1]))
            offset = 0
            for value in inputs:
                m.d.comb += value.eq(stimulus[offset:offset + len(value)])
                offset += len(value)
        m.d.comb += led.o.eq(xor_tree(m, Cat(*outputs)))
        return m


def xor_tree(m: Module, value) -> Signal:
    """The XOR of ``value``'s bits, pipelined: ``value`` into a register, then registered
    XORs of :data:`XOR_FAN_IN` bits (one LUT4 per stage) down to one bit; returns that bit's
    register. A pure function of ``value`` a fixed number of cycles ago, never a long path."""
    level = Signal(len(value), name="observed_0")
    m.d.sync += level.eq(value)
    depth = 0
    while len(level) > 1:
        depth += 1
        groups = range(0, len(level), XOR_FAN_IN)
        reduced = Signal(len(groups), name=f"observed_{depth}")
        m.d.sync += reduced.eq(Cat(level[start:start + XOR_FAN_IN].xor() for start in groups))
        level = reduced
    return level


def write_vivado_project(board: Board, design, out_dir: Path | str, frequency_mhz: float
                         ) -> dict[str, Path]:
    """Write the Vivado batch project for ``design`` on ``board`` into ``out_dir``.

    Returns file name -> path. The Tcl reads :data:`SAIF_NAME` from ``out_dir`` when it
    exists (the report pipeline writes it there, re-rooted).
    """
    out = make_out_dir("--out", out_dir)
    platform = board.make_platform(frequency_mhz * 1e6)
    after_route = "\n".join([
        f"if {{[file exists {SAIF_NAME}]}} {{",
        f"    read_saif -strip_path {SAIF_ROOT} {SAIF_NAME}",
        "}",
        f"report_power -hierarchical_depth 4 -file {TOP}_power_hierarchical.rpt",
    ])
    plan = platform.build(BoardHarness(design), name=TOP, do_build=False,
                          script_after_route=after_route,
                          # reports are what we want; stop before the bitstream
                          script_before_bitstream="quit")
    plan.extract(str(out))
    return {name: out / name for name in plan.files}
