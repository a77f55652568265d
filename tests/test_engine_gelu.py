# amaranth: UnusedElaboratable=no
"""The engine's GELU job mode (``EngineConfig.gelu``, issue 32 item 4): the RTL against
:func:`zoforge.golden.engine_gelu.engine_gemm_gelu` value by value.

GELU jobs run between plain int8 and raw jobs on one engine (no reset in between), per
tensor and per column, on edge tiles (M, N not multiples of R, C; K odd with two k-steps a
beat), with a job built to reach both saturation ends of both requantizers (``q`` at
``2^15 - 1`` and ``-2^15``, the int8 result at 127 and -128) and the wrap of ``acc``; under
output back-pressure and input idling; CYCLES against ``engine_job_cycles(..., gelu=True)``
(a GELU job's rows leave ``GELU_EXTRA_LATENCY`` cycles later than an int8 job's). A build
without ``gelu`` is unchanged (tests/test_engine_cosim.py, its Verilog hash here); i-GELU
constants the unit cannot take are refused with one line.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from engine_checks import assert_jobs_bit_exact
from zoforge.errors import ConfigError
from zoforge.golden.engine import RequantParams, gemm_int32, requantize
from zoforge.golden.engine_gelu import GeluStage
from zoforge.golden.finetune.integer_ops import GeluParams
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.cycles import GELU_EXTRA_LATENCY, engine_job_cycles
from zoforge.hw.engine.engine import Engine
from zoforge.hw.export import to_verilog
from zoforge.sim.backends import stall_problems
from zoforge.sim.engine_cosim import (EngineCosim, EngineJob, gelu_job, gelu_writes,
                                      random_gelu_job, random_job)
from zoforge.sim.lint import lint_verilog

SLOW = pytest.mark.slow
#: 4x4, two k-steps a beat: the cycle model is exact for its jobs below (short tiles too:
#: their result-bank wait is modelled); small enough for the default run.
CONFIG = EngineConfig(rows=4, cols=4, pack=2, max_m=24, max_k=40, max_n=24, gelu=True)


def corner_job(m: int = 5, n: int = 9) -> EngineJob:
    """K = 1, x = 1: acc is bias + w, per column; columns that reach every corner (the
    module docstring), the rest inside; M and N edge tiles of a 4x4 engine."""
    big = (1 << 31) - 1
    cases = [  # bias, w, into (mult, shift), out (mult, shift)
        (40_000, 0, 1, 0, 1, 20),        # q = 2^15 - 1 (saturated high)
        (-40_000, 0, 1, 0, 1, 20),       # q = -2^15 (saturated low)
        (-(1 << 15), 0, 1, 0, 1, 20),    # q = -2^15 exactly
        (big, 1, 1, 0, 1, 20),           # acc wraps to -2^31: q = -2^15
        (20_000, 0, 1, 0, 65535, 0),     # out = 127 (saturated)
        (-1_000, 0, 1, 0, 65535, 0),     # out = -128 (y < 0, saturated)
        (0, 0, 1, 0, 65535, 0),          # q = 0
        (12_345, 7, 3, 2, 1, 12),        # inside both
        (-777, -3, 5, 1, 3, 10),
    ][:n]
    x = np.ones((m, 1), np.int8)
    w = np.array([[c[1] for c in cases]], np.int8)
    bias = np.array([c[0] for c in cases], np.int32)
    column = [torch.tensor([c[i] for c in cases]) for i in range(2, 6)]
    stage = GeluStage(RequantParams(column[0], column[1]), GeluParams.of(2.0 ** -10),
                      RequantParams(column[2], column[3]))
    return gelu_job(x, w, bias, stage)


def q_values(job: EngineJob) -> torch.Tensor:
    """The int16 ``q`` of a GELU job (the golden's first two stages)."""
    bias = None if job.bias is None else torch.from_numpy(job.bias.astype(np.int64))
    acc = gemm_int32(torch.from_numpy(job.x), torch.from_numpy(job.w), bias)
    return requantize(acc, job.gelu.into, bits=16)


def mixed_jobs(seed: int) -> list[EngineJob]:
    """int8, GELU (per tensor), raw, the corner job, GELU (per column, no bias, a fine
    scale: offset above 2^32, GELU_OFFSET_HI), int8: the GELU jobs follow and precede plain
    ones."""
    rng = np.random.default_rng(seed)
    return [random_job(rng, 16, 32, 16, per_channel=True),
            random_gelu_job(rng, 16, 32, 16, per_column=False),
            random_job(rng, 6, 5, 7, raw=True),
            corner_job(),
            random_gelu_job(rng, 7, 33, 18, per_column=True, bias=False, scale=2.0 ** -20),
            random_job(rng, 5, 32, 6, relu=True)]


@pytest.fixture(scope="module")
def gelu_run():
    cosim = EngineCosim(CONFIG)
    jobs = mixed_jobs(seed=3)
    results, info = cosim.run(jobs)
    return cosim, jobs, results


def test_gelu_jobs_between_plain_jobs_are_bit_exact_and_timed(gelu_run):
    cosim, jobs, results = gelu_run
    assert_jobs_bit_exact(cosim, jobs, results)
    for job, result in zip(jobs, results):
        gelu = job.gelu is not None
        assert result.cycles == engine_job_cycles(CONFIG, *job.shape, gelu=gelu), (
            job.shape, gelu)
    # the same shape as an int8 and as a GELU job: the GELU path's latency apart
    assert results[1].cycles - results[0].cycles == GELU_EXTRA_LATENCY == 23
    # the corners: q at both ends of int16 (and -2^15 unsaturated, and wrapped), the int8
    # result at both ends, and values inside
    q = q_values(jobs[3])[0]
    assert q[:4].tolist() == [32767, -32768, -32768, -32768]
    corner = results[3].output
    assert corner[:, 4].tolist() == [127] * 5 and corner[:, 5].tolist() == [-128] * 5
    outputs = np.concatenate([r.output.ravel() for j, r in zip(jobs, results) if j.gelu])
    assert np.unique(outputs).size > 40
    spread = torch.cat([q_values(j).reshape(-1) for j in (jobs[1], jobs[4])])
    assert int(spread.min()) < -2000 and int(spread.max()) > 2000
    assert gelu_writes(jobs[4].gelu)["GELU_OFFSET_HI"] > 0


def test_gelu_jobs_under_output_backpressure(gelu_run):
    cosim, jobs, results = gelu_run
    picked = [1, 2, 3]
    stalled, info = cosim.run([jobs[i] for i in picked], backpressure=0.6, seed=7)
    assert stall_problems(info["stalls"], 0.0, 0.6) == []
    for index, result in zip(picked, stalled):
        assert result.bit_exact, (result.shape, result.mismatches)
    assert sum(r.cycles for r in stalled) > sum(results[i].cycles for i in picked)


def test_refused_gelu_constants_and_jobs_give_one_line():
    cosim = EngineCosim(CONFIG)
    job = corner_job()
    bad = GeluStage(job.gelu.into, GeluParams(2.0 ** -10, 1 << 20, 5, 0, 5), job.gelu.out)
    with pytest.raises(ConfigError) as info:
        cosim.check_job(gelu_job(job.x, job.w, job.bias, bad))
    assert info.value.parameter == "gelu" and "\n" not in str(info.value)
    with pytest.raises(ConfigError) as info:
        EngineCosim(CONFIG.replace(gelu=False)).check_job(job)
    assert info.value.parameter == "gelu" and "\n" not in str(info.value)


@pytest.mark.slow          # two engine builds' Verilog linted (~6 s): CI's -m ci runs it
@pytest.mark.ci
def test_gelu_build_is_lint_clean_and_the_plain_build_has_no_gelu_path():
    top = "engine_4x4"
    result = lint_verilog(to_verilog(Engine(CONFIG), top), top)
    assert result.clean, str(result)
    plain = to_verilog(Engine(CONFIG.replace(gelu=False)), top)
    assert "gelu" not in plain.lower() and "out_mult" not in plain


def test_the_gelu_field_round_trips():
    data = CONFIG.to_dict()
    assert data["gelu"] is True and EngineConfig().gelu is False
    assert EngineConfig.from_dict({k: v for k, v in data.items() if k != "kind"}) == CONFIG
    with pytest.raises(ConfigError):
        EngineConfig.from_dict({"gelu": "yes"})


# -- slow: more configurations, Icarus, stall patterns ------------------------------------

@SLOW
@pytest.mark.parametrize("fields", [
    dict(rows=3, cols=2, pack=2, max_m=32, max_k=32, max_n=32),          # R > C
    dict(rows=2, cols=3, pack=1, max_m=16, max_k=16, max_n=16),          # C > R
    dict(rows=4, cols=3, pack=2, max_m=32, max_k=32, max_n=32, paired=True)])
def test_gelu_jobs_on_more_engines(fields):
    config = EngineConfig(**fields, gelu=True)
    cosim = EngineCosim(config)
    rng = np.random.default_rng(fields["rows"] * 7 + fields["cols"])
    limit = min(fields["max_m"], 16)
    jobs = [random_gelu_job(rng, 1, 1, 1, per_column=False),
            random_job(rng, 5, 7, 3, per_channel=True),
            random_gelu_job(rng, limit, limit, limit, per_column=True),
            corner_job(m=3, n=fields["cols"] * 2 + 1),
            random_job(rng, 4, 3, 5, raw=True)]
    for n in range(4):
        m, k, n_ = (int(v) for v in rng.integers(1, limit + 1, size=3))
        jobs.append(random_gelu_job(rng, m, k, n_, per_column=bool(n % 2), bias=n != 2))
    results, _ = cosim.run(jobs)
    assert_jobs_bit_exact(cosim, jobs, results)


# each pattern repeats: 1 = the source (sink) stalls in that cycle
SOURCE_STALLS = [0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 1, 0, 0]
SINK_STALLS = [1, 0, 0, 1, 1, 1, 1, 0, 0, 1, 0]


@SLOW
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_gelu_jobs_under_input_idling_and_output_stalls(simulator):
    cosim = EngineCosim(CONFIG, simulator=simulator)
    jobs = mixed_jobs(seed=9)
    patterns = {"source": np.array(SOURCE_STALLS, np.uint8),
                "sink": np.array(SINK_STALLS, np.uint8)}
    results, info = cosim.run(jobs, patterns=patterns)
    assert info["stalls"]["in"] > 0 and info["stalls"]["out"] > 0
    assert_jobs_bit_exact(cosim, jobs, results)


@SLOW
def test_gelu_jobs_under_heavy_backpressure_stay_exact():
    """Back-pressure 0.9: the GELU path's buffers and its parameter FIFO fill up and drain."""
    cosim = EngineCosim(CONFIG)
    rng = np.random.default_rng(21)
    jobs = [random_gelu_job(rng, 24, 9, 24, per_column=True) for _ in range(2)]
    results, _ = cosim.run(jobs, backpressure=0.9, seed=3)
    assert_jobs_bit_exact(cosim, jobs, results)
