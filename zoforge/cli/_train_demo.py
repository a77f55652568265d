"""The main job (``zoforge demo``): fine-tune a sentiment classifier on the simulated FPGA.

The model is ``--trainable hw-mlp --hidden 0``: a linear classifier over the frozen MiniLM
sentence embeddings of the Rotten Tomatoes snippets (the encoder runs on the host, as on the
ZCU102's ARM cores; its pooled embeddings are quantized to int8 and streamed in), trained by
the generated ZO layer: perturbation generator, systolic array, update unit and AXI host
interface in one design. The training is the lock-step driver
:class:`~zoforge.sim.zo_training.LockstepTraining` (every step in the golden trainer and on
the Verilated RTL, one persistent job server, compared after every step: g values and master);
this module only shows its progress, writes the design, the board report, ``summary.json``
and the plot, and prints the summary.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from zoforge.outputs import make_out_dir, output_path, write_text

__all__ = ["run_training_demo", "demo_train_config", "step_cost", "COST_KEYS", "demo_summary",
           "summary_lines"]


#: The training source that is bit-exact with each generator strategy.
SOURCE_OF_STRATEGY = {"onthefly": "pezo-onthefly", "pregen": "pezo-pregen",
                      "gaussian": "gaussian-hw", "masked": "masked-onthefly"}


def demo_train_config(args, generator):
    """The golden run's :class:`~zoforge.golden.zo.config.TrainConfig`: ``hw-mlp`` with no
    hidden layer, the ``generator`` configuration's source and fields, the demo's flags;
    ``--branch-lanes auto``: the tool's pick (:mod:`zoforge.sim.mapping`)."""
    import dataclasses

    from zoforge.golden.zo.config import TrainConfig
    from zoforge.sim.mapping import parse_branch_lanes, with_chosen_branch_lanes
    lanes = parse_branch_lanes(args.branch_lanes)
    fields = {f.name: getattr(generator, f.name) for f in dataclasses.fields(generator)
              if f.name in ("n_rng", "bits", "pool_size", "banks", "pool_seed", "terms")}
    cfg = TrainConfig(method="hw-prge", trainable="hw-mlp", hidden=0,
                      perturbation=SOURCE_OF_STRATEGY[generator.variant], **fields,
                      queries=args.queries, batch=args.batch, lr=args.lr, eps=args.eps,
                      steps=args.steps, seed=0, rows=args.rows, cols=args.cols,
                      branch_lanes=lanes or 1, n_train=args.n_train, n_test=args.n_test,
                      model=args.model, out=str(args.out / "golden"), progress=False)
    return cfg if lanes else with_chosen_branch_lanes(cfg)


def _say(text: str) -> None:
    print(f"==> {text}", flush=True)


def run_training_demo(args, generator) -> int:
    import torch
    from tqdm import tqdm

    from zoforge.boards.registry import get_board
    from zoforge.errors import ConfigError
    from zoforge.hw.export import write_design
    from zoforge.hw.zolayer.designs import elaborate_layer
    from zoforge.sim.lint import lint_verilog
    from zoforge.sim.zo_training import LockstepOptions, LockstepTraining

    if not 0 <= args.stalls < 1:
        raise ConfigError("--stalls", "a probability with 0 <= p < 1", args.stalls)
    cfg = demo_train_config(args, generator)
    board = get_board(args.board)
    make_out_dir("--out", args.out)
    _say(f"golden model: {cfg.model or 'MiniLM'} embeddings of Rotten Tomatoes (cached "
         "after the first run), int8 inputs, the ZO layer's integer step")
    training = LockstepTraining(cfg)
    config = training.design
    features, padded = training.initial_master.shape
    _say(f"generate: zo-layer {config.rows}x{config.cols}, {config.variant} generator, "
         f"{features} features -> {training.classes} classes (padded to {padded}), "
         f"{config.branch_lanes} branch lane{'s' if config.branch_lanes > 1 else ''}")
    design = elaborate_layer(config)
    paths = write_design(design, args.out / "design")
    lint = lint_verilog(paths["verilog"].read_text(), design.name)
    print(f"    {paths['verilog']}; lint: {lint}")

    _say(f"co-simulate {cfg.steps} training steps on Verilator beside the golden model "
         f"(q={cfg.queries}, batch {cfg.batch}; first build ~1 min, cached after)")
    torch.set_num_threads(1)          # the golden step's time on one core, as documented
    bar = tqdm(total=cfg.steps, unit="step", dynamic_ncols=True, disable=args.quiet)
    mismatches = []

    def show(step) -> None:
        if not step.bit_exact:
            mismatches.append(step.step)
        bar.update(1)
        bar.set_postfix(loss=f"{step.rtl.loss:.4f}",
                        exact="yes" if not mismatches else f"NO ({len(mismatches)})")

    try:
        result = training.run(LockstepOptions(source_idle=args.stalls,
                                              sink_backpressure=args.stalls, seed=1),
                              on_step=show)
    finally:
        bar.close()

    report = None
    if not args.no_report:
        _say(f"board report: {board.name} (yosys estimate + activity model; a minute or two)")
        report = _board_report(board, design, args.out / "report")
    return _summarise(args, cfg, design.name, lint, report, result)


def _board_report(board, design, out: Path):
    from zoforge.reports.pipeline import Progress, build_report
    from zoforge.reports.render import summary_lines, write_report
    report = build_report(board, design, out, board.default_mhz, activity_cycles=2000,
                          run_pnr=False, progress=Progress(quiet=True))
    write_report(report, out)
    for line in summary_lines(report):
        print("    " + line)
    return report


