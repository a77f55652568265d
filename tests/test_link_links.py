# amaranth: UnusedElaboratable=no
"""An accelerator's attention links (hw/link/links.py, ``AttentionLinks``: every engine's
``ScoresLink`` and every softmax unit's ``FrameSelect``) against the golden model
(:func:`zoforge.golden.link.link_frames`), beat by beat and value by value, in Amaranth's
simulator with the engines' clock (``sync``) and the softmax units' (``softmax``) of
different periods, both ratios: three engines into two softmax units (engines 0 and 2 into
unit 0, engine 1 into unit 1), each engine's frames mixing pass-through (route 0) and
linked (route 1) jobs, the DDR's frames for each unit interleaved with the linked ones by
the host's select entries; random idle cycles on every input stream, random back-pressure
on every output, job and select entries queued ahead and late; every output beat and
``tlast`` of every port compared, no beat extra, each output's beat held while not taken,
no error. Also: a unit no engine links to (its DDR stream passed straight through); the
golden against a second derivation (each unit's input rebuilt from the scores themselves);
the ports and the configuration's bounds; lint of the generated Verilog."""
from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.sim import Simulator
from axis_sim import axis_sink, split_frames, stable_while_stalled, until_taken

from zoforge.errors import ConfigError
from zoforge.golden.link import engine_order, link_frames, softmax_order
from zoforge.hw.accel import AcceleratorConfig
from zoforge.hw.export import to_verilog
from zoforge.hw.link.links import AttentionLinks, linked_engines
from zoforge.hw.link.select import MAX_SOURCES
from zoforge.sim.lint import lint_verilog

#: Three engines of 2 x 3 tiles, two softmax units of 4 lanes, jobs of up to 5 x 7 scores.
CONFIG = AcceleratorConfig(engines=3, engine_rows=2, engine_cols=3, engine_max_m=16,
                           engine_max_k=16, engine_max_n=16, softmax_units=2,
                           softmax_lanes=4, softmax_max_len=8, link=True, link_max_rows=5,
                           link_max_len=7)
#: (sync, softmax) clock periods, seconds: the softmax domain slower, then faster.
PERIODS = {"sm-slow": (3.3e-9, 4e-9), "sm-fast": (4e-9, 3.3e-9)}
INT32 = (-2 ** 31, 2 ** 31)


def word(beat) -> int:
    """A beat's int32 lanes as one ``tdata`` integer (lane 0 in the low bits)."""
    return int.from_bytes(np.asarray(beat, "<i4").tobytes(), "little")


def ints(rng, shape) -> np.ndarray:
    return rng.integers(*INT32, shape, dtype=np.int64).astype(np.int32)


def make_case(rng, config: AcceleratorConfig, frames_each=(4, 7), ddr_each=(2, 4)):
    """Random frames: per engine 4 to 7 (both routes; the linked ones random M x L scores
    with the engine's padding random, the others 1 to 6 random beats), per unit 2 to 4 DDR
    frames of 1 to 5 beats, and per unit a random order of select entries taking every
    frame once. Returns (engine_frames, engine_jobs, scores, ddr_frames, selects): scores[e]
    engine e's linked jobs' scores in order."""
    link = config.link_config()
    engine_frames, engine_jobs, scores = [], [], []
    for _ in range(config.engines):
        count = int(rng.integers(*frames_each, endpoint=True))
        routes = [0, 1] + [int(rng.integers(0, 2)) for _ in range(count - 2)]
        rng.shuffle(routes)
        frames, jobs, linked = [], [], []
        for route in routes:
            if route:
                m = int(rng.integers(1, link.max_rows + 1))
                length = int(rng.integers(1, link.max_len + 1))
                s = ints(rng, (m, length))
                pad = ints(rng, (m + link.rows, length + link.cols))
                frames.append(engine_order(s, link.rows, link.cols, pad))
                jobs.append((1, m, length))
                linked.append(s)
            else:
                frames.append(ints(rng, (int(rng.integers(1, 7)), link.cols)))
                jobs.append((0, int(rng.integers(0, link.max_rows + 1)),
                             int(rng.integers(0, link.max_len + 1))))
        engine_frames.append(frames)
        engine_jobs.append(jobs)
        scores.append(linked)
    ddr_frames, selects = [], []
    for u in range(config.softmax_units):
        ddr = [ints(rng, (int(rng.integers(1, 6)), link.lanes))
               for _ in range(int(rng.integers(*ddr_each, endpoint=True)))]
        order = [0] * len(ddr) + [1 + j for j, e in enumerate(linked_engines(config, u))
                                  for _ in scores[e]]
        rng.shuffle(order)
        ddr_frames.append(ddr)
        selects.append([int(k) for k in order])
    return engine_frames, engine_jobs, scores, ddr_frames, selects


