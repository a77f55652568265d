"""The MiniLM ZO step on the board-sized accelerator against today's units (issue 32).

Prints TOPS, GOPS/DSP, seconds and joules per step, forward tokens per second and DDR bytes
per step for the board-sized design (reports/accel_cost.py on the planned or given
accelerator) and for today's two units (reports/finetune_cost.predicted_step_cycles), the
anchors beside them (labelled as theirs), the phases' roofline, and (unless --no-check) the
cycle model's error against co-simulation for every job kind on scaled-down configurations
of the same units: paired engines 4x4 and 8x4, the ZO layer 4x4 (lora-fa).

    .venv/bin/python benchmarks/bench_board_step.py            # docs/accelerator-cost.md
"""
from __future__ import annotations

import argparse
import os

from zoforge.boards.registry import get_board
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.hw.accel.schedule import step_schedule
from zoforge.hw.engine.config import EngineConfig
from zoforge.reports.accel_cost import board_step_fields, price_schedule
from zoforge.reports.finetune_cost import (UNIT_FIGURES, ModelShape, engine_job_cycles,
                                           measure_adapter_jobs, measure_engine_jobs,
                                           model_layer_config, predicted_step_cycles,
                                           step_time_energy)

ANCHORS = [("Swin accelerator, XCZU19EG (IEEE TVLSI 2025)", "paper", None, 0.63),
           ("2 x DPU B4096, ZCU104, 300 MHz (Xilinx UG1354, peak)", "vendor", 2.4, None),
           ("2 INT8 MACs/DSP x 2,520 DSP x 300 MHz (WP486 bound)", "bound", 3.02, 1.2)]


def _row(name, source, tops, gops_dsp, seconds, joules, tokens, ddr):
    def f(v, fmt):
        return "-" if v is None else format(v, fmt)
    print(f"| {name} | {source} | {f(tops, '.3f')} | {f(gops_dsp, '.3f')} | "
          f"{f(seconds and seconds * 1e3, '.2f')} | {f(joules, '.3f')} | {f(tokens, ',.0f')} | "
          f"{f(ddr and ddr / 1e6, '.1f')} |")


