"""What one ZO step costs on a board-sized accelerator (issue 32): the schedule priced.

The schedule is :func:`zoforge.hw.accel.schedule.step_schedule`; this module prices it,
every number with its source label:

* **cycles** (``cycle-model``): each job's cycles from its unit's own model (the engine:
  :func:`zoforge.hw.engine.cycles.engine_job_cycles`; the ZO layer:
  :func:`zoforge.hw.zolayer.cycles.job_cycles`); a phase's cycles are its critical path,
  the busiest unit's jobs one after the other (the units work side by side); the step's
  cycles are the phases' sum. A GELU job (``gemm-gelu``) takes the engine model's cycles
  with its GELU latency (``engine_job_cycles(..., gelu=True)``); a softmax job (a softmax unit's M
  rows of L keys) the unit's model, :func:`cached_softmax_job_cycles`, at the softmax units' own
  clock (their yosys-estimate Fmax, below the engines': a clock domain of their own behind
  their streams, ``softmax_mhz``). A unit's next job starts when the last ends (no gaps: the host
  issues the next job's CTRL write ahead, the job's weights stream in while it computes).
* **DDR bytes** (:func:`transfer_bytes`): each :class:`~zoforge.hw.accel.schedule.Transfer`
  once (broadcast), ``payload`` = the values packed (int8 X, W, A and int8 Y in bytes;
  int32 Y and tables 4 bytes; the 24-bit master 3 bytes; a softmax job's int32 scores in
  and int8 P out, streamed as they are) and ``stream`` = as the RTL's
  streams carry them today: the engine's X and W beats pack whole k-steps of int8 (a W beat
  ``max(1, R // C)`` words of ``pack`` k-steps of C columns: only tile padding) and its
  int8 Y four to a 32-bit lane (raw int32 Y one), as ``engine_stream_parts`` counts them;
  the ZO layer's W, A and master words carry one value per 32-bit lane (``load_x`` packs its
  tokens). The RTL streams ``stream``; ``payload`` is the packed form (issue item 5).
* **roofline per phase**: time = max(cycles / f, bytes / DDR bandwidth): the phase's
  streams move while it computes (double-buffered); ``bound`` names the larger.
* **the host's work** (``arm-estimate``, :func:`host_ops`): softmax, LayerNorm, GELU, the
  residuals, pooling, the activations' (de)quantization, the attention products Q·K^T
  and P·V (``attention`` ``host``; with ``engines`` they are the schedule's engine jobs and
  the host instead (de)quantizes q, k, v, S, P and C) and (``split`` mapping) each
  adapter's sum ``wrap32(XW + Yn)`` run on the PS's
  Cortex-A53 cores: operation counts from the shape (formulas in :data:`HOST_OPS`, by the
  phase they follow: :func:`host_stage_ops`) at the cores' peak rate (:data:`HOST`): a
  lower bound on their time (optimistic). With ``nonlinear`` ``integer`` the host's GELU
  and the quantization between ffn_in and ffn_out leave it where the accelerator has GELU
  engines, and the softmax with the S dequantization and P quantization where it has
  softmax units (and the attention is on the engines): the schedule's ``gelu`` and
  ``softmax``. The host's integer kernels (LayerNorm, and GELU or softmax without the
  units) are counted as the float ones (an estimate).
* **the step** (``seconds``): the host's work pipelined against the fabric's per piece
  of each phase (its M chunks, attention jobs, ZO-layer branch jobs), a list schedule of
  the engines and ZO layers, the softmax units and the host (:mod:`zoforge.reports.
  overlap`); ``serial_s`` keeps the fabric's and the
  host's sum, the bound if nothing overlapped.
* **energy**: the seconds times the PL's static and dynamic power (the activity model of
  today's 8x8 engine and 4x4 ZO layer, per DSP, scaled to the design's DSPs; the PS and the
  DDR not included).
"""
from __future__ import annotations

from dataclasses import dataclass

from zoforge.boards.registry import get_board
from zoforge.errors import ConfigError
from zoforge.golden.finetune.config import ADAPTED
from functools import lru_cache

from zoforge.hw.accel.plan import ARRAY_SIDES
from zoforge.hw.accel.schedule import (ADAPTED_ORDER, ENGINE, SOFTMAX, Phase, Schedule,
                                       step_schedule)
