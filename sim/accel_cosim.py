"""``zoforge cosim accelerator``: the board-sized accelerator's units on the RTL.

The accelerator's top (:mod:`zoforge.hw.accel.top`) only passes each unit's ports through:
``engines`` copies of one GEMM engine and ``layers`` copies of one ZO layer, each with its
own streams and registers. So its co-simulation is one of each unit's
(:func:`zoforge.sim.engine_cosim.cosim_engine` with random GEMMs, and
:func:`zoforge.sim.zolayer_cosim.cosim_layer` with ZO steps), each checked bit-exact
against its golden model; ``bit_exact`` is their conjunction. The shapes are the options'
(small by default: a co-simulation of a board-sized unit is slow), clipped to the units'
capacities and multiples.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from zoforge.config import Config, IntRange, OneOf, param
from zoforge.sim.backends import BACKEND_CHOICES, BACKEND_HELP
from zoforge.sim.cosim import SIMULATORS

__all__ = ["AccelCosimOptions", "cosim_accelerator"]


@dataclass(frozen=True)
class AccelCosimOptions(Config):
    """How ``zoforge cosim accelerator`` runs its units."""

    kind: ClassVar[str] = "cosim-accelerator"

    seed: int = param(0, "seed of the random operands and data", IntRange(0))
    jobs: int = param(2, "random GEMMs through the engine", IntRange(1, 1000))
    steps: int = param(1, "ZO steps through the ZO layer", IntRange(1, 1000))
    simulator: str = param("verilator", "simulator", OneOf(SIMULATORS))
    backend: str = param("auto", "where the host program runs: " + BACKEND_HELP,
                         OneOf(BACKEND_CHOICES))


def _multiple(value: int, step: int) -> int:
    return max(step, value // step * step)


def cosim_accelerator(config, options: AccelCosimOptions | None = None) -> dict:
    """One engine and one ZO layer of ``config`` (an
    :class:`~zoforge.hw.accel.config.AcceleratorConfig`) co-simulated (module docstring);
    a JSON-able summary: ``bit_exact`` and each unit's own summary."""
    # the units' co-simulations only when run: `zoforge cosim accelerator --help` imports
    # no other design's runner
    from zoforge.sim.engine_cosim import EngineCosimOptions, cosim_engine
    from zoforge.sim.zolayer_cosim import ZoCosimOptions, cosim_layer
    options = options or AccelCosimOptions()
    engine, layer = config.engine_config(), config.layer_config()
    size = min(16, engine.max_m, engine.max_k, engine.max_n)
    engine_result = cosim_engine(engine, EngineCosimOptions(
        m=size, k=size, n=size, seed=options.seed, jobs=options.jobs,
        simulator=options.simulator, backend=options.backend))
    rows, cols = layer.rows, layer.cols
    layer_result = cosim_layer(layer, ZoCosimOptions(
        steps=options.steps, seed=options.seed, simulator=options.simulator,
        backend=options.backend,
        m=_multiple(min(8, layer.max_m), cols), k=min(8, layer.max_k),
        n=_multiple(min(8, layer.max_n), rows), r=_multiple(min(4, layer.max_r), rows)))
    return {"bit_exact": bool(engine_result["bit_exact"] and layer_result["bit_exact"]),
            "engines": config.engines, "layers": config.layers,
            "engine": engine_result, "layer": layer_result}
