# amaranth: UnusedElaboratable=no
"""The link on an engine's output (hw/link/path.py, ``ScoresLink``) against its golden model
(:func:`zoforge.golden.link.route_frames`), beat by beat and value by value, in Amaranth's
simulator with the engine's clock (``sync``) and the softmax units' (``softmax``) of
different periods, both ratios: five reorder shapes of tests/test_link_reorder.py, sequences
of five or six frames mixing pass-through (route 0) and linked (route 1) jobs, random idle
cycles on the engine's stream and random back-pressure on both outputs, job entries queued
ahead (the queue full) and late (the frame waiting for its entry: no beat taken before it);
every output beat, ``tlast`` on each side, no beat extra, the error flag (a misplaced
``tlast`` in a linked frame, sticky, cleared); pass-through frames passing while the
softmax side is held; the cycles with every stream ready; the crossing's rate; the golden
against a second derivation; the configuration's bounds; lint; the Verilog under Icarus with
two clocks. Slow: MiniLM's shape, MiniLM's lint."""
from __future__ import annotations

import random
import subprocess

import numpy as np
import pytest
from amaranth.sim import Simulator
from axis_sim import axis_sink, split_frames, stable_while_stalled

from zoforge.errors import ConfigError
from zoforge.golden.link import (engine_order, in_beats, out_beats, reorder_scores,
                                 route_frames, softmax_order)
from zoforge.hw.export import to_verilog
from zoforge.hw.link.config import FIFO_DEPTHS, MAX_QUEUE, LinkConfig, ReorderConfig
from zoforge.hw.link.path import ScoresLink
from zoforge.sim.lint import lint_verilog

FIELDS = ("rows", "cols", "lanes", "max_rows", "max_len")
#: (R, C, lanes, max_rows, max_len), the linked jobs (M, L), queue and FIFO depths.
SHAPES = [
    ((4, 3, 5, 10, 13), [(7, 13), (10, 4), (1, 1)], 4, 8),       # L = max_len, L < lanes
    ((2, 8, 10, 6, 24), [(6, 24), (3, 7), (5, 17)], 2, 16),      # MiniLM's C and lanes
    ((3, 4, 2, 7, 9), [(7, 9), (2, 3), (4, 8)], 1, 4),           # lanes < C, one entry
    ((1, 1, 1, 3, 4), [(3, 4), (1, 1), (2, 3)], 3, 4),           # one memory, R = 1
    ((2, 16, 3, 4, 40), [(4, 40), (1, 33), (3, 16)], 4, 8),      # C = P > lanes
]
IDS = ["x".join(map(str, shape)) for shape, *_ in SHAPES]
#: (sync, softmax) clock periods, seconds: the softmax domain slower, then faster.
PERIODS = {"sm-slow": (3.3e-9, 4e-9), "sm-fast": (4e-9, 3.3e-9)}
INT32 = (-2 ** 31, 2 ** 31)


def word(beat) -> int:
    """A beat's int32 lanes as one ``tdata`` integer (lane 0 in the low bits)."""
    return int.from_bytes(np.asarray(beat, "<i4").tobytes(), "little")


def lanes_of(value: int, lanes: int) -> np.ndarray:
    return np.frombuffer(int(value).to_bytes(4 * lanes, "little"), "<i4").astype(np.int32)


def make_frames(rng, config, linked, routes):
    """The engine's frames for ``routes`` (0 or 1 each): linked frames the raw streams of
    the jobs ``linked`` in turn (random scores, the engine's padding random), pass-through
    frames of 1 to 7 random beats. Returns the frames, the entries (route, m, length) and
    the scores of the linked jobs."""
    frames, jobs, scores = [], [], []
    next_job = iter(linked)
    for route in routes:
        if route:
            m, length = next(next_job)
            s = rng.integers(*INT32, (m, length), dtype=np.int64).astype(np.int32)
            pad = rng.integers(*INT32, (m + config.rows, length + config.cols),
                               dtype=np.int64).astype(np.int32)
            frames.append(engine_order(s, config.rows, config.cols, pad))
            jobs.append((1, m, length))
            scores.append(s)
        else:
            frames.append(rng.integers(*INT32, (int(rng.integers(1, 8)), config.cols),
                                       dtype=np.int64).astype(np.int32))
            # the entry's m and length are ignored for route 0: random
            jobs.append((0, int(rng.integers(0, config.max_rows + 1)),
                         int(rng.integers(0, config.max_len + 1))))
    return frames, jobs, scores


