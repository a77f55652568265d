"""The jobs of :mod:`zoforge.reports.unit_calls` measured on the RTL (the Verilator job
server; source label ``co-simulation``): :func:`measure_engine_jobs` and
:func:`measure_adapter_jobs` run them for the cycle model's check
(``benchmarks/bench_finetune_cost.py``)."""
from __future__ import annotations

from zoforge.golden.zolayer import ZoLayerConfig
from zoforge.hw.engine.config import EngineConfig

__all__ = ["COSIM", "measure_engine_jobs", "measure_adapter_jobs"]

COSIM = "co-simulation"


def measure_engine_jobs(engine: EngineConfig, shapes: list[tuple[int, int, int, bool]],
                        seed: int = 0) -> list[int]:
    """CYCLES of one random job per ``(m, k, n, raw)`` on the engine's RTL (the Verilator
    job server; raw jobs int32, the others int8 per-channel), every result checked
    bit-exact."""
    # the co-simulation (and Verilator's set-up) only when measuring
    import numpy as np
    from zoforge.sim.engine_cosim import EngineCosim, random_job
    rng = np.random.default_rng(seed)
    jobs = [random_job(rng, m, k, n, raw=raw, per_channel=not raw) for m, k, n, raw in shapes]
    results, _ = EngineCosim(engine).run(jobs, backend="jobserver")
    for result in results:
        if not result.bit_exact:
            raise RuntimeError(f"engine job {result.shape}: {result.mismatches} mismatches")
    return [result.cycles for result in results]


def measure_adapter_jobs(layer: ZoLayerConfig, m: int, k: int, n: int, r: int,
                         seed: int = 0) -> list[tuple[str, int]]:
    """(job, CYCLES) of one adapter call and one update walk on the ZO layer's RTL (the
    job server), random int8 data and master."""
    # the co-simulation (and Verilator's set-up) only when measuring
    import numpy as np
    from zoforge.hw.zolayer.layouts import panel_words, token_words
    from zoforge.sim.zolayer_host import LayerSteps
    from zoforge.sim.zolayer_jobserver import LayerServer
    rng = np.random.default_rng(seed)
    w, a = rng.integers(-128, 128, (k, n)), rng.integers(-128, 128, (k, r))
    master, x = rng.integers(-(1 << 20), 1 << 20, (r, n)), rng.integers(-128, 128, (m, k))
    with LayerServer(layer) as server:
        lanes, rows, cols = server.lanes, layer.rows, layer.cols
        steps = LayerSteps(server.host, rows, cols, True, m, k, n, r)
        server.run(steps.configure(eps_shift=2, eta_mult=1, eta_shift=4, mult=1 << 15,
                                   shift=24))
        server.job("load_w", panel_words(w, rows, lanes))
        server.job("load_a", panel_words(a, rows, lanes))
        server.job("load_master", panel_words(master, rows, lanes))
        server.job("load_x", token_words(x, cols, lanes))
        server.job("frozen_w")
        server.job("frozen_a")
        server.job("branch", receive=True, save=True)
        server.job("load_master", panel_words(master, rows, lanes))
        server.write("GRAD", 3)
        server.job("accumulate", restore=True)
        server.job("apply")
        server.job("read_master", receive=True)
        return [(job["job"], job["cycles"]) for job in server.jobs]
