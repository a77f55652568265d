"""The fine-tuning's golden units and quantization, each against a second derivation.

The RTL is compared with :class:`~zoforge.golden.finetune.calls.GoldenUnits` (test_finetune_cosim);
here the golden units themselves are pinned to plain NumPy formulas written from the
docstrings (word order of the perturbation, shifts, rounding, saturation), and the
quantization's algebra (smoothing leaves the product unchanged) is checked.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from zoforge.golden.finetune.calls import AdapterCall, EngineCall, GoldenUnits, UpdateCall
from zoforge.golden.rng import OnTheFlyConfig

ROWS = 4


def generator(state: int = 0):
    golden = OnTheFlyConfig(n_rng=7, bits=8, snapshot=True).golden()
    golden.state = state
    return golden


class PlainWalk:
    """A second generator from ``state``, walked the plain way: :meth:`draw` gives z of the
    next (r, n) master, words of ``rows`` values (panels of ``rows`` columns outer, k inner),
    each word one ``take(rows)``; consecutive draws continue the stream."""

    def __init__(self, state: int = 0, rows: int = ROWS):
        self.generator, self.rows = generator(state), rows

    def draw(self, r: int, n: int) -> np.ndarray:
        z = np.zeros((r, n), dtype=np.int64)
        for panel in range(n // self.rows):
            for k in range(r):
                z[k, panel * self.rows:(panel + 1) * self.rows] = self.generator.take(self.rows)
        return z


def numpy_perturbation(state: int, r: int, n: int) -> np.ndarray:
    """z of an (r, n) master drawn from ``state`` (:class:`PlainWalk`)."""
    return PlainWalk(state).draw(r, n)


def wrap32(v):
    return (v + 2**31) % 2**32 - 2**31


def random_call(rng, sign, eps_shift, m=6, k=12, n=8, r=4, big=False, **flags):
    x = rng.integers(-127, 128, (m, k))
    w = rng.integers(-127, 128, (k, n))
    a = rng.integers(-127, 128, (k, r))
    limit = 2**23 if big else 2**14
    master = rng.integers(-limit, limit, (r, n))
    return AdapterCall("block0.query", torch.tensor(x, dtype=torch.int8),
                       torch.tensor(w, dtype=torch.int8), torch.tensor(a, dtype=torch.int8),
                       torch.tensor(master), 40000, 20, sign, eps_shift, **flags)


def numpy_adapter(call: AdapterCall, z) -> np.ndarray:
    x, w, a = (call.x.numpy().astype(np.int64), call.w.numpy().astype(np.int64),
               call.a.numpy().astype(np.int64))
    acc = x @ a
    u = np.clip((acc * call.u_mult + (1 << (call.u_shift - 1))) >> call.u_shift, -128, 127)
    base = call.master.numpy() >> 8
    tp = base if z is None else np.clip(base + call.sign * (z >> call.eps_shift),
                                        -2**15, 2**15 - 1)
    return wrap32(x @ w + u @ tp)


@pytest.mark.parametrize("sign,eps_shift,big", [(1, 0, False), (-1, 3, False), (1, 0, True),
                                                (-1, 0, True), (0, 5, False)])
def test_adapter_call_is_the_documented_formula(sign, eps_shift, big):
    rng = np.random.default_rng(sign + 7 * eps_shift + big)
    call = random_call(rng, sign, eps_shift, big=big)
    units = GoldenUnits(generator(5), ROWS)
    z = numpy_perturbation(5, 4, 8) if sign else None
    assert np.array_equal(units(call).numpy(), numpy_adapter(call, z))
    # sign 0 draws nothing; a branch draws exactly r * n / ROWS words
    assert units.generator.state == (5 if sign == 0 else numpy_state_after(5, 4 * 8 // ROWS))


def numpy_state_after(state: int, words: int) -> int:
    g = generator(state)
    for _ in range(words):
        g.take(ROWS)
    return g.state


def test_save_restore_gives_opposite_perturbations_and_the_update_regenerates_z():
    rng = np.random.default_rng(3)
    units = GoldenUnits(generator(9), ROWS)
    plus = units(random_call(np.random.default_rng(3), 1, 2, save=True))
    minus = units(random_call(np.random.default_rng(3), -1, 2, restore=True))
    plain = units(random_call(np.random.default_rng(3), 0, 2))
    # no saturation at these magnitudes, and z >> e negates exactly: Y+ + Y- = 2 Y0
    assert torch.equal(plus + minus, 2 * plain) and not torch.equal(plus, plain)
    master = torch.tensor(rng.integers(-2**20, 2**20, (4, 8)))
    updated = units(UpdateCall("block0.query", master, -300, 40000, 18, restore=True))
    z = numpy_perturbation(9, 4, 8)
    d = -300 * z
    expected = np.clip(master.numpy() - ((d * 40000 + (1 << 17)) >> 18), -2**23, 2**23 - 1)
    assert np.array_equal(updated.numpy(), expected)


def test_update_saturates_at_both_ends_of_the_24_bit_master():
    units = GoldenUnits(generator(1), ROWS)
    units.saved = units.generator.save()
    high = torch.full((4, 8), 2**23 - 1, dtype=torch.int64)
    z = numpy_perturbation(1, 4, 8)
    out = units(UpdateCall("m", high, -32768, 65535, 0, restore=True)).numpy()
    # T - g z eta with g z eta far beyond the range: each end by the sign of z
    assert (out[z > 0] == 2**23 - 1).all() and (out[z < 0] == -2**23).all()
    assert (z > 0).any() and (z < 0).any()
    out = units(UpdateCall("m", -high - 1, 32767, 65535, 0, restore=True)).numpy()
    assert (out[z > 0] == -2**23).all() and (out[z < 0] == 2**23 - 1).all()


def test_a_restore_without_a_save_is_a_one_line_error():
    from zoforge.errors import ConfigError
    units = GoldenUnits(generator(0), ROWS)
    with pytest.raises(ConfigError, match="restore"):
        units(random_call(np.random.default_rng(0), -1, 0, restore=True))


def test_engine_call_is_the_engines_requantized_gemm():
    rng = np.random.default_rng(4)
    x, w = rng.integers(-128, 128, (5, 1100)), rng.integers(-128, 128, (1100, 3))
    bias = rng.integers(-2**20, 2**20, 3)
    mult, shift = np.array([30000, 65535, 1]), np.array([20, 31, 0])
    call = EngineCall("k", torch.tensor(x, dtype=torch.int8), torch.tensor(w, dtype=torch.int8),
                      torch.tensor(bias, dtype=torch.int32), torch.tensor(mult),
                      torch.tensor(shift))
    acc = wrap32(x @ w + bias)           # K = 1100: two float32 slices in the golden
    half = np.where(shift > 0, 1 << np.maximum(shift - 1, 0), 0)
    expected = np.clip((acc * mult + half) >> shift, -128, 127)
    assert np.array_equal(GoldenUnits.engine(call).numpy(), expected)
    raw = EngineCall("h", call.x, call.w, call.bias, None, None)
    assert np.array_equal(GoldenUnits.engine(raw).numpy(), acc)


def test_smoothing_leaves_the_float_product_and_quantizes_within_a_step():
    from zoforge.golden.finetune.model import QuantLinear, smoothing
    torch.manual_seed(0)
    linear = torch.nn.Linear(16, 6)
    x = torch.randn(40, 16)
    x[:, 3] *= 50                                 # an outlier feature
    s = smoothing([x], linear.weight.detach().double())
    y = (x.double() / s) @ (linear.weight.double() * s).T
    assert torch.allclose(y, x.double() @ linear.weight.double().T, atol=1e-9)
    q = QuantLinear.of(linear, [x], None)
    acc = q.quantize_input(x).to(torch.int64) @ q.weight.to(torch.int64) + q.bias
    approx = acc.double() * q.acc_scale
    exact = torch.nn.functional.linear(x, linear.weight, linear.bias).double()
    assert (approx - exact).abs().max() < 0.05 * exact.abs().max()


# -- SmoothQuant and the quantizers, exactly, by hand (golden/finetune/model.py's docstring) --
def test_smoothing_is_smoothquants_factor_exactly():
    """s_k = max|x_k|^0.5 / max_n|W[n, k]|^0.5 over every calibration input (two inputs of
    different shapes), computed by plain loops on an asymmetric example (K = 5 inputs, N = 3
    outputs): equal to 1e-12 relative; an all-zero input channel (k = 2) and an all-zero
    weight column (k = 3) keep s = 1."""
    from zoforge.golden.finetune.model import SMOOTH_ALPHA, smoothing

    rng = np.random.default_rng(11)
    x1 = torch.tensor(rng.normal(0, 3, (2, 3, 5)), dtype=torch.float32)
    x2 = torch.tensor(rng.normal(0, 1, (4, 5)), dtype=torch.float32)
    x1[..., 2] = x2[..., 2] = 0
    x2[1, 4] = 40.0                                  # an outlier channel, in the second input
    w = torch.tensor(rng.normal(0, 0.5, (3, 5)))
    w[:, 3] = 0
    rows = [[float(v) for v in row] for row in x1.reshape(-1, 5)] + \
        [[float(v) for v in row] for row in x2]
    expected = []
    for k in range(5):
        x_peak = max(abs(row[k]) for row in rows)
        w_peak = max(abs(float(w[n, k])) for n in range(3))
        expected.append(math.sqrt(x_peak) / math.sqrt(w_peak)
                        if x_peak > 0 and w_peak > 0 else 1.0)
    assert SMOOTH_ALPHA == 0.5
    got = smoothing([x1, x2], w)
    assert got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=0)
    assert expected[2] == expected[3] == 1.0 and expected[4] == max(expected)


def test_activation_quantization_rounds_half_to_even_and_clamps_at_127():
    """x / scale rounded half to even (0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2), clamped to
    +-127 (not -128), as int8; a dyadic scale keeps every tie exact."""
    from zoforge.golden.finetune.model import quantize_activation

    units = [0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 0.49, 126.5, 127.4, 127.6, -127.6, -300, 1e9]
    got = quantize_activation(torch.tensor(units) * 0.125, 0.125)
    assert got.dtype == torch.int8
    assert got.tolist() == [0, 2, 2, 4, 0, -2, -2, 0, 126, 127, 127, -127, -127, 127]


#: A linear map whose column peaks equal the calibration input's, so every s_k is exactly 1,
#: and whose rows have dyadic peaks 127/128 and 127/64 (s_w = 2^-7, 2^-6 exactly): the int8
#: weights are known integers, ties included (2.5 -> 2, -63.5 -> -64, -1.5 -> -2, 0.5 -> 0).
HAND_W = [[127 / 128, 2.5 / 128, -63.5 / 128], [-1.5 / 64, 127 / 64, 0.5 / 64]]
HAND_W_INT8 = [[127, 2, -64], [-2, 127, 0]]           # [n][k]
HAND_X = [[127 / 128, -127 / 64, 0.25], [-0.5, 1.0, -63.5 / 128]]


def hand_percentile(values, q):
    """The q-th percentile with linear interpolation between the sorted values."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


