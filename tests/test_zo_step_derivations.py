"""The composed ZO fine-tuning step (``golden/finetune/train.py``: ``ZoFinetune``) pinned to
derivations that do not go through it (issue 31): the RTL equals the golden step call by
call, so nothing else would notice a golden step that stopped being ZO.

* every update regenerates exactly the z of its query's forward passes (a second generator
  walked the plain way, from the call log), with the flags that make it so;
* g is the documented ``clamp(round((l+ - l-) * 2^6 / (2 eps)))`` of the recorded losses,
  and one step moves the masters by exactly the documented update (int8 and float, q = 2,
  two blocks: four adapters);
* the float twin's ``(l+ - l-) / 2 delta`` is the directional derivative of its own float
  loss along z (autograd), and its adapter contribution equals the int8 call's dequantized
  one (the B scale) within the quantization's error;
* with the masters zero the float model is the frozen model (Hugging Face's own forward);
* a short run learns: the training loss falls below 0.7 of its start (int8 and float), and
  the same run with the signal taken out of g (a random sign) does not.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from call_replay import walk_calls
from zoforge.golden.finetune.calls import AdapterCall, GoldenUnits, UpdateCall
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.finetune.model import FloatLinears, IntegerLinears, adapter_names
from zoforge.golden.finetune.train import ZoFinetune, load_model, prepare
from zoforge.golden.models import tiny_encoder

# two blocks (four adapters), two queries, asymmetric shapes: order and indexing errors show
CFG = FinetuneConfig(model="tiny", blocks=2, seq_len=8, batch=3, queries=2, n_train=24,
                     n_test=8, calibration=8, rank=4, lr=2e-3, eps=4e-3, engine_rows=4,
                     engine_cols=4)
#: Documented constants (golden/zolayer/network.py, config.py), written out again here.
WEIGHT_FRAC, GRAD_FRAC, MASTER_FRAC, GRAD_BITS, MASTER_BITS = 12, 6, 8, 16, 24


@pytest.fixture(scope="module")
def prepared():
    model = tiny_encoder(hidden=32, layers=2, heads=2, intermediate=64)
    return prepare(CFG, model_and_tokenizer=model)


def plain_walk(rows: int):
    """A fresh generator and ``draw(r, n)``: z of an (r, n) master, words of ``rows`` values
    (panels of ``rows`` columns outer, k inner), each word one ``take(rows)``."""
    generator = CFG.generator().golden()

    def draw(r: int, n: int) -> np.ndarray:
        z = np.zeros((r, n), dtype=np.int64)
        for panel in range(n // rows):
            for k in range(r):
                z[k, panel * rows:(panel + 1) * rows] = generator.take(rows)
        return z
    return generator, draw


def expected_z(prepared, queries: int) -> list[dict[str, np.ndarray]]:
    """Per query, adapter -> z: the + pass draws every adapter's z in forward order, the -
    pass and the updates draw the same again (restored), the next query continues after."""
    generator, draw = plain_walk(CFG.layer_rows)
    out = []
    for _ in range(queries):
        out.append({name: draw(*prepared.model.adapters[name].shape)
                    for name in adapter_names(CFG.blocks)})
    return out


def z_of_calls(log) -> list[tuple[object, np.ndarray | None]]:
    """Each logged call with the z it drew, by a second walk that honours only the flags."""
    generator, draw = plain_walk(CFG.layer_rows)
    return walk_calls(log, generator, draw)


@pytest.fixture(scope="module")
def int8_step(prepared):
    units = GoldenUnits(CFG.generator().golden(), CFG.layer_rows, record=True)
    run = ZoFinetune(prepared, "int8", units=units)
    before = {name: t.clone() for name, t in run.masters.items()}
    return run, before, run.step(), units.log


def test_every_update_regenerates_the_z_of_its_forward_passes(prepared, int8_step):
    """Per query: the + and - adapter calls and the update of each adapter draw the same z
    (the plain walk's), the next query a new one; the flags are save on the first + call,
    restore on the first - call and on the first update, nowhere else."""
    _, _, _, log = int8_step
    names = adapter_names(CFG.blocks)
    drawn = [(call, z) for call, z in z_of_calls(log) if z is not None]
    per_query = 3 * len(names)                # + pass, - pass, updates
    assert len(drawn) == CFG.queries * per_query
    expected = expected_z(prepared, CFG.queries)
    for q in range(CFG.queries):
        calls = drawn[q * per_query:(q + 1) * per_query]
        plus, minus, updates = (calls[i * len(names):(i + 1) * len(names)] for i in range(3))
        for j, name in enumerate(names):
            for call, z in (plus[j], minus[j], updates[j]):
                assert call.name == name
                np.testing.assert_array_equal(z, expected[q][name])
            assert plus[j][0].sign == 1 and minus[j][0].sign == -1
        assert [c.save for c, _ in plus] == [True] + [False] * (len(names) - 1)
        assert [c.restore for c, _ in plus] == [False] * len(names)
        assert [c.restore for c, _ in minus] == [True] + [False] * (len(names) - 1)
        assert [c.restore for c, _ in updates] == [True] + [False] * (len(names) - 1)
    assert not np.array_equal(expected[0][names[0]], expected[1][names[0]])


def test_g_and_the_int8_update_are_the_documented_integers(prepared, int8_step):
    """g = clamp(round((l+ - l-) * 2^6 / (2 eps)), int16) with eps = 2^(F - e - 12); the
    masters move by clamp(T - ((g z eta_mult + 2^(s-1)) >> s), int24) after each query."""
    run, before, record, _ = int8_step
    s = run.settings
    frac = CFG.generator().golden().frac_bits
    eps = 2.0 ** (frac - s.eps_shift - WEIGHT_FRAC)
    assert eps == pytest.approx(CFG.eps, rel=0.5)           # the nearest power of two
    masters = {name: t.numpy().copy() for name, t in before.items()}
    expected = expected_z(prepared, CFG.queries)
    half = 1 << (GRAD_BITS - 1)
    for q in range(CFG.queries):
        plus, minus = record.losses[2 * q], record.losses[2 * q + 1]
        g = max(-half, min(half - 1, round((plus - minus) * 2 ** GRAD_FRAC / (2 * eps))))
        assert record.grads[q] == g
        for name in masters:
            delta = (g * expected[q][name] * s.eta_mult + (1 << (s.eta_shift - 1))) \
                >> s.eta_shift
            masters[name] = np.clip(masters[name] - delta, -2 ** (MASTER_BITS - 1),
                                    2 ** (MASTER_BITS - 1) - 1)
    assert any(g != 0 for g in record.grads)
    for name, t in record.masters.items():
        np.testing.assert_array_equal(t.numpy(), masters[name])
        assert (t != 0).any()


def test_eta_is_lr_over_q_in_master_units(prepared):
    """eta_mult 2^-eta_shift = lr / q * 2^(12 + 8 - 6 - F), to the 16-bit multiplier's
    resolution (network.py's docstring)."""
    run = ZoFinetune(prepared, "float")
    s, frac = run.settings, CFG.generator().golden().frac_bits
    eta = CFG.lr / CFG.queries * 2.0 ** (WEIGHT_FRAC + MASTER_FRAC - GRAD_FRAC - frac)
    assert s.eta_mult * 2.0 ** -s.eta_shift == pytest.approx(eta, rel=2 ** -15)
    assert s.eta_mult < 1 << 16


def test_the_float_update_is_the_documented_step(prepared):
    """Float: T_f -= eta_mult 2^-eta_shift g z / 2^8 per query, g unrounded, nothing
    clamped; the z are the int8 step's."""
    run = ZoFinetune(prepared, "float")
    record = run.step()
    s, frac = run.settings, CFG.generator().golden().frac_bits
    eps = 2.0 ** (frac - s.eps_shift - WEIGHT_FRAC)
    expected = expected_z(prepared, CFG.queries)
    masters = {name: np.zeros(prepared.model.adapters[name].shape) for name in expected[0]}
    for q in range(CFG.queries):
        g = (record.losses[2 * q] - record.losses[2 * q + 1]) * 2 ** GRAD_FRAC / (2 * eps)
        assert record.grads[q] == pytest.approx(g, rel=1e-12)
        for name in masters:
            masters[name] -= s.eta_mult * 2.0 ** -s.eta_shift * g * expected[q][name] / 2 ** 8
    for name, t in record.masters.items():
        np.testing.assert_allclose(t.numpy(), masters[name], rtol=1e-12, atol=0)
        assert np.abs(masters[name]).max() > 0


def _float_loss(prepared, masters, ids, mask, labels, sign=0, z=None, delta=0.0):
    """The float twin's loss with each adapter's operand ``masters + sign * delta * z``."""
    operands = {name: masters[name] + sign * delta * torch.as_tensor(z[name]).double()
                for name in masters} if sign else masters
    logits = prepared.model.forward(ids, mask, FloatLinears(prepared.model, operands))
    return F.cross_entropy(logits, torch.as_tensor(labels))


def test_float_twin_difference_is_the_directional_derivative_along_z(prepared):
    """(l+ - l-) / (2 delta), delta = 2^-eps_shift operand units (the twin's own losses), is
    dL/dt of the float loss at T_f + t z, by autograd (a second route), within 1 %; a wrong
    eps (its exponent's sign, a factor 2) is off by far more."""
    run = ZoFinetune(prepared, "float")
    for name in run.masters:          # away from zero, where the loss is not symmetric
        run.masters[name] = torch.linspace(-3000, 3000, run.masters[name].numel(),
                                           dtype=torch.float64).reshape(run.masters[name].shape)
    start = {name: t.clone() for name, t in run.masters.items()}
    record = run.step()
    delta = 2.0 ** -run.settings.eps_shift
    z = expected_z(prepared, 1)[0]
    ids, mask, labels = (t[record.batch] for t in prepared.train)
    t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    operands = {name: start[name] + t * torch.as_tensor(z[name]).double() for name in start}
    with torch.enable_grad():
        logits = prepared.model.forward(ids, mask, FloatLinears(prepared.model, operands))
        F.cross_entropy(logits, torch.as_tensor(labels)).backward()
    estimate = (record.losses[0] - record.losses[1]) / (2 * delta)
    assert abs(t.grad.item()) > 1e-6
    assert estimate == pytest.approx(t.grad.item(), rel=1e-2)


def test_the_float_adapter_adds_the_int8_calls_contribution_dequantized(prepared):
    """For one adapter with the master T: float (x A)(T/2^8 * column_scale) against the int8
    call's U·Tp times the accumulator scale s_x s_w (X·W taken out), on the same input:
    equal within the quantization's error (2 %); a B off by a factor shows."""
    name = adapter_names(CFG.blocks)[1]                     # block0.value
    adapter = prepared.model.adapters[name]
    linear = adapter.linear
    r, n = adapter.shape
    master = torch.as_tensor(np.random.default_rng(7).integers(-2 ** 20, 2 ** 20, (r, n)))
    ids, mask, _ = prepared.train
    x = prepared.model.embed(ids[:4]).reshape(-1, linear.float_weight.shape[1])
    xq = linear.quantize_input(x)
    units = GoldenUnits(CFG.generator().golden(), CFG.layer_rows)
    with_t = units(AdapterCall(name, xq, linear.weight, adapter.a, master,
                               int(adapter.u_params.multiplier), int(adapter.u_params.shift),
                               0, 0))
    without = units(AdapterCall(name, xq, linear.weight, adapter.a, torch.zeros_like(master),
                                int(adapter.u_params.multiplier), int(adapter.u_params.shift),
                                0, 0))
    int8_part = (with_t - without).double() * linear.acc_scale[None, :]
    operand = (master >> MASTER_FRAC).double()
    float_part = (x.double() @ adapter.a_float.double()) @ (operand * adapter.column_scale)
    scale = float_part.abs().max()
    assert scale > 0
    assert float((int8_part - float_part).abs().max() / scale) < 0.02
    # and the float twin's own call adds exactly that formula
    twin = FloatLinears(prepared.model, {name: operand})
    y = twin(name, x.float()) - F.linear(x.float(), linear.float_weight, linear.float_bias)
    np.testing.assert_allclose(y.double().numpy(), float_part.numpy(), rtol=1e-4,
                               atol=1e-4 * float(scale))


def test_with_zero_masters_the_float_model_is_the_frozen_model(prepared):
    """Hugging Face's own forward of the kept blocks, mean-pooled by hand, through the
    frozen head: the float twin with zero masters gives the same logits."""
    ids, mask, _ = prepared.train
    model = prepared.model
    zero = {name: torch.zeros(adapter.shape, dtype=torch.float64)
            for name, adapter in model.adapters.items()}
    twin = model.logits(ids, mask, FloatLinears(model, zero))
    with torch.no_grad():
        hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1)
        frozen = model.head_float(pooled).double()
    np.testing.assert_allclose(twin.numpy(), frozen.numpy(), rtol=1e-4, atol=1e-5)


def test_int8_with_zero_masters_tracks_the_frozen_model(prepared):
    """The accelerator's arithmetic with zero masters is the frozen model up to int8
    rounding (on the tiny random BERT: measured 2.8 % of the logits' spread on average,
    96 % of the decisions the same): within 8 % on average and 85 % of the decisions."""
    ids, mask, _ = prepared.train
    model = prepared.model
    zero = {name: torch.zeros(adapter.shape, dtype=torch.int64)
            for name, adapter in model.adapters.items()}
    units = GoldenUnits(CFG.generator().golden(), CFG.layer_rows)
    int8 = model.logits(ids, mask, IntegerLinears(model, units, zero))
    floats = model.logits(ids, mask, FloatLinears(model, {n: t.double() for n, t in zero.items()}))
    spread = float(floats.max() - floats.min())
    assert float((int8 - floats).abs().mean()) < 0.08 * spread
    assert float((int8.argmax(1) == floats.argmax(1)).double().mean()) >= 0.85


# -- learning -------------------------------------------------------------------------------
#: The learning test's run: MiniLM's first two blocks, 32 examples the head was not fitted
#: on as one full batch (the few-shot setting of issue 33), q = 1, 40 steps.
LEARN = FinetuneConfig(blocks=2, seq_len=16, batch=32, queries=1, n_train=32, n_test=32,
                       calibration=16, rank=8, lr=1e-3, eps=4e-3, seed=0, split_seed=0)
LEARN_STEPS, LEARN_FACTOR = 40, 0.7


@pytest.fixture(scope="module")
def few_shot(one_torch_thread):
    prepared = prepare(LEARN, model_and_tokenizer=load_model(LEARN))
    prepared.train = prepared.test          # train on examples the head never saw
    return prepared


def _loss_ratio(run) -> float:
    ids, mask, labels = run.prepared.train
    start = run.loss(ids, mask, labels, run.masters, 0)
    for _ in range(LEARN_STEPS):
        run.step()
    return run.loss(ids, mask, labels, run.masters, 0) / start


class NoSignal(ZoFinetune):
    """The control: g with a random sign (seeded), so the estimate carries no signal."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.signs = np.random.default_rng(2)

    def gradient(self, loss_plus, loss_minus):
        return super().gradient(loss_plus, loss_minus) * int(self.signs.choice([-1, 1]))


@pytest.mark.parametrize("arithmetic", [
    "int8", pytest.param("float", marks=[pytest.mark.slow, pytest.mark.ci])])
def test_a_short_run_learns(few_shot, arithmetic):
    """Measured: int8 0.52, float 0.57 of the start (seed 0); random-sign controls over six
    control seeds 0.81 to 3.8; the generator not restored before the update 0.97 to 1.0.
    (The float twin's learning on the tiny model, with its control, is in the default run:
    tests/test_finetune_learning.py; this is the int8 step's, on MiniLM.)"""
    assert _loss_ratio(ZoFinetune(few_shot, arithmetic)) < LEARN_FACTOR


@pytest.mark.slow
@pytest.mark.ci
def test_the_same_run_without_signal_does_not_learn(few_shot):
    assert _loss_ratio(NoSignal(few_shot, "int8")) > LEARN_FACTOR

