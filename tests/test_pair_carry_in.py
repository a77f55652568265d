# amaranth: UnusedElaboratable=no
"""The paired PE's high row takes the packed multiply's borrow as its accumulator's carry-in
(issue 32): the golden form (``golden/packing.py``'s :func:`high_field` and
:func:`add_high`) against plain integer products over every operand triple, and
:class:`~zoforge.hw.pe.pe_pair.ProcessingPair` in Amaranth's simulator against plain Python
sums over every INT8 corner triple, at the narrowest (wrapping) and the 32-bit accumulator."""
import itertools

import numpy as np
import pytest
from amaranth.sim import Simulator

from zoforge.golden.packing import add_high, borrowed_high, high_field, pack
from zoforge.hw.pe.pe import LATENCY
from zoforge.hw.pe.pe_pair import ProcessingPair

INT8 = np.arange(-128, 128, dtype=np.int64)
CORNERS = [-128, -127, -1, 0, 1, 126, 127]


def _wrap(value: int, bits: int) -> int:
    """Python's integer wrapped to a signed ``bits``-bit value."""
    return (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


def _kept(bits: int) -> np.ndarray:
    """Accumulator values at and next to both wrap ends, and small ones."""
    top = (1 << (bits - 1)) - 1
    return np.array([0, 1, -1, top, -top - 1, top - (1 << 14), -top - 1 + (1 << 14),
                     12345, -54321 % (1 << (bits - 1))], dtype=np.int64)


@pytest.mark.parametrize("bits", [17, 32])
def test_the_carry_in_form_adds_the_plain_high_product_for_every_triple(bits):
    """All 2^24 (a_lo, a_hi, b), each with an accumulator value from :func:`_kept` (in turn):
    the one-bit-wider adder with the borrow as carry-in gives ``kept + a_hi * b`` wrapped to
    ``bits``; without the borrow it is one short exactly where a_lo * b < 0."""
    a_lo, a_hi = (g.ravel() for g in np.meshgrid(INT8, INT8, indexing="ij"))
    packed, half = pack(a_lo, a_hi), 1 << (bits - 1)
    kept_values = _kept(bits)
    turns = [np.resize(np.roll(kept_values, n), a_lo.size) for n in range(kept_values.size)]
    for b in range(-128, 128):
        kept = turns[b % kept_values.size]
        high, borrow = high_field(packed * b)
        want = (kept + a_hi * b + half) % (2 * half) - half
        np.testing.assert_array_equal(add_high(kept, high, borrow, bits), want)
        np.testing.assert_array_equal(borrow, a_lo * b < 0)
        short = add_high(kept, high, 0, bits) != want
        np.testing.assert_array_equal(short, a_lo * b < 0)


def _dots():
    """Dot products of 3 steps over every corner triple (a_lo, a_hi, b), then ones whose sums
    reach 2^16 and -2^16 + 2^8 (wrapping at 17 bits) with a negative low product."""
    triples = list(itertools.product(CORNERS, repeat=3))
    dots = [triples[n:n + 3] for n in range(0, len(triples), 3)]
    dots += [[(1, -128, -128)] * 4, [(-128, -128, -128)] * 4, [(127, -128, 127)] * 4,
             [(-1, 127, -128)] * 4 + [(1, -128, -128)] * 4]
    return dots


def _run_pair(bits: int, dots):
    """Each dot product's two sums from the pair's ``res`` (its ``a`` in the form the array
    forwards, ``a_lo`` and ``a_hi - [a_lo < 0]``): the upper row's (``res[0]``) and the
    lower row's (``a[1]``, ``res[1]``) :data:`LATENCY` cycles after the last step."""
    pair = ProcessingPair(bits)
    got = []

    async def bench(ctx):
        for steps in dots:
            for n, (a_lo, a_hi, b) in enumerate(steps):
                ctx.set(pair.a_in.lo, a_lo)           # the array's edge form
                ctx.set(pair.a_in.high, int(borrowed_high(a_lo, a_hi)))
                ctx.set(pair.b_in, b)
                ctx.set(pair.valid_in, 1)
                ctx.set(pair.first_in, n == 0)
                ctx.set(pair.last_in, n == len(steps) - 1)
                await ctx.tick()
            ctx.set(pair.valid_in, 0)
            await ctx.tick().repeat(LATENCY - 1)
            got.append((ctx.get(pair.res[0]), ctx.get(pair.res[1])))

    sim = Simulator(pair)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


@pytest.mark.parametrize("bits", [16, 17, 32])
def test_the_pair_sums_every_corner_exactly(bits):
    """The RTL's sums (the high row through the carry-in) are Python's integer sums wrapped
    to ``bits`` (at 17 bits four -128 x -128 wrap to -2^16), and the golden carry-in form's."""
    dots = _dots()
    want = [tuple(_wrap(sum(step[row] * step[2] for step in steps), bits)
                  for row in (0, 1)) for steps in dots]
    assert _run_pair(bits, dots) == want
    if bits == 17:
        assert (-512, -(1 << 16)) in want         # 4 x 2^14 = 2^16 wraps in the high row
    for steps, (_, high_sum) in zip(dots, want):
        acc = 0
        for a_lo, a_hi, b in steps:
            acc = int(add_high(acc, *high_field(int(pack(a_lo, a_hi)) * b), bits))
        assert acc == high_sum
