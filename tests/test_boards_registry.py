"""Board registry, the ZCU102 and ULX3S platforms, and the board harness / Vivado files."""
import re

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.boards.harness import BoardHarness, write_vivado_project
from zoforge.boards.registry import Board, boards, get_board, register_board
from zoforge.errors import ConfigError
from zoforge.reports.pipeline import write_vivado_saif


class Xor(wiring.Component):
    a: In(12)
    b: In(4)
    y: Out(4)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.y.eq(self.a[:4] ^ self.b)
        return m


def test_registry_has_zcu102_with_data_sheet_capacities():
    zcu102 = get_board("zcu102")
    assert zcu102.part == "xczu9eg-ffvb1156-2-e" and zcu102.family == "xcup"
    assert zcu102.capacities == {"LUT": 274_080, "FF": 548_160, "BRAM18": 1_824,
                                 "DSP": 2_520, "URAM": 0}
    assert zcu102.toolchain == "vivado"
    platform = zcu102.make_platform(250e6)
    assert platform.device == "xczu9eg" and platform.package == "ffvb1156"
    assert platform.default_clk_frequency == 250e6
    assert get_board("zcu102").make_platform(300e6).default_clk_frequency == 300e6


def test_registry_has_an_open_toolchain_ecp5_board():
    ulx3s = get_board("ulx3s-85f")
    assert ulx3s.family == "ecp5" and ulx3s.toolchain == "nextpnr-ecp5"
    assert ulx3s.make_platform(100e6).device == "LFE5U-85F"
    assert "--85k" in ulx3s.toolchain_args
    assert ulx3s.static_power_w is None          # no power model for ECP5


def test_boards_own_static_power_clock_and_toolchain_facts():
    zcu102 = get_board("zcu102")
    assert zcu102.static_power_w == 0.59
    assert "PeZO Table 6" in zcu102.static_power_source
    assert zcu102.default_mhz == 300.0 and zcu102.clock_range_mhz == (1.0, 1000.0)
    assert zcu102.check_clock(700.0) == 700.0
    with pytest.raises(ConfigError, match=r"^--clock-mhz must be a frequency with 1 <= MHz "
                                          r"<= 1000 \(got 5000\)$"):
        zcu102.check_clock(5000)
    assert zcu102.toolchain == "vivado" and zcu102.toolchain_args == ()


def test_board_facts_are_checked_when_registered():
    facts = dict(name="bad-board", description="x", make_platform=lambda f: None, part="p",
                 family="xc7", toolchain="vivado", capacities={"LUT": 1},
                 capacity_source="test", default_mhz=100)
    with pytest.raises(RuntimeError, match="toolchain"):
        Board(**{**facts, "toolchain": "quartus"})
    with pytest.raises(RuntimeError, match="default clock"):
        Board(**{**facts, "clock_range_mhz": (200.0, 300.0)})
    with pytest.raises(RuntimeError, match="static power without its source"):
        Board(**{**facts, "static_power_w": 1.0})


def test_utilization_percent_and_device_without_a_resource():
    zcu102 = get_board("zcu102")
    got = zcu102.utilization({"LUT": 2740.8, "URAM": 0, "CARRY": 3})
    assert got["LUT"] == pytest.approx(1.0)
    assert got["URAM"] is None and "CARRY" not in got


def test_unknown_board_is_a_config_error():
    with pytest.raises(ConfigError, match=r"^board must be one of .*zcu102"):
        get_board("zcu104")


def test_a_new_board_is_one_registration():
    board = Board(name="test-board", description="x", make_platform=lambda f: None,
                  part="p", family="xc7", toolchain="vivado", capacities={"LUT": 1},
                  capacity_source="test", default_mhz=100)
    register_board(board)
    assert boards()["test-board"] is board
    with pytest.raises(RuntimeError):
        register_board(Board(**{**board.__dict__, "part": "other"}))


