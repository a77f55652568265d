"""cocotb testbench: the GEMM engine's registers from the bus side (cocotbext-axi).

Run through :meth:`zoforge.sim.engine_cosim.EngineCosim.run` with
``bench="zoforge.sim.benches.engine_registers"`` and exactly four jobs (``job0..3.npz``). The
bench only drives the bus and records what it sees; ``tests/test_engine_registers.py``
decides what is right (from the register table of docs/engine.md). In order:

1. ``reset``: every register read right after reset; ``unmapped``: reads of addresses that
   are no register (unmapped words, the write-only parameter regions).
2. ``idle``: per register, full-word writes of all ones and of a pattern, the partial writes
   of every contiguous strobe pattern, a write of 0, each followed by a read (response codes
   and read values); writes to unmapped addresses and every register read again.
3. Job 0 with IRQ_EN = 0 (``irq`` must stay low), then IRQ_EN = 1 while done, then done
   cleared; job 1 with IRQ_EN = 1; then writes to the read-only registers while their
   values are not 0.
4. Job 2: once busy, writes to every register and parameter table (new dimensions, a
   start, new mode bits, other table words) and IRQ_EN = 0, then everything read back while
   still busy; the job's output is checked on the host against job 2's own parameters.
5. Job 3: partial (SLVERR) writes to its parameter tables and a partial CTRL write of the
   start bit before the real start; the output must be job 3's.
6. Handshakes: a write whose data comes 4 cycles after its address and one whose address
   comes 4 cycles after its data (the bus pins recorded cycle by cycle), two writes and two
   reads issued while the write response / read data channel is stalled.

``irq`` edges are recorded throughout (``irq_edges``: (cycle, value)), with the cycle
windows of the jobs. Per job it stores ``out<n>.npy`` and the counters (run through
:meth:`zoforge.sim.engine_cosim.EngineCosim.run` with ``bench=``), so the host checks every
output against the golden model with the same code as the host program's.
"""
import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, ValueChange, with_timeout
from cocotb.utils import get_sim_time

from zoforge.sim.benches.engine_harness import CLOCK_NS, EngineHarness
from zoforge.sim.cosim import bench_args, bench_dir, write_result

ONES = 0xFFFFFFFF
PATTERN = 0x9E3779B9          # written to every register (CTRL: with the start bit cleared)
UNMAPPED = (0x38, 0x3C, 0x0FFC, 0x4000, 0xFFFC)
STROBES = [(offset, length) for length in (1, 2, 3) for offset in range(4 - length + 1)]
PIN_NAMES = ("awvalid", "awready", "wvalid", "wready", "bvalid", "bready")
JOB_LIMIT_CYCLES = 100_000     # a job (the bench: 10x) still running then fails, not hangs


