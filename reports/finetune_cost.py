"""Whole-model cost of one ZO fine-tuning step of MiniLM on the accelerator (issue 20).

The step is the schedule of the shared finetune spec: per query a + and a - forward (every
linear of every block and the head; the query and value maps on the ZO layer as adapter
calls, the others on the GEMM engine) and one update walk over the adapters. This module
prices it from operation counts:

* **cycle model** (source label ``cycle-model``): :func:`engine_job_cycles` (the engine's
  own model, :mod:`zoforge.hw.engine.cycles`, re-exported here with
  :func:`engine_job_extra` and :func:`engine_job_bytes`),
  :func:`zo_job_cycles`, and their sum over the step, :func:`predicted_step_cycles`. The
  structure is the hardware's (stream beats, tiles at least ``2R + C`` apart, one word per
  cycle for loads and walks); the few fixed cycles per job (pipeline fill and drain) are
  :func:`engine_job_extra`, read from co-simulation of small shapes, and the ZO layer's
  own cycle model (:mod:`zoforge.hw.zolayer.cycles`). :func:`measure_engine_jobs` and :func:`measure_adapter_jobs` run the same jobs
  on the RTL (the job server) for the check (``benchmarks/bench_finetune_cost.py``);
* **DDR traffic and roofline**: the bytes each call streams, as the streams are built
  (``stream_bytes``: whole beats, an int8 in a 32-bit lane of the ZO layer counts 4 bytes)
  and as packed values (``payload_bytes``), and :func:`roofline`: time = max(compute
  cycles / f, bytes / DDR bandwidth) per job, with the board's DDR fact;
* **on-chip memory bits** of both units (:func:`memory_bits`);
* **time and energy per step** at a given clock, static and dynamic energy apart, the
  power at the clock of the time (:func:`step_time_energy`);
* **peak memory, ZO against backprop LoRA** (:func:`zo_peak_memory`,
  :func:`backprop_peak_memory`), with the accounting in their docstrings.

Not in the cycles: the host's work between jobs (its register writes, the per-column table
writes over AXI4-Lite (counted as ``table_words``), the gradient, softmax, LayerNorm, GELU,
the attention products Q·K^T and P·V, which are not ``nn.Linear`` maps and run on the host;
their MACs are :attr:`StepCost.host_macs`), and no two jobs overlap.
"""
from __future__ import annotations

from dataclasses import dataclass

from zoforge.errors import ConfigError, check_int_range
from zoforge.golden.zolayer import Formats, ZoLayerConfig, layer_config
from zoforge.hw.engine.config import MAX_DIM, EngineConfig
# the engine's job model lives beside the engine (issue 32); re-exported here
from zoforge.hw.engine.cycles import engine_job_bytes, engine_job_cycles, engine_job_extra
from zoforge.hw.zolayer.cycles import job_cycles
from zoforge.hw.zolayer.layouts import token_pack
from zoforge.hw.zolayer.registers import JOBS
from zoforge.reports.power import dynamic_at

__all__ = ["UNIT_FIGURES", "ModelShape", "model_shape", "CallCost", "StepCost", "RooflineRow",
           "ADAPTER_CALL",
           "UPDATE_WALK", "engine_job_extra", "ZO_JOBS", "CYCLE_MODEL", "COSIM",
           "model_engine_config", "model_layer_config", "engine_job_cycles", "engine_job_bytes",
           "zo_job_cycles", "zo_job_bytes", "adapter_call", "update_walk", "step_calls",
           "predicted_step_cycles", "roofline", "memory_bits", "step_time_energy",
           "zo_peak_memory", "backprop_peak_memory", "measure_engine_jobs",
           "measure_adapter_jobs", "MAX_BLOCKS", "ATTENTION_MAPS", "UnitsClockPower",
           "units_clock_power"]

CYCLE_MODEL = "cycle-model"
COSIM = "co-simulation"

MAX_BLOCKS = 6                         # all-MiniLM-L6-v2's encoder blocks
ATTENTION_MAPS = ("query", "value", "key", "attn_out")   # adapted first: query, value
ADAPTER_CALL = ("load_w", "load_a", "load_master", "load_x", "frozen_w", "frozen_a", "branch")
UPDATE_WALK = ("load_master", "accumulate", "apply", "read_master")


