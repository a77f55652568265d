"""The signatures that join the array's blocks to a design's control (``amaranth.lib.wiring``,
from the driver's point of view).

* :class:`JobSignature`: the job the tile sequencers (feeder, output stage) run, driven by
  the design's control;
* :class:`PanelSignature`: which weight panels are loaded, driven by the design's loader
  or panel fetch, read and released by the feeder;
* :class:`ModeSignature`: the requantizer's configuration inputs
  (:class:`~.requant.RequantStream`), as the design's control drives them.
"""
from __future__ import annotations

from amaranth import unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.golden.engine_widths import MULT_BITS, SHIFT_BITS

from .tiles import Tiling

__all__ = ["JobSignature", "PanelSignature", "ModeSignature"]


class JobSignature(wiring.Signature):
    """A job of tiles: ``start`` (one cycle; the sequencers clear their state), ``busy``
    (from the cycle after ``start`` until the job's end) and the dimensions ``m``
    (activations), ``k`` (k-steps), ``n`` (weights) of ``dim_bits`` each."""

    def __init__(self, dim_bits: int):
        self.dim_bits = dim_bits
        super().__init__({"start": Out(1), "busy": Out(1), "m": Out(dim_bits),
                          "k": Out(dim_bits), "n": Out(dim_bits)})

    def __eq__(self, other):
        return type(other) is type(self) and other.dim_bits == self.dim_bits

    def __repr__(self):
        return f"JobSignature({self.dim_bits})"


class PanelSignature(wiring.Signature):
    """Loaded operands (the supplier's view): ``w_banks`` weight banks holding a complete
    panel, not yet released; the feeder pulses ``w_release`` when it is done with the older
    one. With :attr:`~.tiles.Tiling.acts_arrive`, ``x_panels`` counts the job's complete
    activation tiles."""

    def __init__(self, tiling: Tiling):
        members = {"w_banks": Out(2), "w_release": In(1)}
        if tiling.acts_arrive:
            members["x_panels"] = Out(tiling.tile_bits + 1)
        super().__init__(members)


class ModeSignature(wiring.Signature):
    """The requantizer's output mode: ``bias_en``, ``per_channel``, ``raw``, ``relu`` and the
    per-tensor ``tensor_mult`` / ``tensor_shift``."""

    def __init__(self):
        super().__init__({"bias_en": Out(1), "per_channel": Out(1), "raw": Out(1),
                          "relu": Out(1), "tensor_mult": Out(unsigned(MULT_BITS)),
                          "tensor_shift": Out(unsigned(SHIFT_BITS))})
