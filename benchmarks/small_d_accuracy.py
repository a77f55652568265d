"""Accuracy at small d (issue 25): the head trainer (d = 770) or LoRA-FA on the top layer
(d = 13,058) with Gaussian, PeZO on-the-fly 31 x 8, PeZO pool 4095 x 12 and the masked
on-the-fly generator, a few seeds each.

    .venv/bin/python benchmarks/small_d_accuracy.py --steps 5000 --seeds 0 1 2
    .venv/bin/python benchmarks/small_d_accuracy.py --trainable lora-fa --steps 1000

The golden trainer (``zoforge train``'s :func:`~zoforge.golden.zo.train.train`) with the
PeZO presets' head settings (MeZO, lr 2e-3, eps 1e-2, batch 16; docs/zo-training.md,
sweep/presets.py) and only ``trainable``, ``steps`` and ``seed`` changed. Every finished
(generator, trainable, seed, steps) is appended to ``--results`` (JSON lines) as it
completes; a rerun skips those. The table over ``--seeds`` (mean and spread, difference to
Gaussian) goes to stdout as Markdown.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

#: The generators compared, as ``zoforge train`` options.
SOURCES = {"Gaussian (software)": {"perturbation": "gaussian"},
           "PeZO on-the-fly 31 x 8": {"perturbation": "pezo-onthefly", "n_rng": 31, "bits": 8},
           "PeZO pool 4095 x 12": {"perturbation": "pezo-pregen", "pool_size": 4095,
                                   "bits": 12},
           "masked on-the-fly 31 x 8 (new)": {"perturbation": "masked-onthefly", "n_rng": 31,
                                              "bits": 8}}
HEAD = {"method": "mezo", "lr": 2e-3, "eps": 1e-2, "batch": 16,
        "progress": False}


def run(label: str, seed: int, steps: int, trainable: str) -> dict:
    from zoforge.golden.zo.config import TrainConfig
    from zoforge.golden.zo.train import train
    with tempfile.TemporaryDirectory(prefix="zoforge-small-d-") as out:
        cfg = TrainConfig(**HEAD, **SOURCES[label], trainable=trainable, steps=steps,
                          seed=seed, out=out, eval_every=steps, checkpoint_every=steps)
        started = time.time()
        result = train(cfg)
    return {"label": label, "trainable": trainable, "seed": seed, "steps": steps,
            "d": result.get("d"),
            "accuracy": result["accuracy_after"], "final_loss": result["final_loss"],
            "seconds": time.time() - started}


def _key(row: dict) -> tuple:
    return row["label"], row.get("trainable", "head"), row["seed"], row["steps"]


def table(rows: list[dict], trainable: str, steps: int, seeds: list[int]) -> str:
    """Markdown: per generator, the test accuracy over ``seeds`` at ``steps``."""
    by_label = {label: [r["accuracy"] for r in rows
                        if _key(r) in {(label, trainable, s, steps) for s in seeds}]
                for label in SOURCES}
    gaussian = statistics.fmean(by_label["Gaussian (software)"] or [float("nan")])
    lines = [f"| generator ({trainable}, {steps} steps) | seeds | test accuracy, mean | "
             "min .. max | mean - Gaussian |", "|---|---|---|---|---|"]
    for label, values in by_label.items():
        if not values:
            continue
        mean = statistics.fmean(values)
        lines.append(f"| {label} | {len(values)} | {mean:.4f} | {min(values):.4f} .. "
                     f"{max(values):.4f} | {mean - gaussian:+.4f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainable", choices=("head", "lora-fa"), default="head")
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--results", type=Path, default=Path("build/small_d_accuracy.jsonl"))
    args = parser.parse_args(argv)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    rows = ([json.loads(line) for line in args.results.read_text().splitlines() if line]
            if args.results.exists() else [])
    done = {_key(r) for r in rows}
    for seed in args.seeds:
        for label in SOURCES:
            if (label, args.trainable, seed, args.steps) in done:
                continue
            row = run(label, seed, args.steps, args.trainable)
            rows.append(row)
            with args.results.open("a") as results:
                results.write(json.dumps(row) + "\n")
            print(f"{label}, seed {seed}: accuracy {row['accuracy']:.4f} "
                  f"({row['seconds']:.0f} s)", flush=True)
    print(table(rows, args.trainable, args.steps, args.seeds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
