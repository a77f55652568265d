"""The ZO training layer's integer arithmetic (PyTorch), bit-exact with :mod:`zoforge.hw.zolayer`.

Shapes are the natural ones (the hardware's tile order is its own business): activations
``X`` ``(M, K)`` int8; in ``lora-fa`` mode frozen ``W`` ``(K, N)`` and ``A`` ``(K, r)`` int8
and the trained ``B`` ``(r, N)``; in ``full`` mode the trained ``W`` ``(K, N)``. The trained
matrix is called T (``K_t x N``, K_t = r or K); formats are
:class:`~zoforge.golden.zolayer.config.Formats`.

* **Master copy** ``T``: signed 24-bit integers, 8 fractional bits below the operand.
  The operand fed to the array is ``T >> 8`` (arithmetic, floor; always fits 16 bits).
* **Words and perturbation order**: the hardware reads T as *words* of R values. With
  ``branch_lanes`` B = 1 (the default): for each feature panel ``p = 0 .. N/R - 1`` (outer)
  and each ``k = 0 .. K_t - 1`` (inner), the R values ``T[k, p*R + i]``. In general (B
  branches side by side on the rows, full mode, F = R/B features per word): panels of F
  features (outer), blocks of B k-steps (inner), lane ``kk*F + f`` = ``T[kb*B + kk, p*F + f]``
  (B = 1 is the case above). Each word takes one generator transfer per query and uses its
  first R values (``generator.take(R)``: an LFSR generator moves one cycle whatever R is,
  the pool moves its pointer by R). A ``branch`` job perturbs for Q = max(1, B/2) queries
  at once: word w takes Q consecutive transfers, transfer ``w*Q + j`` is query j's word w.
  So the perturbations of one job are the next ``Q * K_t * N / R`` transfers; they depend
  on R and B but not on C, M or the tiling of tokens.
* **Branch** (query i, sign s in {+1, -1}, ``eps = 2^-e``; with B > 1 one job computes
  the 2Q branches of Q queries, row group ``b = 2j + (s == -1)`` for query j)::

      Tp = clamp((T >> 8) + s * (z_i >> e), -2^15, 2^15 - 1)     # int16, saturating
      lora-fa:  Y = wrap32(XW + U · Tp)      full:  Y = wrap32(X · Tp)
      lora-fa, flag zero_w:  Y = wrap32(U · Tp)      (XW taken as 0: the layer with W = 0)

  ``z >> e`` is an arithmetic shift (floor), so +z and -z are exact negatives before the
  saturation; products are exact, sums wrap modulo 2^32 like the engine's accumulators.
  T itself is never written with a perturbation.
* **Frozen products** (lora-fa, once per batch): ``XW = wrap32(X · W)`` (job ``frozen_w``)
  and ``U = requantize(wrap32(X · A), mult, shift)`` (``frozen_a``; int8, the GEMM engine's
  per-tensor rounding half up and saturation, :func:`zoforge.golden.engine.requantize`). A
  branch with ``zero_w`` needs no XW: a host whose W is 0 runs ``frozen_a`` only.
* **Update**, from the host's projected gradients ``g_i`` (signed 16-bit) after the
  branches of query i: the generator is restored to the job's start and the same ``z_i`` is
  regenerated (with Q > 1 the walk takes all Q transfers of each word and uses query j's),
  ``D += g_i * z_i`` (exact; D has
  :meth:`~zoforge.golden.zolayer.config.Formats.accumulator_bits`). At the end of the step,
  with ``eta / q = eta_mult * 2^-eta_shift``::

      delta = (D * eta_mult + ((1 << eta_shift) >> 1)) >> eta_shift   # round half up
      T     = clamp(T - delta, -2^23, 2^23 - 1);   D = 0

  i.e. ``T <- T - (eta/q) * sum_i g_i z_i`` in master LSBs, rounded once per step.
* **The host's side** (loss, projected gradient ``g``): :mod:`.host`.

Generator schedule of one step (P-RGE order, outer loop queries, inner loop signs)::

    B = 1:  for i in range(q): save; Y+ = branch(+1); restore; Y- = branch(-1); restore;
                               accumulate(g_i)
    B > 1:  for each group of Q queries: save; Ys = group_branch();
                               for j in range(Q): restore; accumulate(g_j, query=j)
    apply(eta_mult, eta_shift)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from zoforge.errors import ConfigError, check_int_range
from zoforge.golden.engine import RequantParams, gemm_int32, requantize, wrap_signed
from zoforge.golden.zolayer.config import Formats, ZoLayerConfig

__all__ = ["LayerShape", "ZoLayerGolden", "saturate", "perturbed_operand", "applied_update",
           "exact_matmul", "draw_perturbation", "draw_perturbations", "full_output"]


def saturate(values: torch.Tensor, bits: int) -> torch.Tensor:
    """Clamp int64 ``values`` to the signed ``bits``-bit range."""
    return values.clamp(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def perturbed_operand(master: torch.Tensor, z: torch.Tensor | None, sign: int,
                      eps_shift: int) -> torch.Tensor:
    """The operand the array sees (:class:`~zoforge.hw.zolayer.perturb.PerturbUnit`):
    ``master >> 8``, or with ``sign`` +1/-1 ``clamp((master >> 8) + sign * (z >> eps_shift),
    -2^15, 2^15 - 1)`` (int64 tensors, arithmetic shifts)."""
    base = master >> Formats.MASTER_FRAC
    if sign == 0:
        return base
    return saturate(base + sign * (z >> eps_shift), Formats.WEIGHT_BITS)


def applied_update(master: torch.Tensor, accumulator: torch.Tensor, eta_mult: int,
                   eta_shift: int) -> torch.Tensor:
    """The update unit's apply step (:class:`~zoforge.hw.zolayer.update.UpdateUnit`):
    ``clamp(master - ((D * eta_mult + ((1 << eta_shift) >> 1)) >> eta_shift), int24)``."""
    delta = (accumulator * eta_mult + ((1 << eta_shift) >> 1)) >> eta_shift
    return saturate(master - delta, Formats.MASTER_BITS)


def draw_perturbation(generator, rows: int, k_t: int, n: int) -> torch.Tensor:
    """The next perturbation of a ``(k_t, n)`` trained matrix in the hardware's read order
    with one branch per job (words: panels of ``rows`` features outer, k inner; each word
    one ``take(rows)``), as an int64 matrix; advances ``generator``."""
    return draw_perturbations(generator, rows, 1, k_t, n)[0]


def draw_perturbations(generator, rows: int, branch_lanes: int, k_t: int,
                       n: int) -> torch.Tensor:
    """The next ``Q = max(1, branch_lanes / 2)`` perturbations of a ``(k_t, n)`` trained
    matrix (one branch job's, see the module docstring: words of ``branch_lanes`` k-steps x
    ``rows / branch_lanes`` features, panels outer; word w takes transfers ``w*Q .. w*Q +
    Q - 1``, one per query), as an int64 ``(Q, k_t, n)`` tensor; advances ``generator``."""
    blocks, features = branch_lanes, rows // branch_lanes
    queries = max(1, branch_lanes // 2)
    transfers = k_t * n // rows * queries
    step = generator.advance(0, rows)                       # the state's move per transfer
    states = (generator.state + step * torch.arange(transfers, dtype=torch.int64)) \
        % generator.modulus
    values = torch.from_numpy(generator.values_at(states.numpy())[:, :rows]).to(torch.int64)
    generator.state = (generator.state + step * transfers) % generator.modulus
    # transfer (p, kb, j) holds query j's T[kb*B + kk, p*F + f] in lane kk*F + f
    values = values.reshape(n // features, k_t // blocks, queries, blocks, features)
    return values.permute(2, 1, 3, 0, 4).reshape(queries, k_t, n)


def full_output(x: torch.Tensor, operand: torch.Tensor) -> torch.Tensor:
    """A full-mode layer's output ``wrap32(X · operand)`` (int8 ``x``, int16 ``operand``)
    as int64 values of int32."""
    return wrap_signed(exact_matmul(x, operand))


@dataclass(frozen=True)
class LayerShape:
    """One layer's run-time dimensions (within the configuration's capacities)."""

    m: int
    k: int
    n: int
    r: int = 0

    def checked(self, config: ZoLayerConfig) -> "LayerShape":
        lora = config.mode == "lora-fa"
        check_int_range("m", self.m, 1, config.max_m)
        check_int_range("k", self.k, 1, config.max_k)
        check_int_range("n", self.n, 1, config.max_n)
        check_int_range("r", self.r, 1 if lora else 0, config.max_r if lora else 0)
        for field, value, unit, name in (("m", self.m, config.cols, "cols"),
                                        ("n", self.n, config.features_per_word,
                                         "rows / branch_lanes"),
                                        ("k", self.k, config.branch_lanes, "branch_lanes"),
                                        ("r", self.r, config.rows, "rows")):
            if value % unit:
                raise ConfigError(field, f"a multiple of {name} = {unit}", value)
        return self

    def trained(self, config: ZoLayerConfig) -> tuple[int, int]:
        """``(K_t, N)``: the trained matrix's shape."""
        return (self.r if config.mode == "lora-fa" else self.k), self.n


