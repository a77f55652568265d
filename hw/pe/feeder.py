"""Feeder: the weight banks and an activation buffer into the systolic array, one k-step per
cycle, for any :class:`~.tiles.Tiling` (the GEMM engine's and the ZO layer's).

Tiles run back to back (weight panel outer, activation tile inner), each for
``pack * ceil(K / pack)`` cycles, a tile beginning only when its weight panel is in a bank
(``panels.w_banks``) and, with :attr:`~.tiles.Tiling.acts_arrive`, its activation tile is
loaded (``panels.x_panels``), a result bank is free (at most
:attr:`~.tiles.Tiling.result_bank_count` tiles in flight between here and the output stage,
``tile_done``) and at least ``min_gap`` cycles after the previous
tile began (:attr:`~.array.SystolicArray.min_tile_interval`). ``panels.w_release`` pulses
with the last k-step of a panel's last tile.

Activations can come from one of several buffers (``act_ports``: port name -> words per
tile, e.g. the ZO layer's tokens X and U = requant(X·A)); ``act_select`` picks the one a
job reads (with more than one), all addressed ``Cat(word, tile)``. A port named in
``registered`` delivers its data from a register of its own, one cycle later than a memory
(its reader keeps the register behind the block RAM, e.g. before picking a part of the
word): the feeder adds no register behind it.

Outputs, :data:`READ_LATENCY` cycles after the step (the buffer read, then a register
right behind each buffer, so that nothing combinational follows a block RAM, then one more
from which the k-step is picked): the
activations ``x`` with the array's flags ``valid``, ``first`` (k = 0) and ``last`` (k = K-1; both only with ``valid``), and the
weights of the same k-step as the stream ``w`` (``w.valid`` = ``valid``). The top connects
``x`` and ``w`` to the array's ``a``/``b`` as the tiling says. The array cannot wait, so
``w`` is always ready: a block that transforms the weights on their way to the array must
take one payload per cycle and, if it adds latency, ``x`` and the flags need the same
delay. ``job`` (:class:`~.signatures.JobSignature`): ``m`` activations, ``k`` k-steps,
``n`` weights; ``job.start`` clears all state.
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .credits import up_down
from .signatures import JobSignature, PanelSignature
from .tiles import Tiling, address_bits

__all__ = ["Feeder", "weight_stream", "READ_LATENCY"]

#: Cycles from a k-step's buffer read to its operands and flags on the outputs.
READ_LATENCY = 3


def weight_stream(tiling: Tiling) -> stream.Signature:
    """One k-step of weights per payload, always ready."""
    return stream.Signature(tiling.weights(), always_ready=True)


class Feeder(wiring.Component):
    def __init__(self, tiling: Tiling, min_gap: int, act_ports: dict[str, int] | None = None,
                 registered: frozenset[str] = frozenset()):
        self.tiling, self.min_gap, self.registered = tiling, min_gap, frozenset(registered)
        self.act_ports = dict(act_ports or {"x_rd": tiling.panel_words})
        members = {
            "job": In(JobSignature(tiling.dim_bits)),
            "panels": In(PanelSignature(tiling)),
            "w_rd": In(tiling.weight_banks().read_port()),
            **{name: In(tiling.act_buffer(words).read_port())
               for name, words in self.act_ports.items()},
            "tile_done": In(1),      # the output stage has read a result bank out
            "x": Out(tiling.acts()),
            "valid": Out(1), "first": Out(1), "last": Out(1),
            "w": Out(weight_stream(tiling)),
        }
        if len(self.act_ports) > 1:
            members["act_select"] = In(range(len(self.act_ports)))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        t, job, panels, min_gap = self.tiling, self.job, self.panels, self.min_gap
        P = t.pack
        active, finished = Signal(), Signal()
        word = Signal(t.word_bits)
        lane = Signal(range(P)) if P > 1 else Const(0, 1)   # k-step within the word
        mt = Signal(t.tile_bits)
        nt = Signal(t.dim_bits)
        # Every end-of-loop test comes from registers: "the last word / tile / panel" is
        # the dimension test of the *next* offset, registered when the offset moves (k2:
        # first k-step two words on, m2 / n2: first activation / weight two tiles / panels
        # on), and for the loop's first one the dimension against one step, registered from
        # the job (``short``, outside the job-start reset: the dimensions are set by then)
        first_word = Signal(init=1)                        # the tile's first word
        first_tile, first_panel = Signal(init=1), Signal(init=1)
        k2 = Signal(t.dim_bits + 2, init=2 * P)
        m2 = Signal(t.dim_bits + 2, init=2 * t.act_lanes)
        n2 = Signal(t.dim_bits + 2, init=2 * t.weight_lanes)
        later_k, later_m, later_n = Signal(), Signal(), Signal()
        short_k, short_m, short_n = Signal(), Signal(), Signal()
        word_last = Mux(first_word, short_k, later_k)
        if P == 1:
            short_m_next = Signal()            # short_m's next value (its compare)
            # the tile test a register of its own, Mux(first_tile, short_m, later_m) a cycle
            # ahead (set with the tile counters at a tile's end, and tracking short_m on
            # the first tile), so that a tile's end with the panel's release is one LUT
            # of it, ``later_k``, ``short_k`` and ``begin`` (below)
            tiles_end = Signal()
        else:
            tiles_end = Mux(first_tile, short_m, later_m)
        panels_end = Mux(first_panel, short_n, later_n)
        gap = Signal(range(min_gap + 1), init=min_gap)      # cycles since the last begin
        gap_ok = Signal(init=1)                             # gap >= min_gap
        # tiles begun whose result bank is not yet read out: all banks taken when its top
        # bit is set (at most the power-of-two bank count)
        in_flight = Signal(t.bank_bits + 1)
        settled = Signal(2)         # cycles since the start (2: the ``short`` are valid)

        mt1 = Signal(t.tile_bits + 1, init=1)             # mt + 1
        # Whether a tile may begin but for the weight panel (the supplier's ``w_banks``)
        # and a free result bank (``in_flight``'s top bit clear): a register, so that
        # ``begin`` is one LUT of it, the bank count's top bit and ``w_banks``, not a tree
        # of the feeder's state in front of every step enable. Its next value is
        # ``Mux(begin, if_begun, if_not)``, each from registers and ``x_panels`` alone:
        # ``begin`` is only the last select in front of it (no deeper after ``w_banks``
        # than the old ``begin``, also on 6-input LUTs), and the output stage's
        # ``tile_done`` reaches only ``in_flight``. The job's ``busy`` is in it a cycle
        # old: busy holds from the cycle after ``start`` (which clears the flag; no tile
        # begins before ``settled``, two cycles on) to the job's end, after its last tile
        may_begin = Signal()
        begin = may_begin & ~in_flight[-1] & (panels.w_banks != 0)
        step = active | begin
        is_first = first_word & (lane == 0)
        is_last = word_last & (lane == P - 1)
        # a tile's last step: with P > 1 only while active (off a tile the lane is 0, as it
        # wraps with the tile's last word), so ``begin`` is not in front of the tile's end
        # (the panel's release, the counters' enables). With P = 1 a one-word tile ends as
        # it begins: there ``later_k`` is cleared with the tile's end (set only while
        # active: off a tile, ``first_word``, it is not read) and ``begin`` comes only off a
        # tile (``may_begin`` is set only the cycle after a tile's last step or off a
        # tile), so the end is ``later_k | (begin & short_k)``: with the register
        # ``tiles_end``, the release and the counters' enables are one LUT of registers
        # and ``begin``, not ``begin`` -> the step -> the word test -> the tile test
        ends = active & is_last if P > 1 else later_k | (begin & short_k)
        x_panels = self.panels.x_panels if t.acts_arrive else None
        # a tile ends here and the job goes on with a loaded tile (the next one, or the
        # first of the next panel): ``x_panels`` only grows, so a cycle old is never too
        # early
        end_ok = is_last & ~(tiles_end & panels_end)
        if t.acts_arrive:
            end_ok &= Mux(tiles_end, x_panels != 0, x_panels > mt1)
        # x_panels > mt, compared with the feeder's own mt + 1 (``mt`` addresses the
        # buffers: its register sits by the block RAMs)
        idle_ok = (x_panels >= mt1) if t.acts_arrive else 1
        if_begun = (job.busy & end_ok) if min_gap <= 1 else 0    # a one-step tile begun, ended
        if_not = (job.busy & settled[0] & ~finished & (gap_ok | (gap + 1 >= min_gap))
                  & Mux(active, end_ok, idle_ok))
        m.d.sync += may_begin.eq(Mux(begin, if_begun, if_not))
        # The buffers are read every cycle at the current word (registers only: no logic
        # in front of the block RAMs' enables and addresses): a word's address holds for
        # its ``pack`` k-steps, and the word being read is never written meanwhile
        ports = [getattr(self, name) for name in self.act_ports]
        for port, words in zip(ports, self.act_ports.values()):
            m.d.comb += [port.addr.eq(Cat(word[:address_bits(words)], mt)), port.en.eq(1)]
        m.d.comb += [self.w_rd.addr.eq(Cat(word, nt[0])), self.w_rd.en.eq(1)]
        m.d.sync += [gap.eq(Mux(begin, 1, Mux(gap == min_gap, gap, gap + 1))),
                     gap_ok.eq(Mux(begin, min_gap <= 1, gap_ok | (gap + 1 >= min_gap))),
                     in_flight.eq(up_down(in_flight, begin, self.tile_done)),
                     settled.eq(Cat(1, settled[0]))]
        if P == 1:   # the next tile test, on the first tile short_m's (overridden below)
            m.d.sync += tiles_end.eq(Mux(first_tile, short_m_next, tiles_end))

        def tile_end():
            """The tile's last step: the next tile or panel, or the job's end."""
            m.d.sync += [active.eq(0), word.eq(0), k2.eq(2 * P), first_word.eq(1)]
            if P == 1:
                m.d.sync += later_k.eq(0)
            with m.If(tiles_end):
                m.d.comb += panels.w_release.eq(1)
                if P == 1:
                    m.d.sync += tiles_end.eq(short_m_next)
                m.d.sync += [mt.eq(0), mt1.eq(1), m2.eq(2 * t.act_lanes),
                             first_tile.eq(1), nt.eq(nt + 1),
                             n2.eq(n2 + t.weight_lanes), later_n.eq(n2 >= job.n),
                             first_panel.eq(0)]
                with m.If(panels_end):
                    m.d.sync += finished.eq(1)
            with m.Else():
                m.d.sync += [mt.eq(mt + 1), mt1.eq(mt1 + 1), m2.eq(m2 + t.act_lanes),
                             later_m.eq(m2 >= job.m), first_tile.eq(0)]
                if P == 1:
                    m.d.sync += tiles_end.eq(m2 >= job.m)

        with m.If(step):
            m.d.sync += active.eq(1)
            if P > 1:
                m.d.sync += lane.eq(lane + 1)
            with m.If(lane == P - 1):
                m.d.sync += [word.eq(word + 1), k2.eq(k2 + P), later_k.eq(k2 >= job.k),
                             first_word.eq(0)]
                if P > 1:
                    m.d.sync += lane.eq(0)
        with m.If(ends):
            tile_end()

        # the buffers' read, then two registers of the whole word: one right behind each
        # buffer (its only load: placed beside the block RAM, whose clock-to-output takes
        # most of a cycle), then one from which the k-step is picked; operands and flags
        # READ_LATENCY cycles after the step
        def delayed(value, cycles, name):
            for n in range(cycles):
                reg = Signal.like(value, name=f"{name}_{n}")
                m.d.sync += reg.eq(value)
                value = reg
            return value

        word_lane = delayed(lane, READ_LATENCY, "lane") if P > 1 else lane
        flags = delayed(Cat(step, step & is_first, ends), READ_LATENCY - 1, "flags")
        m.d.sync += Cat(self.valid, self.first, self.last).eq(flags)
        # the registers behind the memories take a word when it is new (a register as their
        # enable: a control set of their own, so that each packs and places beside its RAM)
        load = delayed(step & (lane == 0), 1, "load")
        top = Module()
        top.submodules.sequencer = ResetInserter(job.start)(m)
        # the ``short`` compare the feeder's own copies of the dimensions (a cycle old:
        # registers placed by the feeder, not a compare of the job's registers that synthesis
        # shares with other units' tests of them): with the dimensions held from
        # ``job.start`` on, valid two cycles later (``settled``), before the first ``begin``
        dims = {name: Signal(t.dim_bits, name=f"{name}_copy") for name in "kmn"}
        top.d.sync += [dims[name].eq(getattr(job, name)) for name in dims]
        top.d.sync += [short_k.eq(dims["k"] <= P), short_m.eq(dims["m"] <= t.act_lanes),
                       short_n.eq(dims["n"] <= t.weight_lanes)]
        if P == 1:
            top.d.comb += short_m_next.eq(dims["m"] <= t.act_lanes)
        # the words are not cleared by job.start: no reset logic behind the memories
        words = []
        for port, name in [(self.w_rd, "w_rd"), *zip(ports, self.act_ports)]:
            behind, word_reg = (Signal(port.data.shape(), name=f"{name}_{stage}")
                                for stage in ("behind", "word"))
            if name in self.registered:
                top.d.comb += behind.eq(port.data)
            else:
                with top.If(load):
                    top.d.sync += behind.eq(port.data)
            top.d.sync += word_reg.eq(behind)
            words.append(word_reg)
        w_word, acts = words[0], words[1]
        if len(words) > 2:
            word_in = words[-1].as_value()
            for index in reversed(range(len(words) - 2)):
                word_in = Mux(self.act_select == index, words[index + 1].as_value(), word_in)
            acts = data.View(words[1].shape(), word_in)
        top.d.comb += [self.x.eq(acts[word_lane]), self.w.valid.eq(self.valid),
                       self.w.payload.eq(w_word[word_lane])]
        return top
