"""What one ZO step costs on a board-sized accelerator (issue 32): the schedule priced.

The schedule is :func:`zoforge.hw.accel.schedule.step_schedule`; this module prices it,
every number with its source label:

* **cycles** (``cycle-model``): each job's cycles from its unit's own model (the engine:
  :func:`zoforge.hw.engine.cycles.engine_job_cycles`; the ZO layer:
  :func:`zoforge.hw.zolayer.cycles.job_cycles`); a phase's cycles are its critical path,
  the busiest unit's jobs one after the other (the units work side by side); the step's
  cycles are the phases' sum. A unit's next job starts when the last ends (no gaps: the host
  issues the next job's CTRL write ahead, the job's weights stream in while it computes).
* **DDR bytes** (:func:`transfer_bytes`): each :class:`~zoforge.hw.accel.schedule.Transfer`
  once (broadcast), ``payload`` = the values packed (int8 X, W, A and int8 Y in bytes;
  int32 Y and tables 4 bytes; the 24-bit master 3 bytes) and ``stream`` = as the RTL's
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
  lower bound on their time (optimistic).
* **the step** (``seconds``): the host's work pipelined against the fabric's per piece
  of each phase (its M chunks, attention jobs, ZO-layer branch jobs), a two-resource
  list schedule (:mod:`zoforge.reports.overlap`); ``serial_s`` keeps the fabric's and the
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
from zoforge.hw.accel.schedule import (ADAPTED_ORDER, ENGINE, Phase, Schedule,
                                       step_schedule)
from zoforge.hw.engine.cycles import engine_job_cycles, engine_stream_parts
from zoforge.hw.zolayer.cycles import job_cycles
from zoforge.reports.model_shape import ModelShape
from zoforge.reports.overlap import makespan, step_stages
from zoforge.reports.power import dynamic_at
from zoforge.reports.step_price import UNIT_FIGURES
from zoforge.reports.unit_calls import CYCLE_MODEL, zo_job_bytes

__all__ = ["HOST", "HOST_SOURCE", "HOST_OPS", "PhaseCost", "StepPrice", "job_cycles_of",
           "transfer_bytes", "price_phase", "price_schedule", "host_ops", "host_stage_ops",
           "host_seconds", "overlapped_seconds", "STEP_SOURCE", "SERIAL_SOURCE",
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
               "times 1/sum) per block",
    "layernorm": "2 M H x 5 (mean, variance, subtract, scale, affine) per block",
    "gelu": f"M F x {3 + TRANSCENDENTAL} (x/sqrt2, erf, 1+, x/2 times) per block",
    "residuals": "2 M H per block",
    "quantize": "per map 3 M K (scale, round, clamp) + M N (dequantize) ",
    "pooling": "M H per forward",
    "combine": "M N per adapted map and branch (split mapping: wrap32(XW + Yn))",
    "attention quantize": "attention engines: 3 x 3 M H (q, k, v: scale, round, clamp) + "
                          "B heads L^2 x (1 + 3) (S dequantize, P quantize) + M H (C "
                          "dequantize) per block, instead of the attention products",
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
    (``seconds``, :mod:`zoforge.reports.overlap`) and the step's totals."""

    schedule: Schedule
    phases: tuple[PhaseCost, ...]
    mhz: float
    ddr_bytes_per_s: float
    host_s: float
    seconds: float

    @property
    def cycles(self) -> int:
        return sum(p.cycles for p in self.phases)

    @property
    def fabric_s(self) -> float:
        return sum(p.time_s for p in self.phases)

    @property
    def serial_s(self) -> float:
        """Fabric (roofline per phase) plus the host's work, one after the other."""
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


def job_cycles_of(accel, job) -> int:
    """Cycles of one scheduled job from its unit's own model (one source each)."""
    if job.unit == ENGINE:
        return engine_job_cycles(accel.engine_config(), job.m, job.k, job.n)
    return job_cycles(accel.layer_config(), job.kind, job.m, job.k, job.n, job.r, job.query)


