"""The host's data layouts on the ZO layer's streams (NumPy only; see :mod:`.layer`).

A beat of a stream has ``lanes = max(R, C)`` 32-bit lanes (lane l in bits ``[32l, 32l+32)``).
Weight-side words carry one value per lane (unused lanes zero); ``load_x`` beats are packed
bytes (:func:`token_words`, :func:`token_pack`). The host packs matrices into words and
unpacks the output beats with these functions, in the cocotb testbench and in the job-server
host alike; the hardware takes the packing from :func:`token_pack`.
"""
from __future__ import annotations

import numpy as np

__all__ = ["panel_words", "token_pack", "token_words", "branch_output", "master_output"]


def panel_words(matrix, rows: int, lanes: int) -> np.ndarray:
    """(K, F) -> words (panel outer, k inner), lane i = matrix[k, p*R + i]."""
    k, f = matrix.shape
    words = np.zeros((f // rows * k, lanes), dtype=np.int64)
    words[:, :rows] = matrix.reshape(k, f // rows, rows).transpose(1, 0, 2).reshape(-1, rows)
    return words


def token_pack(cols: int, lanes: int) -> int:
    """k-steps of C tokens per ``load_x`` beat: the bytes of a ``32 * lanes``-bit beat."""
    return (4 * lanes) // cols


def token_words(x, cols: int, lanes: int) -> np.ndarray:
    """(M, K) -> ``load_x`` beats (token tile outer, blocks of P = :func:`token_pack` k-steps
    inner): beat (mt, b) holds x[mt*C + j, b*P + kk] as the byte at bits ``8*(kk*C + j)``
    (int8 two's complement); k-steps past K and bits past P*C*8 are zero. Rows of ``lanes``
    32-bit lanes (uint32 values), M/C * ceil(K/P) of them."""
    m, k = x.shape
    pack = token_pack(cols, lanes)
    blocks = -(-k // pack)
    tiles = np.zeros((m // cols, blocks * pack, cols), dtype=np.uint8)
    tiles[:, :k] = np.asarray(x).reshape(m // cols, cols, k).transpose(0, 2, 1).astype(np.uint8)
    beats = np.zeros((m // cols * blocks, 4 * lanes), dtype=np.uint8)
    beats[:, :pack * cols] = tiles.reshape(-1, pack * cols)
    return beats.view("<u4").astype(np.int64)


def branch_output(out, m: int, n: int, rows: int, cols: int) -> np.ndarray:
    """Output beats (panel outer, token tile inner, feature row) -> Y (M, N)."""
    tiles = out[:, :cols].reshape(n // rows, m // cols, rows, cols)
    return tiles.transpose(1, 3, 0, 2).reshape(m, n)


def master_output(out, n: int, rows: int) -> np.ndarray:
    """``read_master`` beats (panel outer, k inner) -> T (K_t, N)."""
    return out[:, :rows].reshape(n // rows, -1, rows).transpose(1, 0, 2).reshape(-1, n)