from zoforge.hw.engine.cycles import engine_job_cycles, engine_stream_parts
from zoforge.hw.softmax.cycles import softmax_job_cycles
from zoforge.hw.softmax.cycles import softmax_stream_bytes
from zoforge.hw.zolayer.cycles import job_cycles
from zoforge.reports.model_shape import ModelShape
from zoforge.reports.overlap import HOST as ON_HOST
from zoforge.reports.overlap import Stage, makespan, step_stages
from zoforge.reports.overlap import schedule as schedule_pieces
from zoforge.reports.power import dynamic_at
from zoforge.reports.step_price import (NONLINEAR_FIGURES, UNIT_FIGURES, engine_fmax,
                                        layer_fmax, link_fmax)
from zoforge.reports.unit_calls import CYCLE_MODEL, zo_job_bytes

__all__ = ["HOST", "HOST_SOURCE", "HOST_OPS", "PhaseCost", "StepPrice", "job_cycles_of",
           "cached_softmax_job_cycles", "design_clocks", "fastest_accelerator", "LAYER_COLS_TRIED",
           "SOFTMAX_UNITS_TRIED", "SOFTMAX_LANES_TRIED", "MOST_SOFTMAX_LANES",
           "ENGINE_ARRAYS_TRIED",
           "transfer_bytes", "price_phase", "price_schedule", "host_ops", "host_stage_ops",
           "host_seconds", "overlapped_seconds", "overlapped_stages", "ddr_sharing_seconds", "STEP_SOURCE", "SERIAL_SOURCE",
           "board_step_fields", "BOARD_STEP_KEYS", "POWER_SCALE_SOURCE"]

#: The PS's application cores on the ZCU102 (XCZU9EG): 4 Cortex-A53 (Xilinx DS891, "Zynq
#: UltraScale+ MPSoC Data Sheet: Overview"), at the ZCU102's default APU clock of 1.2 GHz
#: (Xilinx UG1182, "ZCU102 Evaluation Board User Guide"; DS925 allows up to 1.333 GHz at
#: the -2 speed grade), each at most one 128-bit Advanced SIMD (NEON) fp32 FMA per cycle,
#: 4 lanes (ARM, "Cortex-A53 MPCore Processor Technical Reference Manual", DDI 0500).
HOST = {"cores": 4, "mhz": 1200.0, "lanes": 4}
HOST_SOURCE = ("arm-estimate: 4 Cortex-A53 at 1.2 GHz x 4 fp32 lanes (one NEON FMA per "
               "cycle), a peak-rate bound (optimistic)")
#: fp32 operations per element of each host operation (an FMA is one); exp, erf: a
#: polynomial with range reduction, :data:`TRANSCENDENTAL` operations.
TRANSCENDENTAL = 10
HOST_OPS = {
    "attention products": "2 B L^2 H MACs per block (Q.K^T and P.V, every head)",
    "softmax": f"B heads L^2 x {5 + TRANSCENDENTAL} (scale+mask, max, subtract, exp, sum, "
               "times 1/sum) per block; none on the softmax units (nonlinear integer, "
               "attention engines)",
    "layernorm": "2 M H x 5 (mean, variance, subtract, scale, affine) per block",
    "gelu": f"M F x {3 + TRANSCENDENTAL} (x/sqrt2, erf, 1+, x/2 times) per block; none "
            "with GELU engines (nonlinear integer)",
    "residuals": "2 M H per block",
    "quantize": "per map 3 M K (scale, round, clamp) + M N (dequantize); with GELU engines "
                "not ffn_in's output nor ffn_out's input",
    "pooling": "M H per forward",
    "combine": "M N per adapted map and branch (split mapping: wrap32(XW + Yn))",
    "attention quantize": "attention engines: 3 x 3 M H (q, k, v: scale, round, clamp) + "
                          "B heads L^2 x (1 + 3) (S dequantize, P quantize; none on the "
                          "softmax units) + M H (C dequantize) per block, instead of the "
                          "attention products",
}
#: Power of today's units per DSP at 300 MHz (UNIT_FIGURES: the 8x8 engine's 80 DSP and
#: the 4x4 ZO layer's 40), applied to the design's DSPs.
POWER_SCALE_SOURCE = "activity-model (today's 8x8 engine and 4x4 ZO layer, scaled per DSP)"
_ENGINE_DSP_TODAY, _LAYER_DSP_TODAY = 80, 40


@dataclass(frozen=True)
class PhaseCost:
    """One phase priced: ``cycles`` (its critical path), ``unit_cycles`` (each busy unit's
    sum), ``payload_bytes`` / ``stream_bytes`` (its transfers), and at ``mhz`` and the DDR
    bandwidth ``compute_s``, ``memory_s`` (payload), ``time_s`` = their max, ``bound``."""

    name: str
    cycles: int
    unit_cycles: dict
    payload_bytes: int
    stream_bytes: int
    compute_s: float
    memory_s: float
    time_s: float
    bound: str
    macs: int
    job_cycles: tuple[int, ...] = ()


