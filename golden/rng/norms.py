"""The expected Gaussian norm every PeZO generator scales its values to (one definition)."""
from __future__ import annotations

import math

__all__ = ["expected_gaussian_norm"]


def expected_gaussian_norm(n: int) -> float:
    """``E||g||_2`` for g ~ N(0, I_n): ``sqrt(2) * Gamma((n+1)/2) / Gamma(n/2)``, through
    log-gamma (exact to double precision for any n >= 1)."""
    return math.sqrt(2.0) * math.exp(math.lgamma((n + 1) / 2) - math.lgamma(n / 2))