#: The ZO layer's jobs (its register map's).
ZO_JOBS = tuple(JOBS)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class ModelShape:
    """The fine-tuned model and the step: MiniLM's first ``blocks`` encoder blocks
    (hidden, ffn, heads), ``batch`` sequences of ``seq_len`` tokens (tokens M = batch x
    seq_len), LoRA-FA rank ``rank`` on ``adapted`` attention maps per block (query, value,
    key, attn_out in that order), a linear head of ``classes``, ``queries`` q per step."""

    blocks: int = 6
    seq_len: int = 128
    batch: int = 8
    rank: int = 8
    adapted: int = 2
    queries: int = 2
    hidden: int = 384
    ffn: int = 1536
    heads: int = 12
    classes: int = 2

    def __post_init__(self):
        check_int_range("blocks", self.blocks, 1, MAX_BLOCKS)
        check_int_range("seq_len", self.seq_len, 1, 4096)
        check_int_range("batch", self.batch, 1, 4096)
        check_int_range("rank", self.rank, 1, 1024)
        check_int_range("adapted", self.adapted, 1, len(ATTENTION_MAPS))
        check_int_range("queries", self.queries, 1, Formats.MAX_QUERIES)
        check_int_range("hidden", self.hidden, 1, 4096)
        check_int_range("ffn", self.ffn, 1, MAX_DIM)
        check_int_range("heads", self.heads, 1, self.hidden)
        check_int_range("classes", self.classes, 1, 4096)
        if self.hidden % self.heads:
            raise ConfigError("heads", f"a divisor of hidden = {self.hidden}", self.heads)
        if self.tokens > 4096:
            raise ConfigError("batch", f"at most {4096 // self.seq_len} with seq_len "
                              f"{self.seq_len} (tokens batch x seq_len <= 4096)", self.batch)

    @property
    def tokens(self) -> int:
        return self.batch * self.seq_len

    @property
    def adapters(self) -> int:
        """J: adapters in the model."""
        return self.blocks * self.adapted


@dataclass(frozen=True)
class CallCost:
    """One kind of call of the step: ``count`` calls per step, each ``cycles`` (of its
    ``unit``: ``engine`` or ``zo-layer``; ``shape``: M, K, N, with r for an adapter call,
    K, N, r for an update walk), streaming ``stream_bytes`` (as the streams are
    built) or ``payload_bytes`` (the values at their width) to and from DDR, and
    ``table_words`` AXI4-Lite writes. ``jobs``: (job, cycles) of the call's jobs, one
    after the other; ``job_stream_bytes`` and ``job_payload_bytes``: each job's bytes."""

    name: str
    unit: str
    shape: tuple[int, ...]
    count: int
    cycles: float
    stream_bytes: int
    payload_bytes: int
    table_words: int = 0
    jobs: tuple[tuple[str, float], ...] = ()
    job_stream_bytes: tuple[int, ...] = ()
    job_payload_bytes: tuple[int, ...] = ()
    source: str = CYCLE_MODEL

    @property
    def total_cycles(self) -> float:
        return self.count * self.cycles


@dataclass(frozen=True)
class StepCost:
    """One ZO step: its calls, total cycles and bytes, and the host's attention MACs."""

    shape: ModelShape
    engine: EngineConfig
    layer: ZoLayerConfig
    calls: tuple[CallCost, ...]
    host_macs: int

    @property
    def cycles(self) -> float:
        return sum(call.total_cycles for call in self.calls)

    @property
    def stream_bytes(self) -> int:
        return sum(call.count * call.stream_bytes for call in self.calls)

    @property
    def payload_bytes(self) -> int:
        return sum(call.count * call.payload_bytes for call in self.calls)

    def unit_cycles(self, unit: str) -> float:
        return sum(call.total_cycles for call in self.calls if call.unit == unit)


# ---------------------------------------------------------------------- configurations

def model_engine_config(shape: ModelShape, rows: int = 8, cols: int = 8, pack: int = 2
                        ) -> EngineConfig:
    """The engine sized for ``shape``: X buffer of all tokens, K up to the FFN width, N up
    to half of it (ffn_in runs as 2 column chunks)."""
    return EngineConfig(rows=rows, cols=cols, pack=pack, max_m=max(shape.tokens, rows),
                        max_k=max(shape.ffn, shape.hidden),
                        max_n=max(_ceil(shape.ffn, 2), shape.hidden, cols))


