"""Cycles and DDR bytes of one ZO fine-tuning step of MiniLM on today's two units, the GEMM
engine and the ZO layer (issue 20).

The step is the schedule of the shared finetune spec: per query a + and a - forward (every
linear of every block and the head; the query and value maps on the ZO layer as adapter
calls, the others on the GEMM engine) and one update walk over the adapters. This module
counts it from operation counts:

* **cycle model** (source label ``cycle-model``): the engine's own model
  (:func:`zoforge.hw.engine.cycles.engine_job_cycles`, with its fixed cycles per job
  ``engine_job_extra`` read from co-simulation of small shapes, and ``engine_job_bytes``),
  :func:`zo_job_cycles` (the ZO layer's own cycle model, :mod:`zoforge.hw.zolayer.cycles`),
  the softmax unit's (:mod:`zoforge.hw.softmax.cycles`, :func:`softmax_call`), and their
  sum over the step, :func:`predicted_step_cycles`. The structure is the hardware's
  (stream beats, tiles at least ``2R + C`` apart and each once its result bank is free,
  one word per cycle for loads and walks); :mod:`zoforge.reports.rtl_jobs` runs the same jobs on the RTL for the check
  (``benchmarks/bench_finetune_cost.py``);
* **DDR traffic**: the bytes each call streams, as the streams are built
  (``stream_bytes``: whole beats, an int8 in a 32-bit lane of the ZO layer counts 4 bytes)
  and as packed values (``payload_bytes``); :mod:`zoforge.reports.step_price` prices them.

Not in the cycles: the host's work between jobs (its register writes, the per-column table
writes over AXI4-Lite (counted as ``table_words``), the gradient, LayerNorm, the softmax
and GELU where the host computes them, and with ``attention`` ``host`` the attention
products Q·K^T and P·V, which are not ``nn.Linear`` maps; their MACs are
:attr:`StepCost.host_macs`), and no two jobs overlap. With ``attention`` ``engines``
(:mod:`zoforge.golden.finetune.attention`) the products are raw engine jobs, one per
sequence and head (``scores`` L x d x L, ``context`` L x L x d), and ``host_macs`` is 0.
With ``nonlinear`` ``integer`` ffn_in's jobs are the engine's GELU jobs
(``engine_job_cycles(..., gelu=True)``) and, with engine attention, each block's softmax
of a forward runs on the softmax unit (:mod:`zoforge.hw.softmax.cycles`, the unit
:func:`zoforge.sim.softmax_cosim.cosim_design` sizes): as
:func:`zoforge.sim.softmax_cosim.softmax_jobs` cuts the call, one job of the batch's
``batch x heads`` blocks of L rows (at most 65,535 rows a job), which assumes every
sequence of the batch has the same key mask (no padding, or the same); each sequence whose
mask differs from the one before starts a job of its own on the RTL (:func:`softmax_call`).
So the step the co-simulation runs (``zoforge finetune --rtl all --design units``) is
every job it runs, each at its unit's exact model: model and RTL agree to the cycle
(``tests/test_finetune_cli.py``).
"""
from __future__ import annotations

from dataclasses import dataclass

from zoforge.errors import ConfigError
from zoforge.golden.finetune.config import ATTENTIONS, NONLINEARS
from zoforge.golden.zolayer import ZoLayerConfig, layer_config
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.cycles import engine_job_bytes, engine_job_cycles
from zoforge.hw.softmax.config import ROW_BITS, SoftmaxConfig
from zoforge.hw.softmax.cycles import softmax_job_cycles, softmax_stream_bytes
from zoforge.hw.zolayer.cycles import job_cycles
from zoforge.hw.zolayer.layouts import token_pack
from zoforge.hw.zolayer.registers import JOBS
from zoforge.reports.model_shape import ATTENTION_MAPS, ModelShape, model_shape

__all__ = ["CYCLE_MODEL", "ADAPTER_CALL", "UPDATE_WALK", "ZO_JOBS", "CallCost", "StepCost",
           "model_engine_config", "model_layer_config", "zo_job_cycles", "zo_job_bytes",
           "adapter_call", "update_walk", "softmax_call", "model_softmax_config",
           "step_calls", "predicted_step_cycles"]

