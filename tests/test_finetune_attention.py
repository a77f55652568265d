"""The quantized attention on the GEMM engine (golden/finetune/attention.py, ``attention``
``engines``): the context equals a second derivation in numpy int64 per sequence and head
(q, k, v saturated at +-127, P at both ends 0 and 127, masked positions); the golden units'
batched raw product equals the per-call engine jobs (past the 32-bit wrap too); the integer
softmax is one SoftmaxCall per block and forward between the two products; a whole
ZoFinetune step with engine attention equals the same step run call by call; the host
attention is untouched (no attention calls, float twin the same); the limits are one line."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from zoforge.errors import ConfigError
from zoforge.golden.finetune.attention import (P_LEVELS, AttentionScales, EngineAttention,
                                               quantize_probabilities)
from zoforge.golden.finetune.calls import EngineCall, GoldenUnits, SoftmaxCall, raw_jobs
from zoforge.golden.finetune.integer_ops import SoftmaxParams
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.finetune.model import check_model_limits
from zoforge.golden.finetune.train import ZoFinetune, prepare
from zoforge.golden.models import tiny_encoder

CFG = FinetuneConfig(blocks=1, seq_len=8, batch=2, queries=2, n_train=8, n_test=4,
                     calibration=4, rank=4, engine_rows=4, engine_cols=4, attention="engines")


def units(**kw):
    return GoldenUnits(CFG.generator().golden(), CFG.layer_rows, **kw)


class PerCall:
    """Units without ``raw_batch``: every job one call to the golden units (the RTL's way)."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, call):
        return self.inner(call)


# -- the integer attention against a derivation by hand -----------------------------------------

def numpy_attention(q, k, v, mask, s: AttentionScales):
    """The module docstring's formulas per sequence and head: numpy int64 products, numpy
    rounding (half to even), float32 softmax (torch's, the float step the docstring
    names). Returns the context and the int8 q, k, v and P it used."""
    def int8(t, scale):
        return np.clip(np.round(t.numpy().astype(np.float64) / scale), -127, 127) \
            .astype(np.int64)
    q8, k8, v8 = int8(q, s.q), int8(k, s.k), int8(v, s.v)
    B, heads, L, d = q.shape
    out = np.zeros((B, heads, L, d), np.float32)
    p8 = np.zeros((B, heads, L, L), np.int64)
    low = np.finfo(np.float32).min
    for b in range(B):
        bias = np.where(mask[b].numpy() == 1, np.float32(0), np.float32(low))
        for h in range(heads):
            scores = np.zeros((L, L), np.int64)
            for i in range(L):
                for j in range(L):
                    scores[i, j] = sum(int(q8[b, h, i, t]) * int(k8[b, h, j, t])
                                       for t in range(d))
            scaled = (scores.astype(np.float64) * (s.q * s.k / math.sqrt(d))) \
                .astype(np.float32) + bias[None, :]
            p = torch.softmax(torch.from_numpy(scaled), dim=-1).numpy()
            p8[b, h] = np.clip(np.round(p.astype(np.float64) * 127), 0, 127)
            context = p8[b, h] @ v8[b, h]                          # int64, exact
            out[b, h] = (context.astype(np.float64) * (s.v / 127)).astype(np.float32)
    return torch.from_numpy(out), q8, k8, v8, p8


def test_engine_attention_equals_numpy_per_head_at_the_corners():
    g = torch.Generator().manual_seed(3)
    B, heads, L, d = 2, 3, 6, 4
    q = torch.randn(B, heads, L, d, generator=g) * 2.0
    k = torch.randn(B, heads, L, d, generator=g) * 2.0
    v = torch.randn(B, heads, L, d, generator=g) * 2.0
    k[0, 0] *= 0.01
    k[0, 0, 2] = 40.0                   # one key that takes all of sequence 0's P (127)
    q[0, 0] = q[0, 0].abs() + 20.0
    q[1, 2, 0], v[1, 1, 3] = -500.0, 500.0          # saturated at -127 and +127
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]])
    s = AttentionScales(q=0.05, k=0.04, v=0.03)
    golden = units(record=True)
    got = EngineAttention({"block0": s}, golden)("block0", q, k, v, mask)
    want, q8, k8, v8, p8 = numpy_attention(q, k, v, mask, s)
    assert torch.equal(got, want)
    assert {q8.min(), v8.max()} == {-127, 127}
    assert p8.max() == 127 and (p8[0, 0, :, 2] == 127).all()
    assert (p8[0, :, :, 5] == 0).all() and (p8[1, :, :, 3:] == 0).all()    # masked: 0
    # the jobs: one per sequence and head, in that order, with these operands
    scores = [c for c in golden.log if c.name == "block0.scores"]
    context = [c for c in golden.log if c.name == "block0.context"]
    assert len(scores) == len(context) == B * heads
    for j, (sc, cc) in enumerate(zip(scores, context)):
        b, h = divmod(j, heads)
        assert sc.raw and cc.raw and not sc.bias.any() and not cc.bias.any()
        assert np.array_equal(sc.x.numpy(), q8[b, h]) and np.array_equal(sc.w.numpy(),
                                                                          k8[b, h].T)
        assert np.array_equal(cc.x.numpy(), p8[b, h]) and np.array_equal(cc.w.numpy(),
                                                                          v8[b, h])


