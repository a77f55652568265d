"""The MiniLM ZO step on the board-sized accelerator against today's units (issue 32).

Prints TOPS, GOPS/DSP, seconds and joules per step, forward tokens per second and DDR bytes
per step for the board-sized design (reports/accel_cost.py on the planned or given
accelerator; the host's work overlapped per piece, reports/overlap.py, and serial) with
both adapter mappings (split: X·W and U on the engines, the ZO layers only U·Tp; layer: all
on the ZO layers), both attentions (host: Q·K^T and P·V in float32 on the ARM cores;
engines: raw int8 engine jobs per sequence and head, golden/finetune/attention.py) and both
nonlinears (float: softmax and GELU on the host; integer: on the accelerator's softmax units
and GELU engines where the design has them, the planner's fastest choosing), host included
and fabric only; today's two units
(reports/unit_calls.predicted_step_cycles), the anchors beside them (labelled as
theirs), the phases' roofline, where the step's time goes (the engines' jobs, the DDR
alone, the host's exposed share, what the DDR's sharing costs the accelerator's pieces),
hand-chosen designs (unless --no-candidates) and (unless
--no-check) the cycle model's error against co-simulation for every job kind on
scaled-down configurations of the same units: paired engines 4x4 and 8x4, the softmax
unit, the attention links on a scaled-down top (scores jobs into the links, linked and DDR
softmax jobs, a route-0 engine job; clocks 1:1 and 3:2), the ZO layer 4x4 (lora-fa).

    .venv/bin/python benchmarks/bench_board_step.py            # docs/accelerator-cost.md
"""
from __future__ import annotations

import argparse
import os

from zoforge.boards.registry import get_board
from zoforge.errors import ConfigError
from zoforge.golden.finetune.config import ATTENTIONS, NONLINEARS, FinetuneConfig
from zoforge.hw.accel.config import AcceleratorConfig
from zoforge.hw.accel.plan import budget, estimate_resources, plan_accelerator
from zoforge.hw.accel.schedule import MAPPINGS, step_schedule
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.cycles import engine_job_cycles
from zoforge.hw.zolayer.cycles import job_cycles
from zoforge.reports.accel_cost import (board_step_fields, ddr_sharing_seconds, design_clocks,
                                        fastest_accelerator, overlapped_stages,
                                        price_schedule)
from zoforge.reports.model_shape import ModelShape
from zoforge.reports.rtl_jobs import measure_adapter_jobs, measure_engine_jobs
from zoforge.reports.step_price import UNIT_FIGURES, step_time_energy
from zoforge.reports.unit_calls import model_layer_config, predicted_step_cycles

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
    # the softmax unit (4 lanes, rows up to 16 keys): random jobs on Verilator
    from zoforge.hw.softmax.config import SoftmaxConfig
    from zoforge.sim.softmax_host import SoftmaxCosimOptions, cosim_softmax
    unit = SoftmaxConfig(lanes=4, max_len=16)
    result = cosim_softmax(unit, SoftmaxCosimOptions(jobs=3, max_rows=8))
    if not result["bit_exact"]:
        raise RuntimeError(f"softmax unit: not bit-exact ({result})")
    for predicted, cycles in zip(result["model_cycles"], result["cycles"]):
        print(f"| softmax 4 lanes x 16 | softmax | (random rows, keys) | {predicted} | "
              f"{cycles} | {predicted / cycles - 1:+.2%} |")
    # the attention links: two paired 4x4 engines' scores into one 4-lane softmax unit
    # through their links, on the scaled-down top's RTL (clocks 1:1 and 3:2, softmax slower)
    from zoforge.sim.link_cosim import LinkCosimOptions, cosim_linked_attention
    linked = AcceleratorConfig(engines=2, engine_rows=4, engine_cols=4, engine_max_m=16,
                               engine_max_k=16, engine_max_n=16, layers=1, layer_max_m=16,
                               layer_max_k=16, layer_max_n=16, layer_max_r=4,
                               softmax_units=1, softmax_lanes=4, softmax_max_len=8,
                               link=True, link_max_rows=8, link_max_len=8)
    result = cosim_linked_attention(linked, LinkCosimOptions())
    if not result["bit_exact"]:
        raise RuntimeError(f"linked attention: not bit-exact ({result['checks']})")
    for ratio, run in result["runs"].items():
        for row in run["jobs"]:
            if row["cycles"] is None or ratio not in ("1:1", "3:2"):
                continue
            shape_text = "x".join(str(row[key]) for key in ("m", "k", "n", "rows", "length")
                                  if key in row)
            print(f"| top with links, clocks {ratio} | {row['kind']} | {shape_text} | "
                  f"{row['model']} | {row['cycles']} | "
                  f"{row['model'] / row['cycles'] - 1:+.2%} |")
    shape = ModelShape(blocks=1, seq_len=8, batch=2, rank=8, hidden=32, ffn=64, heads=2)
    layer = model_layer_config(shape)
    # the layer mapping's adapter (K = the map's), the split mapping's narrow one (K = r)
    for m, k, n, r in ((16, 32, 32, 8), (16, 8, 32, 8)):
        for job, cycles in measure_adapter_jobs(layer, m, k, n, r):
            predicted = job_cycles(layer, job, m, k, n, r)
            print(f"| zo-layer 4x4 (branch_lanes 1) | {job} | {m}x{k}x{n}x{r} | {predicted} | "
                  f"{cycles} | {predicted / cycles - 1:+.2%} |")


