"""What every golden PeZO generator offers: one public interface for trainers and co-simulation.

A generator emits *transfers* (one per hardware stream beat) of L = ``values_per_cycle``
W-bit two's-complement integers (value = integer / 2^F, ``width`` W and ``frac_bits`` F).
Its whole state is one integer ``state`` in ``[0, modulus)``: the RNG cycle counter t of the
LFSR generators, the pool pointer p of the pre-generated pool.

* ``values_at(states)``: the L integers a transfer shows in each given state (a
  ``len(states) x L`` int64 array), without changing anything;
* ``advance(state, used)``: the state after a transfer of which the first ``used`` values
  belong to the perturbation (an LFSR generator moves one whole cycle, the pool moves by
  ``used``);
* ``take(d)``: the next perturbation of length d, transfer by transfer (``ceil(d / L)``
  transfers, the last one cut at d), advancing the state; ``state_after(d)`` the state it
  leaves; ``take_float(d)`` the same as a torch tensor ``take(d) * 2**-F`` (as float32 or
  float64 computed straight in floating point from per-configuration tables cached on first
  use, with the same values bit for bit: ``to_float`` is the one conversion rule);
* ``save()``/``restore()``: the state as a small dict, so that a perturbation can be
  regenerated (for +eps, -eps and the update);
* ``initial_state(seed)``: the state a run with training seed ``seed`` starts from (seed 0:
  state 0, the hardware's reset state; other seeds: a SplitMix64 hash of the seed modulo
  ``modulus``), so that ``--seed`` selects a starting point in the sequence for every
  generator alike.

The co-simulation replays the RTL's handshakes on exactly these methods.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from zoforge.config import Config, param
from zoforge.errors import ConfigError, check_int_range

__all__ = ["GoldenGenerator", "GeneratorConfig", "splitmix64", "seed_state", "to_float",
           "FLOAT_BLOCK_VALUES"]

_MASK64 = (1 << 64) - 1

#: Values per block of the generators' float paths (``take_float``): a block's index table
#: and output stay in the CPU's cache.
FLOAT_BLOCK_VALUES = 1 << 16


def splitmix64(x: int) -> int:
    """One SplitMix64 output for input ``x`` (Steele et al.; ``java.util.SplittableRandom``)."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def seed_state(seed: int, modulus: int) -> int:
    """The starting state for a training seed: 0 for seed 0, else splitmix64(seed) mod
    ``modulus``."""
    check_int_range("seed", seed, 0, _MASK64)
    return 0 if seed == 0 else splitmix64(seed) % modulus


def to_float(values: np.ndarray, frac_bits: int, dtype):
    """Integers ``values`` as the torch tensor ``values * 2**-frac_bits`` of ``dtype`` (a
    torch or numpy float type): the conversion of every ``take_float`` (exact but where a
    value has more significant bits than the type)."""
    import torch   # only here: the generators themselves are numpy (fast to import)
    if not isinstance(dtype, torch.dtype):
        dtype = torch.from_numpy(np.zeros(0, dtype)).dtype
    return torch.from_numpy(values).to(dtype).mul_(2.0 ** -frac_bits)


@dataclass(frozen=True)
class GeneratorConfig(Config):
    """Base of the generators' configurations (design ``rng``, variant named by
    ``strategy``): the golden model's parameters and the hardware's build options."""

    kind: ClassVar[str] = "rng"
    tag: ClassVar[str] = "strategy"

    snapshot: bool = param(False, "add save/restore ports (shadow registers: a flip-flop and "
                                  "a 2:1 mux per state bit on LFSR generators)", kw_only=True)

    def golden(self, state: int = 0) -> "GoldenGenerator":
        """The golden model of this generator, in ``state``."""
        raise NotImplementedError


class GoldenGenerator:
    """Base of the golden generators (see the module docstring).

    Subclasses set ``strategy``, ``state_key`` (the name of the state in saved dicts),
    ``width``, ``frac_bits``, ``modulus`` and ``config`` (the generator's configuration), and
    implement ``values_per_cycle``, ``values_at`` and ``advance``.
    """

    strategy = ""
    state_key = "state"
    width: int
    frac_bits: int
    modulus: int
    _state: int = 0

    @property
    def values_per_cycle(self) -> int:
        raise NotImplementedError

    def values_at(self, states) -> np.ndarray:
        raise NotImplementedError

    def advance(self, state: int, used: int) -> int:
        raise NotImplementedError

    @property
    def state(self) -> int:
        return self._state

    @state.setter
    def state(self, value: int) -> None:
        self._state = check_int_range(f"state {self.state_key}", int(value), 0) % self.modulus

    def initial_state(self, seed: int) -> int:
        return seed_state(seed, self.modulus)

    def state_after(self, d: int) -> int:
        """The state after ``take(d)`` from the current state (without taking anything)."""
        lanes = self.values_per_cycle
        transfers = -(-check_int_range("d", d, 0) // lanes)
        if transfers == 0:
            return self.state
        last = (self.state + self.advance(0, lanes) * (transfers - 1)) % self.modulus
        return self.advance(last, d - lanes * (transfers - 1))

    def take(self, d: int) -> np.ndarray:
        """The next perturbation: ``ceil(d / L)`` transfers, truncated to d values."""
        check_int_range("d", d, 0)
        lanes = self.values_per_cycle
        transfers = -(-d // lanes)
        if transfers == 0:
            return np.zeros(0, dtype=np.int64)
        full_step = self.advance(0, lanes)          # the state moves by this per full beat
        states = (self.state + full_step * np.arange(transfers, dtype=np.int64)) % self.modulus
        values = self.values_at(states).reshape(-1)[:d]
        self.state = self.state_after(d)
        return values

    def take_float(self, d: int, dtype=None):
        """``take(d) * 2**-frac_bits`` as a torch tensor (default float32), a fresh buffer.

        For float32 and float64 a generator may compute it straight in floating point
        (``_floats``, one gather from cached per-configuration tables); the values and
        the state are those of ``take(d)`` bit for bit (``tests/test_rng_fast.py``)."""
        import torch   # only here: the generators themselves are numpy (fast to import)
        dtype = torch.float32 if dtype is None else dtype
        check_int_range("d", d, 0)
        np_dtype = {torch.float32: np.float32, torch.float64: np.float64}.get(dtype)
        fast = None if np_dtype is None else self._floats(self.state, d, np.dtype(np_dtype))
        if fast is None:
            return to_float(self.take(d), self.frac_bits, dtype)
        self.state = self.state_after(d)
        return torch.from_numpy(fast)

    def _floats(self, state: int, d: int, dtype: np.dtype) -> np.ndarray | None:
        """``take(d) * 2**-frac_bits`` from ``state`` as a new ``dtype`` array (float32 or
        float64), without advancing; None where a generator has no such path."""
        return None

    def save(self) -> dict:
        return {"strategy": self.strategy, self.state_key: int(self.state)}

    def restore(self, state: dict) -> None:
        if state.get("strategy") != self.strategy:
            raise ConfigError("state", f"a saved {self.strategy} state",
                              state.get("strategy"))
        self.state = state[self.state_key]
