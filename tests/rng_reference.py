"""An independent, vectorised reference of the PeZO generators, written from docs/rng.md (and
the XAPP052 tap table typed in again), never calling ``zoforge.golden``: what the hardware's
memories and registers must hold at reset.

* :func:`sequence` — the LFSR states S(0..P) over GF(2): the step is a b x b companion
  matrix M (``next[0] = XOR of s[t-1]`` over the taps, ``next[i] = s[i-1]``), and the
  states are found by doubling (states 0..L-1 times M^L give states L..2L-1), so every
  width up to 20 takes a few matrix products instead of 2^20 Python steps.
* :func:`scale_lut` — LUT[S(t)] = k(t) from the exact integer norms of the n lanes.
* :func:`onthefly_lane_states` / :func:`gaussian_lane_states` — the lane registers at reset.
* :func:`pool` / :func:`pool_banks` — the pre-generated pool (SplitMix64 in uint64 arrays)
  and its bank layouts.

Used by tests/test_rng_golden.py and tests/test_rng_reference.py (a helper, not a test
module).
"""
from __future__ import annotations

import functools
import math

import numpy as np

# Xilinx XAPP052 Table 3, taps numbered 1..b (typed in again from the application note).
TAPS = {4: (4, 3), 5: (5, 3), 6: (6, 5), 7: (7, 6), 8: (8, 6, 5, 4), 9: (9, 5), 10: (10, 7),
        11: (11, 9), 12: (12, 6, 4, 1), 13: (13, 4, 3, 1), 14: (14, 5, 3, 1), 15: (15, 14),
        16: (16, 15, 13, 4), 17: (17, 14), 18: (18, 11), 19: (19, 6, 2, 1), 20: (20, 17)}


def companion(b: int) -> np.ndarray:
    """The LFSR step as a matrix over GF(2): ``next_bits = M @ bits`` (bit i = 2^i)."""
    m = np.zeros((b, b), dtype=np.int64)
    for tap in TAPS[b]:
        m[0, tap - 1] ^= 1                     # next[0] = XOR of s[tap - 1]
    for i in range(1, b):
        m[i, i - 1] = 1                        # next[i] = s[i - 1] (shift left)
    return m


@functools.lru_cache(maxsize=None)
def sequence(b: int) -> np.ndarray:
    """S(0..P) (P + 1 = 2^b states, S(0) = 1) by matrix doubling; read-only int64."""
    power = companion(b).astype(np.float64)          # M^L, L = 1, 2, 4, ...
    states = np.zeros((1, b), dtype=np.float64)
    states[0, 0] = 1.0                               # S(0) = 1
    while len(states) < 1 << b:
        states = np.concatenate([states, (states @ power.T) % 2])
        power = (power @ power) % 2
    values = (states @ (2.0 ** np.arange(b))).astype(np.int64)
    values.flags.writeable = False
    return values


def expected_norm(n: int) -> float:
    """E_n = sqrt(2) Gamma((n+1)/2) / Gamma(n/2)."""
    return math.sqrt(2.0) * math.exp(math.lgamma((n + 1) / 2) - math.lgamma(n / 2))


