"""R x C output-stationary systolic array with input skew and a result drain chain.

Dataflow: PE (i, j) owns output element (i, j) of the current tile. Row i of the X tile
enters at the left and moves right one PE per cycle; column j of the W tile enters at the
top and moves down. The array skews its inputs itself (row i delayed by i cycles, column j
by j), so callers present ``a[i] = X[i, k]`` and ``b[j] = W[k, j]`` for the same ``k`` in the
same cycle, together with the flags ``valid``, ``first`` (k = 0) and ``last`` (k = K-1).

Timing: a step presented in cycle t reaches PE (i, j) in cycle t + i + j; a finished sum is
in ``res`` of every PE from cycle t_last + R + C - 2 + :data:`~.pe.LATENCY`
(:attr:`SystolicArray.capture_latency`).

**Paired rows** (``paired``, INT8 operands, R even): rows ``2p`` and ``2p + 1`` of each column
are one :class:`~.pe_pair.ProcessingPair`, whose two products come from one DSP48E2 (two
MACs per DSP, Xilinx WP486). A pair-row enters in the packed operand's form: the array
subtracts ``[a_lo < 0]`` from ``a_hi`` once per pair-row at its left edge, before the row's
first register (:func:`~.pe_pair.pair_operands`, :func:`zoforge.golden.packing.borrowed_high`),
and forwards ``a_lo`` and that 9-bit high field (17 bits) along the row, so each pair's
multiplier operand is a register wired as the packed operand, with no adder before the
multiply; cycles as without it. A pair's rows are skewed alike (by ``p``), so a step reaches
PE (i, j) in cycle t + i // 2 + j and the sums are in ``res`` from t_last + R / 2 + C - 2 +
LATENCY; the read-out and its order are those of single PEs, and the minimum tile
interval holds a fortiori (the captures come earlier, the read-out is the same R cycles).

**Read-out**: each PE's ``res`` holds its finished sum until its next capture (a register
with an enable), and ``res_out[j]`` is row ``sel`` of column j, through a multiplexer over
the column's R rows (no shift chain: a LUT a bit a PE for the chain's capture-or-shift
select becomes 3/8 of one for the multiplexer tree at 8 rows, Yosys' xcup estimate,
docs/accelerator.md "Leaner PEs"; the values are those of the
chain it replaced, which moved row R-1-s to the bottom after s shifts). The drain
(:class:`~.drain.Drain`) reads a tile in R cycles, ``sel`` counting 0 .. R-1 (top row
first). A row must be read before its next capture; the feeder spaces tiles by at least
:attr:`SystolicArray.min_tile_interval` cycles, which ensures it (:func:`min_tile_interval`).

**Skewed drain** (``skewed_drain``): column j reads with ``sel`` delayed by j cycles (a
register per column), so each column is read right after its own last capture, and
``res_out[j]`` is delayed by C-1-j cycles (shift registers without reset: SRLs on a Xilinx
device), so a read row leaves all columns in one cycle. The drain counts ``sel``
:attr:`SystolicArray.drain_lead` = C-1 cycles before it takes the first row from
``res_out``, which it takes when it would have without the skew
(:attr:`SystolicArray.capture_latency` after the tile's last step): only the reads move
earlier, and the tile interval loses its C term (:func:`min_tile_interval`).

**Read stage** (``read_stage``, with a skewed drain and U >= 2): each column's multiplexer
in two stages with a register between them, the rows in groups of up to 16 (``sel``'s low
bits, :data:`READ_GROUP_BITS`) first, the group a cycle later: a 64-row column's 64:1 tree
is 16:1, a register, 4:1 (ABC mapped the whole tree 6 LUT levels deep from ``sel``). The
drain's ``sel`` then leads by C (:func:`drain_lead`), so each row is sampled one cycle
earlier than without the stage (it has been in ``res`` since at least then when U >= 2:
row r of unit row u <= r is captured U - 1 + r - u cycles before its plain read) and is
written when it was before: same cycles, same values, and the tile interval is still
:func:`min_tile_interval` (an earlier read only widens its margin).

Accumulator width (``acc_bits``, 32 by default): the PEs' accumulators, ``res`` and the
read-out; ``res_out`` is 32-bit, sign-extended (exact for sums that fit ``acc_bits``:
:func:`~zoforge.golden.engine_widths.accumulator_bits` of the largest K).
"""
from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.engine_widths import ACC_BITS, OPERAND_BITS

