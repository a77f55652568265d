# amaranth: UnusedElaboratable=no
"""The Accelerator top (hw/accel/top.py): a scaled-down instance's units, ports and DSP
blocks counted in its generated Verilog, and its lint under the project's waivers."""
import re

import pytest

from zoforge.hw.accel import AcceleratorConfig
from zoforge.hw.accel.top import accelerator_memories, elaborate_accelerator
from zoforge.hw.designs import get_design
from zoforge.hw.export import to_verilog

SMALL = AcceleratorConfig(engines=2, engine_rows=4, engine_cols=4, engine_max_m=16,
                          engine_max_k=16, engine_max_n=16, layers=1, layer_max_m=16,
                          layer_max_k=16, layer_max_n=16, layer_max_r=4)


@pytest.fixture(scope="module")
def verilog():
    design = elaborate_accelerator(SMALL)
    return design, to_verilog(design.top, design.name)


@pytest.mark.slow
@pytest.mark.ci
def test_units_ports_and_dsp_blocks(verilog):     # generating the Verilog: ~5-15 s
    design, text = verilog
    assert design.name == "accel_2x4x4p_1x4x4" and get_design("accelerator").configs == (
        AcceleratorConfig,)
    modules = re.findall(r"^module \\?(\S+)", text, re.M)
    leaves = [name.rsplit(".", 1)[-1] for name in modules]
    # by hand: 2 engines x 4 x 4 / 2 packed multipliers + the layer's 4 x 4 PEs
    assert leaves.count("multiply") == 2 * 8 + 16
    # requantizers: (2 engines + 1 layer) x 4 columns x (low, high)
    assert sum(leaf.startswith(("low_", "high_")) for leaf in leaves) == 3 * 4 * 2
    # the layer's update unit: 4 rows x 2 x 2 chunk products
    assert sum(re.fullmatch(r"multiply_\d+_\d+_\d+", leaf) is not None
               for leaf in leaves) == 16
    assert SMALL.dsp == 2 * (8 + 8) + (16 + 8 + 16) == design.facts["dsp"]
    for unit in ("engine_0", "engine_1", "layer_0"):
        assert any(name.endswith("." + unit) for name in modules)
    assert not any(name.endswith(".engine_2") or name.endswith(".layer_1") for name in modules)
    for port in ("engines__0__s_axil__awaddr", "engines__1__m_axis__tdata",
                 "layers__0__s_axis__tvalid", "layers__0__irq"):
        assert re.search(rf"\b(input|output)\b[^;]*\b{port}\b", text)


def test_memories_are_every_units():
    memories = accelerator_memories(SMALL)
    engine = [name for name in memories if name.startswith("engine_1.")]
    layer = [name for name in memories if name.startswith("layer_0.")]
    assert engine and layer and not any(name.startswith("layer_1.") for name in memories)
    assert memories["engine_0.x_buffer"].sized_by == ("engine_max_m", "engine_max_k",
                                                     "engines")


@pytest.mark.slow
@pytest.mark.ci
def test_lint_clean(verilog):
    from zoforge.sim.lint import lint_verilog

    design, text = verilog
    result = lint_verilog(text, design.name)
    assert result.clean, str(result)


@pytest.mark.slow
@pytest.mark.ci
def test_cosim_runs_each_unit_bit_exact():
    """``zoforge cosim accelerator``: one engine (paired 4x4) and one ZO layer of the
    scaled-down design, each on Verilator against its golden model; the summary names both
    and ``bit_exact`` is their conjunction (each unit's own verdict checked too)."""
    from zoforge.sim.accel_cosim import AccelCosimOptions, cosim_accelerator
    result = cosim_accelerator(SMALL, AccelCosimOptions(jobs=1, steps=1))
    assert result["engine"]["bit_exact"] is True and result["layer"]["bit_exact"] is True
    assert result["bit_exact"] is True
    assert (result["engines"], result["layers"]) == (SMALL.engines, SMALL.layers)


#: SMALL with its first engine a GELU engine and two softmax units (4 lanes, rows of up to
#: 8 keys).
WITH_SOFTMAX = SMALL.replace(gelu_engines=1, softmax_units=2, softmax_lanes=4,
                             softmax_max_len=8)