def model_layer_config(shape: ModelShape, rows: int = 4, cols: int = 4, **generator
                       ) -> ZoLayerConfig:
    """The ZO layer (on-the-fly generator, LoRA-FA) sized for ``shape``'s adapters."""
    return layer_config("onthefly", rows=rows, cols=cols, mode="lora-fa",
                        max_m=_ceil(shape.tokens, cols) * cols, max_k=shape.hidden,
                        max_n=_ceil(shape.hidden, rows) * rows,
                        max_r=_ceil(shape.rank, rows) * rows, **generator)


# ---------------------------------------------------------------------- the engine

def _engine_call(name: str, config: EngineConfig, m: int, k: int, n: int, count: int,
                 raw: bool = False) -> CallCost:
    moved = engine_job_bytes(config, m, k, n, raw=raw, per_channel=not raw)
    cycles = engine_job_cycles(config, m, k, n)
    return CallCost(name, "engine", (m, k, n), count, cycles, moved["stream_bytes"],
                    moved["payload_bytes"], moved["table_words"], ((name, cycles),),
                    (moved["stream_bytes"],), (moved["payload_bytes"],))


# ---------------------------------------------------------------------- the ZO layer

def zo_job_cycles(config: ZoLayerConfig, job: str, m: int, k: int, n: int, r: int) -> float:
    """Cycles of one ZO-layer job (CYCLES register), LoRA-FA, tokens ``m`` (a multiple of
    C), shape ``k x n``, rank ``r``: the layer's own cycle model,
    :func:`zoforge.hw.zolayer.cycles.job_cycles` (every phase of a job counted)."""
    if job not in ZO_JOBS:
        raise ConfigError("job", "one of " + ", ".join(ZO_JOBS), job)
    return job_cycles(config, job, m, k, n, r)


def zo_job_bytes(config: ZoLayerConfig, job: str, m: int, k: int, n: int, r: int
                 ) -> tuple[int, int]:
    """``(stream_bytes, payload_bytes)`` of one ZO-layer job: stream words of
    ``max(R, C)`` 32-bit lanes (one value per lane, unused lanes zero; ``load_x`` packs
    four int8 per lane), against the values at their width (int8 X, W, A; the 24-bit
    master as 3 bytes; int32 Y)."""
    rows, cols = config.rows, config.cols
    word = 4 * max(rows, cols)
    master = _ceil(n, rows) * r
    table = {"load_x": (_ceil(m, cols) * _ceil(k, token_pack(cols, max(rows, cols))), m * k),
             "load_w": (_ceil(n, rows) * k, k * n),
             "load_a": (_ceil(r, rows) * k, k * r),
             "load_master": (master, 3 * r * n), "read_master": (master, 3 * r * n),
             "branch": (_ceil(m, cols) * _ceil(n, rows) * rows, 4 * m * n)}
    words, payload = table.get(job, (0, 0))
    return words * word, payload


def _zo_call(name: str, config: ZoLayerConfig, jobs: tuple[str, ...], m: int, k: int, n: int,
             r: int, count: int) -> CallCost:
    cycles = [(job, zo_job_cycles(config, job, m, k, n, r)) for job in jobs]
    moved = [zo_job_bytes(config, job, m, k, n, r) for job in jobs]
    shape = (k, n, r) if jobs == UPDATE_WALK else (m, k, n, r)   # a walk has no tokens
    return CallCost(name, "zo-layer", shape, count, sum(c for _, c in cycles),
                    sum(s for s, _ in moved), sum(p for _, p in moved), 0, tuple(cycles),
                    tuple(s for s, _ in moved), tuple(p for _, p in moved))


def adapter_call(config: ZoLayerConfig, m: int, k: int, n: int, r: int, count: int = 1,
                 name: str = "adapter call") -> CallCost:
    """One adapter call (:data:`ADAPTER_CALL`: the adapter's frozen weights, A and master
    streamed in, the batch loaded, the frozen products and one branch)."""
    return _zo_call(name, config, ADAPTER_CALL, m, k, n, r, count)


