# amaranth: UnusedElaboratable=no
"""The integer softmax unit with its bus interfaces (design ``softmax``, ``hw/softmax/``) and
its calls on the RTL (``sim/softmax_cosim.py``).

By default (Amaranth's simulator, the unit's own host program ``softmax_program`` driven by a
small AXI4-Lite / AXI4-Stream bench here): jobs back to back on 3 lanes with rows of 7 keys
or fewer (L not a multiple of lanes), masked keys, a job with no kept key, both ends of int32,
values past the clamp, random input idling and 40 % output back-pressure, every value equal
to a second derivation in plain Python integers (``test_softmax_unit.reference_softmax``);
the cycle model exact with nothing stalled; STATUS, irq, tlast; a planted bug (a key mask word
left out) seen; the constants and calls the unit cannot take refused in one line; the
configuration's round trip and bounds; lint. Slow (Verilator job server): 1, 3, 8 and 16
lanes, MiniLM's rows of 128 with padded sequences, many jobs of one call, stalls, the cycle
model, ``zoforge cosim softmax``.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from amaranth.back import verilog
from amaranth.sim import Simulator

from test_softmax_unit import reference_softmax
from zoforge.errors import ConfigError
from zoforge.golden.finetune import integer_ops
from zoforge.golden.finetune.calls import GoldenUnits, SoftmaxCall
from zoforge.golden.finetune.integer_ops import SoftmaxParams
from zoforge.hw.nonlinear.softmax import LEVELS, SoftmaxWidths
from zoforge.hw.softmax.config import MINILM_MIN_SCALE, SCALES, SoftmaxConfig
from zoforge.hw.softmax.cycles import softmax_job_cycles, softmax_stream_bytes
from zoforge.hw.softmax.designs import elaborate_softmax, softmax_memories
from zoforge.hw.softmax.regmap import KEY_MASK, REGISTER_MAP, REGISTERS
from zoforge.hw.softmax.registers import info_values
from zoforge.hw.softmax.top import SoftmaxBusUnit
from zoforge.sim.lint import lint_verilog
from zoforge.sim.program import Reply, Read, Receive, Send, Write, Idle, Poll, drive_async
from zoforge.sim.softmax_cosim import program_inputs, softmax_jobs, unpack_output
from zoforge.sim.softmax_host import softmax_program

SMALL = SoftmaxConfig(lanes=3, max_len=7, min_scale=2.0 ** -15)
SCALE = 1.5e-4                    # MiniLM's finest scores' scale


# -- an AXI4-Lite / AXI4-Stream bench in Amaranth's simulator ------------------------------------

def run_program_amaranth(config: SoftmaxConfig, program, *, idle: float = 0.0,
                         stall: float = 0.0, seed: int = 0, top=None):
    """Run a host program (:mod:`zoforge.sim.program`) on the bus unit: AXI4-Lite one
    operation at a time, the input frames streamed in the background (each beat preceded by
    idle cycles with probability ``idle``), the output taken with ``tready`` low with
    probability ``stall``. Returns the program's value."""
    dut = top if top is not None else SoftmaxBusUnit(config)
    rng = np.random.default_rng(seed)
    beats, frames, current = [], [], []
    bus, s, o = dut.s_axil, dut.s_axis, dut.m_axis
    clock = {"cycle": 0}

    async def tick(ctx, *signals):
        values = await ctx.tick().sample(*signals)
        clock["cycle"] += 1
        return values[2:]

    async def write(ctx, address, value):
        for name, v in (("awaddr", address), ("wdata", value), ("wstrb", 0xF),
                        ("awvalid", 1), ("wvalid", 1)):
            ctx.set(getattr(bus, name), v)
        while not (await tick(ctx, bus.awready))[0]:
            pass
        ctx.set(bus.awvalid, 0)
        ctx.set(bus.wvalid, 0)
        ctx.set(bus.bready, 1)
        while True:
            valid, resp = await tick(ctx, bus.bvalid, bus.bresp)
            if valid:
                break
        ctx.set(bus.bready, 0)
        return [resp]

    async def read(ctx, address):
        ctx.set(bus.araddr, address)
        ctx.set(bus.arvalid, 1)
        while not (await tick(ctx, bus.arready))[0]:
            pass
        ctx.set(bus.arvalid, 0)
        ctx.set(bus.rready, 1)
        while True:
            valid, data, resp = await tick(ctx, bus.rvalid, bus.rdata, bus.rresp)
            if valid:
                break
        ctx.set(bus.rready, 0)
        return [data, resp]

    async def execute(ctx, batch):
        replies = []
        for op in batch:
            words = []
            if isinstance(op, Write):
                words = await write(ctx, op.address, op.value)
            elif isinstance(op, Read):
                words = await read(ctx, op.address)
            elif isinstance(op, Send):
                per = config.lanes
                rows = op.words.reshape(-1, per)
                for n, row in enumerate(rows):
                    beats.append((sum(int(w) << 32 * l for l, w in enumerate(row)),
                                  n == len(rows) - 1))
            elif isinstance(op, Receive):
                while not frames:
                    await tick(ctx)
                words = frames.pop(0)
            elif isinstance(op, Idle):
                for _ in range(op.cycles):
                    await tick(ctx)
            elif isinstance(op, Poll):
                while not (value := (await read(ctx, op.address))[0]) & op.mask:
                    for _ in range(op.gap):
                        await tick(ctx)
                words = [value]
            replies.append(Reply(clock["cycle"], bool(ctx.get(dut.irq)),
                                 np.array(words, np.uint32)))
        return replies

    outcome = {}

    async def host(ctx):
        outcome["value"] = await drive_async(program, lambda batch: execute(ctx, batch))

    async def source(ctx):
        while True:
            if not beats or rng.random() < idle:
                ctx.set(s.tvalid, 0)
                await ctx.tick()
                continue
            data, last = beats[0]
            ctx.set(s.tdata, data)
            ctx.set(s.tlast, last)
            ctx.set(s.tvalid, 1)
            _, _, ready = await ctx.tick().sample(s.tready)
            if ready:
                beats.pop(0)

    async def sink(ctx):
        while True:
            ready = rng.random() >= stall
            ctx.set(o.tready, ready)
            _, _, valid, data, last = await ctx.tick().sample(o.tvalid, o.tdata, o.tlast)
            if valid and ready:
                current.extend((int(data) >> 32 * n) & 0xFFFFFFFF
                               for n in range(config.out_words))
                if last:
                    frames.append(list(current))
                    current.clear()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(host)
    sim.add_testbench(source, background=True)
    sim.add_testbench(sink, background=True)
    sim.run()
    return outcome["value"]


