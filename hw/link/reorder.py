"""The scores reorder buffer: :class:`ScoresReorder`, a GEMM engine's raw ``scores = Q·K^T``
stream in, the softmax unit's rows out (docs/link.md; the golden model
:mod:`zoforge.golden.link` states the mapping value by value).

Ports (Verilog: ``clk``, ``rst`` and the members joined by ``__``, ``s_axis__tdata``, ...):

* ``job`` (:class:`ReorderJobSignature`): ``start`` with ``m`` (queries, 1 to max_rows)
  and ``length`` (keys L, 1 to max_len), taken when ``ready`` (no job's input under way);
  a start while not ready is ignored; M or L of 0 or past the maxima are the host's error.
* ``s_axis`` (``32 C`` bits): the engine's raw output of the job:
  ``ceil(L / C)`` column panels, each ``ceil(M / R)`` tiles of R beats, a beat one row's C
  int32 (key ``nt C + c`` in lane ``c``); beats of rows past M and lanes of keys past L
  are taken and dropped. Taken from the cycle after the start while the job's bank is
  free (``tready`` low while both banks hold jobs not yet read out). The beats are counted
  from M and L; ``tlast`` (the engine's, on its job's last beat) is only checked
  (``job.error``).
* ``m_axis`` (``32 lanes`` bits): the softmax unit's input (hw/softmax/top.py): M rows of
  ``ceil(L / lanes)`` beats, key ``j lanes + t`` of the row in lane ``t`` of beat ``j``,
  **0** in the lanes past L; ``tlast`` on the job's last beat. ``tvalid`` is held and the
  beat stable while ``tready`` is low.

Storage: P (``ReorderConfig.memories``, the power of two >= max(C, lanes)) memories of
32 bits, key k of row i of bank b in memory ``k mod P`` at ``Cat(k div P, i, b)``, so a
beat of C keys in is one write to C memories and a beat of ``lanes`` keys out one read of
``lanes`` memories, each rotated by the key's offset ``mod P``. Two banks: job k+1's
tiles go into one while job k's rows are read from the other (ping-pong).

Cycles (:mod:`.cycles`): with both streams always ready one input beat a cycle from the
cycle after the start and, from the cycle after the job's last input beat, one output
beat a cycle (after a read cycle).
"""
from __future__ import annotations

from amaranth import C, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.hw.pe.bus import AxiStreamSignature
from zoforge.hw.pe.tiles import Buffer

from .config import ReorderConfig

__all__ = ["ScoresReorder", "ReorderJobSignature", "offsets", "at_most"]

#: Bits of a score.
SCORE_BITS = 32


class ReorderJobSignature(wiring.Signature):
    """A job (the driver's view): ``start`` (a cycle) with ``m`` and ``length``; from the
    buffer ``ready`` (a start is taken) and ``error`` (the input's ``tlast`` was not on the
    job's last beat alone: the engine's job and this one disagree; held until a start)."""

    def __init__(self, m_bits: int, l_bits: int):
        self.m_bits, self.l_bits = m_bits, l_bits
        super().__init__({"start": Out(1), "m": Out(m_bits), "length": Out(l_bits),
                          "ready": In(1), "error": In(1)})

    def __eq__(self, other):
        return (type(other) is type(self) and other.m_bits == self.m_bits
                and other.l_bits == self.l_bits)

    def __repr__(self):
        return f"ReorderJobSignature({self.m_bits}, {self.l_bits})"


def at_most(value, bound: int):
    """``value <= bound``, or a constant 1 where ``value``'s width cannot pass ``bound`` (no
    comparison that lint calls constant)."""
    return C(1, 1) if (1 << len(value)) - 1 <= bound else value <= bound