@dataclass(frozen=True)
class StepPrice:
    """A priced schedule: its phases, the host's seconds, the overlapped step
    (``seconds``, :mod:`zoforge.reports.overlap`), the accelerator's alone (``fabric_s``:
    the same list schedule without the host's work; the softmax units' phases overlap the
    engines') and the step's totals."""

    schedule: Schedule
    phases: tuple[PhaseCost, ...]
    mhz: float
    ddr_bytes_per_s: float
    host_s: float
    seconds: float
    fabric_s: float

    @property
    def cycles(self) -> int:
        return sum(p.cycles for p in self.phases)

    @property
    def phases_s(self) -> float:
        """The phases' roofline times one after the other."""
        return sum(p.time_s for p in self.phases)

    @property
    def serial_s(self) -> float:
        """The accelerator's work (``fabric_s``) and the host's, one after the other."""
        return self.fabric_s + self.host_s

    @property
    def host_exposed_s(self) -> float:
        """The host's seconds the fabric's work does not hide: the step less the fabric."""
        return self.seconds - self.fabric_s

    @property
    def payload_bytes(self) -> int:
        return sum(p.payload_bytes for p in self.phases)

    @property
    def stream_bytes(self) -> int:
        return sum(p.stream_bytes for p in self.phases)


@lru_cache(maxsize=256)
def cached_softmax_job_cycles(config, rows: int, length: int) -> int:
    """Cycles of one job of ``rows`` rows of ``length`` keys on the softmax unit
    ``config`` (a :class:`~zoforge.hw.softmax.config.SoftmaxConfig`): the unit's own model
    (:func:`zoforge.hw.softmax.cycles.softmax_job_cycles`, its CYCLES register; input always
    valid, output always ready), kept for the step's many equal jobs."""
    return softmax_job_cycles(config, rows, length)


# The step's schedules repeat the same jobs and transfers many times (per block, branch and
# head), and the price's search prices tens of schedules: both below are pure functions of
# immutable values (an accelerator, a job or a transfer), kept per distinct argument.
_PRICED_CACHED = 65536


@lru_cache(maxsize=_PRICED_CACHED)
def job_cycles_of(accel, job) -> int:
    """Cycles of one scheduled job from its unit's own model (one source each)."""
    if job.unit == ENGINE:
        gelu = job.kind == "gemm-gelu"
        return engine_job_cycles(accel.engine_config(gelu), job.m, job.k, job.n, gelu)
    if job.unit == SOFTMAX:
        return cached_softmax_job_cycles(accel.softmax_config(), job.m, job.n)
    return job_cycles(accel.layer_config(), job.kind, job.m, job.k, job.n, job.r, job.query)


@lru_cache(maxsize=_PRICED_CACHED)
def transfer_bytes(accel, transfer) -> tuple[int, int]:
    """``(payload, stream)`` bytes of one transfer (module docstring)."""
    t = transfer
    if t.unit == SOFTMAX:
        moved = softmax_stream_bytes(accel.softmax_config(), t.m, t.n)
        return t.payload_bytes, moved["p" if t.write else "scores"]
    if t.unit == ENGINE:
        parts = engine_stream_parts(accel.engine_config(t.gelu), max(t.m, 1), max(t.k, 1),
                                    max(t.n, 1), raw=t.raw, per_channel=not t.raw,
                                    gelu=t.gelu)
        return t.payload_bytes, parts[t.role]
    job = {"x": "load_x", "w": "load_w", "a": "load_a", "master": "load_master",
           "y": "branch"}[t.role]
    return t.payload_bytes, zo_job_bytes(accel.layer_config(), job, t.m, t.k, t.n, t.r)[0]


def price_phase(accel, phase: Phase, mhz: float, ddr_bytes_per_s: float) -> PhaseCost:
    """One phase at ``mhz`` and ``ddr_bytes_per_s`` (module docstring)."""
    each = tuple(job_cycles_of(accel, job) for job in phase.jobs)
    units: dict = {}
    for job, count in zip(phase.jobs, each):
        units[job.unit, job.replica] = units.get((job.unit, job.replica), 0) + count
    cycles = max(units.values())
    moved = [transfer_bytes(accel, t) for t in phase.transfers]
    payload, stream = sum(p for p, _ in moved), sum(s for _, s in moved)
    compute, memory = cycles / (mhz * 1e6), payload / ddr_bytes_per_s
    return PhaseCost(phase.name, cycles, units, payload, stream, compute, memory,
                     max(compute, memory), "memory" if memory > compute else "compute",
                     sum(job.macs for job in phase.jobs), each)