def transfer_bytes(accel, transfer) -> tuple[int, int]:
    """``(payload, stream)`` bytes of one transfer (module docstring)."""
    t = transfer
    if t.unit == ENGINE:
        parts = engine_stream_parts(accel.engine_config(), max(t.m, 1), max(t.k, 1),
                                    max(t.n, 1), raw=t.raw, per_channel=not t.raw)
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
                   attention: str = "host") -> dict[str, tuple[dict, dict]]:
    """The host's fp32 operations of one step by the phase they follow (``start``: before
    the first), each ``(row-local, per-sequence)`` by :data:`HOST_OPS` (M = tokens, B batch,
    L seq_len, H hidden, F ffn): a block below ``first_adapted`` once, the others once per
    branch (2q); a map's input quantized after the phase before it, its output dequantized
    after its own; the embedding's LayerNorm once; pooling and the head's input per branch
    after the last block; with the ``split`` mapping each adapted map's sum per branch
    (every adapted map is H wide); with ``attention`` ``engines`` the attention's
    (de)quantization instead of its products."""
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
            add(f"block{block}.scores", runs, {}, {"attention quantize": 4 * heads,
                                                  "softmax": heads * (5 + TRANSCENDENTAL)})
            add(f"block{block}.context", runs, {"attention quantize": M * H, **attn_in})
        else:
            add(qkv, runs, attn_in, {"attention products": 2 * B * L * L * H,
                                     "softmax": heads * (5 + TRANSCENDENTAL)})
        add(f"block{block}.attn_out", runs, {"quantize": M * H + 3 * M * H,
                                             **combine(("attn_out",)), "residuals": M * H,
                                             "layernorm": M * H * 5})
        add(f"block{block}.ffn_in", runs, {"quantize": M * F + 3 * M * F,
                                           "gelu": M * F * (3 + TRANSCENDENTAL)})
        add(f"block{block}.ffn_out", runs, {"quantize": M * H, "residuals": M * H,
                                            "layernorm": M * H * 5})
    add(f"block{shape.blocks - 1}.ffn_out", S, {}, {"pooling": M * H,
                                                    "quantize": 3 * B * H})  # the head's
    return stages


def host_ops(shape: ModelShape, first_adapted: int = 0, mapping: str = "split",
             attention: str = "host") -> dict[str, int]:
    """fp32 operations of the host's work in one step: :func:`host_stage_ops` summed by
    operation (``combine`` 0 with the ``layer`` mapping)."""
    ops = {"combine": 0}
    for row, sequence in host_stage_ops(shape, first_adapted, mapping, attention).values():
        for name, count in (*row.items(), *sequence.items()):
            ops[name] = ops.get(name, 0) + count
    return ops


def host_seconds(ops: dict[str, int]) -> float:
    """Seconds of ``ops`` at the host's peak rate (:data:`HOST`)."""
    return sum(ops.values()) / (HOST["cores"] * HOST["mhz"] * 1e6 * HOST["lanes"])


def price_schedule(schedule: Schedule, mhz: float, ddr_bytes_per_s: float) -> StepPrice:
    """The schedule priced at ``mhz`` and the DDR bandwidth, the host's work overlapped
    with the fabric's per piece (:func:`overlapped_seconds`)."""
    if not mhz > 0:
        raise ConfigError("mhz", "a frequency > 0", mhz)
    if not ddr_bytes_per_s > 0:
        raise ConfigError("ddr_bytes_per_s", "a bandwidth > 0", ddr_bytes_per_s)
    phases = tuple(price_phase(schedule.accel, p, mhz, ddr_bytes_per_s)
                   for p in schedule.phases)
    host = host_seconds(host_ops(schedule.shape, schedule.first_adapted, schedule.mapping,
                                 schedule.attention))
    return StepPrice(schedule, phases, mhz, ddr_bytes_per_s, host,
                     overlapped_seconds(schedule, phases))


