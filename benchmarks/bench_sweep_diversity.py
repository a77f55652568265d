"""How many different perturbation vectors each configuration of a sweep really draws.

    .venv/bin/python benchmarks/bench_sweep_diversity.py --preset pezo-fig3 --d 770

For every configuration of the preset (seeds left out): the perturbation source of the
point's training (bit-exact with its generator) draws ``--draws`` vectors of length d;
printed are how many of them are distinct, the rank of the matrix they form (at most d) and
its effective rank (exp of the entropy of the normalised singular values, Roy & Vetterli
2007: d for perfectly isotropic draws, a little less for as many Gaussian draws, which the
first row shows; fewer when the vectors crowd into a few directions). This is what explains
the presets' accuracy in docs/sweeps.md: a generator's perturbations span only as many
directions as it has distinct vectors, and both depend on d against the pool size or the
generator's period, not on the pool size or RNG count alone.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

from zoforge.errors import ConfigError
from zoforge.sweep.presets import preset
from zoforge.sweep.spec import sweep_from_dict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--preset", default="pezo-fig3")
    parser.add_argument("--d", type=int, default=770,
                        help="perturbation length (770: the head trainer on MiniLM)")
    parser.add_argument("--draws", type=int, default=2000)
    args = parser.parse_args(argv)
    try:
        sweep = sweep_from_dict(preset(args.preset), default_name=args.preset)
    except ConfigError as error:
        print(f"bench_sweep_diversity: error: {error}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    seen = set()
    print(f"| configuration ({args.preset}) | distinct vectors in {args.draws} draws | "
          f"rank (of d = {args.d}) | effective rank |")
    print("|---|---|---|---|")
    print(f"| gaussian (reference) | {args.draws} | - | "
          f"{effective_rank(np.random.default_rng(0).standard_normal((args.draws, args.d))):.0f} |")
    for point in sweep.points:
        label = ", ".join(f"{k}={v}" for k, v in point.swept.items() if k != "seed")
        if label in seen:
            continue
        seen.add(label)
        source = point.train.perturbation_source()
        draws = np.stack([source.draw(args.d).numpy() for _ in range(args.draws)])
        distinct = len({row.tobytes() for row in draws})
        rank = np.linalg.matrix_rank(draws.astype(np.float64))
        print(f"| {label} | {distinct} | {rank} | {effective_rank(draws):.0f} |", flush=True)
    return 0


def effective_rank(matrix: np.ndarray) -> float:
    singular = np.linalg.svd(matrix.astype(np.float64), compute_uv=False)
    p = singular / singular.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


if __name__ == "__main__":
    sys.exit(main())
