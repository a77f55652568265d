"""The host's data layouts on the ZO layer's streams (NumPy only; see :mod:`.layer`).

Input words carry one value per lane (``lanes = max(R, C)``, unused lanes zero); the host
packs matrices into words and unpacks the output beats with these functions, in the cocotb
testbench and in the job-server host alike.
"""
from __future__ import annotations

import numpy as np

__all__ = ["panel_words", "token_words", "branch_output", "master_output"]


def panel_words(matrix, rows: int, lanes: int) -> np.ndarray:
    """(K, F) -> words (panel outer, k inner), lane i = matrix[k, p*R + i]."""
    k, f = matrix.shape
    words = np.zeros((f // rows * k, lanes), dtype=np.int64)
    words[:, :rows] = matrix.reshape(k, f // rows, rows).transpose(1, 0, 2).reshape(-1, rows)
    return words


def token_words(x, cols: int, lanes: int) -> np.ndarray:
    """(M, K) -> words (token tile outer, k inner), lane j = x[mt*C + j, k]."""
    m, k = x.shape
    words = np.zeros((m // cols * k, lanes), dtype=np.int64)
    words[:, :cols] = x.reshape(m // cols, cols, k).transpose(0, 2, 1).reshape(-1, cols)
    return words


def branch_output(out, m: int, n: int, rows: int, cols: int) -> np.ndarray:
    """Output beats (panel outer, token tile inner, feature row) -> Y (M, N)."""
    tiles = out[:, :cols].reshape(n // rows, m // cols, rows, cols)
    return tiles.transpose(1, 3, 0, 2).reshape(m, n)


def master_output(out, n: int, rows: int) -> np.ndarray:
    """``read_master`` beats (panel outer, k inner) -> T (K_t, N)."""
    return out[:, :rows].reshape(n // rows, -1, rows).transpose(1, 0, 2).reshape(-1, n)
