"""Benchmark: the cost of one ZO fine-tuning step of MiniLM on the accelerator, and the
check of its cycle model against co-simulation.

Usage::

    python benchmarks/bench_finetune_cost.py [--blocks 6] [--seq-len 128] [--batch 8]
        [--rank 8] [--queries 2] [--board zcu102] [--mhz 300]
        [--fmax-mhz 330 --fmax-source yosys-estimate] [--power-w 0.855
        --power-source activity-model] [--check-batch 2 --check-seq-len 16] [--no-check]

Prints, every figure with its source label: the step's calls (count, cycles each from the
``cycle-model``, DDR bytes as streamed and as packed values, compute- or memory-bound on
the board's DDR at its theoretical peak), the step's cycles, time and energy at the given
clock and power, the units' on-chip memory bits, and peak memory of ZO against backprop
LoRA fine-tuning. Then (unless ``--no-check``) runs each distinct engine job shape of the
model and one adapter call plus update walk through the RTL (the Verilator job server) at
a small token count and prints predicted against measured cycles (``co-simulation``).

Fmax and power are parameters with their source: the defaults are the ``zoforge build``
reports of the two units' default designs on the ZCU102 (see docs/finetune-cost.md).
"""
from __future__ import annotations

import argparse
import sys

from zoforge.boards.registry import get_board
from zoforge.errors import ConfigError
from zoforge.reports.finetune_cost import (ADAPTER_CALL, COSIM, CYCLE_MODEL, ModelShape,
                                           adapter_call, backprop_peak_memory,
                                           engine_job_cycles, measure_adapter_jobs,
                                           measure_engine_jobs, memory_bits,
                                           model_engine_config, model_layer_config,
                                           predicted_step_cycles, roofline, step_time_energy,
                                           update_walk, zo_peak_memory)

# `zoforge build --board zcu102 --design engine --rows 8 --cols 8` and `--design zo-layer`
# (default capacities), at the board's 300 MHz: see docs/finetune-cost.md
FMAX_MHZ = 330.0          # yosys-estimate, both units (engine 330, zo-layer 330)
POWER_W = 0.590 + 0.173 + 0.092   # activity-model: static once + each unit's dynamic


def _mib(n: float) -> str:
    return f"{n / 2**20:,.2f} MiB"


def cost_tables(shape: ModelShape, board_name: str, mhz: float, fmax: tuple[float, str],
                power: tuple[float, str]) -> None:
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
          "MHz |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for call in step.calls:
        row = rows[call.name]
        print(f"| {call.name} | {call.unit} | {'x'.join(map(str, call.shape))} | {call.count} "
              f"| {call.cycles:,.0f} | {call.total_cycles:,.0f} | {call.stream_bytes:,} | "
              f"{call.payload_bytes:,} | {row.bytes_per_cycle:.2f} | {row.bound} |")
    share = step.unit_cycles("zo-layer") / step.cycles
    print(f"\nstep: {step.cycles:,.0f} cycles ({CYCLE_MODEL}; ZO layer {100 * share:.1f} %), "
          f"{step.stream_bytes / 1e6:,.1f} MB streamed ({step.payload_bytes / 1e6:,.1f} MB "
          f"as packed values); host attention MACs {step.host_macs:,} (not in the cycles)")
    for clock, label in ((mhz, "clock"), (fmax[0], f"Fmax, {fmax[1]}")):
        t = step_time_energy(step, clock, power[0], bandwidth)
        print(f"at {clock:g} MHz ({label}): {t['compute_s']:.3f} s compute-bound, "
              f"{t['roofline_s']:.3f} s with DDR ({board.name}, theoretical peak); "
              f"{t['roofline_j']:.3f} J at {power[0]:.3f} W ({power[1]})")
    bits = memory_bits(step.engine, step.layer)
    print(f"on-chip memory (configuration sizes): engine {bits['engine']:,} bits, ZO layer "
          f"{bits['zo-layer']:,} bits, total {bits['total'] / 8 / 2**20:.2f} MiB; board "
          f"BRAM18: {board.capacities.get('BRAM18', 0) * 18 * 1024:,} bits")
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


def check(batch: int, seq_len: int, rank: int) -> None:
    """Predicted against co-simulated cycles per distinct layer shape."""
    shape = ModelShape(seq_len=seq_len, batch=batch, rank=rank)
    engine, layer = model_engine_config(shape), model_layer_config(shape)
    m, h, f = shape.tokens, shape.hidden, shape.ffn
    chunk = -(-f // -(-f // engine.max_n))
    shapes = [(m, h, h, False), (m, h, chunk, False), (m, f, h, False),
              (shape.batch, h, shape.classes, True)]
    names = ["key/attn_out", "ffn_in chunk", "ffn_out", "head (raw)"]
    measured = measure_engine_jobs(engine, shapes)
    print(f"\ncheck at M = {m} tokens: predicted ({CYCLE_MODEL}) against measured ({COSIM}, "
          "the job server's CYCLES per job)")
    print("| unit | job | M x K x N (x r) | predicted | measured | predicted / measured |")
    print("|---|---|---|---|---|---|")
    for name, (mm, k, n, _), cycles in zip(names, shapes, measured):
        predicted = engine_job_cycles(engine, mm, k, n)
        print(f"| engine | {name} | {mm}x{k}x{n} | {predicted:,} | {cycles:,} | "
              f"{predicted / cycles:.4f} |")
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in (("blocks", 6), ("seq-len", 128), ("batch", 8), ("rank", 8),
                          ("queries", 2), ("check-batch", 2), ("check-seq-len", 16)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--board", default="zcu102")
    parser.add_argument("--mhz", type=float, default=300.0, help="clock of the time/energy")
    parser.add_argument("--fmax-mhz", type=float, default=FMAX_MHZ)
    parser.add_argument("--fmax-source", default="yosys-estimate")
    parser.add_argument("--power-w", type=float, default=POWER_W)
    parser.add_argument("--power-source", default="activity-model")
    parser.add_argument("--no-check", action="store_true", help="skip the co-simulation")
    args = parser.parse_args(argv)
    try:
        shape = ModelShape(blocks=args.blocks, seq_len=args.seq_len, batch=args.batch,
                           rank=args.rank, queries=args.queries)
        cost_tables(shape, args.board, args.mhz, (args.fmax_mhz, args.fmax_source),
                    (args.power_w, args.power_source))
        if not args.no_check:
            check(args.check_batch, args.check_seq_len, args.rank)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
