"""The ZO training layer: golden model pinned to a second derivation, RTL bit-exact against it.

The reference below is written from the golden model's docstring with plain Python/numpy
integers (sequential ``take(R)`` per word, int64 matmuls, Python floor shifts), independently
of the vectorised golden code whose constants the hardware follows.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import installed
from zoforge.errors import ConfigError
from zoforge.golden.zolayer import layer_config
from zoforge.golden.zolayer.host import projected_gradient, squared_error
from zoforge.golden.zolayer.model import LayerShape
from zoforge.hw.export import design_verilog
from zoforge.hw.zolayer.designs import elaborate_layer
from zoforge.hw.zolayer.registers import JOBS, REGISTERS
from zoforge.sim.backends import stall_problems
from zoforge.sim.lint import lint_verilog
from zoforge.sim.zolayer_cosim import (ZoCosimOptions, cosim_layer, golden_run, make_data,
                                       predicted_cycles, predicted_ratio, run_layer)

SMALL = dict(max_m=16, max_k=16, max_n=16, max_r=8)
STRATEGIES = ("onthefly", "pregen", "gaussian", "masked")


# -- an independent reference ------------------------------------------------------------

def _wrap32(v):
    return ((np.asarray(v, dtype=np.int64) + (1 << 31)) % (1 << 32)) - (1 << 31)


def _clamp(v, bits):
    return np.clip(v, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def reference_run(config, options, data):
    rows, lora = config.rows, config.mode == "lora-fa"
    gen = config.generator().golden()                  # the hardware's reset state
    master = data["master"].astype(np.int64).copy()
    k_t, n = master.shape

    blocks = config.branch_lanes                       # k-steps per word
    features = rows // blocks                          # features per word
    per_job = max(1, blocks // 2)                      # queries per branch job

    def next_zs():
        """One branch job's perturbations: per word (panel outer, k-block inner) one
        transfer per query, lane kk*F + f -> z_j[kb*B + kk, p*F + f]."""
        zs = np.zeros((per_job, k_t, n), dtype=np.int64)
        for p in range(n // features):
            for kb in range(k_t // blocks):
                for j in range(per_job):
                    values = gen.take(rows)
                    for kk in range(blocks):
                        for f in range(features):
                            zs[j, kb * blocks + kk, p * features + f] = values[kk * features + f]
        return zs

    def requant(acc):
        prod = acc * options.mult
        rnd = (1 << options.shift) >> 1
        return np.clip((prod + rnd) >> options.shift, -128, 127)

    branches, masters, grads = [], [], []
    for x, target in zip(data["x"], data["target"]):
        if lora:
            xw = _wrap32(x @ data["w"])
            u = requant(_wrap32(x @ data["a"]))

        def branch(sign, z):
            tp = _clamp((master >> 8) + sign * (z >> options.eps_shift), 16)
            return _wrap32(xw + u @ tp) if lora else _wrap32(x @ tp)

        accumulator = np.zeros_like(master)
        step_grads = []
        for _ in range(options.q // per_job):
            saved = gen.state
            zs = next_zs()
            if blocks == 1:              # the minus branch is a job of its own: z again
                gen.state = saved
                pairs = [(branch(1, zs[0]), branch(-1, next_zs()[0]))]
            else:
                pairs = [(branch(1, z), branch(-1, z)) for z in zs]
            for j, (y_plus, y_minus) in enumerate(pairs):
                diff = sum(int(v) ** 2 for v in (y_plus - target).ravel()) - \
                    sum(int(v) ** 2 for v in (y_minus - target).ravel())
                g = max(-(1 << 15), min((1 << 15) - 1, diff >> options.grad_shift))
                gen.state = saved
                accumulator += g * next_zs()[j]
                branches += [y_plus, y_minus]
                step_grads.append(g)
        delta = (accumulator * options.eta_mult + ((1 << options.eta_shift) >> 1)) \
            >> options.eta_shift
        master = _clamp(master - delta, 24)
        masters.append(master.copy())
        grads.append(step_grads)
    return {"branches": np.stack(branches), "masters": np.stack(masters),
            "grads": np.array(grads)}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("mode", ["lora-fa", "full"])
@pytest.mark.parametrize("q", [1, 2, 4])
def test_golden_matches_the_independent_reference(strategy, mode, q):
    config = layer_config(strategy, mode=mode, **SMALL)
    options = ZoCosimOptions(steps=2, q=q, seed=q + 3, eps_shift=3, grad_shift=30,
                             eta_mult=3, eta_shift=2)
    data = make_data(config, options)
    golden, reference = golden_run(config, options, data), reference_run(config, options, data)
    for name in ("branches", "masters", "grads"):
        np.testing.assert_array_equal(golden[name], reference[name], err_msg=name)
    assert (golden["grads"] != 0).any()                  # the update did something


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("rows, branch_lanes", [(4, 2), (4, 4), (8, 4), (8, 8)])
def test_golden_branch_lanes_match_the_independent_reference(strategy, rows, branch_lanes):
    fields = dict(banks=rows) if strategy == "pregen" else (
        dict(n_rng=rows) if strategy == "gaussian" else {})
    config = layer_config(strategy, mode="full", rows=rows, max_m=16, max_k=16, max_n=8,
                          branch_lanes=branch_lanes, **fields)
    features = rows // branch_lanes
    options = ZoCosimOptions(steps=2, q=2 * max(1, branch_lanes // 2), seed=7, m=8, k=16,
                             n=2 * features, eps_shift=3, grad_shift=30, eta_mult=3,
                             eta_shift=2)
    data = make_data(config, options)
    golden, reference = golden_run(config, options, data), reference_run(config, options, data)
    for name in ("branches", "masters", "grads"):
        np.testing.assert_array_equal(golden[name], reference[name], err_msg=name)
    assert (golden["grads"] != 0).any()


@pytest.mark.parametrize("fields, flag", [
    (dict(branch_lanes=3), "branch_lanes"), (dict(branch_lanes=8), "branch_lanes"),
    (dict(branch_lanes=2), "branch_lanes"),                   # lora-fa
    (dict(branch_lanes=2, mode="full", max_k=15), "max_k"),
    (dict(branch_lanes=2, mode="full", max_n=3), "max_n")])
def test_bad_branch_lanes_are_one_line_errors(fields, flag):
    with pytest.raises(ConfigError) as error:
        layer_config(**fields)
    assert str(error.value).startswith(f"{flag} must") and "\n" not in str(error.value)


def test_bad_branch_shapes_name_the_flag():
    config = layer_config(mode="full", rows=8, max_m=16, max_k=16, max_n=8, branch_lanes=4)
    for options, flag in ((dict(q=3), "q"), (dict(k=6), "k"), (dict(n=3, q=2), "n")):
        with pytest.raises(ConfigError, match=f"^{flag} must"):
            golden_run(config, ZoCosimOptions(m=8, **{"k": 16, "n": 2, **options}),
                       {"x": [], "target": [], "master": np.zeros((16, 2), dtype=np.int64)})


def test_host_arithmetic():
    assert squared_error([1, -2], [0, 0]) == 5
    assert projected_gradient(10, 2, 2) == 2
    assert projected_gradient(3, 10, 1) == -4             # floor
    assert projected_gradient(1 << 40, 0, 0) == (1 << 15) - 1
    assert projected_gradient(0, 1 << 40, 0) == -(1 << 15)


@pytest.mark.parametrize("fields, flag", [
    (dict(strategy="pregen", banks=8), "banks"),
    (dict(strategy="onthefly", n_rng=3), "n_rng"),
    (dict(max_n=18), "max_n"),
    (dict(max_m=18), "max_m"),
    (dict(mode="half"), "mode"),
    (dict(strategy="pregen", bits=28), "bits"),
])
def test_bad_configurations_are_one_line_errors(fields, flag):
    strategy = fields.pop("strategy", "onthefly")
    with pytest.raises(ConfigError) as error:
        layer_config(strategy, **fields)
    assert str(error.value).startswith(f"{flag} must") and "\n" not in str(error.value)


def test_bad_shapes_name_the_flag():
    config = layer_config(**SMALL)
    for shape, flag in ((LayerShape(6, 8, 8, 4), "m"), (LayerShape(8, 8, 6, 4), "n"),
                        (LayerShape(8, 8, 8, 0), "r"), (LayerShape(8, 99, 8, 4), "k")):
        with pytest.raises(ConfigError, match=f"^{flag} must"):
            shape.checked(config)


def test_predicted_ratio_counts_shared_frozen_work():
    lora = layer_config(**SMALL)
    shape = LayerShape(16, 16, 16, 4)
    assert predicted_ratio(lora, shape, 4) > predicted_ratio(lora, shape, 1) > 1
    full = layer_config(mode="full", **SMALL)
    assert predicted_ratio(full, LayerShape(16, 16, 16), 2) > 1   # only the batch load


def test_predicted_cycles_by_hand():
    """16 x 16 x 16, r = 4, q = 2 on 4 x 4: tile interval max(depth, 2R - 2 = 6,
    (depth + bank_free) / 8) with bank_free = 4.5 + 3R + C = 20.5 (8 result banks), fill
    and drain 27 + 3R + C = 43, and every job one cycle to finish. Batch load 16/4 tiles *
    16/4 beats of 4 k-steps + 1 + 1 = 18; frozen X*W 16 tiles of depth 16: 15 * 16 + 16 + 43
    = 299 + 1 = 300, X*A 4 tiles: 3 * 16 + 59 = 107 + 1 = 108; a branch 16 tiles of depth
    r = 4, 6 apart: 15 * 6 + 4 + 43 = 137 + 1 = 138; accumulate 16/4 * 4 words - 1 + 7 (its
    latency) + 2 + 1 = 25, apply 16 + 11 (its latency) + 1 + 1 = 29."""
    config, shape = layer_config(**SMALL), LayerShape(16, 16, 16, 4)
    batch, branch = 18 + 300 + 108, 138
    assert predicted_cycles(config, shape, 2) == batch + 4 * branch + 2 * 25 + 29
    assert predicted_cycles(config, shape, 2, sequential=True) == 4 * (batch + branch) + 2 * 25 + 29


# -- RTL against the golden model ---------------------------------------------------------

@pytest.mark.slow
@pytest.mark.ci
@pytest.mark.parametrize("strategy, rows, cols, branch_lanes", [
    ("onthefly", 4, 4, 2), ("pregen", 4, 2, 4), ("gaussian", 8, 4, 4), ("onthefly", 8, 8, 8)])
def test_rtl_branch_lanes_bit_exact_with_stalls(strategy, rows, cols, branch_lanes):
    """Branches side by side on the rows: every branch, g, master and the plain branch equal
    the golden model's with stalls on every stream (several panels: N = 2F), and without
    stalls the cycle model predicts the step's cycles."""
    fields = dict(banks=rows) if strategy == "pregen" else (
        dict(n_rng=rows) if strategy == "gaussian" else {})
    config = layer_config(strategy, mode="full", rows=rows, cols=cols, max_m=16, max_k=32,
                          max_n=8, branch_lanes=branch_lanes, **fields)
    features, per_job = rows // branch_lanes, max(1, branch_lanes // 2)
    shape = dict(m=2 * cols, k=16, n=2 * features, q=2 * per_job, grad_shift=30)
    stalled = cosim_layer(config, ZoCosimOptions(steps=2, seed=5, source_idle=0.3,
                                                 sink_backpressure=0.3, **shape))
    assert stalled["bit_exact"], stalled["checks"]
    assert stall_problems(stalled["stalls"], 0.3, 0.3) == []
    assert any(any(g) for g in stalled["grads"])
    clean = cosim_layer(config, ZoCosimOptions(steps=1, seed=6, **shape))
    assert clean["bit_exact"], clean["checks"]
    # within 3 % (the model's goal; it is exact once K exceeds the tile spacing)
    assert abs(clean["predicted_cycles_per_step"] - clean["cycles_per_step"]) \
        <= 0.03 * clean["cycles_per_step"]



