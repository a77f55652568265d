"""The ZO layer's register file from the bus side: the AXI4-Lite target and
:class:`~zoforge.hw.zolayer.control.LayerControl` as the layer joins them, on Amaranth's
simulator, against the register table of ``docs/zo-layer.md`` (parsed here: addresses,
access, widths, job codes), not against ``hw/zolayer/registers.py``.

The bench drives the units' side of the control itself: ``finish`` (a job's last action)
when it chooses, so a job runs as long as the test needs, and ``array_step``. Pinned:

* every register's reset value and its read-back of what was written (the written bits
  of its width, each at its own address), read-only registers ignoring writes, partial
  writes answered SLVERR and changing nothing;
* writes while a job runs: every settings register (kind ``rw``, IRQ_EN included) keeps
  its value and so does what the job sees (its walk, the tiles' dimensions, the output
  mode); the write is lost, not deferred (the register still holds the old value after
  the job); a CTRL start while busy starts nothing; written while idle, the new values
  reach the next job;
* each job code's decode: one job flag, its walk ``inner`` x ``outer`` per the table in
  :mod:`zoforge.hw.zolayer.control`'s docstring, the tiles' M, K, N and the output mode, the
  CTRL flags, the generator's save/restore pulses; lora-fa's jobs in a full-mode layer end
  at once with STATUS bit 2;
* the counters: CYCLES (the job's busy cycles), ARRAY_CYCLES, STEP_CYCLES (summed over
  jobs until written), done (sticky, write-1-to-clear, cleared by a start), irq.
"""
from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In
from amaranth.sim import Simulator

from zoforge.golden.zolayer import layer_config
from zoforge.hw.pe.axil import OKAY, SLVERR, AxiLiteTarget
from zoforge.hw.pe.bus import AxiLiteSignature
from zoforge.hw.zolayer.control import LayerControl
from zoforge.hw.zolayer.registers import ADDR_BITS, WRITTEN

DOC = Path(__file__).resolve().parent.parent / "docs" / "zo-layer.md"

# rows != cols, every capacity different, so that INFO's and MAX_*'s fields show if swapped
LORA = layer_config(rows=4, cols=2, mode="lora-fa", max_m=6, max_k=10, max_n=12, max_r=8)
# two branch lanes: the words of T hold 2 k-steps (inner = K / 2), the tiles' N = 2 * outer
FULL = layer_config(rows=4, cols=2, mode="full", branch_lanes=2, max_m=10, max_k=14, max_n=6,
                    max_r=4)
COMPUTE = ("branch", "frozen_w", "frozen_a")
LORA_ONLY = ("load_w", "load_a", "frozen_w", "frozen_a")
# CTRL's fields, from the doc's row: bit0 start, bits 1-4 job, bit5 save, bit6 restore,
# bit7 minus, bit8 plain, bits 9-12 query, bit13 zero_w
START, JOB_SHIFT, SAVE, RESTORE, MINUS, PLAIN, QUERY_SHIFT = 1, 1, 1 << 5, 1 << 6, 1 << 7, \
    1 << 8, 9
ZERO_W = 1 << 13


def doc_registers(page: Path = DOC) -> dict[str, tuple[int, str, int]]:
    """name -> (address, access, bits) from the register table."""
    rows = re.findall(r"^\| `(\w+)` \| (0x[0-9A-Fa-f]+) \| (\w+) \| (\d+) \|", page.read_text(),
                      re.MULTILINE)
    return {name: (int(address, 16), access, int(bits)) for name, address, access, bits in rows}


def doc_jobs(page: Path = DOC) -> dict[str, int]:
    return {name: int(code) for name, code in
            re.findall(r"^\| `(\w+)` \| (\d+) \|$", page.read_text(), re.MULTILINE)}


REGS = doc_registers()
JOB_CODES = doc_jobs()
SETTINGS = [name for name, (_, access, _) in REGS.items() if access == "rw"]
READ_ONLY = [name for name, (_, access, _) in REGS.items() if access == "r"]


def ctrl(job: str, save=0, restore=0, minus=0, plain=0, query=0, zero_w=0) -> int:
    return (START | JOB_CODES[job] << JOB_SHIFT | SAVE * save | RESTORE * restore
            | MINUS * minus | PLAIN * plain | query << QUERY_SHIFT | ZERO_W * zero_w)