def plain(call: SoftmaxCall) -> list:
    """The call's p by the plain-integer derivation, job by job and row by row."""
    scores = call.scores.reshape(-1, *call.scores.shape[-2:]).tolist()
    keep = call.keep.reshape(-1, call.scores.shape[-1]).tolist()
    return [[reference_softmax(row, k, call.params.scale, call.levels) for row in job]
            for job, k in zip(scores, keep)]


def on_amaranth(calls, config=SMALL, **kwargs):
    """The calls' jobs on the bus unit in Amaranth's simulator: (per call its p as nested
    lists, the jobs' counters, the jobs)."""
    per_call = [softmax_jobs(call, config) for call in calls]
    jobs = [job for part in per_call for job in part]
    args, data = program_inputs(jobs, config)
    arrays, results = run_program_amaranth(config, softmax_program(args, data), **kwargs)
    outs, n = [], 0
    for call, part in zip(calls, per_call):
        rows = [unpack_output(arrays[f"out{n + j}"], job, config) for j, job in enumerate(part)]
        n += len(part)
        outs.append(np.concatenate(rows).reshape(call.scores.shape).tolist())
    return outs, results["jobs"], jobs


def call_of(rows, keep, scale=SCALE, name="t.softmax") -> SoftmaxCall:
    return SoftmaxCall(name, torch.tensor(rows, dtype=torch.int64)[None],
                       torch.tensor(keep)[None], SoftmaxParams.of(scale), LEVELS)


