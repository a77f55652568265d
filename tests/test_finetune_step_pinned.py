"""One composed ZO fine-tuning step (``golden/finetune/train.py``: ``ZoFinetune.step``) pinned
to derivations written here, not taken from the code under test (issue 31).

The co-simulation replays the golden step's own calls on the RTL, so a golden step that
stopped being ZO would still be bit-exact there. Here, on the tiny random BERT with two
blocks (four adapters of shape (8, 32): r != N), q = 2 and batch 3:

* every call the step makes to the ZO layer is read back from a log of (call, result): the
  flags, the masters each call gets, and each result equal to the documented formula with
  the z of a second generator walked the plain way (:class:`test_finetune_golden.PlainWalk`),
  so the update of every adapter and query regenerates exactly the z its forward passes
  used; +z and -z give exact opposites; at the masters' rails the saturations hold;
* the losses are the mean cross-entropy of the head's raw results, g the documented
  ``clamp(round((l+ - l-) 2^6 / (2 eps)))`` with eps the requested one rounded to a power
  of two, and the masters after the step the documented update (int8 and float);
* the float twin's g is 2^6 times the directional derivative of its own loss along z
  (autograd), its adapter ``x W^T + b + (x A)(Tp_f s_x s_w / s_u)`` by hand, and with zero
  masters it is the frozen Hugging Face model;
* the calibration of the adapted maps (smoothing, scales, A in int8, U's requantizer)
  computed again from Hugging Face's own hidden states.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from test_finetune_golden import PlainWalk, hand_percentile, numpy_adapter
from zoforge.golden.finetune.calls import AdapterCall, EngineCall, GoldenUnits, UpdateCall
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.finetune.model import FloatLinears
from zoforge.golden.finetune.train import ZoFinetune, load_model, prepare

CFG = FinetuneConfig(model="tiny", blocks=2, seq_len=8, batch=3, queries=2, n_train=24,
                     n_test=8, calibration=8, rank=8, lr=2e-3, eps=4e-3, engine_rows=4,
                     engine_cols=4)
#: The adapters in forward order (the generator's order) and their (r, N), written out.
NAMES = ("block0.query", "block0.value", "block1.query", "block1.value")
SHAPE = (8, 32)
#: Documented constants (golden/zolayer/network.py, config.py), written out again.
WEIGHT_FRAC, GRAD_FRAC, MASTER_FRAC = 12, 6, 8
INT16 = (-2 ** 15, 2 ** 15 - 1)
INT24 = (-2 ** 23, 2 ** 23 - 1)
#: The generator's fractional bits (8-bit LFSRs, 7 lanes: values of 10 bits, 7 below 1).
FRAC = 7
#: eps rounded to the nearest power of two (4e-3 -> 2^-8), and the shift of z it becomes:
#: eps = 2^(FRAC - e - WEIGHT_FRAC).
EPS = 2.0 ** round(math.log2(CFG.eps))
EPS_SHIFT = FRAC - WEIGHT_FRAC - round(math.log2(CFG.eps))


pytestmark = pytest.mark.usefixtures("one_torch_thread")

@pytest.fixture(scope="module")
def prepared():
    return prepare(CFG, load_model(CFG))


def expected_z() -> list[dict[str, np.ndarray]]:
    """Per query, adapter -> z: each query draws every adapter's z once, in forward order,
    from the generator's reset state on (its - pass and its updates draw the same again)."""
    walk = PlainWalk(CFG.generator().golden().state, CFG.layer_rows)
    return [{name: walk.draw(*SHAPE) for name in NAMES} for _ in range(CFG.queries)]


class Recorder:
    """Golden units that keep every call with its result, in order."""

    def __init__(self):
        self.units = GoldenUnits(CFG.generator().golden(), CFG.layer_rows)
        self.log: list[tuple[object, torch.Tensor]] = []

    def __call__(self, call):
        result = self.units(call)
        self.log.append((call, result))
        return result

    def zolayer(self):
        return [(c, r) for c, r in self.log if isinstance(c, (AdapterCall, UpdateCall))]

    def head(self):
        return [r for c, r in self.log if isinstance(c, EngineCall) and c.name == "head"]


