"""P-RGE's dual-forwarding formulation (the form exported to an inference engine).

The module keeps only the 2q perturbed copies ``C[2i] = theta + eps z_i`` and
``C[2i+1] = theta - eps z_i`` of the trainable parameters, never ``theta`` itself. Each
``forward(index)`` first applies the previous step's update and the next perturbation,
then runs the one batched forward of all 2q copies::

    eps z_i = (C[2i] - C[2i+1]) / 2          theta = mean_i (C[2i] + C[2i+1]) / 2
    theta  <- theta - (lr / q) sum_i g_i z_i   with g_i = (l+_i - l-_i) / (2 eps) from the
                                               previous forward
    draw z'_i;  C[2i] = theta + eps z'_i,  C[2i+1] = theta - eps z'_i

This is the same algorithm as :class:`~zoforge.golden.zo.optimizers.RGE` with both P-RGE
loops, up to float rounding of the recovery. The old public P-RGE code's dual mode drops
the projected gradient when q = 1; here the query axis is kept for every q (no special case
for q = 1), and a test checks q = 1 and q = 4 against the plain optimizer.
"""
from __future__ import annotations

import torch

from zoforge.errors import ConfigError

__all__ = ["DualForwardPRGE"]


class DualForwardPRGE:
    """Dual-forwarding P-RGE on a trainable (see the module docstring)."""

    def __init__(self, trainable, perturbation, lr: float, eps: float, queries: int = 1):
        if queries < 1:
            raise ConfigError("queries", "an integer >= 1", queries)
        self.trainable, self.perturbation = trainable, perturbation
        self.lr, self.eps, self.queries = float(lr), float(eps), queries
        self.copies = self._perturbed(trainable.theta.clone())
        self.projected: torch.Tensor | None = None      # (q,), from the last forward

    def _perturbed(self, theta: torch.Tensor) -> torch.Tensor:
        rows = []
        for _ in range(self.queries):
            z = self.perturbation.draw(theta.numel())
            rows += [theta + self.eps * z, theta - self.eps * z]
        return torch.stack(rows)

    def _updated_theta(self) -> torch.Tensor:
        plus, minus = self.copies[0::2], self.copies[1::2]
        theta = ((plus + minus) / 2).mean(0)
        if self.projected is not None:
            eps_z = (plus - minus) / 2                       # (q, d): the query axis is kept
            for row, g in zip(eps_z, self.projected.tolist()):
                theta.add_(row, alpha=-self.lr * g / (self.queries * self.eps))
        return theta

    def forward(self, index) -> float:
        """Apply the pending update and new perturbation, then the batched forward."""
        if self.projected is not None:
            self.copies = self._perturbed(self._updated_theta())
        losses = self.trainable.losses(self.copies, index)
        lp, lm = losses[0::2], losses[1::2]
        self.projected = (lp - lm) / (2 * self.eps)
        return float((lp + lm).mean() / 2)

    step = forward

    def current_theta(self) -> torch.Tensor:
        """theta including the pending update (what :meth:`finish` would write)."""
        return self._updated_theta()

    def state_dict(self) -> dict:
        return {"perturbation": self.perturbation.state_dict(), "copies": self.copies.clone(),
                "projected": None if self.projected is None else self.projected.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.perturbation.load_state_dict(state["perturbation"])
        self.copies = state["copies"].clone()
        self.projected = None if state["projected"] is None else state["projected"].clone()

    def finish(self) -> torch.Tensor:
        """theta after the last forward's update (written back to the trainable)."""
        self.trainable.theta.copy_(self._updated_theta())
        return self.trainable.theta
