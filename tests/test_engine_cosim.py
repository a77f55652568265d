"""The GEMM engine's RTL against the golden model, through cocotb + cocotbext-axi.

One engine build per configuration (cached by Verilog hash), many jobs per simulation:
random shapes that are not multiples of the tile, edge cases (K = 1, M < R, N < C),
extreme operands, raw INT32 and requantized INT8 output (per tensor / per column, ReLU,
with and without bias), back-to-back jobs without reset, and output back-pressure.
"""
import numpy as np
import pytest

from engine_checks import assert_jobs_bit_exact
from zoforge.config import field_of
from zoforge.errors import ConfigError
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.designs import elaborate_engine
from zoforge.hw.export import design_verilog
from zoforge.hw.engine.engine import check_engine_parameters
from zoforge.sim.backends import stall_problems
from zoforge.sim.engine_cosim import EngineCosim, EngineJob, random_job
from zoforge.sim.lint import lint_verilog

# Every co-simulation here runs on each simulator (the ``simulator`` fixture of
# tests/conftest.py: Verilator and Icarus; the engine's jobs are small enough for Icarus).
# (rows, cols, pack): R > C with two k-steps per beat, and C > R with one.
CONFIG_A = dict(rows=3, cols=2, pack=2, max_m=32, max_k=32, max_n=32)
CONFIG_B = dict(rows=2, cols=3, pack=1, max_m=16, max_k=16, max_n=16)
# rows in pairs on one packed multiplier each (two INT8 products per DSP48E2)
CONFIG_P = dict(rows=4, cols=3, pack=2, max_m=32, max_k=32, max_n=32, paired=True)


def _mixed_jobs(seed: int, limit: int, count: int) -> list[EngineJob]:
    rng = np.random.default_rng(seed)
    jobs = [random_job(rng, 1, 1, 1, raw=True),                     # the smallest GEMM
            random_job(rng, limit, limit, limit, extreme=True),     # the largest, saturating
            random_job(rng, 2, 5, 1, raw=True, extreme=True),       # M < R, N < C
            random_job(rng, 7, 1, 5, per_channel=True, relu=True)]  # K = 1
    flavours = [dict(raw=True), dict(), dict(per_channel=True), dict(relu=True),
                dict(bias=False), dict(per_channel=True, relu=True, bias=False)]
    for n in range(count):
        m, k, n_ = (int(v) for v in rng.integers(1, limit + 1, size=3))
        jobs.append(random_job(rng, m, k, n_, **flavours[n % len(flavours)]))
    return jobs


@pytest.fixture(scope="module")
def run_a(simulator):
    cosim = EngineCosim(**CONFIG_A, simulator=simulator)
    jobs = _mixed_jobs(seed=11, limit=32, count=12)
    results, info = cosim.run(jobs)
    return cosim, jobs, results, info


def test_random_shapes_are_bit_exact_back_to_back(run_a):
    cosim, jobs, results, info = run_a
    assert_jobs_bit_exact(cosim, jobs, results)
    assert info["sim_cycles"] > sum(r.cycles for r in results)


def test_requantized_outputs_cover_int8_and_saturate_at_both_ends(run_a):
    _, jobs, results, _ = run_a
    int8 = np.concatenate([r.output.ravel() for j, r in zip(jobs, results) if not j.raw])
    assert int8.min() == -128 and int8.max() == 127
    inside = int8[(int8 > -128) & (int8 < 127)]
    assert np.unique(inside).size > 100          # not just saturated values
    raw = np.concatenate([r.output.ravel() for j, r in zip(jobs, results) if j.raw])
    assert raw.dtype == np.int32 and np.abs(raw).max() > 127
    extreme = results[1].output
    assert set(np.unique(extreme)) <= {-128, 127} or np.abs(extreme).max() == 127


def test_output_backpressure_stalls_without_losing_data(run_a):
    # run_a is parametrized over the simulators; each is compared with its own free run.
    cosim, jobs, results, _ = run_a
    picked = [1, 4, 7]
    stalled, info = cosim.run([jobs[i] for i in picked], backpressure=0.6, seed=5)
    # the output stream and the B and R channels were held off (the program writes and reads)
    assert stall_problems(info["stalls"], 0.0, 0.6) == []
    for index, result in zip(picked, stalled):
        assert result.bit_exact, (result.shape, result.mismatches)
        assert result.cycles >= results[index].cycles  # (a compute-bound job may absorb them)
    # the stalls did happen
    assert sum(r.cycles for r in stalled) > sum(results[i].cycles for i in picked)


