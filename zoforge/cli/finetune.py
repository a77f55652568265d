"""``zoforge finetune``: ZO fine-tuning of MiniLM's LoRA-FA adapters in the accelerator's
arithmetic (docs/finetune.md).

One flag per :class:`~zoforge.golden.finetune.config.FinetuneConfig` field (generated,
:mod:`zoforge.cli._options`; ``--config FILE`` gives any of them), plus what the run does:
``--rtl`` (which calls go to the RTL: ``none``, the ZO layer's ``adapters``, or ``all``, the
GEMM engine's too, its GELU jobs included, and the softmax unit's calls;
:class:`zoforge.sim.finetune_cosim.RtlUnits` compares every call with
the golden model, so a run that finishes is bit-exact), ``--float`` (the float twin beside
the int8 run), ``--backprop`` (the first-order ceiling), ``--out DIR`` and ``--json FILE``.
The run is :class:`zoforge.sim.finetune_run.FinetuneRun` (the steps, the result's keys, the
files); this module parses the flags, calls it and prints.

``--attention`` (a configuration field): the default ``engines`` runs Q·K^T and P·V as the
GEMM engine's raw int8 jobs per sequence and head (:mod:`zoforge.golden.finetune.attention`;
with ``--rtl all`` on the RTL engine); ``host`` keeps them in float32.
``--nonlinear`` (a configuration field): the default ``integer`` runs softmax, GELU and
LayerNorm as I-BERT's integer kernels (:mod:`zoforge.golden.finetune.integer_ops`,
docs/integer-nonlinear.md; the GELU as the engine's GELU job); ``float`` keeps them in
float32 on the host. (Both defaults were ``host`` and ``float`` before issue 32; a stored run
keeps its key: :data:`zoforge.golden.finetune.config.ADDED_WITH`.)

Few-shot mode (``--k-shot K``, issue 33; :mod:`zoforge.golden.finetune.fewshot`): the steps
train on K examples per class the head has not seen, with the protocol's defaults for
``--queries``, ``--lr`` and ``--batch`` where they are not given; the JSON adds the
training loss over that set (:data:`TRAIN_LOSS_KEYS`): before and after (int8 and the float
twin) and its curve at :func:`~zoforge.golden.finetune.train.curve_steps` (every
:data:`~zoforge.golden.finetune.train.CURVE_EVERY` steps and the last).

Checked before any work: the configuration, ``--out``, ``--json`` and (``--rtl``) the
simulation cache's path; once the model is
loaded (before the data and the calibration), its limits (``--blocks``, ``--seq-len``;
with engine attention also ``--seq-len`` at most the model's widest map) and
the co-simulation's (``--rtl``). A call that differs on the RTL ends the run with a one-line
error (exit 1), the JSON written with ``bit_exact: false`` and the message. A run keeps a
checkpoint in ``--out`` (``--checkpoint-every N`` steps, and at SIGINT / SIGTERM) and a run
started again on that ``--out`` with the same configuration continues from it
(:mod:`zoforge.sim.finetune_checkpoint`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

# the run's tables, one source (zoforge.sim.finetune_run imports nothing heavy at its top)
from zoforge.sim.finetune_checkpoint import CHECKPOINT
from zoforge.sim.finetune_run import (CHECKPOINT_EVERY, COST_KEYS, DESIGNS,
                                      MAX_CHECKPOINT_EVERY, OUT_FILES, RTL_CHOICES,
                                      TRAIN_LOSS_KEYS)

DEFAULT_BOARD = "zcu102"

__all__ = ["register", "run", "RTL_CHOICES", "COST_KEYS", "OUT_FILES", "TRAIN_LOSS_KEYS"]


def register(tree) -> None:
    from zoforge.cli._options import add_config_flags
    from zoforge.golden.finetune.config import FinetuneConfig
    parser = tree.command("finetune", epilog="examples: zoforge finetune --blocks 2 --steps "
                                                     "50 --json runs/ft.json; the few-shot "
                                                     "protocol (q 1, lr 4e-4, the top 3 "
                                                     "blocks adapted, the 32 examples "
                                                     "as one batch): zoforge finetune --k-shot "
                                                     "16 --steps 200 --json runs/fewshot.json")
    run_flags = parser.add_argument_group("the run")
    run_flags.add_argument("--rtl", choices=RTL_CHOICES, default="none",
                           help="calls co-simulated on the RTL, each compared with the golden "
                                "model: none, the ZO layer's adapter calls and updates "
                                "(adapters), or those, the GEMM engine's (its GELU jobs "
                                "included) and the softmax unit's (all); with "
                                "--design accelerator each adapter call as the accelerator "
                                "maps it: X·W and U = X·A on the engine, the ZO layer's "
                                "call narrowed to K = r (default none)")
    run_flags.add_argument("--float", action=argparse.BooleanOptionalAction, default=True,
                           help="also train the float twin (same perturbations, nothing "
                                "rounded) (default on)")
    run_flags.add_argument("--backprop", action=argparse.BooleanOptionalAction,
                           default=False, help="also train the first-order ceiling (Adam, "
                                               "the same adapters and batches) (default off)")
    run_flags.add_argument("--out", default="runs/finetune", metavar="DIR",
                           help="folder for " + ", ".join(OUT_FILES[:-1]) + ", with a "
                                "board-sized accelerator " + OUT_FILES[-1] + " (the design "
                                "priced: zoforge generate accelerator --config it), and "
                                f"{CHECKPOINT} while the run is unfinished: a run started "
                                "again on it continues from there (default runs/finetune)")
    run_flags.add_argument("--json", metavar="FILE", help="also write the results here")
    run_flags.add_argument("--threads", type=int, default=1, metavar="N",
                           help="torch CPU threads (default 1: fastest on a busy 2-core "
                                "machine)")
    run_flags.add_argument("--checkpoint-every", type=int, default=CHECKPOINT_EVERY,
                           metavar="N", help=f"steps between checkpoints (1 to "
                           f"{MAX_CHECKPOINT_EVERY}; also after step 0, the last step and "
                           f"at an interrupt) (default {CHECKPOINT_EVERY})")
    run_flags.add_argument("--quiet", action="store_true", help="no progress bar")
    cost_flags = parser.add_argument_group("the cost figures (docs/accelerator-cost.md)")
    cost_flags.add_argument("--design", choices=DESIGNS, default=DESIGNS[0],
                            help="the design the JSON's step time, energy and DDR bytes "
                                 "are for: the board-sized accelerator planned for --board "
                                 "(accelerator; host work on the board's ARM cores included) "
                                 "or today's two units that --rtl runs (units) (default "
                                 f"{DESIGNS[0]})")
    cost_flags.add_argument("--board", default=DEFAULT_BOARD, metavar="BOARD",
                            help=f"board of the cost figures (default {DEFAULT_BOARD})")
    add_config_flags(parser.add_argument_group("the configuration"), (FinetuneConfig,))
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from zoforge.cli._options import config_from_args
    from zoforge.golden.finetune.config import FinetuneConfig
    from zoforge.reports.finetune_fields import cost_models_for   # the reports: when run
    from zoforge.sim.finetune_run import FinetuneRun, RunOptions

    cfg = config_from_args(args, (FinetuneConfig,))
    cost_models = cost_models_for(args.design, args.board)
    finetune = FinetuneRun(cfg, RunOptions(out=args.out, json=args.json, rtl=args.rtl,
                                           float_twin=args.float, backprop=args.backprop,
                                           threads=args.threads, quiet=args.quiet,
                                           checkpoint_every=args.checkpoint_every,
                                           adapter_mapping="split" if args.design ==
                                           "accelerator" else "direct",
                                           cost_models=cost_models))
    if args.rtl != "none":
        from zoforge.cli._limits import check_sim_cache
        check_sim_cache()
    result = finetune.run()
    if result["bit_exact"] is False:
        print(f"zoforge: error: the RTL differs from the golden model: {result['error']}",
              file=sys.stderr)
        return 1
    _print(result, finetune.out, finetune.json_path)
    return 0


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
    print(f"cycles per step    {_number(r['cycles_per_step'], ',.0f')} "
          f"({r.get('cycles_source') or 'RTL'}), "
          f"{_number(r['predicted_cycles_per_step'], ',.0f')} (cycle model, the "
          f"{r.get('design') or 'units'})")
    if r.get("design") == "accelerator":
        print(f"on the board       {_number(r['seconds_per_step_at_fmax'], '.4f')} s per "
              f"step at {_number(r['fmax_mhz'], '.0f')} MHz ({r['board']}, cycle model, "
              f"host overlapped); the host's ARM cores "
              f"{_number(r['board_host_seconds_per_step'], '.4f')} s, "
              f"{_number(r['board_host_exposed_seconds_per_step'], '.4f')} s of it exposed; "
              f"{_number(r['dsp'], ',')} DSP, {_number(r['gops_per_dsp'], '.3f')} GOPS per DSP")
    print(f"host, this CPU     {_number(r['host_seconds_per_step'], '.2f')} s per int8 step")
    written = [name for name in OUT_FILES if (Path(out) / name).is_file()]
    print(f"files              {out}/ ({', '.join(written)})"
          + (f", {json_path}" if json_path else ""))