def corner_calls(rng) -> list[SoftmaxCall]:
    """Jobs on the 3-lane unit: rows of 7 (three beats, the last one lane), 5, 3, 1 keys;
    masked keys; a job with no kept key; both ends of int32; the clamp's edge."""
    p = SoftmaxParams.of(SCALE)
    top, ends = 2 ** 31 - 1, -2 ** 31
    edge = 15 * p.ln2
    calls = [
        call_of([[top, ends, 0, top - edge, top - edge - 1, top - edge + 1, top - 1],
                 [ends, ends + 1, ends + edge, ends + 2, ends, ends, ends + 5]],
                [True] * 7),
        call_of([[5, 9, -3, 100, 7], [0, 0, 0, 0, 0], [3, 1, 4, 1, 5]],
                [True, False, True, False, True]),
        call_of([[1, 2, 3], [ends, top, 0]], [False] * 3),           # nothing kept: zeros
        call_of([[-7]], [True], scale=2.0 ** -7),
        call_of(rng.integers(-40 * p.ln2, 0, (4, 6)).tolist(), (rng.random(6) < 0.7).tolist(),
                scale=2.0 ** -15),
    ]
    return calls


def test_the_bus_unit_equals_plain_ints_under_idle_and_backpressure():
    """Five jobs back to back (L = 7, 5, 3, 1, 6 on 3 lanes), random input idling and 40 %
    output back-pressure: every p the second derivation's; tlast on each job's last beat,
    done and irq after each (the host program's checks)."""
    calls = corner_calls(np.random.default_rng(3))
    outs, stats, _ = on_amaranth(calls, idle=0.3, stall=0.4, seed=5)
    for call, out in zip(calls, outs):
        assert out == plain(call), call.scores.tolist()
    assert outs[2] == [[[0, 0, 0], [0, 0, 0]]]
    assert all(s["irq"] and s["status"] & 0b11 == 0b10 for s in stats)


def test_cycle_model_is_exact_with_nothing_stalled():
    calls = corner_calls(np.random.default_rng(4))
    outs, stats, jobs = on_amaranth(calls)
    assert [s["cycles"] for s in stats] == [softmax_job_cycles(SMALL, j.rows, j.length)
                                            for j in jobs]
    assert outs == [plain(call) for call in calls]


def test_a_planted_bug_is_seen(monkeypatch):
    """The host writing no key mask word (all keys masked from the reset value) gives zeros
    where the golden has probabilities: the comparison sees it."""
    import zoforge.sim.softmax_cosim as cosim
    call = call_of([[1, 2, 3, 4, 5]], [True] * 5)
    monkeypatch.setattr(cosim, "_mask_words", lambda keep, config: np.zeros(0, np.uint32))
    outs, _, _ = on_amaranth([call])
    assert outs[0] != plain(call) and outs[0] == [[[0] * 5]]


def test_registers_read_back_and_info():
    """The constants, LENGTH, ROWS and the key mask read back as written (C_HI 0 for a c of
    32 bits, the key mask its max_len bits); INFO, MAX_LEN and WIDTHS are the build's."""
    c = SMALL
    w = SoftmaxWidths.of(c.min_scale)
    info = info_values(c)
    assert info == {"INFO": 3 | 127 << 8 | 32 << 16, "MAX_LEN": 7,
                    "WIDTHS": w.ln2 | w.b << 8 | w.c << 16 | w.shift << 24}
    assert (w.ln2, w.b, w.c, w.shift) == (15, 17, 32, 5)
    written = {"LENGTH": 6, "ROWS": 513, "LN2": 0x7FFF, "B": 0x1FFFF, "C": 0xFFFFFFFF,
               "C_HI": 0xFFFF, "SHIFT": 0x1F}

    def program():
        replies = yield ([Write(REGISTERS[n], v) for n, v in written.items()]
                         + [Write(KEY_MASK, 0xFFFFFFFF)]
                         + [Read(REGISTERS[n]) for n in (*written, *info)] + [Read(KEY_MASK)])
        return [r.value for r in replies[len(written) + 1:]]
    got = run_program_amaranth(c, program())
    assert got == [6, 513, 0x7FFF, 0x1FFFF, 0xFFFFFFFF, 0, 0x1F, *info.values(), 0x7F]


