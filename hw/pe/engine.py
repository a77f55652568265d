"""Tiled INT8 GEMM engine: ``Y = requant(X·W + bias)`` on an R x C systolic array.

Host interface (what a Zynq PS sees):

* AXI4-Lite control/status registers (``s_axil_*``, see :data:`REGISTERS` and docs/engine.md),
  an interrupt ``irq`` (= ``done & irq_en``).
* AXI4-Stream in (``s_axis_*``, ``8 * pack * max(R, C)`` bits): the operands, in this order,
  each *panel* as ``ceil(K / pack)`` beats that carry ``pack`` consecutive k-steps:

  1. W panel 0, 2. X panels 0 .. ceil(M/R)-1, 3. W panels 1 .. ceil(N/C)-1.

  An X panel beat holds bytes ``X[mt*R + i, w*pack + p]`` at byte ``p*R + i``; a W panel
  beat holds ``W[w*pack + p, nt*C + j]`` at byte ``p*C + j``. Edge tiles are padded with
  zeros by the host (rows past M, columns past N, k-steps past K).
* AXI4-Stream out (``m_axis_*``, ``32 * C`` bits): each output tile as R beats (tile row i
  in beat i, column j in lane j, 32 bits per lane: the int32 result in raw mode, else the
  int8 result sign-extended), tiles in the order (nt outer, mt inner); ``tlast`` on the
  job's last beat. Back-pressure (``tready`` low) stalls the output pipeline.

Buffers (``amaranth.lib.memory``): the whole X (``max_m x max_k`` bytes) stays on chip and is
reused for every column panel; W panels are double-buffered (two banks of ``max_k x C``
bytes), so panel nt+1 streams in while panel nt is being computed; results are
double-buffered too (two banks of R rows), so a tile drains while the previous one streams
out. Tiles are computed back to back (nt outer, mt inner), each for ``pack * ceil(K/pack)``
cycles, at least :attr:`~zoforge.hw.pe.array.SystolicArray.min_tile_interval` apart.
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import MAX_PARAM_WORDS, EngineConfig

from .array import SystolicArray
from .axil import AxiLiteTarget, axil_members
from zoforge.golden.gemm_widths import ACC_BITS, MULT_BITS, OPERAND_BITS, SHIFT_BITS

from .requant import RequantPipeline

__all__ = ["GemmEngine", "check_engine_parameters", "REGISTERS", "PARAM_REGIONS", "CTRL_BITS", "ADDR_BITS"]

ADDR_BITS = 16
DIM_BITS = 16
COUNTER_BITS = 32

#: Register byte addresses (32-bit registers).
REGISTERS = {
    "CTRL": 0x00,          # W: bit0 start; RW: bit1 relu, bit2 raw, bit3 per_channel, bit4 bias_en
    "STATUS": 0x04,        # R: bit0 busy, bit1 done (sticky; write 1 to bit1 clears it)
    "IRQ_EN": 0x08,        # RW: bit0 interrupt enable (irq = done & irq_en)
    "M": 0x0C, "K": 0x10, "N": 0x14,   # RW: GEMM dimensions
    "MULT": 0x18,          # RW: per-tensor requantization multiplier (16 bits)
    "SHIFT": 0x1C,         # RW: per-tensor requantization shift (0..47)
    "CYCLES": 0x20,        # R: cycles of the last/current job (start to last output beat)
    "ARRAY_CYCLES": 0x24,  # R: cycles the array was fed a k-step during that job
    "INFO": 0x28,          # R: rows | cols << 8 | pack << 16
    "MAX_M": 0x2C, "MAX_K": 0x30, "MAX_N": 0x34,   # R: buffer capacities
}
#: Per-column parameter regions: column n is word ``(n // C) * 2^ceil(log2 C) + n % C``.
PARAM_REGIONS = {"BIAS": 0x1000, "COL_MULT": 0x2000, "COL_SHIFT": 0x3000}
CTRL_BITS = {"start": 0, "relu": 1, "raw": 2, "per_channel": 3, "bias_en": 4}


def check_engine_parameters(rows: int, cols: int, pack: int, max_m: int, max_k: int,
                            max_n: int) -> dict:
    """Validate the engine's build parameters (ConfigError naming the CLI flag)."""
    config = EngineConfig(rows=rows, cols=cols, pack=pack, max_m=max_m, max_k=max_k,
                          max_n=max_n)
    return dict(config.to_dict(), in_bytes=config.in_bytes)