def update_walk(config: ZoLayerConfig, k: int, n: int, r: int, count: int = 1,
                name: str = "update walk") -> CallCost:
    """One adapter's update after a query (:data:`UPDATE_WALK`)."""
    return _zo_call(name, config, UPDATE_WALK, config.cols, k, n, r, count)


# ---------------------------------------------------------------------- the step

def _check_fits(shape: ModelShape, engine: EngineConfig, layer: ZoLayerConfig) -> None:
    if engine.max_k < max(shape.ffn, shape.hidden):
        raise ConfigError("engine max_k", f"at least {max(shape.ffn, shape.hidden)} (ffn_out's "
                          "K)", engine.max_k)
    if engine.max_m < shape.tokens:
        raise ConfigError("engine max_m", f"at least tokens = {shape.tokens}", engine.max_m)
    if engine.max_n < max(shape.hidden, shape.classes):
        raise ConfigError("engine max_n", f"at least hidden = {shape.hidden}", engine.max_n)
    if layer.mode != "lora-fa":
        raise ConfigError("layer mode", "lora-fa", layer.mode)
    for field_, need, have in (("max_m", _ceil(shape.tokens, layer.cols) * layer.cols,
                                layer.max_m), ("max_k", shape.hidden, layer.max_k),
                               ("max_n", shape.hidden, layer.max_n),
                               ("max_r", shape.rank, layer.max_r)):
        if have < need:
            raise ConfigError(f"layer {field_}", f"at least {need}", have)


def step_calls(shape: ModelShape, engine: EngineConfig | None = None,
               layer: ZoLayerConfig | None = None) -> list[CallCost]:
    """The calls of one step (per kind, with their count per step): 2q forwards of
    ``blocks`` blocks (``adapted`` adapter calls; the other attention maps, ffn_in in
    equal column chunks of at most ``max_n`` and ffn_out on the engine) and the head, and
    q update walks of the J adapters."""
    engine = engine or model_engine_config(shape)
    layer = layer or model_layer_config(shape)
    _check_fits(shape, engine, layer)
    m, h, f, r = shape.tokens, shape.hidden, shape.ffn, shape.rank
    forwards = 2 * shape.queries
    per_forward = shape.blocks * forwards
    m_layer = _ceil(m, layer.cols) * layer.cols          # the host pads tokens to C
    r_layer = _ceil(r, layer.rows) * layer.rows          # and the rank to R
    chunks = _ceil(f, engine.max_n)
    calls = [adapter_call(layer, m_layer, h, h, r_layer, per_forward * shape.adapted,
                          name="query/value adapter call" if shape.adapted == 2 else
                          f"adapter call ({', '.join(ATTENTION_MAPS[:shape.adapted])})")]
    frozen_maps = ATTENTION_MAPS[shape.adapted:]
    if frozen_maps:
        calls.append(_engine_call("/".join(frozen_maps), engine, m, h, h,
                                  per_forward * len(frozen_maps)))
    calls += [_engine_call("ffn_in" + (f" chunk (1/{chunks})" if chunks > 1 else ""),
                           engine, m, h, _ceil(f, chunks), per_forward * chunks),
              _engine_call("ffn_out", engine, m, f, h, per_forward),
              _engine_call("head", engine, shape.batch, h, shape.classes, forwards,
                           raw=True),
              update_walk(layer, h, h, r_layer, shape.queries * shape.adapters)]
    return calls


def model_shape(**fields) -> ModelShape:
    """A :class:`ModelShape` from keyword fields (an unknown name is a ConfigError)."""
    names = ModelShape.__dataclass_fields__
    for name in fields:
        if name not in names:
            raise ConfigError("model shape field", "one of " + ", ".join(names), name)
    return ModelShape(**fields)


def predicted_step_cycles(shape: ModelShape | None = None, engine: EngineConfig | None = None,
                          layer: ZoLayerConfig | None = None, **fields) -> StepCost:
    """One step's cost (``.cycles``, ``.calls``, ``.stream_bytes``, ...) from the cycle
    model, for ``shape`` or the :class:`ModelShape` of ``fields``
    (``predicted_step_cycles(blocks=6, seq_len=128, batch=4)``); ``engine``/``layer``
    default to :func:`model_engine_config` / :func:`model_layer_config` of the shape."""
    if shape is None:
        shape = model_shape(**fields)
    elif fields:
        raise ConfigError("shape", "given either as a ModelShape or as fields, not both",
                          ", ".join(fields))
    engine = engine or model_engine_config(shape)
    layer = layer or model_layer_config(shape)
    calls = step_calls(shape, engine, layer)
    # Q·K^T and P·V per head and sequence, per block and forward
    attention = 2 * shape.batch * shape.seq_len * shape.seq_len * shape.hidden
    host_macs = 2 * shape.queries * shape.blocks * attention
    return StepCost(shape, engine, layer, tuple(calls), host_macs)


