"""The attention link's build configurations: the scores reorder buffer's
(:class:`ReorderConfig`) and the link's on an engine's output (:class:`LinkConfig`: the
buffer's fields, its job queue's depth and its asynchronous FIFO's).

Torch- and Amaranth-free. The defaults are MiniLM's link: a 64 x 8 engine's scores of 128
queries x 128 keys into a 10-lane softmax unit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from zoforge.config import Config, IntRange, OneOf, param

__all__ = ["ReorderConfig", "LinkConfig", "MAX_ROWS", "MAX_LEN", "MAX_QUEUE", "FIFO_DEPTHS",
           "MAX_SOURCES"]

#: The most query rows a job may have (M); 4096 x 1024 int32 a bank is 16 MiB already.
MAX_ROWS = 4096
#: The longest row (keys, L): the softmax unit's ``MAX_LEN``.
MAX_LEN = 1024
#: The most job entries a link queues ahead of its frames.
MAX_QUEUE = 64
#: Most sources a softmax unit's input selector takes (six engines' links and the DDR, with
#: room; :class:`~zoforge.hw.link.select.FrameSelect`).
MAX_SOURCES = 16
#: The asynchronous FIFO's depths (Amaranth's ``AsyncFIFO``: a power of two; 4 or more).
FIFO_DEPTHS = tuple(1 << k for k in range(2, 11))


def _bits(count: int) -> int:
    """Bits of an index below ``count`` (0 for a count of 1)."""
    return (count - 1).bit_length()


@dataclass(frozen=True)
class ReorderConfig(Config):
    """The engine's tile ``rows`` x ``cols`` (R x C), the softmax unit's ``lanes``, jobs of
    at most ``max_rows`` queries (M) x ``max_len`` keys (L)."""

    kind: ClassVar[str] = "reorder"

    rows: int = param(64, "engine array rows R (rows of a tile)", IntRange(1, 64))
    cols: int = param(8, "engine array columns C (int32 lanes of an input beat)",
                      IntRange(1, 64))
    lanes: int = param(10, "softmax unit lanes (int32 lanes of an output beat)",
                       IntRange(1, 64))
    max_rows: int = param(128, "most query rows M a job", IntRange(1, MAX_ROWS))
    max_len: int = param(128, "most keys L a row", IntRange(1, MAX_LEN))

    @property
    def memories(self) -> int:
        """P: the 32-bit memories of the buffer, the power of two >= max(C, lanes); key k of
        a row lives in memory ``k mod P``, word ``k div P``."""
        return 1 << _bits(max(self.cols, self.lanes))

    @property
    def key_bits(self) -> int:
        """log2 P: the bits of ``k mod P``."""
        return _bits(self.memories)

    @property
    def word_bits(self) -> int:
        """Bits of a word's index within a row: ``ceil(max_len / P)`` words."""
        return _bits(-(-self.max_len // self.memories))

    @property
    def row_bits(self) -> int:
        """Bits of a row's index (``max_rows`` rows)."""
        return _bits(self.max_rows)

    @property
    def depth(self) -> int:
        """Words of each memory: two banks of ``2^row_bits`` rows of ``2^word_bits`` words
        (address ``Cat(word, row, bank)``)."""
        return 2 << (self.row_bits + self.word_bits)

    @property
    def m_bits(self) -> int:
        """Bits of the job's M (up to ``max_rows``)."""
        return self.max_rows.bit_length()

    @property
    def l_bits(self) -> int:
        """Bits of the job's L (up to ``max_len``)."""
        return self.max_len.bit_length()

    def in_beats(self, m: int, length: int) -> int:
        """Input beats of a job: ``ceil(L / C)`` column panels of ``ceil(M / R)`` tiles of R
        rows."""
        return -(-length // self.cols) * -(-m // self.rows) * self.rows

    def out_beats(self, m: int, length: int) -> int:
        """Output beats of a job: M rows of ``ceil(L / lanes)``."""
        return m * -(-length // self.lanes)


@dataclass(frozen=True)
class LinkConfig(ReorderConfig):
    """The link on one engine's output (:class:`zoforge.hw.link.path.ScoresLink`): the
    reorder buffer's fields (:class:`ReorderConfig`), ``queue_depth`` job entries queued
    ahead of the engine's frames, and the asynchronous FIFO's ``fifo_depth`` output beats
    into the softmax units' clock domain."""

    kind: ClassVar[str] = "link"

    queue_depth: int = param(4, "job entries (route, M, L) queued ahead of the frames",
                             IntRange(1, MAX_QUEUE))
    fifo_depth: int = param(16, "beats of the asynchronous FIFO into the softmax domain",
                            OneOf(FIFO_DEPTHS))

    @property
    def reorder(self) -> ReorderConfig:
        """The reorder buffer's configuration (the shared fields)."""
        return ReorderConfig(rows=self.rows, cols=self.cols, lanes=self.lanes,
                             max_rows=self.max_rows, max_len=self.max_len)