# pregen in lora-fa by default (onthefly lora-fa's stalled runs: test_stalls_happen_and_cost_cycles
# and test_verdicts' run, the same design);
# gaussian lora-fa's stalled run against the golden model by default is
# tests/test_zolayer_jobserver.py::test_one_process_serves_every_step_and_is_reaped (the same
# design and backend, 5 steps, stalls on both streams), full mode's stalled runs
# test_rtl_many_panels_reuse_the_staging_banks[full] and test_zolayer_one_word_panels' 4 x 4
# full; the rest under -m slow (CI's -m ci runs them: default-run CPU)
@pytest.mark.parametrize("strategy, mode", [
    pytest.param("onthefly", "lora-fa", marks=(pytest.mark.slow, pytest.mark.ci)),
    ("pregen", "lora-fa"),
    pytest.param("pregen", "full", marks=(pytest.mark.slow, pytest.mark.ci)),
    pytest.param("gaussian", "lora-fa", marks=(pytest.mark.slow, pytest.mark.ci)),
    pytest.param("masked", "lora-fa", marks=(pytest.mark.slow, pytest.mark.ci)),
    pytest.param("onthefly", "full", marks=(pytest.mark.slow, pytest.mark.ci)),
    pytest.param("gaussian", "full", marks=(pytest.mark.slow, pytest.mark.ci))])
