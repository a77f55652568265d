"""The accelerator's calls and their golden results: what runs on the GEMM engine and the ZO layer.

Every linear map of a fine-tuning step is one *call* to one of the two units, described by
a record that holds everything the unit gets (so the co-simulation can replay it on the RTL):

* :class:`EngineCall`: the GEMM engine's job ``Y = requant(X·W + bias)``
  (:func:`zoforge.golden.engine.engine_gemm`): int8 ``x (M, K)`` and ``w (K, N)``, int32
  ``bias (N,)``, per-output-column ``multiplier``/``shift`` (int8 result), or none of them
  (``raw``: the int32 accumulators).
* :class:`AdapterCall`: one branch of the ZO layer in lora-fa mode
  (:mod:`zoforge.golden.zolayer.model`): ``Y = wrap32(X·W + U·Tp)`` with
  ``U = requant(X·A, u_mult, u_shift)`` and ``Tp = clamp((T >> 8) + s * (z >> eps_shift))``;
  ``z`` is the next perturbation of the master ``T (r, N)`` from the layer's generator, in
  the hardware's word order; the flags are the layer's CTRL flags (``save``/``restore`` the
  generator first; ``sign`` +1, -1, or 0 = ``plain``, no perturbation drawn).
* :class:`UpdateCall`: the ZO layer's update of one adapter after one query:
  ``load_master(T)`` (clears D), ``D = g * z`` (z regenerated; ``restore`` first if set),
  ``apply``: ``T' = clamp(T - ((D * eta_mult + half) >> eta_shift), int24)``.

:class:`GoldenUnits` executes calls with the golden models; its ZO layer keeps the
hardware's one generator and one save slot, so a sequence of calls with their flags
consumes the generator exactly as the RTL does. The co-simulation gives every call to the
RTL and to a :class:`GoldenUnits` and compares the two results value by value.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from zoforge.errors import ConfigError
from zoforge.golden.engine import RequantParams, engine_gemm, gemm_int32, requantize, wrap_signed
from zoforge.golden.zolayer.model import (applied_update, draw_perturbation, exact_matmul,
                                          perturbed_operand)

__all__ = ["EngineCall", "AdapterCall", "UpdateCall", "GoldenUnits", "Call"]


@dataclass(frozen=True)
class EngineCall:
    """One GEMM engine job (see the module docstring); ``name`` e.g. ``block0.key``."""

    name: str
    x: torch.Tensor                      # int8 (M, K)
    w: torch.Tensor                      # int8 (K, N)
    bias: torch.Tensor                   # int32 (N,)
    multiplier: torch.Tensor | None      # int64 (N,), None: raw int32 output
    shift: torch.Tensor | None

    unit = "engine"

    @property
    def raw(self) -> bool:
        return self.multiplier is None


@dataclass(frozen=True)
class AdapterCall:
    """One ZO-layer branch (see the module docstring); ``name`` e.g. ``block0.query``."""

    name: str
    x: torch.Tensor                      # int8 (M, K)
    w: torch.Tensor                      # int8 (K, N), frozen
    a: torch.Tensor                      # int8 (K, r), frozen
    master: torch.Tensor                 # int64 (r, N), signed 24-bit
    u_mult: int
    u_shift: int
    sign: int                            # +1, -1, or 0 (plain)
    eps_shift: int
    save: bool = False
    restore: bool = False

    unit = "zolayer"


@dataclass(frozen=True)
class UpdateCall:
    """One adapter's update after one query (see the module docstring)."""

    name: str
    master: torch.Tensor                 # int64 (r, N)
    g: int
    eta_mult: int
    eta_shift: int
    restore: bool = False

    unit = "zolayer"


Call = EngineCall | AdapterCall | UpdateCall


@dataclass
class GoldenUnits:
    """The two units' golden models; ``generator`` is the ZO layer's (a golden generator
    of :mod:`zoforge.golden.rng`, in the hardware's reset state for a new layer) and
    ``rows`` its array rows (the perturbation's word width)."""

    generator: object
    rows: int
    saved: dict | None = None
    log: list = field(default_factory=list)     # the calls in order (when ``record``)
    record: bool = False

    def __call__(self, call: Call) -> torch.Tensor:
        if self.record:
            self.log.append(call)
        if isinstance(call, EngineCall):
            return self.engine(call)
        if isinstance(call, AdapterCall):
            return self.adapter(call)
        return self.update(call)

    @staticmethod
    def engine(call: EngineCall) -> torch.Tensor:
        params = None if call.raw else RequantParams(call.multiplier, call.shift)
        return engine_gemm(call.x, call.w, call.bias, params).to(torch.int64)

    def generator_state(self) -> dict:
        """The ZO layer's generator state as plain data (``generator.save()``: the strategy
        and an int), what a checkpoint keeps between steps (the save slot is not kept: every
        step saves before it restores)."""
        return self.generator.save()

    def load_generator_state(self, state: dict) -> None:
        """Set the generator to ``state`` (:meth:`generator_state`'s); a wrong strategy or
        value is a :class:`ConfigError`."""
        self.generator.restore(state)

    def _flags(self, save: bool, restore: bool) -> None:
        if save:
            self.saved = self.generator.save()
        if restore:
            if self.saved is None:
                raise ConfigError("restore", "a call after one that saved the generator",
                                  "no saved state")
            self.generator.restore(self.saved)

    def adapter(self, call: AdapterCall) -> torch.Tensor:
        self._flags(call.save, call.restore)
        r, n = call.master.shape
        z = draw_perturbation(self.generator, self.rows, r, n) if call.sign else None
        operand = perturbed_operand(call.master, z, call.sign, call.eps_shift)
        u = requantize(gemm_int32(call.x, call.a), RequantParams(call.u_mult, call.u_shift))
        xw = gemm_int32(call.x, call.w).to(torch.int64)
        return wrap_signed(xw + exact_matmul(u, operand))

    def update(self, call: UpdateCall) -> torch.Tensor:
        self._flags(False, call.restore)
        r, n = call.master.shape
        z = draw_perturbation(self.generator, self.rows, r, n)
        return applied_update(call.master, int(call.g) * z, call.eta_mult, call.eta_shift)

