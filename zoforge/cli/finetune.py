"""``zoforge finetune``: ZO fine-tuning of MiniLM's LoRA-FA adapters in the accelerator's
arithmetic (docs/finetune.md).

One flag per :class:`~zoforge.golden.finetune.config.FinetuneConfig` field (generated,
:mod:`zoforge.cli._options`; ``--config FILE`` gives any of them), plus what the run does:
``--rtl`` (which calls go to the RTL: ``none``, the ZO layer's ``adapters``, or ``all``, the
GEMM engine's too; :class:`zoforge.sim.finetune_cosim.RtlUnits` compares every call with
the golden model, so a run that finishes is bit-exact), ``--float`` (the float twin beside
the int8 run), ``--backprop`` (the first-order ceiling), ``--out DIR`` and ``--json FILE``.

Few-shot mode (``--k-shot K``, issue 33; :mod:`zoforge.golden.finetune.fewshot`): the steps
train on K examples per class the head has not seen, with the protocol's defaults for
``--queries``, ``--lr`` and ``--batch`` where they are not given; the JSON adds the
training loss over that set (:data:`TRAIN_LOSS_KEYS`): before and after (int8 and the float
twin) and its curve at :func:`~zoforge.golden.finetune.train.curve_steps` (every
:data:`~zoforge.golden.finetune.train.CURVE_EVERY` steps and the last).

Checked before any work: the configuration, ``--out``, ``--json`` and (``--rtl``) the
simulation cache's path; once the model is
loaded (before the data and the calibration), its limits (``--blocks``, ``--seq-len``) and
the co-simulation's (``--rtl``). A call that differs on the RTL ends the run with a one-line
error (exit 1), the JSON written with ``bit_exact: false`` and the message.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from zoforge.errors import ConfigError

__all__ = ["register", "run", "RTL_CHOICES", "COST_KEYS", "OUT_FILES", "TRAIN_LOSS_KEYS"]

RTL_CHOICES = ("none", "adapters", "all")
#: The cost figures of the JSON (:func:`_cost_fields`), None where not modelled.
COST_KEYS = ("predicted_cycles_per_step", "seconds_per_step_at_fmax", "joules_per_step",
             "static_joules_per_step", "dynamic_joules_per_step", "ddr_bytes_per_step",
             "onchip_bits", "zo_peak_bytes", "backprop_peak_bytes")
#: The board of the time and energy figures (its DDR, and the units' clock and power from
#: :data:`zoforge.reports.finetune_cost.UNIT_FIGURES`, each with its source label).
BOARD = "zcu102"
#: The few-shot training-loss figures of the JSON (None and [] when ``k_shot`` is 0).
TRAIN_LOSS_KEYS = ("train_loss_before", "train_loss_after", "float_train_loss_before",
                   "float_train_loss_after", "curve_steps", "train_loss_curve",
                   "float_train_loss_curve")
#: What ``--out DIR`` gets.
OUT_FILES = ("finetune.json", "finetune.png", "config.toml")


def register(tree) -> None:
    from zoforge.cli._options import add_config_flags
    from zoforge.golden.finetune.config import FinetuneConfig
    parser = tree.command("finetune", epilog="examples: zoforge finetune --blocks 2 --steps "
                                                     "50 --json runs/ft.json; the few-shot "
                                                     "protocol (q 1, lr 2e-4, the 32 examples "
                                                     "as one batch): zoforge finetune --k-shot "
                                                     "16 --steps 200 --json runs/fewshot.json")
    run_flags = parser.add_argument_group("the run")
    run_flags.add_argument("--rtl", choices=RTL_CHOICES, default="none",
                           help="calls co-simulated on the RTL, each compared with the golden "
                                "model: none, the ZO layer's adapter calls and updates "
                                "(adapters), or those and the GEMM engine's (all) "
                                "(default none)")
    run_flags.add_argument("--float", action=argparse.BooleanOptionalAction, default=True,
                           help="also train the float twin (same perturbations, nothing "
                                "rounded) (default on)")
    run_flags.add_argument("--backprop", action=argparse.BooleanOptionalAction,
                           default=False, help="also train the first-order ceiling (Adam, "
                                               "the same adapters and batches) (default off)")
    run_flags.add_argument("--out", default="runs/finetune", metavar="DIR",
                           help="folder for " + ", ".join(OUT_FILES) +
                                " (default runs/finetune)")
    run_flags.add_argument("--json", metavar="FILE", help="also write the results here")
    run_flags.add_argument("--threads", type=int, default=1, metavar="N",
                           help="torch CPU threads (default 1: fastest on a busy 2-core "
                                "machine)")
    run_flags.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_flags(parser.add_argument_group("the configuration"), (FinetuneConfig,))
    parser.set_defaults(func=run)


def _check_json(value: str | None, out: Path) -> Path | None:
    """``--json``: a regular file or a new one in a writable folder, not one of ``--out``'s
    files (:func:`zoforge.outputs.check_out_file`)."""
    from zoforge.outputs import check_out_file
    if value is None:
        return None
    return check_out_file("--json", value, taken=[out, *(out / name for name in OUT_FILES)])


def _cost_fields(cfg, hidden: int, ffn: int, heads: int, classes: int) -> dict:
    """The step's modelled cost (:mod:`zoforge.reports.finetune_cost`) on the designs the
    RTL runs: every key of :data:`COST_KEYS` (None where not modelled: a model beyond the
    cost model's shapes), and the board, clock and power used with their sources. Time
    and energy are the cycle model's step at the estimated Fmax (each call the roofline's
    max of compute and DDR time) times the board's static power and, apart, the units'
    dynamic power taken to that Fmax (``joules_per_step`` is their sum)."""
    fields = dict.fromkeys(COST_KEYS)
    try:
        from zoforge.golden.finetune.config import ADAPTED
        from zoforge.reports import finetune_cost as cost
    except ImportError:
        return fields
    try:
        shape = cost.ModelShape(blocks=cfg.blocks, seq_len=cfg.seq_len, batch=cfg.batch,
                                rank=cfg.rank, adapted=len(ADAPTED), queries=cfg.queries,
                                hidden=hidden, ffn=ffn, heads=heads, classes=classes)
    except ConfigError as error:
        print(f"    cost: not modelled ({error})")
        return fields
    from zoforge.boards.registry import get_board
    from zoforge.sim.finetune_cosim import engine_design
    engine = engine_design(cfg, hidden, ffn)          # the designs the RTL runs on
    layer = cfg.layer_design(hidden, ffn)
    step = cost.predicted_step_cycles(shape, engine, layer)
    figures = cost.UNIT_FIGURES[BOARD]
    board = get_board(BOARD)
    timing = cost.step_time_energy(step, figures["fmax_mhz"], figures["static_w"],
                                   figures["dynamic_w"], figures["power_at_mhz"],
                                   board.ddr_bytes_per_s)
    fields.update(predicted_cycles_per_step=step.cycles, ddr_bytes_per_step=step.stream_bytes,
                  onchip_bits=cost.memory_bits(engine, layer)["total"],
                  zo_peak_bytes=cost.zo_peak_memory(shape, layer)["total"],
                  backprop_peak_bytes=cost.backprop_peak_memory(shape)["total"],
                  seconds_per_step_at_fmax=timing["roofline_s"],
                  joules_per_step=timing["roofline_j"],
                  static_joules_per_step=timing["roofline_static_j"],
                  dynamic_joules_per_step=timing["roofline_dynamic_j"], board=BOARD,
                  static_source=board.static_power_source, fmax_error=_fmax_error(),
                  **figures)
    return fields


def _fmax_error() -> str:
    """The Fmax model's measured error, quoted beside the Fmax estimate."""
    from zoforge.reports.fmax import measured_error
    error = measured_error()
    return error.summary() if error else "not measured"


