"""``accumulator_bits``: the narrowest exact accumulator, against an independent derivation.

Small operands by brute force (every product, every reachable sum of K of them, the fewest
bits that hold them all), INT8 at the boundaries where the width steps up (K·(-128·-128) =
K·2^14 crossing 2^(w-1)), and the cap at 32 bits where the engine's wrap applies. The
arrays built at these widths are tests/test_pe_array.py's.
"""
import pytest

from zoforge.errors import ConfigError
from zoforge.golden.engine_widths import ACC_BITS, accumulator_bits


def _fits(value: int, bits: int) -> bool:
    return -(1 << (bits - 1)) <= value < (1 << (bits - 1))


def _fewest_bits(values) -> int:
    bits = 1
    while not all(_fits(v, bits) for v in values):
        bits += 1
    return bits


@pytest.mark.parametrize("a_bits, b_bits", [(1, 1), (2, 3), (3, 3), (4, 3), (4, 4)])
def test_small_operands_by_brute_force(a_bits, b_bits):
    """Every sum of K products reachable (K = 1 .. 40), the fewest bits holding them, capped."""
    a_values = range(-(1 << (a_bits - 1)), 1 << (a_bits - 1))
    b_values = range(-(1 << (b_bits - 1)), 1 << (b_bits - 1))
    products = {a * b for a in a_values for b in b_values}
    sums, reachable = {0}, set()
    for k in range(1, 41):
        sums = {s + p for s in sums for p in products}
        reachable |= sums                               # any K' <= K steps
        assert accumulator_bits(k, a_bits, b_bits) == min(_fewest_bits(reachable), ACC_BITS)


@pytest.mark.parametrize("bits", range(16, ACC_BITS + 1))
def test_int8_steps_where_k_times_2_14_reaches_2_to_the_bits_minus_1(bits):
    """K = 2^(w-15) - 1 fits w bits at both extremes (K·16384 and K·-16256), one bit fewer
    does not; K = 2^(w-15) needs w + 1 (K·16384 = 2^(w-1)), capped at 32."""
    below, at = (1 << (bits - 15)) - 1, 1 << (bits - 15)
    if below:
        assert accumulator_bits(below) == bits
        assert _fits(below * -128 * -128, bits) and _fits(below * -128 * 127, bits)
        assert not _fits(below * -128 * -128, bits - 1)
    assert accumulator_bits(at) == min(bits + 1, ACC_BITS)
    assert not _fits(at * -128 * -128, bits) and _fits(at * -128 * 127, bits)


def test_int8_figures():
    """A product's 16 bits for K = 1; MiniLM's max_k 1536 in 26; the cap from 2^17 on."""
    assert accumulator_bits(1) == 16
    assert accumulator_bits(1536) == 26
    assert accumulator_bits(2 ** 15) == 31            # the engine's largest max_k (MAX_DIM)
    assert accumulator_bits(2 ** 17 - 1) == 32
    assert accumulator_bits(2 ** 17) == accumulator_bits(2 ** 40) == 32
    assert accumulator_bits(4, 16, 8) == 26          # 16-bit a (the ZO layer's weights)


@pytest.mark.parametrize("field, args", [("max_k", (0,)), ("max_k", (1.5,)),
                                         ("a_bits", (4, 0)), ("b_bits", (4, 8, 33))])
def test_bad_arguments_name_the_parameter(field, args):
    with pytest.raises(ConfigError, match=rf"^{field} must be"):
        accumulator_bits(*args)
