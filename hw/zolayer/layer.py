"""The ZO training layer: a tiled systolic datapath with a perturbed weight-operand stream.

Arithmetic: :mod:`zoforge.golden.zolayer.model` (bit-exact). The array computes transposed
products: its R rows are *features* (the weight operand ``a``, 16 bits: the trained matrix
T perturbed on its way in, or frozen int8 weights sign-extended), its C columns are *tokens*
(the activation operand ``b``, int8: X, or U = requant(X·A)). A tile is R features x C
tokens; tiles run panel by panel (R features, outer) and token tile by token tile (inner).

Host interface (register map: :mod:`.registers`; a job is one CTRL write):

* AXI4-Stream in (``s_axis``, 32 x max(R, C) bits, lane l = bits [32l, 32l+32), values in
  the low bits) and out (``m_axis``, the same width, ``tlast`` on a job's last beat).
* ``load_x``: M/C x ceil(K/P) beats, token tile outer, blocks of P = 4*max(R, C) // C
  k-steps inner; beat (mt, b) holds X[mt*C + j, b*P + kk] as the byte at bits
  [8*(kk*C + j), +8) (int8; k-steps past K and the bits past 8*P*C zero;
  :func:`~.layouts.token_words`).
  ``load_w`` / ``load_a`` (lora-fa): the frozen W (N features) / A (r features) as panels of
  R features, k inner (:class:`~.walk.PanelWalk` order); lane i = W[k, p*R + i].
  ``load_master``: the trained matrix T in the same order (lane i = T[k, p*R + i], 24 bits),
  and D cleared. ``read_master``: T out in that order, sign-extended to 32 bits.
* ``frozen_w`` / ``frozen_a`` (lora-fa, once per batch): XW into the init buffer and
  U = requant(X·A) (MULT/SHIFT) into the U buffer.
* ``branch``: Y = XW + U·Tp (lora-fa) or X·Tp (full) with Tp the perturbed operand (flags
  ``minus``, ``plain``; ``zero_w``: XW taken as 0, for a W of 0 without ``frozen_w``; the
  generator is saved/restored first with ``save``/``restore``).
  Output: per tile (panel outer, token tile inner) R beats, beat i = feature p*R + i, lane
  j = Y[mt*C + j, p*R + i] (int32).
* ``accumulate``: D += GRAD * z (one generator transfer per T word; ``restore`` first);
  ``apply``: T <- T - round(D * ETA_MULT >> ETA_SHIFT), D <- 0.

Panels of the weight operand are fetched once per job, perturbed by :class:`~.perturb.
PerturbUnit` on the way, into a double-buffered staging memory that every token tile of the
panel reuses; the next panel is fetched while the current one is computed, so the
perturbation costs no cycles. The master copy is never written with a perturbation.

Blocks (the top holds them and the memories of :mod:`.buffers`, and joins their signatures
with ``wiring.connect``; the tile sequencing is the GEMM engine's, from
:mod:`zoforge.hw.pe`, built from the layer's :class:`~zoforge.hw.pe.tiles.
Tiling`): the AXI4-Lite target and :class:`~.control.LayerControl` (registers, the job in
flight: :class:`~.control.LayerJobSignature` to the units, the tiles' job and the
requantizer's mode), :class:`~.loader.LayerLoader` (input stream -> memories),
:class:`~.fetch.PanelFetch` (weight panels -> :class:`~.perturb.PerturbUnit` -> staging),
the feeder (staging and token buffers -> array; the packed token buffer through
:class:`~.token_buffer.TokenReader`), the array, the drain, the output stage
(result banks + init -> requantizer -> rows) and the requantizer,
:class:`~.sink.ResultSink` (rows -> output stream, init or U buffer),
:class:`~.update.UpdateUnit`, :class:`~.reader.MasterReader`, the generator
(:class:`~zoforge.hw.rng.source.PerturbationSource`) and what the units share
(:mod:`.share`: the generator's stream, the master copy's and D's ports).
"""
from __future__ import annotations


from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.zolayer.config import Formats, ZoLayerConfig
from zoforge.hw.rng.source import PerturbationSource
from zoforge.hw.pe.array import SystolicArray, min_tile_interval
from zoforge.hw.pe.axil import AxiLiteTarget
from zoforge.hw.pe.bus import AxiLiteSignature, AxiStreamSignature
from zoforge.hw.pe.drain import Drain
from zoforge.hw.pe.feeder import Feeder
from zoforge.hw.pe.output import OutputStage, SideRead
from zoforge.hw.pe.requant import RequantStream
from zoforge.hw.pe.tiles import lut_ram_result_banks