def _say(text: str) -> None:
    print(f"==> {text}", flush=True)


def run(args: argparse.Namespace) -> int:
    from zoforge.cli._options import config_from_args
    from zoforge.errors import check_int_range
    from zoforge.golden.finetune.config import FinetuneConfig
    from zoforge.golden.zo.config import MAX_THREADS
    from zoforge.outputs import check_out_dir, check_targets

    cfg = config_from_args(args, (FinetuneConfig,))
    check_int_range("--threads", args.threads, 1, MAX_THREADS)
    out = check_out_dir("--out", args.out)
    check_targets(out, [out / name for name in OUT_FILES])
    json_path = _check_json(args.json, out)
    if args.rtl != "none":
        from zoforge.cli._limits import check_sim_cache
        check_sim_cache()

    # the model (and torch, transformers) only now: `zoforge finetune --help` stays fast
    import torch
    from transformers.utils import logging as transformers_logging

    from zoforge.golden.finetune.model import check_model_limits
    from zoforge.golden.finetune.train import load_model
    torch.set_num_threads(args.threads)
    transformers_logging.disable_progress_bar()    # stderr: the error's one line, or ours
    model, tokenizer = load_model(cfg)
    check_model_limits(cfg, model)
    widths = model.config.hidden_size, model.config.intermediate_size
    rtl_module = None
    if args.rtl != "none":
        from zoforge.sim import finetune_cosim as rtl_module
        rtl_module.check_rtl_limits(cfg, args.rtl, *widths)
    return _finetune(args, cfg, out, json_path, (model, tokenizer), widths, rtl_module)