def host_stage_ops(shape: ModelShape, first_adapted: int = 0, mapping: str = "split",
                   attention: str = "host", gelu: bool = False, softmax: bool = False
                   ) -> dict[str, tuple[dict, dict]]:
    """The host's fp32 operations of one step by the phase they follow (``start``: before
    the first), each ``(row-local, per-sequence)`` by :data:`HOST_OPS` (M = tokens, B batch,
    L seq_len, H hidden, F ffn): a block below ``first_adapted`` once, the others once per
    branch (2q); a map's input quantized after the phase before it, its output dequantized
    after its own; the embedding's LayerNorm once; pooling and the head's input per branch
    after the last block; with the ``split`` mapping each adapted map's sum per branch
    (every adapted map is H wide); with ``attention`` ``engines`` the attention's
    (de)quantization instead of its products; ``gelu``: ffn_in's jobs are the engines' GELU
    jobs (no host GELU, no (de)quantization between ffn_in and ffn_out); ``softmax``: the
    softmax units run it (no host softmax, S dequantization or P quantization)."""
    B, L, H, F, M = shape.batch, shape.seq_len, shape.hidden, shape.ffn, shape.tokens
    S, heads = 2 * shape.queries, B * shape.heads * L * L
    adapted = ADAPTED_ORDER[:shape.adapted]
    stages: dict[str, tuple[dict, dict]] = {"start": ({"layernorm": M * H * 5}, {})}

    def add(stage: str, runs: int, row: dict, sequence: dict | None = None) -> None:
        for ops, more in zip(stages.setdefault(stage, ({}, {})), (row, sequence or {})):
            for name, count in more.items():
                ops[name] = ops.get(name, 0) + runs * count

    for block in range(shape.blocks):
        runs = 1 if block < first_adapted else S
        sums = mapping == "split" and block >= first_adapted

        def combine(maps):
            return {"combine": M * H * sum(m in adapted for m in maps)} if sums else {}
        before = f"block{block - 1}.ffn_out" if block else "start"
        add(before, runs, {"quantize": 3 * 3 * M * H})         # q, k, v inputs
        qkv, attn_in = f"block{block}.qkv", {"quantize": 3 * M * H}
        add(qkv, runs, {"quantize": 3 * M * H, **combine(("query", "key", "value"))})
        if attention == "engines":
            add(qkv, runs, {"attention quantize": 9 * M * H})
            if not softmax:
                add(f"block{block}.scores", runs, {}, {
                    "attention quantize": 4 * heads, "softmax": heads * (5 + TRANSCENDENTAL)})
            add(f"block{block}.context", runs, {"attention quantize": M * H, **attn_in})
        else:
            add(qkv, runs, attn_in, {"attention products": 2 * B * L * L * H,
                                     "softmax": heads * (5 + TRANSCENDENTAL)})
        add(f"block{block}.attn_out", runs, {"quantize": M * H + 3 * M * H,
                                             **combine(("attn_out",)), "residuals": M * H,
                                             "layernorm": M * H * 5})
        if not gelu:
            add(f"block{block}.ffn_in", runs, {"quantize": M * F + 3 * M * F,
                                               "gelu": M * F * (3 + TRANSCENDENTAL)})
        add(f"block{block}.ffn_out", runs, {"quantize": M * H, "residuals": M * H,
                                            "layernorm": M * H * 5})
    add(f"block{shape.blocks - 1}.ffn_out", S, {}, {"pooling": M * H,
                                                    "quantize": 3 * B * H})  # the head's
    return stages


def host_ops(shape: ModelShape, first_adapted: int = 0, mapping: str = "split",
             attention: str = "host", gelu: bool = False, softmax: bool = False
             ) -> dict[str, int]:
    """fp32 operations of the host's work in one step: :func:`host_stage_ops` summed by
    operation (``combine`` 0 with the ``layer`` mapping)."""
    ops = {"combine": 0}
    for row, sequence in host_stage_ops(shape, first_adapted, mapping, attention, gelu,
                                        softmax).values():
        for name, count in (*row.items(), *sequence.items()):
            ops[name] = ops.get(name, 0) + count
    return ops


def host_seconds(ops: dict[str, int]) -> float:
    """Seconds of ``ops`` at the host's peak rate (:data:`HOST`)."""
    return sum(ops.values()) / (HOST["cores"] * HOST["mhz"] * 1e6 * HOST["lanes"])


