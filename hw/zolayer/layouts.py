"""The host's data layouts on the ZO layer's streams (NumPy only; see :mod:`.layer`).

A beat of a stream has ``lanes = max(R, C)`` 32-bit lanes (lane l in bits ``[32l, 32l+32)``).
Weight-side words carry one value per lane (unused lanes zero); ``load_x`` beats are packed
bytes (:func:`token_words`, :func:`token_pack`). The host packs matrices into words and
unpacks the output beats with these functions, in the cocotb testbench and in the job-server
host alike; the hardware takes the packing from :func:`token_pack`.
"""
from __future__ import annotations

import numpy as np

__all__ = ["panel_words", "token_pack", "token_words", "branch_output", "branch_outputs",
           "master_output"]


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