def test_rtl_is_bit_exact_with_stalls_on_every_stream(strategy, mode, simulator):
    config = layer_config(strategy, mode=mode, **SMALL)
    summary = cosim_layer(config, ZoCosimOptions(steps=2, q=2, seed=5, source_idle=0.3,
                                                 sink_backpressure=0.3, grad_shift=30,
                                                 simulator=simulator))
    assert summary["bit_exact"], summary
    assert stall_problems(summary["stalls"], 0.3, 0.3) == []
    assert any(g != 0 for step in summary["grads"] for g in step)
    assert summary["plain_branch_cycles"] <= summary["branch_cycles"] + 8


# Both simulators in the default run (the Icarus representative of the ZO layer) and both
# backends: the job server on Verilator, the cocotb bench on Icarus (on Verilator in CI's
# -m ci; both backends agree cycle for cycle: tests/test_zolayer_jobserver.py).
@pytest.mark.parametrize("simulator_name, backend", [
    ("verilator", "jobserver"), pytest.param("icarus", "cocotb", id="icarus-cocotb"),
    pytest.param("verilator", "cocotb", marks=(pytest.mark.slow, pytest.mark.ci))])
def test_stalls_happen_and_cost_cycles(simulator_name, backend):
    # the same results with and without stalls, and more cycles with them (they were not
    # switched off)
    installed(simulator_name)
    config = layer_config("onthefly", mode="lora-fa", **SMALL)   # built for cocotb elsewhere too
    quiet = ZoCosimOptions(steps=1, q=1, seed=3, grad_shift=30, simulator=simulator_name)
    data = make_data(config, quiet)
    runs = [run_layer(config, quiet.replace(backend=backend, **stalls), data)
            for stalls in ({}, dict(source_idle=0.3, sink_backpressure=0.3))]
    (rtl, free), (stalled_rtl, stalled) = runs
    assert free.passed and stalled.passed, (free.failures, stalled.failures)
    assert stall_problems(free.results["stalls"]) == [], backend
    assert stall_problems(stalled.results["stalls"], 0.3, 0.3) == [], backend
    for name in ("branches", "masters", "plain"):
        np.testing.assert_array_equal(rtl[name], stalled_rtl[name], err_msg=name)
    assert stalled.results["grads"] == free.results["grads"]
    assert stalled.results["sim_cycles"] > free.results["sim_cycles"], backend
    assert all(s > f for s, f in zip(stalled.results["step_cycles"],
                                     free.results["step_cycles"])), backend


