"""Golden model of the GEMM engine: exact accumulation, wrap-around, rounding, saturation."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from zoforge.errors import ConfigError
from zoforge.golden.engine import (EngineLinear, RequantParams, engine_gemm, gemm_int32,
                                 quantize_multiplier, requantize)


def _reference_requant(acc: int, mult: int, shift: int, relu: bool) -> int:
    """Python big-int reference: floor(acc * mult / 2^shift + 1/2), saturate, ReLU."""
    value = acc * mult
    value = (value + (1 << shift) // 2) >> shift     # Python >> floors, like the RTL
    value = max(-128, min(127, value))
    return max(0, value) if relu else value


@given(st.integers(1, 9), st.integers(1, 40), st.integers(1, 9), st.integers(0, 2**31 - 1))
@settings(max_examples=25, deadline=None)
def test_engine_int32_is_the_exact_integer_product(m, k, n, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(-128, 128, (m, k), generator=gen, dtype=torch.int8)
    w = torch.randint(-128, 128, (k, n), generator=gen, dtype=torch.int8)
    bias = torch.randint(-2**20, 2**20, (n,), generator=gen, dtype=torch.int32)
    acc = gemm_int32(x, w, bias)
    assert acc.dtype == torch.int32
    expected = x.numpy().astype(object) @ w.numpy().astype(object) + bias.numpy().astype(object)
    assert acc.numpy().tolist() == expected.tolist()


def test_int8_matmul_would_wrap_but_gemm_int32_does_not():
    x = torch.full((1, 4), 127, dtype=torch.int8)
    w = torch.full((4, 1), 127, dtype=torch.int8)
    assert int(gemm_int32(x, w)) == 4 * 127 * 127
    assert int(torch.matmul(x, w)) != 4 * 127 * 127     # the pitfall the golden avoids


def test_accumulator_and_bias_wrap_modulo_2_to_the_32():
    x = torch.full((1, 1), -128, dtype=torch.int8)
    w = torch.full((1, 1), -128, dtype=torch.int8)
    bias = torch.tensor([2**31 - 16384 + 5], dtype=torch.int64)
    assert int(gemm_int32(x, w, bias)) == -2**31 + 5


@given(st.lists(st.integers(-2**31, 2**31 - 1), min_size=1, max_size=8),
       st.integers(0, 2**16 - 1), st.integers(0, 47), st.booleans())
@settings(max_examples=120, deadline=None)
def test_requantize_matches_the_big_int_reference(accs, mult, shift, relu):
    acc = torch.tensor([accs], dtype=torch.int32)
    got = requantize(acc, RequantParams(mult, shift), relu=relu)
    assert got.dtype == torch.int8
    assert got[0].tolist() == [_reference_requant(a, mult, shift, relu) for a in accs]


def test_rounding_is_half_up_and_saturates_at_both_ends():
    acc = torch.tensor([[-3, -2, -1, 1, 2, 3, 10**6, -10**6]], dtype=torch.int32)
    got = requantize(acc, RequantParams(1, 1))
    assert got[0].tolist() == [-1, -1, 0, 1, 1, 2, 127, -128]
    assert requantize(acc, RequantParams(1, 1), relu=True)[0].tolist() == \
        [0, 0, 0, 1, 1, 2, 127, 0]
    assert requantize(acc, RequantParams(1, 0))[0].tolist() == \
        [-3, -2, -1, 1, 2, 3, 127, -128]


def test_per_column_parameters():
    acc = torch.tensor([[1000, 1000, 1000]], dtype=torch.int32)
    params = RequantParams(torch.tensor([1, 1, 3]), torch.tensor([3, 4, 5]))
    assert requantize(acc, params)[0].tolist() == [125, 63, 94]
    with pytest.raises(ConfigError, match="one per column"):
        requantize(acc, RequantParams(torch.tensor([1, 2]), 1))
    with pytest.raises(ConfigError, match="shift must be"):
        requantize(acc, RequantParams(1, 48))


@pytest.mark.parametrize("scale", [1e-6, 3.3e-4, 0.0123, 0.5, 1.0, 7.25, 1000.0, 65535.0])
def test_quantize_multiplier_has_16_significant_bits(scale):
    params = quantize_multiplier(scale)
    assert 2**15 <= params.multiplier < 2**16 and 0 <= params.shift <= 47
    assert abs(params.multiplier / 2**params.shift - scale) <= scale * 2**-16


def test_quantize_multiplier_edges_and_tensors():
    assert quantize_multiplier(0.0) == RequantParams(0, 0)
    tiny = quantize_multiplier(1e-12)
    assert tiny.shift == 47 and tiny.multiplier == round(1e-12 * 2**47)
    many = quantize_multiplier(torch.tensor([0.5, 0.25]))
    assert many.multiplier.tolist() == [2**15, 2**15] and many.shift.tolist() == [16, 17]
    for bad in (-1.0, float("nan"), 65535.5):
        with pytest.raises(ConfigError, match="real_scale"):
            quantize_multiplier(bad)


def test_engine_linear_layer_is_the_engine_arithmetic():
    gen = torch.Generator().manual_seed(3)
    w = torch.randint(-128, 128, (16, 4), generator=gen, dtype=torch.int8)
    x = torch.randint(-128, 128, (5, 16), generator=gen, dtype=torch.int8)
    bias = torch.randint(-1000, 1000, (4,), generator=gen, dtype=torch.int32)
    params = quantize_multiplier(0.004)
    layer = EngineLinear(w, bias, params, relu=True)
    out = layer(x)
    assert out.dtype == torch.int8 and (out >= 0).all()
    assert torch.equal(out, requantize(gemm_int32(x, w, bias), params, relu=True))
    assert torch.equal(EngineLinear(w)(x), engine_gemm(x, w))
    with pytest.raises(ConfigError):
        gemm_int32(x.float(), w)
