"""The UltraScale+ form of the packed multiplier (hw/pe/packed_multiply.py): one hand-placed
DSP48E2 with its A2/B2, M and P registers, and the behavioural model that simulates it
(sim/models/dsp48e2.v).

* the model against plain Python integer products, register by register, each clock
  enable on its own (an independent derivation of the primitive's registered multiply), and
  its refusal of anything outside the subset it models;
* the xcup form against golden/packing.py's arithmetic (corners and random triples under a
  random ``en``, both ``corrected`` modes, both ``borrowed`` modes) under Icarus and
  Verilator, with the fabric form's latency;
* the xcup Verilog: exactly one DSP48E2 with AREG = BREG = MREG = PREG = 1, and none on
  other platforms; an engine in that form lint-clean with the model;
* Yosys ``synth_xilinx -family xcup`` of an 8 x 8 paired array in that form: its
  multipliers have no fabric flip-flop left (slow).
"""
from __future__ import annotations

import json
import random
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from zoforge.golden.packing import borrowed_high, high_field, pack, split
from zoforge.hw.export import to_verilog
from zoforge.hw.pe.packed_multiply import (DSP48E2_FAMILIES, LATENCY, PackedMultiplier,
                                           uses_dsp48e2)
from zoforge.sim.models import (MODELS, blackbox_stubs, model_path, models_for,
                                with_blackbox_stubs, with_models)
from zoforge.sim.toolchain import apply_toolchain_env

CORNERS = [-128, -127, -1, 0, 1, 126, 127]
STAGES = ("AREG", "BREG", "MREG", "PREG")


# -- running a plain Verilog bench on either simulator -------------------------------------

def run_bench(simulator: str, folder: Path, sources: dict[str, str],
              check: bool = True) -> subprocess.CompletedProcess:
    """Write ``sources`` (file name -> text) into ``folder`` and run module ``bench`` under
    ``simulator`` (Icarus: iverilog + vvp; Verilator: ``--binary``); returns the run."""
    apply_toolchain_env()
    for name, text in sources.items():
        (folder / name).write_text(text)
    files = list(sources)
    if simulator == "icarus":
        build = ["iverilog", "-g2012", "-s", "bench", "-o", "sim", *files]
        program = ["vvp", "-n", "sim"]
    else:
        build = ["verilator", "--binary", "-Wno-fatal", "-Wno-lint", "-Wno-style",
                 "-CFLAGS", "-std=c++20", "--top-module", "bench", "-Mdir", "obj", "-o", "sim",
                 *files]
        program = ["obj/sim"]
    built = subprocess.run(build, cwd=folder, capture_output=True, text=True)
    assert built.returncode == 0, (built.stdout + built.stderr)[-3000:]
    run = subprocess.run(program, cwd=folder, capture_output=True, text=True)
    if check:
        assert run.returncode == 0 and "DSP48E2 model" not in run.stdout, run.stdout + run.stderr
    return run


def signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


# -- the model against Python integers -----------------------------------------------------

SUBSET = """.ACASCREG(1), .ADREG(0), .ALUMODEREG(0), .AMULTSEL("A"), .AREG(1),
    .AUTORESET_PATDET("NO_RESET"), .A_INPUT("DIRECT"), .BCASCREG(1), .BMULTSEL("B"), .BREG(1),
    .B_INPUT("DIRECT"), .CARRYINREG(0), .CARRYINSELREG(0), .CREG(0), .DREG(0), .INMODEREG(0),
    .MREG(1), .OPMODEREG(0), .PREADDINSEL("A"), .PREG(1), .USE_MULT("MULTIPLY"),
    .USE_PATTERN_DETECT("NO_PATDET"), .USE_SIMD("ONE48"), .USE_WIDEXOR("FALSE")"""

