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

__all__ = ["ScoresReorder", "ReorderJobSignature", "offsets", "at_most", "above"]

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


def above(value, bound: int):
    """``value > bound``, or a constant 0 where ``value``'s width cannot pass ``bound``."""
    return C(0, 1) if (1 << len(value)) - 1 <= bound else value > bound


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
        # each bank's job as the reader wants it (_Shape: L and the flags of its first beat
        # and its first row), stored by the writer with its last beat
        banks = [_Shape(c, f"bank{b}_") for b in range(2)]
        shape = _Shape(c, "w_")                 # the writer's job's
        self._writer(m, ports, full, banks, shape)
        self._reader(m, ports, full, banks, shape)
        return m

    def _writer(self, m: Module, ports, full, banks, shape) -> None:
        """``s_axis`` -> the free bank: C memories a beat, rows past M and keys past L not
        written; the bank full (with its job's shape) after the job's last beat.

        Every end-of-count is a flag register set a beat ahead (no comparison behind the
        take): ``r_end`` (the tile's last row), ``few`` (at most one row of the panel from
        this beat: at ``r_end``, the panel's last tile), ``left_fits`` (the last column
        panel), ``panel_end`` and ``job_end`` (their products), ``row_ok`` and ``lane_ok``
        (the beat's row below M, its lanes below L). While no job is under way (``idle``)
        they and the counters follow ``job.m`` and ``job.length``, so a start only sets
        ``active``; their values before that are never used (reset values unneeded)."""
        c, s, job = self.reorder_config, self.s_axis, self.job
        active = Signal(name="w_active")
        bank = Signal(name="w_bank")
        m_reg = Signal(c.m_bits, name="w_m")
        r = Signal(max(1, (c.rows - 1).bit_length()), name="w_r")   # row within the tile
        r_end = Signal(name="w_r_end")      # r == R - 1
        rows_left = Signal(c.m_bits, name="w_rows_left")      # max(M - mt R - r, 0)
        row_ok = Signal(name="w_row_ok")                      # rows_left > 0: r < M - mt R
        few = Signal(name="w_few")                    # rows_left <= 1
        m_some = Signal(name="w_m_some")                      # M > 0
        m_few = Signal(name="w_m_few")                # M <= 1
        row = Signal(max(1, c.row_bits), name="w_row")        # mt R + r (while < M)
        kb = Signal(c.l_bits, name="w_key")                   # nt C
        left = Signal(c.l_bits, name="w_left")                # L - nt C
        left_fits = Signal(name="w_left_fits")        # left <= C
        lane_ok = Signal(c.cols, name="w_lane_ok")            # bit j: left > j
        error = Signal(name="w_error")
        m.d.comb += [job.ready.eq(~active), job.error.eq(error),
                     s.tready.eq(active & ~full.bit_select(bank, 1))]
        idle = Signal(name="w_idle", init=1)                  # ~active (its own register)
        panel_end = Signal(name="w_panel_end")    # r_end & few
        job_end = Signal(name="w_job_end")        # ... & left_fits
        take = Signal(name="w_take")
        m.d.comb += take.eq(s.tvalid & s.tready)
        with m.If(job.start & ~active):
            m.d.sync += [active.eq(1), idle.eq(0), error.eq(0)]
        with m.Elif(take):
            with m.If(s.tlast != job_end):
                m.d.sync += error.eq(1)
            with m.If(job_end):
                m.d.sync += [active.eq(0), idle.eq(1), bank.eq(~bank)]
        # the job's first beat's state loaded while no job is under way: a start keeps it
        with m.If(idle):
            first_end = C(1, 1) if c.rows == 1 else C(0, 1)
            m.d.sync += [m_reg.eq(job.m), r.eq(0), r_end.eq(c.rows == 1),
                         rows_left.eq(job.m), row_ok.eq(job.m != 0),
                         few.eq(at_most(job.m, 1)), m_some.eq(job.m != 0),
                         m_few.eq(at_most(job.m, 1)), row.eq(0), kb.eq(0),
                         left.eq(job.length), left_fits.eq(at_most(job.length, c.cols)),
                         lane_ok.eq(Cat(*(above(job.length, j) for j in range(c.cols)))),
                         panel_end.eq(first_end & at_most(job.m, 1)),
                         job_end.eq(first_end & at_most(job.m, 1)
                                    & at_most(job.length, c.cols))]
            m.d.sync += shape.load(job.m, job.length)
        with m.Elif(take):
            turn = panel_end & ~left_fits                     # the next column panel
            r_end_next = Mux(r_end, c.rows == 1, r == c.rows - 2 if c.rows > 1 else C(1, 1))
            few_next = Mux(panel_end, m_few, at_most(rows_left, 2))
            fits_next = Mux(turn, at_most(left, 2 * c.cols), left_fits)
            m.d.sync += [panel_end.eq(r_end_next & few_next),
                         job_end.eq(r_end_next & few_next & fits_next),
                         r_end.eq(r_end_next), few.eq(few_next),
                         r.eq(Mux(r_end, 0, r + 1)), row.eq(Mux(panel_end, 0, row + 1))]
            with m.If(panel_end):                             # the next panel from row 0
                m.d.sync += [rows_left.eq(m_reg), row_ok.eq(m_some)]
            with m.Else():                                    # r + 1 or the next tile
                m.d.sync += [rows_left.eq(rows_left - row_ok), row_ok.eq(above(rows_left, 1))]
            with m.If(turn):
                m.d.sync += [kb.eq(kb + c.cols), left.eq(left - c.cols),
                             left_fits.eq(at_most(left, 2 * c.cols)),
                             lane_ok.eq(Cat(*(above(left, j + c.cols)
                                              for j in range(c.cols))))]
        # a bank full from the cycle after its job's last beat to the cycle after its last
        # read (the reader's clear in _reader); its shape follows the writer's until full
        commit = Signal(name="w_commit")
        m.d.comb += commit.eq(take & job_end)
        for b in range(2):
            with m.If(commit & (bank == b)):
                m.d.sync += full[b].eq(1)
            with m.If(~full[b]):
                m.d.sync += banks[b].copy(shape)
        offset = kb[:c.key_bits]
        word = kb[c.key_bits:]
        lanes = [s.tdata[SCORE_BITS * j:SCORE_BITS * (j + 1)] for j in range(c.cols)]
        steps = offsets(c.cols, c.max_len, c.memories)
        for p, (port, _) in enumerate(ports):
            data = Signal(SCORE_BITS, name=f"w_data{p}")
            lane = Signal(name=f"w_lane_ok{p}")
            # the lane memory p takes at each offset (past the offsets a row has: the last's)
            picks = [(p - o) % c.memories for o in _table(steps, offset)]
            m.d.comb += [data.eq(_select(offset, [lanes[j] if j < c.cols else C(0, SCORE_BITS)
                                                  for j in picks])),
                         lane.eq(_select(offset, [lane_ok[j] if j < c.cols else C(0, 1)
                                                  for j in picks]))]
            step = Mux(p < offset, word + 1, word) if p < c.memories - 1 else word
            en = Signal(name=f"w_en{p}")
            m.d.comb += [en.eq(take & row_ok & lane),
                         port.addr.eq(Cat(step[:c.word_bits], row[:c.row_bits], bank)),
                         port.data.eq(data), port.en.eq(en)]

    def _reader(self, m: Module, ports, full, banks, shape) -> None:
        """The full bank -> ``m_axis``: a row's beats from ``lanes`` memories each, read
        when the output advances (the read port's data held meanwhile); the bank free after
        the job's last read.

        The row's keys from ``kb`` (``left``), its end and the job's are registers set a
        beat ahead: from the bank's stored shape for a row's first beat (from the writer's
        job's while the bank is not full: that is the job it will hold)."""
        c, o = self.reorder_config, self.m_axis
        bank = Signal(name="r_bank")
        row = Signal(max(1, c.row_bits), name="r_row")
        kb = Signal(c.l_bits, name="r_key")                    # j lanes
        valid = Signal(name="r_valid")                         # the beat on m_axis
        keep = Signal(c.lanes, name="r_keep")                  # its lanes < L
        steps = offsets(c.lanes, c.max_len, c.memories)        # a beat's offsets mod P
        # its keys' offset as an index into steps (an offset past them: the last step's)
        held = Signal(max(1, (len(steps) - 1).bit_length()), name="r_offset")
        where = _select(kb[:c.key_bits], [C(steps.index(o), len(held))
                                          for o in _table(steps, kb[:c.key_bits])])
        last = Signal(name="r_last")
        now = _Shape(c, "r_")               # L - kb, its flags; the row flags of `row`
        left = now.length
        row_end = now.short                                    # left <= lanes
        job_end = row_end & now.last                           # ... and row == M - 1
        advance = ~valid | o.tready
        issue = advance & full.bit_select(bank, 1)
        with m.If(issue):
            m.d.sync += [valid.eq(1), last.eq(job_end), held.eq(where),
                         keep.eq(now.keep)]
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
        # `now` from the bank's shape at a row's start (the other bank's, or the writer's
        # while that one is not full yet, at the job's end), `lanes` keys on otherwise;
        # while the bank is not full, the writer's (the job it will hold); `issue` last
        full_now = full.bit_select(bank, 1)
        full_next = full.bit_select(~bank, 1)
        stored = list(zip(banks[0].fields(), banks[1].fields()))
        next_job = [Mux(full_next, Mux(bank, b0, b1), w)
                    for (b0, b1), w in zip(stored, shape.fields())]
        this_job = [Mux(bank, b1, b0) for b0, b1 in stored]
        next_row = [this_job[0], this_job[1], this_job[2], now.down - 1, now.fits,
                    now.fits & (now.down == 1)]
        same_row = [left - c.lanes, at_most(left, 2 * c.lanes),
                    Cat(*(above(left, t + c.lanes) for t in range(c.lanes))),
                    now.down, now.fits, now.last]
        for field, nj, nr, st, w in zip(now.fields(), next_job, next_row, same_row,
                                        shape.fields()):
            m.d.sync += field.eq(Mux(issue, Mux(row_end, Mux(now.last, nj, nr), st),
                                     Mux(full_now, field, w)))
        offset = kb[:c.key_bits]
        word = kb[c.key_bits:]
        for p, (_, port) in enumerate(ports):
            step = Mux(p < offset, word + 1, word) if p < c.memories - 1 else word
            m.d.comb += [port.addr.eq(Cat(step[:c.word_bits], row[:c.row_bits], bank)),
                         port.en.eq(advance)]
        out = [Signal(SCORE_BITS, name=f"r_lane{t}") for t in range(c.lanes)]
        table = [steps[min(i, len(steps) - 1)] for i in range(1 << len(held))]
        for t in range(c.lanes):
            m.d.comb += out[t].eq(_select(held, [ports[(off + t) % c.memories][1].data
                                                 for off in table]))
        m.d.comb += [o.tvalid.eq(valid), o.tlast.eq(last),
                     o.tdata.eq(Cat(*(Mux(keep[t], out[t], C(0, SCORE_BITS))
                                      for t in range(c.lanes))))]


