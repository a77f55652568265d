"""The bus softmax unit's register map, as data: the one source for its register file
(:mod:`.registers`), its host (:mod:`zoforge.sim.softmax_host`) and docs/nonlinear-units.md.

32-bit registers at byte addresses (:data:`REGISTER_MAP`; CTRL's start bit, STATUS and the
cycle counter as every bus unit has them, :mod:`zoforge.hw.pe.regmap`); the job's key mask in the region at :data:`KEY_MASK`, word ``w``
bit ``i`` keeping key ``32 w + i`` (``ceil(max_len / 32)`` words). The constants are the
:class:`~zoforge.golden.finetune.integer_ops.SoftmaxParams` values
:func:`zoforge.hw.nonlinear.softmax.softmax_registers` gives (``c`` in two words, its low
32 bits in C and the rest in C_HI); each register holds the unit's width of its constant
(WIDTHS), higher bits written are dropped.
"""
from __future__ import annotations

from zoforge.hw.pe.regmap import COUNTER_BITS, START_BIT, STATUS_BITS, Register, addresses

from .config import MAX_LEN, ROW_BITS

__all__ = ["Register", "REGISTER_MAP", "KINDS", "CTRL_BITS", "STATUS_BITS", "REGISTERS",
           "KEY_MASK", "ADDR_BITS", "COUNTER_BITS", "CONSTANT_WORDS"]

#: CTRL's one field: start (the bus units' bit, :mod:`zoforge.hw.pe.regmap`).
CTRL_BITS = {"start": START_BIT}
#: The key mask's region (word w: keys 32 w .. 32 w + 31, bit i key 32 w + i).
KEY_MASK = 0x100
ADDR_BITS = 9
assert KEY_MASK + 4 * (MAX_LEN // 32) <= 1 << ADDR_BITS

#: Kinds of register: what a write does and what a read returns.
KINDS = {
    "ctrl": "start (bit 0, W: a one-cycle pulse); ignored while busy",
    "status": "busy (bit 0), done (bit 1; write 1 to clear)",
    "rw": "RW",
    "config": "RW, written only while idle (the job's parameters, held while it runs)",
    "counter": "R, cleared at start",
    "info": "R, a build constant",
}

REGISTER_MAP: dict[str, Register] = {
    "CTRL": Register(0x00, "ctrl", 1, "start"),
    "STATUS": Register(0x04, "status", 2, "busy, done"),
    "IRQ_EN": Register(0x08, "rw", 1, "irq = done & IRQ_EN"),
    "LENGTH": Register(0x0C, "config", MAX_LEN.bit_length(), "keys a row L, 1 .. max_len "
                                           "(SoftmaxConfig.length_bits bits)"),
    "ROWS": Register(0x10, "config", ROW_BITS, "rows of the job, 1 .. 65,535 (0: the job "
                                               "ends at once, no beat)"),
    "LN2": Register(0x14, "config", 32, "the constant ln2 (the golden's L)"),
    "B": Register(0x18, "config", 32, "the constant b"),
    "C": Register(0x1C, "config", 32, "the constant c, bits 31:0"),
    "C_HI": Register(0x20, "config", 32, "the constant c, bits 63:32 (0 where c has at "
                                         "most 32 bits)"),
    "SHIFT": Register(0x24, "config", 32, "the constant shift (the golden's k)"),
    "CYCLES": Register(0x28, "counter", COUNTER_BITS,
                       "cycles of the last/current job (start to last output beat)"),
    "INFO": Register(0x2C, "info", 32, "lanes | levels << 8 | q_bits << 16"),
    "MAX_LEN": Register(0x30, "info", 32, "longest row (keys)"),
    "WIDTHS": Register(0x34, "info", 32, "register bits of ln2 | b << 8 | c << 16 | "
                                         "shift << 24"),
}
#: The constants' registers (low word first), by SoftmaxParams field.
CONSTANT_WORDS = {"ln2": ("LN2",), "b": ("B",), "c": ("C", "C_HI"), "shift": ("SHIFT",)}

#: Register byte addresses, by name (the host's view).
REGISTERS = addresses(REGISTER_MAP)