# -- the constants, the calls the unit cannot take, the configuration ------------------------

def test_refused_calls_are_one_line():
    ok = call_of([[1, 2]], [True, True])
    cases = {
        "softmax constant ln2": SoftmaxCall("t", ok.scores, ok.keep, SoftmaxParams.of(2e-5),
                                            LEVELS),                  # finer than 2^-15
        "length": call_of([[1] * 8], [True] * 8),                     # past max_len 7
        "levels": SoftmaxCall("t", ok.scores, ok.keep, ok.params, 255),
        "scores": call_of([[2 ** 31, 0]], [True, True]),              # not int32
    }
    for name, call in cases.items():
        with pytest.raises(ConfigError) as error:
            softmax_jobs(call, SMALL)
        assert error.value.parameter == name and "\n" not in str(error.value)
    with pytest.raises(ConfigError) as error:
        SoftmaxCall("t", ok.scores, torch.ones(1, 3, dtype=torch.bool), ok.params, LEVELS)
    assert error.value.parameter == "keep" and "\n" not in str(error.value)


def test_minilm_scales_fit_the_default_unit_and_finer_ones_do_not():
    default = SoftmaxConfig()
    assert default.min_scale == MINILM_MIN_SCALE and (default.lanes, default.max_len) == (8, 128)
    for scale in (1.5e-4, 1.5e-3, MINILM_MIN_SCALE, SCALES[1]):
        softmax_jobs(call_of([[1, 2]], [True, True], scale=scale), default)
    with pytest.raises(ConfigError, match="^softmax constant"):
        softmax_jobs(call_of([[1, 2]], [True, True], scale=MINILM_MIN_SCALE / 2), default)


def test_configuration_bounds_and_round_trip(tmp_path):
    from zoforge.config import dump_config, load_config
    assert SCALES == (integer_ops.MIN_SCALE, integer_ops.MAX_SCALE)
    config = SoftmaxConfig(lanes=5, max_len=33, min_scale=1e-4)
    assert load_config(dump_config(config, tmp_path / "s.toml"), [SoftmaxConfig]) == config
    for field, value in (("lanes", 0), ("lanes", 65), ("max_len", 1025), ("min_scale", 1e-9),
                         ("min_scale", 0.01)):
        with pytest.raises(ConfigError) as error:
            SoftmaxConfig(**{field: value})
        assert error.value.parameter == field and "\n" not in str(error.value)
    assert (config.max_beats, config.mask_words, config.out_words) == (7, 2, 2)
    assert softmax_stream_bytes(config, 3, 11) == {"scores": 3 * 3 * 20, "p": 3 * 3 * 8,
                                                   "registers": 4 * (2 + 4)}
    sizes = softmax_memories(config)
    assert sizes["rows"].words == sizes["exps"].words == 4 * 8


def test_register_map_is_well_formed():
    addresses = [r.address for r in REGISTER_MAP.values()]
    assert len(set(addresses)) == len(addresses) and max(addresses) < KEY_MASK
    assert all(a % 4 == 0 for a in addresses)


@pytest.mark.slow          # three Verilog lints (~6 s): CI's -m ci runs them
@pytest.mark.ci
def test_lint_clean():
    for config in (SMALL, SoftmaxConfig(), SoftmaxConfig(lanes=1, max_len=1)):
        design = elaborate_softmax(config)
        result = lint_verilog(verilog.convert(design.top, name=design.name), design.name)
        assert result.clean, str(result)


# -- on Verilator (slow) -------------------------------------------------------------------------

