"""golden/engine_gelu.py against a second derivation with plain Python ints: the GEMM summed
term by term and wrapped to int32 by hand, each requantizer as ``floor`` of a Fraction plus
one half (no shifts), the i-GELU from its formula with Python's own ``abs``/``min``. Cases
reach both saturation ends of both requantizers, ``q = -2^15`` (exact, not saturated), the
wrap of ``acc``, per-tensor and per-column parameters."""
from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest
import torch

from zoforge.golden.engine import RequantParams, requantize
from zoforge.golden.engine_gelu import GeluStage, engine_gemm_gelu, gelu_stage
from zoforge.golden.finetune.integer_ops import GeluParams


def ref_wrap32(value: int) -> int:
    value %= 1 << 32
    return value - (1 << 32) if value >= 1 << 31 else value


def ref_requant(acc: int, mult: int, shift: int, bits: int) -> int:
    """round(acc * mult / 2^shift), ties up, saturated to ``bits`` signed bits."""
    y = math.floor(Fraction(acc * mult, 1 << shift) + Fraction(1, 2)) if shift else acc * mult
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, y))


def ref_gelu(q: int, p: GeluParams) -> int:
    t = min(abs(q), p.beta) - p.beta
    magnitude = (p.gamma - t * t) // (1 << p.shift)
    erf = magnitude if q > 0 else -magnitude if q < 0 else 0
    return q * (erf + p.one)


def column(value, n: int) -> list[int]:
    return [int(v) for v in torch.as_tensor(value).expand(n).tolist()]


def ref_engine_gelu(x, w, bias, stage: GeluStage) -> list[list[int]]:
    m, k, n = len(x), len(w), len(w[0])
    im, ish = column(stage.into.multiplier, n), column(stage.into.shift, n)
    om, osh = column(stage.out.multiplier, n), column(stage.out.shift, n)
    out = []
    for i in range(m):
        row = []
        for j in range(n):
            acc = ref_wrap32(sum(x[i][t] * w[t][j] for t in range(k)) + bias[j])
            q = ref_requant(acc, im[j], ish[j], 16)
            row.append(ref_requant(ref_gelu(q, stage.gelu), om[j], osh[j], 8))
        out.append(row)
    return out


def golden(x, w, bias, stage) -> list[list[int]]:
    out = engine_gemm_gelu(torch.tensor(x, dtype=torch.int8), torch.tensor(w, dtype=torch.int8),
                           torch.tensor(bias, dtype=torch.int64), stage)
    assert out.dtype == torch.int8
    return out.tolist()


def random_case(rng: random.Random, m: int, k: int, n: int, per_column: bool, scale: float):
    x = [[rng.randint(-128, 127) for _ in range(k)] for _ in range(m)]
    w = [[rng.randint(-128, 127) for _ in range(n)] for _ in range(k)]
    bias = [rng.randint(-(1 << 31), (1 << 31) - 1) if rng.random() < 0.2
            else rng.randint(-50_000, 50_000) for _ in range(n)]
    width = n if per_column else 1

    def params(low_shift, high_shift):
        mult = [rng.randint(1 << 14, (1 << 16) - 1) for _ in range(width)]
        shift = [rng.randint(low_shift, high_shift) for _ in range(width)]
        if per_column:
            return RequantParams(torch.tensor(mult), torch.tensor(shift))
        return RequantParams(mult[0], shift[0])
    return x, w, bias, GeluStage(params(12, 20), GeluParams.of(scale), params(14, 26))


@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("scale", [2.0 ** -7, 2.0 ** -11, 3e-4])
def test_random_jobs_match_the_plain_int_derivation(per_column, scale):
    rng = random.Random(hash((per_column, scale)) & 0xFFFF)
    for m, k, n in ((3, 5, 7), (1, 33, 4), (6, 2, 9)):
        x, w, bias, stage = random_case(rng, m, k, n, per_column, scale)
        assert golden(x, w, bias, stage) == ref_engine_gelu(x, w, bias, stage)


def corner_job():
    """One row, x = 1, k = 1 and w = 0: acc is the bias, chosen per column to reach every
    corner (per-column parameters, the second requantizer's per column too)."""
    p = GeluParams.of(2.0 ** -10)
    big = (1 << 31) - 1
    cases = [  # (bias, into mult, into shift, out mult, out shift): what it reaches
        (40_000, 1, 0, 1, 20),           # q saturates high (2^15 - 1)
        (-40_000, 1, 0, 1, 20),          # q saturates low (-2^15)
        (-(1 << 15), 1, 0, 1, 20),       # q = -2^15 exactly
        (big, 1, 0, 1, 20),              # acc = 2^31 - 1 ... (with w = 1 below: wraps)
        (20_000, 1, 0, 65535, 0),        # out saturates high (127)
        (-1_000, 1, 0, 65535, 0),        # out saturates low (-128): y < 0
        (0, 1, 0, 65535, 0),             # q = 0: y = 0
        (12_345, 3, 2, 1, 12),           # inside both
    ]
    bias = [c[0] for c in cases]
    x = [[1]]
    w = [[1 if index == 3 else 0 for index in range(len(cases))]]   # column 3: big + 1
    stage = GeluStage(RequantParams(torch.tensor([c[1] for c in cases]),
                                    torch.tensor([c[2] for c in cases])), p,
                      RequantParams(torch.tensor([c[3] for c in cases]),
                                    torch.tensor([c[4] for c in cases])))
    return x, w, bias, stage


def test_corners_of_both_requantizers_and_the_wrap():
    x, w, bias, stage = corner_job()
    expected = ref_engine_gelu(x, w, bias, stage)
    assert golden(x, w, bias, stage) == expected
    row = expected[0]
    assert row[4] == 127 and row[5] == -128 and row[6] == 0
    # the int16 q of each column, by the plain derivation
    q = [ref_requant(ref_wrap32(x[0][0] * w[0][j] + bias[j]), int(stage.into.multiplier[j]),
                     int(stage.into.shift[j]), 16) for j in range(len(bias))]
    assert q[0] == (1 << 15) - 1 and q[1] == -(1 << 15) and q[2] == -(1 << 15)
    assert ref_wrap32(bias[3] + 1) == -(1 << 31) and q[3] == -(1 << 15)    # wrapped


def test_int16_requantizer_saturates_at_both_ends_and_returns_int16():
    acc = torch.tensor([[40_000, -40_000, -(1 << 15), (1 << 15) - 1, 1 << 15, 7]])
    out = requantize(acc, RequantParams(1, 0), bits=16)
    assert out.dtype == torch.int16
    assert out.tolist() == [[ref_requant(int(a), 1, 0, 16) for a in acc[0]]]
    assert out.tolist() == [[32767, -32768, -32768, 32767, 32767, 7]]


def test_gelu_stage_takes_q_minus_2_to_the_15():
    p = GeluParams.of(2.0 ** -12)
    stage = GeluStage(RequantParams(1, 0), p, RequantParams(1, 16))
    acc = torch.tensor([[-(1 << 15), -(1 << 15) - 5, (1 << 15) - 1]])
    assert gelu_stage(acc, stage).tolist() == [[ref_requant(ref_gelu(ref_requant(int(a), 1, 0,
                                                16), p), 1, 16, 8) for a in acc[0]]]


def test_the_reference_can_fail():
    # a reference with the int8 bound for q would differ at the saturated corners
    x, w, bias, stage = corner_job()
    assert ref_requant(40_000, 1, 0, 8) != ref_requant(40_000, 1, 0, 16)
    assert golden(x, w, bias, stage) != [[0] * len(bias)]