from .pe import LATENCY as PE_LATENCY
from .pe import ProcessingElement, check_acc_bits
from .pe_pair import OPERANDS, ProcessingPair, pair_operands

__all__ = ["SystolicArray", "min_tile_interval", "read_out_interval", "capture_latency",
           "drain_lead", "skew_register_bits", "READ_GROUP_BITS"]

#: ``sel``'s bits the read stage's first multiplexer takes (rows in groups of 16), at most
#: all but one (so there are at least two groups).
READ_GROUP_BITS = 4


def min_tile_interval(rows: int, cols: int, paired: bool = False,
                      skewed_drain: bool = False) -> int:
    """Fewest cycles between two tiles' first steps (tiles of one depth: their last steps
    as far apart) on an R x C array of U = R (or R / 2 paired) unit rows.

    Timing (L = :data:`~.pe.LATENCY`; "edge c": the clock edge at the end of cycle c): a
    tile's last step in cycle t reaches unit row u, column j in t + u + j and its sum is
    captured at edge t + u + j + L - 1 (in ``res`` from the next cycle). Column j's row r
    (in unit row u_r) is read in cycle d_j + r, d_j the cycle its first row is read. The
    next tile (last step t + D) captures row r at edge t + D + u_r + j + L - 1, which must
    not precede that read: D >= d_j - t - j - L + 1 + r - u_r.

    * Plain drain: every column is read with column C-1, d_j = t + U + C + L - 2 (the
      bottom unit row of column C-1 captured), so D >= U + C - 1 + r - u_r - j: R + C - 1
      (row R-1, column 0; r - u_r is at most R - U). Returned: 2R + C, the bound of the
      shift chains this read-out replaced (kept as it was; the engine and the ZO layer
      both drain skewed now).
    * ``skewed_drain``: column j is read j cycles after column 0, d_j = t + U + j + L - 1,
      so D >= U + r - u_r: R (also the drain's R writes a tile, :class:`~.drain.Drain`).
      Returned: ``max(U + R - 2, R)`` (2R - 2 for single PEs and R >= 2, 1 for R = 1;
      3R / 2 - 2 paired, at least R), the shift chains' exact bound, kept likewise:
      :func:`read_out_interval` is the read-out's own, ``tests/test_pe_array.py`` runs
      tiles at it, bit-exact, and one cycle closer, wrong.
    """
    if not skewed_drain:
        return 2 * rows + cols
    units = rows // 2 if paired else rows
    return max(units + rows - 2, rows)


def read_out_interval(rows: int, cols: int, skewed_drain: bool = False) -> int:
    """Fewest cycles between two tiles' first steps that the read-out itself allows (see
    :func:`min_tile_interval`): R + C - 1 with the plain drain, R skewed; paired or not.
    Not the interval the feeders keep (:func:`min_tile_interval`, at least this)."""
    return rows if skewed_drain else rows + cols - 1


def skew_register_bits(rows: int, cols: int, paired: bool = False,
                       a_bits: int = OPERAND_BITS, b_bits: int = OPERAND_BITS) -> int:
    """Flip-flops of the input skew once synthesis merges identical registers: unit row u's
    operand delayed by u registers (``a_bits``; a pair-row's packed operand,
    :data:`~.pe_pair.OPERANDS`: 8 + 9 bits; U unit rows: ``U (U - 1) / 2`` stages), column
    j's by j (``C (C - 1) / 2`` stages of ``b_bits``), and the three flags' chains, alike in
    every row, one chain of U - 1 stages. Grows with U^2, not with R x C: the planner adds it to the engine's per-PE fit
    (:data:`zoforge.hw.accel.plan.LOGIC_FIT`)."""
    units = rows // 2 if paired else rows
    operand = OPERANDS.size if paired else a_bits
    return (units * (units - 1) // 2 * operand + cols * (cols - 1) // 2 * b_bits
            + 3 * max(units - 1, 0))


