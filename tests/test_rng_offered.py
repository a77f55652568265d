"""A snapshot generator's ``offered`` port (:func:`zoforge.hw.rng.lfsr.drive_valid`): its
``out.valid`` but for the restore pulse, for a consumer that takes no transfer in a restore
cycle (the ZO layer's :class:`~zoforge.hw.rng.source.PerturbationSource`). Every stream
generator, in the Amaranth simulator under random ready/save/restore: ``out.valid`` is
``offered & ~restore`` in every cycle, and ``offered`` in a cycle does not depend on that
cycle's ``restore`` (read with the pulse low and high before the same clock edge)."""
import numpy as np
import pytest
from amaranth.sim import Simulator

from zoforge.golden.rng import GaussianConfig, MaskedConfig, OnTheFlyConfig, PregenConfig
from zoforge.hw.rng.designs import generator_for
from zoforge.hw.rng.source import PerturbationSource

CONFIGS = [OnTheFlyConfig(n_rng=7, bits=5, snapshot=True),
           PregenConfig(pool_size=255, bits=6, banks=4, pool_seed=1, snapshot=True),
           GaussianConfig(n_rng=4, bits=8, terms=3, snapshot=True),
           MaskedConfig(n_rng=7, bits=6, snapshot=True)]


def _observe(config, cycles: int = 400, seed: int = 3):
    """Per cycle (restore, valid, offered with restore low, offered with it as driven)."""
    dut = generator_for(config)
    rng = np.random.default_rng(seed)
    ready = rng.random(cycles) < 0.7
    save = rng.random(cycles) < 0.05
    restore = (rng.random(cycles) < 0.08) & ~save
    seen = []

    async def bench(ctx):
        if isinstance(config, PregenConfig):
            ctx.set(dut.start, 1)
            ctx.set(dut.length, 11)
        for go, s, r in zip(ready, save, restore):
            ctx.set(dut.out.ready, int(go))
            ctx.set(dut.save, int(s))
            ctx.set(dut.restore, 0)
            offered_low = ctx.get(dut.offered)
            ctx.set(dut.restore, int(r))
            seen.append((bool(r), ctx.get(dut.out.valid), offered_low, ctx.get(dut.offered)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: type(c).__name__)
def test_offered_is_valid_but_for_the_restore(config):
    seen = _observe(config)
    assert sum(r for r, *_ in seen) > 10                      # restores happened
    assert any(not offered for *_, offered in seen) or not isinstance(
        config, (OnTheFlyConfig, PregenConfig))               # priming / refill cycles seen
    for cycle, (restore, valid, offered_low, offered) in enumerate(seen):
        assert offered == offered_low, cycle                  # restore is not on its path
        assert valid == (offered and not restore), cycle


def test_the_source_offers_the_generators_word_in_a_restore_cycle():
    """The perturbation source's valid is the generator's ``offered``: high in a restore
    cycle of a primed generator (its consumer takes no transfer then; this restore returns
    to the state at reset, so the cycle after it primes again)."""
    source = PerturbationSource(OnTheFlyConfig(n_rng=7, bits=5, snapshot=True))
    seen = []

    async def bench(ctx):
        for cycle in range(6):
            ctx.set(source.control.restore, int(cycle == 4))
            seen.append(ctx.get(source.out.valid))
            await ctx.tick()

    sim = Simulator(source)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen[2:6] == [1, 1, 1, 0]
