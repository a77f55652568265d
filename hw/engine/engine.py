"""Tiled INT8 GEMM engine: ``Y = requant(X·W + bias)`` on an R x C systolic array.

Host interface (what a Zynq PS sees):

* AXI4-Lite control/status registers (``s_axil``, see :data:`REGISTERS` and docs/engine.md),
  an interrupt ``irq`` (= ``done & irq_en``).
* AXI4-Stream in (``s_axis``, ``8 * pack * max(R, C)`` bits, ``tlast`` ignored): the
  operands, in this order, each *panel* as ``ceil(K / pack)`` *words* of ``pack``
  consecutive k-steps:

  1. W panel 0, 2. X panels 0 .. ceil(M/R)-1, 3. W panels 1 .. ceil(N/C)-1.

  An X panel word is a beat, with ``X[mt*R + i, w*pack + p]`` at byte ``p*R + i``. A W
  panel word holds ``W[w*pack + p, nt*C + j]`` at byte ``p*C + j`` (``pack * C`` bytes),
  and a W beat ``G = max(1, R // C)`` words (word w at byte ``(w % G) * pack * C`` of beat
  ``w // G``; the panel's last beat zero past its last word): ``ceil(ceil(K/pack) / G)``
  beats a W panel, taken one word a cycle (``tready`` low for a beat's later words). Edge
  tiles are padded with zeros by the host (rows past M, columns past N, k-steps past K).
* AXI4-Stream out (``m_axis``, ``32 * C`` bits): each output tile as R rows, tiles in the
  order (nt outer, mt inner). Raw mode: a row a beat (column j in lane j, the int32
  result); requantized: four rows a beat (:class:`~.packer.ResultPacker`: row r of the
  beat's group in bytes ``r*C .. r*C + C-1``, column j at byte ``r*C + j``), the rows in
  stream order across tiles, the last beat zero past the job's last row. ``tlast`` on the
  job's last beat. Back-pressure (``tready`` low) stalls the output pipeline.

Buffers (``amaranth.lib.memory``): the whole X (``max_m x max_k`` bytes) stays on chip and is
reused for every column panel; W panels are double-buffered (two banks of ``max_k x C``
bytes), so panel nt+1 streams in while panel nt is being computed; results are
double-buffered too (two banks of R rows), so a tile drains while the previous one streams
out. Tiles are computed back to back (nt outer, mt inner), each for ``pack * ceil(K/pack)``
cycles, at least :attr:`~zoforge.hw.pe.array.SystolicArray.min_tile_interval`
apart: the array drains skewed (``skewed_drain``, column j read j cycles after column 0),
so that interval is ``max(U + R - 2, R)``, no C term (:func:`.cycles.engine_tile_interval`).

Verilog ports: ``clk``, ``rst``, ``irq`` and the bus members joined by ``__``
(``s_axil__awaddr``, ``s_axis__tdata``, ``m_axis__tready``, ...; see
:mod:`zoforge.hw.pe.bus`).

Blocks (the top only holds them and the memories of :mod:`.buffers`, and connects them):
the engine's own :class:`~.registers.RegisterFile` and :class:`~.loader.Loader` (input
stream -> X buffer, W banks), and from :mod:`zoforge.hw.pe` the AXI4-Lite target,
the feeder (buffers -> array, the weights as a stream), the array, the drain (array ->
result banks), the output stage (result banks -> rows for the requantizer, its rows ->
the engine's :class:`~.packer.ResultPacker` -> ``m_axis``) and the requantizer (in a
``gelu`` build the output path of :mod:`.gelu_path`: the requantizer, and for a GELU job,
CTRL bit ``gelu``, the i-GELU and a second per-column requantizer; int8 results as a
requantized job's).
"""
from __future__ import annotations

from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.engine_widths import ACC_BITS, MULT_BITS, accumulator_bits
from zoforge.hw.pe.array import SystolicArray
from zoforge.hw.pe.axil import AxiLiteTarget
from zoforge.hw.pe.bus import AxiLiteSignature, AxiStreamSignature
from zoforge.hw.pe.drain import Drain
from zoforge.hw.pe.feeder import Feeder
from zoforge.hw.pe.output import OutputStage, SideRead
from zoforge.hw.pe.requant import RequantStream

from .buffers import Memory, engine_buffers, engine_tiling
from .config import EngineConfig
from .cycles import engine_tile_interval
from .loader import Loader
from .packer import ResultPacker
from .gelu_path import GeluPath, row_layout
from .regmap import ADDR_BITS, CTRL_BITS, PARAM_REGIONS, REGISTERS, param_tables
from .registers import RegisterFile

__all__ = ["Engine", "check_engine_parameters", "REGISTERS", "PARAM_REGIONS", "CTRL_BITS",
           "ADDR_BITS"]


def check_engine_parameters(rows: int, cols: int, pack: int, max_m: int, max_k: int,
                            max_n: int, paired: bool = False, gelu: bool = False) -> dict:
    """Validate the engine's build parameters (ConfigError naming the CLI flag)."""
    config = EngineConfig(rows=rows, cols=cols, pack=pack, max_m=max_m, max_k=max_k,
                          max_n=max_n, paired=paired, gelu=gelu)
    return dict(config.to_dict(), in_bytes=config.in_bytes)


