"""The step's host work overlapped with the fabric's per piece (reports/overlap.py): the
list schedule on cases worked by hand (the wavefront's priorities, the softmax units' own
resource, the DDR shared max-min fair, a phase with loads running alone), an independent
check of every placement and the bounds over random stages, the pieces of a phase worked by
hand, the host's work placed after the phases by hand, and the planned MiniLM design: with
no host work the overlapped step is the fabric's, with it between max(fabric, host) and
their sum."""
from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from zoforge.errors import ConfigError
from zoforge.hw.accel.config import AcceleratorConfig
from zoforge.hw.accel.schedule import Job, step_schedule
from zoforge.reports.accel_cost import (ddr_sharing_seconds, host_seconds, host_stage_ops,
                                        overlapped_stages,
                                        price_schedule)
from zoforge.reports.model_shape import ModelShape
from zoforge.reports.overlap import (Stage, ddr_rates, makespan, phase_stage, schedule,
                                     step_stages)


def test_two_phases_two_chunks_by_hand():
    # fabric A0 0-2, A1 2-5; host A0 2-3, A1 5-9; B0 waits for host A0: 5-10; B1 for
    # host A1 (9): 10-11; host B0 max(9, 10) + 2 = 12, B1 max(12, 11) + 2 = 14
    a = Stage((2.0, 3.0), (1.0, 4.0), (-1, -1))
    assert makespan([a, Stage((5.0, 1.0), (2.0, 2.0), (0, 1))]) == 14.0
    # the same with B's first piece needing every row of A (a serializing dependency):
    # B0 starts at 9: 9-14, B1 14-15; host B0 14-16, B1 16-18
    assert makespan([a, Stage((5.0, 1.0), (2.0, 2.0), (1, 1))]) == 18.0


def test_host_bound_and_fabric_bound_by_hand():
    # host-bound: the host works from the first piece's end (1) to the end: 1 + 4 x 5
    host = [Stage((1.0, 1.0), (5.0, 5.0), (-1, -1)), Stage((1.0, 1.0), (5.0, 5.0), (0, 1))]
    assert makespan(host) == 21.0
    # fabric-bound: the fabric never waits, the host's last piece is exposed: 4 x 5 + 1
    fabric = [Stage((5.0, 5.0), (1.0, 1.0), (-1, -1)), Stage((5.0, 5.0), (1.0, 1.0), (0, 1))]
    assert makespan(fabric) == 21.0
    # one piece a phase: nothing overlaps, the serial sum
    assert makespan([Stage((5.0,), (1.0,), (-1,)), Stage((5.0,), (1.0,), (0,))]) == 12.0


def test_softmax_units_are_a_resource_of_their_own_by_hand():
    """scores (fabric) 2 + 2, softmax (units) 3 + 3, context (fabric) 1 + 1, no host work:
    softmax 0 at 2-5, 1 at 5-8; context 0 after softmax 0 at 5-6 (the fabric free since 4),
    1 at 8-9. On the fabric too (one resource): scores 0-4, softmax 4-10, context 10-12."""
    zero = (0.0, 0.0)
    stages = [Stage((2.0, 2.0), zero, (-1, -1)),
              Stage((3.0, 3.0), zero, (0, 1), resource="softmax"),
              Stage((1.0, 1.0), zero, (0, 1))]
    assert makespan(stages) == 9.0
    assert makespan([Stage(s.fabric, s.host, s.needs) for s in stages]) == 12.0


