"""The registered designs with their co-simulations attached.

:mod:`zoforge.hw.designs` registers designs without knowing about simulation (hardware sits
below this layer). :data:`COSIMS` is the table of the built-in designs' co-simulations (each
a runner in a ``zoforge.sim.*_cosim`` module, with its options type, as import references:
listing them imports nothing); :func:`designs` returns every registered design with its
co-simulation. A co-simulation module is imported only when its design's co-simulation or
options are first used.
"""
from __future__ import annotations

from zoforge.hw.designs import Design
from zoforge.hw.designs import designs as registered_designs

__all__ = ["COSIMS", "designs"]

#: Design name -> its co-simulation: the runner ``(config, options) -> dict``, the options'
#: configuration type, the help of ``zoforge cosim DESIGN`` and other names for it.
COSIMS: dict[str, dict] = {
    "engine": dict(
        cosim="zoforge.sim.engine_cosim:cosim_engine",
        cosim_options="zoforge.sim.engine_cosim:EngineCosimOptions",
        cosim_help="random GEMMs through the engine's RTL (job server or cocotbext-axi), "
                   "checked bit-exact against the golden model; prints JSON"),
    "rng": dict(
        cosim="zoforge.sim.rng_cosim:cosim_rng",
        cosim_options="zoforge.sim.rng_cosim:RngCosimOptions",
        cosim_help="co-simulate one generator configuration against its golden model; "
                   "prints JSON (bit_exact, cycles, cycles_per_s, simulator, ...)"),
    "accelerator": dict(
        cosim="zoforge.sim.accel_cosim:cosim_accelerator",
        cosim_options="zoforge.sim.accel_cosim:AccelCosimOptions",
        cosim_help="the board-sized accelerator's units (one of each kind it has: the GEMM "
                   "engine with random GEMMs, the GELU engine with GELU jobs, the ZO layer "
                   "with ZO steps, the softmax unit with random jobs; with --link the "
                   "scaled-down top's linked attention: scores into the links, softmax from "
                   "them), each checked bit-exact against its golden model; prints JSON"),
    "softmax": dict(
        cosim="zoforge.sim.softmax_host:cosim_softmax",
        cosim_options="zoforge.sim.softmax_host:SoftmaxCosimOptions",
        cosim_help="random jobs (row lengths, rows, key masks, scales) through the softmax "
                   "unit's RTL, checked bit-exact against int_softmax; prints JSON"),
    "zo-layer": dict(
        cosim="zoforge.sim.zolayer_cosim:cosim_layer",
        cosim_options="zoforge.sim.zolayer_cosim:ZoCosimOptions",
        cosim_help="ZO training steps of one layer on the RTL (job server or cocotbext-axi) "
                   "against a synthetic regression target, checked bit-exact against the "
                   "golden model (every branch, g and T after every update); prints JSON"),
}

# design name -> (the registered design, the same with its co-simulation)
_ATTACHED: dict[str, tuple[Design, Design]] = {}


def designs() -> dict[str, Design]:
    """Every registered design, with its co-simulation (importing none of their modules)."""
    out = registered_designs()
    for name, cosim in COSIMS.items():
        design = out.get(name)
        if design is None or design.has_cosim:
            continue
        known = _ATTACHED.get(name)
        if known is None or known[0] is not design:
            known = _ATTACHED[name] = (design, design.replace(**cosim))
        out[name] = known[1]
    return out
