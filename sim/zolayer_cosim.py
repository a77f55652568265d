"""Co-simulation of the ZO layer (``zoforge cosim zo-layer``): ZO steps on the RTL, bit-exact.

The host program (:func:`zoforge.sim.zolayer_host.layer_program`) plays the ARM host over AXI on
either backend (:mod:`zoforge.sim.backends`: the job server or the cocotbext-axi bench); this
module makes the data (a synthetic regression: random int8 batches, frozen weights, a random
target per step), runs the bench and replays the same steps on the golden model
(:class:`~zoforge.golden.zolayer.model.ZoLayerGolden`), comparing every branch's outputs,
every g and T after every update. The last step runs under the sequential schedule (every
forward pass recomputes the frozen products) to measure what P-RGE's sharing saves.

The verdict (:func:`layer_verdict`, a :class:`~zoforge.sim.verdict.Verdict`) is the
conjunction of :data:`LAYER_COMPARISONS`: every branch's outputs, the plain branch, the g
values, the masters after every update, and the counters (every job's ARRAY_CYCLES equal to
the k-steps it feeds the array, :func:`array_steps`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from zoforge.config import Config, FloatRange, IntRange, OneOf, param
from zoforge.errors import ConfigError
from zoforge.golden.zolayer import Formats, ZoLayerConfig
from zoforge.golden.zolayer.host import GRAD_SHIFT_MAX, projected_gradient, squared_error
from zoforge.sim.backends import (BACKEND_CHOICES, BACKEND_HELP, BACKENDS, Stalls,
                                  resolve_backend, run_program)
from zoforge.sim.cosim import SIMULATORS, CosimResult
from zoforge.sim.verdict import Verdict

__all__ = ["ZoCosimOptions", "cosim_layer", "run_layer", "predicted_cycles", "predicted_ratio",
           "golden_run", "make_data", "layer_args", "layer_verdict", "array_steps",
           "LAYER_COMPARISONS", "BACKENDS"]

#: What :func:`layer_verdict` compares, each by name: the RTL's arrays with the golden
#: model's, and its job counters with the k-steps the jobs feed the array.
LAYER_COMPARISONS = ("branches", "plain", "grads", "masters", "counters")


@dataclass(frozen=True)
class ZoCosimOptions(Config):
    """What ``zoforge cosim zo-layer`` runs: the layer's shape and the step settings."""

    kind: ClassVar[str] = "cosim-zo-layer"

    steps: int = param(2, "ZO steps under the P-RGE schedule (one more runs sequentially)",
                       IntRange(1, 1000))
    q: int = param(2, "queries per step", IntRange(1, Formats.MAX_QUERIES))
    seed: int = param(0, "seed of the synthetic data (the generator starts from its reset "
                         "state, as the hardware does)", IntRange(0))
    m: int = param(8, "tokens M (a multiple of --cols)", IntRange(1, 4096))
    k: int = param(8, "input features K", IntRange(1, 4096))
    n: int = param(8, "output features N (a multiple of --rows)", IntRange(1, 4096))
    r: int = param(4, "LoRA rank r (lora-fa; a multiple of --rows)", IntRange(1, 1024))
    eps_shift: int = param(2, "eps = 2^-eps_shift (perturbation z >> eps_shift)",
                           IntRange(0, Formats.EPS_SHIFT_MAX))
    grad_shift: int = param(32, "host: g = (l+ - l-) >> grad_shift, saturated to 16 bits",
                            IntRange(0, GRAD_SHIFT_MAX))
    eta_mult: int = param(1, "eta / q = eta_mult * 2^-eta_shift",
                          IntRange(0, (1 << Formats.ETA_MULT_BITS) - 1))
    eta_shift: int = param(4, "eta / q = eta_mult * 2^-eta_shift",
                           IntRange(0, Formats.ETA_SHIFT_MAX))
    mult: int = param(1 << 15, "requantization multiplier of U = requant(X·A)",
                      IntRange(0, (1 << 16) - 1))
    shift: int = param(24, "requantization shift of U", IntRange(0, 47))
    simulator: str = param("verilator", "simulator", OneOf(SIMULATORS))
    source_idle: float = param(0.0, "probability that the input stream and the AXI4-Lite "
                                    "AW/W/AR channels pause in a cycle",
                               FloatRange(0, 1, high_open=True))
    sink_backpressure: float = param(0.0, "probability that the output stream and the "
                                          "AXI4-Lite B/R channels hold ready low in a cycle",
                                     FloatRange(0, 1, high_open=True))
    backend: str = param("auto", "where the host program runs: " + BACKEND_HELP,
                         OneOf(BACKEND_CHOICES))

    def check(self) -> None:
        resolve_backend(self.backend, self.simulator)


def _shape(config: ZoLayerConfig, options: ZoCosimOptions):
    from zoforge.golden.zolayer.model import LayerShape   # imports torch: only when used
    r = options.r if config.mode == "lora-fa" else 0
    if options.q % config.queries_per_job:
        raise ConfigError("q", f"a multiple of {config.queries_per_job} (the queries of one "
                          f"branch job with branch_lanes = {config.branch_lanes})", options.q)
    return LayerShape(options.m, options.k, options.n, r).checked(config)


