"""Benchmark: the cost of one ZO fine-tuning step of MiniLM on the accelerator, and the
check of its cycle model against co-simulation.

Usage::

    python benchmarks/bench_finetune_cost.py [--blocks 6] [--seq-len 128] [--batch 8]
        [--rank 8] [--queries 2] [--board zcu102] [--mhz 300]
        [--reports ENGINE.json LAYER.json | --fmax-mhz F --fmax-source S --static-w P
         --dynamic-w P --power-mhz F --power-source S] [--check-batch 2 --check-seq-len 16 --check-rank 8] [--no-check]

Prints, every figure with its source label: the step's calls (count, cycles each from the
``cycle-model``, DDR bytes as streamed and as packed values, compute- or memory-bound on
the board's DDR at its theoretical peak), the step's cycles, time and energy at the given
clock (static and dynamic energy apart, the dynamic power taken to that clock), the units' on-chip memory bits, and peak memory of ZO against backprop
LoRA fine-tuning. Then (unless ``--no-check``) runs each distinct engine job shape of the
model and one adapter call plus update walk through the RTL (the Verilator job server) at
a small token count and prints predicted against measured cycles (``co-simulation``).

Fmax and power are parameters with their source, or read from the two units' ``zoforge
build`` reports (``--reports``: the lower Fmax; the static power once, apart from both
dynamic powers); the defaults are those reports' figures for the units' default designs on the
ZCU102 (see docs/finetune-cost.md).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from zoforge.boards.registry import get_board
from zoforge.errors import ConfigError
from zoforge.hw.engine.cycles import engine_job_cycles
from zoforge.reports.model import Report
from zoforge.reports.model_shape import ModelShape
from zoforge.reports.rtl_jobs import COSIM, measure_adapter_jobs, measure_engine_jobs
from zoforge.reports.step_memory import backprop_peak_memory, memory_bits, zo_peak_memory
from zoforge.reports.step_price import (UNIT_FIGURES, roofline, step_time_energy,
                                        units_clock_power)
from zoforge.reports.unit_calls import (ADAPTER_CALL, CYCLE_MODEL, adapter_call,
                                        model_engine_config, model_layer_config,
                                        predicted_step_cycles, update_walk)

#: Per board, the Fmax (value, source) and the power (static W, dynamic W, the clock the
#: dynamic power was estimated at, source): reports/step_price.py's figures.
DEFAULTS = {board: ((f["fmax_mhz"], f["fmax_source"]),
                    (f["static_w"], f["dynamic_w"], f["power_at_mhz"], f["power_source"]))
            for board, f in UNIT_FIGURES.items()}


def _mib(n: float) -> str:
    return f"{n / 2**20:,.2f} MiB"


def cost_tables(shape: ModelShape, board_name: str, mhz: float,
                fmax: tuple[float, str] | None,
                power: tuple[float, float, float, str] | None) -> None:
    """The step's cost tables on ``board_name`` at ``mhz``; ``fmax``: (value, source),
    ``power``: (static W, dynamic W, MHz it was estimated at, source), or None."""
    board = get_board(board_name)
    step = predicted_step_cycles(shape)
    print(f"MiniLM, {shape.blocks} blocks, batch {shape.batch} x seq {shape.seq_len} = "
          f"{shape.tokens} tokens, rank {shape.rank}, {shape.adapters} adapters, q = "
          f"{shape.queries}; engine {step.engine.rows}x{step.engine.cols} pack "
          f"{step.engine.pack}, ZO layer {step.layer.rows}x{step.layer.cols}")
    bandwidth = board.ddr_bytes_per_s
    print(f"board {board.name}: DDR {bandwidth / 1e9:.3f} GB/s ({board.ddr_source})")
    rows = {row.name: row for row in roofline(step, mhz, bandwidth)}
    print(f"\n| call | unit | shape | per step | cycles each ({CYCLE_MODEL}) | cycles per "
          f"step | stream bytes each | payload bytes each | bytes/cycle | bound at {mhz:g} "
          "MHz | s per step (roofline) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for call in step.calls:
        row = rows[call.name]
        print(f"| {call.name} | {call.unit} | {'x'.join(map(str, call.shape))} | {call.count} "
              f"| {call.cycles:,.0f} | {call.total_cycles:,.0f} | {call.stream_bytes:,} | "
              f"{call.payload_bytes:,} | {row.bytes_per_cycle:.2f} | {row.bound} | "
              f"{row.count * row.time_s:.4f} |")
    share = step.unit_cycles("zo-layer") / step.cycles
    print(f"\nstep: {step.cycles:,.0f} cycles ({CYCLE_MODEL}; ZO layer {100 * share:.1f} %), "
          f"{step.stream_bytes / 1e6:,.1f} MB streamed ({step.payload_bytes / 1e6:,.1f} MB "
          f"as packed values); host attention MACs {step.host_macs:,} (not in the cycles)")
    static_w, dynamic_w, power_mhz, power_source = power or (0.0, 0.0, mhz, "")
    t = step_time_energy(step, mhz, static_w, dynamic_w, power_mhz, bandwidth)
    energy = (f"; dynamic {t['roofline_dynamic_j']:.3f} J ({power_source} at "
              f"{power_mhz:g} MHz, taken to {mhz:g} MHz), static {t['roofline_static_j']:.3f} "
              f"J ({static_w:.3f} W, {board.static_power_source})" if power
              else "; no power figure for this board")
    print(f"at {mhz:g} MHz: {t['compute_s']:.3f} s compute-bound, {t['roofline_s']:.3f} s "
          f"with DDR ({board.name}, theoretical peak){energy}")
    if fmax:
        t = step_time_energy(step, fmax[0], static_w, dynamic_w, power_mhz, bandwidth)
        energy = (f"; dynamic {t['roofline_dynamic_j']:.3f} J (taken to {fmax[0]:g} MHz), "
                  f"static {t['roofline_static_j']:.3f} J" if power else "")
        print(f"at Fmax {fmax[0]:g} MHz ({fmax[1]}): {t['roofline_s']:.3f} s with DDR{energy}")
    bits = memory_bits(step.engine, step.layer)
    capacity = board.capacities.get("BRAM18", 0) * 18 * 1024
    print(f"on-chip memory (configuration sizes): engine {bits['engine']:,} bits, ZO layer "
          f"{bits['zo-layer']:,} bits, total {bits['total']:,} bits; the board's BRAM18: "
          f"{capacity:,} bits ({board.capacity_source}): "
          f"{'fits' if bits['total'] <= capacity else 'does NOT fit'} (bits only)")
    print(f"host: {sum(c.count * c.table_words for c in step.calls):,} AXI4-Lite table words "
          "per step (not in the cycles)")
    zo, bp, lean = (zo_peak_memory(shape), backprop_peak_memory(shape),
                    backprop_peak_memory(shape, frozen_aware=True))
    print("\n| peak memory | ZO (int8, 24-bit masters) | backprop LoRA-FA (fp32, Adam) | "
          "backprop, frozen-aware autograd |")
    print("|---|---|---|---|")
    for key in ("weights", "channel_params", "adapters_a", "masters", "gradients", "adam",
                "accumulator", "generator", "activations", "total"):
        print(f"| {key} | {_mib(zo[key]) if key in zo else '-'} | "
              f"{_mib(bp[key]) if key in bp else '-'} | "
              f"{_mib(lean[key]) if key in lean else '-'} |")


def check(batch: int, seq_len: int, rank: int) -> list[float]:
    """Predicted against co-simulated cycles per distinct layer shape."""
    shape = ModelShape(seq_len=seq_len, batch=batch, rank=rank)
    engine, layer = model_engine_config(shape), model_layer_config(shape)
    m, h, f = shape.tokens, shape.hidden, shape.ffn
    chunk = -(-f // -(-f // engine.max_n))
    shapes = [(m, h, h, False), (m, h, chunk, False), (m, f, h, False),
              (shape.batch, h, shape.classes, True)]
    names = ["key/attn_out", "ffn_in chunk", "ffn_out", "head (raw)"]
    measured = measure_engine_jobs(engine, shapes)
    ratios = []
    print(f"\ncheck at M = {m} tokens: predicted ({CYCLE_MODEL}) against measured ({COSIM}, "
          "the job server's CYCLES per job)")
    print("| unit | job | M x K x N (x r) | predicted | measured | predicted / measured |")
    print("|---|---|---|---|---|---|")
    for name, (mm, k, n, _), cycles in zip(names, shapes, measured):
        predicted = engine_job_cycles(engine, mm, k, n)
        print(f"| engine | {name} | {mm}x{k}x{n} | {predicted:,} | {cycles:,} | "
              f"{predicted / cycles:.4f} |")
        ratios.append(predicted / cycles)
    r = -(-rank // layer.rows) * layer.rows
    jobs = measure_adapter_jobs(layer, m, h, h, r)
    calls = (adapter_call(layer, m, h, h, r), update_walk(layer, h, h, r))
    parts = (jobs[:len(ADAPTER_CALL)], jobs[len(ADAPTER_CALL):])
    for call, part in zip(calls, parts):
        for (job, predicted), (_, cycles) in zip(call.jobs, part):
            print(f"| zo-layer | {job} | {m}x{h}x{h}x{r} | {predicted:,.0f} | {cycles:,} | "
                  f"{predicted / cycles:.4f} |")
        total = sum(c for _, c in part)
        print(f"| zo-layer | **{call.name}** | | {call.cycles:,.0f} | {total:,} | "
              f"{call.cycles / total:.4f} |")
        ratios.append(call.cycles / total)
    return ratios


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in (("blocks", 6), ("seq-len", 128), ("batch", 8), ("rank", 8),
                          ("queries", 2), ("check-batch", 2), ("check-seq-len", 16),
                          ("check-rank", 8)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--board", default="zcu102")
    parser.add_argument("--mhz", type=float, default=300.0, help="clock of the time/energy")
    parser.add_argument("--fmax-mhz", type=float, help="default: the board's in DEFAULTS")
    parser.add_argument("--fmax-source", default="yosys-estimate")
    parser.add_argument("--static-w", type=float, help="default: the board's in DEFAULTS")
    parser.add_argument("--dynamic-w", type=float, help="default: the board's in DEFAULTS")
    parser.add_argument("--power-mhz", type=float,
                        help="the clock the dynamic power was estimated at (default --mhz)")
    parser.add_argument("--power-source", default="activity-model")
    parser.add_argument("--reports", nargs=2, type=Path, metavar=("ENGINE", "LAYER"),
                        help="report.json of `zoforge build` for the engine and the ZO layer")
    parser.add_argument("--no-check", action="store_true", help="skip the co-simulation")
    args = parser.parse_args(argv)
    try:
        shape = ModelShape(blocks=args.blocks, seq_len=args.seq_len, batch=args.batch,
                           rank=args.rank, queries=args.queries)
        fmax, power = DEFAULTS.get(args.board, (None, None))
        if args.fmax_mhz is not None:
            fmax = (args.fmax_mhz, args.fmax_source)
        if args.static_w is not None or args.dynamic_w is not None:
            power = (args.static_w or 0.0, args.dynamic_w or 0.0, args.power_mhz or args.mhz,
                     args.power_source)
        if args.reports:
            units = units_clock_power(*(Report.from_json(json.loads(path.read_text()),
                                                          str(path)) for path in args.reports))
            fmax = (units.fmax_mhz, units.fmax_source)
            power = (units.static_w, units.dynamic_w, units.power_at_mhz, units.power_source)
        cost_tables(shape, args.board, args.mhz, fmax, power)
        if not args.no_check:
            ratios = check(args.check_batch, args.check_seq_len, args.check_rank)
            print(f"\nlargest |predicted / measured - 1|: "
                  f"{max(abs(r - 1) for r in ratios):.4f}")
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
