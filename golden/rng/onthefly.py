"""PeZO on-the-fly generator: n rotated LFSR lanes with a power-of-two scale LUT (golden).

Semantics (issue 2; parameters n = ``n_rng``, of the form 2^k - 1 with 3 <= n <= 255, and
b = ``bits``, 4 <= b <= 20 with 2^b - 1 >= 2n):

1. One sequence S of b-bit states (:mod:`zoforge.golden.rng.lfsr`), period P = 2^b - 1.
2. Lane i (0 <= i < n) runs at phase ``phi_i = i * floor(P / n)``: its state at RNG cycle t
   is ``S((t + phi_i) mod P)``.
3. Lane value ``u_i(t) = state - 2^(b-1)``, a signed integer in [1 - 2^(b-1), 2^(b-1) - 1]
   (the real number ``u_i / 2^(b-1)`` in (-1, 1)).
4. Rotation: at cycle t, output position p carries lane ``(p + t) mod n``.
5. Scale: ``E_n = sqrt(2) * Gamma((n+1)/2) / Gamma(n/2)`` (through log-gamma);
   ``k(t) = floor(log2(E_n / ||u(t) / 2^(b-1)||_2) + 0.5)`` (ties round up). The LUT has 2^b
   entries, ``LUT[S(t)] = k(t)`` (entry 0 unused, stored as k_min), addressed by lane 0's state.
6. Emitted value at position p: ``(u_{(p+t) mod n}(t) / 2^(b-1)) * 2^k(t)`` as a W-bit two's
   complement integer with F fractional bits. With ``k_min, k_max`` the range of the LUT's
   used entries: ``F = b - 1 - k_min`` and ``W = b + (k_max - k_min)``, so the integer is
   ``u << (k(t) - k_min)``: every shift is a left shift, exact, nothing overflows and no
   rounding is ever needed. When ``k_min == k_max`` the LUT is constant: the hardware has
   no memory and no shifter, the integer is the raw lane value and only F says the scale
   (``config()["constant_shift"]`` is true).
7. A perturbation of length d is the concatenation of consecutive cycles' outputs (n values
   each, position 0 first), truncated to d; the next perturbation continues with the next
   cycle (the rest of a partly used cycle is dropped). The state is the cycle counter t;
   :meth:`save`/:meth:`restore` let the same perturbation be regenerated.

The generator's parameters are the configuration :class:`OnTheFlyConfig`; the expected
norm ``E_n`` is :func:`zoforge.golden.rng.norms.expected_gaussian_norm`.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from zoforge.config import IntRange, Mersenne, param
from zoforge.errors import ConfigError, check_int_range
from zoforge.golden.rng.base import FLOAT_BLOCK_VALUES, GeneratorConfig, GoldenGenerator
from zoforge.golden.rng.lfsr import MAX_BITS, MIN_BITS, lfsr_sequence, period, taps
from zoforge.golden.rng.norms import expected_gaussian_norm

__all__ = ["OnTheFlyConfig", "OnTheFlyGolden", "scale_lut", "lane_phases"]


@dataclass(frozen=True)
class OnTheFlyConfig(GeneratorConfig):
    """PeZO on-the-fly generator: n rotated b-bit LFSR lanes and a power-of-two scale LUT
    (defaults: PeZO's RoBERTa configuration, 31 x 8 bits)."""

    variant: ClassVar[str] = "onthefly"

    n_rng: int = param(31, "lanes n (LFSRs), of the form 2^k - 1", Mersenne(3, 255))
    bits: int = param(8, "LFSR bits b", IntRange(MIN_BITS, MAX_BITS))

    def check(self) -> None:
        if period(self.bits) < 2 * self.n_rng:
            low = next(b for b in range(MIN_BITS, MAX_BITS + 1) if period(b) >= 2 * self.n_rng)
            raise ConfigError("bits", f"an integer with {low} <= value <= {MAX_BITS} "
                              f"(2^b - 1 >= 2 * n_rng = {2 * self.n_rng})", self.bits)

    def golden(self, state: int = 0) -> "OnTheFlyGolden":
        return OnTheFlyGolden(self.n_rng, self.bits, start=state)


def lane_phases(n_rng: int, bits: int) -> np.ndarray:
    """``phi_i = i * floor((2^b - 1) / n)`` for i = 0..n-1."""
    return np.arange(n_rng, dtype=np.int64) * (period(bits) // n_rng)


@functools.lru_cache(maxsize=32)
def _scale_by_cycle(n_rng: int, bits: int) -> np.ndarray:
    """k(t) for t = 0..P-1 (read-only int64)."""
    u = lfsr_sequence(bits) - (1 << (bits - 1))
    u2 = (u * u).astype(np.float64)
    norm2 = np.zeros(period(bits), dtype=np.float64)
    for phi in lane_phases(n_rng, bits):
        norm2 += np.roll(u2, -int(phi))          # lane i's u^2 at cycle t: u2[(t+phi) mod P]
    norm = np.sqrt(norm2) / float(1 << (bits - 1))
    k = np.floor(np.log2(expected_gaussian_norm(n_rng) / norm) + 0.5).astype(np.int64)
    k.flags.writeable = False
    return k


def scale_lut(n_rng: int, bits: int) -> np.ndarray:
    """The 2^b-entry LUT: ``LUT[S(t)] = k(t)``; entry 0 (never addressed) holds k_min."""
    OnTheFlyConfig(n_rng=n_rng, bits=bits)
    k = _scale_by_cycle(n_rng, bits)
    lut = np.full(1 << bits, int(k.min()), dtype=np.int64)
    lut[lfsr_sequence(bits)] = k
    return lut


class _FloatPlan(NamedTuple):
    """Tables of ``take_float``'s float path for one (n, b, dtype); see ``_floats``."""

    rows: int                    # cycles per block, a multiple of n
    index: np.ndarray            # rows x n: i + ((p + i) mod n) * floor(P / n)
    values: np.ndarray           # u(S(t mod P)) * 2^-F for t = 0 .. 2P + rows - 1
    scale: np.ndarray | None     # 2^(k(t mod P) - k_min), t = 0 .. P + rows - 1; None: constant


@functools.lru_cache(maxsize=4)
def _float_plan(n_rng: int, bits: int, dtype: np.dtype) -> _FloatPlan:
    p, step = period(bits), period(bits) // n_rng
    rows = n_rng * max(1, FLOAT_BLOCK_VALUES // (n_rng * n_rng))
    i, position = np.arange(rows)[:, None], np.arange(n_rng)[None, :]
    index = (i + (position + i) % n_rng * step).astype(np.intp)
    k = _scale_by_cycle(n_rng, bits)
    frac_bits = bits - 1 - int(k.min())
    u = (lfsr_sequence(bits) - (1 << (bits - 1))).astype(np.float64)
    values = np.resize(np.ldexp(u, -frac_bits).astype(dtype), 2 * p + rows)
    scale = (None if k.min() == k.max() else
             np.resize(np.ldexp(1.0, k - k.min()).astype(dtype), p + rows))
    for table in (index, values, scale):
        if table is not None:
            table.flags.writeable = False
    return _FloatPlan(rows, index, values, scale)


class OnTheFlyGolden(GoldenGenerator):
    """Golden on-the-fly generator (see the module docstring for the exact semantics)."""

    strategy = "onthefly"
    state_key = "t"

    def __init__(self, n_rng: int = OnTheFlyConfig.n_rng, bits: int = OnTheFlyConfig.bits,
                 start: int = 0):
        OnTheFlyConfig(n_rng=n_rng, bits=bits)               # validates
        self.n_rng, self.bits = n_rng, bits
        self.period = period(bits)
        self._seq = lfsr_sequence(bits)
        self._u = self._seq - (1 << (bits - 1))
        self._k = _scale_by_cycle(n_rng, bits)
        self.k_min, self.k_max = int(self._k.min()), int(self._k.max())
        self.frac_bits = bits - 1 - self.k_min
        self.width = bits + self.k_max - self.k_min
        self.phases = lane_phases(n_rng, bits)
        # The state repeats after lcm(P, n) cycles; t is kept modulo that.
        self.modulus = math.lcm(self.period, n_rng)
        self.state = check_int_range("start", start, 0)

    @property
    def values_per_cycle(self) -> int:
        return self.n_rng

    # -- per-cycle views (used by `zoforge rng dump` and the co-simulation) ---------------

    def cycle_table(self, start: int, cycles: int) -> dict[str, np.ndarray]:
        """Cycles ``start .. start+cycles-1`` without advancing: ``lut_index`` (S(t)),
        ``scale_exp`` (k(t)), ``raw`` (u in output-position order, cycles x n) and
        ``values`` (the emitted integers, cycles x n)."""
        t = np.arange(cycles, dtype=np.int64) + start
        t_mod_p = t % self.period
        raw = self._raw(t_mod_p, t % self.n_rng)
        k = self._k[t_mod_p]
        return {"cycle": t, "lut_index": self._seq[t_mod_p], "scale_exp": k, "raw": raw,
                "values": raw << (k - self.k_min)[:, None]}

    def _raw(self, t_mod_p: np.ndarray, t_mod_n: np.ndarray) -> np.ndarray:
        # Position p at cycle t holds lane (p + t) mod n, whose state is
        # S((t + phi_lane) mod P); rotated[r] lists phi_lane by position for t = r (mod n).
        index = self._rotated_phases[t_mod_n] + t_mod_p.astype(np.int32)[:, None]
        np.subtract(index, self.period, out=index, where=index >= self.period)
        return self._u[index]

    @functools.cached_property
    def _rotated_phases(self) -> np.ndarray:
        positions = np.arange(self.n_rng)
        lanes = (positions[None, :] + positions[:, None]) % self.n_rng
        return self.phases[lanes].astype(np.int32)

    def values_at(self, states) -> np.ndarray:
        """The emitted integers of cycles ``states`` (len(states) x n)."""
        t = np.asarray(states, dtype=np.int64).reshape(-1)
        t_mod_p = t % self.period
        raw = self._raw(t_mod_p, t % self.n_rng)
        if self.k_max != self.k_min:
            raw <<= (self._k[t_mod_p] - self.k_min)[:, None]
        return raw

    def advance(self, state: int, used: int) -> int:
        return (int(state) + 1) % self.modulus

    def _floats(self, state: int, d: int, dtype: np.dtype) -> np.ndarray:
        """The float path of ``take_float``: blocks of cycles, each one ``np.take``.

        A block starts at a cycle t0 that n divides, so row i (cycle t0 + i) shows lane
        (p + i) mod n at position p, in state S((t0 + i + lane * floor(P/n)) mod P): the same
        index table for every block, read from the P-periodic value table at t0 mod P, and
        multiplied row by row by 2^(k - k_min) where the LUT is not constant. Every value is
        u * 2^(k - k_min - F) exactly (u has at most 20 significant bits)."""
        plan = _float_plan(self.n_rng, self.bits, dtype)
        n, cycles = self.n_rng, -(-d // self.n_rng)
        out = np.empty(cycles * n, dtype)
        row = state % n                          # the first block starts mid-way
        base = (state - row) % self.period
        done = 0
        while done < cycles:
            m = min(plan.rows - row, cycles - done)
            block = out[done * n:(done + m) * n].reshape(m, n)
            np.take(plan.values[base:], plan.index[row:row + m], out=block, mode="clip")
            if plan.scale is not None:
                np.multiply(block, plan.scale[base + row:base + row + m, None], out=block)
            done, row, base = done + m, 0, (base + plan.rows) % self.period
        return out[:d]

    def config(self) -> dict:
        lut = scale_lut(self.n_rng, self.bits)
        used = lut[lfsr_sequence(self.bits)]
        histogram = {str(k): int((used == k).sum()) for k in range(self.k_min, self.k_max + 1)}
        return {"strategy": self.strategy, "n_rng": self.n_rng, "bits": self.bits,
                "W": self.width, "F": self.frac_bits, "period": self.period,
                "taps": list(taps(self.bits)), "phase_step": self.period // self.n_rng,
                "expected_norm": expected_gaussian_norm(self.n_rng),
                "lut": {"entries": 1 << self.bits, "k_min": self.k_min, "k_max": self.k_max,
                        "entry_bits": (self.k_max - self.k_min).bit_length(),
                        "histogram": histogram},
                "constant_shift": self.k_min == self.k_max}
