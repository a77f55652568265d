"""The board-sized accelerator's configuration (design ``accelerator``) and its DSP count.

An accelerator is ``engines`` identical GEMM engines (:class:`~zoforge.hw.engine.config.
EngineConfig`, :meth:`AcceleratorConfig.engine_config`) and ``layers`` identical ZO layers
(:class:`~zoforge.golden.zolayer.ZoLayerConfig` with the on-the-fly generator,
:meth:`AcceleratorConfig.layer_config`) side by side; each unit keeps its own streams and
register file. ``gelu_engines`` of the engines carry the GELU job mode on their output path
(issue 32: a requantizer to int16, ``engine_cols`` lanes of i-GELU, a second requantizer to
int8; the schedule puts ``ffn_in``'s jobs only on them), and ``softmax_units`` integer softmax
units (``hw/nonlinear/softmax.py`` behind its own AXI4-Lite and AXI4-Stream ports, design
``softmax``: :class:`~zoforge.hw.softmax.config.SoftmaxConfig`,
:meth:`AcceleratorConfig.softmax_config`; raw int32 scores in, int8 P out) sit beside the
engines. With ``link`` (docs/link.md) every engine's output goes through an attention link
(:class:`~zoforge.hw.link.path.ScoresLink`, :meth:`AcceleratorConfig.link_config`) whose
scores side feeds softmax unit ``e mod softmax_units`` (:meth:`AcceleratorConfig.
link_unit`) through that unit's input selector (:class:`~zoforge.hw.link.select.
FrameSelect`, the DDR's stream its source 0): a linked scores job's int32 S never goes to
DDR, nor its softmax job's input. A field ``engine_X`` / ``layer_X`` / ``softmax_X`` /
``link_X`` is the unit's field ``X`` (same default, help and range: one source); the unit's own cross-field checks apply and name the
accelerator's field. ``paired`` (two INT8 products per DSP48E2, Xilinx WP486) is allowed
only on a board whose family has the DSP48E2 (:attr:`~zoforge.boards.registry.Board.
packs_int8_pairs`).

DSP blocks (:attr:`AcceleratorConfig.dsp`, one count per unit, :func:`engine_dsp`,
:func:`layer_dsp`): a unit's array multipliers (the engine's ``multipliers``: R·C, R·C/2
paired; a layer's R·C) plus its requantizer's two per output lane (C lanes) and, in a ZO
layer, the update unit's ``UPDATE_PRODUCTS`` per row (its operands in 16-bit chunks: the
28-bit D or z times the 24-bit scaled eta or g is 2 x 2 products). Yosys' estimate agrees:
engine 8x8 80 = 64 + 16, ZO layer 4x4 40 = 16 + 8 + 16 (docs/engine.md, docs/zo-layer.md).
A GELU engine adds :data:`GELU_PRODUCTS` a column (its i-GELU lane's 3, the second
requantizer's 2); a softmax unit :data:`SOFTMAX_PRODUCTS` a lane (:func:`softmax_dsp`;
yosys-estimate, docs/nonlinear-units.md: the i-GELU's 8 lanes 24 DSP48E2, the bus softmax
unit's 8 lanes 16 at MiniLM's scale 2^-15, the i-softmax's 24 at 2^-24).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from zoforge.boards.registry import get_board
from zoforge.config import Config, IntRange, NonBlank, OneOf, field_of, param
from zoforge.errors import ConfigError
from zoforge.golden.zolayer import LAYER_CONFIGS, MODES, ZoLayerConfig, layer_config
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.link.config import MAX_SOURCES, LinkConfig
from zoforge.hw.softmax.config import MINILM_MIN_SCALE, SoftmaxConfig

__all__ = ["AcceleratorConfig", "engine_dsp", "layer_dsp", "softmax_dsp", "REQUANT_PRODUCTS",
           "UPDATE_PRODUCTS", "GELU_PRODUCTS", "SOFTMAX_PRODUCTS", "MAX_UNITS", "STRATEGY"]

#: Most units of one kind (engines, ZO layers).
MAX_UNITS = 256
#: The ZO layers' perturbation generator (on-the-fly, as the fine-tuning's layers).
STRATEGY = "onthefly"
#: DSP products per output lane of the requantizer (``hw/pe/requant.py``: low and high half).
REQUANT_PRODUCTS = 2
#: DSP products per row of a ZO layer's update unit (``hw/zolayer/update.py``: 2 x 2 chunks).
UPDATE_PRODUCTS = 4
#: DSP products a column of a GELU engine adds: its i-GELU lane (``hw/nonlinear/gelu.py``: 3
#: a lane, yosys-estimate 24 for 8 lanes) and its second requantizer's :data:`REQUANT_PRODUCTS`.
GELU_PRODUCTS = 3 + REQUANT_PRODUCTS
#: DSP products a lane of a softmax unit (``hw/nonlinear/softmax.py``): ``e R`` one and
#: ``rem (b - rem)`` one for a unit made for scales of MiniLM's 2^-15 or coarser (``b`` 17
#: bits: one 18 x 18 product), two for finer ones (yosys-estimate: 16 and 24 for 8 lanes).
SOFTMAX_PRODUCTS = {"coarse": 2, "fine": 3}


def _unit_param(config_type: type[Config], name: str, **change):
    """A field that is ``config_type``'s field ``name``: its default, help and check."""
    field = next(f for f in dataclasses.fields(config_type) if f.name == name)
    return param(change.get("default", field.default), field.metadata["help"],
                 field.metadata["check"])


