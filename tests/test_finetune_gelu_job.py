"""``ffn_in``'s GELU job in the fine-tuning step (``nonlinear`` ``integer``;
golden/finetune/nonlinear.py ``gelu_job``, golden/engine_gelu.py): the golden step runs, its
every ``ffn_in`` call is a GELU job and ``ffn_out`` takes its int8 result as it is; the job's
result equals a
second derivation in plain Python ints from the float scales (the accumulators
``sum x w + bias``, requantized to int16 by ``s_x s_w[n] / s``, i-GELU by branches, requantized
to int8 by ``g / (m[n] s')`` with ffn_out's smoothing and input scale), with both
requantizers' multipliers checked as the nearest 16-bit ones to those ratios; the job stays
within a stated distance of the float GELU; a ratio the engine cannot hold is one line.

Two data sets: the tiny random BERT's step (its calls, as the co-simulation replays them),
and a synthetic FFN at MiniLM's scales (GELU inputs up to ~20, BERT-like outlier channels,
a column negative on the calibration whose ``ffn_out`` weights are large) evaluated past
its calibration, so
both ends of the int16 requantizer and of the int8 result are reached.
"""
from __future__ import annotations

import copy
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from test_integer_nonlinear import GELU_ERROR, plain_gelu
from zoforge.errors import ConfigError
from zoforge.golden.engine_gelu import GeluStage
from zoforge.golden.finetune.calls import EngineCall, GoldenUnits
from zoforge.golden.finetune.config import ADAPTED, FinetuneConfig
from zoforge.golden.finetune.integer_ops import GeluParams
from zoforge.golden.finetune.model import QuantLinear
from zoforge.golden.finetune.nonlinear import gelu_job
from zoforge.golden.finetune.train import ZoFinetune, prepare
from zoforge.golden.models import tiny_encoder

pytestmark = pytest.mark.usefixtures("one_torch_thread")

INT16 = (-2 ** 15, 2 ** 15 - 1)
INT8 = (-128, 127)
CFG = FinetuneConfig(model="tiny", blocks=2, seq_len=8, batch=2, queries=1, n_train=8,
                     n_test=4, calibration=4, rank=4, engine_rows=4, engine_cols=4,
                     nonlinear="integer", attention="host")


def tiny_model():
    return tiny_encoder(hidden=32, layers=2, heads=2, intermediate=64)


def checked_multipliers(ratio: np.ndarray, params) -> list[tuple[int, int]]:
    """The requantizer's per-column ``(m, k)``, each checked to be the nearest 16-bit
    multiplier of ``ratio[n]``: ``2^15 <= m < 2^16`` (or ``k = 47``, the largest shift) and
    ``|m - ratio 2^k| <= 1/2``, in exact rationals."""
    pairs = list(zip(params.multiplier.tolist(), params.shift.tolist()))
    assert len(pairs) == len(ratio)
    for (m, k), r in zip(pairs, ratio.tolist()):
        assert 2 ** 15 <= m < 2 ** 16 or (k == 47 and m < 2 ** 16), (m, k, r)
        assert abs(m - Fraction(r) * 2 ** k) <= Fraction(1, 2), (m, k, r)
    return pairs


def requant(v: int, m: int, k: int, low: int, high: int) -> int:
    """``clamp(floor(v m / 2^k + 1/2), low, high)`` in Python ints."""
    return max(low, min(high, (v * m + (1 << k >> 1)) >> k))


def plain_job(x: np.ndarray, w: np.ndarray, bias: np.ndarray, acc_scale: np.ndarray,
              gelu: GeluParams, next_scale: np.ndarray, into, out):
    """The GELU job per element in Python ints from the float scales: ``(q, result)``
    as nested lists ``[M][N]`` (``into``, ``out``: the job's requantizers, checked first)."""
    m1 = checked_multipliers(acc_scale / gelu.scale, into)
    m2 = checked_multipliers(gelu.out_scale / next_scale, out)
    acc = x.astype(np.int64) @ w.astype(np.int64) + bias.astype(np.int64)
    assert np.abs(acc).max() < 2 ** 31               # no wrap: the exact sum is the int32 one
    qs, outs = [], []
    for row in acc.tolist():
        q = [requant(a, *m1[n], *INT16) for n, a in enumerate(row)]
        qs.append(q)
        outs.append([requant(plain_gelu(v, gelu), *m2[n], *INT8) for n, v in enumerate(q)])
    return qs, outs


# -- the tiny model's step -------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_run():
    prepared = prepare(CFG, tiny_model())
    run = ZoFinetune(prepared, units=GoldenUnits(CFG.generator().golden(), CFG.layer_rows,
                                                 record=True))
    ids, mask, _ = prepared.test
    run.model.logits(ids, mask, run.linears(run.masters))
    return run


