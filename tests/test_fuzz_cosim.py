# amaranth: UnusedElaboratable=no
"""Property-based co-simulation: hypothesis draws valid configurations of every generator
(on-the-fly, pre-generated pool, Gaussian) and of the GEMM engine with its jobs, and the RTL
must equal the golden model for all of them.

Simulator builds are the cost, so hypothesis only *draws* here (:func:`draw_examples` runs a
``@given`` function that collects its examples) and the draws are then co-simulated in
batches: many generator configurations side by side in one build (``SideBySide``, as
tests/test_rng_cosim.py does), and per engine configuration one build running all its jobs
(shapes, per-channel, bias, ReLU, raw, extreme operands) under drawn stall patterns on both
streams (the engine's host program in the cocotb bench, with stall patterns). Each drawn generator's reset state is also
checked against the independent reference (tests/rng_reference.py). There is no shrinking
(each step would be a build); a failure names the configurations, the first mismatch and,
in the deep run, the seed that reproduces the draw.

Budgets. The default run is derandomized (the same draws every time, so its builds stay
cached): per simulator one batch of generators (Verilator 12, Icarus 8) and 24 GEMM jobs on
the engine configurations other tests build already. ``-m slow`` draws afresh each time:
1040 generator configurations in 26 Verilator builds (and 500 on Icarus), 1125 GEMM jobs on
25 drawn engine configurations on the job server, and 12 drawn engines x 8 jobs under
stall patterns through cocotbext-axi on each simulator.
"""
from __future__ import annotations

import random
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import rng_reference as ref
from zoforge.golden.rng import GaussianConfig, OnTheFlyConfig, PregenConfig
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.rng.onthefly import OnTheFlyCore, lut_memory_init
from zoforge.sim.backends import stall_problems
from zoforge.sim.engine_cosim import EngineCosim, random_job
from zoforge.sim.rng_cosim import cosim_configs



def draw_examples(strategy, count: int, *, deep: bool) -> tuple[list, int | None]:
    """``count`` examples of ``strategy`` drawn by hypothesis: derandomized (the same every
    run) unless ``deep``, where a fresh seed is used and returned so a failure can be
    reproduced (``@seed``)."""
    drawn = []
    fresh = random.SystemRandom().randrange(2 ** 32) if deep else None

    @settings(max_examples=count, deadline=None, derandomize=not deep, database=None,
              phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value):
        drawn.append(value)

    if fresh is not None:
        collect = seed(fresh)(collect)
    collect()
    assert len(drawn) >= count // 2, "hypothesis drew too few examples"
    return drawn, fresh


# -- generators ------------------------------------------------------------------------------

# Wide on-the-fly lanes whose LUT is constant (no memory; see tests/test_rng_reference.py):
# they take b up to 20 into co-simulation.
WIDE_CONSTANT = [(127, b) for b in range(15, 21)] + [(255, b) for b in range(17, 21)]
LANES = (3, 7, 15, 31, 63)
MAX_LUT_BITS = 12       # non-constant LUTs up to 4096 entries (larger ones: long builds)


def _min_bits(values: int) -> int:
    return next(b for b in range(4, 21) if (1 << b) - 1 >= values)


@st.composite
def onthefly_configs(draw, wide: bool = True) -> OnTheFlyConfig:
    if wide and draw(st.integers(0, 11)) == 0:
        n, b = draw(st.sampled_from(WIDE_CONSTANT))
    else:
        n = draw(st.sampled_from(LANES))
        b = draw(st.integers(_min_bits(2 * n), MAX_LUT_BITS))
    return OnTheFlyConfig(n_rng=n, bits=b, snapshot=draw(st.booleans()))


@st.composite
def pregen_configs(draw) -> tuple[PregenConfig, int]:
    size = draw(st.sampled_from((255, 511, 1023)))
    length_bits = draw(st.sampled_from((6, 10, 24)))
    config = PregenConfig(pool_size=size, bits=draw(st.integers(4, 24)),
                          banks=draw(st.sampled_from((1, 2, 4, 8, 16))),
                          pool_seed=draw(st.integers(0, 2 ** 64 - 1)),
                          layout=draw(st.sampled_from(("replicated", "striped"))),
                          length_bits=length_bits, snapshot=draw(st.booleans()))
    length = draw(st.integers(1, min((1 << length_bits) - 1, 3 * size)))
    return config, length


@st.composite
def gaussian_configs(draw) -> GaussianConfig:
    n, terms = draw(st.integers(1, 16)), draw(st.integers(1, 6))
    bits = draw(st.integers(_min_bits(2 * n * terms), 20))
    return GaussianConfig(n_rng=n, bits=bits, terms=terms, snapshot=draw(st.booleans()))


def generator_configs(wide: bool = True):
    """(configuration, perturbation length) pairs; the length matters for pools only."""
    return st.one_of(onthefly_configs(wide).map(lambda c: (c, 100)), pregen_configs(),
                     gaussian_configs().map(lambda c: (c, 100)))


