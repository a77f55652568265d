"""SoftmaxUnit (hw/nonlinear/softmax.py) in Amaranth's simulator against
``zoforge.golden.finetune.integer_ops.int_softmax``, value by value: random rows of random
lengths with random masks, the corners (all but one value masked, none masked, all masked,
both ends of the input range, values past the clamp, rows of length 1 and ``max_len``),
several rows back to back, random idle cycles on the input and back-pressure on the output;
the cycle model :func:`softmax_cycles`; a planted bug the comparison sees; the constants'
widths and refusals; lint. The golden itself is pinned to a second derivation in plain
Python integers (:func:`reference_softmax`)."""
import math
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from amaranth.back import verilog

from zoforge.errors import ConfigError
from zoforge.golden.finetune.integer_ops import (EXP_COEFFS, MAX_SCALE, MIN_SCALE,
                                                 SoftmaxParams, int_softmax)
from zoforge.hw.export import to_verilog
from zoforge.hw.nonlinear.softmax import (EXP_LATENCY, LEVELS, OUT_LATENCY, SoftmaxUnit,
                                          SoftmaxWidths, div_cycles, output_layout,
                                          softmax_cycles, softmax_registers)
from zoforge.sim.lint import lint_verilog
from stream_bench import run_stream

LANES, MAX_LEN = 4, 12
Q32 = (-2 ** 31, 2 ** 31 - 1)                   # the default unit's int32 inputs
#: The finest and coarsest scales the golden makes constants for, and MiniLM's scores'.
SCALES = [MIN_SCALE, 1.5e-4, MAX_SCALE]