def test_nonlinear_units_declared_and_their_memories():
    from zoforge.hw.accel.top import accelerator_units
    from zoforge.hw.engine.designs import engine_memories
    from zoforge.hw.softmax.designs import softmax_memories
    units = accelerator_units(WITH_SOFTMAX)
    assert [(u.design, u.count) for u in units.units] == [
        ("engine", 1), ("engine", 1), ("zo-layer", 1), ("softmax", 2)]
    assert [u.config.gelu for u in units.units[:2]] == [False, True]
    assert units.units[3].config == WITH_SOFTMAX.softmax_config()
    memories = accelerator_memories(WITH_SOFTMAX)
    for index, gelu in ((0, True), (1, False)):           # engine 0 the GELU engine
        own = engine_memories(WITH_SOFTMAX.engine_config(gelu))
        assert {name.split(".", 1)[1] for name in memories
                if name.startswith(f"engine_{index}.")} == set(own)
    assert [u.design for u in accelerator_units(SMALL).units] == ["engine", "zo-layer"]
    memories = accelerator_memories(WITH_SOFTMAX)
    own = softmax_memories(WITH_SOFTMAX.softmax_config())
    for index in range(2):
        for name, size in own.items():
            got = memories[f"softmax_{index}.{name}"]
            assert (got.words, got.bits) == (size.words, size.bits)
            assert got.sized_by == ("softmax_lanes", "softmax_max_len", "softmax_units")
    assert not any(name.startswith("softmax_2.") for name in memories)


@pytest.mark.slow
@pytest.mark.ci
def test_softmax_units_ports_and_lint(tmp_path):  # generating the Verilog: ~5-15 s, twice
    from zoforge.boards.harness import write_vivado_project
    from zoforge.boards.registry import get_board
    from zoforge.sim.lint import lint_verilog
    design = elaborate_accelerator(WITH_SOFTMAX)
    text = to_verilog(design.top, design.name)
    assert design.name == "accel_2x4x4p_1x4x4_1g_2s4"
    # 2 engines x (8 pairs + 8 requantizer), the GELU one 4 x (3 + 2) more, the layer 40,
    # 2 softmax units x 4 lanes x 2
    assert design.facts["dsp"] == WITH_SOFTMAX.dsp == 2 * 16 + 20 + 40 + 2 * 8
    modules = re.findall(r"^module \\?(\S+)", text, re.M)
    for unit in ("softmax_0", "softmax_1"):
        assert any(name.endswith("." + unit) for name in modules)
    for port in ("softmax__0__s_axil__awaddr", "softmax__1__s_axis__tdata",
                 "softmax__1__m_axis__tlast", "softmax__0__irq"):
        assert re.search(rf"\b(input|output)\b[^;]*\b{port}\b", text)
    # two clocks: the engines and the layer on clk, the softmax units on softmax_clk
    start = re.search(rf"^module \\?{re.escape(design.name)}\s*\(", text, re.M).start()
    top = text[start:text.index("endmodule", start)]
    assert set(re.findall(r"^\s*input\s+(\w*(?:clk|rst))\s*;", top, re.M)) == {
        "clk", "rst", "softmax_clk", "softmax_rst"}
    clocks = re.findall(r"\.(\w*clk)\((\w+)\)", top)
    assert clocks.count(("clk", "clk")) == 3            # 2 engines, 1 layer
    assert clocks.count(("softmax_clk", "softmax_clk")) == 2
    result = lint_verilog(text, design.name)
    assert result.clean, str(result)
    # on a board (`zoforge build`'s Vivado project), the softmax units on the board's clock
    assert design.top.clock_domains == ("softmax",)
    board_top = write_vivado_project(get_board("zcu102"), design.top, tmp_path, 300.0)
    assert "softmax_clk" in board_top["top.v"].read_text()


#: SMALL with three engines, two softmax units (4 lanes, rows of up to 8 keys) and the
#: attention links (jobs of up to 8 x 8 scores): engines 0 and 2 linked to unit 0, engine 1
#: to unit 1.
WITH_LINK = SMALL.replace(engines=3, softmax_units=2, softmax_lanes=4, softmax_max_len=8,
                          link=True, link_max_rows=8, link_max_len=8)
