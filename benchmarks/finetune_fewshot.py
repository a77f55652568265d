"""The few-shot protocol (issue 33, items 2-3): does ZO learn in the accelerator's arithmetic,
measured where there is learning, and which setting learns on every seed within 2 CPU-minutes?

A *candidate* is the few-shot configuration of ``zoforge finetune --k-shot 16 --steps 200``
(MiniLM, 6 blocks, rank 8 on query/value, q 1, the 32 few-shot examples as one batch, the
head frozen as fitted on ``n_train``) with one ``adapted_blocks`` (adapters on the top N
blocks, 0 = all six), ``lr`` and ``eps`` (each left out: the protocol's default,
``FinetuneConfig(k_shot=...)``'s), at one ``--attention`` and ``--nonlinear`` (left out: the
product's defaults, ``FinetuneConfig``'s: ``engines`` and ``integer``). Per candidate and
seed, three runs from the same prepared model:

* ``int8``: the golden int8 run (every map in the units' integer arithmetic; golden = RTL;
  the attention and the nonlinear functions as the candidate's ``attention`` and
  ``nonlinear`` say);
* ``float``: its float twin (the same z stream, nothing rounded; float attention and float
  nonlinear functions whatever the candidate's);
* ``control``: the int8 run with ``ZoFinetune(control="random-sign")``: each g times a
  random sign, an estimate that carries no signal.

Each run records the training loss over the few-shot set (unperturbed) at
:func:`~zoforge.golden.finetune.train.curve_steps`, the test accuracy before and after, and
its cost: ``cpu_seconds`` (``time.process_time``: building the run, the steps and the
curve's training losses, i.e. the run without its test evaluations) and
``eval_cpu_seconds`` (the two test evaluations). Every finished (candidate, run, seed) is
appended to ``--results`` (JSON lines) at once and skipped when met again, so a killed
benchmark loses at most the run it was in. A line is keyed by its candidate
(:data:`KEY_FIELDS`), the attention and nonlinear functions included: a line written before
those fields existed ran ``host`` and ``float`` (:data:`ADDED_WITH`, the values
``FinetuneConfig.from_result_fields`` restores), so it is never taken for a run of other
values, nor one of them for it.

The goals (issue 33): on every seed both int8 and float reach ``L_T/L_0 <`` :data:`GOAL`
and at least :data:`MARGIN` below the control; the mean int8 - float difference within
:data:`TOLERANCE`; int8 + float together at most :data:`CPU_GOAL` CPU seconds. The table
of the given candidates goes to stdout; unless ``--no-docs``, ``docs/finetune-fewshot.md``
gets the table of every candidate in the results file, the candidate ``--doc`` (default:
the first given) in full (per seed, the curves at every checkpoint) and the same candidate
under each other attention and nonlinear functions measured (per seed, each with the
command that reproduces it), and ``docs/finetune-fewshot.png`` the first one's curves.

    .venv/bin/python benchmarks/finetune_fewshot.py --adapted-blocks 3 2 --lr 2e-4 4e-4 \\
        --seeds 0 1 2 --steps 200 --threads 1 --attention host --nonlinear float
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np
import torch

from result_lines import read_result_lines

from zoforge.files import atomic_path, atomic_write_text
from zoforge.golden.finetune.config import ADDED_WITH, ATTENTIONS, NONLINEARS, FinetuneConfig

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "finetune_fewshot.jsonl"
DOC, PLOT = ROOT / "docs" / "finetune-fewshot.md", ROOT / "docs" / "finetune-fewshot.png"
#: Run -> (arithmetic, control).
RUNS = {"int8": ("int8", "none"), "float": ("float", "none"), "control": ("int8", "random-sign")}
#: The issue's goals: L_T/L_0 below GOAL on every seed (int8 and float), at least MARGIN
#: below the control, the mean int8 - float difference within TOLERANCE, int8 + float in at
#: most CPU_GOAL CPU seconds.
GOAL, MARGIN, TOLERANCE, CPU_GOAL = 0.5, 0.25, 0.1, 120.0
#: What a result line of a candidate was measured with, besides the run and the seed; lines
#: written before these fields existed ran the defaults of their day (all blocks, 2e-4, 4e-3;
#: host attention and float nonlinear functions: ``ADDED_WITH``, not today's defaults).
KEY_FIELDS = {"k_shot": 16, "total_steps": 200, "adapted_blocks": 0, "lr": 2e-4, "eps": 4e-3,
              "attention": ADDED_WITH["attention"], "nonlinear": ADDED_WITH["nonlinear"]}


def candidate(record: dict) -> tuple:
    """The (k_shot, total_steps, adapted_blocks, lr, eps, attention, nonlinear) of a result
    line."""
    return tuple(record.get(name, default) for name, default in KEY_FIELDS.items())


def load_results(path: Path) -> dict:
    """``{(candidate, run, seed): record}`` of ``path`` (:func:`read_result_lines`: a last
    line cut short by a kill is dropped, any other unreadable line is an error)."""
    return {(candidate(record), record["row"], record["seed"]): record
            for record in read_result_lines(path)}

def config(key: tuple, seed: int) -> FinetuneConfig:
    """The run's configuration: :meth:`FinetuneConfig.from_result_fields` of the candidate's
    fields (``steps`` its ``total_steps``)."""
    fields = dict(zip(KEY_FIELDS, key))
    fields["steps"] = fields.pop("total_steps")
    return FinetuneConfig.from_result_fields({**fields, "seed": seed})


def label(key: tuple) -> str:
    _, _, adapted_blocks, lr, eps, attention, nonlinear = key
    return (f"adapted_blocks {adapted_blocks or 'all (6)'}, lr {lr:g}, eps {eps:g}, "
            f"{attention} attention, {nonlinear} nonlinear")


def run_one(prepared, run: str, steps: int) -> dict:
    """One run: the training-loss curve at the checkpoints, the accuracies, the costs."""
    from zoforge.golden.finetune.train import ZoFinetune, curve_steps
    start, cpu = time.time(), [time.process_time()]
    arithmetic, control = RUNS[run]
    zo = ZoFinetune(prepared, arithmetic, control=control)
    cpu.append(time.process_time())
    before = zo.evaluate()
    cpu.append(time.process_time())
    checkpoints = curve_steps(steps)
    curve = [zo.train_loss()]
    for step in range(1, steps + 1):
        zo.step()
        if step in checkpoints:
            curve.append(zo.train_loss())
            print(f"\r  {run}: step {step}/{steps}, train loss {curve[-1]:.4f} "
                  f"({curve[-1] / curve[0]:.3f} of the start)", end="", flush=True)
    print()
    cpu.append(time.process_time())
    after = zo.evaluate()
    cpu.append(time.process_time())
    run_cpu = (cpu[1] - cpu[0]) + (cpu[3] - cpu[2])
    return {"steps": checkpoints, "curve": curve, "ratio": curve[-1] / curve[0],
            "accuracy_before": before, "accuracy_after": after, "cpu_seconds": run_cpu,
            "eval_cpu_seconds": (cpu[2] - cpu[1]) + (cpu[4] - cpu[3]),
            "seconds": time.time() - start, "load_average": os.getloadavg()[0]}


def verdicts(done: dict, key: tuple, seeds: list[int]) -> dict:
    """The goals' figures of one candidate over ``seeds`` (None where a run is missing)."""
    ratio = {(run, s): done[(key, run, s)]["ratio"] for run in RUNS for s in seeds
             if (key, run, s) in done}
    pairs = [s for s in seeds if ("int8", s) in ratio and ("float", s) in ratio]
    worst = max((max(ratio[("int8", s)], ratio[("float", s)]) for s in pairs), default=None)
    gaps = [ratio[("control", s)] - max(ratio[("int8", s)], ratio[("float", s)])
            for s in pairs if ("control", s) in ratio]
    diffs = [ratio[("int8", s)] - ratio[("float", s)] for s in pairs]
    cpu = [done[(key, "int8", s)]["cpu_seconds"] + done[(key, "float", s)]["cpu_seconds"]
           for s in pairs if "cpu_seconds" in done[(key, "int8", s)]]
    return {"seeds": len(pairs), "worst": worst, "gap": min(gaps) if gaps else None,
            "controls": len(gaps), "diff": float(np.mean(diffs)) if diffs else None,
            "diff_std": float(np.std(diffs, ddof=1)) if len(diffs) > 1 else None,
            "cpu": max(cpu) if cpu else None, "cpu_mean": float(np.mean(cpu)) if cpu else None}