def reference_softmax(row: list[int], keep: list[bool], scale: float,
                      levels: int = LEVELS) -> list[int]:
    """The integer softmax of one row derived again in Python integers, from the scale:
    the constants from their real definitions (exact rationals of the float coefficients),
    z as the number of whole ln2's in ``top - q`` capped at 15 (the capped value's
    remainder 0), floor divisions by powers of two."""
    s = Fraction(scale)
    a, b, c = (Fraction(v) for v in EXP_COEFFS)
    ln2 = math.floor(Fraction(math.log(2)) / s)
    b_i, c_i = math.floor(b / (a * s)), math.floor(c / (a * s * s))
    k = max(0, c_i.bit_length() - 15)
    kept = [v for v, on in zip(row, keep) if on]
    if not kept:
        return [0] * len(row)
    top = max(kept)
    es = []
    for v, on in zip(row, keep):
        if not on:
            es.append(0)
            continue
        gap = top - v
        z, rem = (15, 0) if gap >= 15 * ln2 else divmod(gap, ln2)
        es.append((c_i - rem * (b_i - rem)) // 2 ** (k + z))
    total = sum(es)
    recip = levels * 2 ** 30 // total
    return [(e * recip + 2 ** 29) // 2 ** 30 for e in es]


def golden(row, keep, p, levels=LEVELS):
    return int_softmax(torch.tensor(row, dtype=torch.int64), torch.tensor(keep), p,
                       levels).tolist()


def corner_rows(p: SoftmaxParams, max_len: int, lo: int, hi: int, rng) -> list:
    """(row, keep) pairs: all but one masked, none masked, all masked, both input ends,
    values past the clamp and at its edge, length 1 and max_len."""
    L = p.ln2
    n = max_len
    rows = [
        ([int(v) for v in rng.integers(lo, hi + 1, n)], [False] * (n - 1) + [True]),
        ([int(v) for v in rng.integers(lo, hi + 1, n)], [True] * n),
        ([int(v) for v in rng.integers(lo, hi + 1, n)], [False] * n),
        ([hi] + [lo] * (n - 1), [True] * n),
        ([lo] * n, [True] * n),
        ([hi] * n, [True] * n),
        ([lo, hi] * (n // 2) + [0] * (n % 2), [True, False] * (n // 2) + [True] * (n % 2)),
        ([int(rng.integers(lo, hi + 1))], [True]),
        ([int(rng.integers(lo, hi + 1))], [False]),
    ]
    edge = [0, -L, -2 * L, -15 * L, -15 * L - 1, -15 * L + 1, 1 - L, -16 * L, 5, 4]
    edge = [max(lo, min(hi, v)) for v in edge]
    rows.append(((edge * n)[:n], [True] * n))
    return rows


def random_rows(count: int, max_len: int, lo: int, hi: int, rng, spread: int | None = None):
    """``count`` rows of random lengths 1..max_len, random values (within ``spread`` of a
    random centre, so the exponentials are not all 0), random masks."""
    rows = []
    for _ in range(count):
        n = int(rng.integers(1, max_len + 1))
        if spread is None:
            row = rng.integers(lo, hi + 1, n)
        else:
            centre = int(rng.integers(lo + spread, hi - spread + 1))
            row = centre + rng.integers(-spread, spread + 1, n)
        keep = rng.random(n) < rng.choice([0.5, 0.9, 1.0])
        rows.append(([int(v) for v in row], [bool(k) for k in keep]))
    return rows


def simulate(rows, p: SoftmaxParams, lanes: int = LANES, max_len: int = MAX_LEN,
             idle: float = 0.3, stall: float = 0.4, seed: int = 0,
             min_scale: float = MIN_SCALE, q_bits: int = 32, levels: int = LEVELS,
             registers: dict | None = None, hold: int = 0, narrow: bool | None = None):
    """The rows through the unit (each ``ceil(len / lanes)`` beats, padded lanes masked),
    random input idling and output back-pressure (``hold`` cycles of o.ready low first);
    returns each row's outputs (its length),
    the output beats' ``last`` flags, and the cycles from the first input transfer to the
    last output transfer, both counted."""
    dut = SoftmaxUnit(lanes, max_len, min_scale=min_scale, levels=levels, q_bits=q_bits,
                      narrow_multipliers=narrow)
    beats = []
    for row, keep in rows:
        n = -(-len(row) // lanes)
        qs = list(row) + [0] * (n * lanes - len(row))
        ks = list(keep) + [False] * (n * lanes - len(row))
        for j in range(n):
            bits = sum(1 << l for l in range(lanes) if ks[j * lanes + l])
            beats.append({"q": qs[j * lanes:(j + 1) * lanes], "keep": bits,
                          "last": int(j == n - 1)})
    per_row = 4 * dut.max_beats + EXP_LATENCY + div_cycles(levels) + OUT_LATENCY + 20
    run = run_stream(dut, beats,
                     registers if registers is not None else softmax_registers(p, min_scale),
                     output_layout(lanes, levels), "p", lanes, seed, idle, stall, hold,
                     hold + len(rows) * per_row * (3 if idle or stall else 1) + 100)
    out = run.out
    assert len(out) == len(beats), f"the unit gave {len(out)} of {len(beats)} beats"
    got, at = [], 0
    for row, _ in rows:
        n = -(-len(row) // lanes)
        got.append(sum(out[at:at + n], [])[:len(row)])
        at += n
    first_in, last_out = run.accepted[0], run.delivered[-1]
    return got, run.lasts, last_out - first_in + 1


def check(rows, p, **kwargs):
    got, lasts, _ = simulate(rows, p, **kwargs)
    levels = kwargs.get("levels", LEVELS)
    for (row, keep), values in zip(rows, got):
        assert values == golden(row, keep, p, levels), (row, keep)
    lanes = kwargs.get("lanes", LANES)
    want_lasts = sum(([0] * (-(-len(r) // lanes) - 1) + [1] for r, _ in rows), [])
    assert lasts == want_lasts
    return got


# -- the golden pinned ---------------------------------------------------------------------------

@pytest.mark.parametrize("scale", SCALES + [1e-3])
def test_golden_equals_a_second_derivation_in_plain_ints(scale):
    p = SoftmaxParams.of(scale)
    rng = np.random.default_rng(1)
    rows = corner_rows(p, 9, *Q32, rng) + random_rows(6, 9, *Q32, rng, spread=20 * p.ln2)
    for row, keep in rows:
        assert golden(row, keep, p) == reference_softmax(row, keep, scale), (row, keep)
    # the reference sees what the golden sees: one kept value takes it all, none gives 0
    assert golden([3, 9], [True, False], p) == [127, 0]
    assert golden([3, 9], [False, False], p) == [0, 0]


# -- the unit against the golden -----------------------------------------------------------------

@pytest.mark.parametrize("scale", SCALES)
def test_equals_int_softmax_under_backpressure_and_idle(scale):
    """Corner rows and random rows back to back, random input idle, 40 % output stall."""
    p = SoftmaxParams.of(scale)
    rng = np.random.default_rng(int(scale * 2 ** 30) % 1000)
    rows = corner_rows(p, MAX_LEN, *Q32, rng)
    rows += random_rows(4, MAX_LEN, *Q32, rng, spread=12 * p.ln2)
    order = rng.permutation(len(rows))
    rows = [rows[k] for k in order]
    got = check(rows, p, seed=int(order[0]))
    assert max(max(g) for g in got) == LEVELS and any(0 < v < LEVELS for g in got for v in g)


def test_int16_scores_one_lane_and_lanes_that_do_not_divide_max_len():
    """A unit of q_bits 16 (the host attention's int16 scores) and 1 lane; 3 lanes with
    max_len 7 (3 beats, the last with one lane)."""
    p = SoftmaxParams.of(1e-3)
    rng = np.random.default_rng(5)
    lo, hi = -2 ** 15, 2 ** 15 - 1
    rows = corner_rows(p, 5, lo, hi, rng)[:4] + random_rows(2, 5, lo, hi, rng, 8 * p.ln2)
    check(rows, p, lanes=1, max_len=5, q_bits=16, seed=1)
    rows = corner_rows(p, 7, lo, hi, rng)[::3] + random_rows(2, 7, lo, hi, rng, 8 * p.ln2)
    check(rows, p, lanes=3, max_len=7, seed=2)


def test_a_long_output_stall_holds_the_rows():
    """``o.ready`` low for 300 cycles while 9 rows are sent (more than the unit's slots and
    output buffer hold); released, every row comes out, in order, the golden's."""
    p = SoftmaxParams.of(1e-3)
    rng = np.random.default_rng(8)
    rows = random_rows(9, MAX_LEN, -2 ** 20, 2 ** 20, rng, spread=10 * p.ln2)
    check(rows, p, idle=0, stall=0.2, hold=300, seed=8)


def test_a_planted_bug_is_seen():
    """The comparison fails on the unit given a wrong constant (``b`` an eighth of ``ln2``
    larger: the exponential's curve bent) and on a stream with its rows' outputs in another
    order: it can fail."""
    p = SoftmaxParams.of(1.5e-4)
    rng = np.random.default_rng(3)
    rows = random_rows(3, MAX_LEN, -2 ** 20, 2 ** 20, rng, spread=6 * p.ln2)
    wrong = dict(softmax_registers(p), b=p.b + p.ln2 // 8)
    with pytest.raises(AssertionError):
        check(rows, p, registers=wrong, idle=0, stall=0)
    got, _, _ = simulate(rows, p, idle=0, stall=0)
    assert [golden(r, k, p) for r, k in rows] == got
    assert [golden(r, k, p) for r, k in rows[::-1]] != got


@pytest.mark.parametrize("rows,length,lanes", [(1, 1, 4), (1, 12, 4), (3, 5, 2), (4, 12, 4),
                                               (2, 3, 1)])
def test_cycle_model_is_exact_without_backpressure(rows, length, lanes):
    p = SoftmaxParams.of(1.5e-4)
    rng = np.random.default_rng(length)
    batch = [([int(v) for v in rng.integers(-3000, 3000, length)],
              [bool(k) for k in rng.random(length) < 0.8]) for _ in range(rows)]
    got, _, cycles = simulate(batch, p, lanes=lanes, idle=0, stall=0)
    assert got == [golden(r, k, p) for r, k in batch]
    assert cycles == softmax_cycles(rows, length, lanes)
    assert softmax_cycles(0, length, lanes) == 0


def test_cycle_model_has_the_divider_and_the_passes_in_step():
    """Long rows go at a beat a cycle (the passes overlap); short rows at the divider's
    pace."""
    beats, divide = 16, div_cycles()
    long = softmax_cycles(101, 16 * 8, 8) - softmax_cycles(100, 16 * 8, 8)
    short = softmax_cycles(101, 8, 8) - softmax_cycles(100, 8, 8)
    assert long == beats > divide and short == divide


# -- constants and parameters --------------------------------------------------------------------

@pytest.mark.parametrize("scale", [MIN_SCALE, 1.5e-4, MAX_SCALE])
def test_constants_fit_at_both_ends_of_the_golden_scales(scale):
    p = SoftmaxParams.of(scale)
    values = softmax_registers(p)
    assert values == {"ln2": p.ln2, "b": p.b, "c": p.c, "shift": p.shift}
    w = SoftmaxWidths.of()
    assert (w.ln2, w.b, w.c, w.shift, w.n) == (24, 26, 50, 6, 28)


def test_constants_the_unit_cannot_hold_are_refused_in_one_line():
    fine = SoftmaxParams.of(1e-4)
    with pytest.raises(ConfigError, match=r"^softmax constant ln2 must be an integer with 0 "
                                          r"<= value < 2\^11 .*\(got 6931\)$"):
        softmax_registers(fine, min_scale=5e-4)
    p = SoftmaxParams.of(1e-3)
    bad = SoftmaxParams(p.scale, p.ln2, p.b, p.c, p.shift + 1)        # e(top) < 2^14
    with pytest.raises(ConfigError, match=r"^softmax constants must be made by "
                                          r"SoftmaxParams.of .*\(got ln2="):
        softmax_registers(bad)
    for error in (ConfigError, ):
        with pytest.raises(error, match="^lanes must be"):
            SoftmaxUnit(0)
    with pytest.raises(ConfigError, match="^levels must be an integer with 1 <= value <= 255"):
        SoftmaxUnit(2, levels=256)
    with pytest.raises(ConfigError, match="^min_scale must be"):
        SoftmaxUnit(2, min_scale=2.0 ** -30)


def test_a_unit_for_coarser_scales_is_narrower_and_exact():
    """A unit made for scales >= 2^-15 (MiniLM's scores: 1.5e-4 to 1.5e-3): rem (b - rem)
    one product of 18-bit operands; with narrow multipliers (an ECP5's) e R two."""
    w = SoftmaxWidths.of(2.0 ** -15)
    assert w.ln2 <= 17 and w.b <= 17
    p = SoftmaxParams.of(1.5e-4)
    rng = np.random.default_rng(9)
    rows = corner_rows(p, 8, -2 ** 20, 2 ** 20, rng)[:5]
    check(rows, p, max_len=8, min_scale=2.0 ** -15, idle=0.2, stall=0.2, seed=4, narrow=True)


def test_lint_clean():
    """``verilator --lint-only -Wall`` with the project's waivers (the ``nonlinear_*`` tops
    take the engine's four, no other)."""
    top = "nonlinear_softmax"
    result = lint_verilog(to_verilog(SoftmaxUnit(2, 6), top), top)
    assert result.clean, result


# -- slow ----------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("scale", [MIN_SCALE, 1.5e-4, 1.5e-3, MAX_SCALE])
def test_minilm_rows_of_128_on_8_lanes(scale):
    """Rows of MiniLM's 128 keys (and shorter, masked like padded sequences) on the 8-lane
    unit, with idle and back-pressure, then the cycle model at that size."""
    p = SoftmaxParams.of(scale)
    rng = np.random.default_rng(11)
    rows = corner_rows(p, 128, *Q32, rng)[:4] + random_rows(6, 128, *Q32, rng, 10 * p.ln2)
    for kept in (1, 57, 128):                      # padded sequences: the first keys kept
        row = [int(v) for v in rng.integers(-2 ** 19, 2 ** 19, 128)]
        rows.append((row, [True] * kept + [False] * (128 - kept)))
    check(rows, p, lanes=8, max_len=128, seed=7)
    batch = random_rows(5, 128, -3000, 3000, rng)
    batch = [(r + [0] * (128 - len(r)), k + [False] * (128 - len(k))) for r, k in batch]
    got, _, cycles = simulate(batch, p, lanes=8, max_len=128, idle=0, stall=0)
    assert got == [golden(r, k, p) for r, k in batch]
    assert cycles == softmax_cycles(5, 128, 8)


def test_a_row_longer_than_max_len_ends_at_max_beats():
    """A row of more than ``max_beats`` beats is two rows: its first ``max_beats`` beats,
    then the rest (each with its own max and sum; ``last`` on both ends)."""
    p = SoftmaxParams.of(1e-3)
    rng = np.random.default_rng(6)
    row = [int(v) for v in rng.integers(-4000, 4000, MAX_LEN + 2)]
    keep = [True] * len(row)
    got, lasts, _ = simulate([(row, keep)], p, idle=0.2, stall=0.2, seed=6)
    assert got[0] == golden(row[:MAX_LEN], keep[:MAX_LEN], p) + golden(row[MAX_LEN:],
                                                                       keep[MAX_LEN:], p)
    assert lasts == [0, 0, 1, 1]


@pytest.mark.parametrize("lanes", [1, 3])
def test_three_multiplier_blocks_a_lane_for_minilms_scores_on_an_ecp5(lanes):
    """A unit made for scales >= 2^-15: its rem (b - rem) (15 x 17 bits) is one
    PipelinedMultiplier whose operands fit an 18 x 18 block, and e R (15 x 23 bits) two on
    an ECP5 platform (R split at 17 bits), so three MULT18X18D a lane there."""
    text = verilog.convert(SoftmaxUnit(lanes, 8, min_scale=2.0 ** -15), name="top",
                           platform=SimpleNamespace(family="ecp5"))
    assert text.count("MULT18X18D") == 3 * lanes
