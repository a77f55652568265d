"""The golden step's fast paths equal their plain formulations, value for value, over the
whole range they take (docs/finetune-speed.md): ``bit_length`` by float64 ``frexp``
against Python's ``int.bit_length`` over the int64 range, and i-GELU by table against its
formula over every 16-bit input at the extreme scales."""
import random

import pytest
import torch

from zoforge.golden.finetune.integer_ops import (GELU_TABLE_OFFSET, GeluParams, bit_length,
                                                 gelu_table, int_gelu, int_gelu_formula,
                                                 isqrt)
from zoforge.golden.finetune.integer_params import MAX_SCALE, MIN_SCALE


def _int64_corners() -> list[int]:
    values = {0, 1, 2, 3, (1 << 63) - 1, (1 << 63) - 2}
    for k in range(1, 63):
        for delta in (-2, -1, 0, 1):
            values.add((1 << k) + delta)
    rng = random.Random(5)
    for _ in range(4000):
        values.add(rng.getrandbits(rng.randint(1, 63)))
    return sorted(v for v in values if 0 <= v < 1 << 63)


def test_bit_length_equals_python_over_int64():
    values = _int64_corners()
    got = bit_length(torch.tensor(values, dtype=torch.int64)).tolist()
    assert got == [v.bit_length() for v in values]


def test_isqrt_equals_python_below_2_62():
    import math
    values = [v for v in _int64_corners() if v < 1 << 62] + [(1 << 62) - 1]
    values += [k * k + d for k in (1 << 31, (1 << 31) - 1, 3037000499 // 2)
               for d in (-1, 0, 1) if 0 <= k * k + d < 1 << 62]
    got = isqrt(torch.tensor(values, dtype=torch.int64)).tolist()
    assert got == [math.isqrt(v) for v in values]


@pytest.mark.parametrize("scale", [MIN_SCALE, 2.0 ** -20, 3.1e-5, 2.0 ** -10, MAX_SCALE])
def test_gelu_table_equals_formula_over_16_bits(scale):
    p = GeluParams.of(scale)
    q = torch.arange(-GELU_TABLE_OFFSET, GELU_TABLE_OFFSET, dtype=torch.int64)
    want = int_gelu_formula(q, p)
    assert torch.equal(gelu_table(p), want)
    # by the dispatch: a shuffled, repeated 2-D stack (the table route) and small ones
    order = torch.randperm(q.numel(), generator=torch.Generator().manual_seed(1))
    stack = torch.cat([q[order], q]).reshape(4, -1)
    assert torch.equal(int_gelu(stack, p), torch.cat([want[order], want]).reshape(4, -1))
    assert torch.equal(int_gelu(q[:100], p), want[:100])


def test_gelu_out_of_table_range_takes_formula():
    p = GeluParams.of(2.0 ** -10)
    q = torch.arange(-GELU_TABLE_OFFSET, GELU_TABLE_OFFSET + 1, dtype=torch.int64)
    assert torch.equal(int_gelu(q, p), int_gelu_formula(q, p))
    assert int_gelu(q.to(torch.int32)[:1 << 15], p).dtype == torch.int32


@pytest.mark.parametrize("scale", [MIN_SCALE, 2.0 ** -16, 1e-3, MAX_SCALE])
def test_softmax_equals_formula(scale):
    from zoforge.golden.finetune.integer_ops import SoftmaxParams, int_softmax, \
        int_softmax_formula
    p = SoftmaxParams.of(scale)
    gen = torch.Generator().manual_seed(3)
    q = torch.randint(-(1 << 15), 1 << 15, (6, 9, 17), generator=gen, dtype=torch.int64)
    q[0] = 1 << 15                                        # constant rows
    q[1, :, ::2] = -(1 << 15)                             # both rails in one row
    q[1, :, 1::2] = (1 << 15) - 1
    q[2] = torch.randint(-3, 3, (9, 17), generator=gen)   # near-ties
    keep = torch.rand(6, 1, 17, generator=gen) < 0.6
    keep[0], keep[3] = True, False                        # all kept; none kept (zeros)
    keep[4, 0, :16], keep[4, 0, 16] = False, True         # one kept key
    want = int_softmax_formula(q, keep, p, 127)
    assert torch.equal(int_softmax(q, keep, p, 127), want)
    assert torch.equal(want[3], torch.zeros_like(want[3]))
    assert int(want.max()) <= 127 and int(want[4].max()) == 127
    # both ends of int32 (the engine's raw scores): a row constant at -2^31, rows of
    # -2^31 and 2^31 - 1 in turn (a difference of 2^32 - 1), rows just below 2^31 - 1 with
    # a key at -2^31, and a row constant at 2^31 - 1
    low, high = -(1 << 31), (1 << 31) - 1
    ends = torch.full((2, 9, 17), low, dtype=torch.int64)
    ends[0, 1:, 1::2] = high
    ends[1] = high - torch.randint(0, 20 * p.ln2, (9, 17), generator=gen)
    ends[1, :, 0], ends[1, 0] = low, high
    kept = torch.ones(2, 1, 17, dtype=torch.bool)
    kept[1, 0, 3::4] = False
    want = int_softmax_formula(ends, kept, p, 127)
    assert torch.equal(int_softmax(ends, kept, p, 127), want)
    assert torch.equal(want[0, 0], torch.full_like(want[0, 0], int(want[0, 0, 0])))
    assert int(want[0, 0, 0]) > 0 and int(want[1, 0, 1]) > 0   # constant rows: spread evenly
    assert int(want[0, 1:, ::2].abs().sum()) == 0 and bool((want[0, 1:, 1::2] > 0).all())
    assert int(want[1, 1:, 0].abs().sum()) == 0                 # -2^31 beside 2^31 - 1
