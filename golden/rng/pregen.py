"""PeZO pre-generated pool: N norm-scaled uniform values read cyclically (golden).

Semantics (issue 2; the parameters are :class:`PregenConfig`: N = ``pool_size`` of the form
2^k - 1 with 255 <= N <= 65535, q = ``bits`` value bits with 4 <= q <= 32, L = ``banks``
values per cycle, a power of two 1..64, and ``pool_seed``, the seed of the pool's contents
— a hardware parameter, unlike a training run's ``--seed``, which picks the start pointer):

1. Raw values ``r_j`` (j = 0..N-1) from SplitMix64 (Steele et al.; the generator of
   ``java.util.SplittableRandom``): ``z = pool_seed + (j+1) * 0x9E3779B97F4A7C15 (mod 2^64)``,
   ``z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB;
   z ^= z >> 31``, then ``r_j = 2 * (z >> 11) / 2^53 - 1``, uniform in [-1, 1).
2. Scaled: ``x_j = r_j * E_N / ||r||_2`` with ``E_N = sqrt(2) Gamma((N+1)/2) / Gamma(N/2)``.
3. Quantized: ``pool_j = floor(x_j * 2^F + 0.5)``, q-bit two's complement (W = q), with F
   the largest number of fractional bits for which every ``|pool_j| <= 2^(q-1) - 1``.
4. A perturbation of length d starting at pointer p is ``pool[(p + j) mod N]``,
   j = 0..d-1, delivered L values per cycle in that order (the last cycle may be partial);
   afterwards ``p <- (p + d) mod N``. :meth:`save`/:meth:`restore` keep p.

BRAM layout (:meth:`PregenGolden.bank_contents`, ``striped``): the pool is extended by its
first L - 1 values (length N + L - 1, so a cycle's L consecutive indices never wrap) and dealt over L
banks, value e of the extended pool in bank ``e mod L`` at address ``e div L``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from zoforge.config import IntRange, Mersenne, OneOf, param
from zoforge.errors import check_choice, check_int_range
from zoforge.golden.rng.base import GeneratorConfig, GoldenGenerator, to_float
from zoforge.golden.rng.norms import expected_gaussian_norm

__all__ = ["PregenConfig", "PregenGolden", "splitmix64_uniform", "BANK_CHOICES", "LAYOUTS"]

BANK_CHOICES = (1, 2, 4, 8, 16, 32, 64)
LAYOUTS = ("replicated", "striped")
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class PregenConfig(GeneratorConfig):
    """PeZO pre-generated pool: N norm-scaled q-bit values in L BRAM banks (defaults: PeZO
    Table 6, 4095 x 12 bits in 8 banks)."""

    variant: ClassVar[str] = "pregen"

    pool_size: int = param(4095, "pool size N, of the form 2^k - 1", Mersenne(255, 65535))
    bits: int = param(12, "pool value bits q", IntRange(4, 32))
    banks: int = param(8, "BRAM banks L = values per cycle", OneOf(BANK_CHOICES))
    pool_seed: int = param(0, "SplitMix64 seed of the pool's contents", IntRange(0, _MASK64))
    layout: str = param("replicated", "bank layout: replicated (L rotated copies, no "
                        "crossbar) or striped (one copy, crossbar)", OneOf(LAYOUTS))
    length_bits: int = param(24, "width of the hardware's perturbation-length input",
                             IntRange(1, 32))

    def golden(self, state: int = 0) -> "PregenGolden":
        return PregenGolden(self.pool_size, self.bits, self.banks, self.pool_seed,
                            pointer=state)


def splitmix64_uniform(seed: int, count: int) -> np.ndarray:
    """``count`` SplitMix64 draws mapped to [-1, 1) (float64); see the module docstring."""
    with np.errstate(over="ignore"):
        z = (np.uint64(seed) + (np.arange(1, count + 1, dtype=np.uint64)
                                * np.uint64(0x9E3779B97F4A7C15)))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -52 - 1.0


@functools.lru_cache(maxsize=16)
def _pool(pool_size: int, bits: int, pool_seed: int) -> tuple[np.ndarray, int, float]:
    raw = splitmix64_uniform(pool_seed, pool_size)
    scale = expected_gaussian_norm(pool_size) / float(np.linalg.norm(raw))
    x = raw * scale
    limit = (1 << (bits - 1)) - 1
    frac = bits - 1
    while np.abs(np.floor(x * 2.0 ** frac + 0.5)).max() > limit:
        frac -= 1
    pool = np.floor(x * 2.0 ** frac + 0.5).astype(np.int64)
    pool.flags.writeable = False
    return pool, frac, scale


@functools.lru_cache(maxsize=16)
def _float_pool(pool_size: int, bits: int, pool_seed: int, dtype: np.dtype) -> np.ndarray:
    """The pool as ``take_float``'s values (``pool * 2^-F``, converted as ``to_float`` does)."""
    pool, frac, _ = _pool(pool_size, bits, pool_seed)
    floats = to_float(pool.copy(), frac, dtype).numpy()   # (torch wants a writable array)
    floats.flags.writeable = False
    return floats