# ---------------------------------------------------------------------- roofline, time

@dataclass(frozen=True)
class RooflineRow:
    """One call kind at a clock and DDR bandwidth, seconds per call: ``compute_s`` (its
    cycles), ``memory_s`` (all its bytes), ``time_s`` (the sum over its jobs, which run one
    after the other, of max(job compute, job bytes)) and ``bound``: ``compute``,
    ``memory`` or ``mixed`` (some of its jobs memory-bound: the ZO layer's loads)."""

    name: str
    unit: str
    count: int
    compute_s: float
    memory_s: float
    time_s: float
    bound: str
    bytes_per_cycle: float


def roofline(step: StepCost, mhz: float, ddr_bytes_per_s: float,
             payload: bool = False) -> list[RooflineRow]:
    """Per call kind, each job's time = max(cycles / f, bytes / bandwidth) (stream bytes,
    or ``payload`` bytes): a job's streams move while it computes (the engine streams its
    panels while the array works; a ZO-layer load job is all stream), jobs do not overlap.
    ``ddr_bytes_per_s``: the board's :attr:`~zoforge.boards.registry.Board.ddr_bytes_per_s`
    (theoretical peak)."""
    if not mhz > 0:
        raise ConfigError("mhz", "a frequency > 0", mhz)
    if not ddr_bytes_per_s > 0:
        raise ConfigError("ddr_bytes_per_s", "a bandwidth > 0", ddr_bytes_per_s)
    hz = mhz * 1e6
    rows = []
    for call in step.calls:
        moved = call.job_payload_bytes if payload else call.job_stream_bytes
        compute = [cycles / hz for _, cycles in call.jobs]
        memory = [b / ddr_bytes_per_s for b in moved]
        slow = [m > c for c, m in zip(compute, memory)]
        bound = "memory" if all(slow) else "mixed" if any(slow) else "compute"
        rows.append(RooflineRow(call.name, call.unit, call.count, sum(compute), sum(memory),
                                sum(map(max, compute, memory)), bound,
                                sum(moved) / call.cycles))
    return rows


def step_time_energy(step: StepCost, mhz: float, static_w: float, dynamic_w: float,
                     power_mhz: float | None = None,
                     ddr_bytes_per_s: float | None = None) -> dict[str, float]:
    """Seconds and joules of one step at ``mhz``, static and dynamic energy apart: the
    static power ``static_w`` as stated, the dynamic power ``dynamic_w`` (estimated at
    ``power_mhz``, default ``mhz``) taken to ``mhz`` (:func:`zoforge.reports.power.
    dynamic_at`), so time and power are at the same clock. ``compute_*``: compute-bound
    time; with ``ddr_bytes_per_s``, ``roofline_*``: each call's time is the roofline's
    max(compute, DDR). Keys ``*_s``, ``*_static_j``, ``*_dynamic_j`` and ``*_j`` (their
    sum). DDR and host energy are not included."""
    for name, watts in (("static_w", static_w), ("dynamic_w", dynamic_w)):
        if not watts >= 0:
            raise ConfigError(name, "a power >= 0", watts)
    dynamic = dynamic_at(dynamic_w, power_mhz or mhz, mhz)
    times = {"compute": sum(row.count * row.compute_s for row in roofline(step, mhz, 1.0))}
    if ddr_bytes_per_s is not None:
        times["roofline"] = sum(row.count * row.time_s
                                for row in roofline(step, mhz, ddr_bytes_per_s))
    out = {}
    for name, seconds in times.items():
        out.update({f"{name}_s": seconds, f"{name}_static_j": seconds * static_w,
                    f"{name}_dynamic_j": seconds * dynamic,
                    f"{name}_j": seconds * (static_w + dynamic)})
    return out


