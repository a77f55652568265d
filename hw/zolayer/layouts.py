"""The host's data layouts on the ZO layer's streams (NumPy only; see :mod:`.layer`).

Input words carry one value per lane (``lanes = max(R, C)``, unused lanes zero); the host
packs matrices into words and unpacks the output beats with these functions, in the cocotb
testbench and in the job-server host alike.
"""
from __future__ import annotations

import numpy as np

__all__ = ["panel_words", "token_words", "branch_output", "branch_outputs", "master_output"]


def panel_words(matrix, rows: int, lanes: int, branch_lanes: int = 1) -> np.ndarray:
    """(K, N) -> words (panel outer, k inner), lane i = matrix[k, p*R + i]; with
    ``branch_lanes`` B > 1 (T of a layer with branches side by side) panels of F = R/B
    features and blocks of B k-steps, lane ``kk*F + f`` = matrix[kb*B + kk, p*F + f]."""
    k, n = matrix.shape
    features = rows // branch_lanes
    words = np.zeros((k * n // rows, lanes), dtype=np.int64)
    blocks = np.asarray(matrix).reshape(k // branch_lanes, branch_lanes, n // features,
                                        features)
    words[:, :rows] = blocks.transpose(2, 0, 1, 3).reshape(-1, rows)
    return words


def token_words(x, cols: int, lanes: int) -> np.ndarray:
    """(M, K) -> words (token tile outer, k inner), lane j = x[mt*C + j, k]."""
    m, k = x.shape
    words = np.zeros((m // cols * k, lanes), dtype=np.int64)
    words[:, :cols] = x.reshape(m // cols, cols, k).transpose(0, 2, 1).reshape(-1, cols)
    return words


def branch_output(out, m: int, n: int, rows: int, cols: int) -> np.ndarray:
    """Output beats (panel outer, token tile inner, feature row) -> Y (M, N)."""
    return branch_outputs(out, m, n, rows, cols)[0]


def branch_outputs(out, m: int, n: int, rows: int, cols: int,
                   branch_lanes: int = 1) -> np.ndarray:
    """Output beats of a branch job (panel outer, token tile inner, row ``b*F + f``: branch
    b, feature p*F + f, F = R / ``branch_lanes``) -> Y ``(branch_lanes, M, N)``."""
    features = rows // branch_lanes
    tiles = out[:, :cols].reshape(n // features, m // cols, branch_lanes, features, cols)
    return tiles.transpose(2, 1, 4, 0, 3).reshape(branch_lanes, m, n)


def master_output(out, n: int, rows: int, branch_lanes: int = 1) -> np.ndarray:
    """``read_master`` beats (:func:`panel_words` order) -> T (K_t, N)."""
    features = rows // branch_lanes
    blocks = out[:, :rows].reshape(n // features, -1, branch_lanes, features)
    return blocks.transpose(1, 2, 0, 3).reshape(-1, n)
