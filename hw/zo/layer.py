"""The ZO training layer: a tiled systolic datapath with a perturbed weight-operand stream.

Arithmetic: :mod:`zoforge.golden.zolayer.model` (bit-exact). The array computes transposed
products: its R rows are *features* (the weight operand ``a``, 16 bits: the trained matrix
T perturbed on its way in, or frozen int8 weights sign-extended), its C columns are *tokens*
(the activation operand ``b``, int8: X, or U = requant(X·A)). A tile is R features x C
tokens; tiles run panel by panel (R features, outer) and token tile by token tile (inner).

Host interface (register map: :mod:`.registers`; a job is one CTRL write):

* AXI4-Stream in (``s_axis``, 32 x max(R, C) bits, lane l = bits [32l, 32l+32), values in
  the low bits) and out (``m_axis``, the same width, ``tlast`` on a job's last beat).
* ``load_x``: M/C x K words, token tile outer, k inner; lane j = X[mt*C + j, k].
  ``load_w`` / ``load_a`` (lora-fa): the frozen W (N features) / A (r features) as panels of
  R features, k inner (:class:`~.walk.PanelWalk` order); lane i = W[k, p*R + i].
  ``load_master``: the trained matrix T in the same order (lane i = T[k, p*R + i], 24 bits),
  and D cleared. ``read_master``: T out in that order, sign-extended to 32 bits.
* ``frozen_w`` / ``frozen_a`` (lora-fa, once per batch): XW into the init buffer and
  U = requant(X·A) (MULT/SHIFT) into the U buffer.
* ``branch``: Y = XW + U·Tp (lora-fa) or X·Tp (full) with Tp the perturbed operand (flags
  ``minus``, ``plain``; the generator is saved/restored first with ``save``/``restore``).
  Output: per tile (panel outer, token tile inner) R beats, beat i = feature p*R + i, lane
  j = Y[mt*C + j, p*R + i] (int32).
* ``accumulate``: D += GRAD * z (one generator transfer per T word; ``restore`` first);
  ``apply``: T <- T - round(D * ETA_MULT >> ETA_SHIFT), D <- 0.

Panels of the weight operand are fetched once per job, perturbed by :class:`~.perturb.
PerturbUnit` on the way, into a double-buffered staging memory that every token tile of the
panel reuses; the next panel is fetched while the current one is computed, so the
perturbation costs no cycles. The master copy is never written with a perturbation.

Blocks (the top holds them and the memories of :mod:`.buffers`, and connects them; the
tile sequencing is the GEMM engine's, built from the layer's :class:`~zoforge.hw.pe.tiles.
Tiling`): :class:`~zoforge.hw.pe.axil.AxiLiteTarget` and :class:`~.control.LayerControl`
(registers, the job in flight), :class:`~.loader.LayerLoader` (input stream -> memories),
:class:`~.fetch.PanelFetch` (weight panels -> :class:`~.perturb.PerturbUnit` -> staging),
:class:`~zoforge.hw.pe.feeder.Feeder` (staging and token buffers -> array),
:class:`~zoforge.hw.pe.array.SystolicArray`, :class:`~zoforge.hw.pe.drain.Drain`,
:class:`~zoforge.hw.pe.output.OutputStage` (result banks + init -> requantizer -> rows),
:class:`~zoforge.hw.pe.requant.RequantStream`, :class:`~.sink.ResultSink` (rows -> output
stream, init or U buffer), :class:`~.update.UpdateUnit`, :class:`~.reader.MasterReader`
and the generator.
"""
from __future__ import annotations

from amaranth import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.zolayer.config import Formats, ZoLayerConfig
from zoforge.hw.bus import AxiLiteSignature, AxiStreamSignature
from zoforge.hw.pe.array import SystolicArray
from zoforge.hw.pe.axil import AxiLiteTarget
from zoforge.hw.pe.drain import Drain
from zoforge.hw.pe.feeder import Feeder
from zoforge.hw.pe.output import OutputStage, SideRead
from zoforge.hw.pe.requant import RequantStream
from zoforge.hw.pe.tiles import DIM_BITS
from zoforge.hw.rng.designs import generator_for

from .buffers import layer_buffers, layer_tiling, trained_rows
from .control import LayerControl
from .fetch import PanelFetch
from .loader import LayerLoader
from .reader import MasterReader
from .registers import ADDR_BITS
from .sink import ResultSink
from .update import UpdateUnit

__all__ = ["ZoLayer"]