def offsets(step: int, max_len: int, memories: int) -> list[int]:
    """The offsets ``mod P`` a beat of ``step`` keys starts at in a row of ``max_len``."""
    return sorted({(n * step) % memories for n in range(-(-max_len // step))})


class ScoresReorder(wiring.Component):
    """The scores reorder buffer (module docstring), from a :class:`ReorderConfig` (or its
    fields as keywords)."""

    def __init__(self, config: ReorderConfig | None = None, **fields):
        config = self.reorder_config = config if config is not None else ReorderConfig(**fields)
        super().__init__({
            "job": In(ReorderJobSignature(config.m_bits, config.l_bits)),
            "s_axis": In(AxiStreamSignature(SCORE_BITS * config.cols)),
            "m_axis": Out(AxiStreamSignature(SCORE_BITS * config.lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.reorder_config
        # reads and writes are of different banks whenever a read's data is used
        buffer = Buffer(SCORE_BITS, c.depth, "scores, key k mod P", granularity=None)
        ports = []
        for p in range(c.memories):
            memory = buffer.memory(collisions_unused=True)
            m.submodules[f"keys_{p}"] = memory
            ports.append((memory.write_port(), memory.read_port()))
        full = Signal(2, name="bank_full")
        bank_m = [Signal(c.m_bits, name=f"bank{b}_m") for b in range(2)]
        bank_l = [Signal(c.l_bits, name=f"bank{b}_length") for b in range(2)]
        self._writer(m, ports, full, bank_m, bank_l)
        self._reader(m, ports, full, bank_m, bank_l)
        return m

    def _writer(self, m: Module, ports, full, bank_m, bank_l) -> None:
        """``s_axis`` -> the free bank: C memories a beat, rows past M and keys past L not
        written; the bank full (with its M and L) after the job's last beat."""
        c, s, job = self.reorder_config, self.s_axis, self.job
        active = Signal(name="w_active")
        bank = Signal(name="w_bank")
        m_reg = Signal(c.m_bits, name="w_m")
        l_reg = Signal(c.l_bits, name="w_length")
        r = Signal(max(1, (c.rows - 1).bit_length()), name="w_r")   # row within the tile
        panel_left = Signal(c.m_bits, name="w_panel_left")    # M - mt R
        row = Signal(max(1, c.row_bits), name="w_row")        # mt R + r (while < M)
        kb = Signal(c.l_bits, name="w_key")                   # nt C
        left = Signal(c.l_bits, name="w_left")                # L - nt C
        error = Signal(name="w_error")
        m.d.comb += [job.ready.eq(~active), job.error.eq(error),
                     s.tready.eq(active & ~full.bit_select(bank, 1))]
        take = s.tvalid & s.tready
        panel_end = (r == c.rows - 1) & at_most(panel_left, c.rows)
        job_end = panel_end & at_most(left, c.cols)
        with m.If(job.start & ~active):
            m.d.sync += [active.eq(1), m_reg.eq(job.m), l_reg.eq(job.length), r.eq(0),
                         panel_left.eq(job.m), row.eq(0), kb.eq(0), left.eq(job.length),
                         error.eq(0)]
        with m.Elif(take):
            with m.If(s.tlast != job_end):
                m.d.sync += error.eq(1)
            with m.If(r == c.rows - 1):
                m.d.sync += r.eq(0)
                with m.If(panel_end):                         # the column panel's end
                    m.d.sync += [panel_left.eq(m_reg), row.eq(0)]
                    with m.If(job_end):
                        m.d.sync += [active.eq(0), bank.eq(~bank),
                                     full.bit_select(bank, 1).eq(1)]
                        for b in range(2):
                            with m.If(bank == b):
                                m.d.sync += [bank_m[b].eq(m_reg), bank_l[b].eq(l_reg)]
                    with m.Else():
                        m.d.sync += [kb.eq(kb + c.cols), left.eq(left - c.cols)]
                with m.Else():
                    m.d.sync += [panel_left.eq(panel_left - c.rows), row.eq(row + 1)]
            with m.Else():
                m.d.sync += [r.eq(r + 1), row.eq(row + 1)]
        row_ok = r < panel_left
        offset = kb[:c.key_bits]
        word = kb[c.key_bits:]
        lanes = [s.tdata[SCORE_BITS * j:SCORE_BITS * (j + 1)] for j in range(c.cols)]
        steps = offsets(c.cols, c.max_len, c.memories)
        for p, (port, _) in enumerate(ports):
            data = Signal(SCORE_BITS, name=f"w_data{p}")
            lane_ok = Signal(name=f"w_lane_ok{p}")
            with m.Switch(offset):
                for n, o in enumerate(steps):
                    j = (p - o) % c.memories
                    with (m.Default() if n == len(steps) - 1 else m.Case(o)):
                        if j < c.cols:
                            m.d.comb += [data.eq(lanes[j]), lane_ok.eq(left > j)]
                        else:
                            m.d.comb += [data.eq(0), lane_ok.eq(0)]
            step = Mux(p < offset, word + 1, word) if p < c.memories - 1 else word
            m.d.comb += [port.addr.eq(Cat(step[:c.word_bits], row[:c.row_bits], bank)),
                         port.data.eq(data), port.en.eq(take & row_ok & lane_ok)]

    def _reader(self, m: Module, ports, full, bank_m, bank_l) -> None:
        """The full bank -> ``m_axis``: a row's beats from ``lanes`` memories each, read
        when the output advances (the read port's data held meanwhile); the bank free after
        the job's last read."""
        c, o = self.reorder_config, self.m_axis
        bank = Signal(name="r_bank")
        row = Signal(max(1, c.row_bits), name="r_row")
        kb = Signal(c.l_bits, name="r_key")                    # j lanes
        valid = Signal(name="r_valid")                         # the beat on m_axis
        keep = Signal(c.lanes, name="r_keep")                  # its lanes < L
        held = Signal(max(1, c.key_bits), name="r_offset")     # its keys' offset mod P
        last = Signal(name="r_last")
        m_b = Mux(bank, bank_m[1], bank_m[0])
        left = Mux(bank, bank_l[1], bank_l[0]) - kb            # keys of the row from kb
        row_end = left <= c.lanes
        job_end = row_end & (row == m_b - 1)
        advance = ~valid | o.tready
        issue = advance & full.bit_select(bank, 1)
        with m.If(issue):
            m.d.sync += [valid.eq(1), last.eq(job_end), held.eq(kb[:c.key_bits]),
                         keep.eq(Cat(*(left > t for t in range(c.lanes))))]
            with m.If(row_end):
                m.d.sync += kb.eq(0)
                with m.If(job_end):
                    m.d.sync += [row.eq(0), bank.eq(~bank), full.bit_select(bank, 1).eq(0)]
                with m.Else():
                    m.d.sync += row.eq(row + 1)
            with m.Else():
                m.d.sync += kb.eq(kb + c.lanes)
        with m.Elif(advance):
            m.d.sync += valid.eq(0)
        offset = kb[:c.key_bits]
        word = kb[c.key_bits:]
        for p, (_, port) in enumerate(ports):
            step = Mux(p < offset, word + 1, word) if p < c.memories - 1 else word
            m.d.comb += [port.addr.eq(Cat(step[:c.word_bits], row[:c.row_bits], bank)),
                         port.en.eq(advance)]
        out = [Signal(SCORE_BITS, name=f"r_lane{t}") for t in range(c.lanes)]
        steps = offsets(c.lanes, c.max_len, c.memories)
        with m.Switch(held):
            for n, off in enumerate(steps):
                with (m.Default() if n == len(steps) - 1 else m.Case(off)):
                    m.d.comb += [out[t].eq(ports[(off + t) % c.memories][1].data)
                                 for t in range(c.lanes)]
        m.d.comb += [o.tvalid.eq(valid), o.tlast.eq(last),
                     o.tdata.eq(Cat(*(Mux(keep[t], out[t], C(0, SCORE_BITS))
                                      for t in range(c.lanes))))]