#: Hand-chosen designs the benchmark prices beside the planner's (the split mapping): ZO
#: layers only r deep (``layer_max_k`` 8: the split mapping's narrow adapters), several of
#: them, the engines the planner fits around them (``plan_accelerator`` with these fields
#: fixed, so each fits the board's budget). Not the planner's choice: labelled hand-chosen.
HAND_CHOSEN = (
    {"layers": 3, "layer_rows": 4, "layer_cols": 4, "layer_max_m": 256},
    {"layers": 2, "layer_rows": 8, "layer_cols": 4, "layer_max_m": 256},
    {"layers": 2, "layer_rows": 8, "layer_cols": 8, "layer_max_m": 128},
    {"layers": 1, "layer_rows": 8, "layer_cols": 8},
)
#: A DSP-bound design, not one that fits: 7 paired 64x8 engines and 3 ZO layers 4x4 use
#: ~80 % of the 2,520 DSPs, but the engines' LUT estimate is over the device's LUTs.
DSP_BOUND = {"engines": 7, "engine_rows": 64, "engine_cols": 8, "layers": 3, "layer_rows": 4,
             "layer_cols": 4, "layer_max_k": 8, "layer_max_r": 8, "layer_max_m": 256,
             "engine_max_m": 256, "engine_max_k": 1536, "engine_max_n": 512,
             "layer_max_n": 384}


def _design_rows(label: str, fields: dict, with_energy: bool = True) -> None:
    """The table's rows of one design and attention: the host overlapped per piece (the
    priced step), the host serial, fabric only."""
    seconds, fabric = fields["seconds_per_step_at_fmax"], fields["board_fabric_seconds_per_step"]
    serial = fields["board_serial_seconds_per_step"]
    macs, dsp = fields["macs_per_step"], fields["dsp"]
    _row(f"{label}, host overlapped", fields["seconds_source"], fields["tops"],
         fields["gops_per_dsp"], seconds, fields["joules_per_step"] if with_energy else None,
         fields["tokens_per_second"], fields["ddr_bytes_per_step"])
    _row(f"{label}, host serial", fields["serial_source"], 2 * macs / serial / 1e12,
         2 * macs / serial / dsp / 1e9, serial,
         fields["joules_per_step"] * serial / seconds if with_energy else None,
         fields["tokens_per_second"] * seconds / serial, fields["ddr_bytes_per_step"])
    _row(f"{label}, fabric only", "cycle-model", 2 * macs / fabric / 1e12,
         2 * macs / fabric / dsp / 1e9, fabric, None, None, fields["ddr_stream_bytes_per_step"])