_LAYER = LAYER_CONFIGS[STRATEGY]


@dataclass(frozen=True)
class AcceleratorConfig(Config):
    """``engines`` GEMM engines and ``layers`` ZO layers on ``board`` (see the module
    docstring); :mod:`zoforge.hw.accel.plan` picks the sizes from the board's budget."""

    kind: ClassVar[str] = "accelerator"

    board: str = param("zcu102", "target board (its family decides --paired; the planner "
                                 "sizes the design to its budget)", NonBlank("a board name"))
    engines: int = param(1, "GEMM engines (identical, side by side)", IntRange(1, MAX_UNITS))
    engine_rows: int = _unit_param(EngineConfig, "rows")
    engine_cols: int = _unit_param(EngineConfig, "cols")
    paired: bool = param(True, "engine rows in pairs on one multiplier: two INT8 products "
                               "per DSP48E2 (Xilinx WP486); DSP48E2 boards only, engine rows "
                               "even")
    engine_max_m: int = _unit_param(EngineConfig, "max_m")
    engine_max_k: int = _unit_param(EngineConfig, "max_k")
    engine_max_n: int = _unit_param(EngineConfig, "max_n")
    layers: int = param(1, "ZO layers (identical, side by side)", IntRange(1, MAX_UNITS))
    layer_rows: int = _unit_param(_LAYER, "rows")
    layer_cols: int = _unit_param(_LAYER, "cols")
    layer_mode: str = param("lora-fa", "the ZO layers' mode: lora-fa (B trained) or full "
                                       "(W trained; needed for branch_lanes > 1)", OneOf(MODES))
    branch_lanes: int = _unit_param(_LAYER, "branch_lanes")
    layer_max_m: int = _unit_param(_LAYER, "max_m")
    layer_max_k: int = _unit_param(_LAYER, "max_k")
    layer_max_n: int = _unit_param(_LAYER, "max_n")
    layer_max_r: int = _unit_param(_LAYER, "max_r")
    gelu_engines: int = param(0, "engines with the GELU job mode on their output path "
                                 "(int16 requantizer, i-GELU lanes, int8 requantizer): "
                                 "ffn_in's jobs run on them (at most engines)",
                              IntRange(0, MAX_UNITS))
    softmax_units: int = param(0, "integer softmax units beside the engines (raw int32 "
                                  "scores in, int8 P out)", IntRange(0, MAX_UNITS))
    softmax_lanes: int = _unit_param(SoftmaxConfig, "lanes")
    softmax_max_len: int = _unit_param(SoftmaxConfig, "max_len")
    softmax_min_scale: float = _unit_param(SoftmaxConfig, "min_scale")
    link: bool = param(False, "attention links: each engine's Q·K^T scores streamed on chip "
                              "into a softmax unit (engine e to unit e mod softmax_units), "
                              "not through DDR; needs softmax_units >= 1")
    link_max_rows: int = _unit_param(LinkConfig, "max_rows", default=64)
    link_max_len: int = _unit_param(LinkConfig, "max_len")

    def check(self) -> None:
        board = get_board(self.board)
        if self.link and not self.softmax_units:
            raise ConfigError("link", "false unless softmax_units >= 1 (a link feeds a "
                              "softmax unit)", True)
        if self.link and self.links_per_unit > MAX_SOURCES - 1:
            raise ConfigError("softmax_units", f"at least {-(-self.engines // (MAX_SOURCES - 1))}"
                              f" with link (at most {MAX_SOURCES - 1} engines' links a unit)",
                              self.softmax_units)
        if self.link and self.link_max_len > self.softmax_max_len:
            raise ConfigError("link_max_len", f"1..{self.softmax_max_len} (softmax_max_len)",
                              self.link_max_len)
        if self.gelu_engines > self.engines:
            raise ConfigError("gelu_engines", f"0..{self.engines} (at most engines)",
                              self.gelu_engines)
        if self.paired and not board.packs_int8_pairs:
            raise ConfigError("paired", f"false on board {self.board} (family {board.family}: "
                              "no DSP48E2, so no two INT8 products per multiplier)", True)
        for prefix, build in (("engine_", self.engine_config),
                              ("engine_", lambda: self.engine_config(self.gelu_engines > 0)),
                              ("layer_", self.layer_config), ("softmax_", self.softmax_config),
                              ("link_", self.link_config if self.link else lambda: None)):
            try:
                build()
            except ConfigError as error:
                raise error.renamed(self._field_of(prefix, field_of(error))) from None

    def _field_of(self, prefix: str, unit_field: str) -> str:
        """The accelerator's field that sets a unit's field."""
        shared = {"paired": "paired", "branch_lanes": "branch_lanes", "mode": "layer_mode",
                  "n_rng": "layer_rows"}
        if prefix == "link_":
            shared = {"rows": "engine_rows", "cols": "engine_cols", "lanes": "softmax_lanes"}
        return shared.get(unit_field, prefix + unit_field)

    def engine_config(self, gelu: bool = False) -> EngineConfig:
        """The GEMM engine the accelerator replicates ``engines`` times, with the GELU job
        mode (``gelu``: the first ``gelu_engines`` of them) or without."""
        return _engine_config(self, bool(gelu))

    def softmax_config(self) -> SoftmaxConfig:
        """The one softmax unit the accelerator replicates ``softmax_units`` times."""
        return _softmax_config(self)

    def link_config(self) -> LinkConfig:
        """The attention link on each engine's output (with ``link``): the engine's R x C,
        the softmax unit's lanes, jobs of at most ``link_max_rows`` x ``link_max_len``."""
        return _link_config(self)

    def link_unit(self, engine: int) -> int:
        """The softmax unit engine ``engine``'s link feeds (``engine mod softmax_units``)."""
        return engine % self.softmax_units

    @property
    def links_per_unit(self) -> int:
        """The most engines' links one softmax unit takes (its selector's sources but the
        DDR's)."""
        return -(-self.engines // self.softmax_units) if self.softmax_units else 0

    def layer_config(self) -> ZoLayerConfig:
        """The one ZO layer the accelerator replicates ``layers`` times (on-the-fly
        generator with at least one lane per row: ``n_rng`` = 2^k - 1 >= rows, 31 at least)."""
        return _layer_config(self)

    @property
    def engine_dsp(self) -> int:
        """DSP blocks of one engine (:func:`engine_dsp`)."""
        return engine_dsp(self.engine_config())

    @property
    def layer_dsp(self) -> int:
        """DSP blocks of one ZO layer (:func:`layer_dsp`)."""
        return layer_dsp(self.layer_config())

    @property
    def gelu_dsp(self) -> int:
        """DSP blocks a GELU engine adds to a plain one (:data:`GELU_PRODUCTS` a column)."""
        return engine_dsp(self.engine_config(gelu=True)) - self.engine_dsp

    @property
    def softmax_dsp(self) -> int:
        """DSP blocks of one softmax unit (:func:`softmax_dsp`)."""
        return softmax_dsp(self.softmax_lanes, self.softmax_min_scale)

    @property
    def dsp(self) -> int:
        """DSP48E2 blocks of the whole accelerator: every unit's, counted once per unit."""
        return (self.engines * self.engine_dsp + self.layers * self.layer_dsp
                + self.gelu_engines * self.gelu_dsp + self.softmax_units * self.softmax_dsp)

    @property
    def array_multipliers(self) -> int:
        """The arrays' multipliers only (the DSPs that compute the MACs)."""
        return (self.engines * self.engine_config().multipliers
                + self.layers * self.layer_rows * self.layer_cols)


# The units an accelerator replicates, built (and validated) once per distinct accelerator:
# configurations are immutable values, and the price's search asks for them about a million
# times per MiniLM step (reports/accel_cost.py). A unit that fails its checks is not cached.
_UNITS_CACHED = 4096


@lru_cache(maxsize=_UNITS_CACHED)
def _engine_config(accel: AcceleratorConfig, gelu: bool) -> EngineConfig:
    return EngineConfig(rows=accel.engine_rows, cols=accel.engine_cols,
                        max_m=accel.engine_max_m, max_k=accel.engine_max_k,
                        max_n=accel.engine_max_n, paired=accel.paired, gelu=gelu)


@lru_cache(maxsize=_UNITS_CACHED)
def _softmax_config(accel: AcceleratorConfig) -> SoftmaxConfig:
    return SoftmaxConfig(lanes=accel.softmax_lanes, max_len=accel.softmax_max_len,
                         min_scale=accel.softmax_min_scale)


@lru_cache(maxsize=_UNITS_CACHED)
def _link_config(accel: AcceleratorConfig) -> LinkConfig:
    return LinkConfig(rows=accel.engine_rows, cols=accel.engine_cols, lanes=accel.softmax_lanes,
                      max_rows=accel.link_max_rows, max_len=accel.link_max_len)


@lru_cache(maxsize=_UNITS_CACHED)
def _layer_config(accel: AcceleratorConfig) -> ZoLayerConfig:
    n_rng = max(31, (1 << accel.layer_rows.bit_length()) - 1)
    return layer_config(STRATEGY, rows=accel.layer_rows, cols=accel.layer_cols,
                        mode=accel.layer_mode, branch_lanes=accel.branch_lanes,
                        max_m=accel.layer_max_m, max_k=accel.layer_max_k,
                        max_n=accel.layer_max_n, max_r=accel.layer_max_r, n_rng=n_rng)


def engine_dsp(config: EngineConfig) -> int:
    """DSP blocks of one GEMM engine: its array's ``multipliers`` and the requantizer's
    :data:`REQUANT_PRODUCTS` per output column (with the GELU job mode
    :data:`GELU_PRODUCTS` more a column)."""
    return (config.multipliers + REQUANT_PRODUCTS * config.cols
            + (GELU_PRODUCTS * config.cols if config.gelu else 0))


def softmax_dsp(lanes: int, min_scale: float = MINILM_MIN_SCALE) -> int:
    """DSP blocks of one softmax unit of ``lanes`` lanes made for scales from ``min_scale``:
    :data:`SOFTMAX_PRODUCTS` a lane (``coarse`` from MiniLM's 2^-15 up)."""
    return SOFTMAX_PRODUCTS["coarse" if min_scale >= MINILM_MIN_SCALE else "fine"] * lanes


def layer_dsp(config: ZoLayerConfig) -> int:
    """DSP blocks of one ZO layer: the R x C array, the requantizer's
    :data:`REQUANT_PRODUCTS` per column and the update unit's :data:`UPDATE_PRODUCTS` per
    row."""
    return (config.rows * config.cols + REQUANT_PRODUCTS * config.cols
            + UPDATE_PRODUCTS * config.rows)