MODEL_BENCH = """
module bench;
  reg clk = 0; reg [29:0] a; reg [17:0] b; reg cea2, ceb2, cem, cep;
  reg [8:0] opmode = 9'b000000101; reg rstp = 0; reg [47:0] c = 0;
  wire [47:0] p, pcout; wire [29:0] acout; wire [17:0] bcout;
  integer file;
  DSP48E2 #(%(params)s) dut (
    .A(a), .B(b), .CLK(clk), .CEA2(cea2), .CEB2(ceb2), .CEM(cem), .CEP(cep),
    .OPMODE(opmode), .ALUMODE(4'b0), .INMODE(5'b0), .CARRYINSEL(3'b0), .CARRYIN(1'b0),
    .ACIN(30'b0), .BCIN(18'b0), .C(c), .D(27'b0), .PCIN(48'b0), .CARRYCASCIN(1'b0),
    .MULTSIGNIN(1'b0), .CEA1(1'b0), .CEB1(1'b0), .CEAD(1'b0), .CEALUMODE(1'b0), .CEC(1'b0),
    .CECARRYIN(1'b0), .CECTRL(1'b0), .CED(1'b0), .CEINMODE(1'b0),
    .RSTA(1'b0), .RSTB(1'b0), .RSTM(1'b0), .RSTP(rstp), .RSTC(1'b0), .RSTD(1'b0),
    .RSTALLCARRYIN(1'b0), .RSTALUMODE(1'b0), .RSTCTRL(1'b0), .RSTINMODE(1'b0),
    .P(p), .PCOUT(pcout), .ACOUT(acout), .BCOUT(bcout));
  initial begin
    file = $fopen("vectors.txt", "r");
    while ($fscanf(file, "%%h %%h %%h %%h %%h %%h\\n", a, b, cea2, ceb2, cem, cep) == 6) begin
      #1 clk = 1; #1 clk = 0;
      $display("%%h %%h %%h %%h", p, pcout, acout, bcout);
    end
    %(after)s
    $finish;
  end
endmodule
"""


def model_reference(vectors) -> list[tuple[int, int, int]]:
    """(P, ACOUT, BCOUT) after each edge, from Python integers: A2/B2 take A/B under their
    enables, M the product of A2's low 27 bits and B2 (both two's complement), P takes M;
    every register updated from the values before the edge, all starting at 0."""
    a2 = b2 = m = p = 0
    out = []
    for a, b, cea2, ceb2, cem, cep in vectors:
        product = signed(a2, 27) * signed(b2, 18)
        p, m = (m if cep else p), (product if cem else m)
        a2, b2 = (a if cea2 else a2), (b if ceb2 else b2)
        out.append((p % (1 << 48), a2, b2))
    return out


def test_model_is_the_registered_product_of_python_integers(tmp_path, simulator):
    rng = random.Random(48)
    extremes_a = [-(1 << 26), (1 << 26) - 1, -1, 0, 1]
    extremes_b = [-(1 << 17), (1 << 17) - 1, -1, 0, 1]
    vectors = []
    for x in extremes_a:                       # every extreme pair, every stage enabled
        for y in extremes_b:
            vectors.append((x % (1 << 27) | (rng.getrandbits(3) << 27), y % (1 << 18),
                            1, 1, 1, 1))
    for _ in range(400):                       # A's bits 29:27 random: the multiply ignores them
        vectors.append((rng.getrandbits(30), rng.getrandbits(18),
                        *(int(rng.random() < 0.7) for _ in range(4))))
    vectors += [(0, 0, 1, 1, 1, 1)] * 3
    (tmp_path / "vectors.txt").write_text("".join(
        f"{a:08x} {b:05x} {e1} {e2} {e3} {e4}\n" for a, b, e1, e2, e3, e4 in vectors))
    bench = MODEL_BENCH % {"params": SUBSET, "after": ""}
    run = run_bench(simulator, tmp_path, {"bench.v": bench,
                                           "dsp48e2.v": model_path("DSP48E2").read_text()})
    got = [tuple(int(word, 16) for word in line.split()) for line in run.stdout.splitlines()
           if re.fullmatch(r"[0-9a-f]{12} [0-9a-f]{12} [0-9a-f]{8} [0-9a-f]{5}", line.strip())]
    assert len(got) == len(vectors)
    expected = model_reference(vectors)
    assert [(p, acout, bcout) for p, _, acout, bcout in got] == expected
    assert all(pcout == p for p, pcout, _, _ in got)
    # the extremes' products all went through P sign-extended
    assert {p for p, *_ in got} >= {(-(1 << 26) * -(1 << 17)) % (1 << 48),
                                    (-(1 << 26) * ((1 << 17) - 1)) % (1 << 48)}