def _attention_rows(label: str, cfg, accel) -> None:
    """:func:`_design_rows` of ``accel`` (split mapping, float nonlinear: no nonlinear
    units) with each attention."""
    for attention in ATTENTIONS:
        fields = board_step_fields(cfg.replace(attention=attention, nonlinear="float"), 384,
                                   1536, 12, 2, "zcu102", accel)
        _design_rows(f"{label}, {attention} attention", fields)


def _header() -> None:
    print("\n| design | source | TOPS | GOPS/DSP | ms/step | J/step | fwd tokens/s | "
          "DDR MB/step |")
    print("|---|---|---|---|---|---|---|---|")


def _today(shape, board) -> None:
    figures = UNIT_FIGURES["zcu102"]
    today = predicted_step_cycles(shape)
    energy = step_time_energy(today, figures["fmax_mhz"], figures["static_w"],
                              figures["dynamic_w"], figures["power_at_mhz"],
                              board.ddr_bytes_per_s)
    macs = sum(c.count * c.shape[0] * c.shape[1] * c.shape[2] for c in today.calls
               if c.unit == "engine") + sum(
        c.count * c.shape[0] * c.shape[1] * c.shape[2] for c in today.calls
        if c.unit == "zo-layer" and len(c.shape) == 4)
    today_s = energy["roofline_s"]
    _row("today: 8x8 engine + 4x4 ZO layer, fabric only", "cycle-model", 2 * macs / today_s
         / 1e12, 2 * macs / today_s / 120 / 1e9, today_s, energy["roofline_j"],
         4 * shape.tokens / today_s, today.stream_bytes)