def test_the_step_runs_and_every_ffn_out_takes_the_job_before_it(tiny_run):
    """One ZO step (2q forwards): every ffn_in call is a GELU job, and the ffn_out call after
    it takes its result (the job run again on the same units' model)."""
    units = GoldenUnits(CFG.generator().golden(), CFG.layer_rows, record=True)
    record = ZoFinetune(tiny_run.prepared, units=units).step()
    assert all(np.isfinite(record.losses)) and len(record.grads) == CFG.queries
    jobs = [c for c in units.log if c.name.endswith(".ffn_in")]
    nexts = [c for c in units.log if c.name.endswith(".ffn_out")]
    assert len(jobs) == len(nexts) == 2 * CFG.queries * CFG.blocks
    for job, nxt in zip(jobs, nexts):
        assert job.gelu is not None and nxt.gelu is None and nxt.multiplier is not None
        assert job.name.split(".")[0] == nxt.name.split(".")[0]
        assert torch.equal(nxt.x.long(), GoldenUnits.engine(job))


def test_the_ffn_maps_are_engine_maps():
    """The GELU job replaces ffn_in's requantizer: neither ffn map may carry an adapter."""
    assert not {"ffn_in", "ffn_out"} & set(ADAPTED)


def test_ffn_in_is_a_gelu_job_equal_to_plain_ints_and_ffn_out_takes_it(tiny_run):
    model, log = tiny_run.model, tiny_run.units.log
    for b in range(CFG.blocks):
        block = f"block{b}"
        ffn_in, ffn_out = model.linears[f"{block}.ffn_in"], model.linears[f"{block}.ffn_out"]
        jobs = [c for c in log if c.name == f"{block}.ffn_in"]
        nexts = [c for c in log if c.name == f"{block}.ffn_out"]
        assert len(jobs) == len(nexts) == 1
        job, nxt = jobs[0], nexts[0]
        assert isinstance(job, EngineCall) and job.gelu is not None
        assert job.multiplier is None and job.shift is None
        stage = job.gelu
        assert stage.gelu == model.nonlinear.blocks[block].gelu.gelu
        # i-GELU's scale: the float model's peak |ffn_in output| on the calibration, in 16 bits
        assert stage.gelu.scale > 0
        _, want = plain_job(job.x.numpy(), job.w.numpy(), job.bias.numpy(),
                            (ffn_in.in_scale * ffn_in.weight_scale).numpy(), stage.gelu,
                            (ffn_out.smooth * ffn_out.in_scale).numpy(), stage.into,
                            stage.out)
        got = tiny_run.units(job)
        assert got.tolist() == want
        assert nxt.x.dtype == torch.int8 and nxt.x.tolist() == want


# -- a synthetic FFN at MiniLM's scales ------------------------------------------------------

K, N, K_OUT, ROWS = 48, 40, 24, 96


@pytest.fixture(scope="module")
def minilm_like():
    """ffn_in and ffn_out quantized on calibration rows, as ``QuantModel`` does, and the
    GELU job of :func:`gelu_job` for them; the job's input: the calibration rows, the same
    rows at 1.6x, rows of ±127 with the signs of a column's weights (that column's largest
    and least accumulators) and a sweep along column 6's (through GELU's least value): past
    the calibration, both saturations of both requantizers."""
    g = torch.Generator().manual_seed(32)
    x_cal = torch.randn(ROWS, K, generator=g)
    x_cal[:, 3] *= 12                                  # an outlier channel, as BERT's
    lin_in = torch.nn.Linear(K, N)
    lin_out = torch.nn.Linear(N, K_OUT)
    with torch.no_grad():
        lin_in.weight.copy_(torch.randn(N, K, generator=g) * 0.35)
        lin_in.bias.copy_(torch.randn(N, generator=g) * 0.5)
        lin_out.weight.copy_(torch.randn(K_OUT, N, generator=g) * 0.1)
        lin_in.weight[6] *= 0.1                        # column 6 negative on the calibration:
        lin_in.bias[6] = -4.5                          # its GELU output there is tiny, and
        lin_out.weight[:, 6] *= 100                    # m[6] s' so small that GELU's least
        h = lin_in(x_cal)                              # value, -0.17, is past -128 levels
    ffn_in = QuantLinear.of(lin_in, [x_cal], None)
    ffn_out = QuantLinear.of(lin_out, [F.gelu(h)], None)
    gelu = GeluParams.of(float(h.abs().max()) / INT16[1])
    stage = gelu_job(gelu, ffn_in.acc_scale, ffn_out.smooth * ffn_out.in_scale)
    x = ffn_in.quantize_input(torch.cat([x_cal, 1.6 * x_cal]))
    extreme = torch.sign(ffn_in.weight[:, :4].T.double()) * 127  # each column's largest acc
    sweep = torch.sign(ffn_in.weight[:, 6].double()) * torch.arange(0, 128, 4)[:, None]
    x = torch.cat([x, extreme.to(torch.int8), (-extreme).to(torch.int8), sweep.to(torch.int8)])
    return ffn_in, ffn_out, stage, x, h