def drain_lead(cols: int, skewed_drain: bool = False, read_stage: bool = False) -> int:
    """Cycles the drain's ``sel`` leads its reads of ``res_out``: C-1 with a skewed
    drain (the deskew delay of column 0), else 0; one more with the read stage."""
    return (cols - 1 if skewed_drain else 0) + (1 if read_stage else 0)


def capture_latency(rows: int, cols: int, paired: bool = False) -> int:
    """Cycles from presenting a tile's last step to all its sums being in ``res``: the skew
    of the last unit row (R - 1, or R / 2 - 1 when paired) and column, and the PE's
    :data:`~.pe.LATENCY`."""
    return (rows // 2 if paired else rows) + cols - 2 + PE_LATENCY


class SystolicArray(wiring.Component):
    """``rows`` x ``cols`` PEs; ``a`` operands of ``a_bits``, ``b`` operands of ``b_bits``;
    ``paired``: rows in pairs on one multiplier each; ``acc_bits``: the PEs' accumulators;
    ``skewed_drain``: each column's drain right after its own captures; ``read_stage``: the
    read-out's multiplexers in two registered stages (module docstring)."""

    def __init__(self, rows: int, cols: int, a_bits: int = OPERAND_BITS,
                 b_bits: int = OPERAND_BITS, paired: bool = False, acc_bits: int = ACC_BITS,
                 skewed_drain: bool = False, read_stage: bool = False):
        if paired and (rows % 2 or a_bits != OPERAND_BITS or b_bits != OPERAND_BITS):
            raise ValueError("a paired array needs an even number of rows and INT8 operands")
        if read_stage and not (skewed_drain and (rows // 2 if paired else rows) >= 2):
            raise ValueError("the read stage needs a skewed drain and at least 2 unit rows")
        self.rows, self.cols, self.a_bits, self.b_bits = rows, cols, a_bits, b_bits
        self.paired, self.skewed_drain, self.read_stage = paired, skewed_drain, read_stage
        self.acc_bits = check_acc_bits(acc_bits, a_bits, b_bits)
        super().__init__({
            "a": In(data.ArrayLayout(signed(a_bits), rows)),
            "b": In(data.ArrayLayout(signed(b_bits), cols)),
            "valid": In(1), "first": In(1), "last": In(1),
            "sel": In(range(rows)),
            "res_out": Out(data.ArrayLayout(signed(ACC_BITS), cols)),
        })

    @property
    def capture_latency(self) -> int:
        """Cycles from presenting the last step to all sums being in ``res``."""
        return capture_latency(self.rows, self.cols, self.paired)

    @property
    def unit_rows(self) -> int:
        """Rows of multiplier units: R, or R / 2 when paired."""
        return self.rows // 2 if self.paired else self.rows

    @property
    def multipliers(self) -> int:
        """Multipliers (DSP blocks) of the array."""
        return self.unit_rows * self.cols

    @property
    def min_tile_interval(self) -> int:
        """:func:`min_tile_interval` of this array."""
        return min_tile_interval(self.rows, self.cols, self.paired, self.skewed_drain)

    @property
    def drain_lead(self) -> int:
        """:func:`drain_lead` of this array."""
        return drain_lead(self.cols, self.skewed_drain, self.read_stage)

    def elaborate(self, platform):
        m = Module()
        U, C = self.unit_rows, self.cols
        units = [[ProcessingPair(self.acc_bits) if self.paired else
                  ProcessingElement(self.a_bits, self.b_bits, self.acc_bits) for _ in range(C)]
                 for _ in range(U)]
        for u in range(U):
            for j in range(C):
                name = (f"pair_{u}_{j}" if self.paired else f"pe_{u}_{j}")
                m.submodules[name] = units[u][j]

        # Input skew: unit row u (its operands and the flags) delayed by u cycles, column j by
        # j. A pair-row's operands enter in the packed operand's form (``pair_operands``: the
        # borrow subtracted once, here at the edge, before the first register of the row).
        for u in range(U):
            if self.paired:
                a = pair_operands(m, self.a[2 * u], self.a[2 * u + 1], f"a_pair_{u}")
            else:
                a = self.a[u]
            valid, first, last = self.valid, self.first, self.last
            for stage in range(u):
                a_d = Signal(a.shape(), name=f"a_skew_{u}_{stage}")
                flags_d = Signal(3, name=f"flags_skew_{u}_{stage}")
                m.d.sync += [a_d.eq(a), flags_d.eq(Cat(valid, first, last))]
                a, valid, first, last = a_d, flags_d[0], flags_d[1], flags_d[2]
            unit = units[u][0]
            m.d.comb += [unit.a_in.eq(a), unit.valid_in.eq(valid), unit.first_in.eq(first),
                         unit.last_in.eq(last)]
        for j in range(C):
            b = self.b[j]
            for stage in range(j):
                b_d = Signal(signed(self.b_bits), name=f"b_skew_{j}_{stage}")
                m.d.sync += b_d.eq(b)
                b = b_d
            m.d.comb += units[0][j].b_in.eq(b)
        # Each column's row select: the input's, j cycles later with a skewed drain.
        sels = [self.sel]
        for j in range(1, C if self.skewed_drain else 1):
            sel_d = Signal.like(self.sel, name=f"sel_skew_{j}")
            m.d.sync += sel_d.eq(sels[-1])
            sels.append(sel_d)
        # Systolic connections.
        for u in range(U):
            for j in range(C):
                unit = units[u][j]
                if j > 0:
                    left = units[u][j - 1]
                    m.d.comb += [unit.a_in.eq(left.a_out), unit.valid_in.eq(left.valid_out),
                                 unit.first_in.eq(left.first_out),
                                 unit.last_in.eq(left.last_out)]
                if u > 0:
                    m.d.comb += unit.b_in.eq(units[u - 1][j].b_out)
        # The read-out: row sel of each column (top row 0), with the read stage in two
        # registered steps (the group's rows, then the group, with ``sel`` a cycle later),
        # deskewed (C-1-j registers without reset), sign-extended.
        low = min(READ_GROUP_BITS, len(self.sel) - 1)
        for j in range(C):
            column = [units[u][j].res[i] for u in range(U) for i in range(self.rows // U)]
            sel = sels[j] if self.skewed_drain else self.sel
            res = Signal(signed(self.acc_bits), name=f"res_read_{j}")
            if self.read_stage:
                groups = []
                for g in range(0, len(column), 1 << low):
                    group = Signal(signed(self.acc_bits), name=f"res_group_{j}_{g >> low}",
                                   reset_less=True)
                    m.d.sync += group.eq(_select(column[g:g + (1 << low)], sel[:low]))
                    groups.append(group)
                sel_late = Signal(len(self.sel) - low, name=f"sel_group_{j}")
                m.d.sync += sel_late.eq(sel[low:])
                m.d.comb += res.eq(_select(groups, sel_late))
            else:
                m.d.comb += res.eq(_select(column, sel))
            for stage in range(C - 1 - j if self.skewed_drain else 0):
                res_d = Signal(signed(self.acc_bits), name=f"res_deskew_{j}_{stage}",
                               reset_less=True)
                m.d.sync += res_d.eq(res)
                res = res_d
            m.d.comb += self.res_out[j].eq(res)
        return m


def _select(values: list, sel):
    """``values[sel]`` as a binary tree of 2:1 multiplexers, ``sel``'s low bit first (for
    synthesis: LUT6 4:1 multiplexers and the dedicated MUXF7/MUXF8 above them); an index
    past the end reads the last value."""
    level, bit = list(values), 0
    while len(level) > 1:
        level = [Mux(sel[bit], level[n + 1] if n + 1 < len(level) else level[n], level[n])
                 for n in range(0, len(level), 2)]
        bit += 1
    return level[0]
