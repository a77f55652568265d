"""Built-in sweeps (``zoforge sweep --preset NAME``), as SWEEP.toml data.

``pezo-fig3`` (pool size), ``pezo-fig4`` (bit-width) and ``pezo-rng-count`` (RNG count) are
the shapes of PeZO's Figures 3 and 4 on the default model and data (all-MiniLM-L6-v2,
Rotten Tomatoes), trained the fast way: MeZO on the linear head over cached features
(d = 770), 5000 steps, three seeds, the settings of docs/zo-training.md. ``small-d``
compares Gaussian perturbations, PeZO's generators and the masked on-the-fly generator at
small d (the head, d = 770, and the LoRA-FA top layer; docs/small-d.md). ``tiny`` is a few
short points on the small random BERT, the sweep of the default test suite.

``pezo-fig3-lora`` (RNG count, and pool size for the pool) and ``pezo-fig4-lora``
(bit-width) are the same figures in the adapters' regime (issue 33; ``task = "finetune"``):
the ZO fine-tuning of MiniLM's LoRA-FA adapters in the accelerator's int8 arithmetic, the
few-shot protocol (16 examples per class, one full batch, q 1), adapters on the top
:data:`_LORA` ``adapted_blocks`` of 6 (d = 12,288), every generator strategy, three seeds;
the metric is the final training loss (PeZO Fig. 4's), the test accuracy beside it.
``tiny-finetune`` is a few short fine-tunings of the small random BERT (the default test
suite's).
``zoforge sweep --preset NAME --print-config`` writes one out as a SWEEP.toml to edit.
"""
from __future__ import annotations

import copy
import difflib

from zoforge.errors import ConfigError

__all__ = ["PRESETS", "preset"]

# The training the PeZO presets share (docs/zo-training.md, "Measured here").
_HEAD = {"method": "mezo", "trainable": "head", "steps": 5000, "lr": 2e-3, "eps": 1e-2,
         "batch": 16, "eval_every": 500, "checkpoint_every": 500}
_SEEDS = [0, 1, 2]
# The fine-tuning the LoRA presets share: the few-shot protocol (docs/finetune.md) with
# adapters on the top 2 blocks (d = 2 blocks x query, value x r 8 x 384 = 12,288, the
# small-d preset's LoRA-FA size), lr 1e-3 (2e-4, tuned for 6 blocks, leaves 0.93 of the
# loss after 40 steps on 2 blocks; 1e-3 0.54 after 60) and 100 steps: docs/sweeps.md, "At
# the transformer level".
_LORA = {"k_shot": 16, "adapted_blocks": 2, "lr": 1e-3, "steps": 100}
# The generator reports of the LoRA presets: no place and route (time), power kept.
_LORA_REPORT = {"pnr": False}

