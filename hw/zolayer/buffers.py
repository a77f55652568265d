"""The ZO layer's tiling and on-chip memories (``amaranth.lib.memory``): shape, depth and port
signatures of each, for the top (which holds them) and the blocks that use their ports.

The tiling (:func:`layer_tiling`, see :mod:`zoforge.hw.pe.tiles`): transposed products,
weight panels of R features on the array's rows (16-bit operands, staged in two banks
``stage``), activation tiles of C tokens on its columns (int8: X, or U = requant(X·A) in a
LoRA-FA branch), every activation resident before a compute job starts.

The memories are named by :class:`Memory` (their submodule names). Addresses: word-ordered
memories (``master``, ``update_accumulator``, ``w_frozen``, ``a_frozen``) by the word's
index in :class:`~.walk.PanelWalk` order; ``stage`` ``Cat(k, bank)``; ``x_buffer`` ``Cat(word,
tile)``, a word P k-steps of C tokens (packed as a ``load_x`` beat, :mod:`.token_buffer`);
``u_buffer`` ``Cat(feature, tile)``; ``result_buffer`` ``Cat(row, bank)``;
``init_buffer`` ``Cat(row, tile, panel)``.
"""
from __future__ import annotations

from enum import StrEnum

from amaranth import signed
from amaranth.lib import data

from zoforge.golden.zolayer.config import Formats, ZoLayerConfig
from zoforge.hw.pe.tiles import Buffer, Tiling, address_bits, lut_ram_result_banks

from .registers import DIM_BITS
from .token_buffer import token_buffer

__all__ = ["Memory", "LORA_MEMORIES", "layer_tiling", "layer_buffers", "trained_rows"]


class Memory(StrEnum):
    """The layer's memories (the value is the submodule's name)."""

    MASTER = "master"                   # the trained matrix T's master copy
    ACCUMULATOR = "update_accumulator"  # the update accumulator D
    STAGE = "stage"                     # the perturbed weight panels, two banks
    X = "x_buffer"                      # tokens X
    RESULT = "result_buffer"            # result tiles, lut_ram_result_banks(R) banks
    W_FROZEN = "w_frozen"               # lora-fa: frozen W
    A_FROZEN = "a_frozen"               # lora-fa: frozen A
    U = "u_buffer"                      # lora-fa: U = requant(X·A)
    INIT = "init_buffer"                # lora-fa: XW, the branches' init


#: The memories that exist only in lora-fa mode.
LORA_MEMORIES = (Memory.W_FROZEN, Memory.A_FROZEN, Memory.U, Memory.INIT)


def trained_rows(config: ZoLayerConfig) -> int:
    """K_t limit: rows of the trained matrix T (r in lora-fa, K in full)."""
    return config.max_r if config.mode == "lora-fa" else config.max_k


def layer_tiling(config: ZoLayerConfig) -> Tiling:
    """The layer's tiling, with as many result banks as fit a LUT RAM of two banks' cost
    (:func:`~zoforge.hw.pe.tiles.lut_ram_result_banks`: 8 at R <= 4), so that shallow tiles
    (a LoRA-FA branch, K = r) follow each other at their depth, not at the banks'
    turnaround."""
    return Tiling(rows=config.rows, cols=config.cols, weights_on="a",
                  panel_words=max(config.max_k, trained_rows(config)),
                  tiles=config.max_m // config.cols, dim_bits=DIM_BITS,
                  weight_bits=Formats.WEIGHT_BITS, act_bits=Formats.ACT_BITS,
                  result_bank_count=lut_ram_result_banks(config.rows))


def layer_buffers(config: ZoLayerConfig, z_width: int) -> dict[Memory, Buffer]:
    """The memories of a layer (``z_width``: the generator's value width); the LoRA-FA ones
    (:data:`LORA_MEMORIES`) only in that mode."""
    R = config.rows
    lanes = max(R, config.cols)          # the streams' 32-bit lanes (ZoLayer.lanes)
    tiling = layer_tiling(config)
    panels = config.max_n // R
    t_words = config.max_n * trained_rows(config) // R    # R values a word (B k-steps x R/B)

    def words(bits: int, doc: str, depth: int = t_words) -> Buffer:
        return Buffer(data.ArrayLayout(signed(bits), R), depth, doc)

    buffers = {
        Memory.X: token_buffer(tiling, config.max_k, lanes, "token (activation) buffer, "
                               "packed"),
        Memory.MASTER: words(Formats.MASTER_BITS, "trained matrix master copy, 24-bit"),
        Memory.ACCUMULATOR: words(Formats.accumulator_bits(z_width), "update accumulator D"),
        Memory.STAGE: tiling.weight_banks("double-buffered staging of the perturbed weight "
                                          "panel"),
        Memory.RESULT: tiling.result_banks(f"result tile buffer, "
                                           f"{tiling.result_bank_count} banks"),
    }
    if config.mode == "lora-fa":
        buffers.update({
            Memory.W_FROZEN: words(Formats.ACT_BITS, "frozen W", panels * config.max_k),
            Memory.A_FROZEN: words(Formats.ACT_BITS, "frozen A",
                                   (config.max_r // R) * config.max_k),
            Memory.U: tiling.act_buffer(config.max_r, "U = requant(X·A)"),
            Memory.INIT: Buffer(tiling.result_row(),
                                (panels << tiling.tile_bits) << address_bits(R),
                                "XW, the branches' init"),
        })
    return buffers