def check_reset_state(config) -> None:
    """The hardware's reset registers (and LUT) against the independent reference."""
    if isinstance(config, OnTheFlyConfig):
        n, b = config.n_rng, config.bits
        core = OnTheFlyCore(config)
        np.testing.assert_array_equal(np.array(core.signature.members["lanes"].init),
                                      ref.onthefly_reset_states(n, b))
        if core.shift_bits:
            lut = ref.scale_lut(n, b)
            np.testing.assert_array_equal(np.array(lut_memory_init(n, b)), lut - lut.min())


def cosimulate_generators(pairs, simulator: str, cycles: int, seed: int) -> list:
    """One side-by-side build of ``pairs``; the failing configurations (empty: all good)."""
    for config, _ in pairs:
        check_reset_state(config)
    rng = np.random.default_rng(seed)
    report = cosim_configs([c for c, _ in pairs], cycles, simulator=simulator, seed=seed,
                           ready_probability=float(rng.uniform(0.3, 1.0)),
                           lengths=[length for _, length in pairs])
    assert report["passed"], report["failures"]
    assert len(report["configs"]) == len(pairs)
    assert all(c["transfers"] > 0 for c in report["configs"])
    return [(c["name"], c.get("length"), c["first_mismatch"]) for c in report["configs"]
            if not c["bit_exact"]]


def _seed_text(seed: int | None) -> str:
    return "derandomized" if seed is None else f"hypothesis seed {seed}"


def report(capsys, text: str) -> None:
    """Print ``text`` past pytest's capture (the fuzzing runs' counts and times)."""
    with capsys.disabled():
        print(f"\n{text}")


def run_generator_fuzz(capsys, simulator: str, count: int, batch: int, cycles: int,
                       deep: bool, wide: bool = True) -> None:
    started = time.perf_counter()
    pairs, seed = draw_examples(generator_configs(wide), count, deep=deep)
    variants = {config.variant for config, _ in pairs}
    assert variants == {"onthefly", "pregen", "gaussian"}, variants
    failed = []
    for start in range(0, len(pairs), batch):
        failed += cosimulate_generators(pairs[start:start + batch], simulator, cycles,
                                        seed=start + (seed or 0))
    report(capsys, f"generator fuzzing on {simulator}: {len(pairs)} configurations in "
                   f"{-(-len(pairs) // batch)} builds, {time.perf_counter() - started:.1f} s, "
                   f"{len(failed)} failed ({_seed_text(seed)})")
    assert not failed, (failed, f"hypothesis seed {seed}")


def test_generator_fuzz(simulator, capsys):
    # Verilator: 8 configurations, some wide (b up to 20); Icarus: 8 narrower ones
    if simulator == "verilator":
        run_generator_fuzz(capsys, simulator, 8, 8, 800, deep=False)
    else:
        run_generator_fuzz(capsys, simulator, 8, 8, 600, deep=False, wide=False)


@pytest.mark.slow
def test_generator_fuzz_deep(simulator, capsys):
    # Verilator: 1040 configurations in 26 builds of 40; Icarus: 500 in 20 runs of 25
    if simulator == "verilator":
        run_generator_fuzz(capsys, simulator, 1040, 40, 1000, deep=True)
    else:
        run_generator_fuzz(capsys, simulator, 500, 25, 800, deep=True)


# -- the GEMM engine -------------------------------------------------------------------------

@st.composite
def engine_configs(draw) -> EngineConfig:
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return EngineConfig(rows=rows, cols=cols, pack=draw(st.integers(1, 4)),
                        max_m=draw(st.sampled_from((max(rows, 8), 16))),
                        max_k=draw(st.sampled_from((8, 16))),
                        max_n=draw(st.sampled_from((max(cols, 8), 16))))


# the default run's engines are built by other tests already (tests/test_engine_cosim.py,
# tests/test_engine_registers.py): only the jobs and stall patterns are drawn
BUILT_ENGINES = (EngineConfig(rows=3, cols=2, pack=2, max_m=32, max_k=32, max_n=32),
                 EngineConfig(rows=3, cols=2, pack=1, max_m=20, max_k=24, max_n=14))
FLAVOURS = st.fixed_dictionaries({"raw": st.booleans(), "bias": st.booleans(),
                                  "per_channel": st.booleans(), "relu": st.booleans(),
                                  "extreme": st.booleans()})
# 1 = stalled in that cycle; the pattern repeats (and lets a beat through now and then)
STALLS = st.one_of(st.just([0]),                                            # never
                   st.lists(st.integers(0, 1), min_size=1, max_size=24).filter(
                       lambda pattern: 0 in pattern),                        # any pattern
                   st.tuples(st.integers(1, 12), st.integers(1, 40)).map(    # bursts
                       lambda t: [0] * t[0] + [1] * t[1]))


