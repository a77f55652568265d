"""The GEMM engine's build configuration (design ``engine``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from zoforge.config import Config, IntRange, param
from zoforge.errors import ConfigError, check_int_range

__all__ = ["EngineConfig", "MAX_PARAM_WORDS", "MAX_DIM", "DIM_BITS"]

MAX_PARAM_WORDS = 1024   # words per parameter region (bias, multiplier, shift)
MAX_DIM = 1 << 15        # largest buffer dimension (M rows, K depth)
DIM_BITS = 16            # width of the M, K, N registers


@dataclass(frozen=True)
class EngineConfig(Config):
    """An R x C systolic array with its X, W and result buffers sized for M, K and N.

    ``pack`` k-steps of an X panel (R rows) travel in one input-stream beat, so the input
    stream is ``8 * pack * max(R, C)`` bits wide; a W beat carries ``w_beat_words`` words of
    ``pack`` k-steps of the panel's C columns (``max(1, R // C)``, written one a cycle);
    ``paired`` puts each two rows of a column on one
    packed multiplier (:class:`~zoforge.hw.pe.array.SystolicArray`: the same products,
    R / 2 cycles less of skew per job); ``max_n`` is limited by the per-column parameter
    tables (``MAX_PARAM_WORDS`` words, ``2^ceil(log2 C)`` per row of C columns); ``gelu``
    adds the GELU job mode (:mod:`.gelu_path`).
    """

    kind: ClassVar[str] = "engine"

    rows: int = param(8, "array rows R", IntRange(1, 64))
    cols: int = param(8, "array columns C", IntRange(1, 64))
    pack: int = param(2, "k-steps per input-stream beat (the stream is 8*pack*max(R,C) bits "
                         "wide)", IntRange(1, 8))
    max_m: int = param(256, "X buffer rows (M limit), at least R", IntRange(1, MAX_DIM))
    max_k: int = param(256, "K limit (buffer depth)", IntRange(1, MAX_DIM))
    max_n: int = param(256, "N limit (per-column parameter tables), at least C",
                       IntRange(1, MAX_PARAM_WORDS * 64))
    paired: bool = param(False, "rows in pairs on one multiplier: two INT8 products per "
                                "DSP48E2 (Xilinx WP486); R even")
    gelu: bool = param(False, "the GELU job mode (CTRL bit gelu): requantize to int16, "
                              "i-GELU, requantize per column to int8 on the output path "
                              "(zoforge.golden.engine_gelu)")

    def check(self) -> None:
        check_int_range("--max-m", self.max_m, self.rows, MAX_DIM)
        check_int_range("--max-n", self.max_n, self.cols, self.max_n_limit)
        if self.paired and self.rows % 2:
            raise ConfigError("rows", "even with --paired (rows share multipliers in pairs)",
                              self.rows)

    @property
    def multipliers(self) -> int:
        """The array's multipliers (DSP blocks): R x C, or R x C / 2 when paired."""
        return (self.rows // 2 if self.paired else self.rows) * self.cols

    @property
    def max_n_limit(self) -> int:
        return (MAX_PARAM_WORDS >> (self.cols - 1).bit_length()) * self.cols

    @property
    def in_bytes(self) -> int:
        """Bytes per input-stream beat."""
        return self.pack * max(self.rows, self.cols)

    @property
    def w_beat_words(self) -> int:
        """W buffer words (``pack`` k-steps of C columns each) per input-stream beat."""
        return max(1, self.rows // self.cols)

    @property
    def m_tiles(self) -> int:
        """Row tiles (X panels) that fit the X buffer."""
        return -(-self.max_m // self.rows)

    @property
    def n_tiles(self) -> int:
        """Column tiles (W panels) that fit the parameter tables."""
        return -(-self.max_n // self.cols)

    @property
    def panel_words(self) -> int:
        """Buffer words of one panel at the largest K (``pack`` k-steps per word)."""
        return -(-self.max_k // self.pack)
