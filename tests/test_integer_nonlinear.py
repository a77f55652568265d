"""The integer GELU, softmax and LayerNorm (golden/finetune/integer_ops.py, ``nonlinear``
``integer``): each kernel equals a second derivation in plain Python ints per element at the
corners (both input ends, zero, i-GELU's clip points, a row with one large value and the rest
masked, a constant row, isqrt's hardest roots) and stays within a stated distance of the
float function; the constants are pinned to their definitions in exact rationals; the
model's hooks put each kernel where the module docstrings say; ``float`` changes no key."""
from __future__ import annotations

import copy
import math
from fractions import Fraction

import pytest
import torch
import torch.nn.functional as F

import zoforge.golden.finetune.integer_ops as ops
from zoforge.errors import ConfigError
from zoforge.golden.finetune.attention import (P_LEVELS, WIDE_LEVELS, AttentionScales,
                                               EngineAttention, HostIntegerAttention,
                                               quantize_wide)
from zoforge.golden.finetune.calls import GoldenUnits
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.golden.finetune.integer_ops import (EXP_COEFFS, EXP_SHIFTS, LN_FRAC, LN_RECIP,
                                                 SOFTMAX_FRAC, GeluParams, LayerNormParams,
                                                 SoftmaxParams, int_gelu, int_layernorm,
                                                 int_softmax, isqrt)
from zoforge.golden.finetune.train import ZoFinetune, prepare
from zoforge.golden.models import tiny_encoder

Q_MAX = WIDE_LEVELS
#: Stated distances from the float functions (derived in docs/integer-nonlinear.md):
#: i-GELU, I-BERT's erf fit (0.0183 at most) and the constants' floors; the softmax in
#: levels of 1/127, half a level of rounding and i-exp's fit; the LayerNorm, for rows with
#: an integer standard deviation of at least 2^12 and |weight| <= 2.
GELU_ERROR, SOFTMAX_ERROR, LAYERNORM_ERROR = 0.019, 0.65, 2e-3


# -- isqrt ---------------------------------------------------------------------------------------

def hard_roots() -> list[int]:
    """Per bit length up to 62: the ends, and the squares around its lowest root (n = m^2 - 1,
    the root just below an integer, is Newton's slowest)."""
    out = set(range(0, 1 << 12))
    for b in range(1, 63):
        low, high = 1 << (b - 1), (1 << b) - 1
        m = math.isqrt(low) + 1
        out |= {low, low + 1, high, high - 1, m * m - 1, m * m, m * m + 1}
    m = math.isqrt((1 << 62) - 1)
    out |= {m * m - 1, m * m, (1 << 62) - 1}
    return sorted(n for n in out if n < 1 << 62)


def test_isqrt_is_the_floor_root_at_the_hard_roots_and_needs_all_its_steps(monkeypatch):
    ns = hard_roots()
    got = isqrt(torch.tensor(ns))
    assert [int(v) for v in got] == [math.isqrt(n) for n in ns]
    monkeypatch.setattr(ops, "ISQRT_STEPS", ops.ISQRT_STEPS - 1)     # one step fewer: wrong
    assert [int(v) for v in isqrt(torch.tensor(ns))] != [math.isqrt(n) for n in ns]


# -- i-GELU --------------------------------------------------------------------------------------

def plain_gelu(q: int, p: GeluParams) -> int:
    """i-GELU of one integer, by branches and floor division."""
    if q == 0:
        return 0
    t = min(abs(q), p.beta) - p.beta
    erf = (p.gamma - t * t) // 2 ** p.shift
    return q * (p.one + erf) if q > 0 else q * (p.one - erf)


SCALES = [2.0 ** -24, 1e-4, 3.1e-4, 1e-3, 2.0 ** -7]


def scales(*values):
    """``values`` as parameters, all but 3.1e-4 (MiniLM's order) marked slow."""
    return [pytest.param(v, marks=() if v == 3.1e-4 else pytest.mark.slow) for v in values]


