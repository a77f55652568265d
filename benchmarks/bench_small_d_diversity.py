"""Diversity of the perturbation generators at small d (issue 25): PeZO against the masked
on-the-fly generator.

    .venv/bin/python benchmarks/bench_small_d_diversity.py [--d 770 13058] [--draws 5000]

For each d and generator, the golden model (bit-exact with the RTL) draws ``--draws``
consecutive perturbation vectors of length d from its reset state, as a training with one
query per step does. Printed per row:

* **distinct**: distinct perturbation vectors over the generator's whole period: its
  number of states over gcd(states, the state step of one vector) (Gaussian: unbounded);
* **lag-1 |cos|**: the mean |cosine| between consecutive vectors (independent Gaussian
  vectors: sqrt(2 / (pi d)));
* **anti-diag corr**: the correlation between value (c, p + 1) and value (c + 1, p) of the
  stream (c a cycle, p a position): the lane that moves from position p + 1 to p, one LFSR
  step apart (PeZO's doubling map: 0.5; Gaussian 0);
* **eff. rank / min(draws, d)**: the effective rank (Roy & Vetterli 2007: exp of the entropy
  of the normalised singular values) of the draws x d matrix, as a fraction of its largest
  possible value; this is the statistic that decides how many directions a ZO training
  explores (Gaussian draws: a little below 1).
"""
from __future__ import annotations

import argparse
import math

import numpy as np

from zoforge.golden.rng import MaskedConfig, OnTheFlyConfig, PregenConfig

#: d of the head trainer (MiniLM, 2 classes) and of LoRA-FA on the top layer + head.
DEFAULT_D = (770, 13_058)
GENERATORS = {"PeZO on-the-fly 31 x 8": OnTheFlyConfig(n_rng=31, bits=8),
              "PeZO pool 4095 x 12": PregenConfig(pool_size=4095, bits=12),
              "masked on-the-fly 31 x 8 (new)": MaskedConfig(n_rng=31, bits=8)}


def effective_rank(draws: np.ndarray) -> float:
    """exp(entropy of the normalised singular values) of ``draws`` (via its smaller Gram)."""
    x = draws.astype(np.float64)
    gram = x @ x.T if x.shape[0] <= x.shape[1] else x.T @ x
    singular = np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0.0, None))
    p = singular / singular.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


def lag1_abs_cos(draws: np.ndarray) -> float:
    x = draws.astype(np.float64)
    norms = np.linalg.norm(x, axis=1)
    cos = (x[:-1] * x[1:]).sum(axis=1) / (norms[:-1] * norms[1:])
    return float(np.abs(cos).mean())


def antidiagonal_corr(golden, cycles: int = 20_000) -> float | None:
    """corr(value(c, p + 1), value(c + 1, p)) over ``cycles`` cycles (LFSR generators)."""
    if not hasattr(golden, "n_rng"):
        return None
    v = golden.values_at(np.arange(cycles)).astype(np.float64)
    a, b = v[:-1, 1:].reshape(-1), v[1:, :-1].reshape(-1)
    return float(np.corrcoef(a, b)[0, 1])


def distinct_vectors(golden, d: int) -> int:
    golden.state = 0
    step = golden.state_after(d)
    return golden.modulus // math.gcd(golden.modulus, step)


def rows(d: int, draws: int, seed: int = 0):
    gaussian = np.random.default_rng(seed).standard_normal((draws, d))
    limit = min(draws, d)
    yield ("Gaussian (software)", "unbounded", lag1_abs_cos(gaussian), 0.0,
           effective_rank(gaussian) / limit)
    for label, config in GENERATORS.items():
        golden = config.golden()
        distinct = distinct_vectors(golden, d)
        golden.state = 0
        z = np.stack([golden.take(d) for _ in range(draws)])
        yield (label, f"{distinct:,}", lag1_abs_cos(z), antidiagonal_corr(config.golden()),
               effective_rank(z) / limit)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--d", type=int, nargs="+", default=list(DEFAULT_D))
    parser.add_argument("--draws", type=int, default=5000,
                        help="consecutive vectors per generator (a run's steps)")
    parser.add_argument("--draws-large", type=int, default=1500,
                        help="draws where d > 1000 (memory)")
    args = parser.parse_args(argv)
    print("| d | generator | distinct vectors | lag-1 mean abs cos | anti-diagonal corr | "
          "effective rank / min(draws, d) |")
    print("|---|---|---|---|---|---|")
    for d in args.d:
        draws = args.draws if d <= 1000 else args.draws_large
        print(f"| {d} ({draws} draws; Gaussian lag-1 abs cos expected "
              f"{math.sqrt(2 / (math.pi * d)):.4f}) | | | | | |")
        for label, distinct, cos, corr, erank in rows(d, draws):
            corr_text = "-" if corr is None else f"{corr:+.3f}"
            print(f"| {d} | {label} | {distinct} | {cos:.4f} | {corr_text} | {erank:.3f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
