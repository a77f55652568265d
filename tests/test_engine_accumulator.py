"""The PE accumulators wrap at 32 bits in RTL, as ``golden.engine`` says (``gemm_int32``).

The engine's buffers stop at K = 2^15, where |sum| <= 2^29 can never leave the int32 range,
so the accumulator's own wrap-around is checked on the systolic array itself (Verilog of
``SystolicArray``, cocotb: ``zoforge.sim.benches.pe_accumulator``) with one tile of
K = 140 000 k-steps: random operands for the first and last steps, constant ones in between
(the simulator runs those on its own). The exact sums of the tile cross +2^31 and -2^31
(checked here with Python integers), and the drained results must equal the golden model's
wrapped ones, and also the wrap computed here by hand. One column stays in range as a
control. The wrap of acc + bias at the end of the engine is tests/test_engine_corners.py's
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


def wrap32(value: int) -> int:
    return (value + 2 ** 31) % 2 ** 32 - 2 ** 31


def tile(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """X [R, K] and W [K, C] of the tile (int8)."""
    rng = np.random.default_rng(seed)
    x = np.empty((ROWS, K), np.int8)
    w = np.empty((K, COLS), np.int8)
    x[:, :] = np.array(A_CONST, np.int8)[:, None]
    w[:, :] = np.array(B_CONST, np.int8)[None, :]
    for part in (slice(0, EDGE), slice(K - EDGE, K)):
        x[:, part] = rng.integers(-128, 128, size=(ROWS, EDGE))
        w[part, :] = rng.integers(-128, 128, size=(EDGE, COLS))
    return x, w


def exact_sums(x: np.ndarray, w: np.ndarray) -> list[list[int]]:
    """Python-integer dot products (no wrap), computed column by column."""
    return [[int(np.dot(x[i].astype(np.int64), w[:, j].astype(np.int64)))
             for j in range(COLS)] for i in range(ROWS)]


@pytest.fixture(scope="module")
def array_verilog() -> str:
    return to_verilog(SystolicArray(ROWS, COLS), f"pe_array_{ROWS}x{COLS}")


def run_tile(verilog: str, simulator: str, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    folder = Path(tempfile.mkdtemp(prefix="zoforge-acc-"))
    np.savez(folder / "prefix.npz", a=x[:, :EDGE].T, b=w[:EDGE])
    np.savez(folder / "suffix.npz", a=x[:, K - EDGE:].T, b=w[K - EDGE:])
    args = {"rows": ROWS, "cols": COLS, "a_bits": 8, "b_bits": 8, "middle": K - 2 * EDGE,
            "a_const": A_CONST, "b_const": B_CONST}
    result = run_cocotb(verilog=verilog, toplevel=f"pe_array_{ROWS}x{COLS}",
                        test_module="zoforge.sim.benches.pe_accumulator", args=args,
                        simulator=simulator, data_dir=folder)
    assert result.passed, (result.failures, folder / "sim.log")
    assert result.results["steps"] == K
    return np.load(folder / "res.npy")


def test_the_tile_crosses_both_ends_of_int32():
    sums = exact_sums(*tile(seed=1))
    flat = [s for row in sums for s in row]
    assert max(flat) > 2 ** 31 - 1 and min(flat) < -2 ** 31
    assert sum(s > 2 ** 31 - 1 for s in flat) >= 2        # 16384 and 16129 per step
    assert any(-2 ** 31 <= s < 2 ** 31 for s in flat)     # and a control in range
    assert K > 2 ** 17                                      # beyond the documented exact K


def test_accumulators_wrap_at_32_bits_like_the_golden_model(array_verilog, simulator):
    x, w = tile(seed=1)
    rtl = run_tile(array_verilog, simulator, x, w)
    golden = gemm_int32(torch.from_numpy(x), torch.from_numpy(w)).numpy()
    by_hand = np.array([[wrap32(s) for s in row] for row in exact_sums(x, w)])
    np.testing.assert_array_equal(golden, by_hand)
    np.testing.assert_array_equal(rtl, golden)
    assert (rtl != np.array(exact_sums(x, w))).sum() >= 3     # wrapped results were seen


def test_acc_plus_bias_wraps_through_the_axi_bench(simulator):
    pairs = [overflow_job(raw) for raw in (True, False)]
    results, _ = EngineCosim(**CORNER_CONFIG, simulator=simulator).run([j for j, _ in pairs],
                                                                      backend="cocotb")
    for result, (_, expected) in zip(results, pairs):
        np.testing.assert_array_equal(result.output, expected)