def run(config, engine_frames, engine_jobs, ddr_frames, selects, *, periods, seed, idle=0.3,
        stall=0.3, late=0.3, limit=20_000):
    """Simulate :class:`AttentionLinks` of ``config``: each engine offering its frames and
    the DDR offering each unit's (idle cycles at random before each beat), the host pushing
    each engine's job entries (in ``sync``) and each unit's select entries (in
    ``softmax``), a ``late`` share of the job entries only once their frame's first beat is
    offered, the others after 0 to 3 idle cycles; every output taking beats with ``stall``
    back-pressure in its own clock. Returns each output's sink record and ``error`` in each
    sync cycle."""
    rng = random.Random(seed)
    dut = AttentionLinks(config)
    link = config.link_config()
    offered = [[False] * len(frames) for frames in engine_frames]

    def source(port, frames, domain, seen=None):
        async def bench(ctx):
            for k, frame in enumerate(frames):
                for b, beat in enumerate(frame):
                    while rng.random() < idle:
                        await ctx.tick(domain)
                    ctx.set(port.tdata, word(beat))
                    ctx.set(port.tlast, int(b == len(frame) - 1))
                    ctx.set(port.tvalid, 1)
                    if seen is not None:
                        seen[k] = True
                    await until_taken(ctx, domain, port.tready)
                    ctx.set(port.tvalid, 0)
        return bench

    def host(port, entries, domain, seen=None):
        async def bench(ctx):
            for k, entry in enumerate(entries):
                if seen is not None and rng.random() < late:
                    while not seen[k]:
                        await ctx.tick(domain)
                for _ in range(rng.randint(0, 3)):
                    await ctx.tick(domain)
                ctx.set(port.payload, entry)
                ctx.set(port.valid, 1)
                await until_taken(ctx, domain, port.ready)
                ctx.set(port.valid, 0)
        return bench

    passed, routed = link_frames(engine_frames, engine_jobs, ddr_frames, selects,
                                 link.rows, link.cols, link.lanes)
    sinks, records = [], {}
    for e in range(config.engines):
        bench, records[f"ddr_axis[{e}]"] = axis_sink(
            dut.ddr_axis[e], sum(map(len, passed[e])), rng, stall=stall, limit=limit,
            watch=40)
        sinks.append(bench)
    for u in range(config.softmax_units):
        bench, records[f"softmax_axis[{u}]"] = axis_sink(
            dut.softmax_axis[u], sum(map(len, routed[u])), rng, stall=stall, limit=limit,
            domain="softmax", watch=40)
        sinks.append(bench)
    errors = []

    async def monitor(ctx):
        cycle = 0
        while not all(r["done"] for r in records.values()) and cycle < 2 * limit:
            _, _, *flags = await ctx.tick().sample(*dut.error)
            errors.append(tuple(int(f) for f in flags))
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(periods[0], domain="sync")
    sim.add_clock(periods[1], domain="softmax")
    for e in range(config.engines):
        sim.add_testbench(source(dut.engine_axis[e], engine_frames[e], "sync", offered[e]),
                          background=True)
        jobs = [{"route": r, "m": m, "length": length} for r, m, length in engine_jobs[e]]
        sim.add_testbench(host(dut.job[e], jobs, "sync", offered[e]), background=True)
    for u in range(config.softmax_units):
        sim.add_testbench(source(dut.ddr_in[u], ddr_frames[u], "softmax"), background=True)
        sim.add_testbench(host(dut.select[u], selects[u], "softmax"), background=True)
    for bench in sinks:
        sim.add_testbench(bench)
    sim.add_testbench(monitor)
    sim.run()
    return records, errors, (passed, routed)


