"""Accuracy side by side (issue 20, item 4): ZO LoRA-FA on MiniLM in the accelerator's int8
arithmetic, the same in float, the linear-probe demo, and a first-order ceiling.

Rotten Tomatoes (offline), the same steps and seeds for every row:

* ``int8-zo``: ``zoforge finetune``'s golden run (every map in the engine's / ZO layer's
  integer arithmetic, P-RGE on the adapters, the hardware generator's stream);
* ``float-zo``: its float twin (same parametrization, same z stream, nothing rounded);
* ``backprop``: the first-order ceiling, Adam (``BACKPROP_LR``) on the same float adapters;
* ``probe-demo``: ``zoforge demo``'s linear probe (a ZO-trained int8 linear classifier on
  frozen pooled features, the demo's settings) for the same steps.

Every finished (row, seed) is appended to ``RESULTS`` (JSON lines) as it completes, so a
killed run resumes where it stopped and never repeats or loses a finished row. At the end
the table (mean ± std over seeds) goes to stdout and ``docs/finetune-accuracy.md`` and the
plot to ``docs/finetune-accuracy.png``.

    .venv/bin/python benchmarks/finetune_accuracy.py --steps 300 --seeds 0 1 2
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from result_lines import read_result_lines

from zoforge.files import atomic_path, atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
ROWS = ("int8-zo", "float-zo", "backprop", "probe-demo")
LABELS = {"int8-zo": "ZO LoRA-FA, accelerator int8 arithmetic (golden = RTL)",
          "float-zo": "ZO LoRA-FA, same method in float32",
          "backprop": "first-order ceiling: backprop + Adam on the same adapters (float)",
          "probe-demo": "linear-probe demo (ZO, int8 ZO layer, frozen features)"}


def finetune_config(args, seed: int):
    from zoforge.golden.finetune.config import FinetuneConfig
    return FinetuneConfig(steps=args.steps, seed=seed, blocks=args.blocks,
                          seq_len=args.seq_len, batch=args.batch, n_test=args.n_test)


def run_row(row: str, seed: int, args, cache: dict) -> dict:
    from zoforge.golden.finetune.train import ZoFinetune, backprop_finetune, prepare
    start = time.time()
    if row == "probe-demo":
        from zoforge.golden.zo.config import TrainConfig
        from zoforge.golden.zo.train import train
        cfg = TrainConfig(method="hw-prge", trainable="hw-mlp", hidden=0,
                          perturbation="pezo-onthefly", queries=4, batch=16, lr=1e-2,
                          eps=1e-2, steps=args.steps, seed=seed, n_test=args.n_test,
                          out=str(args.work / f"probe-{seed}"), progress=False)
        result = train(cfg)
        return {"before": result["accuracy_before"], "after": result["accuracy_after"],
                "losses": [], "seconds": time.time() - start}
    cfg = finetune_config(args, seed)
    if seed not in cache:
        cache.clear()
        cache[seed] = prepare(cfg)
    prepared = cache[seed]
    if row == "backprop":
        losses = []
        twin = backprop_finetune(prepared, args.steps, on_step=lambda s, l: losses.append(l))
        before = ZoFinetune(prepared, "float").evaluate()
        return {"before": before, "after": twin.evaluate(), "losses": losses,
                "seconds": time.time() - start}
    run = ZoFinetune(prepared, "int8" if row == "int8-zo" else "float")
    before, losses, curve = run.evaluate(), [], []
    for step in range(args.steps):
        losses.append(run.step().loss)
        if args.eval_every and (step + 1) % args.eval_every == 0 and step + 1 < args.steps:
            curve.append((step + 1, run.evaluate()))
        print(f"\r  {row} seed {seed}: step {step + 1}/{args.steps} loss "
              f"{np.mean(losses[-20:]):.4f}", end="", flush=True)
    print()
    return {"before": before, "after": run.evaluate(), "losses": losses, "curve": curve,
            "seconds": time.time() - start}


def load_results(path: Path) -> dict:
    """The finished runs in ``path`` by (row, seed) (:func:`read_result_lines`: a last line
    cut short by a kill is dropped, any other unreadable line is an error)."""
    return {(record["row"], record["seed"]): record for record in read_result_lines(path)}


def table(done: dict, args) -> str:
    lines = [f"| run | accuracy before | accuracy after {args.steps} steps (mean ± std, "
             f"seeds {' '.join(map(str, args.seeds))}) |", "|---|---|---|"]
    for row in ROWS:
        records = [done[(row, s)] for s in args.seeds if (row, s) in done]
        if not records:
            continue
        before = np.array([r["before"] for r in records])
        after = np.array([r["after"] for r in records])
        lines.append(f"| {LABELS[row]} | {before.mean():.3f} | {after.mean():.3f} ± "
                     f"{after.std():.3f} ({', '.join(f'{a:.3f}' for a in after)}) |")
    return "\n".join(lines)


def plot(done: dict, args, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for row in ("int8-zo", "float-zo", "backprop"):
        curves = [done[(row, s)]["losses"] for s in args.seeds if (row, s) in done]
        if curves:
            mean = np.mean(np.array(curves), axis=0)
            window = max(1, len(mean) // 30)
            smooth = np.convolve(mean, np.ones(window) / window, mode="valid")
            ax.plot(np.arange(len(smooth)) + window, smooth, label=LABELS[row])
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (batch mean, smoothed)")
    ax.set_title(f"MiniLM LoRA-FA, {args.blocks} blocks, seq {args.seq_len}, "
                 f"{len(args.seeds)} seeds")
    ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as part:
        fig.savefig(part, dpi=120, format="png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=ROWS)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--eval-every", type=int, default=0)
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "finetune-accuracy")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    torch.set_num_threads(2)
    args.work.mkdir(parents=True, exist_ok=True)
    results = args.work / f"results-{args.steps}.jsonl"
    done, cache = load_results(results), {}
    for seed in args.seeds:
        for row in args.rows:
            if (row, seed) in done:
                continue
            record = {"row": row, "seed": seed, **run_row(row, seed, args, cache)}
            with results.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
            done[(row, seed)] = record
            print(f"{row} seed {seed}: {record['before']:.3f} -> {record['after']:.3f} "
                  f"({record['seconds']:.0f} s)", flush=True)
    text = table(done, args)
    print(text)
    command = ("python benchmarks/finetune_accuracy.py --steps "
               f"{args.steps} --seeds {' '.join(map(str, args.seeds))} --blocks {args.blocks} "
               f"--seq-len {args.seq_len} --batch {args.batch} --n-test {args.n_test}")
    atomic_write_text(
        args.docs / "finetune-accuracy.md", "# Fine-tuning accuracy (generated)\n\n"
        f"Produced by `{command}` (results in `{results.relative_to(ROOT)}`).\n\n{text}\n")
    plot(done, args, args.docs / "finetune-accuracy.png")


if __name__ == "__main__":
    main()
