"""A perturbation source: any generator behind one signature, for a design that consumes
perturbations (the ZO layer).

The generators differ in their control: the on-the-fly and Gaussian ones run endlessly,
the pre-generated pool serves perturbations of a given ``length`` after a ``start``. A
:class:`PerturbationSource` holds one generator (submodule ``core``) and gives it one
signature: ``control`` (:class:`SnapshotSignature`: ``save`` / ``restore`` pulses) and the
``out`` stream of transfers; the pool is started again whenever it is idle, with the
longest length (one endless perturbation).

``out.valid`` is the generator's ``offered`` (:func:`~zoforge.hw.rng.lfsr.drive_valid`): its
own ``out.valid`` but for a restore cycle, in which the source's consumer must take no
transfer (its ``out.ready`` low: the ZO layer restores only at a job's launch, when no unit
takes one). The generator steps on no transfer in that cycle either (the restore wins), so a
word taken then would be a stale one; the layer's bit-exact co-simulations would show it.
This keeps the restore pulse, a net to every state bit, off the consumers' paths.
"""
from __future__ import annotations

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.rng import GeneratorConfig, PregenConfig
from zoforge.hw.rng.designs import generator_for

__all__ = ["SnapshotSignature", "PerturbationSource"]


class SnapshotSignature(wiring.Signature):
    """A generator's snapshot control (the controller's view): ``save`` copies the state
    into the shadow registers, ``restore`` copies it back."""

    def __init__(self):
        super().__init__({"save": Out(1), "restore": Out(1)})


class PerturbationSource(wiring.Component):
    """The generator of ``config`` (which must have the snapshot option) as an endless
    stream of ``lanes`` x ``width``-bit transfers (lane 0 in the LSBs)."""

    def __init__(self, config: GeneratorConfig):
        if not config.snapshot:
            raise ValueError("a perturbation source needs a generator with the snapshot "
                             "option")
        self.config = config
        golden = config.golden()
        self.lanes, self.width = golden.values_per_cycle, golden.width
        super().__init__({"control": In(SnapshotSignature()),
                          "out": Out(stream.Signature(self.lanes * self.width))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = generator_for(self.config)
        m.d.comb += [core.save.eq(self.control.save), core.restore.eq(self.control.restore)]
        if isinstance(self.config, PregenConfig):      # the pool: one endless perturbation
            m.d.comb += [core.start.eq(core.idle),
                         core.length.eq((1 << len(core.length)) - 1)]
        m.d.comb += [self.out.payload.eq(core.out.payload), self.out.valid.eq(core.offered),
                     core.out.ready.eq(self.out.ready)]
        return m
