"""The ZO layer's tiling and on-chip memories (``amaranth.lib.memory``): shape, depth and port
signatures of each, for the top (which holds them) and the blocks that use their ports.

The tiling (:func:`layer_tiling`, see :mod:`zoforge.hw.pe.tiles`): transposed products,
weight panels of R features on the array's rows (16-bit operands, staged in two banks
``stage``), activation tiles of C tokens on its columns (int8: X, or U = requant(X·A) in a
LoRA-FA branch), every activation resident before a compute job starts.

Addresses: word-ordered memories (``master``, ``update_accumulator``, ``w_frozen``,
``a_frozen``) by the word's index in :class:`~.walk.PanelWalk` order; ``stage`` ``Cat(k,
bank)``; ``x_buffer`` ``Cat(k, tile)``; ``u_buffer`` ``Cat(feature, tile)``;
``result_buffer`` ``Cat(row, bank)``; ``init_buffer`` ``Cat(row, tile, panel)``.
"""
from __future__ import annotations

from amaranth import signed
from amaranth.lib import data

from zoforge.golden.zolayer.config import Formats, ZoLayerConfig
from zoforge.hw.pe.tiles import Buffer, Tiling, address_bits

__all__ = ["layer_tiling", "layer_buffers", "trained_rows"]


def trained_rows(config: ZoLayerConfig) -> int:
    """K_t limit: rows of the trained matrix T (r in lora-fa, K in full)."""
    return config.max_r if config.mode == "lora-fa" else config.max_k


def layer_tiling(config: ZoLayerConfig) -> Tiling:
    return Tiling(rows=config.rows, cols=config.cols, weights_on="a",
                  panel_words=max(config.max_k, trained_rows(config)),
                  tiles=config.max_m // config.cols, weight_bits=Formats.WEIGHT_BITS,
                  act_bits=Formats.ACT_BITS)


def layer_buffers(config: ZoLayerConfig, z_width: int) -> dict[str, Buffer]:
    """The memories of a layer (``z_width``: the generator's value width), by submodule
    name; the LoRA-FA ones only in that mode."""
    R, C = config.rows, config.cols
    tiling = layer_tiling(config)
    panels = config.max_n // R
    t_words = panels * trained_rows(config)

    def words(bits: int, doc: str, depth: int = t_words) -> Buffer:
        return Buffer(data.ArrayLayout(signed(bits), R), depth, doc)

    buffers = {
        "x_buffer": tiling.act_buffer(config.max_k, "token (activation) buffer"),
        "master": words(Formats.MASTER_BITS, "trained matrix master copy, 24-bit"),
        "update_accumulator": words(Formats.accumulator_bits(z_width),
                                    "update accumulator D"),
        "stage": tiling.weight_banks("double-buffered staging of the perturbed weight "
                                     "panel"),
        "result_buffer": tiling.result_banks("double-buffered result tile buffer"),
    }
    if config.mode == "lora-fa":
        buffers.update({
            "w_frozen": words(Formats.ACT_BITS, "frozen W", panels * config.max_k),
            "a_frozen": words(Formats.ACT_BITS, "frozen A",
                              (config.max_r // R) * config.max_k),
            "u_buffer": tiling.act_buffer(config.max_r, "U = requant(X·A)"),
            "init_buffer": Buffer(tiling.result_row(),
                                  (panels << tiling.tile_bits) << address_bits(R),
                                  "XW, the branches' init"),
        })
    return buffers
