# amaranth: UnusedElaboratable=no
"""The softmax unit's input selector (hw/link/select.py) against its golden model
(:mod:`zoforge.golden.link_select`), beat by beat, in Amaranth's simulator: two to seven
sources, queues of one to four entries, frames of one to six beats; each source offering
its frames with random idle cycles, entries queued early (the queue full: ``select.ready``
low) and late (a source's frame waiting for its entry), the sink's random back-pressure;
every output beat and ``tlast`` compared, no beat lost or taken early, the output's beat
held while not taken; the cycles with every stream ready; the golden against a second
derivation; bad parameters; lint; the Verilog under cocotb against the golden."""
from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from zoforge.errors import ConfigError
from zoforge.golden.link_select import select_frames
from zoforge.hw.export import to_verilog
from zoforge.hw.link.select import MAX_QUEUE, MAX_SOURCES, FrameSelect
from zoforge.sim.lint import lint_verilog

from axis_sim import axis_sink, split_frames, stable_while_stalled


def make_case(rng: random.Random, sources: int, bits: int, frames_each=(1, 4)):
    """Random frames per source (1 to 6 beats of ``bits``-bit words) and a random order
    taking each frame once."""
    frames = [[[rng.getrandbits(bits) for _ in range(rng.randint(1, 6))]
               for _ in range(rng.randint(*frames_each))] for _ in range(sources)]
    order = [s for s in range(sources) for _ in frames[s]]
    rng.shuffle(order)
    return frames, order


