"""Reproduce the shapes of PeZO's Table 3 and P-RGE's fixed-E claim with the golden trainer.

Usage::

    python benchmarks/reproduce_zo.py [--out repro-zo] [--experiments table3 fixed-e ...]
                                      [--seeds 0 1 2] [--steps 3000] [--lora-steps 600]

Every run is ``zoforge.golden.zo.train.train`` with its own directory under ``--out``; a
finished run (``result.json``) is not repeated and an interrupted one resumes from its
checkpoint, so the script can be stopped and started again. It prints one line per run and
a Markdown summary (mean and standard deviation over seeds), also written to
``OUT/summary.md``.

Experiments (all on the default model and data, test accuracy of 1000 balanced examples):

* ``table3``: MeZO (q = 1, B = 16) on the linear head, each perturbation source.
* ``table3-lora``: the same on LoRA-FA (top layer, r = 16, alpha = 32) + head, first seed,
  for ``--lora-perturbations``.
* ``fixed-e``: P-RGE (inner + outer) on the head at E = q B = 16: (q, B) in (1, 16),
  (4, 4), (16, 1), Gaussian and PeZO on-the-fly.
* ``fixed-e-lora``: the same on LoRA-FA, first seed.
* ``methods``: MeZO, P-RGE (q = 4, B = 4), HiZOO, PeFoo, PeFoo-L on LoRA-FA, first seed.
* ``pezo-params``: head, MeZO with a 65535-value pool, a 12-bit on-the-fly generator, and
  naive uniform at 3x the learning rate (its perturbation is 1/sqrt(3) of a Gaussian's).
* ``hw-arith``: head, PeZO on-the-fly, float against the engine's integer arithmetic.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from zoforge.golden.zo.config import TrainConfig
from zoforge.golden.zo.train import train

PERTURBATIONS = ("gaussian", "rademacher", "uniform-naive", "uniform-scaled",
                 "pezo-onthefly", "pezo-pregen")
HEAD = dict(trainable="head", lr=2e-3, eps=1e-2)
LORA = dict(trainable="lora-fa", lr=1e-3, eps=1e-2)


def experiments(args) -> dict[str, list[dict]]:
    first = args.seeds[:1]
    runs = {
        "table3": [dict(HEAD, method="mezo", perturbation=p, seed=s, steps=args.steps)
                   for p in PERTURBATIONS for s in args.seeds],
        "table3-lora": [dict(LORA, method="mezo", perturbation=p, seed=s,
                             steps=args.lora_steps)
                        for p in args.lora_perturbations for s in first],
        "fixed-e": [dict(HEAD, method="prge", perturbation=p, queries=q, batch=16 // q,
                         seed=s, steps=args.steps)
                    for p in ("gaussian", "pezo-onthefly") for q in (1, 4, 16)
                    for s in args.seeds],
        "fixed-e-lora": [dict(LORA, method="prge", perturbation="gaussian", queries=q,
                              batch=16 // q, seed=s, steps=args.lora_steps)
                         for q in (1, 4, 16) for s in first],
        "methods": [dict(LORA, method=m, perturbation="gaussian", seed=s,
                         steps=args.lora_steps, **extra)
                    for m, extra in (("mezo", {}), ("prge", {"queries": 4, "batch": 4}),
                                     ("hizoo", {}), ("pefoo", {}),
                                     ("pefoo-l", {"lr": 1e-2, "layer_steps": 10}))
                    for s in first],
        "pezo-params": [dict(HEAD, method="mezo", seed=s, steps=args.steps, **extra)
                        for extra in ({"perturbation": "pezo-pregen", "pool_size": 65535},
                                      {"perturbation": "pezo-onthefly", "bits": 12},
                                      {"perturbation": "uniform-naive", "lr": 6e-3})
                        for s in args.seeds],
        "hw-arith": [dict(HEAD, method="mezo", perturbation="pezo-onthefly", seed=s,
                          steps=args.steps, hw_arith=hw)
                     for hw in (False, True) for s in args.seeds],
    }
    return {name: runs[name] for name in args.experiments}


def run_name(settings: dict) -> str:
    keys = ("trainable", "method", "perturbation", "pool_size", "bits", "queries", "batch",
            "lr", "eps", "steps", "hw_arith", "seed")
    return "_".join(f"{k}={settings[k]}" for k in keys if k in settings)


def group_key(settings: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items() if k != "seed")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="repro-zo")
    parser.add_argument("--experiments", nargs="+", default=["table3", "fixed-e", "hw-arith"],
                        choices=("table3", "table3-lora", "fixed-e", "fixed-e-lora",
                                 "methods", "pezo-params", "hw-arith"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=5000, help="steps of head runs")
    parser.add_argument("--lora-steps", type=int, default=600, help="steps of LoRA-FA runs")
    parser.add_argument("--lora-perturbations", nargs="+", choices=PERTURBATIONS,
                        default=["gaussian", "uniform-naive", "pezo-onthefly", "pezo-pregen"],
                        help="perturbations of table3-lora")
    parser.add_argument("--progress", action="store_true", help="progress bar per run")
    args = parser.parse_args(argv)
    root = Path(args.out)
    lines = [f"Settings: default model and data, n_train 2000 / n_val 500 / n_test 1000 "
             f"(split seed 0), chance 0.5; seeds {args.seeds}.", ""]
    for experiment, runs in experiments(args).items():
        groups: dict[str, list[dict]] = {}
        for settings in runs:
            out = root / experiment / run_name(settings)
            done = out / "result.json"
            start = time.time()
            if done.is_file():
                result = json.loads(done.read_text())
            else:
                cfg = TrainConfig(**settings, out=str(out), progress=args.progress,
                                  eval_every=max(settings["steps"] // 10, 1),
                                  checkpoint_every=max(settings["steps"] // 10, 1))
                result = train(cfg)
            print(f"[{experiment}] {run_name(settings)}: accuracy "
                  f"{result['accuracy_before']:.3f} -> {result['accuracy_after']:.3f}, "
                  f"final loss {result['final_loss']:.4f}, {result['steps_per_s']:.1f} steps/s"
                  f" ({time.time() - start:.0f} s)", flush=True)
            groups.setdefault(group_key(settings), []).append(result)
        lines += [f"### {experiment}", "",
                  "| settings | seeds | test accuracy after (mean ± sd) | min..max | "
                  "final train loss |", "|---|---|---|---|---|"]
        for key, results in groups.items():
            acc = [r["accuracy_after"] for r in results]
            sd = statistics.stdev(acc) if len(acc) > 1 else 0.0
            loss = statistics.mean(r["final_loss"] for r in results)
            lines.append(f"| {key} | {len(acc)} | {statistics.mean(acc):.3f} ± {sd:.3f} | "
                         f"{min(acc):.3f}..{max(acc):.3f} | {loss:.4f} |")
        lines.append("")
    summary = "\n".join(lines)
    root.mkdir(parents=True, exist_ok=True)
    (root / "summary.md").write_text(summary + "\n")
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
