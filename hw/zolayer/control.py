"""The ZO layer's control: its register file (:mod:`.registers`) and the job in flight.

The register side is ``port`` (:class:`~zoforge.hw.pe.axil.RegisterPortSignature`,
from the AXI4-Lite target, which decodes the write addresses, :data:`~.registers.WRITTEN`:
each write is a flag from a register there, ``wr_hit``, no address compare here). A CTRL write with the start bit while idle starts a job:
``busy`` rises, and the job (one bit per job code, its flags ``minus``, ``plain``,
``query``, ``zero_w``) is registered from the written word. The cycle after the write is
``launch`` (a register): the units clear their state and the generator gets its
``save``/``restore`` pulse (``generator``); from the next cycle on (``active``) they work, until one of them reports
the job's last action (``finish``, a cycle later: the layer registers its units' ends),
which ends ``busy`` and sets ``done``. The layer's
units see the job as ``job`` (:class:`LayerJobSignature`); a compute job's tile
sequencers as ``tiles`` (:class:`~zoforge.hw.pe.signatures.JobSignature`) and its
requantizer as ``mode`` (``bias_en`` in a branch without ``zero_w``: the init XW; with
``zero_w`` the init buffer is read all the same and 0 added, so the branch's timing is
the same; raw but in ``frozen_a``).

The job's walk over words (registered with the job's flags, valid from ``launch``): ``inner``
(k-steps) and ``outer`` (features, or tokens for ``load_x``) of the words a job loads,
fetches, updates or reads (:class:`~.walk.PanelWalk` order), with K_t = r (LoRA-FA) or K:

=====================================================  =====  ======
job                                                    inner  outer
=====================================================  =====  ======
``load_x``                                             K      M
``load_w``, ``frozen_w``                               K      N
``load_a``, ``frozen_a``                               K      r
``load_master``, ``branch``, ``accumulate``, ``apply``,  K_t/B  N
``read_master``
=====================================================  =====  ======

B is ``branch_lanes`` (words of T hold B k-steps of R/B features). With them the job's
``one_word`` (``inner <= 1``) and ``one_panel`` (``outer <= F``, F = R/B the walks' step in
features): the walks' end tests at their first word (:class:`~.walk.PanelWalk`'s
``given_ends``), registered with them at the CTRL write (each setting compared, then the
same pick), so no comparison of the job's ``inner`` / ``outer`` sits between the units that
walk them (synthesis shared one between them all, placed apart). A compute job's feeder
and output stage see M, its k-steps (K, or K_t for a branch) and ``outer * B`` (row lanes)
as M, K and N.
Compute jobs: :data:`COMPUTE_JOBS`.
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.zolayer.config import ZoLayerConfig
from zoforge.hw.rng.source import SnapshotSignature
from zoforge.hw.pe.axil import RegisterPortSignature, read_select
from zoforge.hw.pe.signatures import JobSignature, ModeSignature

from .registers import ADDR_BITS, CTRL_FIELDS, DIM_BITS, JOBS, LORA_JOBS, REGISTERS, WRITTEN

__all__ = ["LayerControl", "LayerJobSignature", "settings_layout", "COMPUTE_JOBS"]

COUNTERS = ("CYCLES", "ARRAY_CYCLES", "STEP_CYCLES")
#: The jobs that run the array (the feeder, drain and output stage).
COMPUTE_JOBS = ("branch", "frozen_w", "frozen_a")


class LayerJobSignature(wiring.Signature):
    """The job in flight, as the layer's units see it (the control's view): ``launch`` (one
    cycle: clear your state), ``active`` (from the next cycle to the job's end), one bit per
    job code (:data:`~.registers.JOBS`, one-hot), ``compute`` (one of :data:`COMPUTE_JOBS`: a
    register of its own, not the flags' OR), ``computing`` (``active`` in a compute job), the
    flags ``minus``, ``plain``, ``query`` and ``zero_w``, ``perturbing`` (a branch without
    ``plain``: a register of its own, set with the flags), and the walk ``inner`` x
    ``outer`` with its flags ``one_word`` and ``one_panel`` (see the module docstring). ``active`` and ``computing`` are registers (set from the
    control's ``busy`` and ``finish``, not decoded from ``launch``, which fans out to every
    unit's clear)."""

    def __init__(self):
        super().__init__({"launch": Out(1), "active": Out(1),
                          **{name: Out(1) for name in JOBS}, "compute": Out(1),
                          "computing": Out(1), "perturbing": Out(1),
                          "minus": Out(1), "plain": Out(1),
                          "query": Out(CTRL_FIELDS["query"][1]), "zero_w": Out(1),
                          "inner": Out(DIM_BITS), "outer": Out(DIM_BITS),
                          "one_word": Out(1), "one_panel": Out(1)})


def settings_layout() -> data.StructLayout:
    """The read-write registers but IRQ_EN (lower-case names), as the units use them."""
    return data.StructLayout({name.lower(): reg.width for name, reg in REGISTERS.items()
                              if reg.kind == "rw" and name != "IRQ_EN"})


class LayerControl(wiring.Component):
    def __init__(self, config: ZoLayerConfig):
        self.config = config
        self.lora = config.mode == "lora-fa"
        super().__init__({
            "port": In(RegisterPortSignature(ADDR_BITS, WRITTEN)),
            "irq": Out(1),
            "job": Out(LayerJobSignature()),
            "tiles": Out(JobSignature(DIM_BITS)),
            "mode": Out(ModeSignature()),
            "generator": Out(SnapshotSignature()),
            "settings": Out(settings_layout()),
            "array_step": In(1),     # the array takes a k-step (ARRAY_CYCLES)
            "finish": In(1),         # the job's last action happened (a cycle ago)
        })

    @property
    def info(self) -> dict[str, int]:
        """Values of the read-only information registers."""
        c = self.config
        return {"INFO": (c.rows | c.cols << 8 | (0 if self.lora else 1) << 16
                         | c.branch_lanes << 24),
                "MAX_M": c.max_m, "MAX_K": c.max_k, "MAX_N": c.max_n, "MAX_R": c.max_r}

    def elaborate(self, platform):
        m = Module()
        job, settings, port = self.job, self.settings, self.port
        busy, done, unavailable, irq_en = Signal(), Signal(), Signal(), Signal()
        code = Signal(CTRL_FIELDS["job"][1])
        start = Signal()
        counters = {name: Signal(REGISTERS[name].width, name=name.lower())
                    for name in COUNTERS}
        stored = {name: settings[name.lower()] for name, reg in REGISTERS.items()
                  if reg.kind == "rw" and name != "IRQ_EN"}
        stored["IRQ_EN"] = irq_en
        m.d.comb += self.irq.eq(done & irq_en)

        def field(value, name):
            offset, width = CTRL_FIELDS[name]
            return value[offset:offset + width]

        # counters first: a write (STEP_CYCLES) or a start clears them in the same cycle
        with m.If(busy):
            m.d.sync += [counters["CYCLES"].eq(counters["CYCLES"] + 1),
                         counters["STEP_CYCLES"].eq(counters["STEP_CYCLES"] + 1)]
        with m.If(self.array_step):
            m.d.sync += counters["ARRAY_CYCLES"].eq(counters["ARRAY_CYCLES"] + 1)
        wdata = port.wr_data
        written = field(wdata, "job")

        def write(name):
            """The write of register ``name``: the target's decoded flag (a register)."""
            return port.wr_hit[WRITTEN.index(REGISTERS[name].address)]

        start_request = write("CTRL") & field(wdata, "start")
        clear_done = write("STATUS") & wdata[1]
        m.d.comb += start.eq(start_request & ~busy)
        with m.If(start):
            m.d.sync += [code.eq(written), job.minus.eq(field(wdata, "minus")),
                         job.plain.eq(field(wdata, "plain")),
                         job.query.eq(field(wdata, "query")),
                         job.zero_w.eq(field(wdata, "zero_w"))]
            m.d.sync += [getattr(job, name).eq(written == value)
                         for name, value in JOBS.items()]
            m.d.sync += job.perturbing.eq((written == JOBS["branch"]) & ~field(wdata, "plain"))
        with m.If(write("STEP_CYCLES")):
            m.d.sync += counters["STEP_CYCLES"].eq(0)
        for name, target in stored.items():
            with m.If(write(name) & ~busy):
                m.d.sync += target.eq(wdata[:REGISTERS[name].width])
        read_values = {**stored, **counters,
                       **{name: Const(value, 32) for name, value in self.info.items()},
                       "STATUS": Cat(busy, done, unavailable),
                       "CTRL": Cat(Const(0, 1), code, Const(0, 2), job.minus, job.plain,
                                   job.query, job.zero_w)}
        # reads: the address decode registered, then the selected word (READ_CYCLES)
        m.d.comb += port.rd_data.eq(read_select(m, port.rd_addr, {
            name: (reg.address, read_values[name]) for name, reg in REGISTERS.items()}))

        # the job: launch and the generator's pulses one cycle after the CTRL write
        m.d.sync += [job.launch.eq(start),
                     self.generator.save.eq(start & field(wdata, "save")),
                     self.generator.restore.eq(start & field(wdata, "restore"))]
        # a job this build lacks (a lora-fa job in a full build, an unknown code) ends at
        # its launch: ``void`` is that launch, registered from the written code with the
        # job's flags (not the flags' OR behind them: one register in front of ``finish``)
        void = Signal()
        m.d.sync += void.eq(start & ~Cat(written == value for name, value in JOBS.items()
                                         if self.lora or name not in LORA_JOBS).any())
        finish = self.finish | void
        with m.If(start):
            m.d.sync += [unavailable.eq(0), counters["CYCLES"].eq(0),
                         counters["ARRAY_CYCLES"].eq(0)]
        with m.If(void):
            m.d.sync += unavailable.eq(1)
        # busy from the start to the finish, done (sticky) from the finish to a start or a
        # write of 1 to STATUS bit 1; a finish comes only while busy, a start only while idle
        m.d.sync += [busy.eq(Mux(busy, ~finish, start_request)),
                     done.eq(finish | (done & ~clear_done & ~start))]
        # active = busy & ~launch, a cycle early: from a busy cycle it is ~finish (no start
        # while busy), from an idle one 0 (a start makes the next cycle launch); computing
        # the same with the job's compute flag (set at the start, steady while busy)
        m.d.sync += [job.active.eq(busy & ~finish), job.computing.eq(busy & ~finish & job.compute)]

        # the job's walk (see the module docstring), set with the job's flags from the CTRL
        # write: valid from launch on (the walks' end tests are registers that need it a cycle
        # before the first word); the words of T hold branch_lanes k-steps each, a compute
        # job's tiles count k-steps and the array's row lanes (branch_lanes per feature)
        shift = self.config.branch_lanes.bit_length() - 1
        k_t = settings.rank if self.lora else settings.k

        def written_is(*names):
            return Cat(written == JOBS[name] for name in names).any()

        over_k = written_is("load_x", "load_w", "load_a", "frozen_w", "frozen_a")
        k_steps = Signal(DIM_BITS)
        F = self.config.features_per_word

        def pick_inner(test):
            return Mux(over_k, test(settings.k), test(k_t >> shift))

        def pick_outer(test):
            return Mux(written_is("load_x"), test(settings.m),
                       Mux(written_is("load_a", "frozen_a"), test(settings.rank),
                           test(settings.n)))

        # the flags compare each setting, then pick (the settings are the control's own
        # registers; the picks are the same as inner's and outer's)
        with m.If(start):
            m.d.sync += [job.inner.eq(pick_inner(lambda v: v)),
                         k_steps.eq(Mux(over_k, settings.k, k_t)),
                         job.outer.eq(pick_outer(lambda v: v)),
                         job.one_word.eq(pick_inner(lambda v: v <= 1)),
                         job.one_panel.eq(pick_outer(lambda v: v <= F))]

        # a compute job's tiles and output mode: XW is the branches' init (bias; 0 with
        # zero_w), U the only requantized result
        # (a register of its own, set with the job's flags: one flag, not their OR, in front
        # of the sequencers' enables)
        # (the requantizer's bias_en and raw too: they reach every lane's bias add and
        # output select)
        bias_en, raw = Signal(name="bias_en"), Signal(name="raw", init=1)
        with m.If(start):
            m.d.sync += [job.compute.eq(written_is(*COMPUTE_JOBS)),
                         bias_en.eq(written_is("branch") & ~field(wdata, "zero_w")),
                         raw.eq(~written_is("frozen_a"))]
        tiles, mode = self.tiles, self.mode
        m.d.comb += [tiles.start.eq(job.launch), tiles.busy.eq(job.computing),
                     tiles.m.eq(settings.m), tiles.k.eq(k_steps),
                     tiles.n.eq(job.outer << shift),
                     mode.bias_en.eq(bias_en), mode.per_channel.eq(0),
                     mode.raw.eq(raw), mode.relu.eq(0),
                     mode.tensor_mult.eq(settings.mult), mode.tensor_shift.eq(settings.shift)]
        return m
