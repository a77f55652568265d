"""Feeder: the weight banks and an activation buffer into the systolic array, one k-step per
cycle, for any :class:`~.tiles.Tiling` (the GEMM engine's and the ZO layer's).

Tiles run back to back (weight panel outer, activation tile inner), each for
``pack * ceil(K / pack)`` cycles, a tile beginning only when its weight panel is in a bank
(``panels.w_banks``) and, with :attr:`~.tiles.Tiling.acts_arrive`, its activation tile is
loaded (``panels.x_panels``), a result bank is free (at most two tiles in flight between
here and the output stage, ``tile_done``) and at least ``min_gap`` cycles after the previous
tile began (:attr:`~.array.SystolicArray.min_tile_interval`). ``panels.w_release`` pulses
with the last k-step of a panel's last tile.

Activations can come from one of several buffers (``act_ports``: port name -> words per
tile, e.g. the ZO layer's tokens X and U = requant(X·A)); ``act_select`` picks the one a
job reads (with more than one), all addressed ``Cat(word, tile)``.

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

from .signatures import JobSignature, PanelSignature
from .tiles import Tiling, address_bits

__all__ = ["Feeder", "weight_stream", "READ_LATENCY"]

#: Cycles from a k-step's buffer read to its operands and flags on the outputs.
READ_LATENCY = 3


def weight_stream(tiling: Tiling) -> stream.Signature:
    """One k-step of weights per payload, always ready."""
    return stream.Signature(tiling.weights(), always_ready=True)


class Feeder(wiring.Component):
    def __init__(self, tiling: Tiling, min_gap: int, act_ports: dict[str, int] | None = None):
        self.tiling, self.min_gap = tiling, min_gap
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
        # the next word's first k-step, the next tile's first activation and the next
        # panel's first weight, in registers of their own: each end test is one comparison
        # (a dimension plus a step fits dim_bits + 1 bits)
        k1 = Signal(t.dim_bits + 1, init=P)
        first_word = Signal(init=1)                        # the tile's first word (k1 == P)
        m1 = Signal(t.dim_bits + 1, init=t.act_lanes)
        n1 = Signal(t.dim_bits + 1, init=t.weight_lanes)
        gap = Signal(range(min_gap + 1), init=min_gap)      # cycles since the last begin
        in_flight = Signal(2)       # tiles begun whose result bank is not yet read out

        acts_loaded = (panels.x_panels > mt) if t.acts_arrive else 1
        begin = (job.busy & ~finished & ~active & acts_loaded
                 & (panels.w_banks != 0) & (in_flight < 2) & (gap >= min_gap))
        step = active | begin
        is_first = first_word & (lane == 0)
        is_last = (k1 >= job.k) & (lane == P - 1)
        # The buffers are read every cycle at the current word (registers only: no logic
        # in front of the block RAMs' enables and addresses): a word's address holds for
        # its ``pack`` k-steps, and the word being read is never written meanwhile
        ports = [getattr(self, name) for name in self.act_ports]
        for port, words in zip(ports, self.act_ports.values()):
            m.d.comb += [port.addr.eq(Cat(word[:address_bits(words)], mt)), port.en.eq(1)]
        m.d.comb += [self.w_rd.addr.eq(Cat(word, nt[0])), self.w_rd.en.eq(1)]
        m.d.sync += [gap.eq(Mux(begin, 1, Mux(gap == min_gap, gap, gap + 1))),
                     in_flight.eq(in_flight + begin - self.tile_done)]
        with m.If(step):
            m.d.sync += active.eq(1)
            if P > 1:
                m.d.sync += lane.eq(lane + 1)
            with m.If(lane == P - 1):
                m.d.sync += [word.eq(word + 1), k1.eq(k1 + P), first_word.eq(0)]
                if P > 1:
                    m.d.sync += lane.eq(0)
            with m.If(is_last):
                m.d.sync += [active.eq(0), word.eq(0), k1.eq(P), first_word.eq(1)]
                with m.If(m1 >= job.m):
                    m.d.comb += panels.w_release.eq(1)
                    m.d.sync += [mt.eq(0), m1.eq(t.act_lanes), nt.eq(nt + 1),
                                 n1.eq(n1 + t.weight_lanes)]
                    with m.If(n1 >= job.n):
                        m.d.sync += finished.eq(1)
                with m.Else():
                    m.d.sync += [mt.eq(mt + 1), m1.eq(m1 + t.act_lanes)]

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
        flags = delayed(Cat(step, step & is_first, step & is_last), READ_LATENCY - 1, "flags")
        m.d.sync += Cat(self.valid, self.first, self.last).eq(flags)
        # the registers behind the memories take a word when it is new (a register as their
        # enable: a control set of their own, so that each packs and places beside its RAM)
        load = delayed(step & (lane == 0), 1, "load")
        top = Module()
        top.submodules.sequencer = ResetInserter(job.start)(m)
        # the words are not cleared by job.start: no reset logic behind the memories
        words = []
        for port, name in [(self.w_rd, "w_rd"), *zip(ports, self.act_ports)]:
            behind, word_reg = (Signal(port.data.shape(), name=f"{name}_{stage}")
                                for stage in ("behind", "word"))
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
