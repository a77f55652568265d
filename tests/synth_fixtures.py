"""Real Yosys netlists with every cell class the resource parsers count (``tests/data/synth``).

A small Verilog design (:data:`VERILOG`) infers carry chains, flip-flops with reset and set,
multipliers, block RAMs, LUT RAM, a shift register and wide multiplexers; primitives no
Yosys pass infers on the family (CARRY8, URAM288, MUXF7, an input buffer) are instantiated.
:func:`generate` synthesizes it with the project's flows (``xcup``:
:func:`zoforge.reports.synth.synthesize`; ``ecp5``: ``synth_ecp5`` through
:func:`~zoforge.reports.synth.run_yosys`) and keeps what the parsers read: Yosys' hierarchical
``stat -json`` and, from the flattened ``write_json`` netlist, each cell's name and type.
The fixtures are committed (synthesis takes a minute); ``test_reports_synth_cells.py``
regenerates them under ``-m slow``. Write them again with
``.venv/bin/python tests/synth_fixtures.py``.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

DATA = Path(__file__).parent / "data" / "synth"
TOP = "cells_demo"
FAMILIES = ("xcup", "ecp5")

VERILOG = """
module cells_demo (
    input clk, input rst, input en, input we,
    input [7:0] a, input [7:0] b, input [17:0] c, input [17:0] d,
    input [9:0] addr, input [35:0] wdata, input [5:0] lut_addr, input [3:0] lut_wdata,
    input [5:0] sel, input [63:0] wide, input pin,
    output reg [31:0] acc, output reg [35:0] q, output reg [35:0] p, output reg [17:0] q18,
    output [3:0] lut_q, output reg muxed, output shifted, output reg [7:0] set_reg,
    output [7:0] co, output [7:0] sum, output [71:0] uram_q, output pin_q, output mux7);
  reg [35:0] mem [0:1023];
  reg [17:0] mem18 [0:511];
  reg [3:0] lutram [0:63];
  reg [31:0] shift;
  always @(posedge clk) begin
    acc <= acc + {24'b0, a} + {24'b0, b};
    p <= c * d;
    if (we) mem[addr] <= wdata;
    q <= mem[addr];
    if (we) mem18[addr[8:0]] <= c;
    q18 <= mem18[addr[8:0]];
    if (we) lutram[lut_addr] <= lut_wdata;
    if (en) shift <= {shift[30:0], a[0]};
    muxed <= wide[sel];
    if (rst) set_reg <= 8'hff; else set_reg <= a & b;
  end
  assign lut_q = lutram[lut_addr];
  assign shifted = shift[31];
%s
endmodule
"""
#: The instantiated primitives as black boxes (the flow checks the hierarchy before
#: synth_xilinx reads the primitive library).
XILINX_BOXES = """
(* blackbox *) module CARRY8(input CI, input CI_TOP, input [7:0] DI, input [7:0] S,
                             output [7:0] CO, output [7:0] O);
endmodule
(* blackbox *) module URAM288(input CLK, input [22:0] ADDR_A, input [71:0] DIN_A,
                              output [71:0] DOUT_A);
endmodule
(* blackbox *) module IBUF(input I, output O);
endmodule
(* blackbox *) module MUXF7(input I0, input I1, input S, output O);
endmodule
"""
XILINX_ONLY = """
  CARRY8 carry8 (.CI(1'b0), .CI_TOP(1'b0), .DI(a), .S(b), .CO(co), .O(sum));
  URAM288 uram (.CLK(clk), .ADDR_A({7'b0, addr, 6'b0}), .DIN_A({36'b0, wdata}),
                .DOUT_A(uram_q));
  IBUF ibuf (.I(pin), .O(pin_q));
  MUXF7 muxf7 (.I0(a[0]), .I1(a[1]), .S(en), .O(mux7));
"""
ECP5_ONLY = """
  assign co = a ^ b;
  assign sum = a | b;
  assign uram_q = 72'b0;
  assign pin_q = pin;
  assign mux7 = en ? a[1] : a[0];
"""
ECP5_SCRIPT = f"""read_verilog design.v
synth_ecp5 -top {TOP}
tee -q -o stat.json stat -json
write_json netlist.json
"""


def _fixture(stat: dict, netlist: dict) -> dict:
    cells = netlist["modules"][TOP]["cells"]
    return {"top": TOP, "stat": stat,
            "netlist_cells": {name: cell["type"] for name, cell in sorted(cells.items())}}


def generate(family: str) -> dict:
    """The fixture of ``family`` (``xcup`` or ``ecp5``), synthesized now."""
    if family == "xcup":
        from zoforge.reports.synth import synthesize
        result = synthesize(XILINX_BOXES + VERILOG % XILINX_ONLY, TOP, family="xcup")
        entry = result.log_path.parent
        stat = json.loads((entry / "stat.json").read_text())
        return _fixture(stat, json.loads(result.netlist_path.read_text()))
    from zoforge.reports.synth import run_yosys
    with tempfile.TemporaryDirectory(prefix="zoforge-ecp5-") as folder:
        folder = Path(folder)
        (folder / "design.v").write_text(VERILOG % ECP5_ONLY)
        (folder / "synth.ys").write_text(ECP5_SCRIPT)
        run_yosys(["-q", "-l", "synth.log", "-s", "synth.ys"], cwd=folder, log_name="synth.log")
        return _fixture(json.loads((folder / "stat.json").read_text()),
                        json.loads((folder / "netlist.json").read_text()))


def load(family: str) -> dict:
    return json.loads((DATA / f"{family}.json").read_text())


if __name__ == "__main__":
    DATA.mkdir(parents=True, exist_ok=True)
    for name in FAMILIES:
        (DATA / f"{name}.json").write_text(json.dumps(generate(name), indent=1,
                                                      sort_keys=True) + "\n")
        print(f"wrote {DATA / name}.json")
