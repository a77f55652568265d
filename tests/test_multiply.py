"""The pipelined multiplier (hw/pe/multiply.py): exact with its latency and enable in
Amaranth's simulator, and its ECP5 form (a MULT18X18D instance with its registers) the same
under Icarus, against a behavioural model of the primitive's registered mode."""
import random
import subprocess
from types import SimpleNamespace

import pytest
from amaranth import signed, unsigned
from amaranth.back import verilog
from amaranth.sim import Simulator

from zoforge.hw.pe.multiply import LATENCY, PipelinedMultiplier

SHAPES = [(signed(8), signed(8)), (signed(16), signed(8)), (unsigned(16), unsigned(16)),
          (signed(16), unsigned(16))]


def operands(shape, rng):
    low = -(1 << (shape.width - 1)) if shape.signed else 0
    high = (1 << (shape.width - 1)) - 1 if shape.signed else (1 << shape.width) - 1
    return [rng.choice([low, high, 0, -1 if shape.signed else 1]) if rng.random() < 0.3
            else rng.randint(low, high) for _ in range(200)]


def expected_products(a, b, en):
    """p after each edge: the operands taken at an enabled edge, multiplied at the next,
    the product registered once more at the one after."""
    a_reg = b_reg = product = p = 0
    out = []
    for x, y, e in zip(a, b, en):
        if e:
            p, product, a_reg, b_reg = product, a_reg * b_reg, x, y
        out.append(p)
    return out


@pytest.mark.parametrize("a_shape, b_shape", SHAPES)
def test_product_latency_and_enable_in_amaranth(a_shape, b_shape):
    rng = random.Random(a_shape.width * 31 + b_shape.width)
    dut = PipelinedMultiplier(a_shape, b_shape)
    a, b = operands(a_shape, rng), operands(b_shape, rng)
    en = [rng.random() < 0.8 for _ in a]
    got = []

    async def bench(ctx):
        for x, y, e in zip(a, b, en):
            ctx.set(dut.a, x)
            ctx.set(dut.b, y)
            ctx.set(dut.en, e)
            await ctx.tick()
            got.append(ctx.get(dut.p))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == expected_products(a, b, en)
    assert LATENCY == 3


# The MULT18X18D's registered mode as the Lattice ECP5 sysDSP documents it (inputs and
# output registered on CLK0 with CE0, signed when SIGNEDA/SIGNEDB), only what the instance uses.
MULT18X18D_MODEL = """
module MULT18X18D(%s);
  parameter REG_INPUTA_CLK = "NONE"; parameter REG_INPUTB_CLK = "NONE";
  parameter REG_OUTPUT_CLK = "NONE";
  %s
  reg [17:0] ar, br; reg [35:0] pr;
  wire signed [18:0] as_ = SIGNEDA ? {ar[17], ar} : {1'b0, ar};
  wire signed [18:0] bs_ = SIGNEDB ? {br[17], br} : {1'b0, br};
  wire signed [37:0] full = as_ * bs_;
  always @(posedge CLK0) if (CE0) begin ar <= A; br <= B; pr <= full[35:0]; end
  assign P = pr;
  initial begin ar = 0; br = 0; pr = 0; end
  always @* if (REG_INPUTA_CLK != "CLK0" || REG_INPUTB_CLK != "CLK0" || REG_OUTPUT_CLK != "CLK0")
    $fatal(1, "unregistered MULT18X18D");
endmodule
"""


def mult18x18d_model() -> str:
    pins = ([f"A{n}" for n in range(18)] + [f"B{n}" for n in range(18)]
            + [f"C{n}" for n in range(18)] + [f"P{n}" for n in range(36)]
            + ["SIGNEDA", "SIGNEDB", "SOURCEA", "SOURCEB"]
            + [f"{pin}{n}" for pin in ("CLK", "CE", "RST") for n in range(4)])
    declare = ["input " + ", ".join(p for p in pins if not p.startswith("P")) + ";",
               "output " + ", ".join(f"P{n}" for n in range(36)) + ";",
               "wire [17:0] A = {" + ", ".join(f"A{n}" for n in reversed(range(18))) + "};",
               "wire [17:0] B = {" + ", ".join(f"B{n}" for n in reversed(range(18))) + "};",
               "wire [35:0] P;"] + [f"assign P{n} = P[{n}];" for n in range(36)]
    return MULT18X18D_MODEL % (", ".join(pins), "\n  ".join(declare))


@pytest.mark.parametrize("a_shape, b_shape", SHAPES)
def test_ecp5_form_is_a_registered_mult18x18d_with_the_same_products(tmp_path, a_shape,
                                                                     b_shape, icarus):
    rng = random.Random(a_shape.width * 17 + b_shape.width)
    dut = PipelinedMultiplier(a_shape, b_shape)
    design = verilog.convert(dut, name="mul", platform=SimpleNamespace(family="ecp5"))
    assert design.count("MULT18X18D") == 1 and '.REG_OUTPUT_CLK("CLK0")' in design
    a, b = operands(a_shape, rng), operands(b_shape, rng)
    en = [rng.random() < 0.8 for _ in a]
    lines = [f"{x & 0x3ffff:05x} {y & 0x3ffff:05x} {int(e)}" for x, y, e in zip(a, b, en)]
    (tmp_path / "vectors.txt").write_text("\n".join(lines) + "\n")
    width_p = dut.p_shape.width
    bench = f"""
module bench;
  reg clk = 0, rst = 0; reg [17:0] a, b; reg en; wire [{width_p - 1}:0] p;
  integer file, count;
  mul dut(.clk(clk), .rst(rst), .a(a[{a_shape.width - 1}:0]), .b(b[{b_shape.width - 1}:0]),
          .en(en), .p(p));
  initial begin
    file = $fopen("vectors.txt", "r");
    while ($fscanf(file, "%h %h %h\\n", a, b, en) == 3) begin
      #1 clk = 1; #1 clk = 0; $display("%h", p);
    end
    $finish;
  end
endmodule
"""
    (tmp_path / "design.v").write_text(design)
    (tmp_path / "model.v").write_text(mult18x18d_model())
    (tmp_path / "bench.v").write_text(bench)
    subprocess.run(["iverilog", "-g2012", "-o", "sim", "bench.v", "design.v", "model.v"],
                   cwd=tmp_path, check=True, capture_output=True)
    run = subprocess.run(["vvp", "-n", "sim"], cwd=tmp_path, check=True, capture_output=True,
                         text=True)
    got = [int(line, 16) for line in run.stdout.split() if line.strip()]
    expected = [value & ((1 << width_p) - 1) for value in expected_products(a, b, en)]
    assert got == expected