def meets(v: dict, seeds: list[int]) -> bool:
    return (v["seeds"] == len(seeds) and v["controls"] == len(seeds) and v["worst"] < GOAL
            and v["gap"] >= MARGIN and abs(v["diff"]) <= TOLERANCE and v["cpu"] is not None
            and v["cpu"] <= CPU_GOAL)


def candidates_table(done: dict, keys: list[tuple], seeds: list[int]) -> str:
    """One line per candidate: the goals' figures over ``seeds`` and the verdict."""
    fmt = lambda value, spec: "not run" if value is None else format(value, spec)  # noqa: E731
    lines = [f"| candidate | seeds | worst L_T/L_0 (int8, float; goal < {GOAL}) | "
             f"control - worse, least (goal >= {MARGIN}) | mean int8 - float (goal "
             f"within {TOLERANCE}) | CPU s int8 + float, most (mean; goal <= {CPU_GOAL:.0f}) | "
             "all goals |", "|---|---|---|---|---|---|---|"]
    for key in keys:
        v = verdicts(done, key, seeds)
        cpu = "not measured" if v["cpu"] is None else f"{v['cpu']:.0f} ({v['cpu_mean']:.0f})"
        lines.append(f"| {label(key)} | {v['seeds']} | {fmt(v['worst'], '.3f')} | "
                     f"{fmt(v['gap'], '.3f')} ({v['controls']} seeds) | "
                     f"{fmt(v['diff'], '+.3f')} | {cpu} | "
                     f"{'**yes**' if meets(v, seeds) else 'no'} |")
    return "\n".join(lines)