def minilm_call(rng, config, sequences=2, heads=2, length=128, scale=SCALE) -> SoftmaxCall:
    """Engine-attention-like scores of up to 3 sequences: per sequence a padded key mask
    (the first 1, 57 (or L / 2) and L keys kept), heads x L rows of L scores spread over
    20 ln2."""
    p = SoftmaxParams.of(scale)
    kept = [1, 57 if length > 57 else max(2, length // 2), length][:sequences]
    keep = torch.zeros(sequences * heads, length, dtype=torch.bool)
    for j in range(sequences * heads):
        keep[j, :kept[j // heads]] = True
    top = rng.integers(-2 ** 20, 2 ** 20, (sequences * heads, length, 1))
    scores = top - rng.integers(0, 20 * p.ln2, (sequences * heads, length, length))
    return SoftmaxCall("block0.softmax", torch.from_numpy(scores), keep, p, LEVELS)


@pytest.mark.slow
@pytest.mark.parametrize("lanes, max_len, stalls", [
    (8, 128, False), (8, 128, True), (3, 10, True), (1, 5, False), (16, 40, True)])
def test_softmax_cosim_on_verilator(lanes, max_len, stalls):
    """SoftmaxCosim: random calls and MiniLM-like stacks (heads of a sequence in one job),
    each value the golden's (and the plain derivation's on a sample), the jobs' CYCLES the
    model's where nothing stalls."""
    from zoforge.sim.softmax_cosim import SoftmaxCosim, random_call
    config = SoftmaxConfig(lanes=lanes, max_len=max_len)
    rng = np.random.default_rng(lanes)
    options = dict(source_idle=0.3, sink_backpressure=0.4, seed=lanes) if stalls else {}
    calls = [random_call(rng, config, 5) for _ in range(12)]
    calls.append(minilm_call(rng, config, 3, 2, max_len))
    with SoftmaxCosim(config, **options) as sim:
        for call in calls:
            out, cycles = sim.run(call)
            assert torch.equal(out, GoldenUnits.softmax(call)), call.name
            if not stalls:
                model = sum(softmax_job_cycles(config, j.rows, j.length)
                            for j in softmax_jobs(call, config))
                assert cycles == model
        assert len(sim.jobs) == 12 + 3                 # the stack: a job per sequence
    assert out[0, 0].tolist() == reference_softmax(call.scores[0, 0].tolist(),
                                                   call.keep[0].tolist(), SCALE)


@pytest.mark.slow
def test_zoforge_cosim_softmax(capsys):
    from zoforge.cli import main
    assert main(["cosim", "softmax", "--lanes", "4", "--max-len", "20", "--jobs", "6",
                 "--backpressure", "0.3"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["bit_exact"] is True and result["jobs"] == 6


@pytest.mark.slow
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_replay_on_the_cocotb_bench(simulator):
    """replay_softmax_calls: calls as one host program in the cocotbext-axi bench (which
    checks the AXI protocol), with input idling and output back-pressure, on Verilator and
    on Icarus (where the slots' selects once stayed X: hw/nonlinear/softmax.py's _pick)."""
    from zoforge.sim.backends import Stalls
    from zoforge.sim.softmax_cosim import random_call, replay_softmax_calls
    config = SoftmaxConfig(lanes=2, max_len=6)
    rng = np.random.default_rng(9)
    calls = [random_call(rng, config, 3) for _ in range(3)] + [minilm_call(rng, config, 2, 2, 6)]
    results, jobs = replay_softmax_calls(calls, config, backend="cocotb", simulator=simulator,
                                         stalls=Stalls(0.3, 0.4, 2))
    assert len(jobs) == 5
    for call, got in zip(calls, results):
        assert torch.equal(got, GoldenUnits.softmax(call))


@pytest.mark.slow
def test_a_fine_tuning_steps_softmax_calls_replay_on_the_rtl():
    """A ZoFinetune step of the tiny model with engine attention and the integer nonlinear
    functions, recorded on the golden units: each of its SoftmaxCalls (per block and forward)
    on the RTL unit of cosim_design equals the golden result the step used, and the P the
    context jobs got."""
    from zoforge.golden.finetune.config import FinetuneConfig
    from zoforge.golden.finetune.train import ZoFinetune, prepare
    from zoforge.golden.models import tiny_encoder
    from zoforge.sim.softmax_cosim import SoftmaxCosim, cosim_design
    cfg = FinetuneConfig(model="tiny", blocks=2, seq_len=8, batch=2, queries=1, n_train=8,
                         n_test=4, calibration=4, rank=4, engine_rows=4, engine_cols=4,
                         nonlinear="integer", attention="engines")
    prepared = prepare(cfg, tiny_encoder(hidden=32, layers=2, heads=2, intermediate=64))
    units = GoldenUnits(cfg.generator().golden(), cfg.layer_rows, record=True)
    ZoFinetune(prepared, "int8", units=units).step()
    log = units.log
    calls = [(n, c) for n, c in enumerate(log) if isinstance(c, SoftmaxCall)]
    assert len(calls) == 2 * 2 * cfg.queries                 # blocks x (+, -) forwards
    with SoftmaxCosim(cosim_design(cfg.seq_len, lanes=4)) as sim:
        for n, call in calls:
            got = sim(call)
            assert torch.equal(got, GoldenUnits.softmax(call)), call.name
            context = [c for c in log[n + 1:n + 1 + got.shape[0]]]
            assert [c.x.tolist() for c in context] == got.tolist()
        # a job per run of sequences with one key mask: whole sequences of 2 heads x L rows
        assert all(job["rows"] % (2 * cfg.seq_len) == 0 for job in sim.jobs)
        assert len(sim.jobs) >= len(calls)


def test_the_documented_register_table_is_the_register_map():
    """docs/nonlinear-units.md's register table: the names and addresses of REGISTER_MAP and
    the key mask's region, in order."""
    from pathlib import Path
    text = (Path(__file__).resolve().parent.parent / "docs" / "nonlinear-units.md").read_text()
    section = text[text.index("**Registers** (`hw/softmax/regmap.py`"):]
    section = section[:section.index("\n\n", section.index("| address |"))]
    rows = []
    for line in [l for l in section.splitlines() if l.startswith("| 0x")]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        addresses = [int(a.strip(". "), 16) for a in cells[0].split(",")]
        rows += list(zip(addresses, cells[1].replace(" ", "").split(",")))
    assert rows == [(r.address, name) for name, r in REGISTER_MAP.items()] + \
        [(KEY_MASK, "KEY_MASK")]


def test_parameters_written_while_busy_are_ignored():
    """A job's parameters are held while it runs: LENGTH, ROWS, the constants and the key
    mask written after the start (busy, read back as such) change neither the job's p (the
    second derivation's of what was written before the start) nor what the registers read
    back; a CTRL start while busy starts nothing (one output frame, done once, CYCLES
    counted from the first start)."""
    rng = np.random.default_rng(7)
    call = call_of(rng.integers(-3000, 3000, (6, 7)).tolist(), [True] * 5 + [False, True])
    (job,) = softmax_jobs(call, SMALL)
    args, data = program_inputs([job], SMALL)
    reg, mask = args["registers"], args["key_mask"]
    writes = args["jobs"][0]["writes"]
    setup = [Write(reg[n], v) for n, v in writes.items()]
    setup += [Write(mask + 4 * i, int(w)) for i, w in enumerate(data["job0_mask"])]
    poison = [Write(reg[n], 1) for n in writes] + [Write(mask, 0), Write(reg["CTRL"], 1)]
    readback = [Read(reg[n]) for n in writes] + [Read(mask), Read(reg["CYCLES"])]

    def program():
        replies = yield [*setup, Send(data["job0_frame"]), Write(reg["CTRL"], 1), *poison,
                         Read(reg["STATUS"]), Receive(), Idle(4), Read(reg["STATUS"]),
                         *readback]
        busy_then = replies[len(setup) + 2 + len(poison)].value
        received = replies[len(setup) + 3 + len(poison)]
        status, *values = [r.value for r in replies[-len(readback) - 1:]]
        return busy_then, received.words, status, values

    busy_then, words, status, values = run_program_amaranth(SMALL, program())
    assert busy_then & 0b01, "the poison writes must land while the job runs"
    out = unpack_output(words, job, SMALL).reshape(call.scores.shape).tolist()
    assert out == plain(call)
    assert status & 0b11 == 0b10                           # done, not busy: no second job
    # the registers as written before the start; CYCLES from that start (a second start
    # would have cleared it mid-job)
    assert values == [*writes.values(), int(data["job0_mask"][0]),
                      softmax_job_cycles(SMALL, job.rows, job.length)]
