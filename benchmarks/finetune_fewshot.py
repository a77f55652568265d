"""The few-shot protocol (issue 33, items 1-2): does ZO learn in the accelerator's arithmetic,
measured where there is learning?

Per seed, ``zoforge finetune --k-shot 16 --steps 200``'s configuration (MiniLM, 6 blocks,
rank 8 on query/value, q 1, eps 4e-3, lr 2e-4, the 32 few-shot examples as one batch, the
head frozen as fitted on ``n_train``), three runs from the same prepared model:

* ``int8``: the golden int8 run (every map in the units' integer arithmetic; golden = RTL);
* ``float``: its float twin (the same z stream, nothing rounded);
* ``control``: the int8 run with ``ZoFinetune(control="random-sign")``: each g times a
  random sign, an estimate that carries no signal.

Each run records the training loss over the few-shot set (unperturbed) at
:func:`~zoforge.golden.finetune.train.curve_steps` and the test accuracy before and after.
Every finished (run, seed) is appended to ``RESULTS`` (JSON lines) at once, so a killed
benchmark resumes where it stopped. At the end the table (per seed ``L_T/L_0`` of int8,
float and control, and the mean int8 - float difference) goes to stdout and to the section
"Few-shot protocol" of ``docs/finetune-accuracy.md``, the curves to
``docs/finetune-fewshot.png``.

    .venv/bin/python benchmarks/finetune_fewshot.py --steps 200 --seeds 0 1 2 --threads 1
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from finetune_accuracy import load_results  # noqa: E402  (the same resumable results file)

from zoforge.files import atomic_path, atomic_write_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "finetune_fewshot.jsonl"
DOC, PLOT = ROOT / "docs" / "finetune-accuracy.md", ROOT / "docs" / "finetune-fewshot.png"
SECTION = "## Few-shot protocol"
#: Run -> (arithmetic, control).
RUNS = {"int8": ("int8", "none"), "float": ("float", "none"), "control": ("int8", "random-sign")}
#: The issue's goals: L_T/L_0 below this on every seed (int8 and float), at least MARGIN
#: below the control, and the mean int8 - float difference within TOLERANCE.
GOAL, MARGIN, TOLERANCE = 0.5, 0.25, 0.1


def config(args, seed: int):
    from zoforge.golden.finetune.config import FinetuneConfig
    return FinetuneConfig(k_shot=args.k_shot, steps=args.steps, seed=seed)


def run_one(prepared, run: str, args) -> dict:
    """One run: the training-loss curve at the checkpoints, the accuracies, the time."""
    from zoforge.golden.finetune.train import ZoFinetune, curve_steps
    start = time.time()
    arithmetic, control = RUNS[run]
    zo = ZoFinetune(prepared, arithmetic, control=control)
    checkpoints = curve_steps(args.steps)
    curve, before = [zo.train_loss()], zo.evaluate()
    for step in range(1, args.steps + 1):
        zo.step()
        if step in checkpoints:
            curve.append(zo.train_loss())
            print(f"\r  {run}: step {step}/{args.steps}, train loss {curve[-1]:.4f} "
                  f"({curve[-1] / curve[0]:.3f} of the start)", end="", flush=True)
    print()
    return {"steps": checkpoints, "curve": curve, "ratio": curve[-1] / curve[0],
            "accuracy_before": before, "accuracy_after": zo.evaluate(),
            "seconds": time.time() - start}


def table(done: dict, seeds: list[int]) -> str:
    """Per seed L_T/L_0 of each run, the verdicts, and the mean int8 - float difference."""
    lines = ["| seed | int8 L_T/L_0 | float L_T/L_0 | control (no signal) L_T/L_0 | "
             "int8 - float | both < 0.5 | control - max(int8, float) >= 0.25 |",
             "|---|---|---|---|---|---|---|"]
    differences = []
    for seed in seeds:
        ratio = {run: done[(run, seed)]["ratio"] for run in RUNS if (run, seed) in done}
        cells = [f"{ratio[run]:.3f}" if run in ratio else "not run" for run in RUNS]
        if "int8" in ratio and "float" in ratio:
            differences.append(ratio["int8"] - ratio["float"])
            cells.append(f"{differences[-1]:+.3f}")
            cells.append("yes" if max(ratio["int8"], ratio["float"]) < GOAL else "**no**")
        else:
            cells += ["", ""]
        if len(ratio) == len(RUNS):
            gap = ratio["control"] - max(ratio["int8"], ratio["float"])
            cells.append(f"{'yes' if gap >= MARGIN else '**no**'} ({gap:.3f})")
        else:
            cells.append("")
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    if differences:
        mean, spread = float(np.mean(differences)), float(np.std(differences))
        lines.append("")
        lines.append(f"Mean int8 - float difference of L_T/L_0 over {len(differences)} seeds: "
                     f"{mean:+.3f} (std {spread:.3f}; goal |mean| <= {TOLERANCE}: "
                     f"{'met' if abs(mean) <= TOLERANCE else 'not met'}).")
    return "\n".join(lines)


def accuracy_line(done: dict, seeds: list[int]) -> str:
    parts = []
    for run in RUNS:
        records = [done[(run, s)] for s in seeds if (run, s) in done]
        if records:
            before = np.mean([r["accuracy_before"] for r in records])
            after = np.mean([r["accuracy_after"] for r in records])
            parts.append(f"{run} {before:.3f} -> {after:.3f}")
    return "Test accuracy (mean over the seeds, before -> after): " + "; ".join(parts) + "."


def plot(done: dict, seeds: list[int], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    styles = {"int8": ("-", "C0"), "float": ("--", "C1"), "control": (":", "C3")}
    for run, (style, color) in styles.items():
        for n, seed in enumerate(seeds):
            if (run, seed) not in done:
                continue
            record = done[(run, seed)]
            ratio = np.array(record["curve"]) / record["curve"][0]
            ax.plot(record["steps"], ratio, style, color=color, lw=1.3, alpha=0.85,
                    label=f"{run}{' (random-sign g)' if run == 'control' else ''}"
                    if n == 0 else None)
    ax.axhline(GOAL, color="grey", lw=0.8)
    ax.set(xlabel="step", ylabel="training loss / its start (few-shot set, unperturbed)",
           title=f"Few-shot ZO on MiniLM's adapters, seeds {' '.join(map(str, seeds))}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as part:
        fig.savefig(part, dpi=110, format="png")
    plt.close(fig)


def write_section(text: str, path: Path) -> None:
    """Replace the section ``SECTION`` of ``path`` (up to the next ``## `` or the end) with
    ``text``, or append it."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    head, found, rest = old.partition(SECTION)
    tail = ""
    if found:
        after = rest.find("\n## ")
        tail = rest[after:] if after >= 0 else ""
    atomic_write_text(path, head.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n" + tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--k-shot", type=int, default=16)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--no-docs", action="store_true", help="leave docs/ alone")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: the table, docs and plot of the finished runs")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from zoforge.golden.finetune.train import prepare
    args.results.parent.mkdir(parents=True, exist_ok=True)
    done = {key: record for key, record in load_results(args.results).items()
            if record.get("k_shot") == args.k_shot and record.get("total_steps") == args.steps}
    for seed in [] if args.report_only else args.seeds:
        todo = [run for run in args.runs if (run, seed) not in done]
        if not todo:
            continue
        start = time.time()
        prepared = prepare(config(args, seed))
        print(f"seed {seed}: prepared in {time.time() - start:.0f} s", flush=True)
        for run in todo:
            record = {"row": run, "seed": seed, "k_shot": args.k_shot,
                      "total_steps": args.steps, **run_one(prepared, run, args)}
            with args.results.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
            done[(run, seed)] = record
            print(f"{run} seed {seed}: L_T/L_0 {record['ratio']:.3f} "
                  f"({record['seconds']:.0f} s)", flush=True)
    text = table(done, args.seeds)
    print(text)
    print(accuracy_line(done, args.seeds))
    if args.no_docs:
        return
    command = (f"python benchmarks/finetune_fewshot.py --steps {args.steps} --k-shot "
               f"{args.k_shot} --seeds {' '.join(map(str, args.seeds))} --threads "
               f"{args.threads}")
    seconds = [r["seconds"] for r in done.values()]
    write_section(f"{SECTION}\n\n<!-- generated by benchmarks/finetune_fewshot.py -->\n"
                  f"Produced by `{command}` (results in "
                  f"`{args.results.resolve().relative_to(ROOT)}`; "
                  f"{np.mean(seconds) / 60:.1f} min per run on average on the shared "
                  "2-core machine).\n\n" + text + "\n\n" + accuracy_line(done, args.seeds)
                  + f"\n\n![few-shot curves]({PLOT.name})\n", DOC)
    plot(done, args.seeds, PLOT)


if __name__ == "__main__":
    main()