def seed_table(done: dict, key: tuple, seeds: list[int]) -> str:
    """Per seed L_T/L_0 of each run, the verdicts and the CPU seconds of one candidate."""
    lines = ["| seed | int8 L_T/L_0 | float L_T/L_0 | control (no signal) L_T/L_0 | "
             f"int8 - float | both < {GOAL} | control - max(int8, float) >= {MARGIN} | "
             "CPU s int8 / float / control |", "|---|---|---|---|---|---|---|---|"]
    for seed in seeds:
        records = {run: done[(key, run, seed)] for run in RUNS if (key, run, seed) in done}
        ratio = {run: r["ratio"] for run, r in records.items()}
        cells = [f"{ratio[run]:.3f}" if run in ratio else "not run" for run in RUNS]
        if "int8" in ratio and "float" in ratio:
            cells.append(f"{ratio['int8'] - ratio['float']:+.3f}")
            cells.append("yes" if max(ratio["int8"], ratio["float"]) < GOAL else "**no**")
            if "control" in ratio:
                gap = ratio["control"] - max(ratio["int8"], ratio["float"])
                cells.append(f"{'yes' if gap >= MARGIN else '**no**'} ({gap:.3f})")
            else:
                cells.append("")
        else:
            cells += ["", ""]
        cells.append(" / ".join(f"{records[run]['cpu_seconds']:.0f}"
                                if "cpu_seconds" in records.get(run, {}) else "-"
                                for run in RUNS))
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def curves_table(done: dict, key: tuple, seeds: list[int]) -> str:
    """The training loss / its start of every run and seed at every checkpoint."""
    columns = [(run, s) for s in seeds for run in RUNS if (key, run, s) in done]
    if not columns:
        return ""
    steps = done[(key, *columns[0])]["steps"]
    lines = ["| step | " + " | ".join(f"{run} s{s}" for run, s in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for i, step in enumerate(steps):
        cells = []
        for run, s in columns:
            curve = done[(key, run, s)]["curve"]
            cells.append(f"{curve[i] / curve[0]:.3f}")
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def accuracy_line(done: dict, key: tuple, seeds: list[int]) -> str:
    parts = []
    for run in RUNS:
        records = [done[(key, run, s)] for s in seeds if (key, run, s) in done]
        if records:
            before = np.mean([r["accuracy_before"] for r in records])
            after = np.mean([r["accuracy_after"] for r in records])
            parts.append(f"{run} {before:.3f} -> {after:.3f}")
    return "Test accuracy (mean over the seeds, before -> after): " + "; ".join(parts) + "."


def seeds_needed(spread: float, difference: float) -> int:
    """Seeds for the mean of a per-seed difference of std ``spread`` to tell ``difference``
    from none at two standard errors: ``(2 spread / difference)^2``, rounded up."""
    return math.ceil((2 * spread / difference) ** 2)


def pooled_spread(done: dict, keys: list[tuple], seeds: list[int]) -> tuple[float, int]:
    """The std of the per-seed int8 - float difference pooled over ``keys`` (each about its
    own mean) and its degrees of freedom."""
    squares, freedom = 0.0, 0
    for key in keys:
        diffs = [done[(key, "int8", s)]["ratio"] - done[(key, "float", s)]["ratio"]
                 for s in seeds if (key, "int8", s) in done and (key, "float", s) in done]
        if len(diffs) > 1:
            squares += float(np.sum((np.array(diffs) - np.mean(diffs)) ** 2))
            freedom += len(diffs) - 1
    return (math.sqrt(squares / freedom), freedom) if freedom else (0.0, 0)


def plot(done: dict, key: tuple, seeds: list[int], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    styles = {"int8": ("-", "C0"), "float": ("--", "C1"), "control": (":", "C3")}
    for run, (style, color) in styles.items():
        for n, seed in enumerate(seeds):
            if (key, run, seed) not in done:
                continue
            record = done[(key, run, seed)]
            ratio = np.array(record["curve"]) / record["curve"][0]
            ax.plot(record["steps"], ratio, style, color=color, lw=1.3, alpha=0.85,
                    label=f"{run}{' (random-sign g)' if run == 'control' else ''}"
                    if n == 0 else None)
    ax.axhline(GOAL, color="grey", lw=0.8)
    ax.set(xlabel="step", ylabel="training loss / its start (few-shot set, unperturbed)",
           title=f"Few-shot ZO on MiniLM's adapters, seeds {' '.join(map(str, seeds))}\n"
                 f"({label(key)})")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as part:
        fig.savefig(part, dpi=110, format="png")
    plt.close(fig)


def shown(path: Path) -> str:
    """``path`` relative to the repository when inside it."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def command_line(key: tuple, seeds: list[int], threads: int, adapted_blocks=None, lrs=None,
                 epss=None, doc: tuple | None = None) -> str:
    """The command that runs candidate ``key`` (or, given, every one of ``adapted_blocks`` x
    ``lrs`` x ``epss`` at ``key``'s k_shot, steps, attention and nonlinear), naming every
    field, so it reproduces the runs whatever the defaults of the day."""
    k_shot, steps, adapted, lr, eps, attention, nonlinear = key
    listed = lambda values, one: " ".join(f"{v:g}" for v in (values or [one]))  # noqa: E731
    return (f"python benchmarks/finetune_fewshot.py --steps {steps} --k-shot {k_shot} "
            f"--adapted-blocks {listed(adapted_blocks, adapted)} --lr {listed(lrs, lr)} "
            f"--eps {listed(epss, eps)} --seeds {' '.join(map(str, seeds))} --threads "
            f"{threads} --attention {attention} --nonlinear {nonlinear}"
            + ("" if doc is None else " --doc " + " ".join(f"{x:g}" for x in doc)))


def commits(records: list[dict]) -> str:
    """The commits the records ran at ("not recorded" for lines written before the field)."""
    named = sorted({r["commit"] for r in records if r.get("commit")})
    unnamed = sum(1 for r in records if not r.get("commit"))
    return ", ".join([f"commit {c}" for c in named]
                     + ([f"{'' if named else 'commit '}not recorded"] if unnamed else []))


def candidate_section(done: dict, keys: list[tuple], key: tuple, seeds: list[int],
                      figure: bool) -> str:
    """One candidate in full: per seed, the spread, the accuracies, the load and commit, the
    curves (and the plot, ``figure``)."""
    v = verdicts(done, key, seeds)
    runs = [done[(key, run, s)] for run in RUNS for s in seeds if (key, run, s) in done]
    loads = [r["load_average"] for r in runs if "load_average" in r]
    load = (f"load average {min(loads):.1f} to {max(loads):.1f} at the runs' ends"
            if loads else "load not recorded")
    spread = ""
    pooled, freedom = pooled_spread(done, keys, seeds)
    if v["diff_std"] and pooled:
        spread = (f"\n\n**How many seeds a finer claim needs.** The per-seed int8 - float "
                  f"difference of L_T/L_0 has a seed-to-seed std of {v['diff_std']:.3f} here "
                  f"(mean {v['diff']:+.3f} over {v['seeds']} seeds), {pooled:.3f} pooled over "
                  f"every candidate's seeds ({freedom} degrees of freedom; a 3-seed std alone is "
                  "uncertain by a factor of several). The standard error of an n-seed mean is "
                  "std / sqrt(n), so telling a difference d from none at two standard errors "
                  "takes (2 std / d)^2 seeds: with the pooled std "
                  + ", ".join(f"d = {d} takes {seeds_needed(pooled, d)}" for d in (0.05, 0.02))
                  + "; with the issue's 0.06 "
                  + ", ".join(f"d = {d} takes {seeds_needed(0.06, d)}" for d in (0.05, 0.02))
                  + f". 3 seeds resolve about {2 * pooled / math.sqrt(3):.3f} (pooled std).")
    return (seed_table(done, key, seeds) + spread + "\n\n" + accuracy_line(done, key, seeds)
            + f" Runs measured with one torch thread, {load}, {commits(runs)}.\n\n"
            + ("![few-shot curves](finetune-fewshot.png)\n\n" if figure else "")
            + "Training loss / its start at every checkpoint (int8, float twin, control; "
            "source: measured here):\n\n" + curves_table(done, key, seeds) + "\n")


def variants(done_keys, key: tuple) -> list[tuple]:
    """``key`` under every other attention and nonlinear functions in ``done_keys``, the
    earlier values (:data:`ADDED_WITH`) first."""
    return sorted({k for k in done_keys if k[:5] == key[:5] and k != key},
                  key=lambda k: (ATTENTIONS.index(k[5]), NONLINEARS.index(k[6])))


def compared(done: dict, key: tuple, base: tuple, seeds: list[int]) -> str:
    """A line: per run, ``key``'s L_T/L_0 minus ``base``'s, per seed where both ran."""
    parts = []
    for run in RUNS:
        pairs = [(s, done[(key, run, s)]["ratio"] - done[(base, run, s)]["ratio"])
                 for s in seeds if (key, run, s) in done and (base, run, s) in done]
        if pairs:
            parts.append(f"{run} " + ", ".join(f"{d:+.3f}" for _, d in pairs)
                         + f" (seeds {' '.join(str(s) for s, _ in pairs)})")
    return ("" if not parts else f"L_T/L_0 minus {base[5]} attention, {base[6]} nonlinear's "
            "(the section above), per seed: " + "; ".join(parts) + ".\n\n")


def document(done: dict, keys: list[tuple], doc_key: tuple, seeds: list[int],
             command: str, results: Path, threads: int = 1) -> str:
    """``docs/finetune-fewshot.md``: the candidates, then the documented one in full, then
    the same candidate under each other attention and nonlinear functions measured."""
    others = "".join(
        f"\n## {label(key)}\n\nThe same candidate, {key[5]} attention and {key[6]} nonlinear "
        f"functions in the int8 run. Produced by `{command_line(key, seeds, threads)}` "
        f"(results in `{shown(results)}`).\n\n" + compared(done, key, doc_key, seeds)
        + candidate_section(done, keys, key, seeds, False)
        for key in variants({k for k, _, _ in done}, doc_key))
    return (
        "# The few-shot protocol: learning in the accelerator's arithmetic (generated)\n\n"
        "<!-- generated by benchmarks/finetune_fewshot.py: edit the script, not this file -->\n"
        "Issue 33's goals for `zoforge finetune --k-shot 16 --steps 200` (why this protocol: "
        "[finetune-accuracy.md](finetune-accuracy.md#why-a-few-shot-protocol-issue-33)): on "
        f"every seed, int8 (golden = RTL) and its float twin end below {GOAL} of their "
        f"starting training loss and at least {MARGIN} (in L_T/L_0) below a no-signal "
        "control (`ZoFinetune(control=\"random-sign\")`: each g times a random sign); the "
        f"mean int8 - float difference within {TOLERANCE}; int8 + float in at most "
        f"{CPU_GOAL / 60:.0f} CPU-minutes. CPU seconds are `time.process_time()` of one run "
        "with one torch thread (building it, 200 steps, the curve's 21 training losses; the "
        "two test evaluations not counted), measured on the shared 2-core machine "
        "(source: measured here).\n\n"
        "Each candidate names its attention and nonlinear functions (`--attention`, "
        "`--nonlinear`): they set the int8 run's and the control's (`engines`: Q·K^T and P·V "
        "as the GEMM engine's int8 jobs; `integer`: softmax, GELU and LayerNorm as the "
        "integer units; the product's defaults since issue 32), while the float twin keeps "
        "float attention and float nonlinear functions either way. Results recorded before "
        "the fields existed ran `host` and `float`.\n\n"
        f"Produced by `{command}` (results in `{shown(results)}`; `--report-only` rewrites "
        "this file and the plot from them).\n\n## Candidates\n\nEvery candidate in the results "
        "file, each run by the same command with its `--adapted-blocks`, `--lr`, "
        "`--attention` and `--nonlinear` (the all-blocks lines predate the CPU timing: about "
        "3 CPU-minutes int8 + float, issue 33).\n\n"
        + candidates_table(done, keys, seeds)
        + f"\n\n## {label(doc_key)}\n\n" + candidate_section(done, keys, doc_key, seeds, True)
        + others)


def tree_commit() -> str | None:
    """The commit of this tree (``-dirty`` with changes to tracked files), None outside git."""
    import subprocess
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              check=True, capture_output=True, text=True).stdout.strip()
        clean = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD"]).returncode
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("" if clean == 0 else "-dirty")


def pending(done: dict, keys: list[tuple], seeds: list[int], runs: list[str]) -> list:
    """``[(key, seed, [run, ...]), ...]``: the runs of ``keys`` x ``seeds`` not in ``done``
    (:func:`load_results`), each candidate's key with its attention and nonlinear."""
    return [(key, seed, todo) for key in keys for seed in seeds
            if (todo := [run for run in runs if (key, run, seed) not in done])]


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; an unset ``--adapted-blocks``, ``--lr``, ``--eps`` is the
    protocol's (``FinetuneConfig(k_shot=...)``), ``--attention``, ``--nonlinear`` the
    product's (``FinetuneConfig()``)."""
    product = FinetuneConfig()                  # zoforge finetune's defaults
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--k-shot", type=int, default=16)
    parser.add_argument("--adapted-blocks", type=int, nargs="+",
                        help="candidates' adapted_blocks (0: all; default: the protocol's)")
    parser.add_argument("--lr", type=float, nargs="+",
                        help="candidates' lr (default: the protocol's)")
    parser.add_argument("--eps", type=float, nargs="+",
                        help="candidates' eps (default: the protocol's)")
    parser.add_argument("--attention", choices=ATTENTIONS, default=product.attention,
                        help="the int8 runs' attention (default: zoforge finetune's, "
                             f"{product.attention})")
    parser.add_argument("--nonlinear", choices=NONLINEARS, default=product.nonlinear,
                        help="the int8 runs' softmax, GELU and LayerNorm (default: zoforge "
                             f"finetune's, {product.nonlinear})")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--doc", nargs=3, type=float, metavar=("ADAPTED", "LR", "EPS"),
                        help="the candidate documented in full (default: the first)")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/ alone")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: the tables, docs and plot of the finished runs")
    args = parser.parse_args(argv)
    protocol = FinetuneConfig(k_shot=args.k_shot)          # the protocol's defaults
    for name in ("adapted_blocks", "lr", "eps"):
        if getattr(args, name) is None:
            setattr(args, name, [getattr(protocol, name)])
    args.keys = [(args.k_shot, args.steps, a, lr, eps, args.attention, args.nonlinear)
                 for a in args.adapted_blocks for lr in args.lr for eps in args.eps]
    return args


def main() -> None:
    args = arguments()
    keys = args.keys
    torch.set_num_threads(args.threads)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    done = load_results(args.results)
    model, commit = None, tree_commit()
    for key, seed, todo in [] if args.report_only else pending(done, keys, args.seeds,
                                                                args.runs):
        from zoforge.golden.finetune.train import load_model, prepare
        cfg = config(key, seed)
        start = time.time()
        model = model or load_model(cfg)
        prepared = prepare(cfg, model)
        print(f"{label(key)}, seed {seed}: prepared in {time.time() - start:.0f} s",
              flush=True)
        for run in todo:
            record = {"row": run, "seed": seed, **dict(zip(KEY_FIELDS, key)),
                      "commit": commit, **run_one(prepared, run, args.steps)}
            with args.results.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
            done[(key, run, seed)] = record
            print(f"{label(key)}, {run} seed {seed}: L_T/L_0 {record['ratio']:.3f} "
                  f"({record['cpu_seconds']:.0f} CPU s, {record['seconds']:.0f} s)",
                  flush=True)
    print(candidates_table(done, keys, args.seeds))
    for key in keys:
        print(f"\n{label(key)}\n{seed_table(done, key, args.seeds)}")
    if args.no_docs:
        return
    doc_key = keys[0] if args.doc is None else (args.k_shot, args.steps, int(args.doc[0]),
                                                args.doc[1], args.doc[2], args.attention,
                                                args.nonlinear)
    command = command_line(keys[0], args.seeds, args.threads, args.adapted_blocks, args.lr,
                           args.eps, args.doc)
    measured = sorted({key for key, _, _ in done if key[:2] == (args.k_shot, args.steps)},
                      key=lambda k: (ATTENTIONS.index(k[5]), NONLINEARS.index(k[6]),
                                     -(k[2] or 99), k[3], k[4]))
    atomic_write_text(DOC, document(done, measured, doc_key, args.seeds, command, args.results,
                                    args.threads))
    plot(done, doc_key, args.seeds, PLOT)


if __name__ == "__main__":
    main()