def mask(name: str) -> int:
    return (1 << REGS[name][2]) - 1


def info_values(config) -> dict[str, int]:
    """INFO and MAX_* by the table's formulas (INFO: rows | cols << 8 | full << 16 |
    branch_lanes << 24)."""
    full = config.mode == "full"
    return {"INFO": (config.rows | config.cols << 8 | full << 16
                     | config.branch_lanes << 24),
            "MAX_M": config.max_m, "MAX_K": config.max_k, "MAX_N": config.max_n,
            "MAX_R": config.max_r}


def test_the_doc_table_is_the_register_map():
    """Every register of the doc at its address with its access and width, the job codes
    1-10, the read-write ones those the units read, both in the register map the RTL is
    decoded from."""
    from zoforge.hw.zolayer.registers import JOBS, REGISTERS
    assert {name: (r.address, r.kind, r.width) for name, r in REGISTERS.items()} == REGS
    assert JOBS == JOB_CODES
    assert sorted(JOB_CODES.values()) == list(range(1, 11))
    assert SETTINGS == ["IRQ_EN", "M", "K", "N", "RANK", "MULT", "SHIFT", "EPS_SHIFT", "GRAD",
                        "ETA_MULT", "ETA_SHIFT"]


class Harness(wiring.Component):
    """The AXI4-Lite target and the layer's control, joined as in the layer; the bench
    drives ``finish`` and ``array_step``."""

    def __init__(self, config):
        self.control = LayerControl(config)
        super().__init__({"bus": In(AxiLiteSignature(ADDR_BITS)), "finish": In(1),
                          "array_step": In(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.axil = axil = AxiLiteTarget(ADDR_BITS, WRITTEN)
        m.submodules.control = control = self.control
        wiring.connect(m, wiring.flipped(self.bus), axil.bus)
        wiring.connect(m, axil.regs, control.port)
        m.d.comb += [control.finish.eq(self.finish), control.array_step.eq(self.array_step)]
        return m


class Host:
    """AXI4-Lite transfers on the harness's bus, and the control's outputs."""

    def __init__(self, ctx, dut: Harness):
        self.ctx, self.dut, self.bus = ctx, dut, dut.bus
        self.job = dut.control.job

    async def write(self, name_or_address, value, strobes=0b1111) -> int:
        """Writes a word; returns BRESP. On return the register file has taken it."""
        ctx, bus = self.ctx, self.bus
        address = (REGS[name_or_address][0] if isinstance(name_or_address, str)
                   else name_or_address)
        for signal, v in ((bus.awaddr, address), (bus.wdata, value), (bus.wstrb, strobes),
                          (bus.awvalid, 1), (bus.wvalid, 1), (bus.bready, 1)):
            ctx.set(signal, v)
        while not ctx.get(bus.awready):
            await ctx.tick()
        await ctx.tick()
        ctx.set(bus.awvalid, 0)
        ctx.set(bus.wvalid, 0)
        while not ctx.get(bus.bvalid):
            await ctx.tick()
        response = ctx.get(bus.bresp)
        await ctx.tick()
        return response

    async def read(self, name_or_address) -> int:
        ctx, bus = self.ctx, self.bus
        address = (REGS[name_or_address][0] if isinstance(name_or_address, str)
                   else name_or_address)
        ctx.set(bus.araddr, address)
        ctx.set(bus.arvalid, 1)
        ctx.set(bus.rready, 1)
        while not ctx.get(bus.arready):
            await ctx.tick()
        await ctx.tick()
        ctx.set(bus.arvalid, 0)
        while not ctx.get(bus.rvalid):
            await ctx.tick()
        value = ctx.get(bus.rdata)
        assert ctx.get(bus.rresp) == OKAY
        await ctx.tick()
        return value

    async def read_all(self) -> dict[str, int]:
        return {name: await self.read(name) for name in REGS}

    async def finish(self, after: int = 0):
        """Ends the running job ``after`` cycles from now (the units' last action)."""
        for _ in range(after):
            await self.ctx.tick()
        self.ctx.set(self.dut.finish, 1)
        await self.ctx.tick()
        self.ctx.set(self.dut.finish, 0)

    def seen(self) -> dict[str, int]:
        """What the units see of the job: the walk, the tiles, the mode, the settings."""
        c, ctx = self.dut.control, self.ctx
        values = {name: ctx.get(getattr(self.job, name)) for name in
                  ("inner", "outer", "one_word", "one_panel", "minus", "plain", "query", "zero_w", "compute",
                   *JOB_CODES)}
        values.update({f"tiles.{n}": ctx.get(getattr(c.tiles, n)) for n in ("m", "k", "n")})
        values.update({f"mode.{n}": ctx.get(getattr(c.mode, n)) for n in
                       ("bias_en", "per_channel", "raw", "relu", "tensor_mult",
                        "tensor_shift")})
        values.update({f"settings.{n.lower()}": ctx.get(getattr(c.settings, n.lower()))
                       for n in SETTINGS if n != "IRQ_EN"})
        return values


def run(config, bench):
    dut = Harness(config)

    async def testbench(ctx):
        await bench(Host(ctx, dut))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()


def settings_values(seed: int) -> dict[str, int]:
    """A value for every settings register that sets about half of its bits."""
    rng = random.Random(seed)
    return {name: rng.randrange(1, mask(name) + 1) for name in SETTINGS}


@pytest.mark.parametrize("config", [LORA, FULL], ids=["lora-fa", "full"])
def test_reset_values_and_read_back(config):
    """After reset: 0 in every register but INFO and MAX_* (the table's formulas). Each
    settings register then reads back exactly the low bits of its width of a word written
    to it (all ones, then a different word per register, so that two registers sharing an
    address or a decode show), read-only registers and an unmapped address ignore writes
    (OKAY), STEP_CYCLES stays 0 (any write clears it), a partial write (wstrb 0b0111,
    0b1110) is SLVERR and changes nothing."""
    constants = info_values(config)

    async def bench(host):
        reset = await host.read_all()
        assert reset == {name: constants.get(name, 0) for name in REGS}
        for name in SETTINGS:
            assert await host.write(name, 0xFFFF_FFFF) == OKAY
        for name in [*READ_ONLY, "STEP_CYCLES"]:
            assert await host.write(name, 0xFFFF_FFFF) == OKAY
        assert await host.write(0x54, 0xFFFF_FFFF) == OKAY
        assert await host.write(0xFC, 0xFFFF_FFFF) == OKAY
        ones = await host.read_all()
        assert ones == {name: mask(name) if name in SETTINGS else reset[name]
                        for name in REGS}
        assert await host.read(0x54) == 0
        values = settings_values(len(config.mode))
        for name, value in values.items():
            await host.write(name, value | (0xDEAD_BEEF & ~mask(name)))   # bits above it
        assert await host.read_all() == {**reset, **values}
        for strobes in (0b0111, 0b1110):
            assert await host.write("M", 0, strobes) == SLVERR
            assert await host.write("CTRL", ctrl("apply"), strobes) == SLVERR
        assert await host.read_all() == {**reset, **values}
        assert not host.ctx.get(host.job.launch)

    run(config, bench)


def expected_job(config, job: str, values: dict[str, int], flags: dict[str, int]):
    """What the units see during ``job`` with the settings ``values``, from the table in
    :mod:`zoforge.hw.zolayer.control`'s docstring: inner x outer by job, K_t = RANK
    (lora-fa) or K, words of T of B k-steps; the tiles' M, K_t or K, outer * B."""
    lora, lanes = config.mode == "lora-fa", config.branch_lanes
    k_t = values["RANK"] if lora else values["K"]
    over_k = job in ("load_x", "load_w", "load_a", "frozen_w", "frozen_a")
    outer = {"load_x": values["M"], "load_a": values["RANK"],
             "frozen_a": values["RANK"]}.get(job, values["N"])
    inner = values["K"] if over_k else k_t // lanes
    expected = {"inner": inner, "outer": outer,
                # the walks' end tests against one step: a one-word panel, a one-panel walk
                # of F = rows / B features
                "one_word": int(inner <= 1), "one_panel": int(outer <= config.rows // lanes),
                "minus": flags.get("minus", 0), "plain": flags.get("plain", 0),
                "query": flags.get("query", 0), "zero_w": flags.get("zero_w", 0),
                "compute": int(job in COMPUTE),
                **{name: int(name == job) for name in JOB_CODES},
                "tiles.m": values["M"], "tiles.k": values["K"] if over_k else k_t,
                "tiles.n": outer * lanes,
                # a branch adds the init XW, but with zero_w
                "mode.bias_en": int(job == "branch" and not flags.get("zero_w")),
                "mode.per_channel": 0,
                "mode.raw": int(job != "frozen_a"), "mode.relu": 0,
                "mode.tensor_mult": values["MULT"], "mode.tensor_shift": values["SHIFT"],
                **{f"settings.{n.lower()}": values[n] for n in SETTINGS if n != "IRQ_EN"}}
    return expected


def job_values(seed):
    """Settings whose dimensions fit the walk's 16 bits, K_t odd (K_t / B rounds down)."""
    values = settings_values(seed)
    values.update(M=2 * (seed + 3), K=2 * seed + 11, N=seed + 17, RANK=4 * seed + 9)
    return values


def one_step_values(config, over: int):
    """Settings at the walks' one-step bounds (``over`` 0: K 1 and M, N, RANK at F = rows / B,
    every end flag set but where K_t / B > 1; ``over`` 1: one past each, K 2)."""
    F = config.rows // config.branch_lanes
    return dict(settings_values(5), M=F + over, K=1 + over, N=F + over, RANK=F + over)


@pytest.mark.parametrize("dims", ["wide", "one step", "past one step"])
@pytest.mark.parametrize("config", [LORA, FULL], ids=["lora-fa", "full"])
def test_every_job_code_as_the_units_see_it(config, dims):
    """Each job code started with its own flags: the one job flag set, the walk, the tiles'
    M, K, N, the output mode and the settings as :func:`expected_job`, the CTRL read-back
    (the job code, minus, plain, query and zero_w; start, save and restore read 0), the
    generator's save / restore pulse in the launch cycle only, busy until the units finish;
    a lora-fa job in a full-mode layer ends by itself after one cycle with STATUS bit 2 (not
    available), cleared by the next start."""
    values = {"wide": job_values(len(config.mode)), "one step": one_step_values(config, 0),
              "past one step": one_step_values(config, 1)}[dims]
    lora = config.mode == "lora-fa"
    generator = None

    async def bench(host):
        nonlocal generator
        generator = host.dut.control.generator
        ctx = host.ctx
        for name, value in values.items():
            await host.write(name, value)
        for index, job in enumerate(JOB_CODES):
            flags = {"save": index % 2, "restore": index % 3 == 0, "minus": index % 2 == 0,
                     "plain": index % 4 == 1, "query": (3 * index + 5) % 16,
                     "zero_w": index % 3 == 0}          # the branch (index 6) with zero_w
            word = ctrl(job, **flags)
            await host.write("CTRL", word)
            assert ctx.get(host.job.launch) and not ctx.get(host.job.active)
            assert (ctx.get(generator.save), ctx.get(generator.restore)) == (
                flags["save"], flags["restore"])
            want = expected_job(config, job, values, flags)
            assert host.seen() == want, job
            await ctx.tick()
            assert not ctx.get(generator.save) and not ctx.get(generator.restore)
            if not lora and job in LORA_ONLY:
                assert not ctx.get(host.job.active)
                assert await host.read("STATUS") == 0b110, job
                assert await host.read("CYCLES") == 1
                continue
            assert ctx.get(host.job.active)
            assert host.seen() == want, job
            assert await host.read("CTRL") == word & ~(START | SAVE | RESTORE)
            assert await host.read("STATUS") == 0b001
            await host.finish()
            assert await host.read("STATUS") == 0b010
            assert host.seen() == want, job             # held after the job

    run(config, bench)


@pytest.mark.parametrize("config", [LORA, FULL], ids=["lora-fa", "full"])
def test_writes_while_a_job_runs_change_nothing(config):
    """A branch job runs while every settings register (IRQ_EN too) is written with the
    complement of its value, and CTRL with another job's start: each register reads back
    its old value, what the units see stays the job's own on every cycle, the job's code
    and flags stay, no second launch. After the job the registers still hold the old
    values (the writes are lost, not deferred); written again while idle, the new values
    reach the next job."""
    old = dict(job_values(2), IRQ_EN=0)
    new = {name: ~value & mask(name) for name, value in old.items()}
    new.update(M=old["M"] + 2, K=old["K"] + 3, N=old["N"] + 1, RANK=old["RANK"] + 4)

    async def bench(host):
        ctx = host.ctx
        for name, value in old.items():
            await host.write(name, value)
        word = ctrl("branch", minus=1, query=5, zero_w=1)
        await host.write("CTRL", word)
        want = expected_job(config, "branch", old, {"minus": 1, "query": 5, "zero_w": 1})
        for name, value in new.items():
            await host.write(name, value)
            assert host.seen() == want, name
            assert ctx.get(host.job.active) and not ctx.get(host.job.launch), name
        await host.write("CTRL", ctrl("apply", plain=1, query=9))
        assert not ctx.get(host.job.launch)
        assert host.seen() == want
        during = await host.read_all()
        assert {name: during[name] for name in SETTINGS} == old
        assert during["CTRL"] == word & ~(START | SAVE | RESTORE)
        assert during["STATUS"] == 0b001
        await host.finish()
        after = await host.read_all()
        assert {name: after[name] for name in SETTINGS} == old
        assert after["STATUS"] == 0b010
        assert not ctx.get(host.dut.control.irq)        # IRQ_EN's write was ignored too
        for name, value in new.items():
            await host.write(name, value)
        assert {name: await host.read(name) for name in SETTINGS} == new
        assert ctx.get(host.dut.control.irq) == new["IRQ_EN"]
        await host.write("CTRL", ctrl("branch"))
        assert host.seen() == expected_job(config, "branch", new, {})
        await host.finish()

    run(config, bench)


def test_counters_done_and_irq():
    """CYCLES: the job's busy cycles, the launch cycle to the one the units finish in (d + 1
    for a finish d cycles after the launch), restarted by every start; ARRAY_CYCLES: the
    cycles ``array_step`` was high since the last start; STEP_CYCLES: busy cycles summed
    over jobs until written (any value clears it, also while busy). STATUS bit 1 (done)
    sticky until a write of 1 to it (a write of 0 leaves it) or the next start; irq = done
    & IRQ_EN."""

    async def bench(host):
        ctx, dut = host.ctx, host.dut
        irq = dut.control.irq
        await host.write("IRQ_EN", 1)
        await host.write("CTRL", ctrl("apply"))
        for _ in range(3):                                  # 3 array steps, one idle between
            ctx.set(dut.array_step, 1)
            await ctx.tick()
            ctx.set(dut.array_step, 0)
            await ctx.tick()
        await host.finish(after=0)                          # 6 cycles after the launch
        assert ctx.get(irq)
        assert [await host.read(n) for n in ("CYCLES", "ARRAY_CYCLES", "STEP_CYCLES",
                                             "STATUS")] == [7, 3, 7, 0b010]
        await host.write("STATUS", 0b101)                   # bit 1 not set: done stays
        assert await host.read("STATUS") == 0b010 and ctx.get(irq)
        await host.write("STATUS", 0b010)
        assert await host.read("STATUS") == 0 and not ctx.get(irq)
        await host.write("CTRL", ctrl("read_master"))
        await host.finish(after=4)
        assert [await host.read(n) for n in ("CYCLES", "ARRAY_CYCLES", "STEP_CYCLES")] == [
            5, 0, 12]
        await host.write("IRQ_EN", 0)
        assert await host.read("STATUS") == 0b010 and not ctx.get(irq)
        await host.write("IRQ_EN", 1)
        await host.write("CTRL", ctrl("apply"))             # a start clears done
        assert not ctx.get(irq)
        # cleared while busy: the write is taken in the launch cycle and reaches the
        # register file a cycle later (the target's register), which clears the count at
        # its end; the write returns the cycle after, counted with the one after that
        await host.write("STEP_CYCLES", 0x1234)
        await host.finish(after=1)
        assert await host.read("STATUS") == 0b010 and ctx.get(irq)
        assert await host.read("STEP_CYCLES") == 2

    run(LORA, bench)
