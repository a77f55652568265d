"""The split adapter mapping: an adapter's frozen X·W on the GEMM engine, the ZO layer only
the low-rank path (issue 32), bit-exact with the direct :class:`~.calls.AdapterCall`.

An adapter call (:mod:`.calls`) is ``Y = wrap32(X·W + U·Tp)`` with
``U = requant(wrap32(X·A), u_mult, u_shift)`` (:func:`zoforge.golden.engine.requantize`).
The split runs it as three calls the existing units run (:func:`split_adapter_call`,
:func:`narrow_call`, :func:`combine`)::

    XW  = engine raw job (X, W, bias 0)                 = wrap32(X·W)            int32 (M, N)
    U   = engine int8 job (X, A, bias 0, every column u_mult / u_shift)
        = requantize(wrap32(X·A), u_mult, u_shift)                                int8 (M, r)
    Yn  = ZO-layer adapter call (X' = U, W' = 0 (r, N), A' = I_r, u_mult 1, u_shift 0,
          the call's master, sign, eps_shift, save/restore)
        = wrap32(U·0 + requantize(U·I_r, 1, 0)·Tp) = wrap32(U·Tp)
    Y   = wrap32(XW + Yn)

Why each step is exact: the engine's and the ZO layer's requantizers are the same function
(:func:`~zoforge.golden.engine.requantize`; in the RTL both are
:class:`~zoforge.hw.pe.requant.RequantStream`), per column with equal parameters being per
tensor; ``requantize(acc, 1, 0) = clamp((acc * 1 + ((1 << 0) >> 1)) >> 0) = clamp(acc)``,
and ``U·I_r = U`` is int8 already, so the ZO layer gets U back exactly (its ``MULT`` register
holds 16 bits, ``SHIFT`` 0..47: 1 and 0 are in range); the perturbation
:func:`~zoforge.golden.zolayer.model.draw_perturbation` of the ``(r, N)`` master depends on
the layer's rows, r, N and its branch lanes, never on K, so the generator walks exactly as
for the direct call (same flags, same master); and wrapping is a ring homomorphism:
``wrap32(wrap32(a) + wrap32(b)) = wrap32(a + b)`` for every int ``a``, ``b``. So no operand
value breaks the equality (``tests/test_adapter_split.py`` checks the extremes). The narrow
call's K is r: the ZO layer needs ``r <= max_k`` (and r a multiple of its rows, as before).
With W' = 0 the layer computes no X'·W': the narrow call runs as ``load_a``, ``load_master``,
``load_x``, ``frozen_a`` and a ``branch`` with the ``zero_w`` flag (XW taken as 0;
:mod:`zoforge.sim.finetune_host`, :mod:`zoforge.hw.accel.schedule`), no ``load_w`` or
``frozen_w``.

:class:`SplitUnits` wraps any units (:class:`~.calls.GoldenUnits`, the RTL's
:class:`~zoforge.sim.finetune_cosim.RtlUnits`) and runs every adapter call this way; every
other call goes through unchanged.
"""
from __future__ import annotations

import torch

from zoforge.golden.engine import wrap_signed
from zoforge.golden.finetune.calls import AdapterCall, EngineCall

__all__ = ["split_adapter_call", "narrow_call", "combine", "SplitUnits", "XW_SUFFIX",
           "U_SUFFIX"]

#: The engine calls' names: the adapter's name with these suffixes (``block0.query.xw``).
XW_SUFFIX, U_SUFFIX = ".xw", ".u"


def split_adapter_call(call: AdapterCall) -> tuple[EngineCall, EngineCall]:
    """The two engine calls of ``call`` (module docstring): the raw ``X·W`` job and the int8
    job ``U = requant(X·A)`` with every column's multiplier ``u_mult`` and shift
    ``u_shift``; both with bias 0."""
    n, r = call.w.shape[1], call.a.shape[1]
    xw = EngineCall(call.name + XW_SUFFIX, call.x, call.w, torch.zeros(n, dtype=torch.int32),
                    None, None)
    u = EngineCall(call.name + U_SUFFIX, call.x, call.a, torch.zeros(r, dtype=torch.int32),
                   torch.full((r,), int(call.u_mult), dtype=torch.int64),
                   torch.full((r,), int(call.u_shift), dtype=torch.int64))
    return xw, u


def narrow_call(call: AdapterCall, u: torch.Tensor) -> AdapterCall:
    """The ZO layer's part of ``call`` given ``u`` (the U engine call's int8 result, ``(M,
    r)``): X' = U, W' = 0, A' = I_r, requantizer 1 / 0, the rest of ``call`` unchanged."""
    r, n = call.master.shape
    return AdapterCall(call.name, u.to(torch.int8), torch.zeros(r, n, dtype=torch.int8),
                       torch.eye(r, dtype=torch.int8), call.master, 1, 0, call.sign,
                       call.eps_shift, call.save, call.restore)


def combine(xw: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
    """The adapter's output ``wrap32(XW + Yn)`` (int64 values of int32) from the raw engine
    result and the narrow call's."""
    return wrap_signed(xw.to(torch.int64) + branch.to(torch.int64))


class SplitUnits:
    """``units`` (anything called ``units(call) -> tensor``) with every :class:`AdapterCall`
    run as the split mapping's three calls (module docstring), in the order XW, U, narrow;
    other calls pass through. Other public attributes (``generator_state``, ``take_cycles``,
    ``close``, ...) are the wrapped units'."""

    def __init__(self, units):
        self.units = units

    def __call__(self, call) -> torch.Tensor:
        if not isinstance(call, AdapterCall):
            return self.units(call)
        xw_call, u_call = split_adapter_call(call)
        xw = self.units(xw_call)
        u = self.units(u_call)
        return combine(xw, self.units(narrow_call(call, u)))

    def __getattr__(self, name: str):
        if name.startswith("_") or name == "units":
            raise AttributeError(name)
        return getattr(self.units, name)

    def __enter__(self) -> "SplitUnits":
        self.units.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.units.__exit__(*exc)
