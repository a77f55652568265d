"""CPU seconds per golden fine-tuning step, int8 and its float twin (issue 33 item 3).

Configurations (MiniLM, 6 blocks, seq 32): the default ``zoforge finetune`` run (batch 4,
q 4, all blocks adapted), the few-shot default (``--k-shot 16``: 32 examples as one batch,
q 1) and the few-shot default with adapters on the top 1, 2 and 3 blocks only. Each is
timed as ``time.process_time()`` (one torch thread) over ``--steps`` steps after one
warm-up step (the frozen blocks' inputs are computed in the warm-up, once per example, as
in a run), and the 200-step cost of int8 + float is printed beside it. Every configuration
runs ``--attention`` and ``--nonlinear`` (defaults: ``zoforge finetune``'s,
``FinetuneConfig``'s; the float twin keeps float attention and nonlinear functions either way).

``--before REV`` measures the same steps on the tree of git revision ``REV`` (extracted
with ``git archive`` to a temporary folder, run in a child process) side by side, with the
ratio before/after; a tree from before the two fields runs only their earlier values
(``ADDED_WITH``: host, float), other values show n/a there. The figures of
``docs/finetune-speed.md`` (measured before the defaults became engines and integer)::

    .venv/bin/python benchmarks/bench_finetune_step.py --before a6157df \\
        --attention host --nonlinear float

(``a6157df``: the last commit before the speed work.)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [("default (batch 4, q 4)", {}), ("few-shot default (k 16)", {"k_shot": 16}),
           ("few-shot, adapted_blocks 3", {"k_shot": 16, "adapted_blocks": 3}),
           ("few-shot, adapted_blocks 2", {"k_shot": 16, "adapted_blocks": 2}),
           ("few-shot, adapted_blocks 1", {"k_shot": 16, "adapted_blocks": 1})]


def measure(steps: int, names: list[str], variant: dict, earlier: dict) -> dict:
    """``{config name: {"int8": s/step, "float": s/step}}`` on this process's zoforge, each
    configuration with ``variant``'s attention and nonlinear (a tree without those fields:
    only where ``variant`` is ``earlier``, the values it ran; otherwise None)."""
    import torch
    torch.set_num_threads(1)
    from zoforge.golden.finetune.config import FinetuneConfig
    from zoforge.golden.finetune.train import ZoFinetune, load_model, prepare
    model = None
    out = {}
    for name, fields in CONFIGS:
        if name not in names:
            continue
        try:
            cfg = FinetuneConfig(**fields, **variant)
        except TypeError:              # a tree before attention / nonlinear (or adapted_blocks)
            try:
                cfg = FinetuneConfig(**fields) if variant == earlier else None
            except TypeError:
                cfg = None
        if cfg is None:
            out[name] = None
            continue
        model = model or load_model(cfg)
        prepared = prepare(cfg, model)
        out[name] = {}
        for arithmetic in ("int8", "float"):
            run = ZoFinetune(prepared, arithmetic)
            run.step()
            start = time.process_time()
            for _ in range(steps):
                run.step()
            out[name][arithmetic] = (time.process_time() - start) / steps
            print(f"  {name} {arithmetic}: {out[name][arithmetic]:.3f} s/step", file=sys.stderr,
                  flush=True)
    return out


def before(rev: str, steps: int, names: list[str], variant: dict, earlier: dict) -> dict:
    """:func:`measure` on the tree of ``rev`` (child process)."""
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        # the package's subpackages live beside zoforge/ (setup.py's package_dir); link them
        # in, or the editable install's finder would import this tree's instead
        for name in ("golden", "hw", "sim", "reports", "sweep", "boards"):
            if (Path(folder) / name).is_dir() and not (Path(folder) / "zoforge" / name).exists():
                os.symlink(Path(folder) / name, Path(folder) / "zoforge" / name)
        env = dict(os.environ, PYTHONPATH=folder)
        code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
                "from bench_finetune_step import measure; import zoforge.golden.finetune.train"
                " as t; assert t.__file__.startswith(sys.argv[4]), t.__file__; "
                "print(json.dumps(measure(int(sys.argv[2]), json.loads(sys.argv[3]), "
                "json.loads(sys.argv[5]), json.loads(sys.argv[6]))))")
        result = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent),
                                 str(steps), json.dumps(names), folder, json.dumps(variant),
                                 json.dumps(earlier)], cwd=folder, env=env,
                                check=True, capture_output=True, text=True)
        return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    from zoforge.golden.finetune.config import (ADDED_WITH, ATTENTIONS, NONLINEARS,
                                                FinetuneConfig)
    product = FinetuneConfig()                  # zoforge finetune's defaults
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps per run")
    parser.add_argument("--before", help="git revision to time side by side")
    parser.add_argument("--configs", type=int, nargs="*", help="indices into CONFIGS")
    parser.add_argument("--attention", choices=ATTENTIONS, default=product.attention,
                        help=f"the int8 runs' attention (default: {product.attention})")
    parser.add_argument("--nonlinear", choices=NONLINEARS, default=product.nonlinear,
                        help="the int8 runs' softmax, GELU and LayerNorm (default: "
                             f"{product.nonlinear})")
    args = parser.parse_args()
    variant = {"attention": args.attention, "nonlinear": args.nonlinear}
    print(f"attention {args.attention}, nonlinear {args.nonlinear}")
    names = [CONFIGS[i][0] for i in (args.configs or range(len(CONFIGS)))]
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    old = before(args.before, args.steps, names, variant, ADDED_WITH) if args.before else {}
    new = measure(args.steps, names, variant, ADDED_WITH)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    print("| configuration | int8 s/step | float s/step | 200 steps int8+float (CPU min) |"
          + (" before: int8 | before: float | int8 speed-up | float speed-up |"
             if old else ""))
    print("|---|---|---|---|" + ("---|---|---|---|" if old else ""))
    for name in names:
        n = new[name]
        row = f"| {name} | {n['int8']:.3f} | {n['float']:.3f} | " \
              f"{200 * (n['int8'] + n['float']) / 60:.2f} |"
        if old:
            o = old.get(name)
            row += (" n/a | n/a | n/a | n/a |" if o is None else
                    f" {o['int8']:.3f} | {o['float']:.3f} | {o['int8'] / n['int8']:.2f}x |"
                    f" {o['float'] / n['float']:.2f}x |")
        print(row)


if __name__ == "__main__":
    main()