class Engine(wiring.Component):
    """The engine top, from an :class:`EngineConfig` (or its fields as keywords)."""

    def __init__(self, config: EngineConfig | None = None, **fields):
        config = self.engine_config = config if config is not None else EngineConfig(**fields)
        self.rows, self.cols, self.pack = config.rows, config.cols, config.pack
        self.max_m, self.max_k, self.max_n = config.max_m, config.max_k, config.max_n
        self.in_bytes = config.in_bytes
        super().__init__({
            "s_axil": In(AxiLiteSignature(ADDR_BITS)),
            "s_axis": In(AxiStreamSignature(8 * self.in_bytes)),
            "m_axis": Out(AxiStreamSignature(ACC_BITS * self.cols)),
            "irq": Out(1),
        })

    @property
    def facts(self) -> dict:
        """Derived build facts (widths, interval) for the design's summary."""
        return {"rows": self.rows, "cols": self.cols, "pack": self.pack, "max_m": self.max_m,
                "max_k": self.max_k, "max_n": self.max_n, "in_bytes": self.in_bytes,
                "out_lanes": self.cols, "acc_bits": ACC_BITS, "mult_bits": MULT_BITS,
                "paired": self.engine_config.paired,
                "multipliers": self.engine_config.multipliers,
                "min_tile_interval": engine_tile_interval(self.engine_config)}

    def elaborate(self, platform):
        m = Module()
        config = self.engine_config
        tiling, buffers = engine_tiling(config), engine_buffers(config)
        # every read the engine uses is of a word not written in that cycle (the feeder
        # reads loaded panels, the output stage drained banks, the tables change only while
        # idle)
        memories = {name: buffer.memory(collisions_unused=True)
                    for name, buffer in buffers.items()}
        for name, memory in memories.items():
            m.submodules[name] = memory
        m.submodules.regs = regs = RegisterFile(config)
        m.submodules.axil = axil = AxiLiteTarget(ADDR_BITS, regs.write_addresses)
        m.submodules.loader = loader = Loader(config)
        # the read stage (hw/pe/array.py) wherever it applies: 2 unit rows or more
        units = config.rows // 2 if config.paired else config.rows
        m.submodules.array = array = SystolicArray(config.rows, config.cols,
                                                   paired=config.paired,
                                                   acc_bits=accumulator_bits(config.max_k),
                                                   skewed_drain=True,
                                                   read_stage=units >= 2)
        m.submodules.feeder = feeder = Feeder(tiling, array.min_tile_interval)
        m.submodules.drain = drain = Drain(tiling, array.capture_latency, array.drain_lead)
        tables = param_tables(config.gelu)
        m.submodules.output = output = OutputStage(tiling, {
            table.memory: SideRead(table.field, buffers[table.memory], "panel")
            for table in tables.values()}, row_layout(config.cols) if config.gelu else None)
        m.submodules.requant = requant = (GeluPath(config.cols) if config.gelu
                                          else RequantStream(config.cols))
        m.submodules.packer = packer = ResultPacker(config.cols)

        # host side
        wiring.connect(m, wiring.flipped(self.s_axil), axil.bus)
        wiring.connect(m, wiring.flipped(self.s_axis), loader.s_axis)
        wiring.connect(m, output.m_axis, packer.i)
        wiring.connect(m, packer.o, wiring.flipped(self.m_axis))
        wiring.connect(m, axil.regs, regs.port)
        m.d.comb += self.irq.eq(regs.irq)
        # sequencing
        wiring.connect(m, regs.job, loader.job, feeder.job, output.job)
        wiring.connect(m, loader.panels, feeder.panels)
        m.d.comb += [drain.start.eq(regs.job.start), output.drained.eq(drain.drained),
                     feeder.tile_done.eq(output.tile_done), regs.array_step.eq(feeder.valid),
                     regs.job_end.eq(packer.job_end)]
        # memory ports
        x_mem, w_mem, res_mem = (memories[n] for n in (Memory.X, Memory.W, Memory.RESULT))
        wiring.connect(m, loader.x_wr, x_mem.write_port())
        wiring.connect(m, loader.w_wr, w_mem.write_port())
        wiring.connect(m, feeder.x_rd, x_mem.read_port())
        wiring.connect(m, feeder.w_rd, w_mem.read_port())
        wiring.connect(m, drain.res_wr, res_mem.write_port())
        wiring.connect(m, output.res_rd, res_mem.read_port())
        for table in tables.values():
            memory = memories[table.memory]
            wiring.connect(m, getattr(regs, table.memory), memory.write_port(granularity=1))
            wiring.connect(m, getattr(output, table.memory), memory.read_port())
        # datapath: feeder -> array -> drain; output -> requantizer -> output
        m.d.comb += [array.a.eq(feeder.x), array.b.eq(feeder.w.payload),
                     array.valid.eq(feeder.valid), array.first.eq(feeder.first),
                     array.last.eq(feeder.last), drain.capture.eq(feeder.last),
                     drain.res.eq(array.res_out), array.sel.eq(drain.sel)]
        wiring.connect(m, output.rows, requant.i)
        wiring.connect(m, requant.o, output.results)
        wiring.connect(m, regs.mode, requant.mode)
        if config.gelu:
            wiring.connect(m, regs.gelu_config, requant.config)
            m.d.comb += requant.gelu.eq(regs.gelu)
        m.d.comb += [packer.raw.eq(regs.mode.raw), packer.start.eq(regs.job.start)]
        return m
