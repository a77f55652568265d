"""cocotb testbench of the ZO layer: the host's program of ZO steps over cocotbext-axi.

Stalls: with ``source_idle`` the input stream and the AXI4-Lite AW, W and AR channels pause
at random; with ``sink_backpressure`` the output stream and the B and R channels do.

Inputs (from :mod:`zoforge.sim.zo_cosim`, in ``bench_dir()``): ``x.npy`` (one batch per
step), ``target.npy`` (regression host) or ``labels.npy`` (classification host,
``args["host"]`` = the :class:`~zoforge.golden.zolayer.host.CrossEntropyHost` fields),
``w.npy``/``a.npy`` (lora-fa), ``master.npy``; the schedule and the step settings in
``bench_args()``. The bench plays the ARM host: it loads the frozen weights
and the master copy once, then per step loads the batch, computes the frozen products,
runs each query's two branches, computes the loss and the projected gradient g
(:mod:`zoforge.golden.zolayer.host`, the same code the golden model uses), accumulates,
applies the update and reads T back. The last step runs under the sequential schedule (each
branch recomputes the frozen products) for the cycle comparison; a plain (unperturbed)
branch at the end measures what the perturbation costs.

Outputs: ``branches.npy`` (every branch's Y), ``masters.npy`` (T after every step),
``plain.npy`` and, via ``write_result``, g values and cycle counts.
"""
import itertools
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, SimTimeoutError, with_timeout
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame,
                           AxiStreamSink, AxiStreamSource)

from zoforge.golden.zolayer.host import CrossEntropyHost, projected_gradient, squared_error
from zoforge.hw.zo.layouts import branch_output, master_output, panel_words, token_words
from zoforge.hw.zo.registers import address, ctrl_word
from zoforge.sim.cosim import bench_args, bench_dir, write_result

CLOCK_NS = 10


def _pauses(probability: float, seed: int):
    rng = random.Random(seed)
    return (rng.random() < probability for _ in itertools.count())


class LayerHost:
    def __init__(self, dut, args):
        self.dut, self.args = dut, args
        self.lanes = args["lanes"]
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_"), dut.clk,
                                      dut.rst, byte_size=32)
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_"), dut.clk,
                                  dut.rst, byte_size=32)
        for part in (self.source, self.sink, self.axil.write_if, self.axil.read_if):
            part.log.setLevel("WARNING")
        idle, pressure, seed = args["source_idle"], args["sink_backpressure"], args["seed"]
        write, read = self.axil.write_if, self.axil.read_if
        # every stream stalls: sources pause (valid low), sinks hold off (ready low); the
        # AXI4-Lite address and data channels pause independently (AW and W apart)
        sources = (self.source, write.aw_channel, write.w_channel, read.ar_channel)
        sinks = (self.sink, write.b_channel, read.r_channel)
        for offset, (part, probability) in enumerate(
                [(p, idle) for p in sources] + [(p, pressure) for p in sinks]):
            if probability:
                part.set_pause_generator(_pauses(probability, seed + offset))
        self.jobs = []
        # a bound no correct job reaches (one MAC per cycle, every word stalled 20x): a job
        # still running then has stalled, and the bench fails instead of hanging
        m, k, n, r = (args[f] for f in "mknr")
        self.job_limit_cycles = 20 * (m * k * max(n, r) + m * n + k * n) + 100_000

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def write(self, name, value):
        await self.axil.write_dword(address(name), int(value) & 0xFFFFFFFF)

    async def read(self, name):
        return await self.axil.read_dword(address(name))

    async def job(self, name, words=None, receive=False, **flags):
        """Run one job; ``words`` (rows of lanes) are streamed in; returns the output.
        Fails when the job has not finished within ``job_limit_cycles``."""
        try:
            return await with_timeout(
                cocotb.start_soon(self._job(name, words, receive, **flags)),
                self.job_limit_cycles * CLOCK_NS, "ns")
        except SimTimeoutError:
            raise AssertionError(f"job {name} ({flags}) did not finish within "
                                 f"{self.job_limit_cycles} cycles") from None

    async def _job(self, name, words, receive, **flags):
        if words is not None:
            flat = [int(v) & 0xFFFFFFFF for v in np.asarray(words).reshape(-1)]
            await self.source.send(AxiStreamFrame(flat))
        await self.write("CTRL", ctrl_word(name, **flags))
        out = None
        if receive:
            frame = await self.sink.recv()
            out = np.array(frame.tdata, dtype=np.uint32).astype(np.int32).reshape(-1, self.lanes)
        while not (await self.read("STATUS")) & 2:
            await ClockCycles(self.dut.clk, 4)
        cycles = await self.read("CYCLES")
        array_cycles = await self.read("ARRAY_CYCLES")
        await self.write("STATUS", 2)
        self.jobs.append({"job": name, "cycles": cycles, "array_cycles": array_cycles,
                          **{k: bool(v) for k, v in flags.items()}})
        return out