def test_the_minilm_like_job_equals_plain_ints_at_both_saturation_ends(minilm_like):
    ffn_in, ffn_out, stage, x, h = minilm_like
    assert 8 <= float(h.abs().max()) <= 40                   # MiniLM's GELU input peaks
    assert 2 ** -24 <= stage.gelu.scale <= 2 ** -7
    call = EngineCall("block0.ffn_in", x, ffn_in.weight, ffn_in.bias, None, None, gelu=stage)
    got = GoldenUnits.engine(call)
    q, want = plain_job(x.numpy(), ffn_in.weight.numpy(), ffn_in.bias.numpy(),
                        ffn_in.acc_scale.numpy(), stage.gelu,
                        (ffn_out.smooth * ffn_out.in_scale).numpy(), stage.into, stage.out)
    assert got.tolist() == want
    flat_q = [v for row in q for v in row]
    flat = [v for row in want for v in row]
    assert min(flat_q) == INT16[0] and max(flat_q) == INT16[1]      # int16 both ends
    assert min(flat) == INT8[0] and max(flat) == INT8[1]            # int8 both ends


def test_the_job_is_near_the_float_gelu_of_its_accumulators(minilm_like):
    """Per element, where neither requantizer saturates: ``|x' m[n] s' - gelu(acc s_x
    s_w[n])| <= GELU_ERROR + 1.2 s + 0.51 m[n] s'`` (i-GELU's fit; q's rounding, s/2 plus the
    multiplier's 2^-16 of at most 2^15 s, times GELU's slope <= 1.13; x''s half level plus
    its multiplier's 2^-16 of 127 levels); where x' saturates at 127, the float GELU is at
    least 126.5 levels less the first two terms."""
    ffn_in, ffn_out, stage, x, _ = minilm_like
    call = EngineCall("block0.ffn_in", x, ffn_in.weight, ffn_in.bias, None, None, gelu=stage)
    got = GoldenUnits.engine(call).double()
    acc = x.double() @ ffn_in.weight.double() + ffn_in.bias.double()
    a = acc * ffn_in.acc_scale
    level = ffn_out.smooth * ffn_out.in_scale                  # m[n] s', per column
    want = F.gelu(a)
    inner = GELU_ERROR + 1.2 * stage.gelu.scale
    free = (got > INT8[0]) & (got < INT8[1]) & (a.abs() < INT16[1] * stage.gelu.scale)
    err = ((got * level - want).abs() - inner - 0.51 * level)[free]
    assert free.sum() > 0.9 * free.numel() and float(err.max()) <= 0
    top = got == INT8[1]
    assert top.any() and bool((want[top] >= 126.5 * level.expand_as(got)[top] - inner).all())
    # the bound is not loose: the largest error is more than half of it somewhere
    assert float(((got * level - want).abs()[free]).max()) > 0.5 * (inner + 0.51 * float(
        level.min()))


def test_a_ratio_the_requantizer_cannot_hold_is_one_line():
    gelu = GeluParams.of(1e-4)
    with pytest.raises(ConfigError, match=r"^gelu_job\.into must be a finite value with "
                                          r"0 <= scale < 65535.5 \(the engine's "
                                          r"requantizer\) \(got 100000 in column 2\)$"):
        gelu_job(gelu, torch.tensor([1e-5, 2e-5, 10.0]), torch.ones(3))
    with pytest.raises(ConfigError, match=r"^gelu_job\.out must be .* in column 1\)$"):
        gelu_job(gelu, torch.full((2,), 1e-5), torch.tensor([1.0, gelu.out_scale / 7e4]))
    assert isinstance(gelu_job(gelu, torch.full((2,), 1e-5), torch.ones(2)), GeluStage)


def test_a_model_whose_gelu_job_cannot_be_built_is_one_line():
    """A dead ffn_in input channel (the attention LayerNorm's weight and bias 0 there) with
    one huge weight: s_w[n] grows, the accumulators do not, and ``s_x s_w[n] / s`` passes
    2^16."""
    model, tokenizer = copy.deepcopy(tiny_model())
    layer = model.encoder.layer[1]
    with torch.no_grad():
        layer.attention.output.LayerNorm.weight[7] = 0
        layer.attention.output.LayerNorm.bias[7] = 0
        layer.intermediate.dense.weight[9, 7] = 1e6
    with pytest.raises(ConfigError, match=r"^nonlinear must be float for this model "
                                          r"\(block1's GELU job needs gelu_job\.into .* in "
                                          r"column 9, where it takes .*\(got integer\)$"):
        prepare(CFG, (model, tokenizer))
