"""The on-the-fly generator's blocks as components inside another design: ``OnTheFlyCore`` and
``ScaleShift`` connected by a small Amaranth design of their user (not the stream top), run in
the Amaranth simulator under random step/save/restore and checked cycle by cycle against the
golden model (lanes, shift, values)."""
import gc

import numpy as np
import pytest
from amaranth import Fragment, Module, Value, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from zoforge.golden.rng import OnTheFlyConfig
from zoforge.hw.export import to_verilog
from zoforge.hw.rng.onthefly import OnTheFlyCore, ScaleShift
from zoforge.sim.lint import lint_verilog


class Datapath(wiring.Component):
    """A user of the generator: drives the core's step/save/restore from its own inputs and
    takes the scaled values (and, for the check, the lanes and the shift) as its outputs."""

    def __init__(self, config: OnTheFlyConfig, external_priming: bool = False):
        self.core = OnTheFlyCore(config, external_priming=external_priming)
        self.scale = ScaleShift(config.bits, self.core.golden.width, config.n_rng,
                                self.core.shift_bits)
        # plain outputs (a top with layout-shaped ports would get one unread wire per field)
        members = {"go": In(1), "values": Out(len(Value.cast(self.scale.values))),
                   "lanes": Out(len(Value.cast(self.core.lanes))),
                   "shift": Out(max(1, self.core.shift_bits)), "primed": Out(1)}
        if config.snapshot:
            members.update(save=In(1), restore=In(1))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.scale = scale = self.scale
        m.d.comb += [core.step.eq(self.go), scale.lanes.eq(core.lanes),
                     self.values.eq(scale.values), self.lanes.eq(core.lanes)]
        if core.shift_bits:
            m.d.comb += [scale.shift.eq(core.shift), self.shift.eq(core.shift)]
        if core.external_priming and core.priming_steps:   # the user's own priming flag
            with m.If(~self.primed):
                m.d.comb += core.step.eq(1)
            m.d.sync += self.primed.eq(1)
        elif core.external_priming:
            m.d.comb += self.primed.eq(1)
        else:
            m.d.comb += self.primed.eq(core.primed)
        if core.snapshot:
            m.d.comb += [core.save.eq(self.save), core.restore.eq(self.restore)]
        return m


def _stimulus(cycles: int, snapshot: bool, seed: int) -> np.ndarray:
    """(go, save, restore) per cycle; save and restore never coincide (the core's contract)."""
    rng = np.random.default_rng(seed)
    go = rng.random(cycles) < 0.7
    save = (rng.random(cycles) < 0.06) & snapshot
    restore = (rng.random(cycles) < 0.04) & snapshot & ~save
    return np.stack([go, save, restore], axis=1)


def _run(config: OnTheFlyConfig, cycles: int, external_priming: bool = False, seed: int = 1):
    dut = Datapath(config, external_priming)
    golden = config.golden()
    n, b, w = config.n_rng, config.bits, golden.width
    stimulus = _stimulus(cycles, config.snapshot, seed)
    observed = []

    async def bench(ctx):
        for go, save, restore in stimulus:
            ctx.set(dut.go, int(go))
            if config.snapshot:
                ctx.set(dut.save, int(save))
                ctx.set(dut.restore, int(restore))
            observed.append((ctx.get(dut.primed), ctx.get(dut.lanes), ctx.get(dut.shift),
                             ctx.get(dut.values)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()

    # The model: cycle t (-1 before priming), the primed flag, and the saved copy of both.
    primed, t = (True, 0) if not dut.core.priming_steps else (False, -1)
    saved = (primed, t)
    checked = restores = 0
    for (go, save, restore), (hw_primed, lanes, shift, values) in zip(stimulus, observed):
        assert bool(hw_primed) == primed, f"primed at model cycle {t}"
        if primed:
            table = golden.cycle_table(t, 1)
            want_lanes = table["raw"][0] + (1 << (b - 1))
            got_lanes = [(lanes >> (p * b)) & ((1 << b) - 1) for p in range(n)]
            got_values = [(values >> (p * w)) & ((1 << w) - 1) for p in range(n)]
            got_values = [v - (1 << w) if v >> (w - 1) else v for v in got_values]
            assert got_lanes == [int(x) for x in want_lanes], f"lanes at cycle {t}"
            assert got_values == [int(x) for x in golden.values_at([t])[0]], \
                f"values at cycle {t}"
            if dut.core.shift_bits:
                assert shift == int(table["scale_exp"][0]) - golden.k_min, f"shift at {t}"
            checked += 1
        # what the clock edge does: save copies the state shown now, restore wins over a step
        state = (primed, t)
        if restore:
            primed, t = saved
            restores += 1
        elif go or not primed:
            primed, t = True, golden.advance(t, n) if t >= 0 else 0
        if save:
            saved = state
    return checked, restores


@pytest.mark.parametrize("n_rng, bits", [(31, 8), (7, 12), (3, 5)],
                         ids=["31x8-constant", "7x12-lut", "3x5-lut-2bit"])
def test_core_and_shift_inside_a_datapath_match_golden_with_save_restore(n_rng, bits):
    config = OnTheFlyConfig(n_rng=n_rng, bits=bits, snapshot=True)
    checked, restores = _run(config, cycles=1500)
    assert checked > 1400 and restores > 20


@pytest.mark.parametrize("n_rng, bits, external", [(31, 8, False), (7, 12, False),
                                                   (7, 12, True), (31, 14, True)])
def test_core_without_snapshot_own_or_external_priming(n_rng, bits, external):
    checked, _ = _run(OnTheFlyConfig(n_rng=n_rng, bits=bits), cycles=400,
                      external_priming=external)
    assert checked >= 399


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")   # the refused one
def test_component_signatures():
    core = OnTheFlyCore(OnTheFlyConfig(n_rng=31, bits=14, snapshot=True))
    members = core.signature.members
    assert set(members) == {"step", "save", "restore", "lanes", "shift", "primed"}
    assert members["lanes"].flow == Out
    assert members["lanes"].shape == data.ArrayLayout(unsigned(14), 31)
    assert members["shift"].shape == unsigned(1) and members["step"].flow == In
    constant = OnTheFlyCore(OnTheFlyConfig(n_rng=31, bits=8), external_priming=True)
    assert set(constant.signature.members) == {"step", "lanes"}
    assert constant.priming_steps == 0 and core.priming_steps == 1
    scale = ScaleShift(14, 15, 31, 1)
    assert set(scale.signature.members) == {"lanes", "shift", "values"}
    assert scale.signature.members["values"].shape == data.ArrayLayout(signed(15), 31)
    assert scale.signature.members["lanes"].flow == In
    for component in (core, constant, scale):      # they elaborate on their own, too
        Fragment.get(component, None)
    with pytest.raises(ValueError, match="external_priming") as refused:
        OnTheFlyCore(OnTheFlyConfig(n_rng=7, bits=6, snapshot=True), external_priming=True)
    del refused             # the half-built core goes (and warns) here, not in a later test
    gc.collect()


@pytest.mark.parametrize("config", [OnTheFlyConfig(n_rng=7, bits=6, snapshot=True),
                                    OnTheFlyConfig(n_rng=31, bits=8)],
                         ids=lambda config: config.canonical_json())
def test_a_datapath_holding_the_components_is_lint_clean(config):
    # private port signals: the user's design holds no unread alias or per-field wires
    verilog = to_verilog(Datapath(config), "datapath")
    result = lint_verilog(verilog, "datapath")
    assert result.clean, result.messages
