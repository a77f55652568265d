"""The ZO layer's cycle model: the CYCLES register of every job, and a step's STEP_CYCLES.

Every phase of a job is counted (no stream stalls: the host keeps the streams busy):

* **loads** (``load_x``, ``load_w``, ``load_a``, ``load_master``): one beat per cycle,
  plus :data:`LOAD_EXTRA` (the CTRL write to the first beat). ``load_x`` beats are
  ``M/C * ceil(K/P)`` (:func:`~.layouts.token_pack`), the others one word each;
* **walks** of T (``accumulate``, ``apply``, ``read_master``): one word per cycle (W =
  K_t * N / R words), plus the update unit's pipeline (:data:`~.update.ACCUMULATE_LATENCY`,
  :data:`~.update.APPLY_LATENCY`) and one cycle to finish; with Q queries per branch job
  an accumulate takes Q generator transfers per word, so its last word is issued
  ``(W - 1) * Q + query`` cycles after its first;
* **compute jobs** (``frozen_w``, ``frozen_a``, ``branch``): ``tiles`` output tiles back to
  back, each ``max(depth, interval, (depth + free) / banks)`` cycles (its k-steps; at least
  the array's tile interval, ``max(2R - 2, R)`` with its skewed drain,
  :func:`~zoforge.hw.pe.array.min_tile_interval`; and ``banks`` =
  :func:`~zoforge.hw.pe.tiles.lut_ram_result_banks` result banks (8 at R <= 4, 4 at R <= 8,
  else 2): a tile begins only when the bank of the tile ``banks`` before it is read out,
  ``free`` = :func:`bank_free` cycles after that tile's last k-step) but the last, which
  ends after its ``depth`` k-steps, plus the fill and drain of the pipeline around the array
  (:func:`compute_extra`: the panel fetch up to :data:`~.fetch.LEAD`, the feeder's reads,
  the array's drain, the output stage, the requantizer and the result sink, linear in R
  and C). The first panel is fetched while its first tile computes, the next while the
  current one is computed, so a fetch adds no cycles.

Every job then takes :data:`FINISH` cycle more: the layer registers its units' ends before
the control's ``finish``.

The constants of :func:`compute_extra` are the pipelines' depths, measured on the RTL
(``benchmarks/bench_zolayer_busy.py`` prints the model's error on every case it runs).
"""
from __future__ import annotations

from zoforge.golden.zolayer.config import ZoLayerConfig
from zoforge.hw.pe.array import min_tile_interval
from zoforge.hw.pe.tiles import lut_ram_result_banks

from .layouts import token_pack
from .update import ACCUMULATE_LATENCY, APPLY_LATENCY

__all__ = ["job_cycles", "step_cycles", "floor_cycles", "compute_extra", "bank_free",
           "tile_spacing", "LOAD_EXTRA", "READ_EXTRA", "SPREAD_EXTRA", "BIAS_EXTRA"]

#: Cycles every job takes after its unit's last action: the layer's register in front of
#: the control's ``finish``.
FINISH = 1
#: Cycles of a load beyond its beats, of ``read_master`` beyond its words.
LOAD_EXTRA = 1
READ_EXTRA = 3
#: Cycles a branch spends in :class:`~.spread.BranchSpread` (branch_lanes > 1), and a
#: LoRA-FA branch in reading its bias XW beside the results: none since the result banks
#: are not the pace (6 with two banks; 0 measured with eight at 2x8, 4x4, 4x16 and 8x8, in
#: the depth and the array-interval regimes).
SPREAD_EXTRA = 2
BIAS_EXTRA = 0
#: compute_extra = FILL + FILL_PER_ROW * R + FILL_PER_COL * C (measured on the RTL)
FILL, FILL_PER_ROW, FILL_PER_COL = 27, 3, 1
#: bank_free = FREE + FREE_PER_ROW * R + FREE_PER_COL * C (measured on the RTL; a LoRA-FA
#: branch, which reads a bias beside each row, takes about half a cycle more: not modelled,
#: its error stays below 1.5 % on every measured shape)
FREE, FREE_PER_ROW, FREE_PER_COL = 4.5, 3, 1


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def compute_extra(config: ZoLayerConfig, branch: bool) -> int:
    """A compute job's cycles beyond its tiles: the pipelines' fill and drain."""
    extra = FILL + FILL_PER_ROW * config.rows + FILL_PER_COL * config.cols
    if branch:
        extra += SPREAD_EXTRA if config.branch_lanes > 1 else 0
        extra += BIAS_EXTRA if config.mode == "lora-fa" else 0
    return extra