CYCLE_MODEL = "cycle-model"
ADAPTER_CALL = ("load_w", "load_a", "load_master", "load_x", "frozen_w", "frozen_a", "branch")
UPDATE_WALK = ("load_master", "accumulate", "apply", "read_master")


#: The ZO layer's jobs (its register map's).
ZO_JOBS = tuple(JOBS)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class CallCost:
    """One kind of call of the step: ``count`` calls per step, each ``cycles`` (of its
    ``unit``: ``engine``, ``zo-layer`` or ``softmax``; ``shape``: M, K, N, with r for an
    adapter call, K, N, r for an update walk, rows and L for a softmax call), streaming
    ``stream_bytes`` (as the streams are built) or ``payload_bytes`` (the values at their
    width) to and from DDR, and
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

def model_engine_config(shape: ModelShape, rows: int = 8, cols: int = 8, pack: int = 2,
                        gelu: bool = False) -> EngineConfig:
    """The engine sized for ``shape``: X buffer of all tokens, K up to the FFN width, N up
    to half of it (ffn_in runs as 2 column chunks); ``gelu``: built with the GELU job
    mode."""
    return EngineConfig(rows=rows, cols=cols, pack=pack, max_m=max(shape.tokens, rows),
                        max_k=max(shape.ffn, shape.hidden),
                        max_n=max(_ceil(shape.ffn, 2), shape.hidden, cols), gelu=gelu)


def model_layer_config(shape: ModelShape, rows: int = 4, cols: int = 4, **generator
                       ) -> ZoLayerConfig:
    """The ZO layer (on-the-fly generator, LoRA-FA) sized for ``shape``'s adapters."""
    return layer_config("onthefly", rows=rows, cols=cols, mode="lora-fa",
                        max_m=_ceil(shape.tokens, cols) * cols, max_k=shape.hidden,
                        max_n=_ceil(shape.hidden, rows) * rows,
                        max_r=_ceil(shape.rank, rows) * rows, **generator)


# ---------------------------------------------------------------------- the engine

def _engine_call(name: str, config: EngineConfig, m: int, k: int, n: int, count: int,
                 raw: bool = False, gelu: bool = False) -> CallCost:
    moved = engine_job_bytes(config, m, k, n, raw=raw, per_channel=not raw, gelu=gelu)
    cycles = engine_job_cycles(config, m, k, n, gelu=gelu)
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


# ---------------------------------------------------------------------- the softmax unit

def model_softmax_config(shape: ModelShape) -> SoftmaxConfig:
    """The softmax unit a step's co-simulation runs its softmax calls on
    (:func:`zoforge.sim.softmax_cosim.cosim_design`: rows of ``seq_len`` keys)."""
    from zoforge.sim.softmax_cosim import cosim_design       # torch: only when priced
    return cosim_design(shape.seq_len)


