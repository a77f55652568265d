"""The training configuration (one flat record; ``zoforge train`` flags map 1:1 onto it).

``model``: a Hugging Face model folder or name, ``None`` for the default all-MiniLM-L6-v2,
or ``"tiny"`` for the small random BERT of the tests. ``data``: a labelled CSV/JSONL file,
``None`` for the default Rotten Tomatoes snippets. ``split_seed`` fixes the data splits,
``seed`` the batches, the LoRA A matrices and the perturbation source.

Constructing one validates it strictly: every value has its field's type (``"no"`` is not a
boolean, ``1.5`` not an integer, ``5`` not a model name; ``None`` only where the default is),
every number its range (``--threads`` at most :data:`MAX_THREADS`, ``--lr`` and ``--eps`` at
most :data:`MAX_STEP_SIZE`), each a one-line :class:`ConfigError` naming the flag. Limits that
depend on the model or the data (``--num-layers``, ``--max-len``, classes) are checked when
they are loaded, before any work. :func:`inapplicable` finds options given for a method,
perturbation or trainable that does not use them.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from zoforge.errors import ConfigError, check_choice, check_int_range
from zoforge.golden.rng import GaussianConfig, PregenConfig
from zoforge.golden.zo.optimizers import METHODS
from zoforge.golden.zo.perturbation import SOURCES, make_perturbation
from zoforge.golden.zolayer import Formats, ZoLayerConfig, layer_config
from zoforge.golden.zolayer.network import padded_classes

__all__ = ["TrainConfig", "TRAINABLE_KINDS", "HEAD_INITS", "CHOICES", "RESUME_FREE",
           "MAX_THREADS", "MAX_STEP_SIZE", "APPLIES_TO", "inapplicable"]

TRAINABLE_KINDS = ("head", "lora-fa", "full", "hw-mlp")
HARDWARE_METHOD = "hw-prge"         # the ZO layer's integer step (golden/zo/hwmlp.py)
HEAD_INITS = ("zero", "prompt")
#: The allowed values of the fields that take one of a list (the one list of each).
CHOICES = {"method": METHODS + (HARDWARE_METHOD,), "perturbation": tuple(SOURCES), "trainable": TRAINABLE_KINDS,
           "head_init": HEAD_INITS}
# Fields that may change between a run and its resumption.
RESUME_FREE = ("steps", "out", "eval_every", "checkpoint_every", "cache_dir", "progress",
               "threads")
#: Most torch CPU threads (far more than any speed-up; torch crashes with tens of thousands).
MAX_THREADS = 256
#: Largest --lr and --eps (a step or perturbation scale beyond it only overflows).
MAX_STEP_SIZE = 1e6
#: Fields that only some choices use: field -> (the choosing field, the values that use it).
APPLIES_TO = {
    "n_rng": ("perturbation", ("pezo-onthefly", "uniform-naive", "gaussian-hw")),
    "bits": ("perturbation", ("pezo-onthefly", "uniform-naive", "pezo-pregen", "gaussian-hw")),
    "terms": ("perturbation", ("gaussian-hw",)),
    **{f: ("perturbation", ("pezo-pregen",)) for f in ("pool_size", "banks", "pool_seed")},
    "chunk": ("perturbation", ("uniform-scaled",)),
    **{f: ("method", ("prge",)) for f in ("inner", "outer", "dual")},
    **{f: ("method", ("hizoo", "pefoo", "pefoo-l")) for f in ("hessian_smooth", "d_min",
                                                              "d_max")},
    "layer_steps": ("method", ("pefoo-l",)),
    **{f: ("trainable", ("lora-fa",)) for f in ("lora_layers", "rank", "alpha")},
    **{f: ("trainable", ("hw-mlp",)) for f in ("hidden", "rows", "cols")},
    "head_init": ("trainable", ("head", "lora-fa", "full")),
    "hw_arith": ("trainable", ("head", "lora-fa")),
}
_TYPE_TEXT = {"int": "an integer", "float": "a number", "bool": "true or false",
              "str": "a string"}


@dataclass
class TrainConfig:
    method: str = "mezo"
    perturbation: str = "gaussian"
    trainable: str = "head"
    queries: int = 1
    batch: int = 16
    lr: float = 1e-3
    eps: float = 1e-2
    steps: int = 1000
    seed: int = 0
    # perturbation source parameters
    n_rng: int | None = None
    bits: int | None = None
    terms: int = GaussianConfig.terms
    pool_size: int = PregenConfig.pool_size
    banks: int = PregenConfig.banks
    pool_seed: int = PregenConfig.pool_seed
    chunk: int = 0
    # P-RGE
    inner: bool = True
    outer: bool = True
    dual: bool = False
    # HiZOO / PeFoo / PeFoo-L
    hessian_smooth: float = 0.01
    d_min: float = 0.1
    d_max: float = 1e4
    layer_steps: int = 10
    # model
    model: str | None = None
    num_layers: int | None = None
    lora_layers: int = 1
    rank: int = 16
    alpha: float = 32.0
    head_init: str = "zero"
    hw_arith: bool = False
    # hw-mlp: the ZO-layer classifier (F -> hidden -> classes) on an R x C array
    hidden: int = 64
    rows: int = 4
    cols: int = 4
    # data
    data: str | None = None
    split_seed: int = 0
    n_train: int = 2000
    n_val: int = 500
    n_test: int = 1000
    max_len: int = 64
    # bookkeeping
    eval_every: int = 100
    checkpoint_every: int = 100
    out: str = "zo-run"
    cache_dir: str | None = None
    progress: bool = True
    threads: int = 1

    def __post_init__(self):
        self._check_types()
        for name, choices in CHOICES.items():
            check_choice("--" + name.replace("_", "-"), getattr(self, name), choices)
        for flag, value, low in (("--queries", self.queries, 1), ("--batch", self.batch, 1),
                                 ("--steps", self.steps, 0), ("--seed", self.seed, 0),
                                 ("--lora-layers", self.lora_layers, 1),
                                 ("--rank", self.rank, 1), ("--n-train", self.n_train, 2),
                                 ("--n-val", self.n_val, 2), ("--n-test", self.n_test, 2),
                                 ("--max-len", self.max_len, 2),
                                 ("--eval-every", self.eval_every, 1),
                                 ("--checkpoint-every", self.checkpoint_every, 1),
                                 ("--split-seed", self.split_seed, 0),
                                 ("--layer-steps", self.layer_steps, 1),
                                 ("--chunk", self.chunk, 0)):
            check_int_range(flag, value, low)
        check_int_range("--threads", self.threads, 1, MAX_THREADS)
        if self.num_layers is not None:
            check_int_range("--num-layers", self.num_layers, 1)
        for flag, value in (("--lr", self.lr), ("--eps", self.eps)):
            if not (math.isfinite(value) and 0 < value <= MAX_STEP_SIZE):
                raise ConfigError(flag, f"a finite number with 0 < value <= {MAX_STEP_SIZE:g}",
                                  value)
        for flag, value in (("--alpha", self.alpha), ("--d-min", self.d_min),
                            ("--d-max", self.d_max)):
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(flag, "a finite number > 0", value)
        if not (math.isfinite(self.hessian_smooth) and 0 < self.hessian_smooth <= 1):
            raise ConfigError("--hessian-smooth", "a number with 0 < value <= 1",
                              self.hessian_smooth)
        if self.d_min > self.d_max:
            raise ConfigError("--d-min", f"at most --d-max = {self.d_max:g}", self.d_min)
        for flag, value in (("--out", self.out), ("--model", self.model),
                            ("--data", self.data), ("--cache-dir", self.cache_dir)):
            if value is not None and not value.strip():
                raise ConfigError(flag, "a path (not empty)" if flag != "--model" else
                                  "a model folder or name (not empty)", repr(value))
        if self.batch > self.n_train:
            raise ConfigError("--batch", f"at most --n-train ({self.n_train})", self.batch)
        if self.dual and (self.method != "prge" or not (self.inner and self.outer)):
            raise ConfigError("--dual", "used only with --method prge and both loops on",
                              self.method)
        self.perturbation_source()          # checks the source's parameters
        if self.hw_arith and self.trainable in ("full", "hw-mlp"):
            raise ConfigError("--hw-arith", "used with --trainable head or lora-fa",
                              self.trainable)
        hardware = self.trainable == "hw-mlp"
        if hardware != (self.method == HARDWARE_METHOD):
            raise ConfigError("--method", f"{HARDWARE_METHOD} exactly when --trainable is "
                              "hw-mlp", f"{self.method} with {self.trainable}")
        if hardware:
            self._check_hardware()

    def _check_types(self) -> None:
        """Every value of its field's type (``None`` only where the field allows it)."""
        for field in dataclasses.fields(self):
            kinds = [k.strip() for k in field.type.split("|")]
            value = getattr(self, field.name)
            if value is None and "None" in kinds:
                continue
            kind = kinds[0]
            ok = {"int": isinstance(value, int) and not isinstance(value, bool),
                  "float": isinstance(value, (int, float)) and not isinstance(value, bool),
                  "bool": isinstance(value, bool), "str": isinstance(value, str)}[kind]
            if not ok:
                raise ConfigError("--" + field.name.replace("_", "-"), _TYPE_TEXT[kind] + (
                    " (or null)" if "None" in kinds else ""),
                    f"{value!r} of type {type(value).__name__}")

    def _check_hardware(self) -> None:
        check_int_range("--hidden", self.hidden, 0, 4096)
        if self.hidden % self.rows:
            raise ConfigError("--hidden", f"a multiple of --rows = {self.rows}", self.hidden)
        if self.batch % self.cols:
            raise ConfigError("--batch", f"a multiple of --cols = {self.cols} for "
                              "--trainable hw-mlp", self.batch)
        if self.hardware_generator() is None:
            raise ConfigError("--perturbation", "a hardware source (pezo-onthefly, "
                              "pezo-pregen, gaussian-hw) for --trainable hw-mlp",
                              self.perturbation)
        if self.queries > Formats.MAX_QUERIES:
            raise ConfigError("--queries", f"at most {Formats.MAX_QUERIES} for --method "
                              f"{HARDWARE_METHOD}", self.queries)
        self.layer_design(features=self.rows, classes=2)     # the array/generator checks

    def layer_design(self, features: int, classes: int) -> ZoLayerConfig:
        """The ZO layer configuration (design ``zo-layer``, full mode) that runs this
        ``hw-mlp`` classifier on ``features`` input features and ``classes`` classes: its
        array, its generator and buffers sized for the widest layer and the batch."""
        generator = self.hardware_generator()
        fields = {f.name: getattr(generator, f.name) for f in dataclasses.fields(generator)
                  if f.name != "snapshot"}
        widths = [features, *([self.hidden] if self.hidden else []),
                  padded_classes(classes, self.rows)]
        return layer_config(generator.variant, rows=self.rows, cols=self.cols, mode="full",
                            max_m=self.batch, max_k=max(widths[:-1]),
                            max_n=max(max(widths[1:]), self.rows), **fields)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def perturbation_source(self):
        """The configured :class:`~zoforge.golden.zo.perturbation.Perturbation` (fresh)."""
        return make_perturbation(self.perturbation, seed=self.seed, n_rng=self.n_rng,
                                 bits=self.bits, pool_size=self.pool_size, banks=self.banks,
                                 pool_seed=self.pool_seed, terms=self.terms, chunk=self.chunk)

    def hardware_generator(self):
        """The generator configuration the perturbation source is bit-exact with (its cost
        is what ``zoforge build --design rng`` reports), or None for a software source."""
        return self.perturbation_source().hardware()

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError("--config", "a JSON object with TrainConfig fields only",
                              ", ".join(unknown))
        return cls(**values)

    def default(self, name: str):
        """The default of field ``name``."""
        return next(f.default for f in dataclasses.fields(self) if f.name == name)

    def resume_key(self) -> dict:
        """The fields a checkpoint must match to be resumed."""
        return {k: v for k, v in self.to_dict().items() if k not in RESUME_FREE}


def inapplicable(cfg: TrainConfig, given) -> tuple[str, str, str] | None:
    """The first of the ``given`` fields (options the user gave) that ``cfg``'s method,
    perturbation or trainable does not use, with a value other than its default:
    ``(field, "--choosing-flag value", what it is used with)``; None if there is none."""
    for name in given:
        if name not in APPLIES_TO or getattr(cfg, name) == cfg.default(name):
            continue
        chooser, users = APPLIES_TO[name]
        chosen = getattr(cfg, chooser)
        if chosen not in users:
            flag = "--" + chooser.replace("_", "-")
            return name, f"{flag} {chosen}", " or ".join(f"{flag} {u}" for u in users)
    return None