@pytest.mark.parametrize("override, after", [
    ('.PREG(0)', ""), ('.AREG(2)', ""), ('.MREG(0)', ""), ('.ACASCREG(0)', ""),
    ('.CREG(1)', ""), ('.USE_MULT("NONE")', ""), ('.AMULTSEL("AD")', ""),
    ('.IS_CLK_INVERTED(1\'b1)', ""),
    ("", "opmode = 9'b000110101; #1 clk = 1; #1 clk = 0;"),
    ("", "rstp = 1; #1 clk = 1; #1 clk = 0;"),
    ("", "c = 48'd5; #1 clk = 1; #1 clk = 0;"),
])
def test_model_stops_outside_its_subset(tmp_path, override, after, icarus):
    """A parameter or an input outside the modelled subset is a $fatal, not a guess."""
    params = SUBSET
    if override:
        name = override[1:override.index("(")]
        params = re.sub(rf"\.{name}\([^)]*\)", override, params) if f".{name}(" in params \
            else params + ", " + override
    (tmp_path / "vectors.txt").write_text("0000001 00001 1 1 1 1\n")
    run = run_bench("icarus", tmp_path, {"bench.v": MODEL_BENCH % {"params": params,
                                                                   "after": after},
                                          "dsp48e2.v": model_path("DSP48E2").read_text()},
                    check=False)
    assert "DSP48E2 model" in run.stdout + run.stderr, run.stdout + run.stderr


def test_models_are_appended_only_where_instantiated():
    plain = to_verilog(PackedMultiplier(corrected=False), "pm")
    xcup = to_verilog(PackedMultiplier(corrected=False), "pm", family="xcup")
    assert models_for(plain) == [] and with_models(plain) == plain
    assert models_for(xcup) == ["DSP48E2"]
    both = with_models(xcup)
    assert both.startswith(xcup.rstrip("\n")) and both.count("module DSP48E2") == 1
    assert models_for(both) == []                  # defined now: not appended twice
    assert set(MODELS) == {"DSP48E2"}
    assert blackbox_stubs(plain) == "" and with_blackbox_stubs(plain) == plain
    stub = blackbox_stubs(xcup)
    assert stub.startswith("(* blackbox *)\nmodule DSP48E2") and "always" not in stub
    assert "input [29:0] A;" in stub and "output [47:0] P;" in stub


# -- the xcup form's Verilog ---------------------------------------------------------------

def _dsp_parameters(verilog: str) -> list[dict[str, str]]:
    """Each DSP48E2 instance's parameters (name -> value text) in Amaranth's Verilog."""
    out = []
    for block in re.findall(r"DSP48E2 #\((.*?)\)\s+\S+\s*\(", verilog, re.DOTALL):
        out.append(dict(re.findall(r"\.(\w+)\(([^)]*)\)", block)))
    return out


@pytest.mark.parametrize("borrowed", [False, True])
def test_xcup_form_is_exactly_one_dsp48e2_with_every_register_stage(borrowed):
    verilog = to_verilog(PackedMultiplier(corrected=False, borrowed=borrowed), "pm",
                         family="xcup")
    (params,) = _dsp_parameters(verilog)
    assert verilog.count("DSP48E2 #(") == 1
    assert {stage: params[stage] for stage in STAGES} == dict.fromkeys(STAGES, "32'd1")
    assert params["ACASCREG"] == params["BCASCREG"] == "32'd1"
    assert params["USE_MULT"] == '"MULTIPLY"' and params["AMULTSEL"] == '"A"'
    assert "always @(posedge" not in verilog          # no fabric register left
    assert ".OPMODE(9'h005)" in verilog and ".ALUMODE(4'h0)" in verilog
    assert ".CEA2(en)" in verilog and ".CEM(en)" in verilog and ".CEP(en)" in verilog


def test_the_dsp48e2_form_is_chosen_by_the_ultrascale_families_only():
    from zoforge.boards.zcu102 import zcu102_platform
    assert zcu102_platform().family == "ultrascaleplus"     # Amaranth's XilinxPlatform name
    assert {"xcup", "ultrascaleplus"} <= set(DSP48E2_FAMILIES)
    for family in DSP48E2_FAMILIES:
        assert to_verilog(PackedMultiplier(corrected=False), "pm", family).count(
            "DSP48E2 #(") == 1
    for family in (None, "xc7", "ecp5"):
        assert "DSP48E2" not in to_verilog(PackedMultiplier(corrected=False), "pm", family)
    # corrected=True keeps the fabric form (its correction would follow P: module docstring)
    assert "DSP48E2" not in to_verilog(PackedMultiplier(corrected=True), "pm", "xcup")
    assert not uses_dsp48e2(None) and uses_dsp48e2(zcu102_platform())
    assert not uses_dsp48e2(zcu102_platform(), corrected=True)