class ZoLayer(wiring.Component):
    """The layer top, from a :class:`~zoforge.golden.zolayer.config.ZoLayerConfig`."""

    def __init__(self, config: ZoLayerConfig):
        self.config = config
        self.lora = config.mode == "lora-fa"
        self.rows, self.cols = config.rows, config.cols
        self.lanes = max(config.rows, config.cols)
        self.generator_config = config.generator()
        golden = self.generator_config.golden()
        self.z_lanes, self.z_width = golden.values_per_cycle, golden.width
        super().__init__({
            "s_axil": In(AxiLiteSignature(ADDR_BITS)),
            "s_axis": In(AxiStreamSignature(32 * self.lanes)),
            "m_axis": Out(AxiStreamSignature(32 * self.lanes)),
            "irq": Out(1),
        })

    @property
    def facts(self) -> dict:
        return {"rows": self.rows, "cols": self.cols, "stream_bits": 32 * self.lanes,
                "weight_bits": Formats.WEIGHT_BITS, "master_bits": Formats.MASTER_BITS,
                "accumulator_bits": Formats.accumulator_bits(self.z_width),
                "z_lanes": self.z_lanes, "z_width": self.z_width,
                "min_tile_interval": 2 * self.rows + self.cols}

    def elaborate(self, platform):
        m = Module()
        cfg, R = self.config, self.rows
        tiling = layer_tiling(cfg)
        buffers = layer_buffers(cfg, self.z_width)
        memories = {name: buffer.memory() for name, buffer in buffers.items()}
        for name, memory in memories.items():
            m.submodules[name] = memory
        acts = {"x_rd": cfg.max_k, **({"u_rd": cfg.max_r} if self.lora else {})}
        side = ({"init_buffer": SideRead("bias", buffers["init_buffer"], "row")}
                if self.lora else {})
        m.submodules.regs = axil = AxiLiteTarget(ADDR_BITS)
        m.submodules.control = control = LayerControl(cfg)
        m.submodules.loader = loader = LayerLoader(tiling, buffers, self.lanes, cfg.max_k)
        m.submodules.fetch = fetch = PanelFetch(tiling, buffers, self.z_lanes, self.z_width)
        m.submodules.array = array = SystolicArray(R, self.cols, a_bits=Formats.WEIGHT_BITS)
        m.submodules.feeder = feeder = Feeder(tiling, array.min_tile_interval, acts)
        m.submodules.drain = drain = Drain(tiling, array.capture_latency)
        m.submodules.output = output = OutputStage(tiling, side)
        m.submodules.requant = requant = RequantStream(self.cols)
        m.submodules.sink = sink = ResultSink(tiling, buffers, trained_rows(cfg))
        m.submodules.update = update = UpdateUnit(
            R, self.z_lanes, self.z_width, DIM_BITS, buffers["master"].addr_bits)
        m.submodules.reader = reader = MasterReader(buffers["master"], R, self.lanes)
        m.submodules.generator = generator = generator_for(self.generator_config)

        # host side: registers, the job
        wiring.connect(m, wiring.flipped(self.s_axil), axil.bus)
        m.d.comb += [control.wr_en.eq(axil.wr_en), control.wr_addr.eq(axil.wr_addr),
                     control.wr_data.eq(axil.wr_data), control.rd_addr.eq(axil.rd_addr),
                     axil.rd_data.eq(control.rd_data), self.irq.eq(control.irq)]
        job, settings = control.job, control.settings
        launch, active = control.launch, control.active
        inner, outer = control.inner, control.outer
        compute = job.branch | job.frozen_w | job.frozen_a
        updating = job.accumulate | job.apply
        m.d.comb += control.finish.eq(loader.done | update.done | reader.done | sink.done)

        # loads
        wiring.connect(m, wiring.flipped(self.s_axis), loader.s_axis)
        m.d.comb += [loader.start.eq(launch), loader.active.eq(active), loader.job.eq(job),
                     loader.inner.eq(inner), loader.outer.eq(outer)]
        wiring.connect(m, loader.x_buffer_wr, memories["x_buffer"].write_port())
        if self.lora:
            for name in ("w_frozen", "a_frozen"):
                wiring.connect(m, getattr(loader, f"{name}_wr"), memories[name].write_port())

        # compute: panel fetch -> staging -> feeder -> array -> drain -> output -> requant
        m.d.comb += [fetch.start.eq(launch), fetch.active.eq(active & compute),
                     fetch.inner.eq(inner), fetch.outer.eq(outer), fetch.branch.eq(job.branch),
                     fetch.frozen_a.eq(job.frozen_a),
                     fetch.perturb.eq(job.branch & ~control.plain),
                     fetch.minus.eq(control.minus), fetch.eps_shift.eq(settings.eps_shift)]
        wiring.connect(m, fetch.stage_wr, memories["stage"].write_port())
        wiring.connect(m, fetch.panels, feeder.panels)
        if self.lora:
            wiring.connect(m, fetch.w_rd, memories["w_frozen"].read_port())
            wiring.connect(m, fetch.a_rd, memories["a_frozen"].read_port())
        for unit in (feeder, output):
            m.d.comb += [unit.job.start.eq(launch), unit.job.busy.eq(active & compute),
                         unit.job.m.eq(settings.m), unit.job.k.eq(inner),
                         unit.job.n.eq(outer)]
        wiring.connect(m, feeder.w_rd, memories["stage"].read_port())
        for name in acts:
            memory = memories["x_buffer" if name == "x_rd" else "u_buffer"]
            wiring.connect(m, getattr(feeder, name), memory.read_port())
        if self.lora:
            m.d.comb += feeder.act_select.eq(job.branch)          # a branch multiplies U
        m.d.comb += [array.a.eq(feeder.w.payload), array.b.eq(feeder.x),
                     array.valid.eq(feeder.valid), array.first.eq(feeder.first),
                     array.last.eq(feeder.last), drain.start.eq(launch),
                     drain.capture.eq(feeder.last), drain.res.eq(array.res_out),
                     array.shift.eq(drain.shift), output.drained.eq(drain.drained),
                     feeder.tile_done.eq(output.tile_done),
                     control.array_step.eq(feeder.valid)]
        wiring.connect(m, drain.res_wr, memories["result_buffer"].write_port())
        wiring.connect(m, output.res_rd, memories["result_buffer"].read_port())
        if self.lora:
            wiring.connect(m, output.init_buffer, memories["init_buffer"].read_port())
        wiring.connect(m, output.rows, requant.i)
        wiring.connect(m, requant.o, output.results)
        m.d.comb += [requant.bias_en.eq(job.branch), requant.per_channel.eq(0),
                     requant.raw.eq(~job.frozen_a), requant.relu.eq(0),
                     requant.tensor_mult.eq(settings.mult),
                     requant.tensor_shift.eq(settings.shift)]
        # rows: to the output stream (branch), the init buffer (XW) or the U buffer
        wiring.connect(m, output.m_axis, sink.results)
        m.d.comb += [sink.start.eq(launch), sink.job.eq(job), sink.m.eq(settings.m),
                     sink.n.eq(outer)]
        if self.lora:
            wiring.connect(m, sink.init_wr, memories["init_buffer"].write_port())
            wiring.connect(m, sink.u_wr, memories["u_buffer"].write_port())

        # the generator: save/restore with the job's launch; it feeds the perturbation
        # (branches) or the update unit (accumulate)
        m.d.comb += [generator.save.eq(control.save), generator.restore.eq(control.restore)]
        if hasattr(generator, "start"):          # the pool: one endless perturbation
            m.d.comb += [generator.start.eq(generator.idle),
                         generator.length.eq((1 << len(generator.length)) - 1)]
        m.d.comb += [fetch.z.payload.eq(generator.out.payload),
                     fetch.z.valid.eq(generator.out.valid & job.branch),
                     update.z.payload.eq(generator.out.payload),
                     update.z.valid.eq(generator.out.valid & ~job.branch),
                     generator.out.ready.eq(Mux(job.branch, fetch.z.ready, update.z.ready))]

        # the update unit (accumulate, apply) and the master reader (read_master)
        m.d.comb += [update.start.eq(launch & updating), update.apply.eq(job.apply),
                     update.inner.eq(inner), update.outer.eq(outer),
                     update.g.eq(settings.grad), update.eta_mult.eq(settings.eta_mult),
                     update.eta_shift.eq(settings.eta_shift),
                     reader.start.eq(launch), reader.active.eq(active & job.read_master),
                     reader.inner.eq(inner), reader.outer.eq(outer)]

        # the master copy and D: the loads and the update write them, the panel fetch, the
        # update unit and the reader read the master copy
        t_rd, t_wr = memories["master"].read_port(), memories["master"].write_port()
        wiring.connect(m, update.d_rd, memories["update_accumulator"].read_port())
        d_wr = memories["update_accumulator"].write_port()
        reading = job.read_master
        readers = [(reading, reader.t_rd), (updating, update.t_rd)]
        address, enable = fetch.t_rd.addr, fetch.t_rd.en
        for selected, port in reversed(readers):
            address, enable = Mux(selected, port.addr, address), Mux(selected, port.en, enable)
        m.d.comb += [t_rd.addr.eq(address), t_rd.en.eq(enable)]
        m.d.comb += [port.data.eq(t_rd.data)
                     for port in (reader.t_rd, update.t_rd, fetch.t_rd)]
        for memory_port, ours, theirs in ((t_wr, update.t_wr, loader.master_wr),
                                          (d_wr, update.d_wr, loader.update_accumulator_wr)):
            m.d.comb += [memory_port.addr.eq(Mux(updating, ours.addr, theirs.addr)),
                         memory_port.data.eq(Mux(updating, ours.data.as_value(),
                                                 theirs.data.as_value())),
                         memory_port.en.eq(Mux(updating, ours.en, theirs.en))]

        # the output stream: the master reader's or the sink's
        for name in ("tvalid", "tlast", "tdata"):
            m.d.comb += getattr(self.m_axis, name).eq(
                Mux(reading, getattr(reader.m_axis, name), getattr(sink.m_axis, name)))
        m.d.comb += [reader.m_axis.tready.eq(self.m_axis.tready),
                     sink.m_axis.tready.eq(self.m_axis.tready)]
        return m
