"""Benchmark: steps/s of P-RGE against sequential MeZO, and PeZO generation cost per step.

Usage::

    python benchmarks/bench_zo.py [--trainable lora-fa] [--queries 4] [--batch 16]
                                  [--steps 20] [--repeats 3] [--threads 1]

On the default model (all-MiniLM-L6-v2, frozen prefix cached, LoRA-FA on the top layer +
head) it times, on the same batches: sequential MeZO with q queries (2q forwards of one
copy), P-RGE with q queries (inner + outer loop: one forward of 2q copies), and, for the
inner loop alone, MeZO q=1 (two forwards) against P-RGE inner-only q=1 (one forward of 2
copies). Each is run ``--repeats`` times interleaved; the best run counts (least disturbed
by other processes). For LoRA-FA it repeats the timing without the activation cache: each
forward then runs the frozen prefix from the tokens, once per forward (so once per P-RGE
step, 2q times per sequential MeZO step). Then it times the perturbation sources drawing the d values of one
query and prints them as a share of a P-RGE step.
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

from zoforge.golden.zo.config import TrainConfig
from zoforge.golden import data as data_mod
from zoforge.golden.models import hidden_states, tokenize
from zoforge.golden.zo.features import build_trainable, load_model
from zoforge.golden.zo.optimizers import make_optimizer
from zoforge.golden.zo.perturbation import SOURCES, make_perturbation
from zoforge.golden.zo.train import batch_index
from zoforge.golden.zo.trainable import SplitData


class PrefixInEveryForward:
    """The LoRA-FA trainable without the activation cache: every loss evaluation runs the
    frozen prefix from the token ids first (once per forward, shared by its copies)."""

    def __init__(self, lora, model, ids, mask, labels):
        self.lora, self.model, self.prefix = lora, model, model.config.num_hidden_layers - 1
        self.split = SplitData(ids, mask, labels)
        self.splits, self.kind, self.theta = {"train": self.split}, "lora-fa", lora.theta

    @property
    def d(self):
        return self.lora.d

    def losses(self, thetas, index, split="train"):
        ids, mask, labels = self.split.batch(index)
        hidden = hidden_states(self.model, ids, mask, self.prefix)
        logits = self.lora.logits(thetas, hidden, mask)
        k, b, c = logits.shape
        return torch.nn.functional.cross_entropy(
            logits.reshape(k * b, c), labels.repeat(k), reduction="none").view(k, b).mean(1)


def time_steps(trainable, method, queries, inner, outer, batch, steps) -> float:
    """Steps per second of one optimizer over ``steps`` steps (theta restored after)."""
    theta = trainable.theta.clone()
    opt = make_optimizer(method, trainable, make_perturbation("pezo-onthefly"), lr=1e-3,
                         eps=1e-2, queries=queries, inner=inner, outer=outer)
    opt.step(batch_index(0, 0, len(trainable.splits["train"]), batch))      # warm-up
    start = time.perf_counter()
    for step in range(steps):
        opt.step(batch_index(0, step, len(trainable.splits["train"]), batch))
    elapsed = time.perf_counter() - start
    trainable.theta.copy_(theta)
    return steps / elapsed


def time_draw(name: str, d: int, repeats: int = 50) -> float:
    source = make_perturbation(name, seed=1)
    source.draw(d)
    start = time.perf_counter()
    for _ in range(repeats):
        source.draw(d)
    return (time.perf_counter() - start) / repeats


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainable", default="lora-fa", choices=("head", "lora-fa"))
    parser.add_argument("--queries", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default=None, help="model folder (default MiniLM)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = TrainConfig(trainable=args.trainable, model=args.model, batch=args.batch,
                      progress=False, threads=args.threads)
    trainable, info = build_trainable(cfg)
    q = args.queries
    cases = {
        f"MeZO sequential q={q} ({2 * q} forwards of 1 copy)": ("mezo", q, False, False),
        f"P-RGE inner+outer q={q} (1 forward of {2 * q} copies)": ("prge", q, True, True),
        "MeZO q=1 (2 forwards of 1 copy)": ("mezo", 1, False, False),
        "P-RGE inner only q=1 (1 forward of 2 copies)": ("prge", 1, True, False),
    }
    targets = {"cached prefix (as zoforge train runs)": trainable}
    if args.trainable == "lora-fa":
        model, tokenizer = load_model(cfg)
        splits = data_mod.split(data_mod.load_dataset(), 0, cfg.n_train, cfg.n_val, cfg.n_test)
        ids, mask = tokenize(tokenizer, splits.train.texts, cfg.max_len)
        targets["frozen prefix run in every forward (no cache)"] = PrefixInEveryForward(
            trainable, model, ids, mask, splits.train.labels)
    print(f"model: {cfg.model or 'all-MiniLM-L6-v2'}, trainable {args.trainable} "
          f"(d = {trainable.d}), batch B = {args.batch}, torch threads {args.threads}, "
          f"{args.steps} steps x {args.repeats} repeats (best)")
    names, results = list(cases), {}
    for label, target in targets.items():
        best = {name: 0.0 for name in cases}
        for _ in range(args.repeats):
            for name, (method, queries, inner, outer) in cases.items():
                rate = time_steps(target, method, queries, inner, outer, args.batch,
                                  args.steps)
                best[name] = max(best[name], rate)
        print(f"\n{label}")
        print(f"{'case':58s} {'steps/s':>9s} {'ms/step':>9s}")
        for name, rate in best.items():
            print(f"{name:58s} {rate:9.2f} {1e3 / rate:9.1f}")
        print(f"speed-up P-RGE (q={q}, inner+outer) over sequential MeZO q={q}: "
              f"{best[names[1]] / best[names[0]]:.2f}x (goal >= 1.8x)")
        print(f"speed-up of the inner loop alone (q=1): "
              f"{best[names[3]] / best[names[2]]:.2f}x")
        results[label] = best
    best = results[next(iter(targets))]
    step_s = 1.0 / best[names[1]]
    print(f"\nperturbation generation, d = {trainable.d} values per query, {q} queries per "
          f"P-RGE step ({step_s * 1e3:.1f} ms):")
    for name in SOURCES:
        per_draw = time_draw(name, trainable.d)
        print(f"  {name:16s} {per_draw * 1e3:8.3f} ms per query = "
              f"{100 * q * per_draw / step_s:5.1f} % of a step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