def bank_free(config: ZoLayerConfig) -> float:
    """Cycles from a tile's last k-step until the output stage has read its result bank out
    (the array's capture, the drain, the output stage's reads): a mean, the stage's
    handshakes make it vary by a cycle from tile to tile."""
    return FREE + FREE_PER_ROW * config.rows + FREE_PER_COL * config.cols


def tile_spacing(config: ZoLayerConfig, depth: int) -> float:
    """Cycles from one tile of ``depth`` k-steps to the next in a compute job: its k-steps,
    the array's minimum interval (skewed drain) or the result banks' turnaround."""
    R, C = config.rows, config.cols
    return max(depth, min_tile_interval(R, C, skewed_drain=True),
               (depth + bank_free(config)) / lut_ram_result_banks(R))


def job_cycles(config: ZoLayerConfig, job: str, m: int, k: int, n: int, r: int = 0,
               query: int = 0) -> int:
    """The CYCLES register of one ``job`` on a layer of shape ``m, k, n`` (rank ``r`` in
    lora-fa), ``query``: an accumulate's query within its branch job."""
    return FINISH + _work_cycles(config, job, m, k, n, r, query)


def _work_cycles(config: ZoLayerConfig, job: str, m: int, k: int, n: int, r: int,
                 query: int) -> int:
    """A job's cycles up to its unit's last action."""
    R, C = config.rows, config.cols
    lora = config.mode == "lora-fa"
    k_t = r if lora else k
    walk = k_t * n // R                           # words of T
    queries = config.queries_per_job
    lanes = max(R, C)
    if job == "load_x":
        return m // C * _ceil(k, token_pack(C, lanes)) + LOAD_EXTRA
    loads = {"load_w": n // R * k, "load_a": r // R * k, "load_master": walk}
    if job in loads:
        return loads[job] + LOAD_EXTRA
    if job == "read_master":
        return walk + READ_EXTRA
    if job == "apply":
        return walk + APPLY_LATENCY + 1
    if job == "accumulate":
        return (walk - 1) * queries + query + ACCUMULATE_LATENCY + 2
    depth, panels = {"frozen_w": (k, n // R), "frozen_a": (k, r // R),
                     "branch": (k_t, n // config.features_per_word)}[job]
    tiles = m // C * panels
    spacing = tile_spacing(config, depth)
    return round((tiles - 1) * spacing + depth + compute_extra(config, job == "branch"))


def step_cycles(config: ZoLayerConfig, m: int, k: int, n: int, r: int, q: int,
                sequential: bool = False) -> int:
    """STEP_CYCLES of one ZO step with ``q`` queries (the host's schedule,
    :mod:`zoforge.sim.zolayer_host`): the batch (and the frozen products), the branch
    jobs, the accumulates, the apply. ``sequential``: every branch job reloads the batch
    and recomputes the frozen products."""
    def cycles(job, **extra):
        return job_cycles(config, job, m, k, n, r, **extra)

    batch = cycles("load_x")
    if config.mode == "lora-fa":
        batch += cycles("frozen_w") + cycles("frozen_a")
    queries = config.queries_per_job
    branch_jobs = 2 * q if config.branch_lanes == 1 else q // queries
    accumulates = q // queries * sum(cycles("accumulate", query=j) for j in range(queries))
    batches = branch_jobs if sequential else 1
    return batches * batch + branch_jobs * cycles("branch") + accumulates + cycles("apply")


def floor_cycles(config: ZoLayerConfig, m: int, k: int, n: int, r: int, q: int) -> float:
    """The useful-MAC floor of a step: its 2q branches' multiply-accumulates at R x C per
    cycle (the trained product only: ``2q * M * K_t * N / (R * C)``)."""
    k_t = r if config.mode == "lora-fa" else k
    return 2 * q * m * k_t * n / (config.rows * config.cols)