#: s_x of HAND_X, and biases of 2458.7 and -2867.3 accumulator units: rounding half to even
#: gives 2459 and -2867 (floor, truncation or ceiling would not give both).
HAND_S_X = hand_percentile([abs(v) for row in HAND_X for v in row], 99.99) / 127
HAND_BIAS = [2458.7 * HAND_S_X * 2.0 ** -7, -2867.3 * HAND_S_X * 2.0 ** -6]


def hand_linear(out_scale=None):
    from zoforge.golden.finetune.model import QuantLinear

    linear = torch.nn.Linear(3, 2)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(HAND_W))
        linear.bias.copy_(torch.tensor(HAND_BIAS))
    return QuantLinear.of(linear, [torch.tensor(HAND_X)], out_scale)


def test_a_linear_map_is_quantized_per_output_channel_by_hand():
    """HAND_W: s = 1, s_w = (2^-7, 2^-6), the int8 weights HAND_W_INT8 stored (K, N); s_x =
    the 99.99th percentile of |x| (linear interpolation) / 127; bias round(b / (s_x s_w[n]))
    in int32 (HAND_BIAS: 2459, -2867); the input round(x / s / s_x) clamped to +-127."""
    q = hand_linear()
    assert q.smooth.tolist() == [1.0, 1.0, 1.0]
    assert q.weight_scale.tolist() == [2.0 ** -7, 2.0 ** -6]
    assert q.weight.dtype == torch.int8 and tuple(q.weight.shape) == (3, 2)
    assert [[int(q.weight[k, n]) for k in range(3)] for n in range(2)] == HAND_W_INT8
    s_x = HAND_S_X
    assert q.in_scale == pytest.approx(s_x, rel=1e-12)
    assert q.bias.dtype == torch.int32
    assert q.bias.tolist() == [2459, -2867]
    assert q.acc_scale.tolist() == pytest.approx([s_x * 2.0 ** -7, s_x * 2.0 ** -6], rel=1e-15)
    assert q.params is None and q.out_scale is None
    x = torch.tensor([[0.1, -0.9, 3.0], [1.7, 0.02, -0.33]])
    expected = [[max(-127, min(127, round(float(v) / s_x))) for v in row] for row in x]
    assert q.quantize_input(x).tolist() == expected


