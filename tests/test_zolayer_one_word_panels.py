"""K = 1 (one-word weight panels) on the ZO layer: every panel of a compute job is one word.

The panel fetch (:class:`~zoforge.hw.zolayer.fetch.PanelFetch`) clears its state on
``launch`` with a ``ResetInserter``; its walks (:class:`~zoforge.hw.zolayer.walk.PanelWalk`)
must keep the end tests their ``restart`` sets from ``inner`` and ``outer`` (a one-word
panel ends at its first word), which no init value can hold: their registers are
reset-less. With the reset reaching them, a one-word panel walked two words, and output
panel 1 was computed with panel 0's weights.

Here: the walk alone under a ``ResetInserter`` pulsed with ``restart`` (the fetch's
wiring), against the word order written out in plain Python, for one-word panels, one
panel and a longer walk; and on the RTL (Verilator job server), one ZO step bit-exact
against the golden model at K = 1 (full mode, r = 1 in LoRA-FA: the frozen products', the
trained matrix's and the branches' panels all one word) on several array shapes.
"""
from __future__ import annotations

import pytest
from amaranth import Module, ResetInserter
from amaranth.sim import Simulator

from zoforge.golden.zolayer import layer_config
from zoforge.hw.zolayer.walk import PanelWalk
from zoforge.sim.toolchain import available_simulators


def reference_walk(step: int, inner: int, outer: int) -> list[tuple[int, int, bool, bool]]:
    """(k, first feature, panel_end, last) of every word: panels of ``step`` features
    below ``outer`` (at least one), k-steps 0 .. inner - 1 (at least one)."""
    panels = list(range(0, max(outer, 1), step))
    steps = max(inner, 1)
    return [(k, p, k == steps - 1, k == steps - 1 and p == panels[-1])
            for p in panels for k in range(steps)]


@pytest.mark.parametrize("step, inner, outer", [(4, 1, 8), (4, 1, 4), (2, 1, 6), (4, 2, 8),
                                                (4, 3, 4), (1, 1, 3), (4, 0, 0)])
def test_walk_under_a_reset_on_restart_visits_every_word_once(step, inner, outer):
    """The fetch's wiring: ``restart`` also resets the walk's parent. Two walks back to back
    (the second after the first's state moved on), each word's k, panel, ``panel_end`` and
    ``last`` as the plain-Python order says."""
    walk = PanelWalk(step, 16, 8)
    top = Module()
    top.submodules.walk = ResetInserter(walk.restart)(walk)
    expected = reference_walk(step, inner, outer)

    async def testbench(ctx):
        ctx.set(walk.inner, inner)
        ctx.set(walk.outer, outer)
        for _ in range(2):
            ctx.set(walk.restart, 1)
            await ctx.tick()
            ctx.set(walk.restart, 0)
            ctx.set(walk.advance, 1)
            seen = []
            for flat in range(len(expected)):
                assert ctx.get(walk.flat) == flat
                seen.append((ctx.get(walk.k), ctx.get(walk.panel) * step,
                             bool(ctx.get(walk.panel_end)), bool(ctx.get(walk.last))))
                await ctx.tick()
            ctx.set(walk.advance, 0)
            assert seen == expected

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


needs_verilator = pytest.mark.skipif("verilator" not in available_simulators(),
                                     reason="verilator is not installed")


def _run_k1(rows, cols, mode, m, n):
    from zoforge.sim.zolayer_cosim import ZoCosimOptions
    from zolayer_checks import run_bit_exact
    r = rows if mode == "lora-fa" else 1
    config = layer_config("onthefly", rows=rows, cols=cols, mode=mode, max_m=m, max_k=1,
                          max_n=n, max_r=rows)
    options = ZoCosimOptions(steps=1, q=1, seed=3, m=m, k=1, n=n, r=r, grad_shift=30,
                             backend="jobserver")
    results = run_bit_exact(config, options)
    branches = [job for job in results["jobs"] if job["job"] == "branch"]
    # every tile of every panel took its k-steps (one; K_t = r in LoRA-FA)
    assert {job["array_cycles"] for job in branches} == {m // cols * n // rows * r}


@needs_verilator
def test_rtl_one_word_panels_4x4_full():
    """4 x 4, full mode, M 16, K 1, N 8: two output panels of one word each."""
    _run_k1(4, 4, "full", 16, 8)


@needs_verilator
@pytest.mark.slow
@pytest.mark.parametrize("rows, cols, mode, m, n", [
    (2, 4, "full", 16, 8),        # four one-word panels
    (2, 32, "full", 32, 8),       # one token tile a panel: panels back to back
    (4, 4, "lora-fa", 16, 8),     # frozen W (two panels), A (r = R: one), branch (K_t = r)
    (2, 4, "lora-fa", 8, 4)])
def test_rtl_one_word_panels(rows, cols, mode, m, n):
    _run_k1(rows, cols, mode, m, n)
