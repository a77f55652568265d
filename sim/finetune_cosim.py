"""A fine-tuning step's calls on the RTL, compared with the golden models value by value.

:class:`RtlUnits` is a drop-in for :class:`~zoforge.golden.finetune.calls.GoldenUnits`
(``units(call) -> torch.Tensor``): the ZO-layer calls (:class:`AdapterCall`,
:class:`UpdateCall`) always run on one persistent ZO layer
(:class:`~zoforge.sim.zolayer_jobserver.LayerServer`, jobs of
:mod:`zoforge.sim.finetune_host`), the engine calls (:class:`EngineCall`) on one persistent
GEMM engine when ``rtl == "all"`` (else on the golden model), and with ``rtl == "all"``,
engine attention and integer nonlinear functions the softmax calls (:class:`SoftmaxCall`)
on one persistent softmax unit (:class:`~zoforge.sim.softmax_cosim.SoftmaxCosim`, the unit
:func:`~zoforge.sim.softmax_cosim.cosim_design` sizes for rows of ``seq_len`` keys; else on
the golden model). Every RTL result is compared
with an internal :class:`GoldenUnits` whose generator starts in the reset state, as the
layer's does, and walks exactly as it does; the first difference raises
:class:`CallMismatch`. The jobs' CYCLES counters are summed per call (:meth:`RtlUnits.take_cycles`,
:attr:`RtlUnits.cycles_by_name`).

An engine call with a ``gelu`` stage (``nonlinear`` integer: ``ffn_in``'s) runs as a GELU
job (``engine gelu``; :mod:`zoforge.hw.engine.gelu_path`) on an engine built with
``gelu`` (:func:`engine_design`).

Shapes: a layer call's M is padded with zero rows to a multiple of the layer's columns (and
the result cut); an engine call's N above the engine's ``max_n`` is split into equal column
chunks, one job each. :func:`check_rtl_limits` refuses, before any work, a configuration
whose co-simulated units would hold more than :data:`MAX_COSIM_WORDS` memory words (or
:data:`zoforge.hw.designs.MAX_BITS` bits) or whose largest job could run past
:data:`MAX_JOB_CYCLES` (the 32-bit cycle counters).

:func:`replay_calls` plays a recorded list of calls (``GoldenUnits(record=True).log``) on
either backend in a host program per unit (the ZO layer's
:func:`~zoforge.sim.finetune_host.layer_calls_program`, the engine's
:func:`~zoforge.sim.engine_host.engine_program`, the softmax unit's
:func:`~zoforge.sim.softmax_host.softmax_program`): the cocotb route of the same check.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from zoforge.errors import ConfigError, check_choice
from zoforge.golden.engine import RequantParams
from zoforge.golden.engine_gelu import GeluStage
from zoforge.golden.finetune.calls import (AdapterCall, EngineCall, GoldenUnits, SoftmaxCall,
                                          UpdateCall)
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.hw.designs import MAX_BITS
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.designs import engine_memories
from zoforge.hw.zolayer.designs import layer_memories
from zoforge.sim.backends import Stalls, run_program
from zoforge.sim.engine_cosim import EngineCosim, EngineJob, gelu_job, unpack_output
from zoforge.sim.engine_host import engine_program
from zoforge.sim.finetune_host import layer_call
from zoforge.sim.jobserver import JobServer
from zoforge.sim.program import drive
from zoforge.sim.softmax_cosim import SoftmaxCosim, cosim_design, replay_softmax_calls
from zoforge.sim.zolayer_jobserver import LayerServer, layer_target

__all__ = ["RtlUnits", "CallMismatch", "check_rtl_limits", "check_call", "replay_calls",
           "MAX_COSIM_WORDS",
           "engine_design", "engine_jobs", "layer_call_spec", "RTL_CHOICES", "MAX_JOB_CYCLES"]

#: What runs on the RTL: the ZO layer's calls only, or the engine's too.
RTL_CHOICES = ("adapters", "all")
#: The most memory words a co-simulated unit may hold: the generator's limit before it grew
#: for board-sized designs (``MAX_WORDS``, 131,072 since 80fa6f8); a unit this size takes
#: minutes to build and its jobs minutes to run on Verilator (MiniLM at seq_len 32: a batch of 4).
MAX_COSIM_WORDS = 1 << 16
#: Most cycles one job may take (the designs' CYCLES counters are 32 bits wide).
MAX_JOB_CYCLES = 1 << 31


class CallMismatch(RuntimeError):
    """An RTL result that differs from the golden one; ``str(error)`` is one line naming the
    call, how many values differ and the first of them."""

    def __init__(self, call, index: int, differing: int, first: tuple, rtl: int,
                 golden: int):
        self.call, self.index, self.differing = call, index, differing
        self.first, self.rtl, self.golden = first, rtl, golden
        super().__init__(f"call {index} ({call.name}, {call_kind(call)}): {differing} "
                         f"value(s) differ from the golden model, first at {first}: "
                         f"RTL {rtl}, golden {golden}")


#: The calls the ZO layer runs (the engine runs EngineCalls, the softmax unit SoftmaxCalls).
LAYER_CALLS = (AdapterCall, UpdateCall)


def call_kind(call) -> str:
    """``engine int8`` / ``engine raw`` / ``engine gelu`` / ``adapter +|-|plain`` (with
    ``save``/``restore``) / ``update`` (with ``restore``) / ``softmax``."""
    if isinstance(call, EngineCall):
        return ("engine gelu" if call.gelu is not None else "engine raw" if call.raw
                else "engine int8")
    flags = [flag for flag in ("save", "restore") if getattr(call, flag, False)]
    if isinstance(call, UpdateCall):
        return " ".join(["update", *flags])
    if not isinstance(call, AdapterCall):
        return getattr(call, "unit", type(call).__name__)
    sign = {1: "+", -1: "-", 0: "plain"}[call.sign]
    return " ".join(["adapter", sign, *flags])


def check_call(call, index: int, rtl: torch.Tensor, golden: torch.Tensor) -> None:
    """Raise :class:`CallMismatch` unless ``rtl`` equals ``golden`` value by value."""
    rtl, golden = torch.as_tensor(rtl).to(torch.int64), golden.to(torch.int64)
    if rtl.shape != golden.shape:
        raise CallMismatch(call, index, golden.numel(), "shape", tuple(rtl.shape),
                           tuple(golden.shape))
    differ = rtl != golden
    count = int(differ.sum())
    if count:
        first = tuple(int(i) for i in np.unravel_index(int(differ.flatten().nonzero()[0]),
                                                       tuple(golden.shape)))
        raise CallMismatch(call, index, count, first, int(rtl[first]), int(golden[first]))


# -- the designs and the calls' host forms ----------------------------------------------------

def engine_design(cfg: FinetuneConfig, hidden: int, ffn: int) -> EngineConfig:
    """The GEMM engine sized for every engine call of the model (``max_n``: its limit;
    wider calls are split), with the GELU job mode where the model's GELU is an engine
    job (``nonlinear`` integer: ``ffn_in``'s call has a ``gelu`` stage)."""
    rows, cols = cfg.engine_rows, cfg.engine_cols
    widest = EngineConfig(rows=rows, cols=cols, pack=2)
    return EngineConfig(rows=rows, cols=cols, pack=2, max_m=max(cfg.tokens, rows),
                        max_k=max(hidden, ffn), max_n=widest.max_n_limit,
                        gelu=cfg.nonlinear == "integer")


def engine_jobs(call: EngineCall, max_n: int) -> list[EngineJob]:
    """The engine jobs of ``call``: equal column chunks of at most ``max_n``."""
    n = call.w.shape[1]
    chunks = -(-n // max_n)
    width = -(-n // chunks)
    x, w, bias = call.x.numpy(), call.w.numpy(), call.bias.numpy().astype(np.int32)
    jobs = []
    for start in range(0, n, width):
        part = slice(start, start + width)
        if call.gelu is not None:
            jobs.append(gelu_job(x, np.ascontiguousarray(w[:, part]), bias[part],
                                 _stage_columns(call.gelu, part)))
        elif call.raw:
            jobs.append(EngineJob(x, np.ascontiguousarray(w[:, part]), bias[part]))
        else:
            jobs.append(EngineJob(x, np.ascontiguousarray(w[:, part]), bias[part],
                                  call.multiplier.numpy()[part], call.shift.numpy()[part]))
    return jobs


def _stage_columns(stage: GeluStage, part: slice) -> GeluStage:
    """A GELU stage's parameters of the columns ``part`` (per-tensor ones as they are)."""
    def cut(params: RequantParams) -> RequantParams:
        return RequantParams(*(value[part] if torch.is_tensor(value) and value.numel() > 1
                               else value for value in (params.multiplier, params.shift)))
    return dataclasses.replace(stage, into=cut(stage.into), out=cut(stage.out))


def _engine_result(jobs: list[EngineJob], words: list[np.ndarray], rows: int, cols: int
                   ) -> torch.Tensor:
    parts = [unpack_output(out, job.shape[0], job.shape[2], rows, cols, job.raw)
             for job, out in zip(jobs, words, strict=True)]
    return torch.from_numpy(np.concatenate(parts, axis=1).astype(np.int64))


def layer_call_spec(call: AdapterCall | UpdateCall, cols: int
                    ) -> tuple[dict, dict[str, np.ndarray]]:
    """A ZO-layer call as :mod:`zoforge.sim.finetune_host` takes it: its spec and arrays
    (X padded with zero rows to a multiple of ``cols``)."""
    master = call.master.numpy().astype(np.int64)
    r, n = master.shape
    if isinstance(call, UpdateCall):
        spec = {"kind": "update", "n": n, "r": r, "g": int(call.g),
                "eta_mult": int(call.eta_mult), "eta_shift": int(call.eta_shift),
                "restore": bool(call.restore)}
        return spec, {"master": master}
    m, k = call.x.shape
    x = np.zeros((-(-m // cols) * cols, k), np.int8)
    x[:m] = call.x.numpy()
    flags = {"save": call.save, "restore": call.restore, "minus": call.sign < 0,
             "plain": call.sign == 0}
    spec = {"kind": "adapter", "m": x.shape[0], "k": k, "n": n, "r": r,
            "mult": int(call.u_mult), "shift": int(call.u_shift),
            "eps_shift": int(call.eps_shift), "flags": {f: bool(v) for f, v in flags.items()}}
    return spec, {"x": x, "w": call.w.numpy(), "a": call.a.numpy(), "master": master}


def _layer_result(call, out: np.ndarray) -> torch.Tensor:
    out = torch.from_numpy(np.asarray(out).astype(np.int64))
    return out if isinstance(call, UpdateCall) else out[:call.x.shape[0]]


# -- limits ----------------------------------------------------------------------------------

def _job_bound(m: int, k: int, n: int, m_tile: int, n_tile: int) -> int:
    """A bound on one job's cycles: 4x (its array k-steps plus one cycle per stream word)."""
    steps = -(-m // m_tile) * -(-n // n_tile) * k
    return 4 * (steps + m * k + k * n + m * n) + 100_000


def job_cycle_bound(cfg: FinetuneConfig, rtl: str, hidden: int, ffn: int) -> int:
    """A bound on the cycles of the largest job of a step (every job stays below it)."""
    m = cfg.tokens
    bound = _job_bound(m, hidden, hidden, cfg.layer_cols, cfg.layer_rows)
    if rtl == "all":
        engine = engine_design(cfg, hidden, ffn)
        chunk = -(-ffn // -(-ffn // engine.max_n))
        rows, cols = cfg.engine_rows, cfg.engine_cols
        bound = max(bound, _job_bound(m, hidden, chunk, rows, cols),
                    _job_bound(m, ffn, hidden, rows, cols))
    return bound


def _too_large(cfg: FinetuneConfig, rtl: str, hidden: int, ffn: int) -> str | None:
    """Why ``cfg`` does not fit the RTL (None: it fits)."""
    designs = {"zo-layer": layer_memories(cfg.layer_design(hidden, ffn))}
    if rtl == "all":
        designs["engine"] = engine_memories(engine_design(cfg, hidden, ffn))
    for name, memories in designs.items():
        words = sum(m.words for m in memories.values())
        bits = sum(m.bits for m in memories.values())
        if words > MAX_COSIM_WORDS or bits > MAX_BITS:
            return (f"the {name}'s memories hold at most {MAX_COSIM_WORDS} words and "
                    f"{MAX_BITS >> 20} Mbit; {words} words, {bits / 2**20:.1f} Mbit")
    if job_cycle_bound(cfg, rtl, hidden, ffn) > MAX_JOB_CYCLES:
        return f"one job may take at most {MAX_JOB_CYCLES} cycles"
    return None


def _largest_fitting(low: int, high: int, fits) -> int | None:
    """The largest value in ``[low, high]`` that ``fits`` (monotone), or None."""
    if not fits(low):
        return None
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def check_rtl_limits(cfg: FinetuneConfig, rtl: str, hidden: int, ffn: int) -> None:
    """A one-line :class:`ConfigError` unless the step's calls fit the RTL: ``rtl`` one of
    :data:`RTL_CHOICES`, the model's width a multiple of ``layer_rows``, the designs within
    the memory limits and the largest job within :data:`MAX_JOB_CYCLES` (naming ``batch``,
    else ``seq_len``, with the largest value that fits)."""
    check_choice("rtl", rtl, RTL_CHOICES)
    if hidden % cfg.layer_rows:
        raise ConfigError("layer_rows", f"a divisor of the model's hidden size {hidden} (the "
                          "ZO layer's N)", cfg.layer_rows)
    reason = _too_large(cfg, rtl, hidden, ffn)
    if reason is None:
        return

    def fits(**fields):
        return _too_large(dataclasses.replace(cfg, **fields), rtl, hidden, ffn) is None
    batch = _largest_fitting(1, cfg.batch, lambda b: fits(batch=b))
    if batch is not None:
        raise ConfigError("batch", f"at most {batch} with seq_len {cfg.seq_len} on the RTL "
                          f"({reason})", cfg.batch)
    seq_len = _largest_fitting(2, cfg.seq_len, lambda s: fits(batch=1, seq_len=s))
    if seq_len is not None:
        raise ConfigError("seq_len", f"at most {seq_len} with batch 1 on the RTL ({reason})",
                          cfg.seq_len)
    raise ConfigError("rtl", f"'adapters' or none for this model ({reason})", rtl)


# -- the units -------------------------------------------------------------------------------

class RtlUnits:
    """The units of a fine-tuning step on the RTL (module docstring), a context manager.
    ``hidden``/``ffn``: the model's widths; ``rtl``: ``adapters`` or ``all``;
    ``server_options``: :class:`~zoforge.sim.jobserver.JobServer`'s (``source_idle``,
    ``sink_backpressure``, ``seed``, ``timeout_s``; ``max_cycles`` defaults to the largest
    job's bound).

    ``rtl_calls``: calls run on the RTL; ``cycles``: the jobs' cycles since the last
    :meth:`take_cycles`, ``cycles_by_name`` the same per ``"<call name> <unit>"``
    (``block0.query adapter``, ``block0.query update``, ``block0.key engine``);
    ``total_cycles``: all of them; ``golden``: the internal :class:`GoldenUnits`."""

    def __init__(self, cfg: FinetuneConfig, hidden: int, ffn: int, rtl: str = "adapters",
                 **server_options):
        check_rtl_limits(cfg, rtl, hidden, ffn)
        self.cfg, self.rtl = cfg, rtl
        self.golden = GoldenUnits(cfg.generator().golden(), cfg.layer_rows)
        server_options.setdefault("max_cycles", job_cycle_bound(cfg, rtl, hidden, ffn))
        self.rtl_calls, self.calls = 0, 0
        self.cycles, self.total_cycles = 0, 0
        self.cycles_by_name: dict[str, int] = {}
        self.layer = self.engine = self.softmax = None
        try:
            self.layer = LayerServer(cfg.layer_design(hidden, ffn), **server_options)
            if rtl == "all":
                self.engine_cosim = EngineCosim(engine_design(cfg, hidden, ffn))
                target = self.engine_cosim.target
                self.engine = JobServer(target.verilog, target.top, lanes=target.lanes,
                                        addr_bits=target.addr_bits, in_bits=target.in_bits,
                                        memory_files=target.memory_files, **server_options)
                if cfg.attention == "engines" and cfg.nonlinear == "integer":
                    self.softmax = SoftmaxCosim(cosim_design(cfg.seq_len), **server_options)
        except BaseException:
            self.close(kill=True)
            raise

    def __call__(self, call) -> torch.Tensor:
        index = self.calls
        self.calls += 1
        golden = self.golden(call)
        if isinstance(call, EngineCall):
            if self.engine is None:
                return golden
            result, cycles = self._engine_call(call)
            unit = "engine"
        elif isinstance(call, SoftmaxCall):
            if self.softmax is None:
                return golden
            result, cycles = self.softmax.run(call)
            unit = "softmax"
        else:
            result, cycles = self._layer_call(call)
            unit = "update" if isinstance(call, UpdateCall) else "adapter"
        self.rtl_calls += 1
        key = f"{call.name} {unit}"
        self.cycles_by_name[key] = self.cycles_by_name.get(key, 0) + cycles
        self.cycles += cycles
        self.total_cycles += cycles
        check_call(call, index, result, golden)
        return result

    def _layer_call(self, call) -> tuple[torch.Tensor, int]:
        config = self.layer.config
        spec, arrays = layer_call_spec(call, config.cols)
        start = len(self.layer.jobs)
        out = self.layer.run(layer_call(self.layer.host, config.rows, config.cols, spec,
                                        arrays))
        return _layer_result(call, out), sum(job["cycles"] for job in self.layer.jobs[start:])

    def _engine_call(self, call: EngineCall) -> tuple[torch.Tensor, int]:
        design = self.engine_cosim
        jobs = engine_jobs(call, design.config.max_n)
        args, data = design.program_inputs(jobs)
        arrays, results = drive(engine_program(args, data), self.engine.exchange)
        words = [arrays[f"out{index}"] for index in range(len(jobs))]
        return (_engine_result(jobs, words, design.rows, design.cols),
                sum(job["cycles"] for job in results["jobs"]))

    def take_cycles(self) -> int:
        """The jobs' cycles since the last call (a step's, called once per step); resets
        them and :attr:`cycles_by_name` (read it first)."""
        cycles, self.cycles = self.cycles, 0
        self.cycles_by_name = {}
        return cycles

    def close(self, kill: bool = False) -> None:
        """Stop both servers."""
        for server in (self.layer, self.engine, self.softmax):
            if server is not None:
                server.close(kill)

    def __enter__(self) -> "RtlUnits":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(kill=kind is not None and not issubclass(kind, CallMismatch))


# -- the cocotb route --------------------------------------------------------------------------

def replay_calls(cfg: FinetuneConfig, hidden: int, ffn: int, calls: list, *,
                 simulator: str = "icarus", backend: str = "cocotb", rtl: str = "all"
                 ) -> tuple[list[torch.Tensor | None], dict]:
    """Play the recorded ``calls`` in order on the RTL: the ZO-layer calls as one host
    program on the layer; with ``rtl == "all"`` the engine calls (GELU jobs included) as one
    on the engine and the softmax calls as one on the softmax unit
    (:func:`~zoforge.sim.softmax_cosim.replay_softmax_calls` on :func:`~zoforge.sim.
    softmax_cosim.cosim_design`'s unit). Returns each call's RTL result (None for a call
    left to the golden model: with ``rtl == "adapters"`` the engine and softmax calls) and
    ``{"layer_jobs", "engine_jobs", "softmax_jobs"}`` (the jobs' counters; ``softmax_jobs``
    only where softmax calls ran). A unit's run that returns fewer or more results than its
    calls raises ValueError (never a call silently left without one)."""
    check_rtl_limits(cfg, rtl, hidden, ffn)
    max_cycles = job_cycle_bound(cfg, rtl, hidden, ffn)
    layer = cfg.layer_design(hidden, ffn)
    results: list[torch.Tensor | None] = [None] * len(calls)
    info = {"layer_jobs": [], "engine_jobs": []}
    layer_indices = [i for i, call in enumerate(calls) if isinstance(call, LAYER_CALLS)]
    if layer_indices:
        target = layer_target(layer)
        specs, data = [], {}
        for slot, index in enumerate(layer_indices):
            spec, arrays = layer_call_spec(calls[index], layer.cols)
            specs.append(spec)
            data.update({f"call{slot}_{name}": array for name, array in arrays.items()})
        args = {"calls": specs, "rows": layer.rows, "cols": layer.cols, "lanes": target.lanes}
        arrays, result = run_program("zoforge.sim.finetune_host:layer_calls_program", args,
                                     data, target, backend=backend, simulator=simulator,
                                     stalls=Stalls(), max_cycles=max_cycles)
        _passed(result)
        for slot, index in enumerate(layer_indices):
            results[index] = _layer_result(calls[index], arrays[f"out{slot}"])
        info["layer_jobs"] = result.results["jobs"]
    engine_indices = [i for i, call in enumerate(calls) if isinstance(call, EngineCall)]
    if rtl == "all" and engine_indices:
        design = EngineCosim(engine_design(cfg, hidden, ffn), simulator=simulator)
        per_call = [engine_jobs(calls[index], design.config.max_n) for index in engine_indices]
        args, data = design.program_inputs([job for jobs in per_call for job in jobs])
        arrays, result = run_program("zoforge.sim.engine_host:engine_program", args, data,
                                     design.target, backend=backend, simulator=simulator,
                                     max_cycles=max_cycles)
        _passed(result)
        position = 0
        for index, jobs in zip(engine_indices, per_call, strict=True):
            words = [arrays[f"out{position + j}"] for j in range(len(jobs))]
            results[index] = _engine_result(jobs, words, design.rows, design.cols)
            position += len(jobs)
        info["engine_jobs"] = result.results["jobs"]
    softmax_indices = [i for i, call in enumerate(calls) if isinstance(call, SoftmaxCall)]
    if rtl == "all" and softmax_indices:
        outs, info["softmax_jobs"] = replay_softmax_calls(
            [calls[i] for i in softmax_indices], cosim_design(cfg.seq_len), backend=backend,
            simulator=simulator, max_cycles=max_cycles)
        for index, out in zip(softmax_indices, outs, strict=True):
            results[index] = out
    return results, info


def _passed(result) -> None:
    if not result.passed:
        raise RuntimeError(f"co-simulation failed: {'; '.join(result.failures)}")