#: The two units' clock and power on a board when no ``zoforge build`` reports are given:
#: ``zoforge build --board zcu102 --design engine --rows 8 --cols 8`` and ``--design
#: zo-layer`` (default capacities, at the board's 300 MHz, 2026-11-24): Fmax the lower of
#: the two yosys estimates (with the fan-out term of reports/fmax.py: ZO layer 252.0 MHz,
#: engine 289.5 MHz); the board's static power
#: (its own source, a paper's bound) apart from both units' dynamic power (the activity
#: model at ``power_at_mhz``, taken to the clock of the time). Estimates, labelled so.
UNIT_FIGURES = {"zcu102": {"fmax_mhz": 252.0, "fmax_source": "yosys-estimate",
                           "static_w": 0.590, "dynamic_w": 0.1729 + 0.1043,
                           "power_source": "activity-model", "power_at_mhz": 300.0}}


@dataclass(frozen=True)
class UnitsClockPower:
    """The two units on one device: the clock both meet (the lower Fmax) and, apart, the
    board's static power (once, with its source) and both units' dynamic power (with its
    source label and the clock it was estimated at)."""

    fmax_mhz: float
    fmax_source: str
    static_w: float
    static_source: str
    dynamic_w: float
    power_source: str
    power_at_mhz: float


def units_clock_power(engine_report, layer_report) -> UnitsClockPower:
    """:class:`UnitsClockPower` from the ``zoforge build`` reports
    (:class:`~zoforge.reports.model.Report`) of the engine and the ZO layer, on one board
    and clock (ConfigError otherwise, or when a report lacks Fmax or power)."""
    reports = (engine_report, layer_report)
    for name, report in zip(("engine report", "layer report"), reports):
        if report.fmax is None or report.power is None:
            raise ConfigError(name, "a report with Fmax and power (zoforge build without "
                              "--no-power)", report.design)
    if engine_report.board.name != layer_report.board.name or \
            engine_report.power.frequency_mhz != layer_report.power.frequency_mhz:
        raise ConfigError("layer report", f"on board {engine_report.board.name} at "
                          f"{engine_report.power.frequency_mhz:g} MHz like the engine's",
                          f"{layer_report.board.name} at {layer_report.power.frequency_mhz:g}")
    fmax = min(reports, key=lambda report: report.fmax.fmax_mhz).fmax
    power = engine_report.power
    return UnitsClockPower(fmax.fmax_mhz, fmax.source, power.static_w, power.static_source,
                           sum(report.power.dynamic_w for report in reports), power.source,
                           power.frequency_mhz)


def memory_bits(engine: EngineConfig, layer: ZoLayerConfig) -> dict[str, int]:
    """On-chip memory bits of each unit (its memories' ``bits``, sized from the
    configuration) and their sum."""
    # the designs' modules import the generators and blocks (~80 ms): only when used
    from zoforge.hw.engine.designs import engine_memories
    from zoforge.hw.zolayer.designs import layer_memories
    engine_bits = sum(size.bits for size in engine_memories(engine).values())
    layer_bits = sum(size.bits for size in layer_memories(layer).values())
    return {"engine": engine_bits, "zo-layer": layer_bits, "total": engine_bits + layer_bits}


# ---------------------------------------------------------------------- peak memory

def _linear_params(shape: ModelShape) -> tuple[int, int]:
    """(weights, output channels) of every linear map of the model (blocks and head)."""
    h, f = shape.hidden, shape.ffn
    weights = shape.blocks * (4 * h * h + 2 * h * f) + h * shape.classes
    channels = shape.blocks * (4 * h + f + h) + shape.classes
    return weights, channels


