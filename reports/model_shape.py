"""The fine-tuned model and the step whose cost is modelled (issue 20): MiniLM's first
``blocks`` encoder blocks, the batch, the LoRA-FA adapters and the queries per step
(:class:`ModelShape`, every field checked at construction; :func:`model_shape` from keyword
fields)."""
from __future__ import annotations

from dataclasses import dataclass

from zoforge.errors import ConfigError, check_int_range
from zoforge.golden.zolayer import Formats
from zoforge.hw.engine.config import MAX_DIM

__all__ = ["MAX_BLOCKS", "ATTENTION_MAPS", "ModelShape", "model_shape"]

MAX_BLOCKS = 6                         # all-MiniLM-L6-v2's encoder blocks
ATTENTION_MAPS = ("query", "value", "key", "attn_out")   # adapted first: query, value


@dataclass(frozen=True)
class ModelShape:
    """The fine-tuned model and the step: MiniLM's first ``blocks`` encoder blocks
    (hidden, ffn, heads), ``batch`` sequences of ``seq_len`` tokens (tokens M = batch x
    seq_len), LoRA-FA rank ``rank`` on ``adapted`` attention maps per block (query, value,
    key, attn_out in that order), a linear head of ``classes``, ``queries`` q per step."""

    blocks: int = 6
    seq_len: int = 128
    batch: int = 8
    rank: int = 8
    adapted: int = 2
    queries: int = 2
    hidden: int = 384
    ffn: int = 1536
    heads: int = 12
    classes: int = 2

    def __post_init__(self):
        check_int_range("blocks", self.blocks, 1, MAX_BLOCKS)
        check_int_range("seq_len", self.seq_len, 1, 4096)
        check_int_range("batch", self.batch, 1, 4096)
        check_int_range("rank", self.rank, 1, 1024)
        check_int_range("adapted", self.adapted, 1, len(ATTENTION_MAPS))
        check_int_range("queries", self.queries, 1, Formats.MAX_QUERIES)
        check_int_range("hidden", self.hidden, 1, 4096)
        check_int_range("ffn", self.ffn, 1, MAX_DIM)
        check_int_range("heads", self.heads, 1, self.hidden)
        check_int_range("classes", self.classes, 1, 4096)
        if self.hidden % self.heads:
            raise ConfigError("heads", f"a divisor of hidden = {self.hidden}", self.heads)
        if self.tokens > 4096:
            raise ConfigError("batch", f"at most {4096 // self.seq_len} with seq_len "
                              f"{self.seq_len} (tokens batch x seq_len <= 4096)", self.batch)

    @property
    def tokens(self) -> int:
        return self.batch * self.seq_len

    @property
    def adapters(self) -> int:
        """J: adapters in the model."""
        return self.blocks * self.adapted


def model_shape(**fields) -> ModelShape:
    """A :class:`ModelShape` from keyword fields (an unknown name is a ConfigError)."""
    names = ModelShape.__dataclass_fields__
    for name in fields:
        if name not in names:
            raise ConfigError("model shape field", "one of " + ", ".join(names), name)
    return ModelShape(**fields)
