"""Zeroth-order optimizers on a :class:`~zoforge.golden.zo.trainable.Trainable`.

All update ``trainable.theta`` in place from loss values only. ``z_i`` are perturbation
vectors from a :class:`~zoforge.golden.zo.perturbation.Perturbation`, drawn in query order.
The vectors live only during a step; checkpoints hold the source's state.

**RGE** (``mezo``, ``prge``), q queries on one batch::

    g = (1/q) sum_i [(L(theta + eps z_i) - L(theta - eps z_i)) / (2 eps)] z_i
    theta <- theta - lr g          (applied query by query, i = 0..q-1)

``mezo`` evaluates the 2q losses one forward each (sequential MeZO / ZO-SGD). ``prge``
batches them: the outer loop stacks the q queries' copies into one forward (the batch is
duplicated per query, effective batch E = q B), the inner loop puts +eps and -eps in one
forward; with both, all 2q copies run in a single forward. Each flag alone is available.

**PeFoo** / **HiZOO** (3 forwards per step, one batched call; diagonal ``D``, initially 1;
``p`` the perturbation, ``v = D^{-1/2} p``, lambda = ``eps``, a = ``hessian_smooth``)::

    l, l+, l- = L(theta), L(theta + lambda v), L(theta - lambda v)
    proj = (l+ - l-) / (2 lambda);   dL = l+ + l- - 2 l
    H    = dL / (2 lambda^2) * D * (p^2 - 1)       # diag(D^1/2 p p^T D^1/2 - D)
    PeFoo: theta <- theta - lr proj D_{t-1}^{-1/2} p
           E <- (1 - a) E + a H  (E_0 = 1);  D <- clip(|E|, D_min, D_max)
    HiZOO: D <- (1 - a) D + a |H|;  theta <- theta - lr proj D_t^{-1/2} p

**PeFoo-L** is PeFoo on one layer at a time (``trainable.layers``), last to first, moving to
the next layer every ``layer_steps`` steps (wrapping around); D and E are re-initialised to
1 when the layer changes. Only the active layer is perturbed and updated.
"""
from __future__ import annotations

import torch

from zoforge.errors import ConfigError, check_choice
from zoforge.golden.zo.names import METHODS

__all__ = ["ZOOptimizer", "RGE", "Preconditioned", "METHODS", "make_optimizer"]



