"""Golden PeZO generators against the issue's semantics, written independently here."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rng_reference
from rng_reference import TAPS   # XAPP052 taps, typed in again (not imported from the code)
from zoforge.errors import ConfigError
from zoforge.golden.rng import (GaussianGolden, OnTheFlyGolden, PregenGolden, lfsr_sequence,
                                scale_lut)


def reference_sequence(b):
    """S(0..P-1) bit by bit: feedback = XOR of state bits t-1, next = (s << 1 | fb) mod 2^b."""
    state, out = 1, []
    for _ in range(2 ** b - 1):
        out.append(state)
        feedback = 0
        for t in TAPS[b]:
            feedback ^= (state >> (t - 1)) & 1
        state = ((state << 1) | feedback) % (2 ** b)
    return out


def reference_onthefly(n, b, t0, cycles):
    """Per element: position p at cycle t carries lane (p+t) mod n, scaled by k(t)."""
    S, P = reference_sequence(b), 2 ** b - 1
    expected = math.sqrt(2) * math.exp(math.lgamma((n + 1) / 2) - math.lgamma(n / 2))
    rows = []
    for t in range(t0, t0 + cycles):
        u = [S[(t + i * (P // n)) % P] - 2 ** (b - 1) for i in range(n)]
        norm = math.sqrt(sum((x / 2 ** (b - 1)) ** 2 for x in u))
        k = math.floor(math.log2(expected / norm) + 0.5)
        rows.append([u[(p + t) % n] * 2.0 ** k / 2 ** (b - 1) for p in range(n)])
    return np.array(rows)


@pytest.mark.parametrize("b", range(4, 21))
def test_lfsr_is_maximal_and_matches_the_independent_reference(b):
    # every width against the vectorised reference (tests/rng_reference.py: the step as a
    # GF(2) matrix), and that reference against the bit-by-bit definition where a Python
    # loop is quick
    seq = lfsr_sequence(b)
    assert len(seq) == 2 ** b - 1 and seq[0] == 1
    assert len(np.unique(seq)) == 2 ** b - 1 and seq.min() >= 1
    vectorised = rng_reference.sequence(b)
    np.testing.assert_array_equal(seq, vectorised[:2 ** b - 1])
    if b <= 12:
        assert vectorised[:2 ** b - 1].tolist() == reference_sequence(b)


@pytest.mark.parametrize("n, b", [(3, 4), (3, 5), (7, 5), (7, 8), (15, 6), (15, 9), (31, 6),
                                  (31, 8), (31, 10), (63, 7), (63, 9), (3, 10)])
def test_lut_equals_an_independent_floating_point_computation(n, b):
    S, P = reference_sequence(b), 2 ** b - 1
    expected = math.sqrt(2) * math.exp(math.lgamma((n + 1) / 2) - math.lgamma(n / 2))
    lut = scale_lut(n, b)
    assert len(lut) == 2 ** b
    for t in range(P):
        norm = math.sqrt(sum(((S[(t + i * (P // n)) % P] - 2 ** (b - 1)) / 2 ** (b - 1)) ** 2
                             for i in range(n)))
        assert lut[S[t]] == math.floor(math.log2(expected / norm) + 0.5), t


def test_table6_luts_constant_for_8_bits_and_one_bit_wide_for_14():
    lut8 = scale_lut(31, 8)
    assert set(lut8[1:].tolist()) == {1}
    config8 = OnTheFlyGolden(31, 8).config()
    assert config8["constant_shift"] and config8["lut"]["entry_bits"] == 0
    assert (config8["W"], config8["F"]) == (8, 6)
    config14 = OnTheFlyGolden(31, 14).config()
    assert not config14["constant_shift"]
    assert (config14["lut"]["k_min"], config14["lut"]["k_max"]) == (0, 1)
    assert (config14["W"], config14["F"]) == (15, 13)


@pytest.mark.parametrize("n, b, d", [(3, 4, 40), (7, 5, 100), (15, 6, 31), (31, 8, 1000),
                                     (7, 7, 7 * 300 + 3)])
def test_onthefly_take_matches_the_reference(n, b, d):
    g = OnTheFlyGolden(n, b)
    first, second = g.take(d), g.take(d)
    cycles = -(-d // n)
    ref = reference_onthefly(n, b, 0, 2 * cycles)
    np.testing.assert_array_equal(first * 2.0 ** -g.frac_bits, ref[:cycles].reshape(-1)[:d])
    # the next perturbation continues with the next cycle (the rest of one is dropped)
    np.testing.assert_array_equal(second * 2.0 ** -g.frac_bits, ref[cycles:].reshape(-1)[:d])
    limit = 2 ** (g.width - 1)
    assert first.dtype == np.int64 and -limit <= first.min() and first.max() < limit


def test_onthefly_covers_the_whole_state_period():
    n, b = 7, 4
    g = OnTheFlyGolden(n, b)
    lcm = math.lcm(2 ** b - 1, n)
    whole = g.take(n * lcm)
    again = g.take(n * lcm)
    np.testing.assert_array_equal(whole, again)        # period lcm(P, n) cycles


def test_cycle_table_raw_values_and_indices():
    g = OnTheFlyGolden(3, 4)
    table = g.cycle_table(5, 4)
    S = reference_sequence(4)
    assert table["lut_index"].tolist() == [S[t % 15] for t in range(5, 9)]
    assert table["raw"][0].tolist() == [S[(5 + ((p + 5) % 3) * 5) % 15] - 8 for p in range(3)]


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["onthefly", "pregen", "gaussian"]),
       st.lists(st.integers(0, 300), min_size=1, max_size=5), st.integers(1, 400))
def test_save_restore_regenerates_the_same_perturbation(strategy, warmup, d):
    g = {"onthefly": lambda: OnTheFlyGolden(7, 6), "pregen": lambda: PregenGolden(255, 8, 4),
         "gaussian": lambda: GaussianGolden(5, 8, 3)}[strategy]()
    for length in warmup:
        g.take(length)
    state = g.save()
    plus = g.take(d)
    g.restore(state)
    minus = g.take(d)
    g.restore(state)
    update = g.take_float(d, dtype=torch.float64)
    np.testing.assert_array_equal(plus, minus)
    assert torch.equal(update, torch.from_numpy(plus).double() * 2.0 ** -g.frac_bits)


def test_pool_pointer_semantics_across_several_perturbations():
    g = PregenGolden(pool_size=255, bits=10, banks=8, pool_seed=7)
    pool, pointer = g.pool.copy(), 0
    for d in (100, 300, 7, 255, 1, 600):
        values = g.take(d)
        np.testing.assert_array_equal(values, pool[(pointer + np.arange(d)) % 255])
        pointer = (pointer + d) % 255
        assert g.pointer == pointer
    assert g.save() == {"strategy": "pregen", "pointer": pointer}


def splitmix64_reference(seed, count):
    out, mask = [], 2 ** 64 - 1
    for j in range(count):
        z = (seed + (j + 1) * 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        out.append(2 * (z >> 11) / 2 ** 53 - 1)
    return np.array(out)


@pytest.mark.parametrize("n, q, seed", [(255, 8, 0), (4095, 12, 0), (1023, 16, 123)])
def test_pool_generation_scaling_and_quantization(n, q, seed):
    g = PregenGolden(pool_size=n, bits=q, banks=4, pool_seed=seed)
    raw = splitmix64_reference(seed, n)
    expected = math.sqrt(2) * math.exp(math.lgamma((n + 1) / 2) - math.lgamma(n / 2))
    x = raw * expected / np.linalg.norm(raw)
    np.testing.assert_array_equal(g.pool, np.floor(x * 2.0 ** g.frac_bits + 0.5))
    assert np.abs(g.pool).max() <= 2 ** (q - 1) - 1
    assert np.abs(g.pool).max() > 2 ** (q - 2)           # F is the largest that fits
    assert abs(np.linalg.norm(g.pool * 2.0 ** -g.frac_bits) - expected) < n * 2.0 ** -g.frac_bits


@pytest.mark.parametrize("layout", ["replicated", "striped"])
def test_pool_bank_layouts_hold_every_cycle_without_wrap(layout):
    g = PregenGolden(pool_size=255, bits=8, banks=8)
    banks = g.bank_contents(layout)
    for p in range(255):
        if layout == "replicated":
            lanes = [banks[lane][p] for lane in range(8)]
        else:
            lanes = [banks[(p + lane) % 8][(p + lane) // 8] for lane in range(8)]
        assert lanes == [g.pool[(p + lane) % 255] for lane in range(8)]


def test_gaussian_matches_the_central_limit_definition_and_statistics():
    n, b, K = 6, 10, 3
    g = GaussianGolden(n_rng=n, bits=b, terms=K)
    S, P = reference_sequence(b), 2 ** b - 1
    step = P // (n * K)
    values = g.take(n * 20)
    expected = [sum(S[(t + (i * K + j) * step) % P] - 2 ** (b - 1) for j in range(K))
                for t in range(20) for i in range(n)]
    assert values.tolist() == expected
    big = GaussianGolden(n_rng=1024, bits=16, terms=3).take_float(1 << 20, torch.float64)
    assert abs(big.var().item() - 1.0) < 0.01
    kurtosis = ((big - big.mean()) ** 4).mean() / big.var(unbiased=False) ** 2
    assert abs(kurtosis.item() - (3 - 6 / 15)) < 0.02
    assert GaussianGolden(4, 8, 4).width == 10 and GaussianGolden(4, 8, 3).frac_bits == 7


def test_take_float_dtype_and_scale():
    g = OnTheFlyGolden(31, 14)
    x = g.take_float(1000, dtype=torch.float16)
    assert x.dtype == torch.float16 and x.shape == (1000,)
    g.restore({"strategy": "onthefly", "t": 0})
    assert torch.equal(x, (torch.from_numpy(g.take(1000)).double() * 2.0 ** -13).half())


@pytest.mark.parametrize("make, parameter", [
    (lambda: OnTheFlyGolden(n_rng=8, bits=8), "n_rng"),
    (lambda: OnTheFlyGolden(n_rng=31, bits=21), "bits"),
    (lambda: OnTheFlyGolden(n_rng=63, bits=6), "bits"),     # 2^b - 1 < 2n
    (lambda: PregenGolden(pool_size=4096), "pool_size"),
    (lambda: PregenGolden(pool_size=127), "pool_size"),
    (lambda: PregenGolden(banks=3), "banks"),
    (lambda: PregenGolden(bits=3), "bits"),
    (lambda: GaussianGolden(n_rng=1024, bits=12, terms=3), "bits"),
    (lambda: GaussianGolden(terms=0), "terms"),
])
def test_invalid_parameters_raise_config_error_naming_the_field(make, parameter):
    with pytest.raises(ConfigError) as error:
        make()
    assert str(error.value).startswith(f"{parameter} must") and "\n" not in str(error.value)