def cycle() -> int:
    return int(get_sim_time(unit="ns") // CLOCK_NS)


class RegisterBench(EngineHarness):
    """The engine harness, with the job split into programming, launch and completion so
    that the bench can act while a job runs."""

    def __init__(self, dut, args):
        super().__init__(dut, args["registers"], args["regions"])
        self.irq_edges = []

    async def write(self, address: int, value: int, offset: int = 0, length: int = 4) -> int:
        """Write bytes ``offset .. offset+length-1`` of ``value`` (strobes of those lanes only);
        returns the response code."""
        data = value.to_bytes(4, "little")[offset:offset + length]
        return int((await self.axil.write(address + offset, data)).resp)

    async def read(self, address: int) -> tuple[int, int]:
        """(value, response code)."""
        response = await self.axil.read(address, 4)
        return int.from_bytes(response.data, "little"), int(response.resp)

    async def read_all(self) -> dict:
        return {name: (await self.read(address))[0] for name, address in self.reg.items()}

    async def sample(self, signal) -> int:
        await RisingEdge(self.dut.clk)
        await ReadOnly()
        value = int(signal.value)
        await RisingEdge(self.dut.clk)
        return value

    async def watch_irq(self):
        while True:
            await ValueChange(self.dut.irq)
            self.irq_edges.append((cycle(), int(self.dut.irq.value)))

    async def finish(self, task) -> tuple[np.ndarray, dict]:
        words = await with_timeout(task, JOB_LIMIT_CYCLES * CLOCK_NS, "ns")
        return words, {**await self.counters(), "end": cycle()}

    async def clear_done(self):
        await self.write(self.reg["STATUS"], 1 << 1)

    # -- the scenario's parts ---------------------------------------------------------------

    async def idle_writes(self) -> dict:
        """Full and partial writes to every register while idle, each followed by a read."""
        found = {}
        for name, address in self.reg.items():
            start_bit = 1 if name == "CTRL" else 0        # never start a job here
            record = {}
            record["ones"] = (await self.write(address, ONES & ~start_bit),
                              (await self.read(address))[0])
            record["pattern"] = (await self.write(address, PATTERN & ~start_bit),
                                 (await self.read(address))[0])
            record["partial"] = []
            for offset, length in STROBES:
                other = ~PATTERN & 0xFFFFFFFF & ~start_bit
                response = await self.write(address, other, offset, length)
                record["partial"].append([offset, length, response,
                                          (await self.read(address))[0]])
            record["zero"] = (await self.write(address, 0), (await self.read(address))[0])
            found[name] = record
        return found

    async def pins_during(self, coroutine, cycles: int) -> list[dict]:
        """Run ``coroutine`` and record the write channels' handshake pins every cycle."""
        task = cocotb.start_soon(coroutine)
        pins = []
        for _ in range(cycles):
            await RisingEdge(self.dut.clk)
            await ReadOnly()
            pins.append({name: int(getattr(self.dut, f"s_axil__{name}").value)
                         for name in PIN_NAMES})
        await RisingEdge(self.dut.clk)
        await task
        return pins

    async def delayed_write(self, channel, address: int, value: int, delay: int):
        """A full write whose ``channel`` ("aw" or "w") is held back ``delay`` cycles."""
        source = getattr(self.axil.write_if, f"{channel}_channel")
        source.pause = True
        writing = cocotb.start_soon(self.write(address, value))
        await ClockCycles(self.dut.clk, delay)
        source.pause = False
        return await writing


@cocotb.test(timeout_time=JOB_LIMIT_CYCLES * 10 * CLOCK_NS, timeout_unit="ns")
async def registers_from_the_bus(dut):
    args = bench_args()
    data = bench_dir()
    assert len(args["jobs"]) == 4, "the register bench runs exactly four jobs"
    Clock(dut.clk, CLOCK_NS, unit="ns").start()
    bench = RegisterBench(dut, args)
    reg, regions = bench.reg, bench.regions
    found = {}
    await bench.reset()
    cocotb.start_soon(bench.watch_irq())
    loaded = [np.load(data / f"job{index}.npz") for index in range(4)]
    specs = args["jobs"]
    tables = [{name: job[name] for name in spec["tables"]} for job, spec in zip(loaded, specs)]
    frames = [job["frame"] for job in loaded]
    stats, windows = [], []

    async def run(index, during=None):
        """Program and run job ``index``; ``during(bench)`` runs once the job is busy."""
        await bench.program(specs[index], tables[index])
        begin = cycle()
        task = await bench.launch(specs[index], frames[index])
        if during is not None:
            await during()
        words, job_stats = await bench.finish(task)
        np.save(data / f"out{index}.npy", words)
        stats.append(job_stats)
        windows.append((begin, job_stats["end"]))
        return job_stats

    # 1. reset values, unmapped addresses
    found["irq_after_reset"] = int(dut.irq.value)
    found["reset"] = await bench.read_all()
    found["reset_responses"] = {name: (await bench.read(address))[1]
                                for name, address in reg.items()}
    found["unmapped"] = {hex(address): await bench.read(address)
                         for address in (*UNMAPPED, *regions.values())}

    # 2. every register written while idle (full, partial), unmapped writes
    found["idle"] = await bench.idle_writes()
    found["unmapped_writes"] = [await bench.write(address, ONES) for address in UNMAPPED]
    found["after_unmapped_writes"] = await bench.read_all()
    found["unmapped_after_writes"] = {hex(a): (await bench.read(a))[0] for a in UNMAPPED}

    # 3. IRQ_EN = 0 through job 0; IRQ_EN = 1 while done; job 1 with IRQ_EN = 1
    await bench.write(reg["IRQ_EN"], 0)
    await run(0)
    found["job0_status"] = (await bench.read(reg["STATUS"]))[0]
    found["job0_irq_while_done"] = await bench.sample(dut.irq)
    await bench.write(reg["IRQ_EN"], 1)
    found["irq_after_irq_en"] = await bench.sample(dut.irq)
    await bench.clear_done()
    found["irq_after_clear"] = await bench.sample(dut.irq)
    found["status_after_clear"] = (await bench.read(reg["STATUS"]))[0]
    await run(1)
    found["job1_irq_at_end"] = await bench.sample(dut.irq)
    await bench.clear_done()
    # the read-only registers hold values other than 0 now
    before = await bench.read_all()
    readonly = {}
    for name in ("STATUS", "CYCLES", "ARRAY_CYCLES", "INFO", "MAX_M", "MAX_K", "MAX_N"):
        written = []
        for value in (0, ONES, PATTERN):
            written.append([await bench.write(reg[name], value),
                            (await bench.read(reg[name]))[0]])
        readonly[name] = {"before": before[name], "writes": written}
    found["readonly_after_job"] = readonly

    # 4. job 2: writes to everything while busy
    async def while_busy():
        busy = {"status_before": (await bench.read(reg["STATUS"]))[0],
                "cycles_before": (await bench.read(reg["CYCLES"]))[0]}
        responses = {}
        for name, address in reg.items():
            value = 1 | 0x1E if name == "CTRL" else 1 << 1 if name == "STATUS" else PATTERN
            responses[name] = await bench.write(address, value)
        responses["IRQ_EN"] = await bench.write(reg["IRQ_EN"], 0)     # RW at any time
        for name in specs[2]["tables"]:
            words = (~tables[2][name]).astype(np.uint32)
            responses[name] = int((await bench.axil.write(regions[name],
                                                          words.tobytes())).resp)
        busy["responses"] = responses
        busy["registers"] = await bench.read_all()
        busy["status_after"] = (await bench.read(reg["STATUS"]))[0]
        busy["cycles_after"] = (await bench.read(reg["CYCLES"]))[0]
        found["while_busy"] = busy

    await run(2, while_busy)
    found["after_job2"] = await bench.read_all()
    found["job2_irq_at_end"] = await bench.sample(dut.irq)
    await bench.clear_done()
    await bench.write(reg["IRQ_EN"], 1)

    # 5. job 3: partial writes to its tables and a partial start before the real start
    await bench.program(specs[3], tables[3])
    partial = {}
    for name in specs[3]["tables"]:
        partial[name] = [await bench.write(regions[name], ONES, offset, length)
                         for offset, length in STROBES]
    partial["CTRL"] = await bench.write(reg["CTRL"], specs[3]["ctrl"] | 1, 0, 1)
    await ClockCycles(dut.clk, 4)
    partial["status_after_partial_start"] = (await bench.read(reg["STATUS"]))[0]
    found["job3_partial"] = partial
    specs[3] = dict(specs[3], tables=[])            # already written (and not to be redone)
    await run(3)
    await bench.clear_done()

    # 6. handshakes: address and data in different cycles (both orders), stalled responses
    found["w_late"] = {"pins": await bench.pins_during(
        bench.delayed_write("w", reg["M"], 0x0123, 4), 12)}
    found["w_late"]["M"] = (await bench.read(reg["M"]))[0]
    found["aw_late"] = {"pins": await bench.pins_during(
        bench.delayed_write("aw", reg["M"], 0x0456, 4), 12)}
    found["aw_late"]["M"] = (await bench.read(reg["M"]))[0]
    bench.axil.write_if.b_channel.pause = True      # bready low
    writes = [cocotb.start_soon(bench.write(reg[name], value))
              for name, value in (("K", 0x0789), ("N", 0x0ABC))]
    await ClockCycles(dut.clk, 8)
    found["b_stalled"] = {"done_while_stalled": [w.done() for w in writes]}
    bench.axil.write_if.b_channel.pause = False
    found["b_stalled"]["responses"] = [await w for w in writes]
    found["b_stalled"]["K"], found["b_stalled"]["N"] = [
        (await bench.read(reg[name]))[0] for name in ("K", "N")]
    bench.axil.read_if.r_channel.pause = True       # rready low
    reads = [cocotb.start_soon(bench.read(reg[name])) for name in ("INFO", "MAX_K")]
    await ClockCycles(dut.clk, 8)
    found["r_stalled"] = {"done_while_stalled": [r.done() for r in reads]}
    bench.axil.read_if.r_channel.pause = False
    found["r_stalled"]["reads"] = [await r for r in reads]

    found["irq_edges"] = bench.irq_edges
    found["windows"] = windows
    write_result({"jobs": stats, "info": found})