def test_linked_scores_wait_for_the_softmax_to_read_their_banks_by_hand():
    """scores (fabric) 1 + 1 + 1 feeding softmax (units) 2 + 2 + 2 through the links, no
    host work: scores 0 at 0-1, softmax 0 at 1-3, scores 1 only then at 3-4, softmax 1 4-6,
    scores 2 6-7, softmax 2 7-9; not linked, the scores run ahead (0-3) and the softmax
    pieces back to back from 1: 7."""
    zero = (0.0,) * 3
    scores = Stage((1.0,) * 3, zero, (-1,) * 3, feeds=True)
    softmax = Stage((2.0,) * 3, zero, (0, 1, 2), resource="softmax")
    placed = schedule([scores, softmax])
    assert [(p.stage, p.piece, p.start, p.end) for p in placed if p.stage == 0] == [
        (0, 0, 0.0, 1.0), (0, 1, 3.0, 4.0), (0, 2, 6.0, 7.0)]
    assert makespan([scores, softmax]) == 9.0
    assert makespan([replace(scores, feeds=False), softmax]) == 7.0


@pytest.mark.parametrize("stages", [
    [Stage((1.0,), (1.0,), (-1,), feeds=True)],                  # feeds no stage
    [Stage((1.0,), (1.0,), (-1,), feeds=True),                   # one cut differently
     Stage((1.0, 1.0), (1.0, 1.0), (0, 0), resource="softmax")],
    [Stage((1.0, 1.0), (1.0, 1.0), (-1, -1), feeds=True),        # reads a later piece
     Stage((1.0, 1.0), (1.0, 1.0), (1, 1), resource="softmax")],
    [Stage((1.0,), (1.0,), (-1,), resource="dsp")],              # no such resource
    [Stage((1.0,), (1.0,), (0,))],                               # needs a piece not there
    [Stage((1.0,), (1.0,), (-1,)), Stage((1.0,), (1.0,), (1,))],
    [Stage((-1.0,), (1.0,), (-1,))],                             # negative seconds
    [Stage((1.0, 1.0), (1.0,), (-1, -1))],                       # lengths differ
    [Stage((), (), ())]])
def test_bad_stages_are_one_line(stages):
    with pytest.raises(ConfigError) as error:
        makespan(stages)
    assert str(error.value).startswith("stages") and "\n" not in str(error.value)


def test_ddr_shared_max_min_fair_by_hand():
    """Scores on the fabric (2 + 2 s, streaming at a quarter of the DDR's peak) and the
    softmax units (2 + 2 s, at its whole peak): from 2 s scores 1 gets the quarter it asks
    (2-4), softmax 0 the other three quarters (1.5 s of its 2 by 4 s, the rest alone: 4-4.5),
    softmax 1 4.5-6.5. Shared in proportion both would run at 0.8 (scores 1 to 4.5); without
    the DDR shares they overlap freely: 6 s."""
    zero = (0.0, 0.0)
    stages = [Stage((2.0, 2.0), zero, (-1, -1), ddr=0.25),
              Stage((2.0, 2.0), zero, (0, 1), resource="softmax", ddr=1.0)]
    placed = {(p.resource, p.stage, p.piece): (p.start, p.end) for p in schedule(stages)}
    assert placed == {("fabric", 0, 0): (0.0, 2.0), ("fabric", 0, 1): (2.0, 4.0),
                      ("softmax", 1, 0): (2.0, 4.5), ("softmax", 1, 1): (4.5, 6.5)}
    assert makespan(stages) == 6.5
    assert makespan([replace(s, ddr=0.0) for s in stages]) == 6.0
    # softmax 0 took 0.5 s past its 2; the fabric busy 4 s of the 6.5
    assert ddr_sharing_seconds(stages) == (0.5, 2.5)
    # with host work after the softmax pieces (4.5-5.5, 6.5-7.5): the host's pieces are no
    # accelerator piece (still 0.5 s lost), the fabric idle 3.5 s of the 7.5
    hosted = [stages[0], replace(stages[1], host=(1.0, 1.0))]
    assert makespan(hosted) == 7.5 and ddr_sharing_seconds(hosted) == (0.5, 3.5)


