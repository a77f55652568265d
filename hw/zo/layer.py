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
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from zoforge.golden.zolayer.config import Formats, ZoLayerConfig
from zoforge.hw.bus import AxiLiteSignature, AxiStreamSignature
from zoforge.hw.pe.array import SystolicArray
from zoforge.hw.pe.axil import AxiLiteTarget
from zoforge.hw.pe.requant import RequantStream
from zoforge.hw.rng.designs import generator_for

from .perturb import PerturbUnit
from .registers import ADDR_BITS, CTRL_FIELDS, JOBS, LORA_JOBS, REGISTERS
from .update import UpdateUnit
from .walk import PanelWalk

__all__ = ["ZoLayer"]

DIM_BITS = 16
COUNTER_BITS = 32


def _bits(count: int) -> int:
    """Address bits for ``count`` entries (at least 1)."""
    return max(1, (count - 1).bit_length())


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
        self.max_kt = config.max_r if self.lora else config.max_k
        self.panels = config.max_n // config.rows
        self.m_tiles = config.max_m // config.cols
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

    # ------------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        cfg, R, C = self.config, self.rows, self.cols
        kb, ktb = _bits(cfg.max_k), _bits(self.max_kt)
        sb = _bits(max(cfg.max_k, self.max_kt))          # staging: k-steps of any job
        mtb = _bits(self.m_tiles)
        t_words = self.panels * self.max_kt
        # the longest walk: the trained matrix, or a frozen W or A (lora-fa)
        walk_bits = _bits(max(self.panels, cfg.max_r // R) * max(cfg.max_k, self.max_kt)) + 1
        acc_bits = Formats.accumulator_bits(self.z_width)

        # -- memories ---------------------------------------------------------------------
        def memory(name, shape, depth):
            m.submodules[name] = mem = Memory(shape=unsigned(shape), depth=depth, init=[])
            return mem

        x_mem = memory("x_buffer", 8 * C, self.m_tiles << kb)
        t_mem = memory("master", Formats.MASTER_BITS * R, t_words)
        d_mem = memory("update_accumulator", acc_bits * R, t_words)
        stage_mem = memory("stage", Formats.WEIGHT_BITS * R, 2 << sb)
        res_mem = memory("result_buffer", 32 * C, 2 << _bits(R))
        x_wr, x_rd = x_mem.write_port(), x_mem.read_port()
        t_wr, t_rd = t_mem.write_port(), t_mem.read_port()
        d_wr, d_rd = d_mem.write_port(), d_mem.read_port()
        st_wr, st_rd = stage_mem.write_port(), stage_mem.read_port()
        res_wr, res_rd = res_mem.write_port(), res_mem.read_port()
        if self.lora:
            w_mem = memory("w_frozen", 8 * R, self.panels * cfg.max_k)
            a_mem = memory("a_frozen", 8 * R, (cfg.max_r // R) * cfg.max_k)
            u_mem = memory("u_buffer", 8 * C, self.m_tiles << ktb)
            i_mem = memory("init_buffer", 32 * C, (self.panels << mtb) << _bits(R))
            w_wr, w_rd = w_mem.write_port(), w_mem.read_port()
            a_wr, a_rd = a_mem.write_port(), a_mem.read_port()
            u_wr, u_rd = u_mem.write_port(), u_mem.read_port()
            i_wr, i_rd = i_mem.write_port(), i_mem.read_port()

        m.submodules.array = array = SystolicArray(R, C, a_bits=Formats.WEIGHT_BITS)
        m.submodules.requant = requant = RequantStream(C)
        m.submodules.perturb = perturb = PerturbUnit(R, self.z_lanes, self.z_width)
        m.submodules.update = update = UpdateUnit(R, self.z_lanes, self.z_width, DIM_BITS,
                                                  _bits(t_words))
        m.submodules.generator = generator = generator_for(self.generator_config)
        m.submodules.regs = regs = AxiLiteTarget(ADDR_BITS)
        wiring.connect(m, wiring.flipped(self.s_axil), regs.bus)

        # -- registers --------------------------------------------------------------------
        values = {name: Signal(reg.bits, name=name.lower()) for name, reg in REGISTERS.items()
                  if reg.access == "rw" or name in ("CYCLES", "ARRAY_CYCLES", "STEP_CYCLES")}
        busy, done, unavailable = Signal(), Signal(), Signal()
        job = Signal(4)
        minus, plain = Signal(), Signal()
        start = Signal()
        save_pulse, restore_pulse = Signal(), Signal()
        dim_m, dim_k, dim_n, rank = values["M"], values["K"], values["N"], values["RANK"]
        m.d.comb += self.irq.eq(done & values["IRQ_EN"])

        def field(value, name):
            offset, width = CTRL_FIELDS[name]
            return value[offset:offset + width]

        with m.If(busy):
            m.d.sync += [values["CYCLES"].eq(values["CYCLES"] + 1),
                         values["STEP_CYCLES"].eq(values["STEP_CYCLES"] + 1)]
        wdata = regs.wr_data
        with m.If(regs.wr_en):
            with m.Switch(regs.wr_addr):
                with m.Case(REGISTERS["CTRL"].address):
                    with m.If(~busy & field(wdata, "start")):
                        m.d.comb += [start.eq(1),
                                     save_pulse.eq(field(wdata, "save")),
                                     restore_pulse.eq(field(wdata, "restore"))]
                        m.d.sync += [job.eq(field(wdata, "job")),
                                     minus.eq(field(wdata, "minus")),
                                     plain.eq(field(wdata, "plain"))]
                with m.Case(REGISTERS["STATUS"].address):
                    with m.If(wdata[1]):
                        m.d.sync += done.eq(0)
                with m.Case(REGISTERS["STEP_CYCLES"].address):
                    m.d.sync += values["STEP_CYCLES"].eq(0)
                for name, reg in REGISTERS.items():
                    if reg.access == "rw":
                        with m.Case(reg.address):
                            with m.If(~busy):
                                m.d.sync += values[name].eq(wdata[:reg.bits])
        info = Const(R | C << 8 | (0 if self.lora else 1) << 16, 32)
        constants = {"INFO": info, "MAX_M": Const(cfg.max_m, 32), "MAX_K": Const(cfg.max_k, 32),
                     "MAX_N": Const(cfg.max_n, 32), "MAX_R": Const(cfg.max_r, 32)}
        read_values = {**values, **constants, "STATUS": Cat(busy, done, unavailable),
                       "CTRL": Cat(Const(0, 1), job, Const(0, 2), minus, plain)}
        with m.Switch(regs.rd_addr):
            for name, reg in REGISTERS.items():
                with m.Case(reg.address):
                    m.d.comb += regs.rd_data.eq(read_values[name])

        # -- job control ------------------------------------------------------------------
        def is_job(*names):
            return Cat(job == JOBS[name] for name in names).any()

        launch = Signal()            # the cycle after the CTRL write: units start
        finish = Signal()            # the job's last action happens this cycle
        available = is_job(*(name for name in JOBS if self.lora or name not in LORA_JOBS))
        m.d.sync += launch.eq(start)
        with m.If(start):
            m.d.sync += [busy.eq(1), done.eq(0), unavailable.eq(0), values["CYCLES"].eq(0),
                         values["ARRAY_CYCLES"].eq(0)]
        with m.If(launch & ~available):
            m.d.comb += finish.eq(1)
            m.d.sync += unavailable.eq(1)
        with m.If(finish):
            m.d.sync += [busy.eq(0), done.eq(1)]
        m.d.comb += [generator.save.eq(save_pulse), generator.restore.eq(restore_pulse)]
        if hasattr(generator, "start"):          # the pool: one endless perturbation
            m.d.comb += [generator.start.eq(generator.idle),
                         generator.length.eq((1 << len(generator.length)) - 1)]

        branch, frozen_w, frozen_a = is_job("branch"), is_job("frozen_w"), is_job("frozen_a")
        compute = branch | frozen_w | frozen_a
        k_t = rank if self.lora else dim_k
        feat = Mux(frozen_a, rank, dim_n)               # features of a compute job
        depth = Mux(branch, k_t, dim_k)                 # k-steps of a compute job

        # -- loads: input stream -> buffers ------------------------------------------------
        m.submodules.load_walk = lw = PanelWalk(R, DIM_BITS, walk_bits)
        loading, load_done = Signal(), Signal()
        load_x = is_job("load_x")
        m.d.comb += [lw.restart.eq(launch), lw.inner.eq(Mux(is_job("load_master"), k_t, dim_k)),
                     lw.outer.eq(Mux(load_x, dim_m, Mux(is_job("load_a"), rank, dim_n)))]
        # load_x walks token tiles: C tokens per "panel" (a second walk with step C)
        m.submodules.x_walk = xw = PanelWalk(C, DIM_BITS, 1)
        m.d.comb += [xw.restart.eq(launch), xw.inner.eq(dim_k), xw.outer.eq(dim_m)]
        load_job = is_job("load_x", "load_w", "load_a", "load_master")
        with m.If(launch):
            m.d.sync += load_done.eq(0)
        m.d.comb += self.s_axis.tready.eq(busy & ~launch & load_job & ~load_done)
        beat = self.s_axis.tvalid & self.s_axis.tready
        tdata = self.s_axis.tdata
        lane = [tdata[32 * l:32 * (l + 1)] for l in range(self.lanes)]
        last_word = Mux(load_x, xw.last, lw.last)
        m.d.comb += [lw.advance.eq(beat), xw.advance.eq(beat & load_x)]
        with m.If(beat & last_word):
            m.d.comb += finish.eq(1)
            m.d.sync += load_done.eq(1)
        m.d.comb += [x_wr.addr.eq(Cat(xw.k[:kb], xw.panel[:mtb])),
                     x_wr.data.eq(Cat(l[:8] for l in lane[:C])),
                     x_wr.en.eq(beat & load_x)]
        master_words = Cat(l[:Formats.MASTER_BITS] for l in lane[:R])
        load_master = beat & is_job("load_master")
        if self.lora:
            m.d.comb += [w_wr.addr.eq(lw.flat), w_wr.data.eq(Cat(l[:8] for l in lane[:R])),
                         w_wr.en.eq(beat & is_job("load_w")),
                         a_wr.addr.eq(lw.flat), a_wr.data.eq(w_wr.data),
                         a_wr.en.eq(beat & is_job("load_a"))]

        # -- the update unit (accumulate, apply) -----------------------------------------
        updating = is_job("accumulate", "apply")
        m.d.comb += [update.start.eq(launch & updating), update.apply.eq(is_job("apply")),
                     update.inner.eq(k_t), update.outer.eq(dim_n),
                     update.g.eq(values["GRAD"]), update.eta_mult.eq(values["ETA_MULT"]),
                     update.eta_shift.eq(values["ETA_SHIFT"]),
                     update.t_rdata.eq(t_rd.data), update.d_rdata.eq(d_rd.data)]
        with m.If(update.done):
            m.d.comb += finish.eq(1)

        # -- panel fetch: weights -> perturbation -> staging (double-buffered) ------------
        m.submodules.fetch_walk = fw = PanelWalk(R, DIM_BITS, walk_bits)
        staged = Signal(2)                   # complete panels in the staging memory
        occupied = Signal(2)                 # banks holding a panel, complete or being filled
        staged_inc, staged_dec = Signal(), Signal()
        fetched_all, pending = Signal(), Signal()
        pending_k, pending_bank, pending_end = Signal(sb), Signal(), Signal()
        fetch_bank = Signal()
        transfer = pending & perturb.words.ready
        bank_free = (fw.k != 0) | (occupied < 2)     # mid-panel, or a bank to start one in
        issue = (busy & ~launch & compute & ~fetched_all & bank_free
                 & (~pending | transfer))
        m.d.comb += [fw.restart.eq(launch), fw.advance.eq(issue), fw.inner.eq(depth),
                     fw.outer.eq(feat)]
        with m.If(launch):
            m.d.sync += [fetched_all.eq(0), pending.eq(0), fetch_bank.eq(0)]
        with m.Else():
            m.d.sync += pending.eq(issue | (pending & ~transfer))
        with m.If(issue):
            m.d.sync += [pending_k.eq(fw.k[:sb]), pending_bank.eq(fetch_bank),
                         pending_end.eq(fw.panel_end)]
            with m.If(fw.panel_end):
                m.d.sync += fetch_bank.eq(~fetch_bank)
            with m.If(fw.last):
                m.d.sync += fetched_all.eq(1)
        frozen_word = Signal(Formats.MASTER_BITS * R)      # int8 weights in master format
        if self.lora:
            m.d.comb += [w_rd.addr.eq(fw.flat), w_rd.en.eq(issue),
                         a_rd.addr.eq(fw.flat), a_rd.en.eq(issue)]
            weights = Mux(frozen_a, a_rd.data, w_rd.data)
            for i in range(R):
                m.d.comb += frozen_word.word_select(i, Formats.MASTER_BITS).eq(
                    weights.word_select(i, 8).as_signed() << Formats.MASTER_FRAC)
        m.d.comb += [
            perturb.words.valid.eq(pending),
            perturb.words.payload.eq(Mux(branch, t_rd.data, frozen_word)),
            perturb.perturb.eq(branch & ~plain), perturb.minus.eq(minus),
            perturb.eps_shift.eq(values["EPS_SHIFT"]),
            perturb.out.ready.eq(1),
            st_wr.addr.eq(Cat(pending_k, pending_bank)),
            st_wr.data.eq(perturb.out.payload.as_value()),
            st_wr.en.eq(transfer),
            staged_inc.eq(transfer & pending_end),
        ]
        # The generator feeds the perturbation (branches) or the update unit (accumulate).
        m.d.comb += [perturb.z.payload.eq(generator.out.payload),
                     perturb.z.valid.eq(generator.out.valid & branch),
                     update.z.payload.eq(generator.out.payload),
                     update.z.valid.eq(generator.out.valid & ~branch),
                     generator.out.ready.eq(Mux(branch, perturb.z.ready, update.z.ready))]
        m.d.sync += [staged.eq(staged + staged_inc - staged_dec),
                     occupied.eq(occupied + (issue & (fw.k == 0)) - staged_dec)]

        # -- master memory ports: loads, fetches, the reader, the update ------------------
        reading = is_job("read_master")
        m.submodules.read_walk = rw = PanelWalk(R, DIM_BITS, walk_bits)
        r_valid, r_last, read_all = Signal(), Signal(), Signal()
        r_adv = ~r_valid | self.m_axis.tready
        r_issue = busy & ~launch & reading & ~read_all & r_adv
        m.d.comb += [rw.restart.eq(launch), rw.advance.eq(r_issue), rw.inner.eq(k_t),
                     rw.outer.eq(dim_n)]
        with m.If(launch):
            m.d.sync += [read_all.eq(0), r_valid.eq(0)]
        with m.Elif(r_adv):
            m.d.sync += [r_valid.eq(r_issue), r_last.eq(r_issue & rw.last)]
        with m.If(r_issue & rw.last):
            m.d.sync += read_all.eq(1)
        with m.If(r_valid & r_last & self.m_axis.tready):
            m.d.comb += finish.eq(1)
        m.d.comb += [
            t_rd.addr.eq(Mux(reading, rw.flat, Mux(updating, update.rd_addr, fw.flat))),
            t_rd.en.eq(Mux(reading, r_adv, Mux(updating, update.rd_en, issue))),
            d_rd.addr.eq(update.rd_addr), d_rd.en.eq(update.rd_en),
            t_wr.addr.eq(Mux(updating, update.wr_addr, lw.flat)),
            t_wr.data.eq(Mux(updating, update.t_wdata.as_value(), master_words)),
            t_wr.en.eq(Mux(updating, update.t_we, load_master)),
            d_wr.addr.eq(Mux(updating, update.wr_addr, lw.flat)),
            d_wr.data.eq(Mux(updating, update.d_wdata.as_value(), 0)),
            d_wr.en.eq(Mux(updating, update.wr_en, load_master)),
        ]

        # -- feeder: staging + token buffer -> array, one k-step per cycle -----------------
        min_gap = array.min_tile_interval
        g_active, g_done = Signal(), Signal()
        g_k = Signal(DIM_BITS)
        g_mt = Signal(mtb)
        g_m0 = Signal(DIM_BITS + 1)
        g_p0 = Signal(DIM_BITS + 1)
        g_bank = Signal()
        gap = Signal(range(min_gap + 1), init=min_gap)
        in_flight = Signal(2)
        tile_out = Signal()
        begin = (busy & ~launch & compute & ~g_done & ~g_active & (staged != 0)
                 & (in_flight < 2) & (gap >= min_gap))
        step = g_active | begin
        is_first = g_k == 0
        is_last = g_k + 1 >= depth
        m.d.comb += [st_rd.addr.eq(Cat(g_k[:sb], g_bank)), st_rd.en.eq(step),
                     x_rd.addr.eq(Cat(g_k[:kb], g_mt)), x_rd.en.eq(step)]
        use_u = Const(0, 1)
        if self.lora:
            use_u = branch
            m.d.comb += [u_rd.addr.eq(Cat(g_k[:ktb], g_mt)), u_rd.en.eq(step)]
        s1_valid, s1_first, s1_last = Signal(), Signal(), Signal()
        m.d.sync += [s1_valid.eq(step), s1_first.eq(step & is_first),
                     s1_last.eq(step & is_last),
                     gap.eq(Mux(begin, 1, Mux(gap == min_gap, gap, gap + 1)))]
        with m.If(step):
            m.d.sync += [g_k.eq(g_k + 1), g_active.eq(1)]
            with m.If(is_last):
                m.d.sync += [g_active.eq(0), g_k.eq(0)]
                with m.If(g_m0 + C >= dim_m):
                    m.d.comb += staged_dec.eq(1)
                    m.d.sync += [g_mt.eq(0), g_m0.eq(0), g_p0.eq(g_p0 + R),
                                 g_bank.eq(~g_bank)]
                    with m.If(g_p0 + R >= feat):
                        m.d.sync += g_done.eq(1)
                with m.Else():
                    m.d.sync += [g_mt.eq(g_mt + 1), g_m0.eq(g_m0 + C)]
        with m.If(launch):
            m.d.sync += [g_active.eq(0), g_done.eq(0), g_k.eq(0), g_mt.eq(0), g_m0.eq(0),
                         g_p0.eq(0), g_bank.eq(0), gap.eq(min_gap), in_flight.eq(0),
                         staged.eq(0), occupied.eq(0)]
        with m.Else():
            m.d.sync += in_flight.eq(in_flight + begin - tile_out)
        b_word = Mux(use_u, u_rd.data, x_rd.data) if self.lora else x_rd.data
        m.d.comb += [array.valid.eq(s1_valid), array.first.eq(s1_first),
                     array.last.eq(s1_last)]
        for i in range(R):
            m.d.comb += array.a[i].eq(st_rd.data[16 * i:16 * (i + 1)])
        for j in range(C):
            m.d.comb += array.b[j].eq(b_word[8 * j:8 * (j + 1)])
        with m.If(s1_valid):
            m.d.sync += values["ARRAY_CYCLES"].eq(values["ARRAY_CYCLES"] + 1)

        # -- drain: array -> result bank, bottom row first ----------------------------------
        delay = [Signal(name=f"drain_delay_{n}") for n in range(array.capture_latency)]
        m.d.sync += [delay[0].eq(s1_valid & s1_last)] + [
            delay[n].eq(delay[n - 1]) for n in range(1, len(delay))]
        draining, d_bank, drained = Signal(), Signal(), Signal()
        d_step = Signal(_bits(R))
        tiles_ready = Signal(2)
        drain = delay[-1] | draining
        m.d.comb += [res_wr.en.eq(drain),
                     res_wr.addr.eq(Cat((R - 1 - d_step)[:_bits(R)], d_bank)),
                     res_wr.data.eq(array.res_out.as_value()),
                     array.shift.eq(drain & (d_step != R - 1))]
        with m.If(drain):
            m.d.sync += [d_step.eq(d_step + 1), draining.eq(1)]
            with m.If(d_step == R - 1):
                m.d.sync += [d_step.eq(0), draining.eq(0), d_bank.eq(~d_bank)]
                m.d.comb += drained.eq(1)
        with m.If(launch):
            m.d.sync += [tiles_ready.eq(0), d_bank.eq(0)]
        with m.Else():
            m.d.sync += tiles_ready.eq(tiles_ready + drained - tile_out)

        # -- output: result bank (+ init) -> requantizer -> stream or buffers ---------------
        out_ready = Mux(branch, self.m_axis.tready, 1)
        adv = requant.i.ready
        o_row = Signal(_bits(R))
        o_bank = Signal()
        o_mt = Signal(mtb)
        o_m0, o_p0 = Signal(DIM_BITS + 1), Signal(DIM_BITS + 1)
        o_panel = Signal(DIM_BITS)
        o_issue = adv & (tiles_ready != 0)
        tile_end = o_row == R - 1
        job_end = tile_end & (o_m0 + C >= dim_m) & (o_p0 + R >= feat)
        m.d.comb += [res_rd.addr.eq(Cat(o_row, o_bank)), res_rd.en.eq(adv)]
        o_valid, o_last = Signal(), Signal()
        with m.If(adv):
            m.d.sync += [o_valid.eq(o_issue), o_last.eq(o_issue & job_end)]
        with m.If(o_issue):
            m.d.sync += o_row.eq(o_row + 1)
            with m.If(tile_end):
                m.d.comb += tile_out.eq(1)
                m.d.sync += [o_row.eq(0), o_bank.eq(~o_bank), o_mt.eq(o_mt + 1),
                             o_m0.eq(o_m0 + C)]
                with m.If(o_m0 + C >= dim_m):
                    m.d.sync += [o_mt.eq(0), o_m0.eq(0), o_p0.eq(o_p0 + R),
                                 o_panel.eq(o_panel + 1)]
        with m.If(launch):
            m.d.sync += [o_row.eq(0), o_bank.eq(0), o_mt.eq(0), o_m0.eq(0), o_p0.eq(0),
                         o_panel.eq(0), o_valid.eq(0)]
        init = Const(0, 32 * C)
        if self.lora:
            m.d.comb += [i_rd.addr.eq(Cat(o_row, o_mt, o_panel[:_bits(self.panels)])),
                         i_rd.en.eq(adv)]
            init = i_rd.data
        m.d.comb += [
            requant.i.valid.eq(o_valid), requant.i.payload.last.eq(o_last),
            requant.i.payload.acc.eq(res_rd.data), requant.i.payload.bias.eq(init),
            requant.o.ready.eq(out_ready),
            requant.bias_en.eq(branch), requant.per_channel.eq(0),
            requant.raw.eq(~frozen_a), requant.relu.eq(0),
            requant.tensor_mult.eq(values["MULT"]), requant.tensor_shift.eq(values["SHIFT"]),
        ]
        # Sinks: the output stream (branch), the init buffer (frozen_w), the U buffer.
        s_row = Signal(_bits(R))
        s_mt = Signal(mtb)
        s_m0, s_p0 = Signal(DIM_BITS + 1), Signal(DIM_BITS + 1)
        s_panel = Signal(DIM_BITS)
        sink = requant.o.valid & out_ready
        with m.If(sink):
            m.d.sync += s_row.eq(s_row + 1)
            with m.If(s_row == R - 1):
                m.d.sync += [s_row.eq(0), s_mt.eq(s_mt + 1), s_m0.eq(s_m0 + C)]
                with m.If(s_m0 + C >= dim_m):
                    m.d.sync += [s_mt.eq(0), s_m0.eq(0), s_p0.eq(s_p0 + R),
                                 s_panel.eq(s_panel + 1)]
        with m.If(launch):
            m.d.sync += [s_row.eq(0), s_mt.eq(0), s_m0.eq(0), s_p0.eq(0), s_panel.eq(0)]
        with m.If(sink & requant.o.payload.last):
            m.d.comb += finish.eq(1)
        row = requant.o.payload.data
        if self.lora:
            m.d.comb += [
                i_wr.addr.eq(Cat(s_row, s_mt, s_panel[:_bits(self.panels)])),
                i_wr.data.eq(row.as_value()), i_wr.en.eq(sink & frozen_w),
                u_wr.addr.eq(Cat((s_p0 + s_row)[:ktb], s_mt)),
                u_wr.data.eq(Cat(row[j][:8] for j in range(C))), u_wr.en.eq(sink & frozen_a),
            ]
        with m.If(reading):
            m.d.comb += [self.m_axis.tvalid.eq(r_valid), self.m_axis.tlast.eq(r_last)]
            for i in range(R):
                m.d.comb += self.m_axis.tdata[32 * i:32 * (i + 1)].eq(
                    t_rd.data[Formats.MASTER_BITS * i:Formats.MASTER_BITS * (i + 1)]
                    .as_signed())
        with m.Else():
            m.d.comb += [self.m_axis.tvalid.eq(requant.o.valid & branch),
                         self.m_axis.tlast.eq(requant.o.payload.last),
                         self.m_axis.tdata[:32 * C].eq(row.as_value())]
        return m
