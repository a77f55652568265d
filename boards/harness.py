"""Put any design on a board, and write the Vivado project files for it.

A design's ports are far more than a board has pins, and logic without pins is optimised
away. :class:`BoardHarness` keeps it alive with a known, small overhead that Vivado's
hierarchical report shows separately from the design's instance ``dut``:

* every design input is driven from a shift register (as wide as all inputs together) fed
  one bit per cycle from switch 0;
* all design outputs are XOR-reduced into one register that drives LED 0.

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

from amaranth import Cat, Elaboratable, Module, Signal
from amaranth.lib import io, wiring

from zoforge.boards.registry import Board

__all__ = ["BoardHarness", "write_vivado_project", "SAIF_NAME", "SAIF_ROOT", "DUT", "TOP"]

SAIF_NAME = "activity.saif"     # the SAIF the Vivado Tcl reads, beside it
SAIF_ROOT = "zoforge_tb"        # the path prefix ``read_saif -strip_path`` removes
DUT = "dut"                     # the design's instance name in the harness
TOP = "top"


class BoardHarness(Elaboratable):
    """Wraps ``design`` (a ``wiring.Component``) as submodule ``dut`` of a board top."""

    def __init__(self, design):
        self.design = design

    def elaborate(self, platform):
        m = Module()
        m.submodules[DUT] = dut = self.design
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
        observed = Signal()
        m.d.sync += observed.eq(Cat(*outputs).xor() if outputs else 0)
        m.d.comb += led.o.eq(observed)
        return m


def write_vivado_project(board: Board, design, out_dir: Path | str, frequency_mhz: float
                         ) -> dict[str, Path]:
    """Write the Vivado batch project for ``design`` on ``board`` into ``out_dir``.

    Returns file name -> path. The Tcl reads :data:`SAIF_NAME` from ``out_dir`` when it
    exists (the report pipeline writes it there, re-rooted).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
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