@pytest.mark.parametrize("demands, rates", [
    ({}, {}),
    ({"a": 0.5, "b": 0.5}, {"a": 1.0, "b": 1.0}),                  # within the peak
    ({"a": 1.0, "b": 1.0}, {"a": 0.5, "b": 0.5}),                  # halves
    ({"a": 0.25, "b": 1.0}, {"a": 1.0, "b": 0.75}),                # the light one served
    ({"a": 0.8, "b": 0.6}, {"a": 0.625, "b": 5 / 6}),              # both past half
    ({"a": 0.0, "b": 1.0}, {"a": 1.0, "b": 1.0}),
    ({"a": 0.2, "b": 0.5, "c": 0.9}, {"a": 1.0, "b": 0.8, "c": 0.4 / 0.9})])
def test_ddr_rates_by_hand(demands, rates):
    got = ddr_rates(demands)
    assert got.keys() == rates.keys()
    for key in rates:
        assert got[key] == pytest.approx(rates[key], rel=1e-12)
    assert sum(demands[k] * got[k] for k in demands) <= 1 + 1e-12


def test_the_host_serves_the_latest_phase_first_by_hand():
    """A (fabric 1 + 1, host 5 + 1), B (reads no row: fabric 1 + 1, host 1 + 1), C after B
    (1 + 1, no host work). The fabric runs A0, A1, B0, B1 (0-4), the host A0 1-6; at 6 A1
    and B0 wait: B's first (the later phase), B0 6-7, B1 7-8, then A1 8-9; C0 7-8, C1 8-9:
    9 s. Serving A1 first would end at 10."""
    stages = [Stage((1.0, 1.0), (5.0, 1.0), (-1, -1)), Stage((1.0, 1.0), (1.0, 1.0), (-1, -1)),
              Stage((1.0, 1.0), (0.0, 0.0), (0, 1))]
    host = [(p.stage, p.piece, p.start) for p in schedule(stages) if p.resource == "host"]
    assert sorted(host, key=lambda h: h[2]) == [(0, 0, 1.0), (1, 0, 6.0), (1, 1, 7.0),
                                                (0, 1, 8.0)]
    assert makespan(stages) == 9.0


def test_a_stage_with_loads_runs_alone_by_hand():
    """The host's 3 s before A's second piece: A0 0-1, then a stage whose pieces read no row
    would run 1-3 and A1 3-4 (4 s); with ``loads`` it waits for A1 (4-6) and the stage
    after it for its last piece (6-7)."""
    start = Stage((0.0, 0.0), (0.0, 3.0), (-1, -1))
    a = Stage((1.0, 1.0), (0.0, 0.0), (0, 1))
    free = Stage((1.0, 1.0), (0.0, 0.0), (-1, -1))
    after = Stage((1.0,), (0.0,), (-1,))
    assert makespan([start, a, free]) == 4.0
    assert makespan([start, a, replace(free, loads=True)]) == 6.0
    assert makespan([start, a, replace(free, loads=True), after]) == 7.0
    assert makespan([start, a, free, after]) == 5.0       # after A1 (3-4): the earlier first