def run(config, frames, jobs, *, periods, seed, idle=0.3, stall=0.3, sm_stall=0.3, late=(),
        lasts=None, hold_softmax=0, clear_at=None, limit=20_000):
    """Simulate a :class:`ScoresLink`: the engine offering ``frames`` (idle cycles at random
    before each beat; ``tlast`` on each frame's last beat, or where ``lasts[k]`` says), the
    host pushing ``jobs`` (entry k, for k in ``late``, only once frame k's first beat is
    offered, then 0 to 5 cycles more), ``m_axis`` taking beats with ``stall`` back-pressure
    and ``softmax_axis`` (in its own clock) with ``sm_stall``, none for its first
    ``hold_softmax`` cycles; ``clear`` pulsed in sync cycle ``clear_at``. Returns the
    record: each side's beats and ``tlast`` marks and (sync cycles) the pass side's cycles,
    each frame's first offer and first transfer, each entry's push, the cycles the queue
    was full, ``error`` in each sync cycle, the beats seen past each side's count."""
    rng = random.Random(seed)
    dut = ScoresLink(config)
    lanes = config.lanes
    pass_total = sum(len(f) for f, (route, *_) in zip(frames, jobs) if route == 0)
    sm_total = sum(out_beats(m, length, lanes) for route, m, length in jobs if route == 1)
    rec = {"pass": [], "pass_lasts": [], "pass_cycles": [], "sm": [], "sm_lasts": [],
           "sm_cycles": [], "offered": [None] * len(frames), "taken": [None] * len(frames),
           "in_cycles": [[] for _ in frames], "pass_trace": [], "sm_trace": [],
           "pushed": [None] * len(jobs), "full": 0, "errors": [], "extra": 0, "done": 0}

    async def engine(ctx):
        cycle = 0
        for k, frame in enumerate(frames):
            marks = lasts[k] if lasts is not None else [b == len(frame) - 1
                                                        for b in range(len(frame))]
            for b, (beat, last) in enumerate(zip(frame, marks)):
                while rng.random() < idle:
                    await ctx.tick()
                    cycle += 1
                ctx.set(dut.s_axis.tdata, word(beat))
                ctx.set(dut.s_axis.tlast, int(last))
                ctx.set(dut.s_axis.tvalid, 1)
                if b == 0:
                    rec["offered"][k] = cycle
                while True:
                    _, _, ready = await ctx.tick().sample(dut.s_axis.tready)
                    cycle += 1
                    if ready:
                        break
                if b == 0:
                    rec["taken"][k] = cycle - 1
                rec["in_cycles"][k].append(cycle - 1)
                ctx.set(dut.s_axis.tvalid, 0)

    async def host(ctx):
        cycle = 0
        for k, (route, m, length) in enumerate(jobs):
            if k in late:
                while rec["offered"][k] is None:
                    await ctx.tick()
                    cycle += 1
                for _ in range(rng.randint(0, 5)):
                    await ctx.tick()
                    cycle += 1
            ctx.set(dut.job.payload, {"route": route, "m": m, "length": length})
            ctx.set(dut.job.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(dut.job.ready)
                cycle += 1
                if ready:
                    break
                rec["full"] += 1
            rec["pushed"][k] = cycle - 1
            ctx.set(dut.job.valid, 0)

    async def monitor(ctx):
        cycle = 0
        while not (passed["done"] and softmax["done"]) and cycle < limit:
            ctx.set(dut.clear, cycle == clear_at)
            _, _, error = await ctx.tick().sample(dut.error)
            rec["errors"].append(int(error))
            cycle += 1

    pass_sink, passed = axis_sink(dut.m_axis, pass_total, rng, stall=stall, limit=limit,
                                  watch=40)
    sm_sink, softmax = axis_sink(dut.softmax_axis, sm_total, rng, stall=sm_stall,
                                 hold=hold_softmax, limit=limit, domain="softmax", watch=40)

    sim = Simulator(dut)
    sim.add_clock(periods[0], domain="sync")
    sim.add_clock(periods[1], domain="softmax")
    sim.add_testbench(engine, background=True)
    sim.add_testbench(host, background=True)
    sim.add_testbench(pass_sink)
    sim.add_testbench(sm_sink)
    sim.add_testbench(monitor)
    sim.run()
    for key, record in (("pass", passed), ("sm", softmax)):
        rec.update({key: record["beats"], key + "_lasts": record["lasts"],
                    key + "_cycles": record["cycles"], key + "_trace": record["trace"]})
    rec["extra"] = passed["extra"] + softmax["extra"]
    return rec


def check(config, frames, jobs, scores, rec):
    """Every beat on both sides against the golden model (and the softmax side against the
    scores themselves), ``tlast`` on each frame's last beat, nothing more on either side,
    no frame's beat taken before its entry was pushed."""
    passed, routed = route_frames(frames, jobs, config.rows, config.cols, config.lanes)
    assert np.array_equal(np.concatenate(routed) if routed else np.zeros((0, config.lanes)),
                          np.concatenate([softmax_order(s, config.lanes) for s in scores])
                          if scores else np.zeros((0, config.lanes)))
    assert split_frames(rec["pass"], rec["pass_lasts"]) == [[word(b) for b in f] for f in passed]
    got = [[lanes_of(v, config.lanes) for v in f]
           for f in split_frames(rec["sm"], rec["sm_lasts"])]
    assert len(got) == len(routed), "the softmax side's frames"
    for k, (frame, golden) in enumerate(zip(got, routed)):
        frame = np.array(frame, np.int32).reshape(-1, config.lanes)
        assert frame.shape == golden.shape, f"linked frame {k}: {frame.shape} beats"
        bad = np.argwhere(frame != golden)
        assert not bad.size, f"linked frame {k}, beat, lane {bad[0]}"
    assert rec["extra"] == 0
    assert all(t > p for t, p in zip(rec["taken"], rec["pushed"]))
    assert stable_while_stalled(rec["pass_trace"]) and stable_while_stalled(rec["sm_trace"])


def routes_for(rng, count):
    """``count`` routes with both kinds, at random."""
    while True:
        routes = [int(rng.random() < 0.5) for _ in range(count)]
        if 0 < sum(routes) <= 3 and sum(routes) < count:
            return routes


@pytest.mark.parametrize("ratio", list(PERIODS))
@pytest.mark.parametrize("shape, linked, queue, fifo", SHAPES, ids=IDS)
def test_frames_routed_under_idle_and_back_pressure(shape, linked, queue, fifo, ratio):
    config = LinkConfig(**dict(zip(FIELDS, shape)), queue_depth=queue, fifo_depth=fifo)
    seed = sum(shape) + len(ratio)
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    routes = routes_for(pick, pick.choice((5, 6)))
    frames, jobs, scores = make_frames(rng, config, linked, routes)
    late = {k for k in range(len(jobs)) if pick.random() < 0.4} | {len(jobs) - 1}
    rec = run(config, frames, jobs, periods=PERIODS[ratio], seed=seed, late=late)
    check(config, frames, jobs, scores, rec)
    assert set(rec["errors"]) == {0}
    # a late entry's frame was offered and waited for it
    for k in late:
        assert rec["offered"][k] <= rec["pushed"][k] < rec["taken"][k]


def test_cycles_with_every_stream_ready():
    """Entries pushed from cycle 0, the engine and both outputs always ready: the first
    entry at the queue's head two cycles after its push and taken there, each frame's beats
    one a cycle from the cycle after its entry is taken, the next entry taken the cycle
    after a frame's last beat (one idle cycle between frames, either route)."""
    config = LinkConfig(rows=2, cols=3, lanes=4, max_rows=5, max_len=7)
    rng = np.random.default_rng(8)
    frames, jobs, scores = make_frames(rng, config, [(5, 7), (3, 4)], [0, 1, 0, 1, 0])
    rec = run(config, frames, jobs, periods=PERIODS["sm-slow"], seed=8, idle=0.0,
              stall=0.0, sm_stall=0.0)
    check(config, frames, jobs, scores, rec)
    assert rec["pushed"] == [0, 1, 2, 3, 4]
    start = rec["pushed"][0] + 3
    for k, frame in enumerate(frames):
        assert rec["in_cycles"][k] == list(range(start, start + len(frame)))
        start += len(frame) + 1


@pytest.mark.parametrize("fifo", [8, 16])
def test_the_crossing_keeps_the_slower_clocks_rate(fifo):
    """Two linked jobs whose output outlasts their input, every stream ready: with a FIFO of
    8 beats or more the softmax side takes one beat every cycle of the slower clock (its
    own, or the engine's: the beats' span in softmax cycles within one of the ideal)."""
    for sync, softmax in PERIODS.values():
        config = LinkConfig(rows=2, cols=8, lanes=2, max_rows=6, max_len=24, fifo_depth=fifo)
        rng = np.random.default_rng(1)
        frames, jobs, scores = make_frames(rng, config, [(6, 24), (6, 24)], [1, 1])
        rec = run(config, frames, jobs, periods=(sync, softmax), seed=1, idle=0.0,
                  stall=0.0, sm_stall=0.0)
        check(config, frames, jobs, scores, rec)
        cycles = rec["sm_cycles"]
        span = cycles[-1] - cycles[0] + 1
        assert len(cycles) == 144 and span <= len(cycles) * max(1, sync / softmax) + 1


def test_a_full_queue_holds_the_host_and_entries_ahead_are_kept():
    """Six entries pushed at once into a queue of two while the outputs take nothing for a
    while: the host waits, every frame still goes whole to its side."""
    config = LinkConfig(rows=2, cols=3, lanes=4, max_rows=5, max_len=7, queue_depth=2,
                        fifo_depth=4)
    rng = np.random.default_rng(3)
    frames, jobs, scores = make_frames(rng, config, [(5, 7), (3, 4), (4, 6)],
                                       [1, 0, 1, 0, 1, 0])
    rec = run(config, frames, jobs, periods=PERIODS["sm-slow"], seed=3, idle=0.0,
              stall=0.5, hold_softmax=150)
    assert rec["full"] > 0
    check(config, frames, jobs, scores, rec)


def test_pass_through_frames_pass_while_the_softmax_side_is_held():
    """The softmax side takes nothing for 400 cycles: the first two linked jobs fill the
    buffer's two banks (and the FIFO), the pass-through frames after them pass meanwhile,
    the third linked frame waits; then everything, unchanged."""
    config = LinkConfig(rows=2, cols=3, lanes=4, max_rows=5, max_len=7, fifo_depth=4)
    rng = np.random.default_rng(4)
    frames, jobs, scores = make_frames(rng, config, [(5, 7), (3, 4), (4, 6)],
                                       [1, 1, 0, 0, 1, 0])
    hold, (sync, softmax) = 400, PERIODS["sm-fast"]
    rec = run(config, frames, jobs, periods=(sync, softmax), seed=4, idle=0.1, stall=0.2,
              hold_softmax=hold)
    check(config, frames, jobs, scores, rec)
    held = int(hold * softmax / sync)                           # the hold in sync cycles
    first_two = len(frames[2]) + len(frames[3])
    assert rec["pass_cycles"][first_two - 1] < held - 100       # passed while held
    assert rec["taken"][4] > held                               # the banks were full


def test_a_misplaced_tlast_is_flagged_sticky_and_cleared():
    """A linked frame's ``tlast`` missing, another's early: the frames are still counted
    from their entries (the values unaffected), ``error`` rises after the first and stays;
    ``clear`` drops it."""
    config = LinkConfig(rows=2, cols=3, lanes=4, max_rows=5, max_len=7)
    rng = np.random.default_rng(5)
    frames, jobs, scores = make_frames(rng, config, [(3, 5)] * 3, [1, 0, 1, 1])
    beats = in_beats(3, 5, 2, 3)
    lasts = [[False] * beats,                                   # none on the last beat
             [b == len(frames[1]) - 1 for b in range(len(frames[1]))],
             [b == beats - 1 for b in range(beats)],
             [b in (2, beats - 1) for b in range(beats)]]       # one more, early
    rec = run(config, frames, jobs, periods=PERIODS["sm-slow"], seed=5, lasts=lasts,
              idle=0.0)
    check(config, frames, jobs, scores, rec)
    errors = rec["errors"]
    rise = errors.index(1)
    assert all(errors[rise:])                                   # sticky to the end
    rec = run(config, frames, jobs, periods=PERIODS["sm-slow"], seed=5, lasts=lasts[:1]
              + [[b == len(f) - 1 for b in range(len(f))] for f in frames[1:]],
              idle=0.0, clear_at=rise + 20)
    assert rec["errors"][rise:rise + 21] == [1] * 21 and not any(rec["errors"][rise + 21:])


def test_the_golden_against_a_second_derivation():
    """The pass side is the route-0 frames as they are; the softmax side the route-1 jobs'
    scores row by row (softmax_order); bad entries are one-line errors."""
    rng = np.random.default_rng(9)
    pick = random.Random(9)
    for _ in range(40):
        shape = dict(zip(FIELDS, [pick.randint(1, 9) for _ in range(3)] + [12, 20]))
        config = ReorderConfig(**shape)
        linked = [(pick.randint(1, 12), pick.randint(1, 20)) for _ in range(3)]
        routes = routes_for(pick, 6)
        frames, jobs, scores = make_frames(rng, config, linked, routes)
        passed, routed = route_frames(frames, jobs, config.rows, config.cols, config.lanes)
        assert [f.tolist() for f in passed] == [f.tolist() for f, r in zip(frames, routes)
                                                if r == 0]
        assert len(routed) == len(scores)
        for got, s, (_, m, length) in zip(routed, scores, [j for j in jobs if j[0]]):
            assert np.array_equal(got, softmax_order(s, config.lanes))
            assert got.shape == (out_beats(m, length, config.lanes), config.lanes)
    frame = np.zeros((in_beats(2, 3, 2, 3), 3), np.int32)
    for frames, jobs, parameter in (([frame], [], "jobs"), ([frame], [(2, 2, 3)],
                                                            "jobs[0].route"),
                                    ([frame[:1]], [(1, 2, 3)], "beats"),
                                    ([np.zeros((0, 3))], [(0, 0, 0)], "frame 0")):
        with pytest.raises(ConfigError) as error:
            route_frames(frames, jobs, 2, 3, 4)
        assert error.value.parameter == parameter and "\n" not in str(error.value)
    assert np.array_equal(route_frames([frame], [(1, 2, 3)], 2, 3, 4)[1][0],
                          reorder_scores(frame, 2, 3, 2, 3, 4))


def test_configuration_bounds():
    config = LinkConfig()                                       # MiniLM's link
    assert (config.queue_depth, config.fifo_depth) == (4, 16)
    assert config.reorder == ReorderConfig() and type(config.reorder) is ReorderConfig
    assert config.to_dict()["kind"] == "link"
    for field, value in (("queue_depth", 0), ("queue_depth", MAX_QUEUE + 1),
                         ("fifo_depth", 2), ("fifo_depth", 12), ("fifo_depth", 2048),
                         ("rows", 0), ("max_len", 1025)):
        with pytest.raises(ConfigError) as error:
            LinkConfig(**{field: value})
        assert error.value.parameter == field and "\n" not in str(error.value)
    LinkConfig(queue_depth=MAX_QUEUE, fifo_depth=FIFO_DEPTHS[-1])   # the boundaries
    LinkConfig(queue_depth=1, fifo_depth=FIFO_DEPTHS[0])


def test_ports():
    """The signature: the engine's width on both sync sides, the softmax unit's on the
    other; the read side in the domain named."""
    link = ScoresLink(LinkConfig(rows=4, cols=3, lanes=5, max_rows=10, max_len=13))
    assert (len(link.s_axis.tdata), len(link.m_axis.tdata), len(link.softmax_axis.tdata)) \
        == (96, 96, 160)
    assert set(link.job.payload.shape().members) == {"route", "m", "length"}
    verilog = to_verilog(ScoresLink(LinkConfig(rows=1, cols=1, lanes=1, max_rows=1,
                                               max_len=1), softmax_domain="sm"), "link_dom")
    assert "input sm_clk" in verilog and "input softmax_clk" not in verilog


# -- Verilog --------------------------------------------------------------------------------

def lint(config: LinkConfig):
    top = f"link_path_{config.cols}x{config.lanes}"
    return lint_verilog(to_verilog(ScoresLink(config), top), top)


def test_lint_clean():
    """``verilator --lint-only -Wall`` with the project's waivers (the ``link_*`` block): a
    small build and the smallest."""
    for config in (LinkConfig(rows=4, cols=3, lanes=5, max_rows=10, max_len=13),
                   LinkConfig(rows=1, cols=1, lanes=1, max_rows=1, max_len=1,
                              queue_depth=1, fifo_depth=4)):
        result = lint(config)
        assert result.clean, str(result)


BENCH = """
module bench;
  reg clk = 0, rst = 1, softmax_clk = 0, softmax_rst = 1, jvalid = 0, clear = 0;
  reg tvalid = 0, tlast = 0, pready = 0, sready = 0;
  reg [%(pb)d:0] payload = 0; reg [%(ib)d:0] tdata = 0;
  wire jready, error, tready, pvalid, plast, svalid, slast;
  wire [%(ib)d:0] pdata; wire [%(ob)d:0] sdata;
  integer fj, fi, fp, fs, seed_in, seed_p, seed_s, n, b, beats, lst, entry, pgot, sgot, cycles;
  %(top)s dut(.clk(clk), .rst(rst), .softmax_clk(softmax_clk), .softmax_rst(softmax_rst),
    .job__payload(payload), .job__valid(jvalid), .job__ready(jready), .error(error),
    .clear(clear), .s_axis__tdata(tdata), .s_axis__tvalid(tvalid), .s_axis__tlast(tlast),
    .s_axis__tready(tready), .m_axis__tdata(pdata), .m_axis__tvalid(pvalid),
    .m_axis__tlast(plast), .m_axis__tready(pready), .softmax_axis__tdata(sdata),
    .softmax_axis__tvalid(svalid), .softmax_axis__tlast(slast),
    .softmax_axis__tready(sready));
  always #3 clk = ~clk;
  always #4 softmax_clk = ~softmax_clk;
  // both resets for a few cycles (they also start Icarus' combinational blocks)
  initial begin repeat (3) @(negedge clk); rst = 0; end
  initial begin repeat (3) @(negedge softmax_clk); softmax_rst = 0; end
  initial begin                                   // the host: every entry, queued ahead
    fj = $fopen("jobs.txt", "r"); wait (!rst && !softmax_rst);
    while ($fscanf(fj, "%%h\\n", entry) == 1) begin
      @(negedge clk); payload = entry; jvalid = 1;
      @(posedge clk); while (!jready) @(posedge clk);
      @(negedge clk); jvalid = 0;
    end
  end
  initial begin                                   // the engine, with idle cycles
    seed_in = 11; fi = $fopen("in.hex", "r"); wait (!rst && !softmax_rst);
    while ($fscanf(fi, "%%h %%h\\n", lst, tdata) == 2) begin
      @(negedge clk); while (($random(seed_in) & 3) == 0) @(negedge clk);
      tlast = lst[0]; tvalid = 1;
      @(posedge clk); while (!tready) @(posedge clk);
      @(negedge clk); tvalid = 0;
    end
  end
  initial begin seed_p = 23; seed_s = 37; pgot = 0; sgot = 0; cycles = 0;
    fp = $fopen("pass.hex", "w"); fs = $fopen("softmax.hex", "w"); end
  always @(negedge clk) pready <= ($random(seed_p) & 3) != 0;
  always @(negedge softmax_clk) sready <= ($random(seed_s) & 3) != 0;
  always @(posedge clk) begin
    cycles <= cycles + 1;
    if (pvalid && pready) begin $fdisplay(fp, "%%0d %%h", plast, pdata); pgot = pgot + 1; end
    if (pgot == %(pass)d && sgot == %(softmax)d) begin
      $fclose(fp); $fclose(fs); $display("error %%0d", error); $finish;
    end
    if (cycles > %(limit)d) $fatal(1, "timeout");
  end
  always @(posedge softmax_clk)
    if (svalid && sready) begin $fdisplay(fs, "%%0d %%h", slast, sdata); sgot = sgot + 1; end
endmodule
"""


def test_verilog_under_icarus_with_two_clocks(tmp_path, icarus):
    """The generated Verilog under Icarus, ``clk`` and ``softmax_clk`` at periods 6 and 8
    (random idle and back-pressure from the bench's own ``$random``): six frames of both
    routes, every beat on both sides and its ``tlast`` against the golden model."""
    config = LinkConfig(rows=3, cols=4, lanes=5, max_rows=8, max_len=11, fifo_depth=8)
    rng = np.random.default_rng(2)
    frames, jobs, scores = make_frames(rng, config, [(8, 11), (5, 3), (7, 9)],
                                       [1, 0, 1, 0, 0, 1])
    passed, routed = route_frames(frames, jobs, config.rows, config.cols, config.lanes)
    top = "link_path_icarus"
    m_bits, l_bits = config.m_bits, config.l_bits
    (tmp_path / "jobs.txt").write_text("".join(
        f"{route | m % (1 << m_bits) << 1 | length % (1 << l_bits) << 1 + m_bits:x}\n"
        for route, m, length in jobs))
    (tmp_path / "in.hex").write_text("".join(f"{int(b == len(f) - 1)} {word(beat):x}\n"
                                             for f in frames for b, beat in enumerate(f)))
    (tmp_path / "design.v").write_text(to_verilog(ScoresLink(config), top))
    pass_total, sm_total = sum(map(len, passed)), sum(map(len, routed))
    (tmp_path / "bench.v").write_text(BENCH % {
        "pb": 1 + m_bits + l_bits - 1, "ib": 32 * config.cols - 1,
        "ob": 32 * config.lanes - 1, "top": top, "pass": pass_total, "softmax": sm_total,
        "limit": 20 * (pass_total + sum(map(len, frames)) + sm_total)})
    subprocess.run(["iverilog", "-g2012", "-o", "sim", "bench.v", "design.v"], cwd=tmp_path,
                   check=True, capture_output=True)
    run_ = subprocess.run(["vvp", "-n", "sim"], cwd=tmp_path, check=True,
                          capture_output=True, text=True)
    assert "error 0" in run_.stdout

    def read(name):
        rows = [line.split() for line in (tmp_path / name).read_text().split("\n") if line]
        return [int(word_, 16) for _, word_ in rows], [int(last) for last, _ in rows]

    words, marks = read("pass.hex")
    assert split_frames(words, marks) == [[word(b) for b in f] for f in passed]
    words, marks = read("softmax.hex")
    got = [np.array([lanes_of(v, config.lanes) for v in f]) for f in split_frames(words, marks)]
    assert len(got) == len(routed)
    assert all(np.array_equal(a, b) for a, b in zip(got, routed))


@pytest.mark.slow          # the buffer's 32k lines of memory initialisers
def test_lint_clean_minilm():
    result = lint(LinkConfig())
    assert result.clean, str(result)


@pytest.mark.slow
def test_minilm_shape():
    """MiniLM's link: two 128 x 128 jobs and a padded sequence's 100 x 57 among
    pass-through frames, both clock ratios."""
    config = LinkConfig()
    for ratio in PERIODS:
        rng = np.random.default_rng(6)
        frames, jobs, scores = make_frames(rng, config, [(128, 128), (100, 57), (128, 128)],
                                           [1, 0, 1, 0, 1])
        rec = run(config, frames, jobs, periods=PERIODS[ratio], seed=6, idle=0.1,
                  stall=0.1, sm_stall=0.1, late={1, 4}, limit=200_000)
        check(config, frames, jobs, scores, rec)


@pytest.mark.parametrize("periods", [(6, 8), (8, 5)], ids=["softmax-slow", "softmax-fast"])
def test_cocotb_cosimulation_is_the_golden(tmp_path, simulator, periods):
    """The generated Verilog under cocotb (sim/benches/link_path.py) with two clocks: six
    frames of both routes, entries and beats with idle cycles, back-pressure on both
    outputs; every word and ``tlast`` of both sides against the golden model, no error."""
    from zoforge.sim.cosim import run_cocotb
    config = LinkConfig(rows=3, cols=4, lanes=5, max_rows=8, max_len=11, fifo_depth=8)
    rng = np.random.default_rng(4)
    frames, jobs, _ = make_frames(rng, config, [(8, 11), (5, 3), (7, 9)], [1, 0, 1, 0, 0, 1])
    passed, routed = route_frames(frames, jobs, config.rows, config.cols, config.lanes)
    entries = [route | m % (1 << config.m_bits) << 1
               | length % (1 << config.l_bits) << 1 + config.m_bits
               for route, m, length in jobs]
    top = "link_path_cocotb"
    result = run_cocotb(verilog=to_verilog(ScoresLink(config), top), toplevel=top,
                        test_module="zoforge.sim.benches.link_path", simulator=simulator,
                        data_dir=tmp_path,
                        args={"frames": [[word(b) for b in f] for f in frames],
                              "entries": entries, "idle": 0.3, "backpressure": 0.3,
                              "seed": 6, "sync_ns": periods[0], "softmax_ns": periods[1],
                              "pass_beats": sum(len(f) for f in passed),
                              "softmax_beats": sum(len(f) for f in routed)})
    assert result.passed, result.failures
    got = result.results
    assert split_frames(got["pass"], got["pass_lasts"]) == [[word(b) for b in f]
                                                           for f in passed]
    assert split_frames(got["softmax"], got["softmax_lasts"]) == [[word(b) for b in f]
                                                                 for f in routed]
    assert got["error"] == 0