#: The summary's keys for a step's time and energy (None without a board report).
COST_KEYS = ("fmax_mhz", "fmax_source", "fmax_error", "seconds_per_step_at_fmax",
             "static_w", "static_source", "dynamic_w_at_fmax", "dynamic_source",
             "static_joules_per_step_at_fmax", "dynamic_joules_per_step_at_fmax",
             "joules_per_step_at_fmax")


def step_cost(report, cycles_per_step: float) -> dict:
    """A step's time at the report's Fmax estimate (with the model's measured error) and its
    energy with the power at that same clock, static and dynamic apart, each with its
    source (:meth:`zoforge.reports.model.Power.step_energy`); None where the report
    (or its Fmax or power) is missing."""
    out = dict.fromkeys(COST_KEYS)
    if report is None or report.fmax is None:
        return out
    fmax = report.fmax.fmax_mhz
    out.update(fmax_mhz=fmax, fmax_source=report.fmax.source,
               fmax_error=report.fmax.error_note(),
               seconds_per_step_at_fmax=cycles_per_step / (fmax * 1e6))
    if report.power is not None:
        energy = report.power.step_energy(cycles_per_step, fmax)
        out.update(static_w=energy.static_w, static_source=energy.static_source,
                   dynamic_w_at_fmax=energy.dynamic_w, dynamic_source=energy.dynamic_source,
                   static_joules_per_step_at_fmax=energy.static_j,
                   dynamic_joules_per_step_at_fmax=energy.dynamic_j,
                   joules_per_step_at_fmax=energy.total_j)
    return out


def demo_summary(result, report, lint_clean: bool, design_name: str, train_config) -> dict:
    """The demo's summary: the run's numbers (:meth:`TrainingResult.summary
    <zoforge.sim.zo_training.TrainingResult.summary>`), a step's time and energy at the
    report's Fmax for its cycles per step (:func:`step_cost`), whether the Verilog is
    lint-clean, the design's name and the training configuration (``train_config``)."""
    run = result.summary()
    return {**run, **step_cost(report, run["cycles_per_step"]), "lint_clean": lint_clean,
            "design": design_name, "train_config": train_config.to_dict()}


def _summarise(args, cfg, name, lint, report, result) -> int:
    """Write and print the summary of the :class:`~zoforge.sim.zo_training.TrainingResult`
    ``result``; the exit status."""
    summary = demo_summary(result, report, lint.clean, name, cfg)
    _plot(args.out / "training.png", summary["loss_rtl"], summary["loss_golden"])
    text = json.dumps(summary, indent=1)
    write_text(args.out / "summary.json", text + "\n")
    if args.json is not None:
        make_out_dir("--json", args.json.parent)
        write_text(args.json, text + "\n", flag="--json")
    print()
    print("\n".join(summary_lines(summary, args.out)))
    return 0 if result.bit_exact and lint.clean else 1


def _scaled(value, factor: float, spec: str) -> str:
    return "n/a" if value is None else format(value * factor, spec)


def summary_lines(s: dict, out: Path) -> list[str]:
    """The summary as the demo prints it (times in us, energies in uJ)."""
    lines = [f"bit-exact          {s['bit_exact']}: g values and master equal at every one "
             f"of {s['steps']} steps; test accuracy from the RTL's own outputs "
             f"{_scaled(s['accuracy_after_rtl'], 1, '.3f')}"]
    lines += [f"RTL run failed     {failure}" for failure in s["failures"]]
    if s["loss_rtl"]:
        lines.append(f"loss (RTL/golden)  first {s['loss_rtl'][0]:.4f}/{s['loss_golden'][0]:.4f}"
                     f", last {s['loss_rtl'][-1]:.4f}/{s['loss_golden'][-1]:.4f}")
    return lines + [
        f"test accuracy      {s['accuracy_before']:.3f} -> {s['accuracy_after']:.3f}",
        f"cycles per step    {s['cycles_per_step']:,.0f} (simulated)",
        f"at Fmax            {_scaled(s['fmax_mhz'], 1, '.0f')} MHz ({s['fmax_source']}; "
        f"{s['fmax_error']}): {_scaled(s['seconds_per_step_at_fmax'], 1e6, '.1f')} us/step",
        f"energy per step    dynamic "
        f"{_scaled(s['dynamic_joules_per_step_at_fmax'], 1e6, '.2f')} uJ "
        f"({_scaled(s['dynamic_w_at_fmax'], 1, '.4f')} W, {s['dynamic_source']}); static "
        f"{_scaled(s['static_joules_per_step_at_fmax'], 1e6, '.2f')} uJ "
        f"({_scaled(s['static_w'], 1, '.3f')} W, the board's figure: {s['static_source']})",
        f"PyTorch, this CPU  {_scaled(s['pytorch_seconds_per_step'], 1e6, '.0f')} us/step "
        "(the golden step, one thread)",
        f"co-simulation      {_scaled(s['cosim_steps_per_s'], 1, '.1f')} steps/s, "
        f"{_scaled(s['cosim_cycles_per_s'], 1, ',.0f')} cycles/s (RTL steps and their "
        "host work, one persistent Verilator process)",
        f"files              {out}/ (summary.json, training.png, design/, report/)"]


def _plot(path: Path, loss_rtl: list[float], loss_golden: list[float]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axis = plt.subplots(figsize=(7, 3.6))
    axis.plot(np.arange(1, len(loss_golden) + 1), loss_golden, lw=2.5, alpha=0.5,
              label="golden (PyTorch)")
    axis.plot(np.arange(1, len(loss_rtl) + 1), loss_rtl, lw=0.8, ls="--", color="k",
              label="RTL (Verilator)")
    axis.set(xlabel="step", ylabel="training loss (mean of the branches)",
             title="ZO fine-tuning on the simulated FPGA")
    axis.legend()
    figure.tight_layout()
    with output_path(path) as tmp:
        figure.savefig(tmp, dpi=110, format="png")
    plt.close(figure)