def _check_placement(stages, placed):
    """An independent check of a placement: every piece once (a host piece with no work
    not placed), each resource one piece at a time and its phase's pieces in order, every
    dependency done before a piece starts, no piece faster than alone (exactly its seconds
    without DDR shares), the DDR never past its peak overall, and the list schedule's rule:
    no resource idle, nor starting a piece, while a piece it prefers is ready."""
    where = {(p.resource == "host", p.stage, p.piece): p for p in placed}
    assert len(where) == len(placed)
    for p, stage in enumerate(stages):
        for c in range(len(stage.fabric)):
            assert (False, p, c) in where and where[False, p, c].resource == stage.resource
            assert ((True, p, c) in where) == (stage.host[c] > 0)
    end = max(p.end for p in placed)
    tol = 1e-9 * max(1.0, end)

    def done(host: bool, p: int, c: int) -> float:        # pieces 0..c of (p, host?)
        ends = [where[False, p, k].end for k in range(c + 1)]
        if host:
            ends += [where[True, p, k].end for k in range(c + 1) if (True, p, k) in where]
        return max(ends)

    def ready(piece) -> float:
        host, p, c = piece.resource == "host", piece.stage, piece.piece
        stage = stages[p]
        times = [0.0]
        if host:
            times.append(done(False, p, c))
        else:
            if stage.needs[c] >= 0:
                times.append(done(True, p - 1, stage.needs[c]))
            if stage.loads and c == 0:
                times += [done(False, q, len(stages[q].fabric) - 1) for q in range(p)]
            loads = [q for q in range(p) if stages[q].loads]
            if loads:
                times.append(done(False, loads[-1], len(stages[loads[-1]].fabric) - 1))
            if stage.feeds and c:                          # the next stage's piece c - 1
                times.append(where[False, p + 1, c - 1].end)
        if c:
            times.append(where[host, p, c - 1].end if (host, p, c - 1) in where else
                         where[False, p, c - 1].end if not host else 0.0)
        return max(times)

    for resource in {p.resource for p in placed}:
        mine = sorted((p for p in placed if p.resource == resource), key=lambda p: p.start)
        for first, second in zip(mine, mine[1:]):
            assert second.start >= first.end - tol
        for k, piece in enumerate(mine):
            assert piece.start >= ready(piece) - tol
            seconds = (stages[piece.stage].host if resource == "host"
                       else stages[piece.stage].fabric)[piece.piece]
            shared = resource != "host" and stages[piece.stage].ddr > 0
            assert piece.end - piece.start >= seconds - tol
            if not shared:
                assert piece.end - piece.start == pytest.approx(seconds, abs=tol)
            idle_from = mine[k - 1].end if k else 0.0
            for other in mine[k + 1:]:                     # started later: not ready, or
                r = ready(other)                           # not preferred
                if r <= idle_from + tol:
                    r = idle_from
                if r < piece.start - tol:
                    raise AssertionError(f"{resource} idle from {idle_from} while "
                                         f"{other} was ready at {r}")
                if stages[other.stage].feeds and other.piece and where[
                        False, other.stage + 1, other.piece - 1].start >= piece.start - tol:
                    continue                   # ready only by a piece not started before
                if r <= piece.start + tol and other.stage != piece.stage:
                    later = other.stage > piece.stage
                    assert later == (resource != "host"), (piece, other)
    ddr = sum(stages[p.stage].ddr * stages[p.stage].fabric[p.piece] for p in placed
              if p.resource != "host")
    assert ddr <= end + tol


@st.composite
def _stages(draw):
    out, previous = [], 0
    shares = st.sampled_from((0.0, 0.25, 0.5, 1.0)) if draw(st.booleans()) else st.just(0.0)
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, 4))
        seconds = st.sampled_from((0.0, 0.5, 1.0, 2.0, 3.0, 7.0))
        needs = [draw(st.integers(-1, previous - 1)) if previous else -1 for _ in range(n)]
        loads = draw(st.booleans()) and draw(st.booleans())
        if out and previous == n and not loads and not out[-1].loads and all(need <= c for c, need in
                                                       enumerate(needs)) and draw(st.booleans()):
            out[-1] = replace(out[-1], feeds=True)        # the last one feeds this one
        out.append(Stage(tuple(draw(seconds) for _ in range(n)),
                         tuple(draw(seconds) for _ in range(n)), tuple(needs),
                         resource=draw(st.sampled_from(("fabric", "softmax"))),
                         loads=loads,
                         ddr=draw(shares)))
        previous = n
    return out