def test_p_quantized_in_float64_at_every_half_step():
    """P at the float32 values around every (k + 1/2) / 127 and at 0 and 1: round half to
    even of the exact float64 P x 127 (numpy), where float32 P x 127 would round some of
    them the other way."""
    mids = np.array([(k + 0.5) / 127 for k in range(127)], np.float32)
    p = np.concatenate([np.nextafter(mids, 0), mids, np.nextafter(mids, 1),
                        np.array([0, 1], np.float32)]).astype(np.float32)
    want = np.round(p.astype(np.float64) * 127).astype(np.int64)
    got = quantize_probabilities(torch.from_numpy(p)).numpy()
    assert np.array_equal(got, want) and got.dtype == np.int8
    assert want.min() == 0 and want.max() == 127
    assert (np.round(p * np.float32(127)) != want).any()       # float32 would differ


def test_engine_attention_keeps_leading_axes():
    """A copy axis in front (``(K, B, heads, L, d)``) is flattened and restored: each copy
    equals its own run."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 2, 2, 5, 4, generator=g) for _ in range(3))
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]])
    attention = EngineAttention({"block1": AttentionScales(0.02, 0.03, 0.01)}, units())
    both = attention("block1", q, k, v, mask)
    assert both.shape == q.shape
    for c in range(2):
        assert torch.equal(both[c], attention("block1", q[c], k[c], v[c], mask))


def test_integer_softmax_is_one_call_between_the_products():
    """With the integer softmax, each forward of a block makes one ``block<b>.softmax``
    SoftmaxCall between its scores and context jobs: the J = copies x B x heads scores
    stacked (each the scores job's product, in j order), each job's key mask its sequence's
    (per head), the block's constants, 127 levels; what the context jobs get as P is the
    call's result (int8); a copy axis in front gives each copy's own calls."""
    g = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(2, 2, 2, 5, 4, generator=g) * 2 for _ in range(3))
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 0, 0, 0, 0]])
    s = AttentionScales(0.05, 0.04, 0.03)
    params = SoftmaxParams.of(s.scores(4))
    recorded = units(record=True)
    attention = EngineAttention({"block2": s}, recorded, {"block2": params})
    both = attention("block2", q, k, v, mask)
    names = [c.name for c in recorded.log]
    assert names == ["block2.scores"] * 8 + ["block2.softmax"] + ["block2.context"] * 8
    call = recorded.log[8]
    assert isinstance(call, SoftmaxCall) and call.unit == "softmax"
    assert (call.params, call.levels) == (params, P_LEVELS)
    assert call.scores.shape == (8, 5, 5) and call.scores.dtype == torch.int64
    for j, scores in enumerate(recorded.log[:8]):
        assert torch.equal(call.scores[j], scores.x.long() @ scores.w.long())
        assert call.keep[j].tolist() == [bool(m) for m in mask[(j // 2) % 2]]
    p8 = GoldenUnits.softmax(call)
    assert [c.x.tolist() for c in recorded.log[9:]] == p8.tolist()
    for c in range(2):
        assert torch.equal(both[c], attention("block2", q[c], k[c], v[c], mask))


# -- the batched golden product against per-call jobs -------------------------------------------

def _per_call(x, w):
    plain = units()
    return torch.stack([plain(call) for call in raw_jobs("t", x, w)])


@pytest.mark.parametrize("fill", [None, -128, 127])
def test_raw_batch_equals_per_call_engine_jobs(fill):
    g = torch.Generator().manual_seed(1)
    x = torch.randint(-128, 128, (5, 7, 9), generator=g, dtype=torch.int8)
    w = torch.randint(-128, 128, (5, 9, 6), generator=g, dtype=torch.int8)
    if fill is not None:
        x.fill_(fill)
        w.fill_(-128)
    recorded = units(record=True)
    got = recorded.raw_batch("t", x, w)
    assert torch.equal(got, _per_call(x, w))
    want = torch.einsum("jmk,jkn->jmn", x.long(), w.long())      # exact int64, no wrap here
    assert torch.equal(got, want)
    assert [(c.name, c.raw) for c in recorded.log] == [("t", True)] * 5
    assert all(torch.equal(c.x, x[j]) and torch.equal(c.w, w[j])
               for j, c in enumerate(recorded.log))


@pytest.mark.parametrize("k", [1024, 4096])
def test_raw_batch_exact_where_float32_would_round(k):
    """Large same-sign operands: at K = 4096 the sums pass 2^24 (float32's exact integers)
    and a float32 product rounds them; the batched product equals the exact int64 one."""
    g = torch.Generator().manual_seed(k)
    x = torch.randint(100, 128, (2, 3, k), generator=g, dtype=torch.int8)
    w = torch.randint(100, 128, (2, k, 5), generator=g, dtype=torch.int8)
    want = torch.einsum("jmk,jkn->jmn", x.long(), w.long())
    rounded = not torch.equal(torch.matmul(x.float(), w.float()).long(), want)
    assert (want.abs().max() > 2 ** 24) == rounded == (k == 4096)
    assert torch.equal(units().raw_batch("t", x, w), want)


@pytest.mark.parametrize("k", [2 ** 17 - 4, 2 ** 17 + 4])
def test_raw_batch_wraps_like_the_engine_past_2_to_31(k):
    """All -128: each product 2^14, the sum 2^14 k; at k = 2^17 + 4 it wraps to
    2^31 + 2^16 - 2^32."""
    x = torch.full((2, 1, k), -128, dtype=torch.int8)
    w = torch.full((2, k, 2), -128, dtype=torch.int8)
    got = units().raw_batch("t", x, w)
    exact = 2 ** 14 * k
    want = (exact + 2 ** 31) % 2 ** 32 - 2 ** 31
    assert (got == want).all() and torch.equal(got, _per_call(x, w))
    assert (want < 0) == (k > 2 ** 17)


# -- a whole step --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def prepared():
    model = tiny_encoder(hidden=32, layers=1, heads=2, intermediate=64)
    return prepare(CFG, model_and_tokenizer=model)


def test_step_with_engine_attention_equals_the_per_call_step(prepared):
    batched_units, per_call_inner = units(record=True), units(record=True)
    batched = ZoFinetune(prepared, "int8", units=batched_units)
    per_call = ZoFinetune(prepared, "int8", units=PerCall(per_call_inner))
    for _ in range(2):
        a, b = batched.step(), per_call.step()
        assert a.losses == b.losses and a.grads == b.grads
        for name in a.masters:
            assert torch.equal(a.masters[name], b.masters[name]), name
    assert any(m.abs().sum() > 0 for m in a.masters.values())        # the step moved
    assert batched_units.generator.save() == per_call_inner.generator.save()
    assert [(c.name, type(c)) for c in batched_units.log] == \
        [(c.name, type(c)) for c in per_call_inner.log]
    # per forward and block: B x heads jobs of each product, M = L, K = d / L, N = L / d
    L, d, jobs = CFG.seq_len, 32 // 2, CFG.batch * 2
    scores = [c for c in batched_units.log if c.name == "block0.scores"]
    context = [c for c in batched_units.log if c.name == "block0.context"]
    forwards = 2 * 2 * CFG.queries            # 2 steps, a + and a - forward per query
    assert len(scores) == len(context) == forwards * jobs
    assert {tuple(c.x.shape) + (c.w.shape[1],) for c in scores} == {(L, d, L)}
    assert {tuple(c.x.shape) + (c.w.shape[1],) for c in context} == {(L, L, d)}
    assert all(isinstance(c, EngineCall) and c.raw for c in scores + context)


def test_attention_scales_are_the_float_outputs_percentile(prepared):
    """s_q, s_k, s_v: the 99.99th percentile of |q|, |k|, |v| of the float model over the
    calibration examples (padding included) over 127, derived here from the model's own
    modules and numpy."""
    model, cfg = prepared.model, prepared.cfg
    ids, mask = prepared.probe[0][:cfg.calibration], prepared.probe[1][:cfg.calibration]
    with torch.no_grad():
        h = model.model.embeddings(input_ids=ids)
        self_attention = model.model.encoder.layer[0].attention.self
        want = [np.percentile(np.abs(getattr(self_attention, name)(h).double().numpy()),
                              99.99) / 127 for name in ("query", "key", "value")]
    s = model.attention_scales["block0"]
    assert [s.q, s.k, s.v] == pytest.approx(want, rel=1e-12)
    assert len(set(want)) == 3


def test_engine_attention_changes_int8_not_float(prepared):
    """The int8 forward differs from the host attention's (it is used), the float twin's
    is the same (float attention either way)."""
    host = prepare(CFG.replace(attention="host"),
                   model_and_tokenizer=tiny_encoder(hidden=32, layers=1, heads=2,
                                                    intermediate=64))
    assert host.model.attention_scales == {} and set(prepared.model.attention_scales) == \
        {"block0"}
    ids, mask, _ = prepared.test
    logits = {}
    for name, p in (("engines", prepared), ("host", host)):
        for arithmetic in ("int8", "float"):
            zo = ZoFinetune(p, arithmetic)
            linears = zo.linears(zo.masters)
            assert isinstance(linears.attention, EngineAttention) == \
                (arithmetic == "int8" and name == "engines")
            logits[name, arithmetic] = p.model.logits(ids, mask, linears)
    assert torch.equal(logits["engines", "float"], logits["host", "float"])
    assert not torch.equal(logits["engines", "int8"], logits["host", "int8"])
    recorded = units(record=True)
    ZoFinetune(host, "int8", units=recorded).step()
    assert not any(c.name.endswith((".scores", ".context")) for c in recorded.log)


# -- the limits ------------------------------------------------------------------------------------

def test_bad_attention_is_one_line():
    with pytest.raises(ConfigError) as error:
        FinetuneConfig(attention="fabric")
    text = str(error.value)
    assert "attention" in text and "host, engines" in text and "\n" not in text


def test_result_fields_leave_out_the_host_attention():
    """Stored results keep their keys: ``attention`` at ``host`` (every earlier run's, no
    longer the default) is left out of the key's fields, ``engines`` is in."""
    assert FinetuneConfig().attention == "engines"
    cfg = FinetuneConfig(attention="host", nonlinear="float")
    assert "attention" not in cfg.result_fields()
    assert cfg.result_fields() == {k: v for k, v in cfg.field_values().items()
                                   if k not in ("attention", "nonlinear")}   # both added later
    assert cfg.replace(attention="engines").result_fields()["attention"] == "engines"


@pytest.fixture(scope="module")
def tiny_model():
    return tiny_encoder(hidden=32, layers=1, heads=2, intermediate=64)[0]


@pytest.mark.parametrize("attention, seq_len, ok", [
    ("engines", 64, True), ("engines", 65, False), ("host", 65, True), ("host", 128, True)])
def test_engine_attention_seq_len_limit(tiny_model, attention, seq_len, ok):
    """P·V's K is seq_len: at most the model's widest map (max(32, 64) = 64 here)."""
    cfg = FinetuneConfig(blocks=1, seq_len=seq_len, batch=1, n_train=8, n_test=4,
                         calibration=4, rank=4, attention=attention)
    if ok:
        check_model_limits(cfg, tiny_model)
        return
    with pytest.raises(ConfigError) as error:
        check_model_limits(cfg, tiny_model)
    assert error.value.parameter == "seq_len" and "<= 64" in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.slow
@pytest.mark.ci
def test_engine_attention_step_on_verilator_is_bit_exact(prepared):
    """RtlUnits(..., "all"): one step with every map and every attention job (Q·K^T and
    P·V per sequence and head) on the RTL engine, the adapters on the RTL ZO layer, equals
    the golden step; every call is also compared with the RTL units' own golden model."""
    from zoforge.sim.finetune_cosim import RtlUnits    # Verilator: slow tests only
    golden = units(record=True)
    record = ZoFinetune(prepared, "int8", units=golden).step()
    with RtlUnits(CFG, 32, 64, "all") as rtl:
        step = ZoFinetune(prepared, "int8", units=rtl).step()
        by_name = dict(rtl.cycles_by_name)
        assert rtl.rtl_calls == len(golden.log)
    assert step.grads == record.grads and step.losses == record.losses
    for name, master in record.masters.items():
        assert torch.equal(step.masters[name], master), name
    assert {"block0.scores engine", "block0.context engine"} <= set(by_name)
    print(f"engine-attention step on the RTL: {sum(by_name.values())} cycles; per call: "
          f"{by_name}")
