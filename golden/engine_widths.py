"""The GEMM engine's integer formats: the one source for the golden model and the hardware.

(A module of its own, without torch, so that elaborating hardware does not load torch.)
"""

__all__ = ["OPERAND_BITS", "ACC_BITS", "MULT_BITS", "SHIFT_MAX", "SHIFT_BITS"]

OPERAND_BITS = 8     # activations and weights: signed INT8
ACC_BITS = 32        # accumulator and bias width (wraps modulo 2^32)
MULT_BITS = 16       # requantization multiplier: unsigned, [0, 2^16)
SHIFT_MAX = 47       # requantization shift: [0, 47]
SHIFT_BITS = SHIFT_MAX.bit_length()   # bits of a shift amount (6)
