"""The scores reorder buffer (hw/link/reorder.py) against its golden model
(:mod:`zoforge.golden.link`), value by value, in Amaranth's simulator: many shapes (R, C,
lanes; M not a multiple of R, L not a multiple of C or lanes, L < lanes, L = max_len,
lanes <, = and > C, one memory), jobs back to back through both banks, random idle cycles
on the input and back-pressure on the output, the engine's padding (rows past M, keys past
L) random; the output's beat held while not taken; both banks full stalling the input;
``tlast`` checked; the cycle model; the golden against a second derivation and against the
engine's and the softmax unit's hosts' formats; the configuration's bounds; lint; one
Verilog run under Icarus. Slow: MiniLM's 128 x 128 jobs on a 64 x 8 engine into 10 lanes,
a random sweep, MiniLM's lint."""
from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from amaranth.sim import Simulator

from zoforge.errors import ConfigError
from zoforge.golden.link import (engine_order, in_beats, out_beats, reorder_scores,
                                 softmax_order)
from zoforge.hw.export import to_verilog
from zoforge.hw.link.config import ReorderConfig
from zoforge.hw.link.cycles import reorder_job_cycles, reorder_schedule
from zoforge.hw.link.reorder import ScoresReorder
from zoforge.hw.softmax.config import SoftmaxConfig
from zoforge.sim.lint import lint_verilog

from axis_sim import axis_sink, stable_while_stalled

#: (R, C, lanes, max_rows, max_len) and the jobs (M, L) run back to back on each.
SHAPES = [
    ((4, 3, 5, 10, 13), [(7, 13), (10, 4), (1, 1), (5, 9)]),      # L = max_len, L < lanes
    ((2, 8, 10, 6, 24), [(6, 24), (3, 7), (5, 17)]),              # MiniLM's C and lanes
    ((3, 4, 2, 7, 9), [(7, 9), (2, 3), (4, 8)]),                  # lanes < C
    ((1, 1, 1, 3, 4), [(3, 4), (1, 1), (2, 3)]),                  # one memory, R = 1
    ((5, 6, 6, 5, 12), [(5, 12), (4, 6), (5, 1)]),                # lanes = C
    ((4, 5, 16, 9, 20), [(9, 20), (8, 16), (3, 17)]),             # lanes = P
    ((2, 16, 3, 4, 40), [(4, 40), (1, 33), (3, 16)]),             # C = P > lanes
    ((3, 2, 3, 1, 5), [(1, 5), (1, 2), (1, 5)]),                  # max_rows 1
]
IDS = ["x".join(map(str, shape)) for shape, _ in SHAPES]
INT32 = (-2 ** 31, 2 ** 31)


# -- a second derivation of both streams ---------------------------------------------------