class ZoLayerGolden:
    """One layer's state (master T, update accumulator D, generator) and its operations."""

    def __init__(self, config: ZoLayerConfig, shape: LayerShape, seed: int = 0):
        self.config, self.shape = config, shape.checked(config)
        self.lora = config.mode == "lora-fa"
        self.generator = config.generator().golden()
        self.generator.state = self.generator.initial_state(seed)
        self.saved = self.generator.save()
        self.z_width = self.generator.width
        self.accumulator_bits = Formats.accumulator_bits(self.z_width)
        k_t, n = shape.trained(config)
        self.master = torch.zeros(k_t, n, dtype=torch.int64)
        self.accumulator = torch.zeros(k_t, n, dtype=torch.int64)
        self.x = self.w = self.a = self.xw = self.u = None

    # -- loads --------------------------------------------------------------------------
    def load_frozen(self, w: torch.Tensor, a: torch.Tensor | None = None) -> None:
        """The frozen int8 weights: W ``(K, N)`` and A ``(K, r)`` (lora-fa only)."""
        s = self.shape
        self.w = _int8("w", w, (s.k, s.n)) if self.lora else None
        self.a = _int8("a", a, (s.k, s.r)) if self.lora else None

    def load_master(self, t: torch.Tensor) -> None:
        """The trained matrix's master copy (24-bit integers); clears D."""
        t = torch.as_tensor(t, dtype=torch.int64)
        if tuple(t.shape) != tuple(self.master.shape) or (saturate(t, Formats.MASTER_BITS)
                                                          != t).any():
            raise ConfigError("master", f"a {tuple(self.master.shape)} matrix of signed "
                              f"{Formats.MASTER_BITS}-bit integers", tuple(t.shape))
        self.master = t.clone()
        self.accumulator.zero_()

    def load_x(self, x: torch.Tensor) -> None:
        self.x = _int8("x", x, (self.shape.m, self.shape.k))

    # -- frozen products ------------------------------------------------------------------
    def frozen(self, mult: int, shift: int) -> None:
        """``XW`` and ``U = requant(X·A)`` for this batch (lora-fa)."""
        self.frozen_w()
        self.frozen_a(mult, shift)

    def frozen_w(self) -> None:
        """``XW = wrap32(X·W)`` for this batch (lora-fa; the ``frozen_w`` job)."""
        if self.lora:
            self.xw = gemm_int32(self.x, self.w).to(torch.int64)

    def frozen_a(self, mult: int, shift: int) -> None:
        """``U = requant(X·A)`` for this batch (lora-fa; the ``frozen_a`` job)."""
        if self.lora:
            self.u = requantize(gemm_int32(self.x, self.a), RequantParams(mult, shift))

    # -- the generator ------------------------------------------------------------------
    def save(self) -> None:
        self.saved = self.generator.save()

    def restore(self) -> None:
        self.generator.restore(self.saved)

    def perturbation(self) -> torch.Tensor:
        """The next perturbation of T in the hardware's read order, as a ``(K_t, N)``
        int64 matrix (advances the generator; one branch per job only)."""
        return draw_perturbation(self.generator, self.config.rows, *self.master.shape)

    def perturbations(self) -> torch.Tensor:
        """The next branch job's ``(Q, K_t, N)`` perturbations (advances the generator)."""
        return draw_perturbations(self.generator, self.config.rows, self.config.branch_lanes,
                                  *self.master.shape)

    # -- branches and the update ----------------------------------------------------------
    def operand(self, sign: int = 0, eps_shift: int = 0, z: torch.Tensor | None = None):
        """The int16 operand ``clamp((T >> 8) + sign * (z >> eps_shift))``."""
        return perturbed_operand(self.master, z, sign, eps_shift)

    def branch(self, sign: int, eps_shift: int, zero_w: bool = False) -> torch.Tensor:
        """One forward branch with ``T + sign * eps * z`` (the next perturbation; sign 0:
        the unperturbed layer, no perturbation drawn): Y ``(M, N)`` as int64 values of
        int32; ``zero_w`` (lora-fa): XW taken as 0."""
        if sign not in (1, 0, -1):
            raise ConfigError("sign", "+1, 0 or -1", sign)
        if sign and self.config.branch_lanes > 1:
            raise ConfigError("sign", f"0 with branch_lanes = {self.config.branch_lanes} "
                              "(perturbed branches come in groups: group_branch)", sign)
        check_int_range("eps_shift", eps_shift, 0, Formats.EPS_SHIFT_MAX)
        z = self.perturbation() if sign else None
        return self._output(self.operand(sign, eps_shift, z), zero_w)

    def group_branch(self, eps_shift: int, zero_w: bool = False) -> torch.Tensor:
        """One branch job's 2Q branches (Q queries, each ``+`` then ``-``) with the next
        perturbations: ``(2Q, M, N)``, branch ``2j + (sign == -1)`` (as the rows' groups);
        ``zero_w`` as in :meth:`branch`."""
        check_int_range("eps_shift", eps_shift, 0, Formats.EPS_SHIFT_MAX)
        return torch.stack([self._output(self.operand(sign, eps_shift, z), zero_w)
                            for z in self.perturbations() for sign in (1, -1)])

    def _output(self, operand: torch.Tensor, zero_w: bool) -> torch.Tensor:
        """A branch's Y for the int16 ``operand`` Tp: ``wrap32(XW + U·Tp)`` (XW 0 with
        ``zero_w``) or ``wrap32(X·Tp)``."""
        tp = operand.to(torch.float64)
        if not self.lora:
            return full_output(self.x, tp)
        product = exact_matmul(self.u, tp)
        return wrap_signed(product if zero_w else self.xw + product)

    def accumulate(self, g: int, query: int = 0) -> None:
        """``D += g * z`` with query ``query``'s perturbation of the next branch job (after
        restoring the job's start)."""
        half = 1 << (Formats.GRAD_BITS - 1)
        check_int_range("g", g, -half, half - 1)
        check_int_range("query", query, 0, self.config.queries_per_job - 1)
        self.accumulator += int(g) * self.perturbations()[query]

    def apply(self, eta_mult: int, eta_shift: int) -> None:
        """``T <- clamp(T - round(D * eta_mult / 2^eta_shift))``; ``D <- 0``."""
        check_int_range("eta_mult", eta_mult, 0, (1 << Formats.ETA_MULT_BITS) - 1)
        check_int_range("eta_shift", eta_shift, 0, Formats.ETA_SHIFT_MAX)
        self.master = applied_update(self.master, self.accumulator, eta_mult, eta_shift)
        self.accumulator.zero_()


def _int8(name: str, t, shape: tuple[int, int]) -> torch.Tensor:
    t = torch.as_tensor(t)
    if tuple(t.shape) != shape or t.dtype.is_floating_point or (
            t.numel() and (int(t.min()) < -128 or int(t.max()) > 127)):
        raise ConfigError(name, f"a {shape} matrix of int8 values", tuple(t.shape))
    return t.to(torch.int8)


def exact_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for small integers, exact (float64 sums stay below 2^53 here) -> int64."""
    return torch.matmul(a.to(torch.float64), b.to(torch.float64)).to(torch.int64)