def _check() -> None:
    print("\n## cycle model against co-simulation (every job kind, scaled down)\n")
    print("| unit | job | M x K x N (x r) | predicted | measured | error |")
    print("|---|---|---|---|---|---|")
    for rows, cols in ((4, 4), (8, 4)):
        engine = EngineConfig(rows=rows, cols=cols, paired=True, max_m=64, max_k=64,
                              max_n=64)
        shapes = [(32, 48, 16, False), (64, 64, 12, True)]
        for (m, k, n, raw), cycles in zip(shapes, measure_engine_jobs(engine, shapes)):
            predicted = engine_job_cycles(engine, m, k, n)
            kind = "gemm-raw" if raw else "gemm"
            print(f"| engine {rows}x{cols} paired | {kind} | {m}x{k}x{n} | {predicted} | "
                  f"{cycles} | {predicted / cycles - 1:+.2%} |")
    shape = ModelShape(blocks=1, seq_len=8, batch=2, rank=8, hidden=32, ffn=64, heads=2)
    layer = model_layer_config(shape)
    m, k, n, r = 16, 32, 32, 8
    from zoforge.hw.zolayer.cycles import job_cycles
    for job, cycles in measure_adapter_jobs(layer, m, k, n, r):
        predicted = job_cycles(layer, job, m, k, n, r)
        print(f"| zo-layer 4x4 (branch_lanes 1) | {job} | {m}x{k}x{n}x{r} | {predicted} | "
              f"{cycles} | {predicted / cycles - 1:+.2%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-check", action="store_true", help="skip the co-simulation")
    parser.add_argument("--fix", action="append", default=[], metavar="FIELD=INT",
                        help="an accelerator field the planner keeps (repeatable)")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores, shared)")
    board = get_board("zcu102")
    cfg = FinetuneConfig(blocks=6, batch=4, seq_len=128, queries=2)
    shape = ModelShape(blocks=6, batch=4, seq_len=128, queries=2)
    accel = None
    if args.fix:
        from zoforge.hw.accel.plan import plan_accelerator
        fixed = dict(item.split("=", 1) for item in args.fix)
        accel = plan_accelerator(board, shape, **{k: int(v) for k, v in fixed.items()})
    fields = board_step_fields(cfg, 384, 1536, 12, 2, "zcu102", accel)
    from zoforge.hw.accel.config import AcceleratorConfig
    accel = AcceleratorConfig.from_dict({k: v for k, v in fields["accelerator"].items()
                                          if k != "kind"})
    figures = UNIT_FIGURES["zcu102"]
    print(f"\nboard-sized design: {fields['accelerator']}")
    print(f"clock {fields['fmax_mhz']} MHz ({fields['fmax_source']}); host "
          f"{fields['board_host_source']}; DSP {fields['dsp']}")
    today = predicted_step_cycles(shape)
    mhz = figures["fmax_mhz"]
    energy = step_time_energy(today, mhz, figures["static_w"], figures["dynamic_w"],
                              figures["power_at_mhz"], board.ddr_bytes_per_s)
    macs = sum(c.count * c.shape[0] * c.shape[1] * c.shape[2] for c in today.calls
               if c.unit == "engine") + sum(
        c.count * c.shape[0] * c.shape[1] * c.shape[2] for c in today.calls
        if c.unit == "zo-layer" and len(c.shape) == 4)
    today_s = energy["roofline_s"]
    print("\n| design | source | TOPS | GOPS/DSP | ms/step | J/step | fwd tokens/s | "
          "DDR MB/step |")
    print("|---|---|---|---|---|---|---|---|")
    _row("board-sized, host included", "cycle-model + arm-estimate", fields["tops"],
         fields["gops_per_dsp"], fields["seconds_per_step_at_fmax"],
         fields["joules_per_step"], fields["tokens_per_second"], fields["ddr_bytes_per_step"])
    fabric = fields["board_fabric_seconds_per_step"]
    _row("board-sized, fabric only", "cycle-model", 2 * fields["macs_per_step"] / fabric / 1e12,
         2 * fields["macs_per_step"] / fabric / fields["dsp"] / 1e9, fabric, None,
         4 * shape.tokens / fabric, fields["ddr_stream_bytes_per_step"])
    _row("today: 8x8 engine + 4x4 ZO layer, fabric only", "cycle-model", 2 * macs / today_s
         / 1e12, 2 * macs / today_s / 120 / 1e9, today_s, energy["roofline_j"],
         4 * shape.tokens / today_s, today.stream_bytes)
    for name, source, tops, gops in ANCHORS:
        _row(name, source + " (theirs)", tops, gops, None, None, None, None)
    print("\n(the 'fabric only' DDR column is as the RTL streams today; the host-included "
          "row's is packed)")
    print(f"host share: {fields['board_host_seconds_per_step'] * 1e3:.2f} ms of "
          f"{fields['seconds_per_step_at_fmax'] * 1e3:.2f} ms; next step "
          f"(Q.K^T, P.V on the engines) would save "
          f"{fields['attention_on_fabric_seconds_saved'] * 1e3:.2f} ms (modelled)")
    price = price_schedule(step_schedule(shape, accel), fields["fmax_mhz"],
                           board.ddr_bytes_per_s)
    print("\n| phase | cycles | compute ms | DDR ms (packed) | bound |")
    print("|---|---|---|---|---|")
    for phase in price.phases[:5] + price.phases[-2:]:
        print(f"| {phase.name} | {phase.cycles:,} | {phase.compute_s * 1e3:.3f} | "
              f"{phase.memory_s * 1e3:.3f} | {phase.bound} |")
    if not args.no_check:
        _check()
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