def test_wide_array_with_one_k_step_per_beat(simulator):
    cosim = EngineCosim(**CONFIG_B, simulator=simulator)
    jobs = _mixed_jobs(seed=12, limit=16, count=4)
    results, _ = cosim.run(jobs)
    assert all(r.bit_exact for r in results), [(r.shape, r.mismatches) for r in results]


def test_paired_rows_engine_is_bit_exact_and_r_over_2_cycles_sooner(simulator):
    """The packed multipliers give the plain products in every job (corners, K = 1, M < R,
    N < C, back to back); a single-tile job takes exactly R / 2 cycles less than the plain
    engine's cycle model, exact for such jobs (tests/test_cycle_models.py): the pairs' skew,
    which the paired cycle model has."""
    from zoforge.hw.engine.cycles import engine_job_cycles

    jobs = _mixed_jobs(seed=13, limit=32, count=8)
    paired, _ = EngineCosim(**CONFIG_P, simulator=simulator).run(jobs)
    assert all(r.bit_exact for r in paired), [(r.shape, r.mismatches) for r in paired]
    plain = EngineConfig(**dict(CONFIG_P, paired=False))
    rows = CONFIG_P["rows"]
    single_tile = [n for n, job in enumerate(jobs)
                   if job.x.shape[0] <= rows and job.w.shape[1] <= CONFIG_P["cols"]]
    assert len(single_tile) >= 2
    for n in single_tile:
        m, k = jobs[n].x.shape
        n_ = jobs[n].w.shape[1]
        assert engine_job_cycles(plain, m, k, n_) - paired[n].cycles == rows // 2
        assert engine_job_cycles(EngineConfig(**CONFIG_P), m, k, n_) == paired[n].cycles


# the 8 x 8 engine (the same generator at the demo's size, the costliest lint) CI's; A, B, P
# and tests/test_engine_cli.py's 2 x 4 by default
@pytest.mark.parametrize("config", [
    CONFIG_A, CONFIG_B, CONFIG_P,
    pytest.param(dict(rows=8, cols=8, pack=2), marks=(pytest.mark.slow, pytest.mark.ci))])
def test_generated_verilog_is_lint_clean(config):
    design = elaborate_engine(EngineConfig(**config))   # the co-simulations' text
    result = lint_verilog(design_verilog(design), design.name)
    assert result.clean, str(result)


@pytest.mark.parametrize("kwargs, flag", [
    (dict(rows=0), "rows"), (dict(cols=65), "cols"), (dict(pack=9), "pack"),
    (dict(rows=4, max_m=2), "max_m"), (dict(cols=8, max_n=2000), "max_n"),
    (dict(max_k=0), "max_k"), (dict(rows=3, paired=True), "rows")])
def test_bad_engine_parameters_name_the_flag(kwargs, flag):
    # Engine.__init__ runs exactly this check first (constructing one that fails would
    # leave Amaranth warning about an unused elaboratable).
    params = dict(dict(rows=8, cols=8, pack=2, max_m=256, max_k=256, max_n=256), **kwargs)
    with pytest.raises(ConfigError) as info:
        check_engine_parameters(**params)
    # the field, as a configuration names it (or as the flag some hw/ checks still raise)
    assert field_of(info.value) == flag and "\n" not in str(info.value)


def test_jobs_beyond_the_buffers_are_rejected_before_simulating():
    cosim = EngineCosim(**CONFIG_A)
    rng = np.random.default_rng(0)
    for shape, flag in (((33, 4, 4), "m"), ((4, 33, 4), "k"), ((4, 4, 33), "n")):
        with pytest.raises(ConfigError) as info:
            cosim.check_job(random_job(rng, *shape))
        assert field_of(info.value) == flag


def test_one_column_tile_engine(every_simulator):
    """max_n <= cols: the per-column tables hold one word (found by the misuse tests: the
    engine did not elaborate)."""
    # both simulators in the default run: the engine's Icarus representative
    cosim = EngineCosim(rows=2, cols=2, pack=1, max_m=8, max_k=8, max_n=2,
                        simulator=every_simulator)
    rng = np.random.default_rng(3)
    jobs = [random_job(rng, 5, 7, 2, per_channel=True, bias=True),
            random_job(rng, 8, 8, 1, raw=True)]
    results, _ = cosim.run(jobs)
    assert all(r.bit_exact for r in results)
