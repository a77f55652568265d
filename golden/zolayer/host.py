"""The host's side of a ZO step (the ZCU102's ARM cores): loss and projected gradient.

Plain Python integers (no torch), so the co-simulation's testbench and the golden model
share this one definition:

* ``squared_error(y, target) = sum (y - target)^2`` (exact);
* ``projected_gradient(l_plus, l_minus, grad_shift)
  = clamp(floor((l_plus - l_minus) / 2^grad_shift), -2^15, 2^15 - 1)``: the projected
  gradient ``(l_plus - l_minus) / (2 eps)`` in a fixed-point scale the host chooses
  (``eps`` and the 2 are folded into ``grad_shift``), as the hardware's signed 16-bit g.
"""
from __future__ import annotations

import numpy as np

from zoforge.errors import check_int_range
from zoforge.golden.zolayer.config import Formats

__all__ = ["squared_error", "projected_gradient", "GRAD_SHIFT_MAX"]

GRAD_SHIFT_MAX = 127


def squared_error(y, target) -> int:
    """``sum (y - target)^2`` as an exact Python integer."""
    diff = (np.asarray(y, dtype=np.int64).reshape(-1)
            - np.asarray(target, dtype=np.int64).reshape(-1))
    return sum(int(v) * int(v) for v in diff)


def projected_gradient(loss_plus: int, loss_minus: int, grad_shift: int) -> int:
    check_int_range("--grad-shift", grad_shift, 0, GRAD_SHIFT_MAX)
    g = (int(loss_plus) - int(loss_minus)) >> grad_shift
    half = 1 << (Formats.GRAD_BITS - 1)
    return max(-half, min(half - 1, g))
