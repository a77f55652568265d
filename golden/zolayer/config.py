"""The ZO training layer's configuration (design ``zo-layer``) and its number formats.

A layer configuration is the array geometry, the buffer capacities, the mode (``lora-fa``:
``Y = X·W + (X·A)·B`` with B trained; ``full``: ``Y = X·W`` with W trained) and the
perturbation generator. There is one variant per generator strategy (tag ``strategy``); its
generator fields are the generator configuration's own (same names, help and checks), so
``zoforge cosim zo-layer --strategy pregen --pool-size 1023`` reads like ``zoforge cosim rng``.

Formats (:class:`Formats`; the golden model's docstring says how they are used):

* activations and frozen weights: int8; the trainable operand fed to the array: int16
  (``WEIGHT_BITS``; a DSP48E2 multiplies 27 x 18, so int8 x int16 costs one DSP);
* the trainable master copy: signed ``MASTER_BITS`` = 24 bits with ``MASTER_FRAC`` = 8
  fractional bits below the operand's LSB (operand = master >> 8);
* projected gradients g: signed ``GRAD_BITS`` = 16; at most ``MAX_QUERIES`` = 16 queries per
  step; the update accumulator D holds ``sum_i g_i z_i`` exactly in ``accumulator_bits``;
* the learning rate: ``eta / q = eta_mult * 2^-eta_shift`` (``ETA_MULT_BITS`` = 16 unsigned,
  ``eta_shift`` 0..``ETA_SHIFT_MAX``); the perturbation scale ``eps = 2^-eps_shift``
  (0..``EPS_SHIFT_MAX``), a shift of the generator's integer values.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from zoforge.config import Config, IntRange, OneOf, param
from zoforge.errors import ConfigError, check_choice
from zoforge.golden.engine_widths import SHIFT_MAX
from zoforge.golden.rng import GENERATOR_CONFIGS, GeneratorConfig

__all__ = ["ZoLayerConfig", "LAYER_CONFIGS", "MODES", "BRANCH_LANES", "Formats", "layer_config",
           "padded_classes"]

MODES = ("lora-fa", "full")
#: Allowed ``branch_lanes``: 1 (one branch per job) or an even power of two.
BRANCH_LANES = (1, 2, 4, 8, 16, 32)


class Formats:
    """Number formats of the layer (one source for the golden model and the hardware)."""

    ACT_BITS = 8            # activations X, frozen W and A, the LoRA input U = requant(X·A)
    WEIGHT_BITS = 16        # the (perturbed) trainable operand fed to the array
    MASTER_BITS = 24        # trainable master copy
    MASTER_FRAC = 8         # master LSBs below the operand's LSB
    GRAD_BITS = 16          # projected gradients g_i (signed)
    MAX_QUERIES = 16        # queries per step the update accumulator is sized for
    ETA_MULT_BITS = 16      # eta / q = eta_mult * 2^-eta_shift
    ETA_SHIFT_MAX = SHIFT_MAX   # (the requantizer's shift: one rounding shifter design)
    EPS_SHIFT_MAX = 31      # perturbation = z >> eps_shift
    MAX_Z_BITS = 24         # generator values: D * eta_mult stays below 2^63

    @classmethod
    def accumulator_bits(cls, z_width: int) -> int:
        """Bits of D = sum of up to MAX_QUERIES products g_i * z_i (never overflows)."""
        return cls.GRAD_BITS + z_width + (cls.MAX_QUERIES - 1).bit_length()



def padded_classes(classes: int, rows: int) -> int:
    """The last layer's width: ``classes`` rounded up to a multiple of ``rows``."""
    return -(-classes // rows) * rows


@dataclass(frozen=True)
class ZoLayerConfig(Config):
    """Array geometry, buffer capacities and mode of a ZO training layer; the generator's
    fields come with each variant (see :data:`LAYER_CONFIGS`).

    Features (N, and the rank r) are tiled by the array's R rows and tokens (M) by its C
    columns, so ``max_n`` and ``max_r`` are multiples of R and ``max_m`` of C; the generator
    must deliver at least R values per cycle (the pre-generated pool exactly R). With
    ``branch_lanes`` B > 1 (full mode) the rows hold B branches of F = R/B features each
    (:attr:`features_per_word`; ``max_n`` a multiple of F, ``max_k`` of B): see
    :mod:`zoforge.golden.zolayer.model`.
    """

    kind: ClassVar[str] = "zo-layer"
    tag: ClassVar[str] = "strategy"
    generator_type: ClassVar[type[GeneratorConfig]]

    rows: int = param(4, "array rows R (features per tile)", IntRange(1, 32), kw_only=True)
    cols: int = param(4, "array columns C (tokens per tile)", IntRange(1, 32), kw_only=True)
    mode: str = param("lora-fa", "lora-fa (B trained, W and A frozen) or full (W trained)",
                      OneOf(MODES), kw_only=True)
    max_m: int = param(64, "token buffer rows (M limit), a multiple of C",
                       IntRange(1, 4096), kw_only=True)
    max_k: int = param(64, "input features (K limit)", IntRange(1, 4096), kw_only=True)
    max_n: int = param(64, "output features (N limit), a multiple of R", IntRange(1, 4096),
                       kw_only=True)
    max_r: int = param(16, "LoRA rank limit, a multiple of R (lora-fa)", IntRange(1, 1024),
                       kw_only=True)
    branch_lanes: int = param(1, "branches side by side on the array's rows: 1, or 2 (a "
                              "query's + and - branches), 4, 8 ... (that many / 2 queries); "
                              "for a full-mode layer narrower than the array (N < R)",
                              OneOf(BRANCH_LANES), kw_only=True)

    def check(self) -> None:
        if self.rows % self.branch_lanes:
            raise ConfigError("branch_lanes", f"a divisor of rows = {self.rows}",
                              self.branch_lanes)
        if self.max_n * self.branch_lanes >= 1 << 16:     # the array's row lanes, 16 bits
            raise ConfigError("max_n", f"below {(1 << 16) // self.branch_lanes} with "
                              f"branch_lanes = {self.branch_lanes}", self.max_n)
        if self.branch_lanes > 1 and self.mode != "full":
            raise ConfigError("branch_lanes", "1 in lora-fa mode (only a full-mode layer "
                              "puts branches side by side)", self.branch_lanes)
        for field, value, unit, name in (("max_m", self.max_m, self.cols, "cols"),
                                        ("max_k", self.max_k, self.branch_lanes,
                                         "branch_lanes"),
                                        ("max_n", self.max_n, self.features_per_word,
                                         "rows / branch_lanes"),
                                        ("max_r", self.max_r, self.rows, "rows")):
            if value % unit:
                raise ConfigError(field, f"a multiple of {name} = {unit}", value)
        lanes = self.generator().golden().values_per_cycle
        if self.variant == "pregen" and lanes != self.rows:
            raise ConfigError("banks", f"equal to rows = {self.rows} (one pool value "
                              "per array row and cycle)", lanes)
        width = self.generator().golden().width
        if width > Formats.MAX_Z_BITS:
            raise ConfigError("bits", f"a generator whose values have at most "
                              f"{Formats.MAX_Z_BITS} bits (these have {width})", self.bits)
        if lanes < self.rows:
            raise ConfigError("n_rng", f"at least rows = {self.rows} (one value per "
                              "array row and cycle)", lanes)

    @property
    def features_per_word(self) -> int:
        """F = R / branch_lanes: the features of one word of T (and of a weight panel)."""
        return self.rows // self.branch_lanes

    @property
    def queries_per_job(self) -> int:
        """Queries whose branches one ``branch`` job computes side by side."""
        return max(1, self.branch_lanes // 2)

    def generator(self) -> GeneratorConfig:
        """The perturbation generator's configuration (with save/restore ports)."""
        names = {f.name for f in dataclasses.fields(self.generator_type)} - {"snapshot"}
        return self.generator_type(**{n: getattr(self, n) for n in names}, snapshot=True)


#: Generator defaults that differ inside a layer (the pool must have R = 4 banks; a
#: Gaussian array as wide as the rows).
_DEFAULTS = {"pregen": {"banks": 4}, "gaussian": {"n_rng": 4}}


def _variant(generator_type: type[GeneratorConfig]) -> type[ZoLayerConfig]:
    """The layer configuration for one generator: its fields copied (without snapshot)."""
    strategy = generator_type.variant
    fields = []
    for f in dataclasses.fields(generator_type):
        if f.name == "snapshot":
            continue
        default = _DEFAULTS.get(strategy, {}).get(f.name, f.default)
        fields.append((f.name, f.type, dataclasses.field(default=default,
                                                         metadata=f.metadata)))
    name = f"ZoLayer{generator_type.__name__.removesuffix('Config')}Config"
    cls = dataclasses.make_dataclass(
        name, fields, bases=(ZoLayerConfig,), frozen=True,
        namespace={"variant": strategy, "generator_type": generator_type,
                   "__doc__": f"ZO layer with the {strategy} generator.",
                   "__module__": __name__})
    return cls


#: The layer's configuration types, by strategy.
LAYER_CONFIGS = {strategy: _variant(cls) for strategy, cls in GENERATOR_CONFIGS.items()}


def layer_config(strategy: str = "onthefly", **fields) -> ZoLayerConfig:
    """The layer configuration for ``strategy`` with ``fields`` (defaults for the rest)."""
    check_choice("strategy", strategy, LAYER_CONFIGS)
    return LAYER_CONFIGS[strategy](**fields)