@st.composite
def engine_runs(draw, engines, jobs: int):
    """(engine configuration, [(shape, flavour)] x jobs, sink stalls, source stalls, seed)."""
    config = draw(engines)
    shapes = st.tuples(st.integers(1, config.max_m), st.integers(1, config.max_k),
                       st.integers(1, config.max_n))
    specs = draw(st.lists(st.tuples(shapes, FLAVOURS), min_size=jobs, max_size=jobs))
    return config, specs, draw(STALLS), draw(STALLS), draw(st.integers(0, 2 ** 32 - 1))


def make_jobs(specs, seed: int) -> list:
    rng = np.random.default_rng(seed)
    # (raw output ignores per_channel and relu, as the engine does)
    return [random_job(rng, m, k, n, **flavour) for (m, k, n), flavour in specs]


def cosimulate_engine(run, simulator: str) -> list:
    """Jobs of one drawn run under its stall patterns; the failing jobs."""
    config, specs, sink, source, seed = run
    jobs = make_jobs(specs, seed)
    data = Path(tempfile.mkdtemp(prefix="zoforge-gemm-fuzz-"))
    patterns = {"sink": np.array(sink, np.uint8), "source": np.array(source, np.uint8)}
    try:
        results, info = EngineCosim(config, simulator=simulator).run(jobs, data_dir=data,
                                                                    patterns=patterns)
    except RuntimeError as error:   # the simulation itself failed (a hang): a failed run too,
        # reported with the others and the hypothesis seed that draws it again
        return [(config.to_dict(), [spec[0] for spec in specs], str(error), str(data))]
    # the patterns were applied: pause cycles on each stream whose pattern stalls
    assert (info["stalls"]["out"] > 0, info["stalls"]["in"] > 0) == (any(sink), any(source))
    for job, result in zip(jobs, results):
        m, k, n = job.shape
        tiles = -(-m // config.rows) * -(-n // config.cols)
        assert result.array_cycles == tiles * -(-k // config.pack) * config.pack
        assert result.irq
    return [(config.to_dict(), r.shape, r.mismatches, str(data))
            for r in results if not r.bit_exact]


def cosimulate_engine_on_server(runs) -> list:
    """Every run's jobs on its engine on the job server, one simulation per engine
    (output back-pressure: the sink pattern's share of stalled cycles)."""
    by_engine = defaultdict(list)
    for config, specs, sink, _, seed in runs:
        by_engine[config].append((make_jobs(specs, seed), min(0.9, sum(sink) / len(sink))))
    failed = []
    for config, groups in by_engine.items():
        jobs = [job for group, _ in groups for job in group]
        backpressure = max(p for _, p in groups)
        results, info = EngineCosim(config).run(jobs, backpressure=backpressure,
                                              backend="jobserver")
        assert stall_problems(info["stalls"], 0.0, backpressure, used=("out",)) == []
        failed += [(config.to_dict(), r.shape, r.mismatches) for r in results
                   if not r.bit_exact]
    return failed


def engine_report(capsys, what: str, runs, started: float, failed, seed) -> None:
    jobs = sum(len(run[1]) for run in runs)
    engines = len({run[0] for run in runs})
    report(capsys, f"engine fuzzing {what}: {jobs} jobs in {len(runs)} runs on {engines} "
                   f"engine configurations, {time.perf_counter() - started:.1f} s, "
                   f"{len(failed)} failed ({_seed_text(seed)})")


# engine configurations built for it alone (slow + ci: CI runs it; out of the default run's 10 CPU-minutes)
@pytest.mark.slow
@pytest.mark.ci
def test_engine_fuzz(simulator, capsys):
    # 4 runs x 4 jobs on the already-built engines, drawn stall patterns
    started = time.perf_counter()
    runs, _ = draw_examples(engine_runs(st.sampled_from(BUILT_ENGINES), 4), 4, deep=False)
    assert {run[0] for run in runs} == set(BUILT_ENGINES)
    failed = [bad for run in runs for bad in cosimulate_engine(run, simulator)]
    engine_report(capsys, f"on {simulator}", runs, started, failed, None)
    assert not failed, failed


@pytest.mark.slow
def test_engine_fuzz_deep_stall_patterns(simulator, capsys):
    # 12 drawn engines x 8 jobs under drawn stall patterns, through cocotbext-axi
    started = time.perf_counter()
    runs, seed = draw_examples(engine_runs(engine_configs(), 8), 12, deep=True)
    failed = [bad for run in runs for bad in cosimulate_engine(run, simulator)]
    engine_report(capsys, f"with stall patterns on {simulator}", runs, started, failed, seed)
    assert not failed, (failed, f"hypothesis seed {seed}")


@pytest.mark.slow
def test_engine_fuzz_deep_job_server(capsys):
    # 25 drawn engines x 45 jobs = 1125 GEMMs on the job server (Verilator)
    started = time.perf_counter()
    runs, seed = draw_examples(engine_runs(engine_configs(), 45), 25, deep=True)
    assert sum(len(specs) for _, specs, _, _, _ in runs) >= 1000
    failed = cosimulate_engine_on_server(runs)
    engine_report(capsys, "on the job server", runs, started, failed, seed)
    assert not failed, (failed, f"hypothesis seed {seed}")