def check(records, errors, golden):
    """Every output's frames against the golden, word for word with ``tlast`` on each
    frame's last beat; nothing more; each output's beat held while not taken; no error."""
    passed, routed = golden
    for name, frames in [(f"ddr_axis[{e}]", f) for e, f in enumerate(passed)] + \
                        [(f"softmax_axis[{u}]", f) for u, f in enumerate(routed)]:
        rec = records[name]
        assert rec["done"], name
        got = split_frames(rec["beats"], rec["lasts"])
        assert len(got) == len(frames), f"{name}: {len(got)} frames, not {len(frames)}"
        for k, (mine, gold) in enumerate(zip(got, frames)):
            assert mine == [word(beat) for beat in gold], f"{name} frame {k}"
        assert rec["extra"] == 0, name
        assert stable_while_stalled(rec["trace"]), name
    assert errors and not any(any(flags) for flags in errors)


@pytest.mark.parametrize("ratio", list(PERIODS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_output_is_the_golden_under_idle_and_back_pressure(ratio, seed):
    rng = np.random.default_rng(seed * 10 + len(ratio))
    engine_frames, engine_jobs, scores, ddr_frames, selects = make_case(rng, CONFIG)
    assert all(1 in s and 2 in s for s in selects[:1]) and 1 in selects[1]
    records, errors, golden = run(CONFIG, engine_frames, engine_jobs, ddr_frames, selects,
                                  periods=PERIODS[ratio], seed=seed)
    check(records, errors, golden)


def test_streams_always_ready():
    """No idle cycle, no back-pressure, every entry queued at once: the same frames."""
    rng = np.random.default_rng(7)
    case = make_case(rng, CONFIG)
    engine_frames, engine_jobs, _, ddr_frames, selects = case
    records, errors, golden = run(CONFIG, engine_frames, engine_jobs, ddr_frames, selects,
                                  periods=PERIODS["sm-slow"], seed=7, idle=0.0, stall=0.0,
                                  late=0.0)
    check(records, errors, golden)


def test_a_unit_no_engine_links_to_takes_the_ddrs_stream_alone():
    """One engine, two softmax units: unit 1 has no selector, its DDR frames pass straight
    through and its select entries are taken and ignored."""
    config = CONFIG.replace(engines=1)
    dut = AttentionLinks(config)
    assert dut.sources == [[0], []] and dut.selects[1] is None
    rng = np.random.default_rng(3)
    engine_frames, engine_jobs, _, ddr_frames, selects = make_case(rng, config)
    selects[1] = [0] * len(ddr_frames[1])
    records, errors, golden = run(config, engine_frames, engine_jobs, ddr_frames, selects,
                                  periods=PERIODS["sm-fast"], seed=3)
    check(records, errors, golden)


def test_the_golden_against_a_second_derivation():
    """Unit u's input rebuilt from the scores: entry k naming source 0 is the DDR's next
    frame, naming ``1 + j`` the next linked job's scores of engine ``u + j S``, row by row
    (softmax_order); each engine's DDR side its route-0 frames; bad inputs one-line
    errors."""
    link = CONFIG.link_config()
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        config = CONFIG.replace(engines=int(rng.integers(1, 6)),
                                softmax_units=int(rng.integers(1, 4)))
        engine_frames, engine_jobs, scores, ddr_frames, selects = make_case(rng, config)
        passed, routed = link_frames(engine_frames, engine_jobs, ddr_frames, selects,
                                     link.rows, link.cols, link.lanes)
        for e in range(config.engines):
            assert [f.tolist() for f in passed[e]] == [
                f.tolist() for f, (route, *_) in zip(engine_frames[e], engine_jobs[e])
                if route == 0]
        for u in range(config.softmax_units):
            queues = [list(ddr_frames[u])] + [
                [softmax_order(s, link.lanes) for s in scores[e]]
                for e in range(u, config.engines, config.softmax_units)]
            derived = [queues[k].pop(0) for k in selects[u]]
            assert len(routed[u]) == len(derived)
            for got, want in zip(routed[u], derived):
                assert np.array_equal(got, want)
            assert not any(queues)                       # every frame taken once
    args = (link.rows, link.cols, link.lanes)
    frame = engine_order(np.zeros((1, 1), np.int32), link.rows, link.cols)
    for inputs, parameter in (
            (([[frame]], [], [[]], [[]]), "engine_jobs"),
            (([[frame]], [[(1, 1, 1)]], [[]], []), "selects"),
            (([[frame]], [[(1, 1, 1)]], [[]], [[2]]), "order"),
            (([[frame]], [[(1, 1, 1)]], [[]], [[1, 1]]), "order"),
            (([[frame]], [[(3, 1, 1)]], [[]], [[]]), "jobs[0].route")):
        with pytest.raises(ConfigError) as error:
            link_frames(*inputs, *args)
        assert error.value.parameter == parameter and "\n" not in str(error.value)


def test_ports_and_sources():
    dut = AttentionLinks(CONFIG)
    assert dut.sources == [[0, 2], [1]]
    assert [s.sources for s in dut.selects] == [3, 2]
    assert len(dut.engine_axis) == len(dut.ddr_axis) == len(dut.job) == 3
    assert len(dut.ddr_in) == len(dut.softmax_axis) == len(dut.select) == 2
    assert (len(dut.engine_axis[0].tdata), len(dut.softmax_axis[1].tdata)) == (96, 128)
    assert len(dut.select[0].payload) == 2                  # range(1 + links_per_unit)
    assert set(dut.job[2].payload.shape().members) == {"route", "m", "length"}
    assert [linked_engines(CONFIG.replace(engines=7, softmax_units=3), u)
            for u in range(3)] == [[0, 3, 6], [1, 4], [2, 5]]


def test_configuration_bounds():
    """Without ``link`` there are no links to build; one unit takes 15 engines' links (its
    selector's 16 sources, the most), not 16."""
    with pytest.raises(ConfigError) as error:
        AttentionLinks(CONFIG.replace(link=False))
    assert error.value.parameter == "link" and "\n" not in str(error.value)
    most = AttentionLinks(CONFIG.replace(engines=MAX_SOURCES - 1, softmax_units=1))
    assert most.selects[0].sources == MAX_SOURCES
    with pytest.raises(ConfigError) as error:
        CONFIG.replace(engines=MAX_SOURCES, softmax_units=1)
    assert error.value.parameter == "softmax_units" and "\n" not in str(error.value)
    with pytest.raises(ConfigError) as error:
        CONFIG.replace(link_max_len=9)                      # past softmax_max_len
    assert error.value.parameter == "link_max_len"


def test_lint_clean():
    """``verilator --lint-only -Wall`` with the project's waivers (the ``link_*`` block):
    three engines into two units, and one engine into two (a unit without a selector)."""
    for config in (CONFIG, CONFIG.replace(engines=1)):
        top = f"link_links_{config.engines}x{config.softmax_units}"
        text = to_verilog(AttentionLinks(config), top)
        assert "input softmax_clk" in text
        result = lint_verilog(text, top)
        assert result.clean, str(result)


def test_the_link_design_is_registered(tmp_path):
    """Design ``link`` (what ``zoforge build --design link`` builds): a LinkConfig, a
    ``link_*`` top naming its softmax domain for a board harness, its memories sized
    without elaboration, lint clean, and on the board (the Vivado project's harness) both
    clocks driven."""
    from zoforge.boards.harness import write_vivado_project
    from zoforge.boards.registry import get_board
    from zoforge.hw.designs import get_design
    from zoforge.hw.link.config import LinkConfig
    from zoforge.hw.link.designs import link_memories
    design = get_design("link")
    assert design.configs == (LinkConfig,)
    config = CONFIG.link_config()
    elaborated = design.elaborate(config)
    assert elaborated.name == "link_path_2x3_4_5x7"
    assert elaborated.top.clock_domains == ("softmax",)
    memories = link_memories(config)
    assert len(memories) == config.memories + 1
    assert memories["link.reorder.keys_0"].words == config.depth
    assert memories["link.cross"].bits == config.fifo_depth * (32 * config.lanes + 1)
    text = to_verilog(elaborated.top, elaborated.name)
    result = lint_verilog(text, elaborated.name)
    assert result.clean, str(result)
    board_top = write_vivado_project(get_board("zcu102"), elaborated.top, tmp_path, 300.0)
    assert "softmax_clk" in board_top["top.v"].read_text()
