"""R x C output-stationary systolic array with input skew and a result drain chain.

Dataflow: PE (i, j) owns output element (i, j) of the current tile. Row i of the X tile
enters at the left and moves right one PE per cycle; column j of the W tile enters at the
top and moves down. The array skews its inputs itself (row i delayed by i cycles, column j
by j), so callers present ``a[i] = X[i, k]`` and ``b[j] = W[k, j]`` for the same ``k`` in the
same cycle, together with the flags ``valid``, ``first`` (k = 0) and ``last`` (k = K-1).

Timing: a step presented in cycle t reaches PE (i, j) in cycle t + i + j; a finished sum is
in ``res`` of every PE from cycle t_last + R + C - 2 + :data:`~.pe.LATENCY`
(:attr:`SystolicArray.capture_latency`).
Results leave through per-column shift chains: with ``shift`` high every ``res`` takes the
value of the PE above, and ``res_out[j]`` is the bottom row, so R cycles (bottom row first)
drain a tile. The next tile's first capture must come after the last shift; the engine
spaces tiles by at least :attr:`SystolicArray.min_tile_interval` cycles to ensure it.
"""
from amaranth import Cat, Const, Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.engine_widths import ACC_BITS, OPERAND_BITS

from .pe import LATENCY as PE_LATENCY
from .pe import ProcessingElement

__all__ = ["SystolicArray", "min_tile_interval"]


def min_tile_interval(rows: int, cols: int) -> int:
    """Fewest cycles between two tiles' first steps on an R x C array: the drain's last
    shift must not move a sum of the next tile (2R + C - 3 would do; 3 cycles of margin)."""
    return 2 * rows + cols


class SystolicArray(wiring.Component):
    """``rows`` x ``cols`` PEs; ``a`` operands of ``a_bits``, ``b`` operands of ``b_bits``."""

    def __init__(self, rows: int, cols: int, a_bits: int = OPERAND_BITS,
                 b_bits: int = OPERAND_BITS):
        self.rows, self.cols, self.a_bits, self.b_bits = rows, cols, a_bits, b_bits
        super().__init__({
            "a": In(data.ArrayLayout(signed(a_bits), rows)),
            "b": In(data.ArrayLayout(signed(b_bits), cols)),
            "valid": In(1), "first": In(1), "last": In(1),
            "shift": In(1),
            "res_out": Out(data.ArrayLayout(signed(ACC_BITS), cols)),
        })

    @property
    def capture_latency(self) -> int:
        """Cycles from presenting the last step to all sums being in ``res``."""
        return self.rows + self.cols - 2 + PE_LATENCY

    @property
    def min_tile_interval(self) -> int:
        """:func:`min_tile_interval` of this array."""
        return min_tile_interval(self.rows, self.cols)

    def elaborate(self, platform):
        m = Module()
        R, C = self.rows, self.cols
        pes = [[ProcessingElement(self.a_bits, self.b_bits) for _ in range(C)] for _ in range(R)]
        for i in range(R):
            for j in range(C):
                m.submodules[f"pe_{i}_{j}"] = pes[i][j]
        # Input skew: row i (operand and flags) delayed by i cycles, column j by j cycles.
        for i in range(R):
            a, valid, first, last = self.a[i], self.valid, self.first, self.last
            for stage in range(i):
                a_d = Signal(signed(self.a_bits), name=f"a_skew_{i}_{stage}")
                flags_d = Signal(3, name=f"flags_skew_{i}_{stage}")
                m.d.sync += [a_d.eq(a), flags_d.eq(Cat(valid, first, last))]
                a, valid, first, last = a_d, flags_d[0], flags_d[1], flags_d[2]
            pe = pes[i][0]
            m.d.comb += [pe.a_in.eq(a), pe.valid_in.eq(valid), pe.first_in.eq(first),
                         pe.last_in.eq(last)]
        for j in range(C):
            b = self.b[j]
            for stage in range(j):
                b_d = Signal(signed(self.b_bits), name=f"b_skew_{j}_{stage}")
                m.d.sync += b_d.eq(b)
                b = b_d
            m.d.comb += pes[0][j].b_in.eq(b)
        # Systolic connections and the drain chains.
        for i in range(R):
            for j in range(C):
                pe = pes[i][j]
                m.d.comb += pe.shift.eq(self.shift)
                if j > 0:
                    left = pes[i][j - 1]
                    m.d.comb += [pe.a_in.eq(left.a_out), pe.valid_in.eq(left.valid_out),
                                 pe.first_in.eq(left.first_out), pe.last_in.eq(left.last_out)]
                if i > 0:
                    above = pes[i - 1][j]
                    m.d.comb += [pe.b_in.eq(above.b_out), pe.res_in.eq(above.res_out)]
                else:
                    m.d.comb += pe.res_in.eq(Const(0, signed(ACC_BITS)))
        for j in range(C):
            m.d.comb += self.res_out[j].eq(pes[R - 1][j].res_out)
        return m