def softmax_call(config: SoftmaxConfig, blocks: int, length: int, count: int = 1,
                 name: str = "softmax") -> CallCost:
    """One softmax call of ``blocks`` blocks of ``length`` rows of ``length`` keys, all
    with one key mask (module docstring): jobs of as many whole blocks as the ROWS
    register takes (``(2^16 - 1) // length``), each its :func:`~zoforge.hw.softmax.cycles.
    softmax_job_cycles`; int32 scores in, int8 P out, its key mask and job registers
    written (``table_words``)."""
    per_job = ((1 << ROW_BITS) - 1) // length
    sizes = [per_job] * (blocks // per_job) + ([blocks % per_job] if blocks % per_job else [])
    jobs = [(name, softmax_job_cycles(config, size * length, length)) for size in sizes]
    moved = [softmax_stream_bytes(config, size * length, length) for size in sizes]
    stream = [part["scores"] + part["p"] for part in moved]
    payload = [5 * size * length * length for size in sizes]       # int32 in, int8 out
    return CallCost(name, "softmax", (blocks * length, length), count,
                    sum(cycles for _, cycles in jobs), sum(stream), sum(payload),
                    sum(part["registers"] for part in moved) // 4, tuple(jobs),
                    tuple(stream), tuple(payload))


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
               layer: ZoLayerConfig | None = None, attention: str = "host",
               nonlinear: str = "float", softmax: SoftmaxConfig | None = None
               ) -> list[CallCost]:
    """The calls of one step (per kind, with their count per step): 2q forwards of
    ``blocks`` blocks (``adapted`` adapter calls; the other attention maps, ffn_in in
    equal column chunks of at most ``max_n`` (GELU jobs with ``nonlinear`` ``integer``,
    on an engine built with ``gelu``) and ffn_out on the engine; with ``attention``
    ``engines`` Q·K^T and P·V per sequence and head, and with ``nonlinear`` ``integer``
    too a softmax call per block on ``softmax``, default :func:`model_softmax_config`)
    and the head, and q update walks of the J adapters."""
    if attention not in ATTENTIONS:
        raise ConfigError("attention", "one of " + ", ".join(ATTENTIONS), attention)
    if nonlinear not in NONLINEARS:
        raise ConfigError("nonlinear", "one of " + ", ".join(NONLINEARS), nonlinear)
    gelu = nonlinear == "integer"
    engine = engine or model_engine_config(shape, gelu=gelu)
    layer = layer or model_layer_config(shape)
    _check_fits(shape, engine, layer)
    if gelu and not engine.gelu:
        raise ConfigError("engine gelu", "True with nonlinear integer (ffn_in's GELU jobs)",
                          engine.gelu)
    if attention == "engines":
        for field_, have in (("max_m", engine.max_m), ("max_k", engine.max_k),
                             ("max_n", engine.max_n)):
            if have < shape.seq_len:
                raise ConfigError(f"engine {field_}", f"at least seq_len = {shape.seq_len} "
                                  "(the attention jobs)", have)
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
    calls += [_engine_call("ffn_in" + (f" chunk (1/{chunks})" if chunks > 1 else "")
                           + (" (GELU job)" if gelu else ""),
                           engine, m, h, _ceil(f, chunks), per_forward * chunks, gelu=gelu),
              _engine_call("ffn_out", engine, m, f, h, per_forward),
              _engine_call("head", engine, shape.batch, h, shape.classes, forwards,
                           raw=True),
              update_walk(layer, h, h, r_layer, shape.queries * shape.adapters)]
    if attention == "engines":
        L, d, jobs = shape.seq_len, h // shape.heads, per_forward * shape.batch * shape.heads
        calls += [_engine_call("Q·K^T (per sequence and head)", engine, L, d, L, jobs,
                               raw=True),
                  _engine_call("P·V (per sequence and head)", engine, L, L, d, jobs, raw=True)]
        if gelu:
            softmax = softmax or model_softmax_config(shape)
            if softmax.max_len < L:
                raise ConfigError("softmax max_len", f"at least seq_len = {L}",
                                  softmax.max_len)
            calls.append(softmax_call(softmax, shape.batch * shape.heads, L, per_forward,
                                      name="softmax (per block)"))
    return calls


def predicted_step_cycles(shape: ModelShape | None = None, engine: EngineConfig | None = None,
                          layer: ZoLayerConfig | None = None, attention: str = "host",
                          nonlinear: str = "float", softmax: SoftmaxConfig | None = None,
                          **fields) -> StepCost:
    """One step's cost (``.cycles``, ``.calls``, ``.stream_bytes``, ...) from the cycle
    model, for ``shape`` or the :class:`ModelShape` of ``fields``
    (``predicted_step_cycles(blocks=6, seq_len=128, batch=4)``); ``engine``/``layer``
    default to :func:`model_engine_config` / :func:`model_layer_config` of the shape (with
    ``nonlinear`` ``integer`` the engine built with ``gelu``); ``attention`` where Q·K^T
    and P·V run, ``nonlinear`` whether ffn_in is a GELU job and the softmax a unit's
    (:func:`step_calls`; ``softmax`` that unit)."""
    if shape is None:
        shape = model_shape(**fields)
    elif fields:
        raise ConfigError("shape", "given either as a ModelShape or as fields, not both",
                          ", ".join(fields))
    engine = engine or model_engine_config(shape, gelu=nonlinear == "integer")
    layer = layer or model_layer_config(shape)
    calls = step_calls(shape, engine, layer, attention, nonlinear, softmax)
    # Q·K^T and P·V per head and sequence, per block and forward, where the host runs them
    products = 2 * shape.batch * shape.seq_len * shape.seq_len * shape.hidden
    host_macs = 2 * shape.queries * shape.blocks * products if attention == "host" else 0
    return StepCost(shape, engine, layer, tuple(calls), host_macs)