def _finetune(args, cfg, out: Path, json_path: Path | None, model_and_tokenizer, widths,
              rtl_module) -> int:
    """The checked run: prepare, accuracies before, the steps, accuracies after, files."""
    import contextlib

    from zoforge.outputs import make_out_dir

    from tqdm import tqdm

    from zoforge.golden.finetune.train import (ZoFinetune, backprop_finetune, curve_steps,
                                               float_accuracy, prepare)
    model = model_and_tokenizer[0]
    hidden, ffn = widths
    _say(f"prepare: {cfg.model or 'all-MiniLM-L6-v2'}, {cfg.blocks} blocks, seq_len "
         f"{cfg.seq_len}; head fit on {cfg.n_train} examples, int8 calibration on "
         f"{cfg.calibration}" + (f"; few-shot: {cfg.k_shot} examples per class outside them"
                                 if cfg.k_shot else ""))
    prepared = prepare(cfg, model_and_tokenizer)
    classes = len(prepared.label_names)
    result = {"rtl": args.rtl, "bit_exact": None, "error": None, "rtl_calls": None,
              "steps": 0, "accuracy_before": None, "float_accuracy_before": None,
              "accuracy_after": None, "float_accuracy_after": None,
              "backprop_accuracy_after": None, "cycles_per_step": None,
              **_cost_fields(cfg, hidden, ffn, model.config.num_attention_heads, classes),
              "host_seconds_per_step": None, "loss": [], "float_loss": [],
              "backprop_loss": [], **dict.fromkeys(TRAIN_LOSS_KEYS[:4]),
              "curve_steps": curve_steps(cfg.steps) if cfg.k_shot else [],
              "train_loss_curve": [], "float_train_loss_curve": [], "config": cfg.to_dict()}
    make_out_dir("--out", out)
    mismatch = getattr(rtl_module, "CallMismatch", ())     # (): nothing to catch
    with contextlib.ExitStack() as stack:
        units = None
        if rtl_module is not None:
            units = stack.enter_context(rtl_module.RtlUnits(cfg, hidden, ffn, args.rtl))
        zo = ZoFinetune(prepared, "int8", units=units)
        twin = ZoFinetune(prepared, "float") if args.float else None
        _say(f"accuracy before: int8 and float on {cfg.n_test} test examples")
        result["accuracy_before"] = zo.evaluate()
        result["float_accuracy_before"] = float_accuracy(prepared)
        _checkpoint(0, zo, twin, result)
        _say(f"train {cfg.steps} ZO steps (q={cfg.queries}, batch {cfg.batch}; int8 calls "
             f"{'on the RTL: ' + args.rtl if units is not None else 'golden'}"
             f"{', float twin beside' if twin is not None else ''})")
        try:
            _steps(cfg, zo, twin, units, result, tqdm, args.quiet)
        except mismatch as error:
            result.update(bit_exact=False, error=str(error).splitlines()[0],
                          rtl_calls=units.rtl_calls)
            _write(result, out, json_path, cfg)
            print(f"zoforge: error: the RTL differs from the golden model: {result['error']}",
                  file=sys.stderr)
            return 1
        if units is not None:
            result.update(bit_exact=True, rtl_calls=units.rtl_calls)
    for key, curve in (("train_loss", "train_loss_curve"),
                       ("float_train_loss", "float_train_loss_curve")):
        if result[curve]:
            result[key + "_before"], result[key + "_after"] = result[curve][0], result[curve][-1]
    _say("accuracy after")
    result["accuracy_after"] = zo.evaluate()
    if twin is not None:
        result["float_accuracy_after"] = twin.evaluate()
    if args.backprop:
        _say(f"backprop ceiling: {cfg.steps} Adam steps on the float adapters")
        trained = backprop_finetune(prepared, cfg.steps, on_step=lambda step, loss:
                                    result["backprop_loss"].append(loss))
        result["backprop_accuracy_after"] = trained.evaluate()
    _write(result, out, json_path, cfg)
    _print(result, out, json_path)
    return 0


