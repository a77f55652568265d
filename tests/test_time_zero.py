"""Icarus and Verilator agree at time 0 (``zoforge.sim.cosim.with_time_zero_trigger``): a
combinational output assigned under ``m.If`` whose condition holds its reset value (no input
of its ``always @*`` block changes after time 0) is its Else value, not X, and a counter that
adds such a pulse counts from 0 (the GEMM engine's ``tile_done`` once made every Icarus job
stall this way: docs/toolchain.md)."""
import re

from amaranth import Module, Signal
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.sim.cosim import run_cocotb, with_time_zero_trigger


class HeldCondition(wiring.Component):
    """``flag`` holds its reset value 0 while ``go`` is low; ``out`` is 5 while it is set,
    else 3 (both under one ``If``); ``pulse`` is set only under ``If(flag)`` and ``count``
    adds it each cycle."""
    go: In(1)
    out: Out(8)
    count: Out(4)

    def elaborate(self, platform):
        m = Module()
        flag, pulse = Signal(), Signal()
        m.d.sync += [flag.eq(flag | self.go), self.count.eq(self.count + pulse)]
        with m.If(flag):
            m.d.comb += [self.out.eq(5), pulse.eq(1)]
        with m.Else():
            m.d.comb += self.out.eq(3)
        return m


def _verilog() -> str:
    return verilog.convert(HeldCondition(), name="held_condition")


def test_the_design_has_the_hazard_s_form():
    """The Verilog has what Icarus mishandles: ``out`` assigned in an ``always @*`` block
    whose only trigger at time 0 is the declared-``= 0`` register."""
    text = _verilog()
    assert re.search(r"reg \\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ +=\s*0;", text)
    assert "always @*" in text and "out = 8'h03;" in text


def test_each_module_s_trigger_is_set_once_at_time_zero():
    """One ``initial #0`` a trigger (two modules here, each its own), right after its
    declaration, and every other line kept."""
    one = _verilog()
    two = one + "\n" + one.replace("module held_condition", "module held_condition_2")
    out = with_time_zero_trigger(two)
    triggers = re.findall(r"^ *reg (\\\S+) +=\s*0;$", two, re.MULTILINE)
    assert len(triggers) == 2
    lines = out.splitlines()
    initials = [(lines[n - 1], line) for n, line in enumerate(lines) if "initial #0" in line]
    assert [line.split()[2] for _, line in initials] == triggers      # one each, in order
    assert all(before.split()[1] == line.split()[2] for before, line in initials)  # after it
    assert [line for line in out.splitlines() if "initial #0" not in line] == two.splitlines()
    assert with_time_zero_trigger("module m; endmodule\n") == "module m; endmodule\n"


def test_outputs_under_a_held_condition_are_defined(simulator):
    """On both simulators: ``out`` is 3 and ``count`` 0 after the reset (X on Icarus without
    the trigger)."""
    result = run_cocotb(verilog=_verilog(), toplevel="held_condition",
                        test_module="zoforge.sim.benches.time_zero", simulator=simulator)
    assert result.passed, result.failures
    assert result.results == {"out": "00000011", "count": "0000"}