def test_an_engine_in_the_xcup_form_is_lint_clean_with_the_model():
    from zoforge.hw.engine.engine import Engine
    from zoforge.sim.lint import lint_verilog
    top = "engine_4x2"
    verilog = to_verilog(Engine(rows=4, cols=2, paired=True), top, family="xcup")
    assert verilog.count("DSP48E2 #(") == 4                       # 2 pair-rows x 2 columns
    result = lint_verilog(with_models(verilog), top)
    assert result.clean, str(result)


# -- the xcup form against golden/packing.py -----------------------------------------------

def golden_products(triples, corrected: bool) -> list[tuple[int, int]]:
    """(p_lo, p_hi) of each INT8 triple from golden/packing.py's bit fields: the split
    with the correction, or the high field as it is (16-bit signed) without."""
    a_lo, a_hi, b = (np.array(v, dtype=np.int64) for v in zip(*triples))
    full = pack(a_lo, a_hi) * b
    p_lo, p_hi = split(full)
    if not corrected:
        p_hi = (high_field(full)[0] + (1 << 15)) % (1 << 16) - (1 << 15)
    return list(zip(map(int, p_lo), map(int, p_hi)))


def pipelined(values, en, latency: int = LATENCY):
    """The block's outputs after each edge: ``values[i]`` enters at an enabled edge and
    moves one stage at each enabled edge after it (all stages start at 0)."""
    stages = [(0, 0)] * latency
    out = []
    for value, enabled in zip(values, en):
        if enabled:
            stages = [value] + stages[:-1]
        out.append(stages[-1])
    return out


PACKED_BENCH = """
module bench;
  reg clk = 0, rst = 0; reg [7:0] a_lo, b; reg [8:0] a_hi; reg en;
  wire [15:0] p_lo, p_hi;
  integer file;
  pm dut(.clk(clk), .rst(rst), .a_lo(a_lo), .a_hi(a_hi[%(hi)d:0]), .b(b), .en(en),
         .p_lo(p_lo), .p_hi(p_hi));
  initial begin
    file = $fopen("vectors.txt", "r");
    while ($fscanf(file, "%%h %%h %%h %%h\\n", a_lo, a_hi, b, en) == 4) begin
      #1 clk = 1; #1 clk = 0;
      $display("%%h %%h", p_lo, p_hi);
    end
    $finish;
  end
endmodule
"""


@pytest.mark.parametrize("corrected, borrowed", [(False, True), (False, False), (True, False)])
def test_xcup_form_gives_the_golden_products_with_the_same_latency_and_enable(
        tmp_path, simulator, corrected, borrowed):
    """Every corner triple (-128, 127, 0, -1 and the sign mixes on each operand), then
    random ones, under a random enable: each output follows the fabric form's pipeline of
    golden/packing.py's values; ``borrowed``: fed ``(a_lo, a_hi - [a_lo < 0])``."""
    rng = random.Random(2 * corrected + borrowed)
    triples = [(x, y, z) for x in CORNERS for y in CORNERS for z in CORNERS]
    triples += [tuple(rng.randint(-128, 127) for _ in range(3)) for _ in range(400)]
    en = [int(rng.random() < 0.75) for _ in triples] + [1] * LATENCY
    triples += [(0, 0, 0)] * LATENCY
    fed = [(a_lo, int(borrowed_high(a_lo, a_hi)) if borrowed else a_hi, b)
           for a_lo, a_hi, b in triples]
    (tmp_path / "vectors.txt").write_text("".join(
        f"{a_lo & 0xff:02x} {a_hi & 0x1ff:03x} {b & 0xff:02x} {e}\n"
        for (a_lo, a_hi, b), e in zip(fed, en)))
    dut = PackedMultiplier(corrected=corrected, borrowed=borrowed)
    verilog = to_verilog(dut, "pm", family="xcup")
    assert ("DSP48E2" in verilog) == (not corrected)
    run = run_bench(simulator, tmp_path, {
        "bench.v": PACKED_BENCH % {"hi": 8 if borrowed else 7},
        "design.v": with_models(verilog)})
    got = [tuple(signed(int(word, 16), 16) for word in line.split())
           for line in run.stdout.splitlines() if re.fullmatch(r"[0-9a-f]{4} [0-9a-f]{4}",
                                                               line.strip())]
    expected = pipelined(golden_products(triples, corrected), en)
    assert len(got) == len(triples) and got == expected
    assert any(lo < 0 for lo, _ in expected) and any(e == 0 for e in en)
    # the plain products, as a cross-check of the golden fields themselves
    plain = [(a_lo * b, a_hi * b - (0 if corrected else int(a_lo * b < 0)))
             for a_lo, a_hi, b in triples]
    assert expected == pipelined(plain, en)