def padded(rng, scores, rows, cols):
    """``scores`` in a matrix of whole tiles, the padding random (the engine's is not 0)."""
    m, length = scores.shape
    full = rng.integers(*INT32, (-(-m // rows) * rows, -(-length // cols) * cols),
                        dtype=np.int64).astype(np.int32)
    full[:m, :length] = scores
    return full


def engine_stream(full, cols):
    """The engine's raw beats by reshapes: column panels outer, then the tiles' rows."""
    rows_total = full.shape[0]
    return full.reshape(rows_total, -1, cols).transpose(1, 0, 2).reshape(-1, cols)


def softmax_stream(scores, lanes):
    """The softmax unit's beats lane by lane in Python: row after row, 0 past L."""
    m, length = scores.shape
    beats = []
    for i in range(m):
        for j in range(-(-length // lanes)):
            beats.append([int(scores[i, j * lanes + t]) if j * lanes + t < length else 0
                          for t in range(lanes)])
    return np.array(beats, np.int32).reshape(-1, lanes)


def make_job(rng, m, length, rows, cols):
    scores = rng.integers(*INT32, (m, length), dtype=np.int64).astype(np.int32)
    return scores, engine_stream(padded(rng, scores, rows, cols), cols)


def test_golden_against_a_second_derivation():
    rng = np.random.default_rng(1)
    for _ in range(300):
        rows, cols, lanes = (int(v) for v in rng.integers(1, 17, 3))
        m, length = (int(v) for v in rng.integers(1, 40, 2))
        scores, stream = make_job(rng, m, length, rows, cols)
        expected = softmax_stream(scores, lanes)
        got = reorder_scores(stream, m, length, rows, cols, lanes)
        assert got.dtype == np.int32 and np.array_equal(got, expected)
        pad = padded(rng, scores, rows, cols)
        assert np.array_equal(engine_order(scores, rows, cols, pad), engine_stream(pad, cols))
        assert np.array_equal(softmax_order(scores, lanes), expected)
        assert stream.shape == (in_beats(m, length, rows, cols), cols)
        assert expected.shape == (out_beats(m, length, lanes), lanes)


def test_formats_are_the_engine_hosts_and_the_softmax_hosts():
    """The input is what the engine's host unpacks as a raw job's output, the output the
    frame the softmax unit's host sends (sim/engine_cosim.py, sim/softmax_cosim.py)."""
    # the hosts import torch (~3 CPU-s alone): only this test pays it
    from zoforge.sim.engine_cosim import unpack_output
    from zoforge.sim.softmax_cosim import SoftmaxJob, program_inputs

    rng = np.random.default_rng(6)
    for rows, cols, lanes, m, length in [(4, 3, 5, 7, 13), (64, 8, 10, 128, 128),
                                         (2, 8, 10, 5, 3), (3, 16, 7, 4, 33)]:
        scores, stream = make_job(rng, m, length, rows, cols)
        words = stream.view(np.uint32).reshape(-1)
        assert np.array_equal(unpack_output(words, m, length, rows, cols, raw=True), scores)
        config = SoftmaxConfig(lanes=lanes, max_len=max(length, 8))
        _, data = program_inputs([SoftmaxJob(scores.astype(np.int64), np.ones(length, bool),
                                             {})], config)
        out = reorder_scores(stream, m, length, rows, cols, lanes)
        assert np.array_equal(out.view(np.uint32).reshape(-1), data["job0_frame"])


def test_golden_refuses_a_stream_of_another_shape():
    with pytest.raises(ConfigError) as error:
        reorder_scores(np.zeros((5, 3), np.int32), 4, 7, 2, 3, 4)
    assert error.value.parameter == "beats"
    with pytest.raises(ConfigError):
        reorder_scores(np.zeros((0, 3), np.int32), 0, 7, 2, 3, 4)


def test_configuration_bounds_and_sizes():
    config = ReorderConfig()                              # MiniLM's link
    assert (config.rows, config.cols, config.lanes, config.max_rows, config.max_len) == \
        (64, 8, 10, 128, 128)
    # 16 memories of two banks of 128 rows x 8 words: 2 x 64 KiB, 32 BRAM36 at 1K x 32
    assert (config.memories, config.depth) == (16, 2048)
    assert config.memories * config.depth * 4 == 2 * 128 * 128 * 4
    assert (config.in_beats(128, 128), config.out_beats(128, 128)) == (2048, 1664)
    for field, value in (("rows", 0), ("rows", 65), ("cols", 0), ("lanes", 65),
                         ("max_rows", 0), ("max_rows", 4097), ("max_len", 1025)):
        with pytest.raises(ConfigError) as error:
            ReorderConfig(**{field: value})
        assert error.value.parameter == field and "\n" not in str(error.value)


# -- the bench ------------------------------------------------------------------------------

def run(config, streams, jobs, *, seed=0, idle=0.0, stall=0.0, hold=0, lasts=None,
        limit=200_000):
    """``jobs`` through a :class:`ScoresReorder`: each start as soon as ``job.ready``, then
    its input beats ``streams[k]`` (idle cycles before each with probability ``idle``;
    ``tlast`` on each job's last beat, or where ``lasts[k]`` says); ``m_axis.tready`` low
    for ``hold`` cycles, then low with probability ``stall``. Returns the record: each
    output transfer's lanes, ``tlast`` and cycle, each input transfer's cycle, the starts'
    cycles, ``job.error`` in each start's cycle (the job before's) and at the end, and each
    cycle's output (valid, ready, data, last)."""
    rng = np.random.default_rng(seed)
    dut = ScoresReorder(config)
    total = sum(config.out_beats(m, length) for m, length in jobs)
    receive, out = axis_sink(dut.m_axis, total, rng, stall=stall, hold=hold, limit=limit)
    rec = {"in_cycles": [], "starts": [], "errors": []}

    async def send(ctx):
        cycle = 0
        for k, ((m, length), beats) in enumerate(zip(jobs, streams)):
            ctx.set(dut.job.m, m)
            ctx.set(dut.job.length, length)
            ctx.set(dut.job.start, 1)
            while True:
                _, _, ready, error = await ctx.tick().sample(dut.job.ready, dut.job.error)
                cycle += 1
                if ready:
                    break
            rec["starts"].append(cycle - 1)
            if k:
                rec["errors"].append(int(error))
            ctx.set(dut.job.start, 0)
            marks = lasts[k] if lasts is not None else [b == len(beats) - 1
                                                        for b in range(len(beats))]
            for beat, last in zip(beats, marks):
                while rng.random() < idle:
                    await ctx.tick()
                    cycle += 1
                ctx.set(dut.s_axis.tdata, int.from_bytes(beat.astype("<i4").tobytes(),
                                                         "little"))
                ctx.set(dut.s_axis.tlast, int(last))
                ctx.set(dut.s_axis.tvalid, 1)
                while True:
                    _, _, ready = await ctx.tick().sample(dut.s_axis.tready)
                    cycle += 1
                    if ready:
                        break
                rec["in_cycles"].append(cycle - 1)
                ctx.set(dut.s_axis.tvalid, 0)
        _, _, error = await ctx.tick().sample(dut.job.error)
        rec["errors"].append(int(error))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(send, background=True)
    sim.add_testbench(receive)
    sim.run()
    return dict(rec, out=[np.frombuffer(beat.to_bytes(4 * config.lanes, "little"), "<i4")
                          for beat in out["beats"]],
                lasts=out["lasts"], out_cycles=out["cycles"], trace=out["trace"])


def check(config, jobs, seed, **options):
    """Run ``jobs`` of random scores and compare every output beat with the golden model
    and the second derivation; ``tlast`` on each job's last beat alone; no error."""
    rng = np.random.default_rng(seed)
    made = [make_job(rng, m, length, config.rows, config.cols) for m, length in jobs]
    rec = run(config, [stream for _, stream in made], jobs, seed=seed, **options)
    golden = np.concatenate([reorder_scores(stream, m, length, config.rows, config.cols,
                                            config.lanes)
                             for (m, length), (_, stream) in zip(jobs, made)])
    derived = np.concatenate([softmax_stream(scores, config.lanes) for scores, _ in made])
    assert len(rec["out"]) == len(golden), "the output stopped short"
    got = np.array(rec["out"], np.int32)
    assert np.array_equal(golden, derived)
    bad = np.argwhere(got != golden)
    assert not bad.size, f"beat, lane {bad[0]}: {got[tuple(bad[0])]} != {golden[tuple(bad[0])]}"
    ends = np.cumsum([config.out_beats(m, length) for m, length in jobs]) - 1
    assert [i for i, last in enumerate(rec["lasts"]) if last] == list(ends)
    assert rec["errors"] == [0] * len(jobs)
    return rec


# -- in Amaranth's simulator ---------------------------------------------------------------

@pytest.mark.parametrize("shape, jobs", SHAPES, ids=IDS)
def test_values_under_idle_and_back_pressure(shape, jobs):
    config = ReorderConfig(**dict(zip(("rows", "cols", "lanes", "max_rows", "max_len"),
                                      shape)))
    rec = check(config, jobs, seed=sum(shape), idle=0.3, stall=0.4)
    assert stable_while_stalled(rec["trace"])


@pytest.mark.parametrize("shape, jobs", SHAPES, ids=IDS)
def test_cycles_equal_the_model(shape, jobs):
    """Streams always ready: every transfer in the cycle the model gives, and job k+1's
    input overlapping job k's output (the two banks)."""
    config = ReorderConfig(**dict(zip(("rows", "cols", "lanes", "max_rows", "max_len"),
                                      shape)))
    rec = check(config, jobs, seed=7)
    model = reorder_schedule(config, jobs)
    assert rec["starts"] == [job.start for job in model]
    assert rec["in_cycles"] == [c for job in model
                                for c in range(job.first_in, job.last_in + 1)]
    assert rec["out_cycles"] == [c for job in model
                                 for c in range(job.first_out, job.last_out + 1)]
    assert model[0].last_out == reorder_job_cycles(config, *jobs[0])
    assert model[0].last_out == config.in_beats(*jobs[0]) + config.out_beats(*jobs[0]) + 1
    assert model[1].first_in < model[0].last_out           # written while the other is read


def test_both_banks_full_stall_the_input():
    """Output not ready: two jobs' input taken, the third's not until the first job's rows
    are read; then everything, unchanged, the beat on the output held meanwhile."""
    config = ReorderConfig(rows=2, cols=3, lanes=4, max_rows=5, max_len=7)
    jobs = [(5, 7), (3, 4), (4, 6), (2, 7)]
    hold = 200
    rec = check(config, jobs, seed=3, hold=hold, idle=0.1)
    two = config.in_beats(*jobs[0]) + config.in_beats(*jobs[1])
    taken_early = [c for c in rec["in_cycles"] if c < hold]
    assert len(taken_early) == two
    # the first job's bank is free after its last read, when its beat before the last
    # leaves (the last then waits in the output register)
    before_last = rec["out_cycles"][config.out_beats(*jobs[0]) - 2]
    assert rec["in_cycles"][two] > before_last >= hold
    assert all(valid for valid, *_ in rec["trace"][hold - 50:hold])    # held, not dropped
    assert stable_while_stalled(rec["trace"])


def test_a_misplaced_tlast_is_flagged():
    config = ReorderConfig(rows=2, cols=3, lanes=4, max_rows=5, max_len=7)
    jobs = [(3, 5)] * 4
    rng = np.random.default_rng(5)
    made = [make_job(rng, m, length, 2, 3) for m, length in jobs]
    beats = config.in_beats(3, 5)
    lasts = [[b == beats - 1 for b in range(beats)],
             [False] * beats,                                 # none on the last beat
             [b == beats - 1 for b in range(beats)],
             [b in (2, beats - 1) for b in range(beats)]]     # one more, early
    rec = run(config, [s for _, s in made], jobs, lasts=lasts)
    assert rec["errors"] == [0, 1, 0, 1]                     # cleared by the next start
    got = np.array(rec["out"], np.int32)                     # the values are unaffected
    assert np.array_equal(got, np.concatenate([softmax_stream(s, 4) for s, _ in made]))


# -- Verilog --------------------------------------------------------------------------------

def lint(config: ReorderConfig):
    top = f"link_reorder_{config.cols}x{config.lanes}"
    return lint_verilog(to_verilog(ScoresReorder(config), top), top)


def test_lint_clean():
    """``verilator --lint-only -Wall`` with the project's waivers (the ``link_*`` tops take
    the engine's WIDTHEXPAND, WIDTHTRUNC and UNUSEDSIGNAL): a small build, the smallest."""
    for config in (ReorderConfig(rows=4, cols=3, lanes=5, max_rows=10, max_len=13),
                   ReorderConfig(rows=1, cols=1, lanes=1, max_rows=1, max_len=1)):
        result = lint(config)
        assert result.clean, str(result)


@pytest.mark.slow          # 32k lines of memory initialisers (~7 s): CI's -m ci runs it
@pytest.mark.ci
def test_lint_clean_minilm():
    result = lint(ReorderConfig())
    assert result.clean, str(result)


BENCH = """
module bench;
  reg clk = 0, rst = 1, start = 0, tvalid = 0, tlast = 0, oready = 0;
  reg [%(mb)d:0] m = 0; reg [%(lb)d:0] length = 0; reg [%(ib)d:0] tdata = 0;
  wire ready, error, tready, ovalid, olast; wire [%(ob)d:0] odata;
  integer fj, fi, fo, seed_in, seed_out, beats, b, got, cycles, mm, ll, lst;
  %(top)s dut(.clk(clk), .rst(rst), .job__start(start), .job__m(m), .job__length(length),
    .job__ready(ready), .job__error(error), .s_axis__tdata(tdata), .s_axis__tvalid(tvalid),
    .s_axis__tlast(tlast), .s_axis__tready(tready), .m_axis__tdata(odata),
    .m_axis__tvalid(ovalid), .m_axis__tlast(olast), .m_axis__tready(oready));
  always #1 clk = ~clk;
  // a reset first: without an event at time 0, Icarus may leave the netlist's always @*
  // blocks unevaluated (x) until an input changes
  initial begin repeat (2) @(negedge clk); rst = 0; end
  initial begin
    repeat (2) @(negedge clk);
    seed_in = 11; seed_out = 23; got = 0; cycles = 0;
    fj = $fopen("jobs.txt", "r"); fi = $fopen("in.hex", "r"); fo = $fopen("out.hex", "w");
    while ($fscanf(fj, "%%d %%d %%d\\n", mm, ll, beats) == 3) begin
      @(negedge clk); start = 1; m = mm; length = ll;
      @(posedge clk); while (!ready) @(posedge clk);
      @(negedge clk); start = 0;
      for (b = 0; b < beats; b = b + 1) begin
        while (($random(seed_in) & 3) == 0) @(negedge clk);
        if ($fscanf(fi, "%%h %%h\\n", lst, tdata) != 2) $fatal(1, "short input");
        tlast = lst[0]; tvalid = 1;
        @(posedge clk); while (!tready) @(posedge clk);
        @(negedge clk); tvalid = 0;
      end
    end
  end
  always @(negedge clk) oready <= ($random(seed_out) & 3) != 0;
  always @(posedge clk) begin
    cycles <= cycles + 1;
    if (ovalid && oready) begin
      $fdisplay(fo, "%%0d %%h", olast, odata);
      got = got + 1;
      if (got == %(total)d) begin $fclose(fo); $finish; end
    end
    if (cycles > %(limit)d) $fatal(1, "timeout");
  end
endmodule
"""


def test_verilog_under_icarus(tmp_path, icarus):
    """The generated Verilog under Icarus (random idle and back-pressure from the bench's
    own ``$random``), three jobs, every beat against the golden model."""
    config = ReorderConfig(rows=3, cols=4, lanes=5, max_rows=8, max_len=11)
    jobs = [(8, 11), (5, 3), (7, 9)]
    rng = np.random.default_rng(2)
    made = [make_job(rng, m, length, config.rows, config.cols) for m, length in jobs]
    top = "link_reorder_icarus"
    lines = []
    for _, stream in made:
        for b, beat in enumerate(stream):
            word = int.from_bytes(beat.astype("<i4").tobytes(), "little")
            lines.append(f"{int(b == len(stream) - 1)} {word:x}")
    total = sum(config.out_beats(m, length) for m, length in jobs)
    (tmp_path / "jobs.txt").write_text("".join(f"{m} {length} {len(s)}\n"
                                               for (m, length), (_, s) in zip(jobs, made)))
    (tmp_path / "in.hex").write_text("\n".join(lines) + "\n")
    (tmp_path / "design.v").write_text(to_verilog(ScoresReorder(config), top))
    (tmp_path / "bench.v").write_text(BENCH % {
        "mb": config.m_bits - 1, "lb": config.l_bits - 1, "ib": 32 * config.cols - 1,
        "ob": 32 * config.lanes - 1, "top": top, "total": total, "limit": 20 * total})
    subprocess.run(["iverilog", "-g2012", "-o", "sim", "bench.v", "design.v"], cwd=tmp_path,
                   check=True, capture_output=True)
    subprocess.run(["vvp", "-n", "sim"], cwd=tmp_path, check=True, capture_output=True)
    rows = [line.split() for line in (tmp_path / "out.hex").read_text().split("\n") if line]
    got = np.array([np.frombuffer(int(word, 16).to_bytes(4 * config.lanes, "little"), "<i4")
                    for _, word in rows], np.int32)
    golden = np.concatenate([reorder_scores(s, m, length, config.rows, config.cols,
                                            config.lanes)
                             for (m, length), (_, s) in zip(jobs, made)])
    assert np.array_equal(got, golden)
    ends = list(np.cumsum([config.out_beats(m, length) for m, length in jobs]) - 1)
    assert [i for i, (last, _) in enumerate(rows) if last == "1"] == ends


@pytest.mark.parametrize("config, jobs", [
    (ReorderConfig(rows=3, cols=4, lanes=5, max_rows=8, max_len=11),
     [(8, 11), (5, 3), (7, 9), (1, 11)]),                       # lanes > C, M < R, L < lanes
    (ReorderConfig(rows=2, cols=8, lanes=3, max_rows=6, max_len=20),
     [(6, 20), (3, 17), (5, 2)])], ids=["lanes-over-cols", "lanes-under-cols"])
def test_cocotb_cosimulation_is_the_golden(tmp_path, simulator, config, jobs):
    """The generated Verilog under cocotb (sim/benches/link_reorder.py): jobs back to back
    through both banks, idle cycles on the input and back-pressure on the output at random,
    every output beat and its ``tlast`` against the golden model, no job flagged."""
    from zoforge.sim.cosim import run_cocotb
    rng = np.random.default_rng(5)
    made = [make_job(rng, m, length, config.rows, config.cols) for m, length in jobs]
    np.save(tmp_path / "in.npy", np.concatenate([stream for _, stream in made]))
    total = sum(config.out_beats(m, length) for m, length in jobs)
    top = "link_reorder_cocotb"
    result = run_cocotb(verilog=to_verilog(ScoresReorder(config), top), toplevel=top,
                        test_module="zoforge.sim.benches.link_reorder", simulator=simulator,
                        data_dir=tmp_path,
                        args={"jobs": [[m, length, len(stream)] for (m, length), (_, stream)
                                       in zip(jobs, made)],
                              "lanes": config.lanes, "idle": 0.3, "backpressure": 0.3,
                              "seed": 9, "out_beats": total})
    assert result.passed, result.failures
    golden = np.concatenate([reorder_scores(stream, m, length, config.rows, config.cols,
                                            config.lanes)
                             for (m, length), (_, stream) in zip(jobs, made)])
    assert np.array_equal(np.array(result.results["out"], np.int64), golden.astype(np.int64))
    ends = list(np.cumsum([config.out_beats(m, length) for m, length in jobs]) - 1)
    assert [i for i, last in enumerate(result.results["lasts"]) if last] == ends
    assert result.results["errors"] == [0] * len(jobs)


def test_the_figures_docs_link_quotes():
    """docs/link.md's MiniLM figures, derived here by hand: the lone job's cycles
    (16 column panels x 2 row panels x 64 rows in, 128 rows x 13 beats out) and the
    memories (16 of 2 banks x 128 rows x 8 words). (The links' LUTs in the planner's fit:
    tests/test_accel_plan.py.)"""
    from pathlib import Path
    text = " ".join((Path(__file__).parent.parent / "docs" / "link.md").read_text().split())
    config = ReorderConfig()                                   # MiniLM's 10-lane link
    cycles_in, cycles_out = 16 * 2 * 64, 128 * 13
    assert f"MiniLM: {cycles_in:,} + {cycles_out:,} + 1 = {cycles_in + cycles_out + 1:,}" \
        in text
    assert reorder_job_cycles(config, 128, 128) == cycles_in + cycles_out + 1 == 3713
    assert config.memories == 16 and "16 memories of 2 x 128 rows x 8 words (2,048 x 32)" \
        in text and 2 * 128 * 8 == 2048


# -- slow -----------------------------------------------------------------------------------

@pytest.mark.slow
def test_minilm_jobs():
    """MiniLM's link: 128 x 128 scores from a 64 x 8 engine into 10 lanes, three jobs
    (the last shorter: a padded sequence's 57 keys) under idle and back-pressure, then the
    cycle model at that size."""
    config = ReorderConfig()
    jobs = [(128, 128), (128, 128), (100, 57)]
    rec = check(config, jobs, seed=4, idle=0.2, stall=0.2)
    assert stable_while_stalled(rec["trace"])
    rec = check(config, jobs[:2], seed=5)
    model = reorder_schedule(config, jobs[:2])
    assert rec["out_cycles"][-1] == model[-1].last_out
    assert model[0].last_out == 2048 + 1664 + 1


@pytest.mark.slow
def test_random_shapes():
    rng = np.random.default_rng(8)
    for _ in range(30):
        rows, cols, lanes = (int(v) for v in rng.integers(1, 20, 3))
        max_rows, max_len = (int(v) for v in rng.integers(1, 24, 2))
        config = ReorderConfig(rows=rows, cols=cols, lanes=lanes, max_rows=max_rows,
                               max_len=max_len)
        jobs = [(int(rng.integers(1, max_rows + 1)), int(rng.integers(1, max_len + 1)))
                for _ in range(3)]
        check(config, jobs, seed=int(rng.integers(1 << 30)), idle=0.3, stall=0.3)