def _brief(accel) -> str:
    units = (f", {accel.gelu_engines} GELU engines" if accel.gelu_engines else "") + (
        f", {accel.softmax_units} x {accel.softmax_lanes}-lane softmax units"
        if accel.softmax_units else "") + (
        f" fed by the engines' attention links ({accel.link_max_rows}-row banks)"
        if accel.link else "")
    return (f"{accel.engines} x {accel.engine_rows}x{accel.engine_cols} engines, "
            f"{accel.layers} x {accel.layer_rows}x{accel.layer_cols} ZO layers "
            f"(layer_max_k {accel.layer_max_k}, layer_max_m {accel.layer_max_m}){units}, "
            f"{accel.dsp} DSP")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-check", action="store_true", help="skip the co-simulation")
    parser.add_argument("--no-candidates", action="store_true",
                        help="skip the hand-chosen designs")
    parser.add_argument("--fix", action="append", default=[], metavar="FIELD=INT",
                        help="an accelerator field the planner keeps (repeatable)")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores, shared)")
    board = get_board("zcu102")
    cfg = FinetuneConfig(blocks=6, batch=4, seq_len=128, queries=2)
    shape = ModelShape(blocks=6, batch=4, seq_len=128, queries=2)
    fixed = {k: int(v) for k, v in (item.split("=", 1) for item in args.fix)}
    runs = [(attention, nonlinear) for attention in ATTENTIONS for nonlinear in NONLINEARS]
    # the design zoforge finetune --design accelerator reports: the planner's fastest (for
    # each attention and nonlinear: the search prices the step with them)
    designs = {run: plan_accelerator(board, shape, **fixed) if fixed else
               fastest_accelerator(board, shape, cfg.replace(attention=run[0],
                                                             nonlinear=run[1]), "split")
               for run in runs}
    accel = designs["host", "float"]
    step, unfit = {}, {}
    for mapping in MAPPINGS:
        for attention, nonlinear in runs:
            try:
                step[mapping, attention, nonlinear] = board_step_fields(
                    cfg.replace(attention=attention, nonlinear=nonlinear), 384, 1536, 12, 2,
                    "zcu102", designs[attention, nonlinear], mapping=mapping)
            except ConfigError as error:          # e.g. layer_max_k = r: the layer mapping
                unfit[mapping] = str(error)
    fields = step["split", "host", "float"]
    label = "given" if fixed else "planned"
    print(f"\n{label} design: {_brief(accel)}: {accel.to_dict()}")
    for run in runs[1:]:
        if designs[run] != accel:
            print(f"{label} design for {run[0]} attention, {run[1]} nonlinear: "
                  f"{_brief(designs[run])}: {designs[run].to_dict()}")
    print(f"clock {fields['fmax_mhz']} MHz ({fields['fmax_source']}); softmax units at "
          f"{design_clocks('zcu102', accel)[1]} MHz (their own); host "
          f"{fields['board_host_source']}")
    for run in runs[1:]:
        if designs[run] != accel:
            print(f"clock of the design for {run[0]} attention, {run[1]} nonlinear: "
                  f"{step['split', *run]['fmax_mhz']} MHz ({step['split', *run]['fmax_source']})")
    _header()
    for (mapping, attention, nonlinear), f in step.items():
        _design_rows(f"{label}, {mapping} mapping, {attention} attention, {nonlinear} "
                     "nonlinear", f)
    _today(shape, board)
    for name, source, tops, gops in ANCHORS:
        _row(name, source + " (theirs)", tops, gops, None, None, None, None)
    print("\n(the 'fabric only' DDR column is as the RTL streams today; the host rows' "
          "is packed)")
    for mapping, reason in unfit.items():
        print(f"{mapping} mapping: does not fit this design ({reason})")
    for (mapping, attention, nonlinear), f in step.items():
        saved = f["attention_on_fabric_seconds_saved"]
        print(f"{mapping}, {attention} attention, {nonlinear} nonlinear: step "
              f"{f['seconds_per_step_at_fmax'] * 1e3:.2f} ms (serial "
              f"{f['board_serial_seconds_per_step'] * 1e3:.2f}): fabric alone "
              f"{f['board_fabric_seconds_per_step'] * 1e3:.2f} ms, host alone "
              f"{f['board_host_seconds_per_step'] * 1e3:.2f} ms, of which exposed "
              f"{f['board_host_exposed_seconds_per_step'] * 1e3:.2f} ms"
              + (f"; the rough model of Q.K^T, P.V on the engines (no quantization, no DDR) "
                 f"would save {saved * 1e3:.2f} ms" if attention == "host" else ""))
    for attention, nonlinear in runs:
        design = designs[attention, nonlinear]
        engines_mhz, softmax_mhz, _ = design_clocks("zcu102", design)
        price = price_schedule(step_schedule(shape, design, cfg.first_adapted,
                                             attention=attention, nonlinear=nonlinear),
                               engines_mhz, board.ddr_bytes_per_s, softmax_mhz)
        print(f"\n| phase (split mapping, {attention} attention, {nonlinear} nonlinear) | "
              "cycles | busiest unit | compute ms | DDR ms (packed) | bound |")
        print("|---|---|---|---|---|---|")
        for phase in price.phases[:7] + price.phases[-2:]:
            busiest = max(phase.unit_cycles, key=phase.unit_cycles.get)
            print(f"| {phase.name} | {phase.cycles:,} | {busiest[0]} {busiest[1]} | "
                  f"{phase.compute_s * 1e3:.3f} | {phase.memory_s * 1e3:.3f} | "
                  f"{phase.bound} |")
    _where_the_time_goes(cfg, shape, board, designs["engines", "integer"])
    if not args.no_candidates:
        _nonlinear_options(cfg, shape, board, designs["engines", "integer"])
        _candidates(cfg, shape, board)
    if not args.no_check:
        _check()
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


