"""``zoforge cosim accelerator``: the board-sized accelerator's units on the RTL.

The accelerator's top (:mod:`zoforge.hw.accel.top`) only passes each unit's ports through:
``engines`` copies of one GEMM engine (the first ``gelu_engines`` of them with the GELU job
mode), ``layers`` copies of one ZO layer and ``softmax_units`` copies of one softmax unit,
each with its own streams and registers. So its co-simulation is one of each kind of unit it
has, each checked bit-exact against its golden model:

* ``engine`` (``engines > gelu_engines``): the plain engine (:meth:`~zoforge.hw.accel.
  config.AcceleratorConfig.engine_config`) with random int8 GEMMs
  (:func:`zoforge.sim.engine_cosim.cosim_engine`);
* ``gelu_engine`` (``gelu_engines > 0``): the GELU engine (``engine_config(gelu=True)``)
  with random GELU and int8 jobs in turn, a GELU job first (``--output auto``: a GELU job
  is ``engine_gemm_gelu``'s three stages);
* ``layer``: the ZO layer with ZO steps (:func:`zoforge.sim.zolayer_cosim.cosim_layer`);
* ``softmax`` (``softmax_units > 0``): the softmax bus unit (``softmax_config()``) with
  ``zoforge cosim softmax``'s random jobs (:func:`zoforge.sim.softmax_cosim.cosim_random`);
* ``linked_attention`` (``link``): the attention links on the top itself, the one unit run
  on the accelerator's own Verilog (:func:`zoforge.sim.link_cosim.cosim_linked_attention`:
  ``jobs`` scores jobs an engine, each engine's Q·K^T raw scores streamed through its link
  into its softmax unit, P against the golden engine and softmax; a route-0 engine job and
  a DDR softmax job; each job's CYCLES against its unit's cycle model, the clocks 1:1 and
  3:2, ``cycles_within`` the 3 % bar; the cocotb bench, whatever ``backend``).

``bit_exact`` is the conjunction of every unit's; ``units`` names each unit co-simulated
with its verdict and its job count (GEMMs, ZO steps or softmax jobs), and each unit's own
summary is under its name. The shapes are the options' (small by default: a co-simulation of
a board-sized unit is slow), clipped to the units' capacities and multiples.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from zoforge.config import Config, IntRange, OneOf, param
from zoforge.sim.backends import BACKEND_CHOICES, BACKEND_HELP, resolve_backend
from zoforge.sim.cosim import SIMULATORS

__all__ = ["AccelCosimOptions", "cosim_accelerator", "UNITS"]

#: The units a co-simulation can name (``units`` in its summary), in the order they run.
UNITS = ("engine", "gelu_engine", "layer", "softmax", "linked_attention")


@dataclass(frozen=True)
class AccelCosimOptions(Config):
    """How ``zoforge cosim accelerator`` runs its units."""

    kind: ClassVar[str] = "cosim-accelerator"

    seed: int = param(0, "seed of the random operands and data", IntRange(0))
    jobs: int = param(2, "random jobs through each engine (GELU jobs on the GELU engine) "
                         "and the softmax unit", IntRange(1, 1000))
    steps: int = param(1, "ZO steps through the ZO layer", IntRange(1, 1000))
    simulator: str = param("verilator", "simulator", OneOf(SIMULATORS))
    backend: str = param("auto", "where the host program runs: " + BACKEND_HELP,
                         OneOf(BACKEND_CHOICES))

    def check(self) -> None:
        resolve_backend(self.backend, self.simulator)


def _multiple(value: int, step: int) -> int:
    return max(step, value // step * step)


def cosim_accelerator(config, options: AccelCosimOptions | None = None) -> dict:
    """Each kind of unit of ``config`` (an :class:`~zoforge.hw.accel.config.
    AcceleratorConfig`) co-simulated (module docstring); a JSON-able summary: ``bit_exact``
    (every unit's), ``units`` (name -> its ``bit_exact`` and ``jobs``; ``linked_attention``
    also its ``cycles_within``, which ``bit_exact`` does not include; with ``link`` it is
    the summary's ``cycles_within`` too) and each unit's own summary under its name."""
    # the units' co-simulations only when run: `zoforge cosim accelerator --help` imports
    # no other design's runner
    from zoforge.sim.engine_cosim import EngineCosimOptions, cosim_engine
    from zoforge.sim.zolayer_cosim import ZoCosimOptions, cosim_layer
    options = options or AccelCosimOptions()
    if config.softmax_units:          # refused before any unit runs
        from zoforge.sim.softmax_cosim import check_random_work, cosim_random
        from zoforge.sim.softmax_host import SoftmaxCosimOptions
        softmax = SoftmaxCosimOptions(jobs=options.jobs, seed=options.seed,
                                      backend=resolve_backend(options.backend,
                                                              options.simulator))
        check_random_work(softmax.jobs, softmax.max_rows, config.softmax_max_len,
                          f"--jobs x --softmax-max-len (x {softmax.max_rows} rows a job)")
    if config.link:                   # refused (a bad option) before any unit runs
        from zoforge.sim.link_cosim import LinkCosimOptions, cosim_linked_attention
        link = LinkCosimOptions(seed=options.seed, jobs=options.jobs,
                                simulator=options.simulator)
    reports, jobs = {}, {}
    engines = {}
    if config.engines > config.gelu_engines:
        engines["engine"] = (config.engine_config(), "int8")
    if config.gelu_engines:
        engines["gelu_engine"] = (config.engine_config(gelu=True), "auto")
    for name, (engine, output) in engines.items():
        size = min(16, engine.max_m, engine.max_k, engine.max_n)
        reports[name] = cosim_engine(engine, EngineCosimOptions(
            m=size, k=size, n=size, seed=options.seed, jobs=options.jobs, output=output,
            simulator=options.simulator, backend=options.backend))
        jobs[name] = options.jobs
    layer = config.layer_config()
    rows, cols = layer.rows, layer.cols
    reports["layer"] = cosim_layer(layer, ZoCosimOptions(
        steps=options.steps, seed=options.seed, simulator=options.simulator,
        backend=options.backend,
        m=_multiple(min(8, layer.max_m), cols), k=min(8, layer.max_k),
        n=_multiple(min(8, layer.max_n), rows), r=_multiple(min(4, layer.max_r), rows)))
    jobs["layer"] = options.steps
    if config.softmax_units:
        reports["softmax"] = cosim_random(config.softmax_config(), softmax,
                                          simulator=options.simulator)
        jobs["softmax"] = reports["softmax"].get("jobs", 0)
    if config.link:
        reports["linked_attention"] = cosim_linked_attention(config, link)
        jobs["linked_attention"] = reports["linked_attention"].get("jobs", 0)
    units = {name: {"bit_exact": bool(reports[name]["bit_exact"]), "jobs": jobs[name]}
             for name in UNITS if name in reports}
    linked = {}
    if "linked_attention" in units:
        linked["cycles_within"] = units["linked_attention"]["cycles_within"] = bool(
            reports["linked_attention"]["cycles_within"])
    return {"bit_exact": all(unit["bit_exact"] for unit in units.values()), **linked,
            "engines": config.engines, "gelu_engines": config.gelu_engines,
            "layers": config.layers, "softmax_units": config.softmax_units,
            "units": units, **reports}