@settings(max_examples=200, deadline=None)
@given(_stages())
def test_the_schedule_keeps_its_rules_and_bounds(stages):
    placed = schedule(stages)
    _check_placement(stages, placed)
    span = makespan(stages)
    total_f = sum(sum(s.fabric) for s in stages)
    total_h = sum(sum(s.host) for s in stages)
    busiest = max(sum(sum(s.fabric) for s in stages if s.resource == r)
                  for r in ("fabric", "softmax"))
    assert max(busiest, total_h) - 1e-9 <= span
    # the DDR slows a piece at most twice (two resources stream); never a deadlock
    assert span <= 2 * total_f + total_h + 1e-9
    if all(s.ddr == 0 for s in stages):
        assert span <= total_f + total_h + 1e-9


def _job(unit, replica, first, end):
    return Job(unit, replica, "gemm", end - first, 8, 8, rows=(first, end))


def test_a_phases_pieces_by_hand():
    """Two engines, rows 0-4 and 4-8: engine 0 10 + 10 cycles, engine 1 6 + 20: piece 0
    done at max(10, 6) = 10, piece 1 at max(20, 26) = 26 (the phase's cycles), so the
    phase's 1 s splits 10/26, 16/26. Host: 2 s row-local over 8 rows, 1 s per sequence."""
    jobs = [_job("engine", 0, 0, 4), _job("engine", 1, 0, 4), _job("engine", 0, 4, 8),
            _job("engine", 1, 4, 8), Job("zo-layer", 0, "load_w", 4, 8, 8)]   # a load
    cycles = [10, 6, 10, 20, 1]
    previous = Stage((0.0,) * 3, (0.0,) * 3, (-1,) * 3, (0, 3, 6))
    stage, span = phase_stage("p", jobs, cycles, 1.0, (2.0, 1.0), previous, 8, False, 4)
    assert span == 8 and stage.bounds == (0, 4)
    assert stage.fabric == pytest.approx((10 / 26, 16 / 26))
    assert stage.host == pytest.approx((1.0 + 0.5, 1.0 + 0.5))   # a sequence each
    assert stage.needs == (1, 2)                                 # rows 3 and 7
    # sequences of 8 rows: the one sequence ends in piece 1; its rows need it whole
    stage, _ = phase_stage("p", jobs, cycles, 1.0, (2.0, 1.0), previous, 8, True, 8)
    assert stage.host == pytest.approx((1.0, 2.0)) and stage.needs == (2, 2)
    # after a shared phase (4 rows: branch 0's), rows 4-8 read token rows 0-4
    shared = Stage((0.0,) * 2, (0.0,) * 2, (-1,) * 2, (0, 2))
    stage, _ = phase_stage("p", jobs, cycles, 1.0, (0.0, 0.0), shared, 4, False, 4)
    assert stage.needs == (1, 1)
    # branch 1's rows 8-12 of a phase after a shared one (8 token rows in 2 pieces) read
    # token rows 0-4: the first piece, not the last
    shared = Stage((0.0,) * 2, (0.0,) * 2, (-1,) * 2, (0, 4))
    stage, _ = phase_stage("p", [_job("engine", 0, 8, 12)], [5], 1.0, (0.0, 0.0), shared, 8,
                           False, 4)
    assert stage.bounds == (0, 8) and stage.needs == (-1, 0)
    # the head waits for every piece of the previous stage
    stage, _ = phase_stage("head", jobs, cycles, 1.0, (0.0, 0.0), previous, 8, False, 4)
    assert stage.needs == (2, 2)


SHAPE = ModelShape(blocks=3, seq_len=8, batch=2, rank=4, adapted=2, queries=2, hidden=16,
                   ffn=32, heads=2, classes=2)


