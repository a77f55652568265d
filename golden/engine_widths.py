"""The GEMM engine's integer formats: the one source for the golden model and the hardware.

(A module of its own, without torch, so that elaborating hardware does not load torch.)
"""
from zoforge.errors import check_int_range

__all__ = ["OPERAND_BITS", "ACC_BITS", "MULT_BITS", "SHIFT_MAX", "SHIFT_BITS",
           "accumulator_bits"]

OPERAND_BITS = 8     # activations and weights: signed INT8
ACC_BITS = 32        # accumulator and bias width (wraps modulo 2^32)
MULT_BITS = 16       # requantization multiplier: unsigned, [0, 2^16)
SHIFT_MAX = 47       # requantization shift: [0, 47]
SHIFT_BITS = SHIFT_MAX.bit_length()   # bits of a shift amount (6)


def accumulator_bits(max_k: int, a_bits: int = OPERAND_BITS, b_bits: int = OPERAND_BITS) -> int:
    """The fewest bits of a signed accumulator that holds every sum of up to ``max_k``
    products of signed ``a_bits`` x ``b_bits`` operands exactly, at most :data:`ACC_BITS`.

    A product lies in [-2^(a+b-2) + 2^(max(a,b)-1), 2^(a+b-2)] (int8: [-16256, 16384], the
    top one -128 x -128), so a sum of K <= max_k of them in [max_k·low, max_k·high]: for
    int8, ``15 + max_k.bit_length()`` bits (26 for max_k = 1536; the width steps up at
    max_k = 2^(w-15)). Such an accumulator never wraps, so its value sign-extended to
    ACC_BITS equals the sum wrapped modulo 2^ACC_BITS (the engine's semantics); at the cap
    (max_k >= 2^17 for int8) it is the ACC_BITS accumulator, wrapping."""
    max_k = check_int_range("max_k", max_k, 1)
    a_bits = check_int_range("a_bits", a_bits, 1, ACC_BITS)
    b_bits = check_int_range("b_bits", b_bits, 1, ACC_BITS)
    a_min, b_min = -(1 << (a_bits - 1)), -(1 << (b_bits - 1))
    high = a_min * b_min
    low = min(a_min * ((1 << (b_bits - 1)) - 1), b_min * ((1 << (a_bits - 1)) - 1))
    # w bits hold [-2^(w-1), 2^(w-1) - 1]
    bits = max((max_k * high).bit_length(), (-max_k * low - 1).bit_length()) + 1
    return min(bits, ACC_BITS)