def rails_masters() -> dict[str, torch.Tensor]:
    """Small masters but for a few words at the rails: row 0, columns 0..7 at the top of the
    24-bit range (less 0..3), row 1, columns 8..15 at the bottom (plus 0..3); the operand
    T >> 8 is at the int16 rails there."""
    rng = np.random.default_rng(8)
    out = {}
    for name in NAMES:
        t = rng.integers(-2 ** 14, 2 ** 14, SHAPE)
        t[0, :8] = INT24[1] - rng.integers(0, 4, 8)
        t[1, 8:16] = INT24[0] + rng.integers(0, 4, 8)
        out[name] = torch.tensor(t)
    return out


@pytest.fixture(scope="module", params=["zero", "rails"])
def int8_step(request, prepared):
    """An int8 step from zero masters or from :func:`rails_masters`: (start masters, the
    step's record, the recorder, the run)."""
    recorder = Recorder()
    run = ZoFinetune(prepared, "int8", units=recorder)
    if request.param == "rails":
        run.masters = rails_masters()
    start = {name: t.clone() for name, t in run.masters.items()}
    return start, run.step(), recorder, run


def hand_update(master: np.ndarray, g: int, z: np.ndarray, eta_mult: int,
                eta_shift: int) -> np.ndarray:
    """clamp(T - ((g z eta_mult + 2^(s-1)) >> s), int24), in Python integers."""
    out = np.empty_like(master)
    for idx in np.ndindex(master.shape):
        delta = (g * int(z[idx]) * eta_mult + (1 << (eta_shift - 1))) >> eta_shift
        out[idx] = max(INT24[0], min(INT24[1], int(master[idx]) - delta))
    return out


def test_the_step_settings_are_the_documented_integers(prepared):
    """eps 4e-3 -> 2^-8 (e = 3), g's gain 2^6 / (2 eps), eta_mult 2^-eta_shift = lr / q
    2^(12 + 8 - 6 - F) to the 16-bit multiplier's resolution, eta_mult in [2^15, 2^16)."""
    s = ZoFinetune(prepared, "int8").settings
    assert (EPS, EPS_SHIFT) == (2.0 ** -8, 3)
    assert (s.eps_shift, s.eps) == (EPS_SHIFT, EPS)
    assert s.gain == 2.0 ** GRAD_FRAC / (2 * EPS)
    eta = CFG.lr / CFG.queries * 2.0 ** (WEIGHT_FRAC + MASTER_FRAC - GRAD_FRAC - FRAC)
    assert s.eta_mult * 2.0 ** -s.eta_shift == pytest.approx(eta, rel=2 ** -16)
    assert 2 ** 15 <= s.eta_mult < 2 ** 16
    assert s.lr == pytest.approx(CFG.lr, rel=2 ** -15)


def test_the_step_draws_the_batch_of_its_seed(int8_step):
    """Step 0's examples: default_rng([seed, 0]).choice(n_train, batch, replace=False)."""
    _, record, _, _ = int8_step
    expected = np.random.default_rng([CFG.seed, 0]).choice(CFG.n_train, CFG.batch,
                                                           replace=False)
    assert record.step == 0 and record.batch.tolist() == expected.tolist()