from .buffers import Memory, layer_buffers, layer_tiling, trained_rows
from .control import LayerControl
from .fetch import PanelFetch
from .loader import LayerLoader
from .reader import MasterReader
from .registers import ADDR_BITS, DIM_BITS, WRITTEN
from .share import MasterPorts, ZSwitch
from .sink import ResultSink
from .token_buffer import TokenReader
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
                "min_tile_interval": min_tile_interval(self.rows, self.cols,
                                                       skewed_drain=True),
                "result_banks": lut_ram_result_banks(self.rows),
                "branch_lanes": self.config.branch_lanes}

    def elaborate(self, platform):
        m = Module()
        cfg, R = self.config, self.rows
        tiling = layer_tiling(cfg)
        buffers = layer_buffers(cfg, self.z_width)
        memories = {name: buffer.memory(collisions_unused=True) for name, buffer in buffers.items()}
        for name, memory in memories.items():
            m.submodules[name] = memory
        acts = {"x_rd": cfg.max_k, **({"u_rd": cfg.max_r} if self.lora else {})}
        side = {"init_rd": SideRead("bias", buffers[Memory.INIT], "row")} if self.lora else {}
        m.submodules.regs = axil = AxiLiteTarget(ADDR_BITS, WRITTEN)
        m.submodules.control = control = LayerControl(cfg)
        F = cfg.features_per_word
        m.submodules.loader = loader = LayerLoader(tiling, buffers, self.lanes, cfg.max_k, F)
        m.submodules.fetch = fetch = PanelFetch(tiling, buffers, self.z_lanes, self.z_width,
                                                cfg.branch_lanes)
        m.submodules.array = array = SystolicArray(R, self.cols, a_bits=Formats.WEIGHT_BITS,
                                                   skewed_drain=True)
        m.submodules.feeder = feeder = Feeder(tiling, array.min_tile_interval, acts,
                                                registered={"x_rd"})
        m.submodules.token_reader = tokens = TokenReader(tiling, cfg.max_k, self.lanes)
        m.submodules.drain = drain = Drain(tiling, array.capture_latency, array.drain_lead)
        m.submodules.output = output = OutputStage(tiling, side)
        m.submodules.requant = requant = RequantStream(self.cols)
        m.submodules.sink = sink = ResultSink(tiling, buffers, trained_rows(cfg))
        m.submodules.update = update = UpdateUnit(
            R, self.z_lanes, self.z_width, DIM_BITS, buffers[Memory.MASTER].addr_bits, F,
            given_ends=True)
        m.submodules.reader = reader = MasterReader(buffers[Memory.MASTER], R, self.lanes, F)
        m.submodules.generator = generator = PerturbationSource(self.generator_config)
        m.submodules.z_switch = z_switch = ZSwitch(self.z_lanes * self.z_width,
                                                   cfg.queries_per_job)
        m.submodules.master_ports = shared = MasterPorts(buffers)
        job = control.job

        # host side: registers, the job to every unit, the generator's snapshot
        wiring.connect(m, wiring.flipped(self.s_axil), axil.bus)
        wiring.connect(m, axil.regs, control.port)
        wiring.connect(m, job, loader.job, fetch.job, reader.job, z_switch.job, shared.job)
        # the sink's job: its steady flags a register of their own beside it, a cycle late
        # (its results come many cycles after the launch, and no job's reach the next one's
        # launch), not the control's flags fanned out across the chip
        for name, value in job.signature.members.items():
            copy = (m.d.sync if name in ("branch", "frozen_w", "frozen_a") else m.d.comb)
            copy += getattr(sink.job, name).eq(getattr(job, name))
        wiring.connect(m, control.tiles, feeder.job, output.job, sink.tiles)
        wiring.connect(m, control.mode, requant.mode)
        wiring.connect(m, control.generator, generator.control)
        # a job finishes the cycle after its unit's last action (a register between the
        # units' end tests and the control's state: not one path), one register per unit
        # (each end test apart, their OR in front of the control's state)
        m.d.comb += [self.irq.eq(control.irq), control.array_step.eq(feeder.valid)]
        # the perturbation's shift a register of its own beside the unit, clamped to the z
        # width (z >> e is z's sign from e = W - 1 on, the same operand): the unit's
        # shifters take log2(W) select bits, not the setting's 5. A cycle late: the setting
        # changes only while the layer is idle, and a job's first word reaches the unit
        # cycles after the start's write
        W, setting = self.z_width, control.settings.eps_shift
        eps_shift = Signal(range(W), name="eps_shift")
        m.d.sync += eps_shift.eq(Mux(setting >= W - 1, W - 1, setting))
        m.d.comb += fetch.eps_shift.eq(eps_shift)
        ended = []
        for name, unit in (("loader", loader), ("update", update), ("reader", reader),
                           ("sink", sink)):
            ended.append(Signal(name=f"{name}_ended"))
            m.d.sync += ended[-1].eq(unit.done)
        m.d.comb += control.finish.eq(Cat(ended).any())

        # loads; the generator to the panel fetch or the update unit
        wiring.connect(m, wiring.flipped(self.s_axis), loader.s_axis)
        wiring.connect(m, generator.out, z_switch.z)
        wiring.connect(m, z_switch.fetch, fetch.z)
        wiring.connect(m, z_switch.update, update.z)

        # compute: panel fetch -> staging -> feeder -> array -> drain -> output -> requant
        # -> sink
        wiring.connect(m, fetch.panels, feeder.panels)
        wiring.connect(m, feeder.x_rd, tokens.x_rd)              # X, one k-step per read
        if self.lora:
            m.d.comb += feeder.act_select.eq(job.branch)          # a branch multiplies U
        m.d.comb += [array.a.eq(feeder.w.payload), array.b.eq(feeder.x),
                     array.valid.eq(feeder.valid), array.first.eq(feeder.first),
                     array.last.eq(feeder.last), drain.start.eq(job.launch),
                     drain.capture.eq(feeder.last), drain.res.eq(array.res_out),
                     array.sel.eq(drain.sel), output.drained.eq(drain.drained),
                     feeder.tile_done.eq(output.tile_done)]
        wiring.connect(m, output.rows, requant.i)
        wiring.connect(m, requant.o, output.results)
        wiring.connect(m, output.m_axis, sink.results)

        # the update unit (accumulate, apply)
        settings = control.settings
        m.d.comb += [update.start.eq(job.launch & (job.accumulate | job.apply)),
                     update.apply.eq(job.apply), update.inner.eq(job.inner),
                     update.outer.eq(job.outer), update.one_word.eq(job.one_word),
                     update.one_panel.eq(job.one_panel), update.g.eq(settings.grad),
                     update.eta_mult.eq(settings.eta_mult),
                     update.eta_shift.eq(settings.eta_shift)]

        # the memories' ports: (unit, its port, memory); "_rd" read ports, "_wr" write ports
        ports_of = [(loader, "x_buffer_wr", Memory.X), (fetch, "stage_wr", Memory.STAGE),
                    (feeder, "w_rd", Memory.STAGE), (tokens, "packed_rd", Memory.X),
                    (drain, "res_wr", Memory.RESULT), (output, "res_rd", Memory.RESULT),
                    (update, "d_rd", Memory.ACCUMULATOR)]
        if self.lora:
            ports_of += [(loader, "w_frozen_wr", Memory.W_FROZEN),
                         (loader, "a_frozen_wr", Memory.A_FROZEN),
                         (fetch, "w_rd", Memory.W_FROZEN), (fetch, "a_rd", Memory.A_FROZEN),
                         (feeder, "u_rd", Memory.U), (output, "init_rd", Memory.INIT),
                         (sink, "init_wr", Memory.INIT), (sink, "u_wr", Memory.U)]
        for unit, port, memory in ports_of:
            memory = memories[memory]
            wiring.connect(m, getattr(unit, port), (memory.read_port() if port.endswith("_rd")
                                                    else memory.write_port()))
        # the master copy and D, shared (:class:`~.share.MasterPorts`)
        wiring.connect(m, shared.t_rd, memories[Memory.MASTER].read_port())
        wiring.connect(m, shared.t_wr, memories[Memory.MASTER].write_port())
        wiring.connect(m, shared.d_wr, memories[Memory.ACCUMULATOR].write_port())
        wiring.connect(m, shared.reader_t_rd, reader.t_rd)
        wiring.connect(m, shared.update_t_rd, update.t_rd)
        wiring.connect(m, shared.fetch_t_rd, fetch.t_rd)
        wiring.connect(m, shared.update_t_wr, update.t_wr)
        wiring.connect(m, shared.update_d_wr, update.d_wr)
        wiring.connect(m, shared.loader_t_wr, loader.master_wr)
        wiring.connect(m, shared.loader_d_wr, loader.update_accumulator_wr)

        # the output stream: the master reader's or the sink's
        for name in ("tvalid", "tlast", "tdata"):
            m.d.comb += getattr(self.m_axis, name).eq(
                Mux(job.read_master, getattr(reader.m_axis, name), getattr(sink.m_axis, name)))
        m.d.comb += [reader.m_axis.tready.eq(self.m_axis.tready),
                     sink.m_axis.tready.eq(self.m_axis.tready)]
        return m