@pytest.mark.parametrize("scale", SCALES)
def test_gelu_constants_are_their_definitions(scale):
    p = GeluParams.of(scale)
    s_e = Fraction(scale) / Fraction(math.sqrt(2))
    assert p.beta == math.floor(Fraction(ops.ERF_B) / s_e)
    assert p.gamma == math.floor(1 / (Fraction(ops.ERF_A) * s_e * s_e))
    assert 1 << (ops.ERF_BITS - 1) <= p.one < 1 << ops.ERF_BITS or p.shift == 0
    assert p.one == p.gamma >> p.shift and p.gamma >= p.beta ** 2


@pytest.mark.parametrize("scale", scales(*SCALES[1:]))
def test_gelu_equals_plain_ints_over_the_whole_input_range(scale):
    p = GeluParams.of(scale)
    q = torch.arange(-Q_MAX, Q_MAX + 1)
    got = int_gelu(q, p)
    corners = [-Q_MAX, -p.beta - 1, -p.beta, -p.beta + 1, -1, 0, 1, p.beta - 1, p.beta,
               p.beta + 1, Q_MAX]
    assert all(int(got[c + Q_MAX]) == plain_gelu(c, p) for c in corners)
    every = list(range(-Q_MAX, Q_MAX + 1, 7))
    assert [int(got[c + Q_MAX]) for c in every] == [plain_gelu(c, p) for c in every]
    assert int(got.abs().max()) < 2 ** 31


@pytest.mark.parametrize("scale", scales(*SCALES[1:]))
def test_gelu_is_near_the_float_gelu_and_exact_past_the_clip(scale):
    p = GeluParams.of(scale)
    q = torch.arange(-Q_MAX, Q_MAX + 1)
    x = q.double() * scale
    y = int_gelu(q, p).double() * p.out_scale
    assert float((y - F.gelu(x)).abs().max()) <= GELU_ERROR
    past = q >= p.beta                                  # erf = 1: gelu(x) = x
    assert torch.allclose(y[past], x[past], rtol=1e-12, atol=0)
    assert (y[q <= -p.beta] == 0).all() and (y[q < 0] <= 0).all()


def test_gelu_refuses_a_scale_out_of_range_in_one_line():
    for bad in (0.0, 2.0 ** -6, 2.0 ** -25, float("nan")):
        with pytest.raises(ConfigError, match=r"^scale must be a number with .* \(got "):
            GeluParams.of(bad)


# -- integer softmax -----------------------------------------------------------------------------