def test_every_zo_layer_call_has_the_documented_flags_and_masters(int8_step):
    """Per query: the + pass's adapter calls (sign +1, eps_shift e; the first saves), the -
    pass's (sign -1; the first restores), then one update per adapter (the first restores),
    in forward order; the forward passes get the step's start masters, each update the
    previous query's updated masters; each update's g is the query's."""
    start, record, recorder, _ = int8_step
    calls = recorder.zolayer()
    assert len(calls) == CFG.queries * 3 * len(NAMES)
    chain = {name: start[name].numpy() for name in NAMES}
    for q in range(CFG.queries):
        block = calls[q * 3 * len(NAMES):(q + 1) * 3 * len(NAMES)]
        for part, sign in enumerate((1, -1, None)):
            for j, name in enumerate(NAMES):
                call, result = block[part * len(NAMES) + j]
                assert call.name == name
                if sign is None:
                    assert isinstance(call, UpdateCall) and call.restore == (j == 0)
                    assert call.g == record.grads[q]
                    np.testing.assert_array_equal(call.master.numpy(), chain[name])
                    chain[name] = result.numpy()
                    continue
                assert isinstance(call, AdapterCall)
                assert (call.sign, call.eps_shift) == (sign, EPS_SHIFT)
                assert (call.save, call.restore) == (sign == 1 and j == 0,
                                                     sign == -1 and j == 0)
                np.testing.assert_array_equal(call.master.numpy(), start[name].numpy())


def test_every_branch_and_update_uses_its_querys_z(int8_step):
    """Every adapter call's result is the documented wrap32(X W + U clamp((T >> 8) +- (z >>
    e))) and every update's clamp(T - ((g z eta_mult + half) >> s)) with the same z, the
    query's (the plain walk's): the update regenerates the z of both forward passes, for
    every query and adapter; the two queries' z differ."""
    _, _, recorder, run = int8_step
    s = run.settings
    zs = expected_z()
    calls = recorder.zolayer()
    for q in range(CFG.queries):
        block = calls[q * 3 * len(NAMES):(q + 1) * 3 * len(NAMES)]
        for call, result in block:
            z = zs[q][call.name]
            if isinstance(call, AdapterCall):
                np.testing.assert_array_equal(result.numpy(), numpy_adapter(call, z),
                                              err_msg=f"query {q} {call.name} {call.sign}")
            else:
                np.testing.assert_array_equal(
                    result.numpy(), hand_update(call.master.numpy(), call.g, z, s.eta_mult,
                                                s.eta_shift), err_msg=f"query {q} update")
    assert not np.array_equal(zs[0][NAMES[0]], zs[1][NAMES[0]])


def test_the_plus_and_minus_branches_are_exact_opposites(int8_step):
    """The first block's adapters see the same input in both passes, so with unsaturated
    operands Y+ + Y- = 2 Y0 (Y0 the unperturbed formula) and Y+ != Y-: the passes perturb
    by exactly +(z >> e) and -(z >> e). From the rails the step reaches the int16 operand's
    saturation at both ends in both passes (which the results' formula includes)."""
    start, _, recorder, _ = int8_step
    calls = recorder.zolayer()
    zs = expected_z()
    at_rails = int(start[NAMES[0]].max()) > INT24[1] - 4
    for q in range(CFG.queries):
        block = calls[q * 3 * len(NAMES):(q + 1) * 3 * len(NAMES)]
        for j, name in enumerate(NAMES):
            (plus, y_plus), (minus, y_minus) = block[j], block[len(NAMES) + j]
            base = start[name].numpy() >> MASTER_FRAC
            shifted = zs[q][name] >> EPS_SHIFT
            if at_rails:
                for perturbed in (base + shifted, base - shifted):
                    assert (perturbed > INT16[1]).any() and (perturbed < INT16[0]).any()
            elif name.startswith("block0."):
                assert torch.equal(plus.x, minus.x)
                plain = numpy_adapter(plus, None)          # Tp = T >> 8 (no z given)
                assert np.array_equal(y_plus.numpy() + y_minus.numpy(), 2 * plain)
                assert not np.array_equal(y_plus.numpy(), y_minus.numpy())


def cross_entropy(logits: np.ndarray, labels) -> float:
    """Mean of logsumexp(row) - row[label], with plain Python floats."""
    total = 0.0
    for row, label in zip(logits.tolist(), labels):
        peak = max(row)
        total += peak + math.log(sum(math.exp(v - peak) for v in row)) - row[int(label)]
    return total / len(labels)