def test_vivado_project_reads_saif_and_writes_reports(tmp_path):
    saif = ("(SAIFILE\n(TIMESCALE 1ps)\n(DURATION 100)\n (INSTANCE xor_top\n  (NET\n"
            "   (y\\[0\\] (T0 50) (T1 50) (TC 3))\n  )\n )\n)\n")
    paths = write_vivado_project(get_board("zcu102"), Xor(), tmp_path, 400.0)
    assert "saif" not in paths and not (tmp_path / "activity.saif").exists()
    paths["saif"] = write_vivado_saif(saif, "xor_top", tmp_path)     # the reports write it
    assert paths["saif"] == tmp_path / "activity.saif"
    tcl = paths["top.tcl"].read_text()
    assert "create_project -force -name top -part xczu9eg-ffvb1156-2-e" in tcl
    saif_line = tcl.index("read_saif -strip_path zoforge_tb activity.saif")
    assert saif_line < tcl.index("report_power -file top_power.rpt")
    assert tcl.index("report_utilization -file top_utilization_place.rpt") < saif_line
    assert "write_bitstream" in tcl and tcl.index("quit") < tcl.index("write_bitstream")
    xdc = paths["top.xdc"].read_text()
    assert "-period 2.5 " in xdc and "LOC AL8" in xdc
    verilog = paths["top.v"].read_text()
    assert "module \\top.dut" in verilog
    assert "(INSTANCE zoforge_tb\n  (INSTANCE dut" in paths["saif"].read_text()


def test_harness_feeds_every_input_bit_and_observes_outputs():
    plan = get_board("zcu102").make_platform(300e6).build(BoardHarness(Xor()), name="top",
                                                            do_build=False)
    verilog = plan.files["top.v"]
    # a 16-bit stimulus shift register (12 + 4 input bits) drives the design's inputs
    assert "reg [15:0] stimulus" in verilog
    assert "observed" in verilog


class TwoClocks(wiring.Component):
    """A register in ``sync`` and one in a domain of its own, ``slow``."""

    a: In(4)
    y: Out(4)
    z: Out(4)
    clock_domains = ("slow",)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.y.eq(self.a)
        m.d.slow += self.z.eq(~self.a)
        return m


def test_a_design_domain_runs_on_the_board_clock_in_the_harness(tmp_path):
    """A design's own domain (``clock_domains``) is driven by the board's clock and reset:
    the project is written (without it: 'Domain ... is used but not defined') and the
    register clocked by ``slow`` sits on the board's clock net."""
    paths = write_vivado_project(get_board("zcu102"), TwoClocks(), tmp_path, 300.0)
    verilog = paths["top.v"].read_text()
    assert "slow_clk" in verilog
    assert re.search(r"assign \\?slow_clk ?= \\?clk ?;", verilog), verilog[:4000]
    with pytest.raises(Exception, match="Domain 'slow' is used but not defined"):
        bare = TwoClocks()
        bare.clock_domains = ()
        write_vivado_project(get_board("zcu102"), bare, tmp_path / "bare", 300.0)


def test_xor_tree_is_the_xor_of_its_input_a_fixed_number_of_cycles_ago():
    """The harness's output reduction: registered, one 4-input XOR per stage; 37 bits take
    the input register and ceil(log4 37) = 3 XOR stages."""
    import random

    from amaranth import Module, Signal
    from amaranth.sim import Simulator

    from zoforge.boards.harness import xor_tree

    m = Module()
    value = Signal(37)
    out = xor_tree(m, value)
    depth, rng, seen, got = 4, random.Random(5), [], []

    async def bench(ctx):
        for _ in range(60):
            word = rng.getrandbits(37)
            ctx.set(value, word)
            seen.append(bin(word).count("1") & 1)
            await ctx.tick()
            got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got[depth - 1:] == seen[:len(seen) - depth + 1]
    assert set(seen) == {0, 1}
