"""The engine's control/status register file, decoded from the register map (:mod:`.regmap`).

Its ``port`` (:class:`~zoforge.hw.pe.axil.RegisterPortSignature`) takes the AXI4-Lite
target's writes and reads. It tells the rest of the engine about the job
(:class:`~zoforge.hw.pe.signatures.JobSignature`; ``start`` the cycle after the CTRL
write, ``busy`` from the cycle after ``start`` until the job's last output beat) and the
output mode (:class:`~zoforge.hw.pe.signatures.ModeSignature`), writes the
per-column parameter tables, and keeps STATUS, the cycle counters and ``irq``.
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.hw.pe.axil import RegisterPortSignature, field_word, read_select
from zoforge.hw.pe.signatures import JobSignature, ModeSignature

from .buffers import engine_buffers
from .config import DIM_BITS, EngineConfig
from zoforge.hw.nonlinear.gelu import config_signature

from .regmap import (ADDR_BITS, COUNTER_BITS, GELU_CONSTANTS, REGION_SHIFT, STATUS_BITS,
                     ctrl_bits, param_tables, register_map)

__all__ = ["RegisterFile"]


class RegisterFile(wiring.Component):
    """Registers of :func:`~.regmap.register_map`, per-column tables of
    :func:`~.regmap.param_tables` (written only while idle, full words only)."""

    def __init__(self, config: EngineConfig):
        self.config = config
        buffers = engine_buffers(config)
        self.registers = register_map(config.gelu)
        self.tables = param_tables(config.gelu)
        self.ctrl_bits = ctrl_bits(config.gelu)
        #: the registers a write acts on, decoded by the AXI4-Lite target (``port.wr_hit``)
        self.write_addresses = tuple(register.address for register in self.registers.values()
                                     if register.kind in ("ctrl", "status", "rw", "config"))
        gelu_ports = ({"gelu": Out(1), "gelu_config": Out(config_signature())}
                      if config.gelu else {})
        super().__init__({
            "port": In(RegisterPortSignature(ADDR_BITS, self.write_addresses)),
            "job": Out(JobSignature(DIM_BITS)), "mode": Out(ModeSignature()),
            "array_step": In(1),   # the array takes a k-step (counted in ARRAY_CYCLES)
            "job_end": In(1),      # the job's last output beat leaves (busy ends)
            "irq": Out(1),
            **{table.memory: In(buffers[table.memory].write_port())
               for table in self.tables.values()},
            **gelu_ports,
        })

    @property
    def info(self) -> dict[str, int]:
        """Values of the ``info`` registers."""
        c = self.config
        return {"INFO": c.rows | c.cols << 8 | c.pack << 16, "MAX_M": c.max_m,
                "MAX_K": c.max_k, "MAX_N": c.max_n}

    def elaborate(self, platform):
        m = Module()
        job, mode = self.job, self.mode
        busy, done, start = Signal(), Signal(), Signal()
        status = {"busy": busy, "done": done}
        registers, bits = self.registers, self.ctrl_bits
        ctrl = {name: getattr(mode, name) if name in mode.signature.members
                else getattr(self, name) for name in bits if name != "start"}
        stored = {"IRQ_EN": Signal(name="irq_en"), "M": job.m, "K": job.k, "N": job.n,
                  "MULT": mode.tensor_mult, "SHIFT": mode.tensor_shift}
        if self.config.gelu:
            stored.update({name: getattr(self.gelu_config, constant)[low:low + 32]
                           for name, (constant, low) in GELU_CONSTANTS.items()})
        counters = {name: Signal(COUNTER_BITS, name=name.lower())
                    for name, register in registers.items() if register.kind == "counter"}
        events = {"CYCLES": busy, "ARRAY_CYCLES": self.array_step}
        words = {"ctrl": field_word(bits, ctrl), "status": field_word(STATUS_BITS, status)}
        values = {**stored, **counters,
                  **{name: Const(value, 32) for name, value in self.info.items()}}

        port = self.port
        data = port.wr_data
        for name, register in registers.items():
            if register.address not in self.write_addresses:
                continue
            with m.If(port.wr_hit[self.write_addresses.index(register.address)]):
                if register.kind == "ctrl":
                    with m.If(~busy):
                        m.d.sync += [f.eq(data[bits[n]]) for n, f in ctrl.items()]
                elif register.kind == "rw":
                    m.d.sync += stored[name].eq(data)
                elif register.kind == "config":
                    with m.If(~busy):
                        m.d.sync += stored[name].eq(data)
        # reads: the address decode registered, then the selected word (READ_CYCLES)
        m.d.comb += port.rd_data.eq(read_select(m, port.rd_addr, {
            name: (register.address, words.get(register.kind, values.get(name)))
            for name, register in registers.items()}))
        self._tables(m, busy)

        for name, counter in counters.items():
            with m.If(events[name]):
                m.d.sync += counter.eq(counter + 1)
        with m.If(start):
            m.d.sync += [c.eq(0) for c in counters.values()]
        # busy, done and the sequencers' busy: start sets busy and clears done, else the
        # job's last beat (job_end) clears busy and sets done, else a STATUS write of the
        # done bit clears it. Each written as a choice by job_end between two values of
        # registers only (the bus's decode and data, busy, done): job_end, which comes from
        # the output stream through the packer, enters each next state in its last LUT
        end = self.job_end
        # start: a CTRL write of the start bit while idle; clear: a STATUS write of the done
        # bit (plain assignments, not set inside an If: Icarus Verilog first runs such a
        # process when one of its inputs changes, and busy and done would take its x, see
        # hw/pe/drain.py)
        hit = {register.kind: port.wr_hit[self.write_addresses.index(register.address)]
               for register in registers.values() if register.kind in ("ctrl", "status")}
        m.d.comb += start.eq(hit["ctrl"] & ~busy & data[bits["start"]])
        clear = hit["status"] & data[STATUS_BITS["done"]]
        m.d.sync += [busy.eq(Mux(end, start, start | busy)),
                     done.eq(Mux(end, ~start, ~start & done & ~clear))]
        # the sequencers see the start one cycle later (a register, not the bus decode, drives
        # their clear), and busy from the cycle after it
        m.d.sync += [job.start.eq(start),
                     job.busy.eq(Mux(end, 0, busy & ~start))]     # busy & ~job.start
        m.d.comb += self.irq.eq(done & stored["IRQ_EN"])
        return m

    def _tables(self, m: Module, busy) -> None:
        """Per-column table writes, two cycles after the register port's write (registers,
        not the bus decode, drive the memories' write ports): region ``wr_addr[12:]``, word
        ``row * 2^lane_bits + lane``; lane j of the table row gets the word."""
        wr_en, wr_addr, wr_data = Signal(), Signal(ADDR_BITS), Signal(32)
        port = self.port
        m.d.sync += [wr_en.eq(port.wr_en), wr_addr.eq(port.wr_addr), wr_data.eq(port.wr_data)]
        lane_bits = (self.config.cols - 1).bit_length()
        index = wr_addr[2:REGION_SHIFT]
        lane, row = index[:lane_bits], index[lane_bits:]
        # and the table's write port itself from registers, a cycle later (its lane enables
        # are the block RAM's byte enables: no decode in front of them)
        for table in self.tables.values():
            port = getattr(self, table.memory)
            hit = (wr_en & ~busy & (wr_addr[:2] == 0)
                   & (wr_addr[REGION_SHIFT:] == table.address >> REGION_SHIFT))
            m.d.sync += [port.addr.eq(row),
                         port.data.eq(Cat([wr_data[:table.shape.width]] * self.config.cols))]
            for j in range(self.config.cols):
                m.d.sync += port.en[j].eq(hit & (lane == j))