def test_the_losses_are_the_heads_cross_entropy_and_g_the_documented_integer(prepared,
                                                                            int8_step):
    """Each branch's loss is the mean cross-entropy of the head's raw int32 results times
    s_x s_w[n] (labels of the step's batch); g = clamp(round_half_even((l+ - l-) 2^6 /
    (2 eps)), int16), eps = 2^-8, per query."""
    _, record, recorder, _ = int8_step
    head = prepared.model.head
    heads = recorder.head()
    assert len(heads) == 2 * CFG.queries
    labels = prepared.train[2][record.batch]
    for branch, raw in enumerate(heads):
        logits = raw.numpy().astype(np.float64) * (head.in_scale
                                                   * head.weight_scale.numpy())[None, :]
        assert record.losses[branch] == pytest.approx(cross_entropy(logits, labels),
                                                      rel=1e-12)
    for q in range(CFG.queries):
        difference = record.losses[2 * q] - record.losses[2 * q + 1]
        g = max(INT16[0], min(INT16[1], round(difference * 2 ** GRAD_FRAC / (2 * EPS))))
        assert record.grads[q] == g
    assert all(g != 0 for g in record.grads)


def test_one_int8_step_moves_the_masters_by_the_documented_update(int8_step):
    """masters' = chain over the queries of clamp(T - ((g_q z_q eta_mult + 2^(s-1)) >> s),
    int24), rounded after every query; from the rails both ends of the clamp are reached."""
    start, record, _, run = int8_step
    s = run.settings
    zs = expected_z()
    masters = {name: start[name].numpy() for name in NAMES}
    unclamped_beyond = False
    for q, g in enumerate(record.grads):
        for name in NAMES:
            delta = (g * zs[q][name] * s.eta_mult + (1 << (s.eta_shift - 1))) >> s.eta_shift
            raw = masters[name] - delta
            unclamped_beyond |= bool((raw > INT24[1]).any() and (raw < INT24[0]).any())
            masters[name] = np.clip(raw, *INT24)
    assert list(record.masters) == list(NAMES)
    for name in NAMES:
        np.testing.assert_array_equal(record.masters[name].numpy(), masters[name], name)
        assert not np.array_equal(masters[name], start[name].numpy())
    if int(start[NAMES[0]].max()) > INT24[1] - 4:
        assert unclamped_beyond


def test_one_float_step_moves_the_masters_by_the_documented_update(prepared):
    """Float: g = (l+ - l-) 2^6 / (2 eps) unrounded, and T_f -= eta g z / 2^8 per query with
    eta = lr / q 2^(12 + 8 - 6 - F) (to the 16-bit multiplier's resolution), the z the int8
    step's; nothing rounded or clamped."""
    run = ZoFinetune(prepared, "float")
    record = run.step()
    eta = CFG.lr / CFG.queries * 2.0 ** (WEIGHT_FRAC + MASTER_FRAC - GRAD_FRAC - FRAC)
    zs = expected_z()
    masters = {name: np.zeros(SHAPE) for name in NAMES}
    for q in range(CFG.queries):
        g = (record.losses[2 * q] - record.losses[2 * q + 1]) * 2 ** GRAD_FRAC / (2 * EPS)
        assert record.grads[q] == pytest.approx(g, rel=1e-12)
        for name in NAMES:
            masters[name] -= eta * g * zs[q][name] / 2 ** MASTER_FRAC
    for name in NAMES:
        got = record.masters[name]
        assert got.dtype == torch.float64
        np.testing.assert_allclose(got.numpy(), masters[name], rtol=1e-4, atol=0)
        assert np.abs(masters[name]).max() > 0


def float_loss(prepared, operands, batch) -> torch.Tensor:
    ids, mask, labels = (t[batch] for t in prepared.train)
    logits = prepared.model.forward(ids, mask, FloatLinears(prepared.model, operands))
    return F.cross_entropy(logits, torch.as_tensor(labels))