def _schedule_host_ops(schedule: Schedule) -> dict[str, tuple[dict, dict]]:
    return host_stage_ops(schedule.shape, schedule.first_adapted, schedule.mapping,
                          schedule.attention, schedule.gelu, schedule.softmax)


def price_schedule(schedule: Schedule, mhz: float, ddr_bytes_per_s: float,
                   softmax_mhz: float | None = None) -> StepPrice:
    """The schedule priced at ``mhz`` (the softmax units' phases at ``softmax_mhz``,
    default ``mhz``) and the DDR bandwidth, the host's work overlapped with the fabric's
    per piece (:func:`overlapped_seconds`)."""
    softmax_mhz = mhz if softmax_mhz is None else softmax_mhz
    for name, value in (("mhz", mhz), ("softmax_mhz", softmax_mhz)):
        if not value > 0:
            raise ConfigError(name, "a frequency > 0", value)
    if not ddr_bytes_per_s > 0:
        raise ConfigError("ddr_bytes_per_s", "a bandwidth > 0", ddr_bytes_per_s)
    phases = tuple(price_phase(schedule.accel, p, softmax_mhz if all(
        job.unit == SOFTMAX for job in p.jobs) else mhz, ddr_bytes_per_s)
                   for p in schedule.phases)
    host = host_seconds(host_ops(schedule.shape, schedule.first_adapted, schedule.mapping,
                                 schedule.attention, schedule.gelu, schedule.softmax))
    return StepPrice(schedule, phases, mhz, ddr_bytes_per_s, host,
                     overlapped_seconds(schedule, phases),
                     overlapped_seconds(schedule, phases, host=False))


def overlapped_stages(schedule: Schedule, phases, host: bool = True) -> list[Stage]:
    """The step's stages (:func:`zoforge.reports.overlap.step_stages`): the host's work
    after each phase (:func:`host_stage_ops`; none without ``host``) and the fabric's
    pieces of ``phases`` (the schedule's, priced), each phase's DDR share its memory
    seconds over its roofline seconds; a linked scores phase feeding its softmax phase
    (``Stage.feeds``)."""
    shape = schedule.shape
    work = {name: (host_seconds(row) * host, host_seconds(sequence) * host)
            for name, (row, sequence) in _schedule_host_ops(schedule).items()}
    return step_stages(
        [(phase.name, phase.jobs, cost.job_cycles, cost.time_s,
          work.get(phase.name, (0.0, 0.0)), cost.memory_s / cost.time_s if cost.time_s else 0.0)
         for phase, cost in zip(schedule.phases, phases)],
        work["start"][0], shape.seq_len, schedule.linked)


def overlapped_seconds(schedule: Schedule, phases, host: bool = True) -> float:
    """The step with the host's work pipelined against the fabric's pieces
    (:func:`overlapped_stages`; :mod:`zoforge.reports.overlap`: the pieces, their
    dependencies, the list schedule, the DDR shared)."""
    return makespan(overlapped_stages(schedule, phases, host))


def ddr_sharing_seconds(stages) -> tuple[float, float]:
    """``(lost, idle)``: the seconds the accelerator's pieces (the engines' and ZO layers',
    the softmax units') took past their time alone, the DDR shared, and the seconds the
    engines and ZO layers stood idle in the overlapped step of ``stages``."""
    placed = schedule_pieces(stages)
    end = max(piece.end for piece in placed)
    lost = sum(piece.end - piece.start - stages[piece.stage].fabric[piece.piece]
               for piece in placed if piece.resource != ON_HOST)
    busy = sum(piece.end - piece.start for piece in placed if piece.resource == "fabric")
    return lost, end - busy


#: The source of ``seconds_per_step_at_fmax`` (the priced step).
STEP_SOURCE = "cycle-model + arm-estimate, host overlapped per piece (list schedule)"
#: The source of ``board_serial_seconds_per_step`` (the fabric's and the host's sum).
SERIAL_SOURCE = "cycle-model + arm-estimate, host serial"

BOARD_STEP_KEYS = ("cycles_per_step", "cycles_source", "seconds_per_step_at_fmax",
                   "seconds_source", "board_serial_seconds_per_step", "serial_source",
                   "board_fabric_seconds_per_step", "board_host_seconds_per_step",
                   "board_host_exposed_seconds_per_step", "board_host_source", "fmax_mhz",
                   "fmax_source", "dsp", "gops_per_dsp", "gops_per_device_dsp",
                   "ddr_bytes_per_step", "ddr_stream_bytes_per_step", "ddr_source", "tops",
                   "joules_per_step", "power_source", "tokens_per_second", "macs_per_step",
                   "accelerator", "attention_on_fabric_seconds_saved", "adapter_mapping")