def run(dut, frames, order, *, seed, idle=0.3, stall=0.3, late=0.3, hold_sink=0,
        limit=20_000):
    """Simulate: a process per source offering its frames, the host queueing ``order``
    (each entry after random idle cycles, a ``late`` share of them only after their
    source's frame is offered), the sink taking beats with ``stall`` back-pressure (none
    for its first ``hold_sink`` cycles). Returns the received frames, the sink's trace and
    the cycles ``select.ready`` was low."""
    rng = random.Random(seed)
    total = sum(len(frame) for source in frames for frame in source)
    offered = [0] * len(frames)                       # frames each source has begun
    sink, rec = axis_sink(dut.m_axis, total, rng, stall=stall, hold=hold_sink, limit=limit)
    rec["full"] = 0

    def source(index):
        async def bench(ctx):
            port = dut.s_axis[index]
            for number, frame in enumerate(frames[index]):
                for position, word in enumerate(frame):
                    while rng.random() < idle:
                        await ctx.tick()
                    ctx.set(port.tdata, word)
                    ctx.set(port.tlast, position == len(frame) - 1)
                    ctx.set(port.tvalid, 1)
                    offered[index] = max(offered[index], number + 1)
                    while True:
                        _, _, ready = await ctx.tick().sample(port.tready)
                        if ready:
                            break
                    ctx.set(port.tvalid, 0)
        return bench

    async def host(ctx):
        seen = [0] * len(frames)
        for source_index in order:
            seen[source_index] += 1
            if rng.random() < late:                   # after its frame is offered
                while offered[source_index] < seen[source_index]:
                    await ctx.tick()
                for _ in range(rng.randint(0, 3)):
                    await ctx.tick()
            ctx.set(dut.select.payload, source_index)
            ctx.set(dut.select.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(dut.select.ready)
                if ready:
                    break
                rec["full"] += 1
            ctx.set(dut.select.valid, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for index in range(len(frames)):
        sim.add_testbench(source(index), background=True)
    sim.add_testbench(host, background=True)
    sim.add_testbench(sink)
    sim.run()
    return rec


CASES = [(2, 8, 1), (2, 32, 4), (3, 80, 2), (5, 17, 4), (7, 1, 3)]


@pytest.mark.parametrize("sources, bits, depth", CASES,
                         ids=[f"{s}x{b}q{d}" for s, b, d in CASES])
@pytest.mark.parametrize("seed", [1, 2])
def test_frames_in_the_hosts_order_under_idle_and_back_pressure(sources, bits, depth, seed):
    rng = random.Random(seed * 100 + sources)
    frames, order = make_case(rng, sources, bits)
    rec = run(FrameSelect(sources, bits, depth), frames, order, seed=seed)
    assert split_frames(rec["beats"], rec["lasts"]) == select_frames(frames, order)
    assert stable_while_stalled(rec["trace"])


def test_a_full_queue_holds_the_host_and_nothing_passes_before_the_sink_takes_it():
    """Eight entries into a queue of two while the sink takes nothing for 60 cycles: the
    host waits (``select.ready`` low), every frame still arrives whole and in order."""
    rng = random.Random(5)
    frames, order = make_case(rng, 3, 16, frames_each=(3, 3))
    rec = run(FrameSelect(3, 16, 2), frames, order, seed=5, idle=0.0, late=0.0,
              hold_sink=60)
    assert rec["full"] > 0
    assert rec["cycles"][0] >= 60
    assert split_frames(rec["beats"], rec["lasts"]) == select_frames(frames, order)


def test_cycles_with_every_stream_ready():
    """Entries queued from the start, sources and sink always ready: frame f's beats pass
    one a cycle, from the cycle after its entry is taken, one idle cycle between frames."""
    frames = [[[1, 2, 3], [4]], [[5, 6]]]
    order = [1, 0, 0]
    rec = run(FrameSelect(2, 8, 4), frames, order, seed=0, idle=0.0, stall=0.0, late=0.0)
    assert split_frames(rec["beats"], rec["lasts"]) == [[5, 6], [1, 2, 3], [4]]
    # the entry is queued in cycle 0, in the FIFO's output by cycle 2 (SyncFIFOBuffered),
    # taken there; beats from cycle 3: 3, 4 | idle 5 (taken) | 6, 7, 8 | 9 | 10
    starts = [rec["cycles"][0], rec["cycles"][2], rec["cycles"][5]]
    assert rec["cycles"] == [starts[0], starts[0] + 1, starts[1], starts[1] + 1,
                             starts[1] + 2, starts[2]]
    assert starts[1] == starts[0] + 2 + 1 and starts[2] == starts[1] + 3 + 1


def test_the_golden_against_a_second_derivation():
    """Entry k takes the frame of its source numbered by the entries for that source
    before it."""
    rng = random.Random(11)
    for _ in range(50):
        frames, order = make_case(rng, rng.randint(1, 6), 8)
        derived = [frames[s][order[:k].count(s)] for k, s in enumerate(order)]
        assert select_frames(frames, order) == derived
    with pytest.raises(ConfigError) as error:
        select_frames([[[1]]], [0, 0])
    assert str(error.value).startswith("order") and "\n" not in str(error.value)
    with pytest.raises(ConfigError):
        select_frames([[[1]]], [1])


@pytest.mark.parametrize("kwargs, parameter", [
    ({"sources": 1}, "sources"), ({"sources": MAX_SOURCES + 1}, "sources"),
    ({"data_bits": 0}, "data_bits"), ({"queue_depth": 0}, "queue_depth"),
    ({"queue_depth": MAX_QUEUE + 1}, "queue_depth")])
def test_bad_parameters_are_one_line(kwargs, parameter):
    args = {"sources": 2, "data_bits": 8, "queue_depth": 4} | kwargs
    with pytest.raises(ConfigError) as error:
        FrameSelect(**args)
    assert str(error.value).startswith(parameter) and "\n" not in str(error.value)
    FrameSelect(MAX_SOURCES, 8, MAX_QUEUE)                # the boundaries themselves


def test_lint_clean():
    """``verilator --lint-only -Wall`` with the project's waivers (the ``link_*`` block)."""
    for sources, bits, depth in ((2, 8, 1), (7, 320, 4)):
        top = "link_select"
        result = lint_verilog(to_verilog(FrameSelect(sources, bits, depth), top), top)
        assert result.clean, str(result)


@pytest.mark.parametrize("sources, bits, depth", [(3, 24, 2), (5, 1, 4)], ids=["3x24", "5x1"])
def test_cocotb_cosimulation_is_the_golden(tmp_path, simulator, sources, bits, depth):
    """The generated Verilog under cocotb (sim/benches/link_select.py): every source's
    frames offered at once with idle cycles, entries queued with idle cycles, back-pressure
    on the output; every output word and ``tlast`` against the golden model."""
    from zoforge.sim.cosim import run_cocotb
    frames, order = make_case(random.Random(sources), sources, bits)
    top = "link_select_cocotb"
    result = run_cocotb(verilog=to_verilog(FrameSelect(sources, bits, depth), top),
                        toplevel=top, test_module="zoforge.sim.benches.link_select",
                        simulator=simulator, data_dir=tmp_path,
                        args={"frames": frames, "order": order, "idle": 0.3,
                              "backpressure": 0.3, "seed": 3})
    assert result.passed, result.failures
    assert split_frames(result.results["out"], result.results["lasts"]) == \
        select_frames(frames, order)