def _table(steps: list[int], index) -> list[int]:
    """The offset for each value of ``index``: itself where it is one of ``steps``, the last
    step otherwise (values a row never gives)."""
    return [o if o in steps else steps[-1] for o in range(1 << len(index))]


def _select(index, values):
    """``values[index]`` as a tree of two-way muxes on ``index``'s bits (LUTs and the
    slice's wide muxes), equal halves not muxed."""
    def tree(bit, items):
        if bit < 0 or len(items) == 1:
            return items[0]
        half = len(items) // 2
        low, high = tree(bit - 1, items[:half]), tree(bit - 1, items[half:])
        return low if low is high else Mux(index[bit], high, low)
    # items: the values at index 0 .. 2^n - 1; the top bit splits them first
    return tree(len(index) - 1, list(values))


class _Shape:
    """A job's shape as the reader counts it, in registers named ``prefix...``: ``length``
    (the keys of the row from the next beat: L at a row's start), ``short`` (``length <=
    lanes``: the row's last beat), ``keep`` (bit t: ``length > t``), ``down`` (``M - 1 -
    row`` modulo ``2^w``, w the row counter's bits), ``fits`` (``1 <= M <= 2^w``: ``row ==
    M - 1`` can happen) and ``last`` (``row == M - 1``)."""

    def __init__(self, c: ReorderConfig, prefix: str):
        self.c = c
        self.row_bits = max(1, c.row_bits)
        self.length = Signal(c.l_bits, name=f"{prefix}length")
        self.short = Signal(name=f"{prefix}short")
        self.keep = Signal(c.lanes, name=f"{prefix}keep")
        self.down = Signal(self.row_bits, name=f"{prefix}down")
        self.fits = Signal(name=f"{prefix}fits")
        self.last = Signal(name=f"{prefix}last")

    def fields(self):
        return (self.length, self.short, self.keep, self.down, self.fits, self.last)

    def load(self, m_value, length):
        """From a job's M and L (row 0, key 0)."""
        c = self.c
        return [self.length.eq(length), self.short.eq(at_most(length, c.lanes)),
                self.keep.eq(Cat(*(above(length, t) for t in range(c.lanes)))),
                self.down.eq(m_value - 1),
                self.fits.eq((m_value != 0) & at_most(m_value, 1 << self.row_bits)),
                self.last.eq(m_value == 1)]

    def copy(self, other: "_Shape"):
        return [a.eq(b) for a, b in zip(self.fields(), other.fields())]