def test_host_work_placed_after_its_phase_by_hand():
    """first_adapted 1: block 0 once, blocks 1, 2 per branch (4); M = 16, H = 16, F = 32,
    heads x B x L^2 = 2 x 2 x 64."""
    M, H, F, S = 16, 16, 32, 4
    host = host_stage_ops(SHAPE, 1)
    assert host["start"] == ({"layernorm": 5 * M * H, "quantize": 9 * M * H}, {})
    # block 1's q, k, v inputs, 4 runs, after block 0's ffn_out (once)
    assert host["block0.ffn_out"] == ({"quantize": M * H + 4 * 9 * M * H,
                                       "residuals": M * H, "layernorm": 5 * M * H}, {})
    assert host["block1.ffn_in"] == ({"quantize": 4 * 4 * M * F, "gelu": 4 * 13 * M * F}, {})
    # after qkv: q, k, v dequantized, query and value summed, attn_out's input quantized;
    # per sequence the products (2 B L^2 H) and softmax (15 heads B L^2)
    assert host["block1.qkv"] == ({"quantize": 4 * 6 * M * H, "combine": 4 * 2 * M * H},
                                  {"attention products": 4 * 2 * 2 * 64 * H,
                                   "softmax": 4 * 15 * 256})
    assert host["block2.ffn_out"][1] == {"pooling": S * M * H, "quantize": S * 3 * 2 * H}
    engines = host_stage_ops(SHAPE, 1, attention="engines")
    assert engines["block1.scores"] == ({}, {"attention quantize": 4 * 4 * 256,
                                             "softmax": 4 * 15 * 256})
    assert engines["block1.context"] == ({"attention quantize": 4 * M * H,
                                          "quantize": 4 * 3 * M * H}, {})


#: The planned design for the issue's MiniLM step (docs/accelerator-cost.md), given
#: directly (planning it takes seconds).
PLANNED = AcceleratorConfig(engines=3, engine_rows=64, engine_cols=8, paired=True,
                            engine_max_m=384, engine_max_k=1536, engine_max_n=512, layers=1,
                            layer_rows=4, layer_cols=16, layer_max_m=512, layer_max_k=8,
                            layer_max_n=384, layer_max_r=8)
MINILM = ModelShape(blocks=6, batch=4, seq_len=128, queries=2)


@pytest.mark.parametrize("attention", ["host", "engines"])
def test_planned_design_overlap(attention):
    sched = step_schedule(MINILM, PLANNED, 0, "split", attention)
    price = price_schedule(sched, 252.0, 21.3e9)
    phases = [(p.name, p.jobs, c.job_cycles, c.time_s, c.memory_s / c.time_s) for p, c in
              zip(sched.phases, price.phases)]
    # no host work: the fabric's pieces add up to the serial fabric time
    idle = step_stages([(*p[:4], (0.0, 0.0), p[4]) for p in phases], 0.0, MINILM.seq_len)
    assert makespan(idle) == pytest.approx(price.fabric_s, rel=1e-12)
    assert sum(sum(s.fabric) for s in idle) == pytest.approx(price.fabric_s, rel=1e-12)
    # the host's pieces add up to its whole work
    work = host_stage_ops(MINILM, 0, "split", attention)
    stages = _host_stages(phases, work)
    assert sum(sum(s.host) for s in stages) == pytest.approx(price.host_s, rel=1e-12)
    assert makespan(stages) == price.seconds
    # with it: between the larger resource and the serial sum, strictly inside both here
    assert max(price.fabric_s, price.host_s) < price.seconds < price.serial_s
    assert price.host_exposed_s == pytest.approx(price.seconds - price.fabric_s)


def _host_stages(phases: list, work: dict) -> list:
    """The step's stages with the host's work of ``work`` (host_stage_ops') per phase."""
    return step_stages([(*p[:4], (host_seconds(work.get(p[0], ({}, {}))[0]),
                                  host_seconds(work.get(p[0], ({}, {}))[1])), p[4])
                        for p in phases],
                       host_seconds(work["start"][0]), MINILM.seq_len)

