"""The b-bit Fibonacci LFSR all PeZO generators are built from (golden model).

Semantics (issue 2, item 1): XOR feedback over the Xilinx XAPP052 maximal-length taps,
taps ``t`` numbered 1..b; ``feedback = XOR of state bits t - 1``;
``next = ((s << 1) | feedback) mod 2^b``. The sequence starts at ``S(0) = 1`` and has period
``2^b - 1`` (every non-zero state once).
"""
from __future__ import annotations

import functools

import numpy as np

from zoforge.errors import check_int_range

__all__ = ["XAPP052_TAPS", "MIN_BITS", "MAX_BITS", "taps", "tap_mask",
           "lfsr_sequence", "period"]

MIN_BITS, MAX_BITS = 4, 20

# Xilinx XAPP052, Table 3 (taps numbered 1..b), for the widths zoforge supports.
XAPP052_TAPS: dict[int, tuple[int, ...]] = {
    3: (3, 2), 4: (4, 3), 5: (5, 3), 6: (6, 5), 7: (7, 6), 8: (8, 6, 5, 4), 9: (9, 5),
    10: (10, 7), 11: (11, 9), 12: (12, 6, 4, 1), 13: (13, 4, 3, 1), 14: (14, 5, 3, 1),
    15: (15, 14), 16: (16, 15, 13, 4), 17: (17, 14), 18: (18, 11), 19: (19, 6, 2, 1),
    20: (20, 17),
}


def taps(bits: int) -> tuple[int, ...]:
    """XAPP052 taps (1-based) for a ``bits``-wide LFSR."""
    check_int_range("bits", bits, MIN_BITS, MAX_BITS)
    return XAPP052_TAPS[bits]


def tap_mask(bits: int) -> int:
    """Bit mask of the state bits (``t - 1``) that feed the XOR."""
    return sum(1 << (t - 1) for t in taps(bits))


def period(bits: int) -> int:
    return (1 << bits) - 1


@functools.lru_cache(maxsize=None)
def _sequence(bits: int) -> np.ndarray:
    mask, width_mask, n = tap_mask(bits), (1 << bits) - 1, period(bits)
    out = np.empty(n, dtype=np.int64)
    state = 1
    for t in range(n):
        out[t] = state
        state = ((state << 1) | ((state & mask).bit_count() & 1)) & width_mask
    # A wrong tap table would show here: the period must be exactly 2^b - 1.
    if state != 1 or np.bincount(out, minlength=n + 1)[1:].min() != 1:
        raise AssertionError(f"LFSR of {bits} bits is not maximal-length")
    out.flags.writeable = False
    return out


def lfsr_sequence(bits: int) -> np.ndarray:
    """``S(0..2^b - 2)`` as a read-only int64 array (computed once per width)."""
    check_int_range("bits", bits, MIN_BITS, MAX_BITS)
    return _sequence(bits)