def phases(count: int, b: int) -> np.ndarray:
    """Lane i at phase i * floor(P / count)."""
    return np.arange(count, dtype=np.int64) * (((1 << b) - 1) // count)


@functools.lru_cache(maxsize=8)
def scale_exponents(n: int, b: int) -> tuple[np.ndarray, float]:
    """k(t) for t = 0..P-1, and the smallest distance of ``log2(...) + 0.5`` from an integer
    (how far each floor is from flipping)."""
    period = (1 << b) - 1
    u = sequence(b)[:period] - (1 << (b - 1))
    squares = u * u                                  # exact integers
    t = np.arange(period, dtype=np.int64)
    norm2 = np.zeros(period, dtype=np.int64)         # < 255 * 2^38: exact in int64
    for phase in phases(n, b):
        norm2 += squares[(t + phase) % period]
    # k = floor(log2(E_n / (sqrt(norm2) / 2^(b-1))) + 0.5), as a sum of logarithms
    x = math.log2(expected_norm(n)) + (b - 1) - 0.5 * np.log2(norm2.astype(np.float64)) + 0.5
    k = np.floor(x).astype(np.int64)
    return k, float(np.min(np.abs(x - np.round(x))))


def scale_lut(n: int, b: int) -> np.ndarray:
    """The 2^b-entry LUT, LUT[S(t)] = k(t); entry 0 (never addressed) holds k_min."""
    k, _ = scale_exponents(n, b)
    lut = np.full(1 << b, k.min(), dtype=np.int64)
    lut[sequence(b)[:(1 << b) - 1]] = k
    return lut


def onthefly_lane_states(n: int, b: int, t: int) -> np.ndarray:
    """Position p's register at cycle t: lane (p + t) mod n in state S((t + phi) mod P)."""
    period = (1 << b) - 1
    lanes = (np.arange(n) + t) % n
    return sequence(b)[(t + phases(n, b)[lanes]) % period]


def onthefly_reset_states(n: int, b: int) -> np.ndarray:
    """The lane registers after reset: cycle 0 when the LUT is constant (nothing to prime),
    else cycle -1 (one priming step loads the LUT read register)."""
    k, _ = scale_exponents(n, b)
    return onthefly_lane_states(n, b, 0 if k.min() == k.max() else -1)


def gaussian_lane_states(n: int, b: int, terms: int) -> np.ndarray:
    """The n x K registers at reset (cycle 0): S(phi_ij), phi_ij = (iK + j) floor(P/(nK))."""
    return sequence(b)[phases(n * terms, b)].reshape(n, terms)


def splitmix64_uniform(seed: int, count: int) -> np.ndarray:
    """r_j = 2 (z_j >> 11) / 2^53 - 1 for SplitMix64 outputs z_j, j = 0..count-1."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (np.arange(1, count + 1, dtype=np.uint64)
                               * np.uint64(0x9E3779B97F4A7C15))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return 2.0 * (z >> np.uint64(11)).astype(np.float64) / 2.0 ** 53 - 1.0


def pool(n: int, q: int, seed: int) -> tuple[np.ndarray, int]:
    """(pool, F): x = r E_N / ||r||, pool = floor(x 2^F + 0.5) with F the largest number of
    fractional bits for which every |pool_j| <= 2^(q-1) - 1."""
    r = splitmix64_uniform(seed, n)
    x = r * expected_norm(n) / np.linalg.norm(r)
    for frac in range(2 * q, -64, -1):
        values = np.floor(x * 2.0 ** frac + 0.5)
        if np.abs(values).max() <= (1 << (q - 1)) - 1:
            return values.astype(np.int64), frac
    raise AssertionError("no F fits")


def pool_banks(values: np.ndarray, banks: int, layout: str) -> list[np.ndarray]:
    """replicated: bank l = the pool rotated by l; striped: the pool extended by its first
    L - 1 values, value e in bank e mod L at address e div L (the last row padded)."""
    n = len(values)
    if layout == "replicated":
        return [values[(np.arange(n) + lane) % n] for lane in range(banks)]
    extended = np.concatenate([values, values[:banks - 1]])
    return [extended[bank::banks] for bank in range(banks)]


def masked_mask_width(n: int, b: int) -> int:
    """m: the smallest m >= b + 1 coprime to b and to log2(n + 1) (docs/small-d.md)."""
    k = int(round(math.log2(n + 1)))
    return next(m for m in range(b + 1, 21) if math.gcd(m, b) == 1 and math.gcd(m, k) == 1)


def masked_register_run(n: int, b: int, cycles: int, start: int = 0) -> np.ndarray:
    """The masked generator's outputs for cycles start..start+cycles-1, register by register
    and bit by bit, as the hardware computes them: position p loads the LFSR step of
    position p + 1, the mask register steps in place, output bit j of position p is lane bit
    j XOR mask bit (p + j) mod m, minus 2^(b-1)."""
    m = masked_mask_width(n, b)
    lanes = [int(s) for s in onthefly_lane_states(n, b, start)]
    mask = int(sequence(m)[start % ((1 << m) - 1)])

    def step(state: int, width: int) -> int:
        feedback = 0
        for tap in TAPS[width]:
            feedback ^= (state >> (tap - 1)) & 1
        return ((state << 1) | feedback) & ((1 << width) - 1)

    out = np.zeros((cycles, n), dtype=np.int64)
    for cycle in range(cycles):
        for p in range(n):
            word = 0
            for j in range(b):
                bit = ((lanes[p] >> j) & 1) ^ ((mask >> ((p + j) % m)) & 1)
                word |= bit << j
            out[cycle, p] = word - (1 << (b - 1))
        lanes = [step(lanes[(p + 1) % n], b) for p in range(n)]
        mask = step(mask, m)
    return out
