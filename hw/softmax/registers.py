"""The bus softmax unit's control/status register file, decoded from its register map
(:mod:`.regmap`).

Its ``port`` (:class:`~zoforge.hw.pe.axil.RegisterPortSignature`) takes the AXI4-Lite
target's writes and reads. It holds the job's parameters (``length``, ``rows``, the key
``mask``) and the unit's constants (``constants``: :func:`~zoforge.hw.nonlinear.softmax.
config_signature`), written only while idle; ``start`` is the CTRL write's one-cycle pulse,
``busy`` from the cycle after it until the job's end (``job_end``: its last output beat
leaves); STATUS, the cycle counter and ``irq`` (``done & IRQ_EN``) as the GEMM engine's.
"""
from __future__ import annotations

from amaranth import Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.hw.nonlinear.softmax import LEVELS, Q_BITS, SoftmaxWidths, config_signature
from zoforge.hw.pe.axil import RegisterPortSignature, field_word, read_select

from .config import ROW_BITS, SoftmaxConfig
from .regmap import (ADDR_BITS, CONSTANT_WORDS, COUNTER_BITS, CTRL_BITS, KEY_MASK,
                     REGISTER_MAP, STATUS_BITS)

__all__ = ["SoftmaxRegisters", "info_values"]


def info_values(config: SoftmaxConfig) -> dict[str, int]:
    """Values of the ``info`` registers of a unit built from ``config``."""
    w = SoftmaxWidths.of(config.min_scale)
    return {"INFO": config.lanes | LEVELS << 8 | Q_BITS << 16, "MAX_LEN": config.max_len,
            "WIDTHS": w.ln2 | w.b << 8 | w.c << 16 | w.shift << 24}


class SoftmaxRegisters(wiring.Component):
    """Registers of :data:`~.regmap.REGISTER_MAP` and the key mask of a unit built from
    ``config`` (module docstring)."""

    def __init__(self, config: SoftmaxConfig):
        self.config = config
        super().__init__({
            "port": In(RegisterPortSignature(ADDR_BITS)),
            "constants": Out(config_signature(config.min_scale)),
            "length": Out(config.length_bits), "rows": Out(ROW_BITS),
            "mask": Out(config.max_len),
            "start": Out(1), "busy": Out(1),
            "job_end": In(1),      # the job's last output beat leaves (busy ends)
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.config
        busy, done, irq_en = self.busy, Signal(), Signal(name="irq_en")
        cycles = Signal(COUNTER_BITS, name="cycles")
        # each register's 32-bit words, low first (C_HI of a c of 32 bits or fewer: none)
        stored = {"IRQ_EN": [irq_en], "LENGTH": [self.length], "ROWS": [self.rows]}
        for name, registers in CONSTANT_WORDS.items():
            value = getattr(self.constants, name)
            for n, register in enumerate(registers):
                if 32 * n < len(value):
                    stored[register] = [value[32 * n:32 * n + 32]]
        words = {"CTRL": Const(0, 1),
                 "STATUS": field_word(STATUS_BITS, {"busy": busy, "done": done}),
                 "CYCLES": cycles,
                 **{name: parts[0] for name, parts in stored.items()},
                 **{name: Const(value, 32) for name, value in info_values(c).items()}}

        port, data = self.port, self.port.wr_data
        with m.If(port.wr_en):
            with m.Switch(port.wr_addr):
                for name, register in REGISTER_MAP.items():
                    with m.Case(register.address):
                        if register.kind == "ctrl":
                            with m.If(~busy):
                                m.d.comb += self.start.eq(data[CTRL_BITS["start"]])
                        elif register.kind == "status":
                            with m.If(data[STATUS_BITS["done"]]):
                                m.d.sync += done.eq(0)
                        elif register.kind == "rw":
                            m.d.sync += stored[name][0].eq(data)
                        elif register.kind == "config" and name in stored:
                            with m.If(~busy):
                                m.d.sync += stored[name][0].eq(data)
                for n in range(c.mask_words):
                    with m.Case(KEY_MASK + 4 * n):
                        with m.If(~busy):
                            m.d.sync += self.mask[32 * n:32 * n + 32].eq(data)
        mask = {f"KEY_MASK{n}": (KEY_MASK + 4 * n, self.mask[32 * n:32 * n + 32])
                for n in range(c.mask_words)}
        m.d.comb += port.rd_data.eq(read_select(m, port.rd_addr, {
            **{name: (register.address, words.get(name, Const(0, 1)))
               for name, register in REGISTER_MAP.items()}, **mask}))

        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
        with m.If(self.start):
            m.d.sync += [busy.eq(1), done.eq(0), cycles.eq(0)]
        with m.Elif(self.job_end):
            m.d.sync += [busy.eq(0), done.eq(1)]
        m.d.comb += self.irq.eq(done & irq_en)
        return m