class ZOOptimizer:
    """Base: ``step(index) -> loss``; ``state_dict()`` includes the perturbation's state."""

    def __init__(self, trainable, perturbation, lr: float, eps: float):
        if not lr > 0:
            raise ConfigError("lr", "a number > 0", lr)
        if not eps > 0:
            raise ConfigError("eps", "a number > 0", eps)
        self.trainable, self.perturbation = trainable, perturbation
        self.lr, self.eps = float(lr), float(eps)

    def step(self, index) -> float:
        raise NotImplementedError

    def finish(self) -> torch.Tensor:
        """Apply anything still pending (nothing here) and return theta."""
        return self.trainable.theta

    def current_theta(self) -> torch.Tensor:
        return self.trainable.theta

    def state_dict(self) -> dict:
        return {"perturbation": self.perturbation.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.perturbation.load_state_dict(state["perturbation"])


class RGE(ZOOptimizer):
    """Randomized gradient estimate with q queries (see the module docstring)."""

    def __init__(self, trainable, perturbation, lr, eps, queries: int = 1,
                 outer: bool = False, inner: bool = False):
        super().__init__(trainable, perturbation, lr, eps)
        if queries < 1:
            raise ConfigError("queries", "an integer >= 1", queries)
        self.queries, self.outer, self.inner = queries, outer, inner

    def pair_losses(self, zs: list[torch.Tensor], index) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L(theta + eps z_i), L(theta - eps z_i))`` for every query, each ``(q,)``."""
        theta, eps, loss = self.trainable.theta, self.eps, self.trainable.losses
        plus = [theta + eps * z for z in zs]
        minus = [theta - eps * z for z in zs]
        if self.outer and self.inner:
            both = loss(torch.stack([c for pair in zip(plus, minus) for c in pair]), index)
            return both[0::2], both[1::2]
        if self.outer:
            return loss(torch.stack(plus), index), loss(torch.stack(minus), index)
        if self.inner:
            pairs = torch.stack([loss(torch.stack(pair), index) for pair in zip(plus, minus)])
            return pairs[:, 0], pairs[:, 1]
        return (torch.cat([loss(c[None], index) for c in plus]),
                torch.cat([loss(c[None], index) for c in minus]))

    def step(self, index) -> float:
        zs = [self.perturbation.draw(self.trainable.d) for _ in range(self.queries)]
        lp, lm = self.pair_losses(zs, index)
        projected = (lp - lm) / (2 * self.eps)
        for z, g in zip(zs, projected.tolist()):
            self.trainable.theta.add_(z, alpha=-self.lr * g / self.queries)
        return float((lp + lm).mean() / 2)


class Preconditioned(ZOOptimizer):
    """PeFoo, HiZOO and PeFoo-L (``layer_steps`` set); see the module docstring."""

    def __init__(self, trainable, perturbation, lr, eps, variant: str = "pefoo",
                 hessian_smooth: float = 0.01, d_min: float = 0.1, d_max: float = 1e4,
                 layer_steps: int | None = None):
        super().__init__(trainable, perturbation, lr, eps)
        self.variant = check_choice("method", variant, ("pefoo", "hizoo"))
        if not 0 < hessian_smooth <= 1:
            raise ConfigError("hessian_smooth", "a number in (0, 1]", hessian_smooth)
        if not 0 < d_min <= d_max:
            raise ConfigError("d_min/d_max", "numbers with 0 < D_min <= D_max",
                              f"{d_min}, {d_max}")
        if layer_steps is not None and layer_steps < 1:
            raise ConfigError("layer_steps", "an integer >= 1", layer_steps)
        self.smooth, self.d_min, self.d_max = hessian_smooth, d_min, d_max
        self.layer_steps = layer_steps
        self.t = 0
        self.active = -1
        self._reset(self._active_slice())

    def _layer_order(self):
        return list(reversed(self.trainable.layers))

    def _active_layer(self) -> int:
        if self.layer_steps is None:
            return 0
        return (self.t // self.layer_steps) % len(self.trainable.layers)

    def _active_slice(self) -> slice:
        if self.layer_steps is None:
            return slice(0, self.trainable.d)
        return self._layer_order()[self._active_layer()][1]

    def _reset(self, block: slice) -> None:
        size = block.stop - block.start
        self.D = torch.ones(size)
        self.E = torch.ones(size)
        self.active = self._active_layer()

    def step(self, index) -> float:
        block = self._active_slice()
        if self._active_layer() != self.active:
            self._reset(block)
        p = self.perturbation.draw(block.stop - block.start)
        v = p / self.D.sqrt()
        lam = self.eps
        copies = self.trainable.theta.expand(3, -1).clone()
        copies[1, block] += lam * v
        copies[2, block] -= lam * v
        l0, lp, lm = self.trainable.losses(copies, index).tolist()
        projected = (lp - lm) / (2 * lam)
        hessian = (lp + lm - 2 * l0) / (2 * lam * lam) * self.D * (p * p - 1)
        theta = self.trainable.theta[block]
        if self.variant == "pefoo":
            theta.sub_(self.lr * projected * v)
            self.E.mul_(1 - self.smooth).add_(self.smooth * hessian)
            self.D = self.E.abs().clamp(self.d_min, self.d_max)
        else:
            self.D.mul_(1 - self.smooth).add_(self.smooth * hessian.abs())
            theta.sub_(self.lr * projected * p / self.D.sqrt())
        self.t += 1
        return l0

    def state_dict(self) -> dict:
        return {**super().state_dict(), "t": self.t, "active": self.active,
                "D": self.D.clone(), "E": self.E.clone()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.t, self.active = int(state["t"]), int(state["active"])
        self.D, self.E = state["D"].clone(), state["E"].clone()


def make_optimizer(method: str, trainable, perturbation, *, lr: float, eps: float,
                   queries: int = 1, inner: bool = True, outer: bool = True,
                   hessian_smooth: float = 0.01, d_min: float = 0.1, d_max: float = 1e4,
                   layer_steps: int = 10) -> ZOOptimizer:
    """The optimizer ``method`` (one of :data:`METHODS`) with CLI-style parameters."""
    check_choice("method", method, METHODS)
    if method in ("mezo", "prge"):
        if method == "prge" and trainable.kind == "full":
            raise ConfigError("trainable", "head or lora-fa for method prge", "full")
        parallel = method == "prge"
        return RGE(trainable, perturbation, lr, eps, queries,
                   outer=parallel and outer, inner=parallel and inner)
    if queries != 1:
        raise ConfigError("queries", f"1 for method {method}", queries)
    return Preconditioned(trainable, perturbation, lr, eps,
                          variant="hizoo" if method == "hizoo" else "pefoo",
                          hessian_smooth=hessian_smooth, d_min=d_min, d_max=d_max,
                          layer_steps=layer_steps if method == "pefoo-l" else None)