# the query counts on one generator by default (the query loop is the layer's; every
# generator's layer runs q = 2 against the golden model by default: the stall tests above and
# tests/test_zolayer_jobserver.py); the others CI's (the masked generator's layer is a build
# of its own; its generator's RTL is in the default run, tests/test_rng_masked.py)
@pytest.mark.parametrize("strategy", [
    "onthefly",
    *(pytest.param(s, marks=(pytest.mark.slow, pytest.mark.ci)) for s in STRATEGIES
      if s != "onthefly")])
@pytest.mark.parametrize("q", [1, 4])
def test_rtl_query_counts(strategy, q, simulator):
    summary = cosim_layer(layer_config(strategy, **SMALL),
                          ZoCosimOptions(steps=2, q=q, seed=q, grad_shift=30,
                                         simulator=simulator))
    assert summary["bit_exact"], summary


# (0, 1, 0) CI's: (0, 65535, 0) keeps both shifts at 0 by default
@pytest.mark.parametrize("eps_shift, eta_mult, eta_shift", [
    pytest.param(0, 1, 0, marks=(pytest.mark.slow, pytest.mark.ci)), (31, 65535, 47),
    (5, 0, 10), (0, 65535, 0)])
def test_rtl_eps_and_eta_at_the_edges(eps_shift, eta_mult, eta_shift, simulator):
    summary = cosim_layer(layer_config(**SMALL), ZoCosimOptions(
        steps=1, q=2, eps_shift=eps_shift, eta_mult=eta_mult, eta_shift=eta_shift,
        grad_shift=24, simulator=simulator))
    assert summary["bit_exact"], summary


