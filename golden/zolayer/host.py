"""The host's side of a ZO step (the ZCU102's ARM cores): loss and projected gradient.

NumPy and plain Python only (no torch), so the co-simulation's testbench and the golden model
share this one definition. Two hosts:

* **Synthetic regression** (``zoforge cosim zo-layer``):
  ``squared_error(y, target) = sum (y - target)^2`` (exact integers) and
  ``projected_gradient(l_plus, l_minus, grad_shift)
  = clamp(floor((l_plus - l_minus) / 2^grad_shift), -2^15, 2^15 - 1)``: the projected
  gradient ``(l_plus - l_minus) / (2 eps)`` in a fixed-point scale the host chooses
  (``eps`` and the 2 are folded into ``grad_shift``), as the hardware's signed 16-bit g.
* **Classification** (:class:`CrossEntropyHost`, the training runs): the logits are the
  first ``classes`` outputs times ``logit_scale``; the loss is the batch's mean
  cross-entropy in float64 (``logsumexp`` with the maximum subtracted, NumPy's order of
  operations), and ``g = clamp(round_half_even((l_plus - l_minus) * gain), -2^15, 2^15 - 1)``
  with ``gain = 2^grad_frac / (2 eps)``. The float steps are deterministic for the same
  integer outputs, so the RTL's host and the golden host compute the same g.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zoforge.errors import check_int_range
from zoforge.golden.zolayer.config import Formats

__all__ = ["squared_error", "projected_gradient", "GRAD_SHIFT_MAX", "saturate_gradient",
           "CrossEntropyHost", "mean_cross_entropy"]

GRAD_SHIFT_MAX = 127


def squared_error(y, target) -> int:
    """``sum (y - target)^2`` as an exact Python integer."""
    diff = (np.asarray(y, dtype=np.int64).reshape(-1)
            - np.asarray(target, dtype=np.int64).reshape(-1))
    return sum(int(v) * int(v) for v in diff)


def saturate_gradient(g: int) -> int:
    """Clamp to the hardware's signed ``GRAD_BITS``-bit g."""
    half = 1 << (Formats.GRAD_BITS - 1)
    return max(-half, min(half - 1, int(g)))


def projected_gradient(loss_plus: int, loss_minus: int, grad_shift: int) -> int:
    check_int_range("grad_shift", grad_shift, 0, GRAD_SHIFT_MAX)
    return saturate_gradient((int(loss_plus) - int(loss_minus)) >> grad_shift)


def mean_cross_entropy(logits, labels) -> float:
    """The mean cross-entropy of float64 ``logits (B, C)`` (``logsumexp`` with the row maximum
    subtracted, in this order of NumPy operations)."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(z).sum(axis=1))
    picked = z[np.arange(len(z)), np.asarray(labels, dtype=np.int64)]
    return float(np.mean(log_norm - picked))


@dataclass(frozen=True)
class CrossEntropyHost:
    """Mean cross-entropy of integer logits and the quantized projected gradient."""

    classes: int
    logit_scale: float
    gain: float

    def logits(self, y) -> np.ndarray:
        """float64 logits ``(B, classes)`` of the layer outputs ``y`` ``(B, N >= classes)``."""
        return np.asarray(y, dtype=np.int64)[:, :self.classes].astype(np.float64) \
            * self.logit_scale

    def loss(self, y, labels) -> float:
        return mean_cross_entropy(self.logits(y), labels)

    def gradient(self, loss_plus: float, loss_minus: float) -> int:
        return saturate_gradient(round((loss_plus - loss_minus) * self.gain))

    def to_dict(self) -> dict:
        return {"classes": self.classes, "logit_scale": self.logit_scale, "gain": self.gain}