def test_the_host_requantizes_a_maps_int32_result_per_column_by_hand():
    """With output scales s_y: mult / 2^shift = s_x s_w[n] / s_y[n] to the 16-bit
    multiplier's resolution, and output(acc) = clamp((acc + bias) * mult + 2^(shift-1) >>
    shift, -128, 127) column by column (both ends reached)."""
    out_scale = torch.tensor([0.05, 0.002], dtype=torch.float64)
    q = hand_linear(out_scale)
    mult, shift = q.params.per_column(2)
    for n in range(2):
        ratio = float(q.acc_scale[n] / out_scale[n])
        assert int(mult[n]) * 2.0 ** -int(shift[n]) == pytest.approx(ratio, rel=2 ** -16)
        assert 2 ** 15 <= int(mult[n]) < 2 ** 16
    acc = torch.tensor([[0, 0], [4000, -4000], [10 ** 6, 10 ** 6], [-10 ** 6, -10 ** 6],
                        [123, -77]], dtype=torch.int64)
    expected = [[max(-128, min(127, ((int(a) + int(q.bias[n])) * int(mult[n])
                                     + (1 << (int(shift[n]) - 1))) >> int(shift[n])))
                 for n, a in enumerate(row)] for row in acc]
    got = q.output(acc)
    assert got.tolist() == expected
    assert {127, -128} <= {v for row in expected for v in row}