def ddr_floor_bytes(shape) -> int:
    """The DDR bytes a step with engine attention and the integer softmax cannot do
    without, by hand from the model's shape (a floor: no branch shares work, no unit keeps
    a tensor on chip across maps): each frozen int8 weight read once a step (per block the
    Q, K, V and output maps H x H and the FFN's two H x F), and per forward (2q) and block
    each tensor written once and read once where it crosses DDR: int8 x, q, k, v, the
    context, attn_out's and ffn_out's y (12 T x H bytes: qkv reads x and writes q, k, v;
    scores read q, k; context reads v and writes; attn_out reads and writes; ffn_in reads;
    ffn_out writes), ffn_in's y (T x F, written and read), the int32 scores (4 bytes,
    written and read) and the int8 probabilities (written and read), T x L x heads each."""
    T, H, F, L = shape.tokens, shape.hidden, shape.ffn, shape.seq_len
    weights = shape.blocks * (4 * H * H + 2 * H * F)
    per_forward = 12 * T * H + 2 * T * F + (4 + 4 + 1 + 1) * T * L * shape.heads
    return weights + 2 * shape.queries * shape.blocks * per_forward


def attention_round_trip_bytes(schedule) -> int:
    """DDR bytes (packed payload) that attention sends out and reads back: Q·K^T's int32
    scores written, the softmax units' scores read and P written, P·V's P read (its
    first operand). What an on-chip attention would not move (docs/accelerator.md,
    "What binds the step now")."""
    total = 0
    for phase in schedule.phases:
        kind = phase.name.rsplit(".", 1)[-1]
        for transfer in phase.transfers:
            if (kind == "softmax" or (kind == "scores" and transfer.role == "y")
                    or (kind == "context" and transfer.role == "x")):
                total += transfer.payload_bytes
    return total


def _where_the_time_goes(cfg, shape, board, design) -> None:
    """The default run's step (engine attention, integer nonlinear) on its planned design:
    each resource alone (the engines' jobs back to back, split evenly; the DDR's bytes at
    its peak; the host's work) and the engines' use by job kind: useful MACs (M·K·N) over
    the array's MACs a cycle (R·C) times the jobs' modelled cycles."""
    engines_mhz, softmax_mhz, _ = design_clocks("zcu102", design)
    schedule = step_schedule(shape, design, cfg.first_adapted, attention="engines",
                             nonlinear="integer")
    price = price_schedule(schedule, engines_mhz, board.ddr_bytes_per_s, softmax_mhz)
    per_mac = design.engine_rows * design.engine_cols
    kinds: dict = {}
    for phase, cost in zip(schedule.phases, price.phases):
        for job, cycles in zip(phase.jobs, cost.job_cycles):
            if job.unit == "engine":
                row = kinds.setdefault((job.kind, job.k), [0, 0, 0])
                row[0], row[1], row[2] = row[0] + 1, row[1] + cycles, row[2] + job.macs
    busy = sum(cycles for _, cycles, _ in kinds.values()) / design.engines
    engine_macs = sum(macs for _, _, macs in kinds.values())
    print(f"\n## where the step's time goes (engines attention, integer nonlinear, "
          f"{_brief(design)})\n")
    print(f"- the step, host overlapped: {price.seconds * 1e3:.2f} ms; the accelerator "
          f"alone {price.fabric_s * 1e3:.2f} ms")
    print(f"- the engines' jobs alone (evenly split): {busy / engines_mhz / 1e3:.2f} ms; at "
          f"100 % use {engine_macs / per_mac / design.engines / engines_mhz / 1e3:.2f} ms")
    print(f"- the DDR's bytes alone at its peak ({board.ddr_bytes_per_s / 1e9:.1f} GB/s): "
          f"{price.payload_bytes / board.ddr_bytes_per_s * 1e3:.2f} ms")
    print(f"- the host's work alone: {price.host_s * 1e3:.2f} ms, "
          f"{price.host_exposed_s * 1e3:.2f} ms of it exposed")
    lost, idle = ddr_sharing_seconds(overlapped_stages(schedule, price.phases))
    print(f"- the DDR shared (reports/overlap.py): the accelerator's pieces "
          f"{lost * 1e3:.2f} ms longer than alone in all; the engines and ZO layers idle "
          f"{idle * 1e3:.2f} ms of the step")
    floor = ddr_floor_bytes(shape)
    print(f"- DDR bytes per step {price.payload_bytes / 1e6:.1f} MB (packed payload), "
          f"{price.payload_bytes / floor:.2f} x the floor of {floor / 1e6:.1f} MB "
          f"(ddr_floor_bytes: each tensor of the step once); of them "
          f"{attention_round_trip_bytes(schedule) / 1e6:.1f} MB attention's round trip "
          f"(scores out and back, P out and back: attention_round_trip_bytes)\n")
    print("| engine job kind | K | jobs | cycles (all engines) | use | ms lost (evenly split) |")
    print("|---|---|---|---|---|---|")
    for (kind, k), (jobs, cycles, macs) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        ideal = macs / per_mac
        print(f"| {kind} | {k} | {jobs:,} | {cycles:,} | {ideal / cycles:.2f} | "
              f"{(cycles - ideal) / design.engines / engines_mhz / 1e3:.2f} |")


