"""The accelerator's calls and their golden results: what runs on the GEMM engine and the ZO layer.

Every linear map of a fine-tuning step is one *call* to one of the two units, described by
a record that holds everything the unit gets (so the co-simulation can replay it on the RTL):

* :class:`EngineCall`: the GEMM engine's job ``Y = requant(X·W + bias)``
  (:func:`zoforge.golden.engine.engine_gemm`): int8 ``x (M, K)`` and ``w (K, N)``, int32
  ``bias (N,)``, per-output-column ``multiplier``/``shift`` (int8 result), or none of them
  (``raw``: the int32 accumulators), or a ``gelu`` stage (a GELU job,
  :mod:`zoforge.golden.engine_gelu`: int8 ``requant(i-GELU(requant16(X·W + bias)))``).
* :class:`AdapterCall`: one branch of the ZO layer in lora-fa mode
  (:mod:`zoforge.golden.zolayer.model`): ``Y = wrap32(X·W + U·Tp)`` with
  ``U = requant(X·A, u_mult, u_shift)`` and ``Tp = clamp((T >> 8) + s * (z >> eps_shift))``;
  ``z`` is the next perturbation of the master ``T (r, N)`` from the layer's generator, in
  the hardware's word order; the flags are the layer's CTRL flags (``save``/``restore`` the
  generator first; ``sign`` +1, -1, or 0 = ``plain``, no perturbation drawn).
* :class:`UpdateCall`: the ZO layer's update of one adapter after one query:
  ``load_master(T)`` (clears D), ``D = g * z`` (z regenerated; ``restore`` first if set),
  ``apply``: ``T' = clamp(T - ((D * eta_mult + half) >> eta_shift), int24)``.
* :class:`SoftmaxCall`: the softmax unit's rows (``unit`` ``softmax``,
  :mod:`zoforge.hw.softmax`): the integer softmax
  (:func:`~zoforge.golden.finetune.integer_ops.int_softmax`) of int32 ``scores (J, R, L)``
  (a stack of ``J`` jobs of ``R`` rows of ``L`` keys; ``(R, L)``: one) with the keys
  ``keep (J, L)`` (``(L,)``) of each job's rows and the constants ``params``
  (:class:`~zoforge.golden.finetune.integer_ops.SoftmaxParams`): int in ``[0, levels]``. The
  engine attention's per block and forward: ``J`` = sequences x heads, ``R = L``.

:class:`GoldenUnits` executes calls with the golden models; its ZO layer keeps the
hardware's one generator and one save slot, so a sequence of calls with their flags
consumes the generator exactly as the RTL does. The co-simulation gives every call to the
RTL and to a :class:`GoldenUnits` and compares the two results value by value.

**Speed** (issue 33; the values are the golden models' bit for bit,
``tests/test_finetune_fast.py``):
the int8 products go through :func:`int8_product` (torch's int8 GEMM where a probe of each
shape proves it exact, else the engine's float32 route); the 32-bit wrap is skipped where
the operands' bound proves it cannot happen; and the frozen products a call shares with the
call of the same name before it (the same ``x`` and weights, value for value: the ``2q``
passes of a step into the first adapted block) are reused, not recomputed
(:attr:`GoldenUnits.shared`: 0 disables it). Every call is still made, logged and, under
the co-simulation, run on the RTL. A stack of raw jobs of one name (the engine-attention's
per sequence and head, :func:`raw_jobs`) goes to :meth:`GoldenUnits.raw_batch`: one exact
batched product (float32 or float64, exact at that depth), logged as its per-job calls;
units without
``raw_batch`` (the RTL's) get the calls one by one (:func:`run_raw_jobs`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from zoforge.errors import ConfigError
from zoforge.golden.engine import RequantParams, exact_int8_matmul, requantize, wrap_signed
from zoforge.golden.engine_gelu import GeluStage, gelu_stage
from zoforge.golden.engine_widths import ACC_BITS
from zoforge.golden.finetune.integer_ops import SoftmaxParams, int_softmax
from zoforge.golden.zolayer.config import Formats
from zoforge.golden.zolayer.model import (applied_update, draw_perturbation, exact_matmul,
                                          perturbed_operand)

__all__ = ["EngineCall", "AdapterCall", "UpdateCall", "SoftmaxCall", "GoldenUnits", "Call", "int8_product",
           "gemm_int32", "raw_jobs", "run_raw_jobs"]

#: |int8 x int8| products sum to at most 2^14 K; below this K no int32 accumulator can wrap.
_NO_WRAP_DEPTH = 2 ** (ACC_BITS - 1 - 14)
#: Shapes ``(M, K, N)`` whose int8 GEMM (``torch._int_mm``) the probe found exact (True) or
#: not (False): torch's kernel is hardware- and shape-dependent (oneDNN; without VNNI its
#: pair sums could saturate), so each shape is checked once on extreme operands first.
_INT_MM_EXACT: dict[tuple[int, int, int], bool] = {}


def _int_mm_exact(m: int, k: int, n: int) -> bool:
    """Whether torch's int8 GEMM of shape ``(m, k) x (k, n)`` equals the exact products on
    the probe: all -128, all 127, and alternating extremes (every pair sum at its largest
    magnitude of each sign), against the float64 products (exact: |sum| <= 2^14 k < 2^53)."""
    shape = (m, k, n)
    if shape not in _INT_MM_EXACT:
        ok = hasattr(torch, "_int_mm") and k < _NO_WRAP_DEPTH
        for fill in (-128, 127, None):
            if not ok:
                break
            if fill is None:    # -128/127 alternating by row and column: both signs meet
                x = torch.where((torch.arange(m)[:, None] + torch.arange(k)) % 2 == 0,
                                127, -128)
                w = torch.where((torch.arange(k)[:, None] // 2 + torch.arange(n)) % 3 == 0,
                                -128, 127)
            else:
                x, w = torch.full((m, k), fill), torch.full((k, n), fill)
            x, w = x.to(torch.int8), w.to(torch.int8)
            try:
                fast = torch._int_mm(x, w)
            except (RuntimeError, TypeError):
                ok = False
                break
            ok = torch.equal(fast.to(torch.int64), exact_matmul(x, w))
        _INT_MM_EXACT[shape] = ok
    return _INT_MM_EXACT[shape]


def int8_product(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w`` of int8 ``(M, K)`` and ``(K, N)`` as exact int64 values (no wrap: the
    caller wraps): torch's int8 GEMM where :func:`_int_mm_exact` proved the shape, else
    :func:`zoforge.golden.engine.exact_int8_matmul`."""
    if (x.dim() == 2 and x.dtype == w.dtype == torch.int8
            and _int_mm_exact(*x.shape, w.shape[1])):
        return torch._int_mm(x.contiguous(), w.contiguous()).to(torch.int64)
    return exact_int8_matmul(x, w)


