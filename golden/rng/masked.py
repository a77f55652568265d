"""Masked on-the-fly generator: PeZO's rotated LFSR lanes XOR a rotating mask (golden).

Built for vector-to-vector diversity at small d (issue 25). PeZO's on-the-fly lanes are
phases of one b-bit sequence, so the whole generator has only ``lcm(2^b - 1, n)`` states
(7,905 for 31 x 8) and a lane's value one cycle later is its value doubled plus one new
bit (the doubling map: correlation 0.5 between the lane that moves from position p + 1 to
position p and its successor). A second, short LFSR of m bits (the *mask* register, shared
by all lanes) is XORed into every lane's output, rotated by the lane's position: it
multiplies the number of states by ``2^m - 1`` and replaces "doubled plus a bit" by
"doubled XOR a fresh mask difference", which removes that correlation.

Semantics (parameters n = ``n_rng``, of the form 2^k - 1 with 3 <= n <= 255, and b =
``bits``, 4 <= b <= 16 with 2^b - 1 >= 2n):

1. Lanes exactly as :mod:`zoforge.golden.rng.onthefly` items 1-4: lane i has state
   ``S_b((t + i * floor(P_b / n)) mod P_b)`` at RNG cycle t (``S_b`` the b-bit XAPP052
   LFSR sequence, ``S_b(0) = 1``, ``P_b = 2^b - 1``) and output position p carries lane
   ``(p + t) mod n``.
2. Mask width m: the smallest integer ``m >= b + 1`` with ``gcd(m, b) = gcd(m, k) = 1``
   (k = log2(n + 1)), so that ``P_m = 2^m - 1`` is coprime to ``P_b`` and to n (m = 17
   always qualifies for b <= 16, so m <= 17).
   The mask register holds ``g(t) = S_m(t mod P_m)`` (the m-bit XAPP052 LFSR, ``S_m(0) = 1``).
3. Mask of position p: ``M_p(t) = rotr_m(g(t), p mod m) mod 2^b``, i.e. bit j (j < b) of
   ``M_p`` is bit ``(p + j) mod m`` of g(t).
4. Emitted integer at position p: ``x_p = (lane state XOR M_p(t)) - 2^(b-1)``, a b-bit two's
   complement integer (W = b) with F = b - 2 fractional bits: the value ``x_p / 2^(b-2)``
   in (-2, 2), the constant power-of-two scale PeZO's 31 x 8 configuration ends with (no
   LUT, no shifter; a uniform vector of n such values has about the norm of a Gaussian one).
5. A perturbation of length d concatenates whole cycles (n values each, position 0 first),
   truncated to d; the next perturbation starts at the next cycle. The state is the cycle
   counter t modulo ``lcm(P_b, n, P_m)`` (the generator's period).

:class:`MaskedConfig` holds the parameters; :class:`MaskedGolden` is the model.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from zoforge.config import IntRange, Mersenne, param
from zoforge.errors import ConfigError, check_int_range
from zoforge.golden.rng.base import GeneratorConfig, GoldenGenerator
from zoforge.golden.rng.lfsr import MAX_BITS, MIN_BITS, lfsr_sequence, period, taps
from zoforge.golden.rng.onthefly import lane_phases

__all__ = ["MaskedConfig", "MaskedGolden", "mask_bits", "MAX_LANE_BITS"]

#: Widest lane: the mask register (b + 1 .. 17 bits) must stay within the LFSR table.
MAX_LANE_BITS = 16


def mask_bits(n_rng: int, bits: int) -> int:
    """The mask width m of item 2 of the module docstring."""
    k = n_rng.bit_length()
    return next(m for m in range(bits + 1, MAX_BITS + 1)
                if math.gcd(m, bits) == 1 and math.gcd(m, k) == 1)


@dataclass(frozen=True)
class MaskedConfig(GeneratorConfig):
    """Masked on-the-fly generator: n rotated b-bit LFSR lanes XOR a rotating mask from one
    m-bit LFSR (defaults: 31 x 8 bits, the lanes of PeZO's RoBERTa configuration)."""

    variant: ClassVar[str] = "masked"

    n_rng: int = param(31, "lanes n (LFSRs), of the form 2^k - 1", Mersenne(3, 255))
    bits: int = param(8, "LFSR bits b", IntRange(MIN_BITS, MAX_LANE_BITS))

    def check(self) -> None:
        if period(self.bits) < 2 * self.n_rng:
            low = next(b for b in range(MIN_BITS, MAX_LANE_BITS + 1)
                       if period(b) >= 2 * self.n_rng)
            raise ConfigError("bits", f"an integer with {low} <= value <= {MAX_LANE_BITS} "
                              f"(2^b - 1 >= 2 * n_rng = {2 * self.n_rng})", self.bits)

    def golden(self, state: int = 0) -> "MaskedGolden":
        return MaskedGolden(self.n_rng, self.bits, start=state)


@functools.lru_cache(maxsize=16)
def _rotated_phases(n_rng: int, bits: int) -> np.ndarray:
    """rows r = t mod n: the phase of the lane at each position p, ``phi_((p + r) mod n)``."""
    positions = np.arange(n_rng)
    lanes = (positions[None, :] + positions[:, None]) % n_rng
    table = lane_phases(n_rng, bits)[lanes]
    table.flags.writeable = False
    return table


class MaskedGolden(GoldenGenerator):
    """Golden masked on-the-fly generator (see the module docstring)."""

    strategy = "masked"
    state_key = "t"

    def __init__(self, n_rng: int = MaskedConfig.n_rng, bits: int = MaskedConfig.bits,
                 start: int = 0):
        MaskedConfig(n_rng=n_rng, bits=bits)                 # validates
        self.n_rng, self.bits = n_rng, bits
        self.mask_bits = mask_bits(n_rng, bits)
        self.period = period(bits)
        self.mask_period = period(self.mask_bits)
        self.width, self.frac_bits = bits, bits - 2
        self.modulus = math.lcm(self.period, n_rng, self.mask_period)
        self.state = check_int_range("start", start, 0)

    @property
    def values_per_cycle(self) -> int:
        return self.n_rng

    def lane_states(self, states) -> np.ndarray:
        """The lane registers (before the mask) in position order, len(states) x n."""
        t = np.asarray(states, dtype=np.int64).reshape(-1)
        index = _rotated_phases(self.n_rng, self.bits)[t % self.n_rng] + (t % self.period)[:, None]
        return lfsr_sequence(self.bits)[index % self.period]

    def mask_states(self, states) -> np.ndarray:
        """The mask register g(t) for each cycle in ``states``."""
        t = np.asarray(states, dtype=np.int64).reshape(-1)
        return lfsr_sequence(self.mask_bits)[t % self.mask_period]

    def masks(self, states) -> np.ndarray:
        """``M_p(t) = rotr_m(g(t), p mod m) mod 2^b`` (len(states) x n)."""
        g = self.mask_states(states)[:, None]
        m = self.mask_bits
        r = np.arange(self.n_rng, dtype=np.int64)[None, :] % m
        rotated = (g >> r) | (g << (m - r))
        return rotated & ((1 << self.bits) - 1)

    def values_at(self, states) -> np.ndarray:
        """The emitted integers of cycles ``states`` (len(states) x n)."""
        return (self.lane_states(states) ^ self.masks(states)) - (1 << (self.bits - 1))

    def advance(self, state: int, used: int) -> int:
        return (int(state) + 1) % self.modulus

    def config(self) -> dict:
        return {"strategy": self.strategy, "n_rng": self.n_rng, "bits": self.bits,
                "W": self.width, "F": self.frac_bits, "period": self.modulus,
                "lane_period": self.period, "taps": list(taps(self.bits)),
                "phase_step": self.period // self.n_rng, "mask_bits": self.mask_bits,
                "mask_taps": list(taps(self.mask_bits)), "constant_shift": True}
