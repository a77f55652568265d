"""The step's host work overlapped with the fabric's per piece (reports/overlap.py): the
recurrence on cases worked by hand, its bounds and a second derivation (longest path of the
dependency graph) over random inputs, the pieces of a phase worked by hand, the host's work
placed after the phases by hand, and the planned MiniLM design: with no host work the
overlapped step is the fabric's, with it between max(fabric, host) and their sum."""
import functools

import pytest
from hypothesis import given, settings, strategies as st

from zoforge.errors import ConfigError
from zoforge.hw.accel.config import AcceleratorConfig
from zoforge.hw.accel.schedule import Job, step_schedule
from zoforge.reports.accel_cost import host_seconds, host_stage_ops, price_schedule
from zoforge.reports.model_shape import ModelShape
from zoforge.reports.overlap import Stage, makespan, phase_stage, step_stages


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


@pytest.mark.parametrize("stages", [
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


def _longest_path(stages) -> float:
    """A second derivation: the longest path of the graph whose nodes are the pieces on
    each resource (the host ``h``, the stage's own: ``fabric`` or ``softmax``), its edges
    each resource's order and the dependencies."""
    nodes = []                                   # (resource, stage, piece)
    for p, stage in enumerate(stages):
        nodes += [(stage.resource, p, c) for c in range(len(stage.fabric))]
        nodes += [("h", p, c) for c in range(len(stage.host))]
    order = {r: [n for n in nodes if n[0] == r] for r in {n[0] for n in nodes}}

    @functools.lru_cache(maxsize=None)
    def end(node) -> float:
        r, p, c = node
        stage = stages[p]
        before = [order[r][order[r].index(node) - 1]] if order[r].index(node) else []
        if r == "h":
            before.append((stage.resource, p, c))
        elif stage.needs[c] >= 0:
            before.append(("h", p - 1, stage.needs[c]))
        return max([end(n) for n in before] + [0.0]) + (
            stage.host[c] if r == "h" else stage.fabric[c])
    return max(end(n) for n in nodes)


@st.composite
def _stages(draw):
    out, previous = [], 0
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, 4))
        seconds = st.floats(0, 10, allow_nan=False)
        needs = [draw(st.integers(-1, previous - 1)) if previous else -1 for _ in range(n)]
        out.append(Stage(tuple(draw(seconds) for _ in range(n)),
                         tuple(draw(seconds) for _ in range(n)), tuple(needs),
                         resource=draw(st.sampled_from(("fabric", "softmax")))))
        previous = n
    return out


@settings(max_examples=150, deadline=None)
@given(_stages())
def test_makespan_is_the_longest_path_and_within_its_bounds(stages):
    total_f = sum(sum(s.fabric) for s in stages)
    total_h = sum(sum(s.host) for s in stages)
    busiest = max(sum(sum(s.fabric) for s in stages if s.resource == r)
                  for r in ("fabric", "softmax"))
    span = makespan(stages)
    assert span == pytest.approx(_longest_path(stages), rel=1e-12, abs=1e-12)
    assert max(busiest, total_h) - 1e-9 <= span <= total_f + total_h + 1e-9


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
    schedule = step_schedule(MINILM, PLANNED, 0, "split", attention)
    price = price_schedule(schedule, 252.0, 21.3e9)
    phases = [(p.name, p.jobs, c.job_cycles, c.time_s) for p, c in
              zip(schedule.phases, price.phases)]
    # no host work: the fabric's pieces add up to the serial fabric time
    idle = step_stages([(*p, (0.0, 0.0)) for p in phases], 0.0, MINILM.seq_len)
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
    return step_stages([(*p, (host_seconds(work.get(p[0], ({}, {}))[0]),
                              host_seconds(work.get(p[0], ({}, {}))[1]))) for p in phases],
                       host_seconds(work["start"][0]), MINILM.seq_len)

def test_planned_design_overlap_with_softmax_units():
    """The planned design with two 7-lane softmax units, nonlinear integer: the softmax
    phases run on the units (a resource of their own), so the accelerator alone (no host
    work) is under its phases one after the other and at least the engines' part; the host's
    pieces add up to its whole work; the step between max(accelerator, host) and their
    sum."""
    accel = PLANNED.replace(softmax_units=2, softmax_lanes=7)
    schedule = step_schedule(MINILM, accel, 0, "split", "engines", "integer")
    price = price_schedule(schedule, 252.0, 21.3e9, 249.0)
    phases = [(p.name, p.jobs, c.job_cycles, c.time_s) for p, c in
              zip(schedule.phases, price.phases)]
    idle = step_stages([(*p, (0.0, 0.0)) for p in phases], 0.0, MINILM.seq_len)
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