PRESETS: dict[str, dict] = {
    "tiny": {
        "name": "tiny",
        "description": "A few short trainings of the small random BERT with two on-the-fly "
                       "generators and a software reference, two seeds each.",
        "train": {"model": "tiny", "trainable": "head", "steps": 40, "batch": 8,
                  "n_train": 64, "n_val": 16, "n_test": 64, "lr": 1e-2, "eval_every": 20,
                  "checkpoint_every": 10},
        "points": [{"perturbation": "pezo-onthefly", "n_rng": 7, "bits": 6},
                   {"perturbation": "pezo-onthefly", "n_rng": 7, "bits": 8},
                   {"perturbation": "gaussian"}],
        "grid": {"seed": [0, 1]},
        "report": {"activity_cycles": 200},
        "search": {"trials": 4, "population": 2},
    },
    "pezo-fig3": {
        "name": "pezo-fig3",
        "description": "Pre-generated pool size 2^8 - 1 .. 2^16 - 1 (12-bit values, 8 banks, "
                       "one striped copy in block RAM, as PeZO's Table 6 builds it).",
        "paper": "PeZO Fig. 3: accuracy rises with the pool size from 2^8 to 2^12 and then "
                 "flattens up to 2^16 (RoBERTa-large and OPT, SST-2 and others).",
        "train": dict(_HEAD, perturbation="pezo-pregen", bits=12, banks=8),
        "grid": {"pool_size": [(1 << k) - 1 for k in range(8, 17)], "seed": _SEEDS},
        "hardware": {"layout": "striped"},
        "report": {"ram_style": "block"},
    },
    "pezo-fig4": {
        "name": "pezo-fig4",
        "description": "On-the-fly generator, 31 LFSRs, bit-width 6 .. 16.",
        "paper": "PeZO Fig. 4 (training loss): the final training loss falls as the RNG "
                 "bit-width grows, down to a bottleneck width beyond which it stays flat "
                 "(8 bits for RoBERTa-large, 14 for OPT). Compare it with our final-loss "
                 "plot (the figure's own metric), not the accuracy plot.",
        "train": dict(_HEAD, perturbation="pezo-onthefly", n_rng=31),
        "grid": {"bits": [6, 7, 8, 10, 12, 14, 16], "seed": _SEEDS},
    },
    "pezo-rng-count": {
        "name": "pezo-rng-count",
        "description": "On-the-fly generator, 8-bit LFSRs, n = 2^2 - 1 .. 2^6 - 1.",
        "paper": "PeZO Fig. 3: on-the-fly accuracy peaks at about 2^5 RNGs over 2^2 .. 2^6 "
                 "(OPT collapses on SST-2 at 2^2).",
        "train": dict(_HEAD, perturbation="pezo-onthefly", bits=8),
        "grid": {"n_rng": [3, 7, 15, 31, 63], "seed": _SEEDS},
    },
    "small-d": {
        "name": "small-d",
        "description": "Gaussian, PeZO on-the-fly 31 x 8, PeZO pool 4095 x 12 and the masked "
                       "on-the-fly generator 31 x 8 at small d: the head (d = 770) and the "
                       "LoRA-FA top layer with the head (docs/small-d.md).",
        "train": dict(_HEAD),
        "points": [{"perturbation": "gaussian"},
                   {"perturbation": "pezo-onthefly", "n_rng": 31, "bits": 8},
                   {"perturbation": "pezo-pregen", "pool_size": 4095, "bits": 12},
                   {"perturbation": "masked-onthefly", "n_rng": 31, "bits": 8}],
        "grid": {"trainable": ["head", "lora-fa"], "seed": _SEEDS},
    },
    "tiny-finetune": {
        "name": "tiny-finetune",
        "task": "finetune",
        "description": "A few short few-shot fine-tunings of the small random BERT's "
                       "adapters with two generators, two seeds each.",
        "train": {"model": "tiny", "blocks": 2, "seq_len": 8, "n_train": 40, "n_test": 20,
                  "calibration": 20, "k_shot": 4, "rank": 4, "steps": 20},
        "points": [{"strategy": "onthefly"}, {"strategy": "masked"}],
        "grid": {"seed": [0, 1]},
        "report": {"activity_cycles": 200, "pnr": False},
    },
    "pezo-fig3-lora": {
        "name": "pezo-fig3-lora",
        "task": "finetune",
        "description": "PeZO Fig. 3 on MiniLM's LoRA-FA adapters (few-shot, int8 golden "
                       "step, top 2 blocks): on-the-fly and masked on-the-fly with "
                       "n = 7 .. 63 8-bit LFSRs, the pool of 255 .. 16383 12-bit values, "
                       "and the Gaussian array (7 generators) as the reference.",
        "paper": "PeZO Fig. 3: on-the-fly accuracy peaks at about 2^5 RNGs over 2^2 .. 2^6; "
                 "pool accuracy rises with the pool size up to 2^12 and then flattens "
                 "(RoBERTa-large and OPT, SST-2 and others).",
        "train": dict(_LORA),
        "points": [*({"strategy": s, "n_rng": n} for s in ("onthefly", "masked")
                     for n in (7, 15, 31, 63)),
                   *({"strategy": "pregen", "bits": 12, "pool_size": (1 << k) - 1}
                     for k in (8, 10, 12, 14)),
                   {"strategy": "gaussian"}],
        "grid": {"seed": _SEEDS},
        "report": dict(_LORA_REPORT),
    },
    "pezo-fig4-lora": {
        "name": "pezo-fig4-lora",
        "task": "finetune",
        "description": "PeZO Fig. 4 on MiniLM's LoRA-FA adapters (few-shot, int8 golden "
                       "step, top 2 blocks): bit-width 6 .. 16 of every generator "
                       "(on-the-fly and masked 7 lanes, the pool 4095 values, the "
                       "Gaussian array 7 generators).",
        "paper": "PeZO Fig. 4 (training loss): the final training loss falls as the RNG "
                 "bit-width grows, down to a bottleneck width beyond which it stays flat "
                 "(8 bits for RoBERTa-large, 14 for OPT).",
        "train": dict(_LORA),
        "points": [{"strategy": s} for s in ("onthefly", "masked", "pregen", "gaussian")],
        "grid": {"bits": [6, 8, 12, 16], "seed": _SEEDS},
        "report": dict(_LORA_REPORT),
    },
}


def preset(name: str) -> dict:
    """A copy of the preset ``name``'s SWEEP data (a one-line ConfigError naming
    ``--preset``, with the closest name as a guess, for an unknown one)."""
    if name not in PRESETS:
        guess = difflib.get_close_matches(str(name), PRESETS, n=1)
        raise ConfigError("--preset", "one of " + ", ".join(PRESETS)
                          + (f"; did you mean {guess[0]}?" if guess else ""), name)
    return copy.deepcopy(PRESETS[name])
