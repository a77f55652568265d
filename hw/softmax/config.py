"""The bus softmax unit's build configuration (design ``softmax``).

Torch- and Amaranth-free: the command line builds its flags from it. The golden's scales
(:data:`zoforge.golden.finetune.integer_ops.MIN_SCALE` and ``MAX_SCALE``) are written out
here for that reason; ``tests/test_softmax_bus.py`` pins them equal.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from zoforge.config import Config, FloatRange, IntRange, param

__all__ = ["SoftmaxConfig", "SCALES", "MAX_LEN", "ROW_BITS", "MINILM_MIN_SCALE"]

#: The golden's scales, ``MIN_SCALE`` to ``MAX_SCALE`` (integer_ops; pinned by a test).
SCALES = (2.0 ** -24, 2.0 ** -7)
#: The longest row a unit may be built for (its key-mask register's bits).
MAX_LEN = 1024
#: Width of the ROWS register: at most 2^16 - 1 rows a job.
ROW_BITS = 16
#: The default ``min_scale``: MiniLM's scores ``s_q s_k / sqrt(d)`` are 1.5e-4 to 1.5e-3
#: (docs/nonlinear-units.md); 2^-15 = 3.1e-5 leaves a factor of 5 below the finest, and
#: the constants' widths (``ln2`` 15 bits, ``b`` 17, ``c`` 32) give one 18 x 18 product a
#: lane for ``rem (b - rem)``.
MINILM_MIN_SCALE = 2.0 ** -15


@dataclass(frozen=True)
class SoftmaxConfig(Config):
    """The integer softmax unit with its bus interfaces: ``lanes`` scores a beat, rows of at
    most ``max_len`` keys, the constants of scores' scales ``min_scale`` to 2^-7."""

    kind: ClassVar[str] = "softmax"

    lanes: int = param(8, "scores a beat (the input stream is 32 x lanes bits wide, the "
                          "output 8 x lanes rounded up to 32)", IntRange(1, 64))
    max_len: int = param(128, "longest row L (keys; the key-mask register's bits)",
                         IntRange(1, MAX_LEN))
    min_scale: float = param(MINILM_MIN_SCALE, "finest scores' scale the unit's constants "
                             "hold (MiniLM's: 1.5e-4 to 1.5e-3)", FloatRange(*SCALES))

    @property
    def max_beats(self) -> int:
        """Beats of the longest row: ``ceil(max_len / lanes)``."""
        return -(-self.max_len // self.lanes)

    @property
    def mask_words(self) -> int:
        """32-bit words of the key mask: ``ceil(max_len / 32)``."""
        return -(-self.max_len // 32)

    @property
    def out_words(self) -> int:
        """32-bit words of an output beat (``lanes`` bytes, rounded up)."""
        return -(-self.lanes // 4)

    @property
    def length_bits(self) -> int:
        """Bits of the LENGTH register (and the keys left of a row): ``max_len``'s, and
        more than ``lanes + 1``'s (a beat's compare with L is never constant)."""
        return max(self.max_len.bit_length(), (self.lanes + 1).bit_length())

    def beats(self, length: int) -> int:
        """Beats of a row of ``length`` keys (in and out)."""
        return -(-length // self.lanes)
