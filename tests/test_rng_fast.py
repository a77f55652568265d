"""The generators' float path (``take_float`` for float32/float64: one gather or strided sum
per block from cached per-configuration tables) pinned value by value and state by state
against a straightforward per-element derivation (tests/rng_reference.py, independent of
``zoforge.golden``) and against the integer path ``take``: many configurations, start
states, sizes around the blocks' boundaries, perturbations split at odd lengths,
save/restore and the state after each perturbation."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rng_reference as ref
from zoforge.golden.rng import GaussianGolden, OnTheFlyGolden, PregenGolden
from zoforge.golden.rng.base import FLOAT_BLOCK_VALUES, to_float

# sizes: tiny, around one cycle, and across two and more blocks of the float path
SIZES = [1, 2, 5, FLOAT_BLOCK_VALUES - 1, FLOAT_BLOCK_VALUES + 7, 3 * FLOAT_BLOCK_VALUES + 17]


def onthefly_reference(n, b, t0, d):
    """(integers, F) of the perturbation of length d from cycle t0, element by element:
    element e is position e mod n of cycle t = t0 + e div n, lane (p + t) mod n, scaled by
    k(t) (docs/rng.md, on-the-fly semantics 2-7)."""
    S, P = ref.sequence(b), 2 ** b - 1
    k, _ = ref.scale_exponents(n, b)
    e = np.arange(d, dtype=np.int64)
    t, p = t0 + e // n, e % n
    u = S[(t + (p + t) % n * (P // n)) % P] - 2 ** (b - 1)
    return u << (k[t % P] - k.min()), b - 1 - int(k.min())


def gaussian_reference(n, b, terms, t0, d):
    S, P = ref.sequence(b), 2 ** b - 1
    step = P // (n * terms)
    e = np.arange(d, dtype=np.int64)
    t, lane = t0 + e // n, e % n
    total = sum(S[(t + (lane * terms + j) * step) % P] - 2 ** (b - 1) for j in range(terms))
    return total, b - 1


def exact(integers, frac, dtype):
    """The reference's floats: integers * 2^-F rounded once to ``dtype``."""
    return torch.from_numpy(np.ldexp(integers.astype(np.float64), -frac)).to(dtype)


def starts(modulus, lanes):
    return sorted({0, 1, lanes - 1, lanes, lanes + 1, modulus - 1, modulus // 2 + 3})


ONTHEFLY = [(3, 4), (7, 5), (7, 8), (15, 6), (31, 8), (31, 14), (63, 9), (127, 10),
            (255, 9), (255, 12), (3, 18)]


@pytest.mark.parametrize("n, b", ONTHEFLY)
def test_onthefly_float_path_matches_the_per_element_definition(n, b):
    g = OnTheFlyGolden(n, b)
    for t0 in starts(g.modulus, n) + [g.initial_state(seed) for seed in (1, 7, 2 ** 40)]:
        for d in SIZES:
            g.state = t0
            got = g.take_float(d)
            integers, frac = onthefly_reference(n, b, t0, d)
            assert frac == g.frac_bits
            assert got.dtype == torch.float32 and got.shape == (d,)
            assert torch.equal(got, exact(integers, frac, torch.float32)), (t0, d)
            assert g.state == (t0 + -(-d // n)) % math.lcm(2 ** b - 1, n)


@pytest.mark.parametrize("n, q, seed", [(255, 8, 0), (4095, 12, 0), (1023, 16, 123),
                                        (511, 32, 5), (65535, 24, 9)])
def test_pool_float_path_matches_the_per_element_definition(n, q, seed):
    # q = 32: pool values have more bits than float32 holds, rounded once as `take` + torch
    g = PregenGolden(pool_size=n, bits=q, banks=4, pool_seed=seed)
    pool, frac = ref.pool(n, q, seed)
    assert frac == g.frac_bits
    for pointer in starts(n, 4) + [n - 2, g.initial_state(3)]:
        for d in SIZES + [n - pointer, n - pointer + 1, 2 * n, 5 * n + 3]:
            g.state = pointer
            got = g.take_float(d)
            integers = pool[(pointer + np.arange(d)) % n]
            assert torch.equal(got, exact(integers, frac, torch.float32)), (pointer, d)
            assert g.state == (pointer + d) % n


@pytest.mark.parametrize("n, b, terms", [(1, 6, 1), (5, 8, 3), (6, 10, 3), (64, 12, 3),
                                         (1024, 16, 3), (13, 14, 16)])
def test_gaussian_float_path_matches_the_per_element_definition(n, b, terms):
    g = GaussianGolden(n, b, terms)
    for t0 in starts(g.modulus, n) + [g.initial_state(11)]:
        for d in SIZES:
            g.state = t0
            got = g.take_float(d, dtype=torch.float64)
            integers, frac = gaussian_reference(n, b, terms, t0, d)
            assert torch.equal(got, exact(integers, frac, torch.float64)), (t0, d)
            assert g.state == (t0 + -(-d // n)) % (2 ** b - 1)


GENERATORS = {
    "onthefly-8": lambda: OnTheFlyGolden(31, 8), "onthefly-14": lambda: OnTheFlyGolden(31, 14),
    "onthefly-small": lambda: OnTheFlyGolden(7, 5), "onthefly-255": lambda: OnTheFlyGolden(255, 9),
    "pregen": lambda: PregenGolden(255, 10, 8, 3), "pregen-32": lambda: PregenGolden(1023, 32, 2),
    "gaussian": lambda: GaussianGolden(5, 8, 3), "gaussian-big": lambda: GaussianGolden(300, 12, 2),
}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(GENERATORS)), st.integers(0, 2 ** 32),
       st.lists(st.integers(0, 3 * FLOAT_BLOCK_VALUES), min_size=1, max_size=6),
       st.sampled_from([torch.float32, torch.float64]))
def test_float_path_equals_take_split_at_any_lengths(name, seed, lengths, dtype):
    # the same run through the float path and through `take` (integers, then converted as
    # every take_float converts): same values, same state after every perturbation
    fast, slow = GENERATORS[name](), GENERATORS[name]()
    fast.state = slow.state = fast.initial_state(seed)
    for d in lengths:
        expected_state = fast.state_after(d)
        got = fast.take_float(d, dtype=dtype)
        assert torch.equal(got, to_float(slow.take(d), slow.frac_bits, dtype))
        assert fast.state == slow.state == expected_state


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_float_path_save_restore_and_fresh_buffers(name):
    g = GENERATORS[name]()
    g.take_float(12345)
    saved = g.save()
    plus = g.take_float(FLOAT_BLOCK_VALUES + 99)
    after = g.save()
    plus.mul_(-1.0)                        # the caller owns the buffer: tables stay intact
    g.restore(saved)
    minus = g.take_float(FLOAT_BLOCK_VALUES + 99)
    assert torch.equal(minus, -plus) and g.save() == after
    g.restore(saved)
    assert torch.equal(to_float(g.take(FLOAT_BLOCK_VALUES + 99), g.frac_bits, torch.float32),
                       minus)


def test_other_dtypes_keep_the_integer_path():
    g = OnTheFlyGolden(31, 14)
    half = g.take_float(5000, dtype=torch.float16)
    g.state = 0
    assert torch.equal(half, to_float(g.take(5000), g.frac_bits, torch.float16))


def test_zero_length_takes_nothing():
    for name in sorted(GENERATORS):
        g = GENERATORS[name]()
        g.state = 3
        assert g.take_float(0).shape == (0,) and g.state == 3