def _steps(cfg, zo, twin, units, result: dict, tqdm, quiet: bool) -> None:
    """``cfg.steps`` steps of ``zo`` (and ``twin``), recorded in ``result`` as they go."""
    cycles, seconds = [], []
    if units is not None:
        units.take_cycles()                   # from here: the steps' cycles only
    bar = tqdm(total=cfg.steps, unit="step", dynamic_ncols=True, disable=quiet)
    try:
        for _ in range(cfg.steps):
            start = time.perf_counter()
            record = zo.step()
            seconds.append(time.perf_counter() - start)
            result["loss"].append(record.loss)
            if units is not None:
                cycles.append(units.take_cycles())
            shown = {"loss": f"{record.loss:.4f}"}
            if twin is not None:
                result["float_loss"].append(twin.step().loss)
                shown["float"] = f"{result['float_loss'][-1]:.4f}"
            result["steps"] += 1
            _checkpoint(result["steps"], zo, twin, result)
            bar.update(1)
            bar.set_postfix(shown)
    finally:
        bar.close()
        if seconds:
            result["host_seconds_per_step"] = sum(seconds) / len(seconds)
        if cycles:
            result["cycles_per_step"] = sum(cycles) / len(cycles)


def _checkpoint(done: int, zo, twin, result: dict) -> None:
    """After ``done`` steps: at a checkpoint of the few-shot curve, the training loss of
    ``zo`` (and ``twin``) appended to theirs."""
    if done in result["curve_steps"]:
        result["train_loss_curve"].append(zo.train_loss())
        if twin is not None:
            result["float_train_loss_curve"].append(twin.train_loss())


def _write(result: dict, out: Path, json_path: Path | None, cfg) -> None:
    from zoforge.config import config_text
    from zoforge.outputs import write_text
    text = json.dumps(result, indent=1) + "\n"
    write_text(out / "finetune.json", text, root=out)
    write_text(out / "config.toml", config_text(cfg), root=out)
    _plot(out / "finetune.png", result)
    if json_path is not None:
        write_text(json_path, text, flag="--json")