class PregenGolden(GoldenGenerator):
    """Golden pre-generated pool (see the module docstring). State: the pointer p."""

    strategy = "pregen"
    state_key = "pointer"

    def __init__(self, pool_size: int = PregenConfig.pool_size, bits: int = PregenConfig.bits,
                 banks: int = PregenConfig.banks, pool_seed: int = PregenConfig.pool_seed,
                 pointer: int = 0):
        PregenConfig(pool_size=pool_size, bits=bits, banks=banks, pool_seed=pool_seed)
        self.pool_size, self.bits, self.banks = pool_size, bits, banks
        self.pool_seed = pool_seed
        self.pool, self.frac_bits, self.scale = _pool(pool_size, bits, pool_seed)
        self.width = bits
        self.modulus = pool_size
        self.state = check_int_range("pointer", pointer, 0, pool_size - 1)

    @property
    def values_per_cycle(self) -> int:
        return self.banks

    @property
    def pointer(self) -> int:
        """The pool pointer p (the state)."""
        return self.state

    def values_at(self, states) -> np.ndarray:
        """``pool[(p + l) mod N]`` for l < L, for each pointer p in ``states``."""
        p = np.asarray(states, dtype=np.int64).reshape(-1)
        return self.pool[(p[:, None] + np.arange(self.banks)) % self.pool_size]

    def advance(self, state: int, used: int) -> int:
        return (int(state) + used) % self.pool_size

    def stream(self, pointer: int, d: int) -> np.ndarray:
        """Perturbation of length d from ``pointer`` (without advancing)."""
        rolled = np.roll(self.pool, -pointer)
        return np.resize(rolled, d)

    def take(self, d: int) -> np.ndarray:
        """As the base class's, computed as one rotation of the pool (faster for long d)."""
        check_int_range("d", d, 0)
        values = self.stream(self.state, d)
        self.state = self.advance(self.state, d)
        return values

    def _floats(self, state: int, d: int, dtype: np.dtype) -> np.ndarray:
        """The float path of ``take_float``: the pool's tail from the pointer, then whole
        copies of the float pool (one broadcast copy), then its head."""
        pool, n = _float_pool(self.pool_size, self.bits, self.pool_seed, dtype), self.pool_size
        out = np.empty(d, dtype)
        head = min(d, n - state)
        out[:head] = pool[state:state + head]
        whole, rest = divmod(d - head, n)
        out[head:head + whole * n].reshape(whole, n)[:] = pool
        out[head + whole * n:] = pool[:rest]
        return out

    def bank_contents(self, layout: str = "striped") -> list[np.ndarray]:
        """The L banks' contents: ``striped`` as in "BRAM layout" above; ``replicated``:
        bank l holds the whole pool rotated by l, ``bank_l[a] = pool[(a + l) mod N]``."""
        check_choice("layout", layout, LAYOUTS)
        if layout == "replicated":
            return [np.roll(self.pool, -bank) for bank in range(self.banks)]
        extended = np.concatenate([self.pool, self.pool[:self.banks - 1]])
        depth = -(-len(extended) // self.banks)
        padded = np.zeros(depth * self.banks, dtype=np.int64)
        padded[:len(extended)] = extended
        return [padded[bank::self.banks] for bank in range(self.banks)]

    def config(self) -> dict:
        return {"strategy": self.strategy, "pool_size": self.pool_size, "bits": self.bits,
                "banks": self.banks, "pool_seed": self.pool_seed, "W": self.width,
                "F": self.frac_bits, "scale": self.scale,
                "expected_norm": expected_gaussian_norm(self.pool_size),
                "generator": "splitmix64 -> U[-1, 1)",
                "bank_depth": {layout: len(self.bank_contents(layout)[0])
                               for layout in ("replicated", "striped")}}