def test_planned_design_overlap_with_softmax_units():
    """The planned design with two 7-lane softmax units, nonlinear integer: the softmax
    phases run on the units (a resource of their own), so the accelerator alone (no host
    work) is under its phases one after the other and at least the engines' part; the host's
    pieces add up to its whole work; the step between max(accelerator, host) and their
    sum."""
    accel = PLANNED.replace(softmax_units=2, softmax_lanes=7)
    sched = step_schedule(MINILM, accel, 0, "split", "engines", "integer")
    price = price_schedule(sched, 252.0, 21.3e9, 249.0)
    phases = [(p.name, p.jobs, c.job_cycles, c.time_s, c.memory_s / c.time_s) for p, c in
              zip(sched.phases, price.phases)]
    idle = step_stages([(*p[:4], (0.0, 0.0), p[4]) for p in phases], 0.0, MINILM.seq_len)
    assert {s.resource for s in idle} == {"fabric", "softmax"}
    assert makespan(idle) == pytest.approx(price.fabric_s, rel=1e-12)
    engines = sum(c.time_s for c in price.phases if not c.name.endswith(".softmax"))
    assert engines < price.fabric_s < price.phases_s
    assert sum(sum(s.fabric) for s in idle) == pytest.approx(price.phases_s, rel=1e-12)
    work = host_stage_ops(MINILM, 0, "split", "engines", softmax=True)
    stages = _host_stages(phases, work)
    assert sum(sum(s.host) for s in stages) == pytest.approx(price.host_s, rel=1e-12)
    assert makespan(stages) == price.seconds
    assert max(price.fabric_s, price.host_s) < price.seconds < price.serial_s


def test_planned_design_overlap_with_links():
    """The planned design's arrays, six engines (12 heads: two of a piece's chunks an
    engine, the links' two banks), two 8-lane softmax units and the attention links: exactly
    the stages before the softmax units' stages feed them, cut alike; the priced step is
    the makespan of those stages, no shorter than the same stages with the links' banks
    unbounded (no ``feeds``), nor than the engines' and ZO layers' pieces one after the
    other."""
    accel = PLANNED.replace(engines=6, softmax_units=2, softmax_lanes=8, link=True)
    sched = step_schedule(MINILM, accel, 0, "split", "engines", "integer")
    price = price_schedule(sched, 252.0, 21.3e9, 249.0)
    stages = overlapped_stages(sched, price.phases)
    names = ["start"] + [p.name for p in sched.phases]
    feeding = [names[i] for i, stage in enumerate(stages) if stage.feeds]
    assert feeding == [f"block{b}.scores" for b in range(MINILM.blocks)]
    for i, stage in enumerate(stages):
        if stage.feeds:
            assert stages[i + 1].resource == "softmax"
            assert stages[i + 1].bounds == stage.bounds
    assert makespan(stages) == price.seconds
    unbounded = makespan([replace(stage, feeds=False) for stage in stages])
    assert unbounded <= price.seconds
    assert sum(sum(s.fabric) for s in stages if s.resource == "fabric") <= price.seconds


def test_a_linked_piece_past_the_links_banks_is_refused():
    """A linked scores phase whose piece puts three jobs on one engine (two banks a link):
    a one-line error naming ``link``; two jobs on it, or three not linked, are priced."""
    zero = (0.0, 0.0)

    def phases(jobs_on_engine_0: int):
        scores = [_job("engine", 0, 0, 8)] * jobs_on_engine_0 + [_job("engine", 1, 0, 8)]
        softmax = [_job("softmax", 0, 0, 8)] * len(scores)
        return [("b.scores", scores, [1] * len(scores), 1.0, zero, 0.0),
                ("b.softmax", softmax, [1] * len(softmax), 1.0, zero, 0.0)]
    assert [s.feeds for s in step_stages(phases(2), 0.0, 8, linked=True)] == [
        False, True, False]
    assert not any(s.feeds for s in step_stages(phases(3), 0.0, 8))
    with pytest.raises(ConfigError) as error:
        step_stages(phases(3), 0.0, 8, linked=True)
    assert error.value.parameter == "link" and "b.scores: 3" in str(error.value)
    assert "\n" not in str(error.value)