def test_float_g_is_the_directional_derivative_of_the_float_loss(prepared):
    """From moderate nonzero masters, each query's float g equals 2^6 dL/dt at t = 0 for
    weights W + t z / 2^F (weight units: operand 2^-12, i.e. operands T_f + t z 2^(12 - F)),
    by autograd through the same float model, within 1 %: a wrong eps (exponent's sign, a
    factor) or gain is off by far more."""
    run = ZoFinetune(prepared, "float")
    rng = np.random.default_rng(3)
    run.masters = {name: torch.tensor(rng.uniform(-3000, 3000, SHAPE)) for name in NAMES}
    start = {name: t.clone() for name, t in run.masters.items()}
    record = run.step()
    for q, zq in enumerate(expected_z()):
        t = torch.zeros((), dtype=torch.float64, requires_grad=True)
        operands = {name: start[name] + t * torch.as_tensor(zq[name]).double()
                    * 2.0 ** (WEIGHT_FRAC - FRAC) for name in NAMES}
        with torch.enable_grad():
            float_loss(prepared, operands, record.batch).backward()
        derivative = t.grad.item()
        assert abs(derivative) > 1e-3
        assert record.grads[q] == pytest.approx(2 ** GRAD_FRAC * derivative, rel=1e-2)


@pytest.mark.parametrize("sign", [0, 1, -1])
def test_the_float_adapter_is_its_formula_by_hand(prepared, sign):
    """FloatLinears on an adapted map: x W^T + b + (x A_f)((T_f + sign z 2^-e) s_x s_w[n] /
    s_u), with z from its ``draw`` asked for the (r, N) shape (sign 0: nothing drawn), in
    float64 by hand against the float32 twin."""
    rng = np.random.default_rng(5 + sign)
    z = rng.integers(-512, 512, SHAPE)
    asked = []

    def draw(shape):
        asked.append(tuple(shape))
        return torch.tensor(z)
    for name in NAMES:
        adapter = prepared.model.adapters[name]
        linear = adapter.linear
        master = torch.tensor(rng.uniform(-2000, 2000, SHAPE))
        x = torch.tensor(rng.normal(0, 1, (2, 5, 32)), dtype=torch.float32)
        twin = FloatLinears(prepared.model, {name: master}, draw, sign, EPS_SHIFT)
        got = twin(name, x).double().numpy()
        xs = x.double().numpy()
        operand = master.numpy() + sign * z * 2.0 ** -EPS_SHIFT
        b = operand * (linear.in_scale * linear.weight_scale.numpy() / adapter.u_scale)
        expected = (xs @ linear.float_weight.double().numpy().T
                    + linear.float_bias.double().numpy()
                    + (xs @ adapter.a_float.double().numpy()) @ b)
        adapter_part = np.abs(expected - xs @ linear.float_weight.double().numpy().T).max()
        np.testing.assert_allclose(got, expected, rtol=0, atol=2e-5 * np.abs(expected).max())
        assert adapter_part > 0.1
    assert asked == ([SHAPE] * len(NAMES) if sign else [])


def test_with_zero_masters_the_float_model_is_the_frozen_model(prepared):
    """The float twin with zero masters: Hugging Face's own forward of the two blocks,
    mean-pooled over the mask by hand, through the frozen head."""
    ids, mask, _ = prepared.train
    model = prepared.model
    zero = {name: torch.zeros(SHAPE, dtype=torch.float64) for name in NAMES}
    twin = model.logits(ids, mask, FloatLinears(model, zero)).numpy()
    with torch.no_grad():
        hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state.double()
    pooled = np.stack([hidden[i, mask[i].bool()].mean(0).numpy() for i in range(len(ids))])
    head = model.head_float
    frozen = pooled @ head.weight.double().numpy().T + head.bias.double().numpy()
    np.testing.assert_allclose(twin, frozen, rtol=0, atol=1e-5 * np.abs(frozen).max())