# -- Yosys: no fabric flip-flop left in the multipliers ------------------------------------

def _multiplier_modules(stat: dict) -> dict[str, dict[str, int]]:
    """Cell counts of every PackedMultiplier module (``*.multiply``) in ``stat -json``."""
    return {name: {cell.lstrip("\\"): int(n)
                   for cell, n in (info.get("num_cells_by_type") or {}).items()}
            for name, info in stat["modules"].items() if name.endswith(".multiply")}


@pytest.mark.slow
def test_yosys_keeps_no_multiplier_register_in_the_fabric_of_the_xcup_form():
    """``synth_xilinx -family xcup`` of the 8 x 8 paired array, platform-less and in the
    xcup form: every one of its 32 multipliers is one DSP48E2 either way, with its operand,
    M and product registers as fabric flip-flops in the first and none in the second, and
    the array's flip-flop count drops by exactly those."""
    from zoforge.hw.pe.array import SystolicArray
    from zoforge.reports.synth import synthesize

    counts = {}
    for family in (None, "xcup"):
        verilog = to_verilog(SystolicArray(8, 8, paired=True), "array", family=family)
        result = synthesize(with_blackbox_stubs(verilog), "array", family="xcup",
                            netlist=False)
        stat = json.loads((result.log_path.parent / "stat.json").read_text())
        counts[family] = (result.resources, _multiplier_modules(stat))
    (fabric_total, fabric), (xcup_total, xcup) = counts[None], counts["xcup"]
    assert len(fabric) == len(xcup) == 32
    ff = {"FDRE", "FDSE", "FDCE", "FDPE"}
    fabric_ff = sum(n for cells in fabric.values() for c, n in cells.items() if c in ff)
    assert all(cells.get("DSP48E2") == 1 for cells in (*fabric.values(), *xcup.values()))
    assert all(not set(cells) & ff for cells in xcup.values()), xcup
    assert fabric_ff >= 32 * 80                       # ~90 per pair (docs/accelerator.md)
    assert fabric_total["FF"] - xcup_total["FF"] == fabric_ff
    assert xcup_total["DSP"] == fabric_total["DSP"] == 32


# -- zoforge build: writes, estimates and co-simulates the xcup form -----------------------

@pytest.mark.slow
def test_a_zcu102_build_estimates_and_co_simulates_the_dsp48e2_form(tmp_path):
    """``build_design`` of a small paired engine on the ZCU102, power included: its Verilog
    holds its two DSP48E2s (one pair-row, two columns), the estimate counts them, the activity
    co-simulation (Verilator, the engine's own bench) runs with the model appended, and the
    Vivado project (Amaranth's Xilinx platform, family "ultrascaleplus") has them too."""
    from zoforge.boards.registry import get_board
    from zoforge.hw.designs import get_design
    from zoforge.hw.engine.config import EngineConfig
    from zoforge.reports.pipeline import Progress, build_design

    config = EngineConfig(rows=2, cols=2, paired=True, max_m=8, max_k=8, max_n=8)
    report = build_design(get_board("zcu102"), get_design("engine"), config, tmp_path, 300.0,
                          activity_cycles=200, progress=Progress(quiet=True))
    verilog = (tmp_path / report.files.verilog).read_text()
    assert verilog.count("DSP48E2 #(") == config.multipliers == 2
    assert report.resources.blocks["array"]["DSP"] == 2          # the rest: requant
    assert report.activity is not None and 0 < report.activity.toggle_rate < 2
    saif = Path(report.activity.saif).read_text()
    assert "DSP48E2" in saif or "dsp48e2" in saif          # the model's nets were traced
    vivado = (tmp_path / "vivado" / "top.v").read_text()
    assert vivado.count("DSP48E2 #(") == 2