def make_data(config: ZoLayerConfig, options: ZoCosimOptions) -> dict[str, np.ndarray]:
    """Seeded synthetic data: batches, targets, frozen weights and the initial master."""
    shape = _shape(config, options)
    rng = np.random.default_rng(options.seed)
    k_t, n = shape.trained(config)
    steps = options.steps + 1
    data = {"x": rng.integers(-128, 128, (steps, shape.m, shape.k), dtype=np.int64),
            "target": rng.integers(-(1 << 20), 1 << 20, (steps, shape.m, n), dtype=np.int64),
            "master": rng.integers(-(1 << 20), 1 << 20, (k_t, n), dtype=np.int64)}
    if config.mode == "lora-fa":
        data["w"] = rng.integers(-128, 128, (shape.k, n), dtype=np.int64)
        data["a"] = rng.integers(-128, 128, (shape.k, shape.r), dtype=np.int64)
    return data


def golden_run(config: ZoLayerConfig, options: ZoCosimOptions,
               data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The golden model's branches, g values, masters and plain branch for ``data``."""
    import torch   # only to run the golden model (keeps the options cheap to import)
    from zoforge.golden.zolayer.model import ZoLayerGolden
    golden = ZoLayerGolden(config, _shape(config, options))     # generator at reset
    if config.mode == "lora-fa":
        golden.load_frozen(torch.from_numpy(data["w"]), torch.from_numpy(data["a"]))
    golden.load_master(torch.from_numpy(data["master"]))
    branches, masters, grads = [], [], []
    for x, target in zip(data["x"], data["target"]):
        golden.load_x(torch.from_numpy(x))
        golden.frozen(options.mult, options.shift)
        step_grads = []
        per_job = config.queries_per_job
        for _ in range(options.q // per_job):
            golden.save()
            if config.branch_lanes > 1:
                outputs = golden.group_branch(options.eps_shift).numpy()
            else:
                y_plus = golden.branch(1, options.eps_shift)
                golden.restore()
                outputs = np.stack([y_plus.numpy(), golden.branch(-1, options.eps_shift)])
            job_grads = [projected_gradient(squared_error(outputs[2 * j], target),
                                            squared_error(outputs[2 * j + 1], target),
                                            options.grad_shift) for j in range(per_job)]
            for query, g in enumerate(job_grads):
                golden.restore()
                golden.accumulate(g, query)
            branches += list(outputs)
            step_grads += job_grads
        golden.apply(options.eta_mult, options.eta_shift)
        masters.append(golden.master.numpy().copy())
        grads.append(step_grads)
    return {"branches": np.stack(branches), "masters": np.stack(masters),
            "grads": np.array(grads), "plain": golden.branch(0, 0).numpy()}


def predicted_cycles(config: ZoLayerConfig, shape, q: int,
                     sequential: bool = False) -> float:
    """Cycles of one step from the layer's cycle model
    (:func:`zoforge.hw.zolayer.cycles.step_cycles`: every job's phases counted)."""
    from zoforge.hw.zolayer.cycles import step_cycles   # the hardware's: only when used
    r = shape.r if config.mode == "lora-fa" else 0
    return step_cycles(config, shape.m, shape.k, shape.n, r, q, sequential)


def predicted_ratio(config: ZoLayerConfig, shape, q: int) -> float:
    """Sequential / P-RGE cycles predicted from operation counts."""
    return (predicted_cycles(config, shape, q, sequential=True)
            / predicted_cycles(config, shape, q))


def layer_args(config: ZoLayerConfig, options: ZoCosimOptions, host: dict | None = None
               ) -> dict:
    """The host program's arguments (the bench's ``bench_args()``, both backends')."""
    shape = _shape(config, options)
    return {"m": shape.m, "k": shape.k, "n": shape.n, "r": shape.r, "rows": config.rows,
            "cols": config.cols, "lanes": max(config.rows, config.cols),
            "branch_lanes": config.branch_lanes,
            "lora": config.mode == "lora-fa", "host": host, **{f: getattr(options, f) for f in (
                "q", "eps_shift", "grad_shift", "eta_mult", "eta_shift", "mult", "shift",
                "source_idle", "sink_backpressure", "seed")}}


def _cycle_bound(args: dict) -> int:
    """Generous most cycles of one operation of ``args``' shape (a hung job fails, a slow
    one does not): 16x its multiply-accumulates at R x C per cycle, words and tile spacing,
    slowed by the stalls."""
    m, k, n, r = args["m"], args["k"], args["n"], args["r"]
    work = m * k * (n + r) // (args["rows"] * args["cols"]) + (m + n + r) * k + 4 * m * (n + r)
    return int((100_000 + 16 * work) / (1 - max(args["source_idle"], args["sink_backpressure"])))


def run_layer(config: ZoLayerConfig, options: ZoCosimOptions, data: dict[str, np.ndarray],
              host: dict | None = None) -> tuple[dict[str, np.ndarray], CosimResult]:
    """Run the host program (:func:`zoforge.sim.zolayer_host.layer_program`) on ``data``: the
    RTL's branches, masters and plain branch (empty when the run failed) and the result (g
    values, job counters and ``sim_cycles``, the clock cycles simulated, in ``results``).
    ``host``: the fields of a :class:`~zoforge.golden.zolayer.host.CrossEntropyHost` for a
    classification host (``data["labels"]``), else the regression host (``data["target"]``).
    ``options.backend`` picks the backend (:mod:`zoforge.sim.backends`)."""
    from zoforge.sim.zolayer_jobserver import layer_target   # elaborates: only when running
    args = layer_args(config, options, host)
    return run_program("zoforge.sim.zolayer_host:layer_program", args, data, layer_target(config),
                       backend=resolve_backend(options.backend, options.simulator),
                       simulator=options.simulator, max_cycles=_cycle_bound(args),
                       stalls=Stalls(options.source_idle, options.sink_backpressure,
                                     options.seed))


def array_steps(config: ZoLayerConfig, shape, job: str) -> int:
    """The k-steps ``job`` feeds the array (its ARRAY_CYCLES): one per k of every output
    tile, a tile being C tokens by the features of a word (R; a branch job's R /
    ``branch_lanes``, its branches side by side on the rows); 0 for the jobs without the
    array."""
    tokens = shape.m // config.cols
    k_t = shape.r if config.mode == "lora-fa" else shape.k
    features = config.rows // config.branch_lanes
    return {"frozen_w": tokens * (shape.n // config.rows) * shape.k,
            "frozen_a": tokens * (shape.r // config.rows) * shape.k,
            "branch": tokens * (shape.n // features) * k_t}.get(job, 0)


def layer_verdict(config: ZoLayerConfig, shape, result: CosimResult,
                  rtl: dict[str, np.ndarray], golden: dict[str, np.ndarray]) -> Verdict:
    """The run's verdict over :data:`LAYER_COMPARISONS` (``rtl``, ``result``: from
    :func:`run_layer`; ``golden``: from :func:`golden_run`)."""
    bench = result.results
    jobs = bench.get("jobs") or None
    counters = None if jobs is None else [[j["job"], j["array_cycles"]] for j in jobs]
    expected = None if jobs is None else [[j["job"], array_steps(config, shape, j["job"])]
                                          for j in jobs]
    pairs = {name: (rtl.get(name), golden[name]) for name in ("branches", "plain", "masters")}
    pairs["grads"] = (bench.get("grads"), golden["grads"])
    pairs["counters"] = (counters, expected)
    return Verdict.of(LAYER_COMPARISONS, result.passed, pairs)


def cosim_layer(config: ZoLayerConfig, options: ZoCosimOptions | None = None) -> dict:
    """Run ``options.steps`` ZO steps (and one sequential) on the RTL and on the golden
    model; a JSON-able summary with ``bit_exact``, cycles and PE utilization."""
    options = options or ZoCosimOptions()
    shape = _shape(config, options)
    data = make_data(config, options)
    rtl, result = run_layer(config, options, data)
    golden = golden_run(config, options, data)
    bench = result.results
    verdict = layer_verdict(config, shape, result, rtl, golden)
    jobs = bench.get("jobs", [])
    branches = [j for j in jobs if j["job"] == "branch" and not j.get("plain")]
    plain = [j for j in jobs if j["job"] == "branch" and j.get("plain")]
    step_cycles = bench.get("step_cycles", [0])
    prge = step_cycles[:-1]
    cycles = sum(prge) / len(prge) if prge else 0
    sequential = step_cycles[-1] if step_cycles else 0
    branch_cycles = sum(j["cycles"] for j in branches)
    return {
        "bit_exact": verdict.bit_exact, "checks": verdict.checks,
        "failures": result.failures,
        "strategy": config.variant, "mode": config.mode, "rows": config.rows,
        "cols": config.cols, "m": shape.m, "k": shape.k, "n": shape.n, "r": shape.r,
        "q": options.q, "steps": options.steps,
        "grads": bench.get("grads"), "stalls": bench.get("stalls"),
        "cycles_per_step": cycles, "sequential_cycles_per_step": sequential,
        "predicted_cycles_per_step": predicted_cycles(config, shape, options.q),
        "measured_ratio": round(sequential / cycles, 4) if cycles else 0.0,
        "predicted_ratio": round(predicted_ratio(config, shape, options.q), 4),
        "pe_utilization": round(sum(j["array_cycles"] for j in branches) / branch_cycles, 4)
        if branch_cycles else 0.0,
        "branch_cycles": branches[0]["cycles"] if branches else 0,
        "plain_branch_cycles": plain[0]["cycles"] if plain else 0,
        "simulator": result.simulator, "build_s": round(result.build_s, 2),
        "run_s": round(result.run_s, 2), "config_hash": config.stable_hash(),
    }
