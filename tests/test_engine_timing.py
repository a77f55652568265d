"""Timing closure of the engine (slow): the 4 x 4 engine placed and routed on the ECP5
(nextpnr, the board harness included) meets 150 MHz, and the PE's and the requantizer's
multipliers sit between registers that synthesis packs into the DSP (on ``xc7``: Yosys
0.70 packs DSP registers only for DSP48E1; for DSP48E2, ``xcup``, it packs none)."""
import json

import pytest
from amaranth.back import verilog

from zoforge.boards.registry import get_board
from zoforge.hw.engine.engine import Engine
from zoforge.hw.pe.pe import ProcessingElement
from zoforge.hw.pe.requant import RequantStream
from zoforge.reports.nextpnr import place_and_route
from zoforge.reports.synth import synthesize

GOAL_MHZ = 150.0


@pytest.mark.slow
def test_engine_4x4_meets_150_mhz_after_place_and_route_on_ecp5():
    board = get_board("ulx3s-85f")
    result = place_and_route(board, Engine(rows=4, cols=4), GOAL_MHZ)   # constrained at the goal
    (fmax,) = result.fmax_mhz.values()
    assert fmax >= GOAL_MHZ, f"{fmax:.1f} MHz (log: {result.log_path})"
    assert result.utilization["MULT18X18D"]["used"] == 16 + 2 * 4    # PEs + 2 per lane


def dsp_registers(component, name: str) -> list[dict[str, int]]:
    """AREG/BREG/MREG/PREG of every DSP48E1 of ``component`` synthesized for ``xc7``."""
    result = synthesize(verilog.convert(component, name=name), name, family="xc7")
    netlist = json.loads(result.netlist_path.read_text())
    return [{key: int(cell["parameters"][key], 2) for key in ("AREG", "BREG", "MREG", "PREG")}
            for module in netlist["modules"].values() for cell in module["cells"].values()
            if cell["type"] == "DSP48E1"]


@pytest.mark.slow
@pytest.mark.parametrize("name, component, count", [
    ("pe", ProcessingElement, 1), ("requant", lambda: RequantStream(1), 2)])
def test_multipliers_pack_their_pipeline_registers_into_the_dsp(name, component, count):
    registers = dsp_registers(component(), name)
    assert len(registers) == count
    for dsp in registers:
        assert (dsp["AREG"], dsp["BREG"], dsp["MREG"]) == (1, 1, 1), dsp
