"""What every golden PeZO generator offers (the API the ZO training code builds on).

``take(d)`` returns the next perturbation's d emitted integers (int64) and advances the
state; ``take_float(d)`` is the same as a torch tensor, ``take(d) * 2**-frac_bits``;
``save()``/``restore()`` return to an earlier state so that the same perturbation can be
regenerated (for +eps, -eps and the update). ``width`` (W) and ``frac_bits`` (F) describe
the integers: W-bit two's complement, value = integer / 2^F.
"""
from __future__ import annotations

import numpy as np

from zoforge.errors import ConfigError, check_int_range

__all__ = ["GoldenGenerator"]


class GoldenGenerator:
    """Base of the cycle-based generators: the state is the RNG cycle counter ``t``.

    Subclasses set ``strategy``, ``width``, ``frac_bits``, ``_wrap`` (the state's period)
    and ``t``, and implement ``values_per_cycle``, ``_take_cycles(start, cycles)`` (the
    emitted integers, cycles x values_per_cycle) and ``config()``.
    """

    strategy = ""
    width: int
    frac_bits: int
    t: int
    _wrap: int

    @property
    def values_per_cycle(self) -> int:
        raise NotImplementedError

    def _take_cycles(self, start: int, cycles: int) -> np.ndarray:
        raise NotImplementedError

    def config(self) -> dict:
        raise NotImplementedError

    def take(self, d: int) -> np.ndarray:
        """The next perturbation: ceil(d / lanes) whole cycles, truncated to d values."""
        check_int_range("d", d, 0)
        cycles = -(-d // self.values_per_cycle)
        values = self._take_cycles(self.t, cycles).reshape(-1)[:d]
        self.t = (self.t + cycles) % self._wrap
        return values

    def take_float(self, d: int, dtype=None):
        """``take(d) * 2**-frac_bits`` as a torch tensor (default float32)."""
        import torch
        dtype = torch.float32 if dtype is None else dtype
        return torch.from_numpy(self.take(d)).to(dtype).mul_(2.0 ** -self.frac_bits)

    def save(self) -> dict:
        return {"strategy": self.strategy, "t": int(self.t)}

    def restore(self, state: dict) -> None:
        if state.get("strategy") != self.strategy:
            raise ConfigError("state", f"a saved {self.strategy} state",
                              state.get("strategy"))
        self.t = check_int_range("state t", state["t"], 0) % self._wrap