def plain_softmax(row: list[int], keep: list[bool], p: SoftmaxParams, levels: int):
    """The integer softmax of one row: z by counting halvings, floor division by powers of 2."""
    kept = [v for v, k in zip(row, keep) if k]
    if not kept:
        return [0] * len(row)
    top, e = max(kept), []
    for v, k in zip(row, keep):
        d = max(v - top, -EXP_SHIFTS * p.ln2) if k else 0
        z = 0
        while d + (z + 1) * p.ln2 <= 0:
            z += 1
        r = d + z * p.ln2
        e.append(((r + p.b) * r + p.c) // 2 ** (p.shift + z) if k else 0)
    recip = levels * 2 ** SOFTMAX_FRAC // sum(e)
    return [(v * recip + 2 ** (SOFTMAX_FRAC - 1)) // 2 ** SOFTMAX_FRAC for v in e]


@pytest.mark.parametrize("scale", SCALES)
def test_softmax_constants_are_their_definitions(scale):
    p = SoftmaxParams.of(scale)
    a, b, c = (Fraction(v) for v in EXP_COEFFS)
    s = Fraction(scale)
    assert p.ln2 == math.floor(Fraction(math.log(2)) / s) and p.ln2 >= 88
    assert p.b == math.floor(b / (a * s)) and p.c == math.floor(c / (a * s * s))
    assert p.c >> p.shift < 1 << ops.EXP_BITS and p.b > p.ln2


def softmax_rows(p: SoftmaxParams):
    """Rows (8 keys) at the corners: random, one large value, equal values, both ends of the
    engine's scores (+-127^2 x 32), values past the clamp, masked keys."""
    g = torch.Generator().manual_seed(1)
    top = 127 * 127 * 32
    rows = [torch.randint(-top, top + 1, (8,), generator=g).tolist() for _ in range(20)]
    rows += [[top] + [-top] * 7, [0] * 8, [-top] * 8, [5, 4, 3, 2, 1, 0, -1, -2],
             [0, -p.ln2, -2 * p.ln2, -EXP_SHIFTS * p.ln2, -EXP_SHIFTS * p.ln2 - 1,
              -EXP_SHIFTS * p.ln2 + 1, 1 - p.ln2, -top]]
    keeps = [[True] * 8] * len(rows)
    rows += [[3, top, 7, -top, 0, 0, 0, 0], [1] * 8, [top] * 8]
    keeps += [[True] + [False] * 7, [False] * 8, [True, False] * 4]
    return torch.tensor(rows), torch.tensor(keeps)


@pytest.mark.parametrize("scale", scales(1e-4, 3.1e-4, 2.0 ** -7))
def test_softmax_equals_plain_ints_at_the_corners(scale):
    p = SoftmaxParams.of(scale)
    rows, keeps = softmax_rows(p)
    got = int_softmax(rows, keeps, p, P_LEVELS)
    for row, keep, out in zip(rows.tolist(), keeps.tolist(), got.tolist()):
        assert out == plain_softmax(row, keep, p, P_LEVELS), (row, keep)
    assert got.min() == 0 and got.max() == P_LEVELS
    assert got[-3].tolist() == [127] + [0] * 7          # one kept key takes it all
    assert got[-2].tolist() == [0] * 8                  # nothing kept: zeros


@pytest.mark.parametrize("scale", scales(1e-4, 3.1e-4, 1e-3))
def test_softmax_is_near_the_float_softmax(scale):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(400, 32, generator=g, dtype=torch.float64) * 3
    x[:100] *= 4
    q = torch.round(x / scale).long()
    keep = torch.rand(400, 32, generator=g) < 0.8
    keep[:, 0] = True
    got = int_softmax(q, keep, SoftmaxParams.of(scale), P_LEVELS).double()
    want = torch.softmax((q.double() * scale).masked_fill(~keep, -math.inf), -1) * P_LEVELS
    assert float((got - want).abs().max()) <= SOFTMAX_ERROR


# -- integer LayerNorm ---------------------------------------------------------------------------

def plain_layernorm(row: list[int], p: LayerNormParams) -> list[int]:
    """The integer LayerNorm of one row: the centred sum of squares, math.isqrt, floor
    division."""
    h = len(row)
    centred = [h * v - sum(row) for v in row]
    var = sum(c * c for c in centred) // h + p.eps      # = h sum q^2 - (sum q)^2 + eps_i
    std = math.isqrt(var)
    f = 2 ** LN_RECIP // std if std else 0
    cut = 2 ** (LN_RECIP - LN_FRAC)
    z = [(c * f + cut // 2) // cut for c in centred]
    return [zi * int(w) + int(b) for zi, w, b in zip(z, p.weight, p.bias)]


def layernorm_case(h: int = 48, scale: float = 1e-3, eps: float = 1e-12):
    g = torch.Generator().manual_seed(4)
    weight = torch.randn(h, generator=g) * 0.5 + 1
    bias = torch.randn(h, generator=g) * 0.2
    weight[3], bias[3] = 0.0, 0.0
    return LayerNormParams.of(scale, weight, bias, eps), weight, bias


def test_layernorm_constants():
    p, weight, bias = layernorm_case()
    assert 1 << 14 <= int(p.weight.abs().max()) < 1 << 15
    assert p.weight.tolist() == [round(Fraction(float(w)) * 2 ** p.weight_shift)
                                 for w in weight]
    assert p.bias.tolist() == [round(Fraction(float(b)) * 2 ** (LN_FRAC + p.weight_shift))
                               for b in bias]
    assert p.eps == 0 and layernorm_case(scale=2.0 ** -24, eps=1e-5)[0].eps == round(
        Fraction(48 * 48) * Fraction(1e-5) / Fraction(2.0 ** -24) ** 2)


def test_layernorm_equals_plain_ints_at_the_corners():
    p, _, _ = layernorm_case()
    g = torch.Generator().manual_seed(5)
    rows = torch.randint(-Q_MAX, Q_MAX + 1, (12, 48), generator=g)
    rows[0] = 7                                          # constant: variance 0, y = bias
    rows[1] = torch.tensor([Q_MAX, -Q_MAX] * 24)         # the widest variance
    rows[2] = -Q_MAX
    rows[2, 5] = Q_MAX                                   # one outlier: |z| at sqrt(H - 1)
    rows[3] = torch.arange(48) - 24                      # a small variance
    rows[4] = 0
    rows[4, 0] = 1                                       # the smallest nonzero
    got = int_layernorm(rows, p)
    for row, out in zip(rows.tolist(), got.tolist()):
        assert out == plain_layernorm(row, p), row
    assert got[0].tolist() == p.bias.tolist()
    z5 = (got[2, 5] - p.bias[5]) / p.weight[5]
    assert abs(float(z5) - math.sqrt(47) * 2 ** LN_FRAC) <= 1


def test_layernorm_is_near_the_float_layernorm():
    p, weight, bias = layernorm_case(h=384, scale=2e-3)
    g = torch.Generator().manual_seed(6)
    x = torch.randn(256, 384, generator=g, dtype=torch.float64) * 3 + 1
    x[:, 7] *= 8                                        # an outlier feature, as BERT's
    q = quantize_wide(x, p.scale)
    got = int_layernorm(q, p).double() * p.out_scale
    want = F.layer_norm(q.double() * p.scale, (384,), weight.double(), bias.double(), 1e-12)
    assert float((got - want).abs().max()) <= LAYERNORM_ERROR


# -- the model's hooks ---------------------------------------------------------------------------

CFG = FinetuneConfig(model="tiny", blocks=2, seq_len=8, batch=2, queries=1, n_train=8,
                     n_test=4, calibration=4, rank=4, engine_rows=4, engine_cols=4,
                     nonlinear="integer")


def recording_units():
    return GoldenUnits(CFG.generator().golden(), CFG.layer_rows, record=True)


def engine_output(run, call) -> torch.Tensor:
    """A logged engine call's float output, as IntegerLinears dequantizes it."""
    return (run.units(call).double() * run.model.linears[call.name].out_scale).float()


class Prepared(dict):
    """``CFG`` prepared per ``attention``, each when first asked for."""

    def __missing__(self, attention):
        model = self.setdefault("model", tiny_encoder(hidden=32, layers=2, heads=2,
                                                      intermediate=64))
        self[attention] = prepare(CFG.replace(attention=attention), model)
        return self[attention]


@pytest.fixture(scope="module")
def prepared():
    return Prepared()


@pytest.mark.parametrize("attention", ["host", pytest.param("engines", marks=pytest.mark.slow)])
def test_the_maps_take_the_integer_gelu_and_layernorms(prepared, attention):
    """Per block, from the logged calls of one forward: ffn_in's input is the integer
    attn_norm of attn_out's output plus the block's input, ffn_in's call the block's GELU
    job and ffn_out's input its int8 result as it is (the job's semantics against plain
    ints: tests/test_finetune_gelu_job.py), and the next block's input the integer out_norm
    of ffn_out's output plus attn_norm's."""
    run = ZoFinetune(prepared[attention], units=recording_units())
    ids, mask, _ = prepared[attention].test
    linears = run.linears(run.masters)
    nonlinear, lin = run.model.nonlinear, run.model.linears
    assert isinstance(linears.attention, EngineAttention if attention == "engines" else
                      HostIntegerAttention)
    assert linears.attention.softmax == nonlinear.softmax          # the integer softmax
    if attention == "engines":                                     # the raw scores' scale
        assert nonlinear.softmax["block1"].scale == run.model.attention_scales[
            "block1"].scores(16)
    assert nonlinear.blocks["block0"].host_scores == (attention == "host")
    run.model.logits(ids, mask, linears)
    log = {c.name: c for c in run.units.log}
    shape = (*ids.shape, -1)
    h = run.model.embed(ids)
    for b in range(CFG.blocks):
        block = f"block{b}"
        assert torch.equal(log[f"{block}.query"].x, lin[f"{block}.query"].quantize_input(
            h.reshape(-1, h.shape[-1])))
        attn = nonlinear.norm(block, "attn_norm",
                              engine_output(run, log[f"{block}.attn_out"]).reshape(shape) + h)
        assert torch.equal(log[f"{block}.ffn_in"].x, lin[f"{block}.ffn_in"].quantize_input(
            attn.reshape(-1, attn.shape[-1])))
        job = log[f"{block}.ffn_in"]
        assert job.gelu is nonlinear.blocks[block].gelu and job.multiplier is None
        want = run.units(job)
        assert log[f"{block}.ffn_out"].x.dtype == torch.int8
        assert torch.equal(log[f"{block}.ffn_out"].x.long(), want)
        h = nonlinear.norm(block, "out_norm",
                           engine_output(run, log[f"{block}.ffn_out"]).reshape(shape) + attn)


def test_the_layernorms_boundary_is_quantize_kernel_dequantize(prepared):
    nonlinear = prepared["host"].model.nonlinear
    x = torch.randn(3, 8, 32, generator=torch.Generator().manual_seed(9)) * 2
    norm = nonlinear.blocks["block1"].norms[1]
    q = quantize_wide(x, norm.scale)
    plain = torch.tensor([plain_layernorm(r, norm) for r in q.reshape(-1, 32).tolist()])
    assert torch.equal(nonlinear.norm("block1", "out_norm", x),
                       (plain.reshape(q.shape).double() * norm.out_scale).float())
    edges = torch.tensor([-1e9, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1e9]) / 4   # halves, exact
    assert quantize_wide(edges, 0.25).tolist() == [-Q_MAX, -2, -2, 0, 0, 2, 2, Q_MAX]


def test_engine_attention_feeds_p_v_the_integer_softmax_of_s():
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(2, 2, 6, 4, generator=g) * 2 for _ in range(3))
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 0, 0, 0, 0]])
    s = AttentionScales(0.05, 0.04, 0.03)
    units = recording_units()
    params = SoftmaxParams.of(s.q * s.k / math.sqrt(4))
    EngineAttention({"block0": s}, units, {"block0": params})("block0", q, k, v, mask)
    scores = [c for c in units.log if c.name == "block0.scores"]
    context = [c for c in units.log if c.name == "block0.context"]
    for j, (sc, cc) in enumerate(zip(scores, context)):
        raw = (sc.x.long() @ sc.w.long()).tolist()
        keep = [bool(m) for m in mask[j // 2]]
        want = [plain_softmax(row, keep, params, P_LEVELS) for row in raw]
        assert cc.x.tolist() == want
    assert cc.x[:, 2:].eq(0).all()                     # the masked keys: 0


def test_host_integer_attention_is_the_integer_softmax_of_the_float_scores():
    g = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(2, 2, 5, 4, generator=g) for _ in range(3))
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]])
    params = SoftmaxParams.of(1e-3)
    got = HostIntegerAttention({"block1": params})("block1", q, k, v, mask)
    for b in range(2):
        for h in range(2):
            scores = q[b, h] @ k[b, h].T / 2
            rows = quantize_wide(scores, 1e-3).tolist()
            p8 = torch.tensor([plain_softmax(r, [bool(m) for m in mask[b]], params, P_LEVELS)
                               for r in rows], dtype=torch.float32)
            assert torch.equal(got[b, h], (p8 / P_LEVELS) @ v[b, h])


def test_a_model_the_units_are_not_made_for_is_one_line(prepared):
    model, tokenizer = copy.deepcopy(prepared["model"])
    model.encoder.layer[1].intermediate.dense.weight.mul_(1e4)    # GELU inputs past 256
    with pytest.raises(ConfigError, match=r"^nonlinear must be float for this model "
                                          r"\(block1 has a calibrated input scale of .*"
                                          r"\(got integer\)$"):
        prepare(CFG, (model, tokenizer))


def test_float_changes_no_key_and_integer_is_another_task():
    from zoforge.sweep.spec import train_key     # the sweep's key (a layer above golden)
    assert FinetuneConfig().nonlinear == "integer"      # the default; float: every earlier run
    plain = FinetuneConfig(nonlinear="float")
    assert "nonlinear" not in plain.result_fields()
    assert "nonlinear" not in plain.key_dict()
    other = plain.replace(nonlinear="integer")
    assert other.result_fields()["nonlinear"] == "integer"
    assert train_key(other) != train_key(plain)
    with pytest.raises(ConfigError, match="^nonlinear must be one of float, integer"):
        FinetuneConfig(nonlinear="fixed")