def zo_peak_memory(shape: ModelShape, layer: ZoLayerConfig | None = None) -> dict[str, int]:
    """Bytes held at the peak of a ZO step (host DRAM and the accelerator together).

    * ``weights``: every linear's weights as int8 (blocks and head; the embedding tables
      are not counted, in neither accounting);
    * ``channel_params``: per output channel an int32 bias, multiplier and shift (12 bytes);
    * ``adapters_a``: each adapter's frozen A (K x r, int8);
    * ``masters``: the trained B masters, 24 bits (3 bytes) each, twice (the step's start
      and the work copy);
    * ``accumulator``: the update accumulator D of the one adapter in the ZO layer
      (r x N of :meth:`Formats.accumulator_bits`);
    * ``activations``: the largest live set of one forward, nothing kept for a backward:
      in attention the block input, q, k, v and the context (int8, M x H each) and one
      head's scores for all sequences (int32, batch x seq^2); in the FFN the block input,
      the FFN hidden (int8, M x F) and an adapter/engine output (int32, M x H);
    * ``generator``: the perturbation generator's state and its saved copy (on chip).
    """
    layer = layer or model_layer_config(shape)
    m, h, f, r, J = shape.tokens, shape.hidden, shape.ffn, shape.rank, shape.adapters
    weights, channels = _linear_params(shape)
    golden = layer.generator().golden()
    z_bits = golden.width
    attention = 5 * m * h + 4 * shape.batch * shape.seq_len ** 2
    ffn = m * h + m * f + 4 * m * h
    state_bits = golden.n_rng * golden.bits if hasattr(golden, "n_rng") else 64
    parts = {"weights": weights, "channel_params": 12 * channels, "adapters_a": J * h * r,
             "masters": 2 * J * r * h * 3,
             "accumulator": _ceil(r * h * Formats.accumulator_bits(z_bits), 8),
             "activations": max(attention, ffn), "generator": _ceil(2 * state_bits, 8)}
    parts["total"] = sum(parts.values())
    return parts


#: Tensors a float32 backward keeps per block (name, elements as a function of the shape,
#: whether it is needed only for a frozen weight's gradient, i.e. an autograd that saves
#: only what the trained parameters need can drop it).
def _block_saved(shape: ModelShape) -> list[tuple[str, int, bool]]:
    m, h, f, r = shape.tokens, shape.hidden, shape.ffn, shape.rank
    scores = shape.batch * shape.heads * shape.seq_len ** 2
    return [
        ("block input (LN-free: q/k/v input)", m * h, True),
        ("LoRA U = X·A per adapter (dB = U^T dY)", shape.adapted * m * r, False),
        ("q, k, v", 3 * m * h, False),
        ("attention probabilities", scores, False),
        ("context = attn_out input", m * h, True),
        ("LN1 input and its mean/rstd", m * h + 2 * m, False),
        ("ffn_in input (LN1 output)", m * h, True),
        ("GELU input", m * f, False),
        ("ffn_out input (GELU output)", m * f, True),
        ("LN2 input and its mean/rstd", m * h + 2 * m, False),
    ]


def backprop_peak_memory(shape: ModelShape, frozen_aware: bool = False) -> dict[str, int]:
    """Bytes of LoRA-FA fine-tuning of the same model by backpropagation, float32
    training with Adam (the usual setup), at its peak (the end of the forward):

    * ``weights``: every linear's weights and biases, and the LayerNorm scales and shifts,
      float32 (frozen; embeddings not counted, as in :func:`zo_peak_memory`);
    * ``adapters_a``: each adapter's frozen A, float32;
    * ``masters``: the trained B (r x N per adapter), float32; ``gradients``: their
      gradients; ``adam``: Adam's two moments (2 x B);
    * ``activations``: per block what the backward reads, float32 (list in
      :func:`_block_saved`: the block input, U = X·A per adapter, q, k, v, the attention
      probabilities, the context (= attn_out's input), each LayerNorm's input with its
      mean and rstd, ffn_in's input, the GELU input and ffn_out's input), plus the pooled
      head input (batch x H). ``frozen_aware``: drop the tensors needed only for frozen
      weights' gradients (an autograd that saves only what the trained parameters need).
    """
    h, J, r = shape.hidden, shape.adapters, shape.rank
    weights, channels = _linear_params(shape)
    layer_norms = shape.blocks * 2 * 2 * h
    saved = sum(n for _, n, frozen_only in _block_saved(shape)
                if not (frozen_aware and frozen_only))
    b = J * r * h
    parts = {"weights": 4 * (weights + channels + layer_norms), "adapters_a": 4 * J * h * r,
             "masters": 4 * b, "gradients": 4 * b, "adam": 8 * b,
             "activations": 4 * (shape.blocks * saved + shape.batch * h)}
    parts["total"] = sum(parts.values())
    return parts


# ---------------------------------------------------------------------- co-simulation

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