#: The nonlinear units priced beside the search's choice (gelu_engines, softmax_units,
#: softmax_lanes): on the planned integer design's arrays and layer, the engines re-planned
#: around them.
NONLINEAR_OPTIONS = ((0, 0, 8), (0, 1, 8), (0, 1, 16), (0, 2, 7), (0, 2, 8), (0, 2, 16),
                     (0, 3, 5), (1, 0, 8), (1, 1, 8), (2, 1, 8), (4, 1, 8), (4, 0, 8))


def _nonlinear_options(cfg, shape, board, design) -> None:
    print("\n## nonlinear units on the integer design's arrays (split mapping, engine "
          "attention, nonlinear integer; the engines re-planned around the units)\n")
    print("| GELU engines | softmax units x lanes | design | LUT (of 191,856) | FF (of 383,712) "
          "| step ms | fabric ms | host ms | host exposed ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    keep = {"layers": 1, "layer_rows": design.layer_rows, "layer_cols": design.layer_cols,
            "layer_max_k": design.layer_max_k, "engine_rows": design.engine_rows,
            "engine_cols": design.engine_cols}
    run = cfg.replace(attention="engines", nonlinear="integer")
    for gelu, units, lanes in NONLINEAR_OPTIONS:
        try:
            accel = plan_accelerator(board, shape, gelu_engines=gelu, softmax_units=units,
                                     softmax_lanes=lanes, **keep)
        except ConfigError as error:
            print(f"| {gelu} | {units} x {lanes} | does not fit ({error}) | | | | | | |")
            continue
        f = board_step_fields(run, 384, 1536, 12, 2, "zcu102", accel)
        total = estimate_resources(accel)["total"]
        print(f"| {gelu} | {units} x {lanes} | {_brief(accel)} | {total['LUT']:,} | "
              f"{total['FF']:,} | "
              f"{f['seconds_per_step_at_fmax'] * 1e3:.2f} | "
              f"{f['board_fabric_seconds_per_step'] * 1e3:.2f} | "
              f"{f['board_host_seconds_per_step'] * 1e3:.2f} | "
              f"{f['board_host_exposed_seconds_per_step'] * 1e3:.2f} |")


def _candidates(cfg, shape, board) -> None:
    print("\n## hand-chosen designs (split mapping; each fits the board's budget: "
          "plan_accelerator with these fields fixed)")
    _header()
    for fixed in HAND_CHOSEN:
        accel = plan_accelerator(board, shape, layer_max_k=8, layer_max_r=8, **fixed)
        _attention_rows(f"hand-chosen: {_brief(accel)}", cfg, accel)
    accel = AcceleratorConfig(board="zcu102", **DSP_BOUND)
    used = estimate_resources(accel)["total"]
    _attention_rows(f"DSP-bound, does NOT fit ({used['LUT']:,} LUT of "
                    f"{budget(board)['LUT']:,} allowed, yosys-estimate): {_brief(accel)}",
                    cfg, accel)


if __name__ == "__main__":
    main()
