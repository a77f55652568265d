"""Which mapping a ZO-layer training runs: the branch lanes the tool picks for a shape.

A ``hw-mlp`` linear classifier is one full-weight ZO layer, ``features x classes`` on an
R x C array (``docs/zo-layer.md``). Its ``branch_lanes`` B puts B branches of F = R / B
features side by side on the rows: the classes are padded to a multiple of F instead of R,
and one branch job computes the + and - branches of B / 2 queries.

**The rule** (:func:`choose_branch_lanes`): of the B the configuration allows (1, or an
even power of two dividing R; the queries a multiple of B / 2; K a multiple of B; one layer,
``hidden`` 0: every value :class:`~zoforge.golden.zo.config.TrainConfig` and the layer's
configuration accept), the one whose step takes the fewest cycles by the layer's cycle
model (:func:`zoforge.hw.zolayer.cycles.step_cycles`, the P-RGE schedule, classes padded to
F), the smaller B on a tie. What this means in practice: padding wastes rows in proportion
(the demo's 2 classes on 4 rows with B = 1 compute 4 columns for 2), each branch job
costs a fill and drain (B = 2 halves the jobs of B = 1 even where N fills the rows), and an
update walk takes Q = B / 2 generator transfers per word (a B above 2 pays Q times the
update walks), so for N = 2: B = 2 on 4 x 4, B = 4 on 8 x 8.

``zoforge train`` (``--trainable hw-mlp``) and ``zoforge demo`` use it by default
(``--branch-lanes auto``, :func:`parse_branch_lanes`); :func:`with_chosen_branch_lanes`
reads the shape (the encoder's width, the data's classes) and returns the configuration
with B filled in.
"""
from __future__ import annotations

import dataclasses

from zoforge.errors import ConfigError
from zoforge.golden.zo.config import TrainConfig
from zoforge.golden.zolayer.config import BRANCH_LANES, padded_classes
from zoforge.hw.zolayer.cycles import step_cycles

__all__ = ["AUTO", "choose_branch_lanes", "branch_lanes_cycles", "with_chosen_branch_lanes",
           "parse_branch_lanes"]

#: The value of ``--branch-lanes`` that lets :func:`choose_branch_lanes` pick.
AUTO = "auto"


def branch_lanes_cycles(cfg: TrainConfig, features: int, classes: int) -> dict[int, int]:
    """Each B allowed for ``cfg`` (``hw-mlp``, ``hidden`` 0) on ``features`` inputs and
    ``classes`` classes -> the cycle model's STEP_CYCLES of one step with it."""
    if cfg.trainable != "hw-mlp" or cfg.hidden:
        raise ConfigError("hidden", "0 with trainable hw-mlp (one layer) to compare branch "
                          "lanes", f"{cfg.trainable}, hidden {cfg.hidden}")
    cycles = {}
    for lanes in BRANCH_LANES:
        try:
            design = dataclasses.replace(cfg, branch_lanes=lanes).layer_design(features,
                                                                               classes)
        except ConfigError:              # not allowed for this configuration or shape
            continue
        n = padded_classes(classes, design.features_per_word)
        cycles[lanes] = step_cycles(design, cfg.batch, features, n, 0, cfg.queries)
    return cycles


def choose_branch_lanes(cfg: TrainConfig, features: int, classes: int) -> int:
    """The B of the module docstring's rule for ``cfg`` (``hw-mlp``) on ``features`` inputs
    and ``classes`` classes (1 with a hidden layer)."""
    if cfg.hidden:
        return 1
    cycles = branch_lanes_cycles(cfg, features, classes)
    return min(cycles, key=lambda lanes: (cycles[lanes], lanes))


def with_chosen_branch_lanes(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` with :func:`choose_branch_lanes`'s B for its model's width and its data's
    classes (read, the encoder not run); unchanged unless it trains ``hw-mlp`` with no
    hidden layer."""
    if cfg.trainable != "hw-mlp" or cfg.hidden:
        return cfg
    # the encoder's config and the data (torch, transformers): only when choosing
    from zoforge.golden.zo.features import pooled_shape
    features, classes = pooled_shape(cfg)
    return dataclasses.replace(cfg, branch_lanes=choose_branch_lanes(cfg, features, classes))


def parse_branch_lanes(text: str, flag: str = "--branch-lanes") -> int | None:
    """A ``--branch-lanes`` value: None for ``auto``, else one of the allowed B (one-line
    error naming ``flag`` and the allowed values)."""
    if text.strip().lower() == AUTO:
        return None
    allowed = f"{AUTO} or one of {', '.join(map(str, BRANCH_LANES))} (a divisor of --rows)"
    try:
        lanes = int(text)
    except ValueError:
        raise ConfigError(flag, allowed, text) from None
    if lanes not in BRANCH_LANES:
        raise ConfigError(flag, allowed, text)
    return lanes