@cocotb.test()
async def run_steps(dut):
    args = bench_args()
    data = bench_dir()
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())
    host = LayerHost(dut, args)
    await host.reset()
    m, k, n, r = args["m"], args["k"], args["n"], args["r"]
    rows, cols, lora, q = args["rows"], args["cols"], args["lora"], args["q"]
    xs = np.load(data / "x.npy")
    if args.get("host"):
        classifier = CrossEntropyHost(**args["host"])
        targets = np.load(data / "labels.npy")

        def gradient(y_plus, y_minus, labels):
            return classifier.gradient(classifier.loss(y_plus, labels),
                                       classifier.loss(y_minus, labels))
    else:
        targets = np.load(data / "target.npy")

        def gradient(y_plus, y_minus, target):
            return projected_gradient(squared_error(y_plus, target),
                                      squared_error(y_minus, target), args["grad_shift"])
    for name, value in (("M", m), ("K", k), ("N", n), ("RANK", r), ("MULT", args["mult"]),
                        ("SHIFT", args["shift"]), ("EPS_SHIFT", args["eps_shift"]),
                        ("ETA_MULT", args["eta_mult"]), ("ETA_SHIFT", args["eta_shift"])):
        await host.write(name, value)
    if lora:
        await host.job("load_w", panel_words(np.load(data / "w.npy"), rows, host.lanes))
        await host.job("load_a", panel_words(np.load(data / "a.npy"), rows, host.lanes))
    await host.job("load_master", panel_words(np.load(data / "master.npy"), rows, host.lanes))

    async def frozen(x):
        await host.job("load_x", token_words(x, cols, host.lanes))
        if lora:
            await host.job("frozen_w")
            await host.job("frozen_a")

    async def branch(**flags):
        out = await host.job("branch", receive=True, **flags)
        return branch_output(out, m, n, rows, cols)

    branches, masters, grads, step_cycles = [], [], [], []
    for step, (x, target) in enumerate(zip(xs, targets)):
        sequential = step == len(xs) - 1
        await host.write("STEP_CYCLES", 0)
        if not sequential:
            await frozen(x)
        step_grads = []
        for _ in range(q):
            if sequential:
                await frozen(x)
            y_plus = await branch(save=True)
            if sequential:
                await frozen(x)
            y_minus = await branch(restore=True, minus=True)
            g = gradient(y_plus, y_minus, target)
            await host.write("GRAD", g)
            await host.job("accumulate", restore=True)
            branches += [y_plus, y_minus]
            step_grads.append(g)
        await host.job("apply")
        step_cycles.append(await host.read("STEP_CYCLES"))
        master = await host.job("read_master", receive=True)
        masters.append(master_output(master, n, rows))
        grads.append(step_grads)
    plain = await branch(plain=True)
    np.save(data / "branches.npy", np.stack(branches))
    np.save(data / "masters.npy", np.stack(masters))
    np.save(data / "plain.npy", plain)
    write_result({"grads": grads, "step_cycles": step_cycles, "jobs": host.jobs,
                  "irq": int(dut.irq.value)})
