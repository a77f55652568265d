"""RTL corners of the engine's output stage: acc + bias wraps at 32 bits in both directions,
and the requantized result saturates at both ends with per-channel parameters.

The expected values are derived here with Python integers (independently of
``zoforge.golden.engine``), and the test checks that each corner is really reached (the sum
does leave the int32 range) before comparing the RTL with them.
"""
import numpy as np
import pytest

from zoforge.sim.engine_cosim import EngineCosim, EngineJob

CONFIG = dict(rows=3, cols=2, pack=2, max_m=32, max_k=32, max_n=32)   # tests/test_engine_jobserver.py's
K = 32
INT32 = 1 << 32


def wrap32(value: int) -> int:
    value %= INT32
    return value - INT32 if value >= INT32 // 2 else value


def requant(total: int, multiplier: int, shift: int) -> int:
    """clamp(floor((total * multiplier + 2^(shift-1)) / 2^shift), -128, 127)."""
    rounded = (total * multiplier + ((1 << shift) >> 1)) >> shift
    return max(-128, min(127, rounded))


def overflow_job(raw: bool) -> tuple[EngineJob, np.ndarray]:
    """Two rows, two columns: column 0 crosses +2^31 (wraps negative), column 1 crosses
    -2^31 (wraps positive); row 1 stays inside the range as a control."""
    x = np.array([[-128] * K, [1] * K], dtype=np.int8)
    w = np.stack([np.full(K, -128), np.full(K, 127)], axis=1).astype(np.int8)
    acc = [[K * 16384, K * -16256], [K * -128, K * 127]]          # exact dot products
    bias = np.array([2 ** 31 - 1000, -2 ** 31 + 1000], dtype=np.int64)
    sums = [[acc[i][j] + int(bias[j]) for j in range(2)] for i in range(2)]
    assert sums[0][0] > 2 ** 31 - 1 and sums[0][1] < -2 ** 31          # the corner is reached
    wrapped = [[wrap32(s) for s in row] for row in sums]
    assert wrapped[0][0] < 0 < wrapped[0][1]
    if raw:
        return EngineJob(x, w, bias), np.array(wrapped, dtype=np.int64)
    # per-channel: column 0 scales by 1/2^8, column 1 by 3/2^20; both ends saturate
    mult, shift = np.array([1, 3]), np.array([8, 20])
    expected = [[requant(wrapped[i][j], int(mult[j]), int(shift[j])) for j in range(2)]
                for i in range(2)]
    assert expected[0] == [-128, 127]                      # saturated at both ends
    return EngineJob(x, w, bias, mult, shift), np.array(expected, dtype=np.int64)


@pytest.mark.parametrize("raw", [True, False], ids=["raw-int32", "requantized"])
def test_acc_plus_bias_wraps_at_32_bits_in_both_directions(raw):
    job, expected = overflow_job(raw)
    np.testing.assert_array_equal(job.golden(), expected)      # the golden model agrees
    (result,), _ = EngineCosim(**CONFIG).run([job], backend="jobserver")
    np.testing.assert_array_equal(result.output, expected)