def overlapped_seconds(schedule: Schedule, phases) -> float:
    """The step with the host's work after each phase (:func:`host_stage_ops`) pipelined
    against the fabric's pieces of ``phases`` (the schedule's, priced):
    :mod:`zoforge.reports.overlap` (the pieces, their dependencies, the recurrence)."""
    shape = schedule.shape
    work = {name: (host_seconds(row), host_seconds(sequence)) for name, (row, sequence) in
            host_stage_ops(shape, schedule.first_adapted, schedule.mapping,
                           schedule.attention).items()}
    return makespan(step_stages(
        [(phase.name, phase.jobs, cost.job_cycles, cost.time_s,
          work.get(phase.name, (0.0, 0.0))) for phase, cost in zip(schedule.phases, phases)],
        work["start"][0], shape.seq_len))


#: The source of ``seconds_per_step_at_fmax`` (the priced step).
STEP_SOURCE = "cycle-model + arm-estimate, host overlapped per piece (list schedule)"
#: The source of ``board_serial_seconds_per_step`` (the fabric's and the host's sum).
SERIAL_SOURCE = "cycle-model + arm-estimate, host serial"

BOARD_STEP_KEYS = ("cycles_per_step", "cycles_source", "seconds_per_step_at_fmax",
                   "seconds_source", "board_serial_seconds_per_step", "serial_source",
                   "board_fabric_seconds_per_step", "board_host_seconds_per_step",
                   "board_host_exposed_seconds_per_step", "board_host_source", "fmax_mhz", "fmax_source", "dsp", "gops_per_dsp",
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


def fastest_accelerator(board, shape: ModelShape, cfg, mapping: str, mhz: float):
    """The planner's design (:func:`zoforge.hw.accel.plan.plan_accelerator`) with the
    shortest modelled step among one ZO layer of ``cfg.layer_rows`` rows (its rows set the
    perturbation order and one layer keeps one generator stream, so the golden step stays
    the accelerator's) and each width of :data:`LAYER_COLS_TRIED`, the engines filling the
    rest of the budget; with the split mapping the layer's K capacity is the rank. The
    planner sizes for resources; this picks among its answers by time (the step with
    ``cfg.attention``), the way FINN folds to a throughput. Widths that do not fit are
    skipped; none fitting: the planner's one-line error for the narrowest."""
    # the planner (Amaranth's unit designs for their memories) only when planning
    from zoforge.hw.accel.plan import plan_accelerator
    fixed = {"layers": 1, "layer_rows": cfg.layer_rows}
    if mapping == "split":
        fixed["layer_max_k"] = shape.rank
    best, best_s, first_error = None, None, None
    for cols in LAYER_COLS_TRIED:
        try:
            accel = plan_accelerator(board, shape, layer_cols=cols, **fixed)
        except ConfigError as error:
            first_error = first_error or error
            continue
        seconds = price_schedule(step_schedule(shape, accel, cfg.first_adapted, mapping,
                                               cfg.attention),
                                 mhz, board.ddr_bytes_per_s).seconds
        if best_s is None or seconds < best_s:
            best, best_s = accel, seconds
    if best is None:
        raise first_error
    return best


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
    ``board_serial_seconds_per_step``); ``gops_per_dsp`` = 2 x MACs / seconds / dsp / 1e9;
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
    fmax, fmax_source = (mhz, "given") if mhz is not None else \
        (figures["fmax_mhz"], figures["fmax_source"] + " (today's units)")
    if accel is None:
        accel = fastest_accelerator(target, shape, cfg, mapping, fmax)
    price = price_schedule(step_schedule(shape, accel, cfg.first_adapted, mapping,
                                         cfg.attention), fmax, target.ddr_bytes_per_s)
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
        "ddr_bytes_per_step": price.payload_bytes,
        "ddr_stream_bytes_per_step": price.stream_bytes, "ddr_source": target.ddr_source,
        "tops": 2 * macs / seconds / 1e12,
        "joules_per_step": seconds * (static + dynamic), "power_source": POWER_SCALE_SOURCE,
        "tokens_per_second": 2 * shape.queries * shape.tokens / seconds,
        "macs_per_step": macs, "accelerator": accel.to_dict(),
        "attention_on_fabric_seconds_saved": _attention_on_engines(price),
        "adapter_mapping": mapping,
    }