def test_link_ports_and_units():
    """The top with links: the units' port arrays keep their signatures, ``links[e]`` and
    ``selects[u]`` are added, the links are a submodule, the name says ``_l``."""
    from amaranth.lib.wiring import In, Out

    from zoforge.hw.accel.top import Accelerator, accelerator_name
    from zoforge.hw.link.links import AttentionLinks
    top = Accelerator(WITH_LINK)
    plain = Accelerator(WITH_LINK.replace(link=False))
    assert accelerator_name(WITH_LINK) == "accel_3x4x4p_1x4x4_2s4_l"
    assert accelerator_name(WITH_LINK.replace(link=False)) == "accel_3x4x4p_1x4x4_2s4"
    members = top.signature.members
    for name in ("engines", "layers", "softmax"):
        assert members[name] == plain.signature.members[name]
    assert set(members) == set(plain.signature.members) | {"links", "selects"}
    assert members["links"].dimensions == (3,) and members["links"].flow == Out
    assert set(members["links"].signature.members) == {"job", "error", "clear"}
    assert members["selects"].dimensions == (2,) and members["selects"].flow == In
    assert len(top.selects[0].payload) == 2                 # sources 0..2: DDR, 2 engines
    assert isinstance(top.attention_links, AttentionLinks) and plain.attention_links is None
    design = elaborate_accelerator(WITH_LINK)
    assert "links" in design.blocks and "links" not in elaborate_accelerator(SMALL).blocks


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    """``zoforge generate`` of WITH_LINK: its folder and Verilog text."""
    import subprocess
    import sys
    out = tmp_path_factory.mktemp("linked")
    flags = []
    for key, value in WITH_LINK.to_dict().items():
        if key in ("kind", "zoforge_config"):
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags += [flag] if value else [f"--no-{key.replace('_', '-')}"]
        else:
            flags += [flag, str(value)]
    proc = subprocess.run([sys.executable, "-m", "zoforge", "generate", "accelerator",
                           "--out", str(out), *flags], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return out, (out / "accel_3x4x4p_1x4x4_2s4_l.v").read_text()


@pytest.mark.slow
@pytest.mark.ci
def test_link_top_modules_ports_and_lint(linked):    # generating the Verilog: ~15 s
    from zoforge.sim.lint import lint_verilog
    _, text = linked
    name = "accel_3x4x4p_1x4x4_2s4_l"
    modules = re.findall(r"^module \\?(\S+)", text, re.M)
    for block in ("links", "links.link_0", "links.link_2", "links.select_0",
                  "links.select_1", "engine_2", "softmax_1"):
        assert f"{name}.{block}" in modules, block
    assert f"{name}.links.select_2" not in modules
    for port in ("links__0__job__payload", "links__2__error", "links__1__clear",
                 "selects__1__payload", "selects__0__ready", "engines__2__m_axis__tdata",
                 "engines__0__s_axis__tready", "softmax__1__s_axis__tdata",
                 "softmax__0__m_axis__tlast", "softmax__1__irq"):
        assert re.search(rf"\b(input|output)\b[^;]*\b{port}\b", text), port
    start = re.search(rf"^module \\?{re.escape(name)}\s*\(", text, re.M).start()
    top = text[start:text.index("endmodule", start)]
    assert set(re.findall(r"^\s*input\s+(\w*(?:clk|rst))\s*;", top, re.M)) == {
        "clk", "rst", "softmax_clk", "softmax_rst"}
    result = lint_verilog(text, name)     # SYNCASYNCNET on rst waived: hw/lint_waivers.vlt
    assert result.clean, str(result)


@pytest.mark.slow
def test_generate_reproduces_the_link_tops_verilog_in_two_processes(linked, tmp_path):
    """``zoforge generate --config DIR/design.toml`` in two processes of different hash
    seeds, each with its own (empty) Verilog cache: the same text (Amaranth creates a top's
    missing clock domains from a set; hw/export.to_verilog creates them in name order)."""
    import os
    import subprocess
    import sys
    folder, _ = linked
    procs = []
    for seed in (1, 2):
        env = {**os.environ, "PYTHONHASHSEED": str(seed),
               "ZOFORGE_CACHE": str(tmp_path / f"cache{seed}")}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "zoforge", "generate", "--config",
             str(folder / "design.toml"), "--out", str(tmp_path / f"out{seed}")], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for proc in procs:
        assert proc.wait(timeout=600) == 0, proc.stderr.read()
    texts = [(tmp_path / f"out{seed}" / "accel_3x4x4p_1x4x4_2s4_l.v").read_text()
             for seed in (1, 2)]
    assert texts[0] == texts[1]


def test_links_declared_to_the_composed_build():
    """With ``link``: one ``link`` unit x engines (the accelerator's link configuration),
    in ``sync``; without, none."""
    from zoforge.hw.accel.top import accelerator_units
    units = accelerator_units(WITH_LINK).units
    assert [(u.design, u.count, u.domain) for u in units] == [
        ("engine", 3, "sync"), ("zo-layer", 1, "sync"), ("softmax", 2, "softmax"),
        ("link", 3, "sync")]
    assert units[3].config == WITH_LINK.link_config()
    assert "link" not in [u.design for u in accelerator_units(
        WITH_LINK.replace(link=False)).units]


@pytest.mark.slow
@pytest.mark.ci
def test_link_top_on_a_board(tmp_path):                # elaborating the top: ~15 s
    """``zoforge build``'s Vivado project of the linked top: the harness drives every port
    (the links' job payloads plain vectors) and runs the softmax domain on the board's
    clock."""
    from zoforge.boards.harness import write_vivado_project
    from zoforge.boards.registry import get_board
    design = elaborate_accelerator(WITH_LINK)
    assert design.top.clock_domains == ("softmax",)
    board_top = write_vivado_project(get_board("zcu102"), design.top, tmp_path, 300.0)
    assert "softmax_clk" in board_top["top.v"].read_text()