def _attention_on_engines(price: StepPrice) -> float:
    """Host seconds the switch to engine attention would save minus the engine seconds it
    would add: the attention products' host time, against their raw engine jobs (B x heads
    per block and branch, split across the engines) at ``price``'s clock (a rough model:
    the host's added (de)quantization and the jobs' DDR time left out; the schedule with
    ``attention`` ``engines`` prices them). 0 when the schedule's attention is already on
    the engines."""
    shape, accel, sched = price.schedule.shape, price.schedule.accel, price.schedule
    if sched.attention == "engines":
        return 0.0
    S, d, L = 2 * shape.queries, shape.hidden // shape.heads, shape.seq_len
    runs = sched.first_adapted + S * (shape.blocks - sched.first_adapted)
    engine = accel.engine_config()
    per_run = shape.batch * shape.heads * (engine_job_cycles(engine, L, d, L)
                                           + engine_job_cycles(engine, L, L, d))
    cycles = runs * -(-per_run // accel.engines)
    host = host_seconds({"a": runs * 2 * shape.batch * L * L * shape.hidden})
    return host - cycles / (price.mhz * 1e6)


#: The ZO layer widths (columns: tokens side by side) :func:`fastest_accelerator` tries.
LAYER_COLS_TRIED = (4, 8, 16)
#: The engine arrays (rows, columns) :func:`fastest_accelerator` tries beside the planner's
#: (which sizes for the most MACs: a larger array clocks lower, ``engine_fmax``), each with
#: the most engines that fit: every pair of the planner's sides.
ENGINE_ARRAYS_TRIED = tuple((rows, cols) for rows in ARRAY_SIDES for cols in ARRAY_SIDES)
#: The softmax unit counts and lanes :func:`fastest_accelerator` tries (nonlinear integer,
#: attention on the engines), and the most lanes of its widest units beside the plain
#: design's engines.
SOFTMAX_UNITS_TRIED = (0, 1, 2, 3)
SOFTMAX_LANES_TRIED = (8, 16)
MOST_SOFTMAX_LANES = 16


def design_clocks(board: str, accel, mhz: float | None = None) -> tuple[float, float, str]:
    """``(mhz, softmax_mhz, source)``: the clock of ``accel``'s engines and ZO layers and
    that of its softmax units on ``board``: ``mhz`` for both when given; else the lower of
    the board's yosys-estimate Fmax of its engines and of its ZO layers, each by its size
    (:func:`~zoforge.reports.step_price.engine_fmax`,
    :func:`~zoforge.reports.step_price.layer_fmax`: a board-sized array clocks lower), and
    the i-GELU lanes' where the design has GELU engines, the attention links' where it has
    them (:func:`~zoforge.reports.step_price.link_fmax`, by their lanes: their write side
    runs at the engines' clock), and the softmax units' own
    (:data:`~zoforge.reports.step_price.NONLINEAR_FIGURES`; the source names it where the
    design has them)."""
    if mhz is not None:
        return mhz, mhz, "given"
    if board not in UNIT_FIGURES:
        raise ConfigError("board", "one of " + ", ".join(UNIT_FIGURES) + " (or give mhz)",
                          board)
    fmax, source = min(engine_fmax(board, accel.engine_rows * accel.engine_cols),
                       layer_fmax(board, accel.layer_rows * accel.layer_cols),
                       key=lambda clock: clock[0])
    nonlinear = NONLINEAR_FIGURES[board]
    if accel.gelu_engines and nonlinear["gelu_fmax_mhz"] < fmax:
        fmax = nonlinear["gelu_fmax_mhz"]
        source = nonlinear["fmax_source"] + " (the GELU engines)"
    if accel.link:
        link, link_source = link_fmax(board, accel.softmax_lanes)
        if link < fmax:
            fmax, source = link, link_source + " (the attention links)"
    softmax = nonlinear["softmax_fmax_mhz"]
    if accel.softmax_units:
        source += (f"; the softmax units at {softmax:g} MHz, their own clock "
                   f"({nonlinear['fmax_source']})")
    return fmax, softmax, source


def _price(board, shape, accel, cfg, mapping: str, mhz: float | None) -> StepPrice:
    """``cfg``'s step on ``accel`` at its clocks (:func:`design_clocks`)."""
    engines_mhz, softmax_mhz, _ = design_clocks(board.name, accel, mhz)
    return price_schedule(step_schedule(shape, accel, cfg.first_adapted, mapping,
                                        cfg.attention, cfg.nonlinear),
                          engines_mhz, board.ddr_bytes_per_s, softmax_mhz)


def fastest_accelerator(board, shape: ModelShape, cfg, mapping: str, mhz: float | None = None):
    """The planner's design (:func:`zoforge.hw.accel.plan.plan_accelerator`) with the
    shortest modelled step among one ZO layer of ``cfg.layer_rows`` rows (its rows set the
    perturbation order and one layer keeps one generator stream, so the golden step stays
    the accelerator's) and each width of :data:`LAYER_COLS_TRIED`, the engines filling the
    rest of the budget; with the split mapping the layer's K capacity is the rank. Then,
    with the best layer, each engine array of :data:`ENGINE_ARRAYS_TRIED` (the most engines
    of it that fit; the planner's own array is the one with the most MACs). With
    ``cfg.nonlinear`` ``integer``, then, that design's arrays and layer with each count and
    width of softmax units (:data:`SOFTMAX_UNITS_TRIED`, :data:`SOFTMAX_LANES_TRIED`, with
    the attention on the engines; each without and with the attention links, ``link``,
    their rows the sequence's: docs/link.md), the
    engines re-planned around them, and for each count the widest units (at most
    :data:`MOST_SOFTMAX_LANES` lanes) that fit beside the plain design's engines as they
    are; each without GELU engines and with every engine one (the most that fit; a part of
    them would take ffn_in's whole map alone: MiniLM with 1 GELU engine of 5 is 1.8 times
    slower than with none, docs/accelerator-cost.md). The planner sizes for resources; this
    picks among its answers by time (the step with ``cfg.attention`` and
    ``cfg.nonlinear`` at ``mhz``, default each design's clocks, :func:`design_clocks`), the
    way FINN folds to a throughput. Designs that do not fit are skipped; none fitting: the
    planner's one-line error for the narrowest layer."""
    # the planner (Amaranth's unit designs for their memories) only when planning
    from zoforge.hw.accel.plan import budget, over_budget, plan_accelerator
    fixed = {"layers": 1, "layer_rows": cfg.layer_rows}
    if mapping == "split":
        fixed["layer_max_k"] = shape.rank
    best, best_s, first_error = None, None, None
    priced: dict = {}           # a design the passes reach again is priced once

    def consider(accel=None, **fields) -> bool:
        nonlocal best, best_s, first_error
        try:
            accel = accel or plan_accelerator(board, shape, **fixed, **fields)
            if accel not in priced:
                priced[accel] = _price(board, shape, accel, cfg, mapping, mhz).seconds
        except ConfigError as error:     # no design, or its links cannot take the scores
            first_error = first_error or error
            return False
        seconds = priced[accel]
        if best_s is None or seconds < best_s:
            best, best_s = accel, seconds
        return True

    for cols in LAYER_COLS_TRIED:
        consider(layer_cols=cols)
    if best is None:
        raise first_error
    planned, layer_cols = (best.engine_rows, best.engine_cols), best.layer_cols
    for rows, cols in ENGINE_ARRAYS_TRIED:
        if (rows, cols) != planned:
            consider(layer_cols=layer_cols, engine_rows=rows, engine_cols=cols)
    if cfg.nonlinear == "integer":
        arrays = {"layer_cols": best.layer_cols, "engine_rows": best.engine_rows,
                  "engine_cols": best.engine_cols}
        softmax = [(units, lanes) for units in SOFTMAX_UNITS_TRIED
                   for lanes in (SOFTMAX_LANES_TRIED if units else (8,))
                   if units == 0 or cfg.attention == "engines"]
        plain, limits = best, budget(board)

        def fits(accel) -> bool:
            return over_budget(accel, limits) is None
        links = (False, True) if cfg.attention == "engines" else (False,)
        for units in SOFTMAX_UNITS_TRIED[1:] if cfg.attention == "engines" else ():
            for link in links:
                widest = [_variant(plain, softmax_units=units, softmax_lanes=lanes, link=link,
                                   link_max_len=shape.seq_len if link else plain.link_max_len)
                          for lanes in range(MOST_SOFTMAX_LANES, 0, -1)]
                consider(next((accel for accel in widest if accel and fits(accel)), None)
                         or plain)
        for units, lanes in softmax:
            if units:
                for link in links:
                    consider(softmax_units=units, softmax_lanes=lanes, link=link, **arrays)
            for engines in range(best.engines, 0, -1):       # all engines GELU engines
                if consider(engines=engines, gelu_engines=engines, softmax_units=units,
                            softmax_lanes=lanes, **arrays):
                    break
    return best


def _variant(accel, **fields):
    """``accel`` with ``fields`` changed, None where that is not a valid design."""
    try:
        return accel.replace(**fields)
    except ConfigError:
        return None


def board_step_fields(cfg, hidden: int, ffn: int, heads: int, classes: int, board: str,
                      accel=None, mhz: float | None = None, mapping: str = "split") -> dict:
    """The step of ``cfg`` (a :class:`~zoforge.golden.finetune.config.FinetuneConfig`) on a
    board-sized accelerator, JSON-ready (:data:`BOARD_STEP_KEYS`): ``accel`` (an
    ``AcceleratorConfig``; default :func:`fastest_accelerator` for the board and shape)
    at ``mhz`` (default: the board's yosys-estimate Fmax of today's units,
    :data:`~zoforge.reports.step_price.UNIT_FIGURES`), the adapters as ``mapping``
    (:data:`~zoforge.hw.accel.schedule.MAPPINGS`), Q·K^T and P·V where ``cfg.attention``
    says (``attention_on_fabric_seconds_saved``: the modelled gain of moving them to the
    engines, 0 when they are there). ``seconds_per_step_at_fmax`` is the step with the
    host's work overlapped per piece (:func:`overlapped_seconds`; its exposed part
    ``board_host_exposed_seconds_per_step``, the serial sum
    ``board_serial_seconds_per_step``); ``gops_per_dsp`` = 2 x MACs / seconds / dsp / 1e9,
    ``gops_per_device_dsp`` the same per DSP of the board's device (the issue's goal; None
    for a board without a DSP count);
    ``tokens_per_second`` = forward tokens (2q x batch x seq_len) per second."""
    target = get_board(board)
    if target.ddr_bytes_per_s is None:
        raise ConfigError("board", "a board with a DDR bandwidth fact", board)
    figures = UNIT_FIGURES.get(board)
    if mhz is None and figures is None:
        raise ConfigError("board", "one of " + ", ".join(UNIT_FIGURES) + " (or give mhz)",
                          board)
    shape = ModelShape(blocks=cfg.blocks, seq_len=cfg.seq_len, batch=cfg.batch,
                       rank=cfg.rank, adapted=len(ADAPTED), queries=cfg.queries,
                       hidden=hidden, ffn=ffn, heads=heads, classes=classes)
    if accel is None:
        accel = fastest_accelerator(target, shape, cfg, mapping, mhz)
    fmax, _, fmax_source = design_clocks(board, accel, mhz)
    price = _price(target, shape, accel, cfg, mapping, mhz)
    seconds, macs = price.seconds, price.schedule.macs
    static = target.static_power_w if figures is None else figures["static_w"]
    dynamic_today = (figures or UNIT_FIGURES["zcu102"])["dynamic_w"] / (
        _ENGINE_DSP_TODAY + _LAYER_DSP_TODAY)
    dynamic = dynamic_at(dynamic_today * accel.dsp, (figures or UNIT_FIGURES["zcu102"])
                         ["power_at_mhz"], fmax)
    return {
        "cycles_per_step": price.cycles, "cycles_source": CYCLE_MODEL,
        "seconds_per_step_at_fmax": seconds, "seconds_source": STEP_SOURCE,
        "board_serial_seconds_per_step": price.serial_s, "serial_source": SERIAL_SOURCE,
        "board_fabric_seconds_per_step": price.fabric_s,
        "board_host_seconds_per_step": price.host_s,
        "board_host_exposed_seconds_per_step": price.host_exposed_s,
        "board_host_source": HOST_SOURCE,
        "fmax_mhz": fmax, "fmax_source": fmax_source, "dsp": accel.dsp,
        "gops_per_dsp": 2 * macs / seconds / accel.dsp / 1e9,
        "gops_per_device_dsp": (2 * macs / seconds / target.capacities["DSP"] / 1e9
                                if target.capacities.get("DSP") else None),
        "ddr_bytes_per_step": price.payload_bytes,
        "ddr_stream_bytes_per_step": price.stream_bytes, "ddr_source": target.ddr_source,
        "tops": 2 * macs / seconds / 1e12,
        "joules_per_step": seconds * (static + dynamic), "power_source": POWER_SCALE_SOURCE,
        "tokens_per_second": 2 * shape.queries * shape.tokens / seconds,
        "macs_per_step": macs, "accelerator": accel.to_dict(),
        "attention_on_fabric_seconds_saved": _attention_on_engines(price),
        "adapter_mapping": mapping,
    }