def test_rtl_master_saturates_at_both_ends(simulator):
    config = layer_config(**SMALL)
    options = ZoCosimOptions(steps=1, q=2, eta_mult=65535, eta_shift=0, grad_shift=0,
                             simulator=simulator)
    data = make_data(config, options)
    rtl, result = run_layer(config, options, data)
    golden = golden_run(config, options, data)
    np.testing.assert_array_equal(rtl["masters"], golden["masters"])
    assert rtl["masters"].max() == (1 << 23) - 1 and rtl["masters"].min() == -(1 << 23)


def test_rtl_update_regenerates_the_forward_perturbation(simulator):
    """Full mode with X = I, eps = 1, eta = 1: Y+ - Y- = 2 z and T_before - T_after = g z,
    read from the RTL's own outputs (no golden model involved)."""
    config = layer_config("pregen", mode="full", **SMALL)    # the stall test's full design
    options = ZoCosimOptions(steps=1, q=1, m=8, k=8, n=8, eps_shift=0, eta_mult=1,
                             eta_shift=0, grad_shift=30, simulator=simulator)
    data = make_data(config, options)
    data["x"][:] = np.eye(8, dtype=np.int64)
    data["master"] = data["master"] >> 8              # far from saturation
    rtl, result = run_layer(config, options, data)
    assert result.passed
    g = result.results["grads"][0][0]
    assert g != 0
    z_forward = (rtl["branches"][0] - rtl["branches"][1]) // 2
    z_update = (data["master"] - rtl["masters"][0]) // g
    assert (z_forward != 0).any()
    np.testing.assert_array_equal(z_forward, z_update)
    np.testing.assert_array_equal(data["master"] - rtl["masters"][0], g * z_forward)


# one layer per mode by default; the gaussian generator's own Verilog is linted by default
# in tests/test_rng_hw.py, its layer under -m ci
@pytest.mark.parametrize("strategy, mode", [
    ("onthefly", "lora-fa"), ("pregen", "full"),
    pytest.param("gaussian", "lora-fa", marks=(pytest.mark.slow, pytest.mark.ci))])
def test_generated_verilog_is_lint_clean(strategy, mode):
    elaborated = elaborate_layer(layer_config(strategy, mode=mode, **SMALL))
    # the text the co-simulations build (the Verilog cache's, pinned to a fresh conversion
    # by tests/test_verilog_cache.py)
    result = lint_verilog(design_verilog(elaborated), elaborated.name)
    assert result.clean, str(result)


def test_registers_are_documented():
    text = (Path(__file__).parent.parent / "docs" / "zo-layer.md").read_text()
    for name, register in REGISTERS.items():
        assert f"| `{name}` | 0x{register.address:02X} | {register.kind} |" in text, name
    for name, code in JOBS.items():
        assert f"| `{name}` | {code} |" in text, name


@pytest.mark.parametrize("mode", [pytest.param("lora-fa", marks=(pytest.mark.slow, pytest.mark.ci)), "full"])
def test_rtl_many_panels_reuse_the_staging_banks(mode, simulator):
    """Four feature panels and four token tiles: each staging bank is refilled while the
    other one is being computed (a panel must not start in a bank still in use); a rank
    capacity of R in lora-fa, so the frozen W (N/R * K words) is longer than the trained B;
    full mode on the update test's pregen design (one build for both)."""
    config = (layer_config("pregen", mode="full", **SMALL) if mode == "full" else
              layer_config(mode=mode, **dict(SMALL, max_r=4)))
    summary = cosim_layer(config, ZoCosimOptions(steps=1, q=2, m=16, k=16, n=16, r=4,
                                                 grad_shift=36, sink_backpressure=0.2,
                                                 simulator=simulator))
    assert summary["bit_exact"], summary
    assert stall_problems(summary["stalls"], 0.0, 0.2) == []
