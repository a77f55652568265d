"""The fine-tuning's golden units and quantization, each against a second derivation.

The RTL is compared with :class:`~zoforge.golden.finetune.calls.GoldenUnits` (test_finetune_cosim);
here the golden units themselves are pinned to plain NumPy formulas written from the
docstrings (word order of the perturbation, shifts, rounding, saturation), and the
quantization's algebra (smoothing leaves the product unchanged) is checked.
"""
from __future__ import annotations

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


def numpy_perturbation(state: int, r: int, n: int) -> np.ndarray:
    """z of an (r, n) master: words of ROWS values, panels of ROWS columns outer, k inner,
    each word one take(ROWS) (a second generator walked the plain way)."""
    g = generator(state)
    z = np.zeros((r, n), dtype=np.int64)
    for panel in range(n // ROWS):
        for k in range(r):
            z[k, panel * ROWS:(panel + 1) * ROWS] = g.take(ROWS)
    return z


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
