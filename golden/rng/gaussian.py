"""Gaussian baseline (the MeZO row of PeZO's Table 6): n central-limit generators (golden).

Method: generator (lane) i sums K = ``terms`` uniform LFSR values. All n*K LFSRs run the one
b-bit sequence S of :mod:`zoforge.golden.rng.lfsr` at distinct phases
``phi_{i,j} = (i*K + j) * floor((2^b - 1) / (n*K))``, so that at RNG cycle t

    g_i(t) = sum_{j<K} ( S((t + phi_{i,j}) mod (2^b - 1)) - 2^(b-1) ).

Each term is (nearly) uniform on (-1, 1) after division by 2^(b-1), variance ~1/3, so the
emitted integer has ``F = b - 1`` fractional bits and variance ~K/3 (exactly unit variance
for the default K = 3); ``W = b + ceil(log2 K)`` bits hold it without overflow. Position i
of a cycle's output is lane i (no rotation). Perturbations concatenate cycles exactly as for
the on-the-fly generator (the rest of a partly used cycle is dropped).

Shape: a sum of K independent U(-1, 1) has kurtosis ``3 - 6/(5K)`` (excess -6/(5K): 2.6
for K = 3, 2.7 for K = 4, Gaussian 3); its tails are cut at +-K. The LFSR terms are not
independent (shifted copies of one sequence), which a cheap hardware baseline accepts;
:meth:`GaussianGolden.config` reports the kurtosis measured over one full period.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.lib.stride_tricks import as_strided

from zoforge.config import IntRange, param
from zoforge.errors import ConfigError, check_int_range
from zoforge.golden.rng.base import FLOAT_BLOCK_VALUES, GeneratorConfig, GoldenGenerator
from zoforge.golden.rng.lfsr import MAX_BITS, MIN_BITS, lfsr_sequence, period, taps

__all__ = ["GaussianConfig", "GaussianGolden", "theoretical_kurtosis"]

MAX_LANES, MAX_TERMS = 4096, 16
#: Amaranth's widest wire (``amaranth.back.rtlil.Wire``: wider is an OverflowError when the
#: Verilog is written): the array's output word, ``n_rng`` values of
#: :attr:`GaussianConfig.value_bits`, must fit it.
MAX_WORD_BITS = 1 << 16


@dataclass(frozen=True)
class GaussianConfig(GeneratorConfig):
    """Gaussian baseline: n central-limit generators, each a sum of K b-bit LFSR values
    (defaults: the 1024-generator array of PeZO's Table 6)."""

    variant: ClassVar[str] = "gaussian"

    n_rng: int = param(1024, "generators n (values per cycle)", IntRange(1, MAX_LANES))
    bits: int = param(16, "LFSR bits b", IntRange(MIN_BITS, MAX_BITS))
    terms: int = param(3, "uniform LFSR values K summed per generator", IntRange(1, MAX_TERMS))

    @property
    def value_bits(self) -> int:
        """Bits of one value: a sum of ``terms`` signed ``bits``-bit values."""
        return self.bits + (self.terms - 1).bit_length()

    def check(self) -> None:
        if self.n_rng * self.value_bits > MAX_WORD_BITS:
            raise ConfigError("n_rng", f"at most {MAX_WORD_BITS // self.value_bits} with bits "
                              f"{self.bits} and terms {self.terms} (the output word, n_rng "
                              f"values of {self.value_bits} bits, at most {MAX_WORD_BITS:,} "
                              "bits)", self.n_rng)
        need = 2 * self.n_rng * self.terms
        if period(self.bits) < need:
            low = next((b for b in range(MIN_BITS, MAX_BITS + 1) if period(b) >= need), None)
            if low is None:
                raise ConfigError("n_rng", f"at most {(period(MAX_BITS) // (2 * self.terms))}"
                                  f" for terms {self.terms} (2^20 - 1 >= 2 * n_rng * terms)",
                                  self.n_rng)
            raise ConfigError("bits", f"an integer with {low} <= value <= {MAX_BITS} "
                              f"(2^b - 1 >= 2 * n_rng * terms = {need})", self.bits)

    def golden(self, state: int = 0) -> "GaussianGolden":
        return GaussianGolden(self.n_rng, self.bits, self.terms, start=state)


def theoretical_kurtosis(terms: int) -> float:
    """Kurtosis of a sum of ``terms`` independent continuous uniforms (Gaussian: 3)."""
    return 3.0 - 6.0 / (5.0 * terms)


@functools.lru_cache(maxsize=16)
def _measured_kurtosis(n_rng: int, bits: int, terms: int) -> float:
    generator = GaussianGolden(n_rng, bits, terms)
    cycles = min(period(bits), max(1, (1 << 20) // n_rng))
    x = generator.values_at(np.arange(cycles)).astype(np.float64).reshape(-1)
    x -= x.mean()
    return float((x ** 4).mean() / (x ** 2).mean() ** 2)


@functools.lru_cache(maxsize=4)
def _float_values(bits: int, dtype: np.dtype) -> np.ndarray:
    """``u(S(t mod P)) * 2^-(b-1)`` for t = 0 .. 2P + FLOAT_BLOCK_VALUES - 1 (P-periodic:
    enough for a block of any n), read-only."""
    u = (lfsr_sequence(bits) - (1 << (bits - 1))).astype(np.float64)
    values = np.resize(np.ldexp(u, 1 - bits).astype(dtype), 2 * period(bits) + FLOAT_BLOCK_VALUES)
    values.flags.writeable = False
    return values


class GaussianGolden(GoldenGenerator):
    """Golden Gaussian-baseline array (see the module docstring)."""

    strategy = "gaussian"
    state_key = "t"

    def __init__(self, n_rng: int = GaussianConfig.n_rng, bits: int = GaussianConfig.bits,
                 terms: int = GaussianConfig.terms, start: int = 0):
        config = GaussianConfig(n_rng=n_rng, bits=bits, terms=terms)      # validates
        self.n_rng, self.bits, self.terms = n_rng, bits, terms
        self.period = period(bits)
        self._u = lfsr_sequence(bits) - (1 << (bits - 1))
        self.frac_bits = bits - 1
        self.width = config.value_bits
        self.phase_step = self.period // (n_rng * terms)
        self.phases = np.arange(n_rng * terms, dtype=np.int64) * self.phase_step
        self.modulus = self.period
        self.state = check_int_range("start", start, 0)

    @property
    def values_per_cycle(self) -> int:
        return self.n_rng

    def term_states(self, start: int, cycles: int) -> np.ndarray:
        """LFSR states, cycles x n x K (the hardware's registers at each cycle)."""
        t = np.arange(cycles, dtype=np.int64) + start
        index = (t[:, None] + self.phases[None, :]) % self.period
        return (self._u[index] + (1 << (self.bits - 1))).reshape(cycles, self.n_rng,
                                                                 self.terms)

    def values_at(self, states) -> np.ndarray:
        """The emitted integers of cycles ``states`` (len(states) x n)."""
        t = np.asarray(states, dtype=np.int64).reshape(-1)
        t_mod_p = (t % self.period).astype(np.int32)
        phases = self.phases.astype(np.int32).reshape(self.n_rng, self.terms)
        total = np.zeros((len(t), self.n_rng), dtype=np.int64)
        for j in range(self.terms):
            index = t_mod_p[:, None] + phases[None, :, j]
            np.subtract(index, self.period, out=index, where=index >= self.period)
            total += self._u[index]
        return total

    def advance(self, state: int, used: int) -> int:
        return (int(state) + 1) % self.modulus

    def _floats(self, state: int, d: int, dtype: np.dtype) -> np.ndarray:
        """The float path of ``take_float``: blocks of cycles; term j of lane i at cycle t is
        the value table at t + (iK + j) * step, so each term of a block is one strided view
        of the P-periodic table, summed in place (exact: every sum has at most 24 bits)."""
        n, stride = self.n_rng, self.terms * self.phase_step
        rows = max(1, FLOAT_BLOCK_VALUES // n)
        values = _float_values(self.bits, dtype)
        cycles = -(-d // n)
        out = np.empty(cycles * n, dtype)
        base, done = state % self.period, 0
        while done < cycles:
            m = min(rows, cycles - done)
            block = out[done * n:(done + m) * n].reshape(m, n)
            for j in range(self.terms):
                term = as_strided(values[base + j * self.phase_step:], shape=(m, n),
                                  strides=(values.itemsize, stride * values.itemsize),
                                  writeable=False)
                if j == 0:
                    np.copyto(block, term)
                else:
                    np.add(block, term, out=block)
            done, base = done + m, (base + m) % self.period
        return out[:d]

    def config(self) -> dict:
        return {"strategy": self.strategy, "n_rng": self.n_rng, "bits": self.bits,
                "terms": self.terms, "W": self.width, "F": self.frac_bits,
                "period": self.period, "taps": list(taps(self.bits)),
                "phase_step": self.phase_step, "method": "central-limit sum of LFSR values",
                "variance": self.terms / 3.0,
                "kurtosis_theoretical": theoretical_kurtosis(self.terms),
                "kurtosis_measured": _measured_kurtosis(self.n_rng, self.bits, self.terms)}