def _plot(path: Path, result: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zoforge.outputs import output_path
    figure, loss_axis = plt.subplots(figsize=(7, 3.6))
    for key, label, style, color in (("loss", "int8 (accelerator)", "-", "C0"),
                                     ("float_loss", "float twin", "--", "C1"),
                                     ("backprop_loss", "backprop (Adam)", ":", "C2")):
        if result[key]:
            steps = range(1, len(result[key]) + 1)
            loss_axis.plot(steps, result[key], style, lw=1.2, label=label, color=color)
    for key, label, color in (("train_loss_curve", "int8 few-shot set", "C0"),
                              ("float_train_loss_curve", "float few-shot set", "C1")):
        if result[key]:
            loss_axis.plot(result["curve_steps"][:len(result[key])], result[key], "o-", ms=3,
                           lw=1.6, label=label + " (unperturbed)", color=color)
    loss_axis.set(xlabel="step", ylabel="training loss (mean of the branches)",
                  title="ZO fine-tuning of MiniLM's adapters")
    accuracy_axis = loss_axis.twinx()
    end = max(result["steps"], 1)
    for key, x, label, marker, color in (
            ("accuracy_before", 0, "int8 accuracy before", "o", "C0"),
            ("accuracy_after", end, "int8 accuracy after", "D", "C0"),
            ("float_accuracy_before", 0, "float accuracy before", "o", "C1"),
            ("float_accuracy_after", end, "float accuracy after", "D", "C1"),
            ("backprop_accuracy_after", end, "backprop accuracy after", "D", "C2")):
        if result[key] is not None:
            accuracy_axis.plot([x], [result[key]], marker, label=label, ms=8, alpha=0.6,
                               color=color, markeredgecolor="k")
    accuracy_axis.set_ylabel("test accuracy")
    lines = [axis.get_legend_handles_labels() for axis in (loss_axis, accuracy_axis)]
    if lines[0][0] or lines[1][0]:
        loss_axis.legend(lines[0][0] + lines[1][0], lines[0][1] + lines[1][1], fontsize=8,
                         loc="best")
    figure.tight_layout()
    with output_path(path, path.parent) as tmp:
        figure.savefig(tmp, dpi=110, format="png")
    plt.close(figure)


def _number(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _print(r: dict, out: Path, json_path: Path | None) -> None:
    print()
    if r["rtl"] != "none":
        print(f"bit-exact          {r['bit_exact']}: {r['rtl_calls']:,} RTL calls "
              f"({r['rtl']}), each equal to the golden model's")
    if r["loss"]:
        print(f"loss (int8)        first {r['loss'][0]:.4f}, last {r['loss'][-1]:.4f}")
    for label, key in (("int8", "train_loss"), ("float", "float_train_loss")):
        before, after = r[key + "_before"], r[key + "_after"]
        if before is not None:
            print(f"train loss ({label:5}) {before:.4f} -> {after:.4f} ({after / before:.3f} "
                  f"of the start, the few-shot set)")
    accuracy = {key: _number(r[key], ".3f") for key in (
        "accuracy_before", "accuracy_after", "float_accuracy_before", "float_accuracy_after",
        "backprop_accuracy_after")}
    print(f"test accuracy      int8 {accuracy['accuracy_before']} -> "
          f"{accuracy['accuracy_after']}; float {accuracy['float_accuracy_before']} -> "
          f"{accuracy['float_accuracy_after']}; backprop {accuracy['backprop_accuracy_after']}")
    print(f"cycles per step    {_number(r['cycles_per_step'], ',.0f')} (RTL), "
          f"{_number(r['predicted_cycles_per_step'], ',.0f')} (cycle model)")
    print(f"host, this CPU     {_number(r['host_seconds_per_step'], '.2f')} s per int8 step")
    print(f"files              {out}/ ({', '.join(OUT_FILES)})"
          + (f", {json_path}" if json_path else ""))