def _bits(count: int) -> int:
    """Address bits for ``count`` entries (at least 1)."""
    return max(1, (count - 1).bit_length())


class GemmEngine(wiring.Component):
    """The engine top, from an :class:`EngineConfig` (or its fields as keywords)."""

    def __init__(self, config: EngineConfig | None = None, **fields):
        config = self.engine_config = config if config is not None else EngineConfig(**fields)
        rows, cols, pack = self.rows, self.cols, self.pack = config.rows, config.cols, config.pack
        max_m, max_k, max_n = config.max_m, config.max_k, config.max_n
        self.max_m, self.max_k, self.max_n = max_m, max_k, max_n
        self.lane_bits = (cols - 1).bit_length()          # lanes per parameter row: 2^lane_bits
        self.n_tiles_max = -(-max_n // cols)
        self.m_tiles_max = -(-max_m // rows)
        self.words_max = -(-max_k // pack)
        self.in_bytes = pack * max(rows, cols)
        super().__init__({
            **axil_members(ADDR_BITS, "s_axil_"),
            "s_axis_tdata": In(8 * self.in_bytes), "s_axis_tvalid": In(1),
            "s_axis_tready": Out(1),
            "m_axis_tdata": Out(ACC_BITS * cols), "m_axis_tvalid": Out(1),
            "m_axis_tready": In(1), "m_axis_tlast": Out(1),
            "irq": Out(1),
        })

    @property
    def facts(self) -> dict:
        """Derived build facts (widths, interval) for the design's summary."""
        return {"rows": self.rows, "cols": self.cols, "pack": self.pack, "max_m": self.max_m,
                "max_k": self.max_k, "max_n": self.max_n, "in_bytes": self.in_bytes,
                "out_lanes": self.cols, "acc_bits": ACC_BITS, "mult_bits": MULT_BITS,
                "min_tile_interval": 2 * self.rows + self.cols}

    def elaborate(self, platform):
        m = Module()
        R, C, P = self.rows, self.cols, self.pack
        wbits = _bits(self.words_max)

        # -- submodules -----------------------------------------------------------------
        m.submodules.regs = regs = AxiLiteTarget(ADDR_BITS)
        m.submodules.array = array = SystolicArray(R, C)
        m.submodules.requant = requant = RequantPipeline(C)
        m.submodules.x_buffer = x_mem = Memory(
            shape=unsigned(8 * P * R), depth=self.m_tiles_max << wbits, init=[])
        m.submodules.w_buffer = w_mem = Memory(
            shape=unsigned(8 * P * C), depth=2 << wbits, init=[])
        m.submodules.result_buffer = res_mem = Memory(
            shape=unsigned(ACC_BITS * C), depth=2 << _bits(R), init=[])
        param_depth = self.n_tiles_max
        m.submodules.bias_table = bias_mem = Memory(
            shape=unsigned(ACC_BITS * C), depth=param_depth, init=[])
        m.submodules.mult_table = mult_mem = Memory(
            shape=unsigned(MULT_BITS * C), depth=param_depth, init=[])
        m.submodules.shift_table = shift_mem = Memory(
            shape=unsigned(SHIFT_BITS * C), depth=param_depth, init=[])
        x_wr, x_rd = x_mem.write_port(), x_mem.read_port()
        w_wr, w_rd = w_mem.write_port(), w_mem.read_port()
        res_wr, res_rd = res_mem.write_port(), res_mem.read_port()
        param_ports = [(mem.write_port(granularity=width), mem.read_port(), width)
                       for mem, width in ((bias_mem, ACC_BITS), (mult_mem, MULT_BITS),
                                          (shift_mem, SHIFT_BITS))]

        for name in axil_members(ADDR_BITS):
            ours, theirs = getattr(self, "s_axil_" + name), getattr(regs, name)
            if name in ("awready", "wready", "bresp", "bvalid", "arready", "rdata", "rresp",
                        "rvalid"):
                m.d.comb += ours.eq(theirs)
            else:
                m.d.comb += theirs.eq(ours)

        # -- registers --------------------------------------------------------------------
        relu, raw, per_channel, bias_en = (Signal(name=n) for n in
                                           ("relu", "raw", "per_channel", "bias_en"))
        irq_en, busy, done = Signal(), Signal(), Signal()
        dim_m, dim_k, dim_n = (Signal(DIM_BITS, name=n) for n in ("dim_m", "dim_k", "dim_n"))
        tensor_mult = Signal(MULT_BITS)
        tensor_shift = Signal(SHIFT_BITS)
        cycles = Signal(COUNTER_BITS)
        array_cycles = Signal(COUNTER_BITS)
        start = Signal()
        m.d.comb += self.irq.eq(done & irq_en)

        wdata = regs.wr_data
        with m.If(regs.wr_en):
            with m.Switch(regs.wr_addr):
                with m.Case(REGISTERS["CTRL"]):
                    with m.If(~busy):
                        m.d.sync += [relu.eq(wdata[1]), raw.eq(wdata[2]),
                                     per_channel.eq(wdata[3]), bias_en.eq(wdata[4])]
                        m.d.comb += start.eq(wdata[0])
                with m.Case(REGISTERS["STATUS"]):
                    with m.If(wdata[1]):
                        m.d.sync += done.eq(0)
                with m.Case(REGISTERS["IRQ_EN"]):
                    m.d.sync += irq_en.eq(wdata[0])
                for reg, name in ((dim_m, "M"), (dim_k, "K"), (dim_n, "N"),
                                  (tensor_mult, "MULT"), (tensor_shift, "SHIFT")):
                    with m.Case(REGISTERS[name]):
                        with m.If(~busy):
                            m.d.sync += reg.eq(wdata)
        # Per-column parameter tables.
        region = regs.wr_addr[12:16]
        index = regs.wr_addr[2:12]
        lane = index[:self.lane_bits] if self.lane_bits else Const(0, 1)
        row = index[self.lane_bits:]
        for n, (port, _, width) in enumerate(param_ports):
            base = list(PARAM_REGIONS.values())[n] >> 12
            hit = regs.wr_en & ~busy & (region == base) & (regs.wr_addr[:2] == 0)
            m.d.comb += [port.addr.eq(row), port.data.eq(Cat([wdata[:width]] * C))]
            for j in range(C):
                m.d.comb += port.en[j].eq(hit & (lane == j))

        with m.Switch(regs.rd_addr):
            for name, value in (("CTRL", Cat(Const(0, 1), relu, raw, per_channel, bias_en)),
                                ("STATUS", Cat(busy, done)), ("IRQ_EN", irq_en),
                                ("M", dim_m), ("K", dim_k), ("N", dim_n),
                                ("MULT", tensor_mult), ("SHIFT", tensor_shift),
                                ("CYCLES", cycles), ("ARRAY_CYCLES", array_cycles),
                                ("INFO", Const(R | C << 8 | P << 16, 32)),
                                ("MAX_M", Const(self.max_m, 32)),
                                ("MAX_K", Const(self.max_k, 32)),
                                ("MAX_N", Const(self.max_n, 32))):
                with m.Case(REGISTERS[name]):
                    m.d.comb += regs.rd_data.eq(value)

        # -- job bookkeeping ------------------------------------------------------------
        out_beat = self.m_axis_tvalid & self.m_axis_tready
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
        with m.If(start):
            m.d.sync += [busy.eq(1), done.eq(0), cycles.eq(0), array_cycles.eq(0)]
        with m.Elif(out_beat & self.m_axis_tlast):
            m.d.sync += [busy.eq(0), done.eq(1)]

        # -- loader: input stream -> X buffer / W banks ----------------------------------
        LD_W_FIRST, LD_X, LD_W_REST, LD_DONE = range(4)
        ld_phase = Signal(2)
        ld_word = Signal(wbits)
        ld_k0 = Signal(DIM_BITS + 4)
        ld_mt = Signal(_bits(self.m_tiles_max))
        ld_m0 = Signal(DIM_BITS + 7)
        ld_nt = Signal(DIM_BITS)
        ld_n0 = Signal(DIM_BITS + 7)
        x_loaded = Signal(_bits(self.m_tiles_max) + 1)   # complete X panels
        w_held = Signal(2)                               # W banks loaded, not yet consumed
        w_loaded_pulse, w_consumed_pulse = Signal(), Signal()

        in_w = (ld_phase == LD_W_FIRST) | (ld_phase == LD_W_REST)
        m.d.comb += self.s_axis_tready.eq(busy & ((ld_phase == LD_X) | (in_w & (w_held < 2))))
        beat = self.s_axis_tvalid & self.s_axis_tready
        ld_last_word = ld_k0 + P >= dim_k
        m.d.comb += [
            x_wr.addr.eq(Cat(ld_word, ld_mt)), x_wr.data.eq(self.s_axis_tdata[:8 * P * R]),
            x_wr.en.eq(beat & (ld_phase == LD_X)),
            w_wr.addr.eq(Cat(ld_word, ld_nt[0])), w_wr.data.eq(self.s_axis_tdata[:8 * P * C]),
            w_wr.en.eq(beat & in_w),
        ]
        with m.If(beat):
            m.d.sync += [ld_word.eq(ld_word + 1), ld_k0.eq(ld_k0 + P)]
            with m.If(ld_last_word):
                m.d.sync += [ld_word.eq(0), ld_k0.eq(0)]
                with m.Switch(ld_phase):
                    with m.Case(LD_W_FIRST):
                        m.d.comb += w_loaded_pulse.eq(1)
                        m.d.sync += [ld_phase.eq(LD_X), ld_nt.eq(1), ld_n0.eq(C)]
                    with m.Case(LD_X):
                        m.d.sync += x_loaded.eq(x_loaded + 1)
                        with m.If(ld_m0 + R >= dim_m):
                            m.d.sync += ld_phase.eq(Mux(ld_n0 >= dim_n, LD_DONE, LD_W_REST))
                        with m.Else():
                            m.d.sync += [ld_mt.eq(ld_mt + 1), ld_m0.eq(ld_m0 + R)]
                    with m.Case(LD_W_REST):
                        m.d.comb += w_loaded_pulse.eq(1)
                        m.d.sync += [ld_nt.eq(ld_nt + 1), ld_n0.eq(ld_n0 + C)]
                        with m.If(ld_n0 + C >= dim_n):
                            m.d.sync += ld_phase.eq(LD_DONE)
        m.d.sync += w_held.eq(w_held + w_loaded_pulse - w_consumed_pulse)

        # -- feeder: buffers -> array, one k-step per cycle -------------------------------
        min_gap = array.min_tile_interval
        f_active, f_done = Signal(), Signal()
        f_word = Signal(wbits)
        f_k0 = Signal(DIM_BITS + 4)
        f_lane = Signal(range(P)) if P > 1 else Const(0, 1)
        f_mt = Signal(_bits(self.m_tiles_max))
        f_m0 = Signal(DIM_BITS + 7)
        f_nt = Signal(DIM_BITS)
        f_n0 = Signal(DIM_BITS + 7)
        gap = Signal(range(min_gap + 1), init=min_gap)
        in_flight = Signal(2)       # tiles begun whose result bank is not yet read out
        tile_out_pulse = Signal()

        begin = (busy & ~f_done & ~f_active & (x_loaded > f_mt) & (w_held != 0)
                 & (in_flight < 2) & (gap >= min_gap))
        step = f_active | begin
        is_first = (f_k0 == 0) & (f_lane == 0)
        is_last = (f_k0 + P >= dim_k) & (f_lane == P - 1)
        m.d.comb += [x_rd.addr.eq(Cat(f_word, f_mt)), w_rd.addr.eq(Cat(f_word, f_nt[0])),
                     x_rd.en.eq(step & (f_lane == 0)), w_rd.en.eq(step & (f_lane == 0))]
        s1_valid, s1_first, s1_last = Signal(), Signal(), Signal()
        s1_lane = Signal.like(f_lane) if P > 1 else Const(0, 1)
        m.d.sync += [s1_valid.eq(step), s1_first.eq(step & is_first),
                     s1_last.eq(step & is_last)]
        if P > 1:
            m.d.sync += s1_lane.eq(f_lane)
        m.d.sync += gap.eq(Mux(begin, 1, Mux(gap == min_gap, gap, gap + 1)))
        with m.If(step):
            if P > 1:
                m.d.sync += f_lane.eq(f_lane + 1)
                with m.If(f_lane == P - 1):
                    m.d.sync += [f_lane.eq(0), f_word.eq(f_word + 1), f_k0.eq(f_k0 + P)]
            else:
                m.d.sync += [f_word.eq(f_word + 1), f_k0.eq(f_k0 + P)]
            m.d.sync += f_active.eq(1)
            with m.If(is_last):
                m.d.sync += [f_active.eq(0), f_word.eq(0), f_k0.eq(0)]
                with m.If(f_m0 + R >= dim_m):
                    m.d.comb += w_consumed_pulse.eq(1)
                    m.d.sync += [f_mt.eq(0), f_m0.eq(0), f_nt.eq(f_nt + 1), f_n0.eq(f_n0 + C)]
                    with m.If(f_n0 + C >= dim_n):
                        m.d.sync += f_done.eq(1)
                with m.Else():
                    m.d.sync += [f_mt.eq(f_mt + 1), f_m0.eq(f_m0 + R)]
        m.d.sync += in_flight.eq(in_flight + begin - tile_out_pulse)

        x_word = x_rd.data.word_select(s1_lane, 8 * R) if P > 1 else x_rd.data
        w_word = w_rd.data.word_select(s1_lane, 8 * C) if P > 1 else w_rd.data
        m.d.comb += [array.valid.eq(s1_valid), array.first.eq(s1_first),
                     array.last.eq(s1_last)]
        for i in range(R):
            m.d.comb += array.a[i].eq(x_word[8 * i:8 * i + OPERAND_BITS])
        for j in range(C):
            m.d.comb += array.b[j].eq(w_word[8 * j:8 * j + OPERAND_BITS])
        with m.If(s1_valid):
            m.d.sync += array_cycles.eq(array_cycles + 1)

        # -- drain: array -> result bank, bottom row first --------------------------------
        delay = [Signal(name=f"drain_delay_{n}") for n in range(array.capture_latency)]
        m.d.sync += [delay[0].eq(s1_valid & s1_last)] + [
            delay[n].eq(delay[n - 1]) for n in range(1, len(delay))]
        draining = Signal()
        d_step = Signal(_bits(R))
        d_bank = Signal()
        tiles_ready = Signal(2)     # drained tiles waiting for the output stage
        drained_pulse = Signal()
        drain = delay[-1] | draining
        m.d.comb += [res_wr.en.eq(drain),
                     res_wr.addr.eq(Cat((R - 1 - d_step)[:_bits(R)], d_bank)),
                     res_wr.data.eq(array.res_out.as_value()),
                     array.shift.eq(drain & (d_step != R - 1))]
        with m.If(drain):
            m.d.sync += [d_step.eq(d_step + 1), draining.eq(1)]
            with m.If(d_step == R - 1):
                m.d.sync += [d_step.eq(0), draining.eq(0), d_bank.eq(~d_bank)]
                m.d.comb += drained_pulse.eq(1)
        m.d.sync += tiles_ready.eq(tiles_ready + drained_pulse - tile_out_pulse)

        # -- output: result bank -> bias/requant pipeline -> output stream ----------------
        adv = ~self.m_axis_tvalid | self.m_axis_tready
        o_row = Signal(_bits(R))
        o_bank = Signal()
        o_m0 = Signal(DIM_BITS + 7)
        o_nt = Signal(DIM_BITS)
        o_n0 = Signal(DIM_BITS + 7)
        issue = adv & (tiles_ready != 0)
        is_tile_end = o_row == R - 1
        is_job_end = is_tile_end & (o_m0 + R >= dim_m) & (o_n0 + C >= dim_n)
        m.d.comb += [res_rd.addr.eq(Cat(o_row, o_bank)), res_rd.en.eq(adv)]
        for port, read, _ in param_ports:
            m.d.comb += [read.addr.eq(o_nt), read.en.eq(adv)]
        o_valid, o_last = Signal(), Signal()
        with m.If(adv):
            m.d.sync += [o_valid.eq(issue), o_last.eq(issue & is_job_end)]
        with m.If(issue):
            m.d.sync += o_row.eq(o_row + 1)
            with m.If(is_tile_end):
                m.d.comb += tile_out_pulse.eq(1)
                m.d.sync += [o_row.eq(0), o_bank.eq(~o_bank), o_m0.eq(o_m0 + R)]
                with m.If(o_m0 + R >= dim_m):
                    m.d.sync += [o_m0.eq(0), o_nt.eq(o_nt + 1), o_n0.eq(o_n0 + C)]

        (_, bias_rd, _), (_, mult_rd, _), (_, shift_rd, _) = param_ports
        m.d.comb += [
            requant.adv.eq(adv), requant.in_valid.eq(o_valid), requant.in_last.eq(o_last),
            requant.acc.eq(res_rd.data), requant.bias.eq(bias_rd.data),
            requant.mult.eq(mult_rd.data), requant.shift.eq(shift_rd.data),
            requant.bias_en.eq(bias_en), requant.per_channel.eq(per_channel),
            requant.raw.eq(raw), requant.relu.eq(relu),
            requant.tensor_mult.eq(tensor_mult), requant.tensor_shift.eq(tensor_shift),
            self.m_axis_tvalid.eq(requant.out_valid), self.m_axis_tlast.eq(requant.out_last),
            self.m_axis_tdata.eq(requant.out_data.as_value()),
        ]

        # -- a new job clears all sequencing state ----------------------------------------
        with m.If(start):
            m.d.sync += [ld_phase.eq(LD_W_FIRST), ld_word.eq(0), ld_k0.eq(0), ld_mt.eq(0),
                         ld_m0.eq(0), ld_nt.eq(0), ld_n0.eq(0), x_loaded.eq(0), w_held.eq(0),
                         f_active.eq(0), f_done.eq(0), f_word.eq(0), f_k0.eq(0), f_mt.eq(0),
                         f_m0.eq(0), f_nt.eq(0), f_n0.eq(0), gap.eq(min_gap),
                         in_flight.eq(0), tiles_ready.eq(0), d_bank.eq(0), o_row.eq(0),
                         o_bank.eq(0), o_m0.eq(0), o_nt.eq(0), o_n0.eq(0)]
            if P > 1:
                m.d.sync += f_lane.eq(0)
        return m
