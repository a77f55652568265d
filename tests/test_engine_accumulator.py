"""The PE accumulators wrap at 32 bits in RTL, as ``golden.engine`` says (``gemm_int32``).

The engine's buffers stop at K = 2^15, where |sum| <= 2^29 can never leave the int32 range,
so the accumulator's own wrap-around is checked on the systolic array itself (Verilog of
``SystolicArray``, cocotb: ``zoforge.sim.benches.pe_accumulator``) with one tile of
K = 140 000 k-steps: random operands for the first and last steps, constant ones in between
(the simulator runs those on its own). The exact sums of the tile cross +2^31 and -2^31
(checked here with Python integers), and the drained results must equal the golden model's
wrapped ones, and also the wrap computed here by hand. One column stays in range as a
control. That run is CI's (``-m ci``: 140 000 cycles, ~30 CPU-s); by default the same
array with 18-bit accumulators (``acc_bits``, the width the engine sizes from its max_k)
crosses +2^17 and -2^17 in a tile of 56 k-steps, against the wrap at 18 bits by hand. The wrap of acc + bias at the end of the engine is tests/test_engine_corners.py's
(the job server, Verilator); its two jobs also run here through the cocotbext-axi backend on
every simulator.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

from test_engine_corners import CONFIG as CORNER_CONFIG
from test_engine_corners import overflow_job
from zoforge.golden.engine import gemm_int32
from zoforge.hw.export import to_verilog
from zoforge.hw.pe.array import SystolicArray
from zoforge.sim.cosim import run_cocotb
from zoforge.sim.engine_cosim import EngineCosim

ROWS, COLS = 3, 3
K = 140_000
EDGE = 200                      # random steps at each end
# row operands x [R] and column operands w [C] of the constant middle: products
# 16384 (crosses +2^31 after 131 072 steps), -16256 (crosses -2^31 after 132 105),
# 16129, and -128 / 127 / 1 / -1 (stay in range)
A_CONST = [-128, 127, 1]
B_CONST = [-128, 127, -1]


def wrap(value: int, bits: int = 32) -> int:
    """``value`` modulo 2^bits as a signed ``bits``-bit number."""
    return (value + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)


#: The default run's tile: 18-bit accumulators, K = 2 x 8 random steps + 40 constant ones
#: (16384 x 40 = 655 360 > 2^17 - 1 + 16 x 16 384 and -16256 x 40 < -2^17 - 16 x 16 384:
#: past both ends whatever the random steps; the control, 1 x -1, stays in range at seed 1).
NARROW = dict(acc_bits=18, k=56, edge=8)
WIDE = dict(acc_bits=32, k=K, edge=EDGE)


def tile(seed: int, k: int = K, edge: int = EDGE) -> tuple[np.ndarray, np.ndarray]:
    """X [R, k] and W [k, C] of the tile (int8): ``edge`` random steps at each end."""
    rng = np.random.default_rng(seed)
    x = np.empty((ROWS, k), np.int8)
    w = np.empty((k, COLS), np.int8)
    x[:, :] = np.array(A_CONST, np.int8)[:, None]
    w[:, :] = np.array(B_CONST, np.int8)[None, :]
    for part in (slice(0, edge), slice(k - edge, k)):
        x[:, part] = rng.integers(-128, 128, size=(ROWS, edge))
        w[part, :] = rng.integers(-128, 128, size=(edge, COLS))
    return x, w


def exact_sums(x: np.ndarray, w: np.ndarray) -> list[list[int]]:
    """Python-integer dot products (no wrap), computed column by column."""
    return [[int(np.dot(x[i].astype(np.int64), w[:, j].astype(np.int64)))
             for j in range(COLS)] for i in range(ROWS)]


def run_tile(acc_bits: int, simulator: str, x: np.ndarray, w: np.ndarray, edge: int
             ) -> np.ndarray:
    top = f"pe_array_{ROWS}x{COLS}" + ("" if acc_bits == 32 else f"_acc{acc_bits}")
    verilog = to_verilog(SystolicArray(ROWS, COLS, acc_bits=acc_bits), top)
    k = x.shape[1]
    folder = Path(tempfile.mkdtemp(prefix="zoforge-acc-"))
    np.savez(folder / "prefix.npz", a=x[:, :edge].T, b=w[:edge])
    np.savez(folder / "suffix.npz", a=x[:, k - edge:].T, b=w[k - edge:])
    args = {"rows": ROWS, "cols": COLS, "a_bits": 8, "b_bits": 8, "middle": k - 2 * edge,
            "a_const": A_CONST, "b_const": B_CONST}
    result = run_cocotb(verilog=verilog, toplevel=top,
                        test_module="zoforge.sim.benches.pe_accumulator", args=args,
                        simulator=simulator, data_dir=folder)
    assert result.passed, (result.failures, folder / "sim.log")
    assert result.results["steps"] == k
    return np.load(folder / "res.npy")


@pytest.mark.parametrize("tile_of", [NARROW, WIDE], ids=["acc18", "acc32"])
def test_the_tile_crosses_both_ends_of_its_accumulator(tile_of):
    bits = tile_of["acc_bits"]
    sums = exact_sums(*tile(1, tile_of["k"], tile_of["edge"]))
    flat = [s for row in sums for s in row]
    top, bottom = 2 ** (bits - 1) - 1, -2 ** (bits - 1)
    assert max(flat) > top and min(flat) < bottom
    assert sum(s > top for s in flat) >= 2                  # 16384 and 16129 per step
    assert any(bottom <= s <= top for s in flat)            # and a control in range
    # a K whose sums this width cannot hold exactly: K products of [-16256, 16384] need
    # 15 + bit_length(K) bits (beyond the documented exact K: 2^17 for int32)
    assert 15 + tile_of["k"].bit_length() > bits


@pytest.mark.parametrize("tile_of", [
    pytest.param(NARROW, id="acc18"),
    pytest.param(WIDE, id="acc32", marks=(pytest.mark.slow, pytest.mark.ci))])
def test_accumulators_wrap_like_the_golden_model(tile_of, simulator):
    bits, edge = tile_of["acc_bits"], tile_of["edge"]
    x, w = tile(1, tile_of["k"], edge)
    rtl = run_tile(bits, simulator, x, w, edge)
    # read out sign-extended to 32 bits: the sum wrapped at the accumulator's width
    by_hand = np.array([[wrap(s, bits) for s in row] for row in exact_sums(x, w)])
    if bits == 32:
        golden = gemm_int32(torch.from_numpy(x), torch.from_numpy(w)).numpy()
        np.testing.assert_array_equal(golden, by_hand)
    np.testing.assert_array_equal(rtl, by_hand)
    assert (rtl != np.array(exact_sums(x, w))).sum() >= 3     # wrapped results were seen


def test_acc_plus_bias_wraps_through_the_axi_bench(simulator):
    pairs = [overflow_job(raw) for raw in (True, False)]
    results, _ = EngineCosim(**CORNER_CONFIG, simulator=simulator).run([j for j, _ in pairs],
                                                                      backend="cocotb")
    for result, (_, expected) in zip(results, pairs):
        np.testing.assert_array_equal(result.output, expected)