def gemm_int32(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None,
               product: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`zoforge.golden.engine.gemm_int32` (``wrap32(x @ w + bias)``) as int64 values,
    by :func:`int8_product` (or ``product``, ``x @ w`` already computed), wrapped only
    where the bound ``2^14 K + max|bias|`` reaches 2^31."""
    acc = int8_product(x, w) if product is None else product
    bound = 2 ** 14 * x.shape[-1]
    if bias is not None:
        bias = bias.to(torch.int64)
        acc = acc + bias
        bound += int(bias.abs().max()) if bias.numel() else 0
    return acc if bound < 2 ** (ACC_BITS - 1) else wrap_signed(acc)


@dataclass(frozen=True)
class EngineCall:
    """One GEMM engine job (see the module docstring); ``name`` e.g. ``block0.key``."""

    name: str
    x: torch.Tensor                      # int8 (M, K)
    w: torch.Tensor                      # int8 (K, N)
    bias: torch.Tensor                   # int32 (N,)
    multiplier: torch.Tensor | None      # int64 (N,), None: raw int32 output (or gelu)
    shift: torch.Tensor | None
    gelu: GeluStage | None = None        # a GELU job (multiplier, shift None): int8 result

    unit = "engine"

    def __post_init__(self):
        if self.gelu is not None and self.multiplier is not None:
            raise ConfigError("gelu", "a GELU job without multiplier and shift (the "
                              "GeluStage holds both requantizers)", self.name)

    @property
    def raw(self) -> bool:
        return self.multiplier is None and self.gelu is None


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


@dataclass(frozen=True)
class SoftmaxCall:
    """The integer softmax of a stack of score rows (see the module docstring); ``name``
    e.g. ``block0.softmax``."""

    name: str
    scores: torch.Tensor                 # int64 (J, R, L) or (R, L): values of int32
    keep: torch.Tensor                   # bool (J, L) or (L,): each job's kept keys
    params: SoftmaxParams
    levels: int                          # p in [0, levels] (the P.V job's P: 127)

    unit = "softmax"

    def __post_init__(self):
        if self.keep.dim() + 1 != self.scores.dim() or \
                self.keep.shape[:-1] != self.scores.shape[:-2] or \
                self.keep.shape[-1] != self.scores.shape[-1]:
            raise ConfigError("keep", f"a key mask of shape {tuple(self.scores.shape[:-2])} + "
                              f"({self.scores.shape[-1]},) (the scores' jobs and keys)",
                              tuple(self.keep.shape))


Call = EngineCall | AdapterCall | UpdateCall | SoftmaxCall


def raw_jobs(name: str, x: torch.Tensor, w: torch.Tensor) -> list[EngineCall]:
    """The raw engine jobs ``EngineCall(name, x[j], w[j], bias 0)`` of int8 stacks ``x (J, M,
    K)`` and ``w (J, K, N)``, in ``j`` order."""
    bias = torch.zeros(w.shape[-1], dtype=torch.int32)
    return [EngineCall(name, x[j].contiguous(), w[j].contiguous(), bias, None, None)
            for j in range(x.shape[0])]


def run_raw_jobs(units, name: str, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The results ``(J, M, N)`` (int64 values of int32) of :func:`raw_jobs` on ``units``:
    its ``raw_batch`` where it has one (:class:`GoldenUnits`), else one call per job."""
    batch = getattr(units, "raw_batch", None)
    if batch is not None:
        return batch(name, x, w)
    return torch.stack([units(call).to(torch.int64) for call in raw_jobs(name, x, w)])


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
    shared: int = 1 << 28      # bytes of frozen products kept for reuse (0: none)
    _memo: dict = field(default_factory=dict, repr=False)

    def __call__(self, call: Call) -> torch.Tensor:
        if self.record:
            self.log.append(call)
        if isinstance(call, EngineCall):
            return self.engine(call, self._product(call.name, call.x, call.w)[0])
        if isinstance(call, AdapterCall):
            return self.adapter(call)
        if isinstance(call, SoftmaxCall):
            return self.softmax(call)
        return self.update(call)

    def _product(self, name: str, x: torch.Tensor, *weights: torch.Tensor) -> list:
        """``[x @ w for w in weights]`` (:func:`int8_product`, exact int64), reused from
        the last call of ``name`` where its ``x`` and weights were equal value for value
        (a pure function of them: the reuse cannot change a value)."""
        kept = self._memo.get(name)
        if kept is not None and len(kept[1]) == len(weights) and torch.equal(kept[0], x) \
                and all(torch.equal(a, b) for a, b in zip(kept[1], weights)):
            return kept[2]
        products = [int8_product(x, w) for w in weights]
        size = sum(p.numel() * p.element_size() for p in products)
        if size <= self.shared - sum(entry[3] for entry in self._memo.values()
                                     if entry is not kept):
            self._memo[name] = (x.clone(), [w.clone() for w in weights], products, size)
        else:
            self._memo.pop(name, None)
        return products

    def raw_batch(self, name: str, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """:func:`raw_jobs` ``(name, x, w)`` computed at once: ``wrap32(x[j] @ w[j])`` for
        every ``j`` as int64 ``(J, M, N)``, by one batched float product, exact: every
        partial sum of int8 products is an integer of magnitude at most 2^14 K, so float32
        while that is at most 2^24 (K <= 1024), else float64 (below 2^53 for K < 2^39);
        logged as the per-job calls (when ``record``)."""
        if self.record:
            self.log.extend(raw_jobs(name, x, w))
        exact = torch.float32 if 2 ** 14 * x.shape[-1] <= 2 ** 24 else torch.float64
        product = torch.matmul(x.to(exact), w.to(exact)).to(torch.int64)
        return gemm_int32(x, w, None, product)

    @staticmethod
    def engine(call: EngineCall, product: torch.Tensor | None = None) -> torch.Tensor:
        """:func:`zoforge.golden.engine.engine_gemm` of the call (int64 values), from
        ``product`` (``x @ w``) where given."""
        acc = gemm_int32(call.x, call.w, call.bias, product)
        if call.gelu is not None:
            return gelu_stage(acc, call.gelu).to(torch.int64)
        if call.raw:
            return acc
        return requantize(acc, RequantParams(call.multiplier, call.shift)).to(torch.int64)

    @staticmethod
    def softmax(call: SoftmaxCall) -> torch.Tensor:
        """:func:`~zoforge.golden.finetune.integer_ops.int_softmax` of the call's rows, each
        job's key mask its rows' ``keep`` (int64, the scores' shape)."""
        return int_softmax(call.scores, call.keep[..., None, :], call.params, call.levels)

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
        xw, xa = self._product(call.name, call.x, call.w, call.a)
        u = requantize(_wrapped(xa, call.x.shape[-1]), RequantParams(call.u_mult, call.u_shift))
        out = _wrapped(xw, call.x.shape[-1]) + exact_matmul(u, operand)
        # |U Tp| <= 2^7 2^15 r: with |X W| <= 2^14 K below 2^31 the sum cannot wrap
        if 2 ** 14 * call.x.shape[-1] + 2 ** (7 + Formats.WEIGHT_BITS - 1) * r \
                < 2 ** (ACC_BITS - 1):
            return out
        return wrap_signed(out)

    def update(self, call: UpdateCall) -> torch.Tensor:
        self._flags(False, call.restore)
        r, n = call.master.shape
        z = draw_perturbation(self.generator, self.rows, r, n)
        return applied_update(call.master, int(call.g) * z, call.eta_mult, call.eta_shift)


def _wrapped(acc: torch.Tensor, k: int) -> torch.Tensor:
    """int32 accumulators of exact int8 products over depth ``k``: wrapped only where
    ``2^14 k`` reaches 2^31."""
    return acc if k < _NO_WRAP_DEPTH else wrap_signed(acc)