def test_the_adapted_maps_are_calibrated_as_documented(prepared):
    """Each adapted map's calibration from Hugging Face's own hidden states on the first
    ``calibration`` training examples (padding included): s_k = sqrt(max|x_k| /
    max_n|W[n, k]|), s_x = percentile(|x / s|, 99.99) / 127, s_w[n] = max_k |W[n, k] s_k| /
    127, the output scales max_t |y[t, n]| / 127, s_u = percentile(|x A_f|, 99.99) / 127, A
    int8 = round(A_f s / s_a) (s_a = max |A_f s| / 127) and U's requantizer s_x s_a / s_u."""
    model = prepared.model
    ids, mask = (t[:CFG.calibration] for t in prepared.train[:2])
    with torch.no_grad():
        states = model.model(input_ids=ids, attention_mask=mask,
                             output_hidden_states=True).hidden_states
    for name in NAMES:
        block, kind = int(name[5]), name.split(".")[1]
        adapter, linear = model.adapters[name], model.linears[name]
        module = getattr(model.model.encoder.layer[block].attention.self, kind)
        x = states[block].double().reshape(-1, 32).numpy()
        w = module.weight.double().numpy()                     # (N, K)
        smooth = np.sqrt(np.abs(x).max(0) / np.abs(w).max(0))
        np.testing.assert_allclose(linear.smooth.numpy(), smooth, rtol=1e-5)
        s_x = hand_percentile(np.abs(x / smooth).reshape(-1).tolist(), 99.99) / 127
        assert linear.in_scale == pytest.approx(s_x, rel=1e-5)
        s_w = np.abs(w * smooth[None, :]).max(1) / 127
        np.testing.assert_allclose(linear.weight_scale.numpy(), s_w, rtol=1e-5)
        y = x @ w.T + module.bias.double().numpy()
        np.testing.assert_allclose(linear.out_scale.numpy(), np.abs(y).max(0) / 127,
                                   rtol=1e-4)
        a = adapter.a_float.double().numpy()                   # (K, r)
        assert a.shape == (32, SHAPE[0]) and np.abs(a).max() <= 32 ** -0.5
        s_u = hand_percentile(np.abs(x @ a).reshape(-1).tolist(), 99.99) / 127
        assert adapter.u_scale == pytest.approx(s_u, rel=1e-4)
        a_smooth = a * linear.smooth.numpy()[:, None]
        s_a = np.abs(a_smooth).max() / 127
        np.testing.assert_array_equal(adapter.a.numpy(), np.clip(np.round(a_smooth / s_a),
                                                                 -127, 127))
        ratio = linear.in_scale * s_a / adapter.u_scale
        mult, shift = int(adapter.u_params.multiplier), int(adapter.u_params.shift)
        assert mult * 2.0 ** -shift == pytest.approx(ratio, rel=2 ** -16)


def test_the_host_quantizes_the_first_adapters_input_by_hand(prepared, int8_step):
    """block0.query's int8 input in the step: the embeddings of the batch (Hugging Face's
    hidden state 0) over s_k and s_x, rounded half to even, clamped to +-127."""
    _, record, recorder, _ = int8_step
    model = prepared.model
    call = next(c for c, _ in recorder.zolayer() if c.name == NAMES[0])
    ids, mask = (t[record.batch] for t in prepared.train[:2])
    with torch.no_grad():
        embedded = model.model(input_ids=ids, attention_mask=mask,
                               output_hidden_states=True).hidden_states[0]
    linear = model.linears[NAMES[0]]
    x = embedded.double().reshape(-1, 32).numpy() / linear.smooth.numpy() / linear.in_scale
    expected = np.clip(np.round(x), -127, 127)
    assert call.x.dtype == torch.int8 and tuple(call.x.shape) == (CFG.batch * CFG.seq_len, 32)
    np.testing.assert_array_equal(call.x.numpy(), expected)
