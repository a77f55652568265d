"""``zoforge train``: golden zeroth-order fine-tuning (see docs/zo-training.md).

One flag per :class:`~zoforge.golden.zo.config.TrainConfig` field, its help and allowed
values taken from the field. ``--config FILE`` (JSON, or TOML for ``.toml``) gives any of the
fields, read by the one strict reader (:func:`zoforge.config.read_table`); flags override it.
Everything is checked before any work (the configuration, then the data, the model's limits
and ``--out`` in :func:`~zoforge.golden.zo.train.train`). A value read from the file that is
wrong is named as ``KEY in FILE``; an option given (as a flag or in the file, with a value
other than its default) that the chosen method, perturbation or trainable does not use is an
error, not silently ignored. ``--branch-lanes`` (``hw-mlp``) is ``auto`` unless given (as a
flag or in the file): the mapping the tool picks for the shape
(:func:`zoforge.sim.mapping.with_chosen_branch_lanes`).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from zoforge.errors import ConfigError


def register(tree) -> None:
    parser = tree.command("train", "fine-tune a classifier with a zeroth-order optimizer "
                          "(golden PyTorch model)")
    parser.add_argument("--config", metavar="FILE",
                        help="JSON (or .toml) file with any of the options below as keys "
                             "(n_rng = 7); flags override it")
    _add_fields(parser)
    parser.set_defaults(func=run)


def _add_fields(parser) -> None:
    """One flag per TrainConfig field; only flags given explicitly land in the namespace."""
    from zoforge.config import OneOf, flag_name
    from zoforge.golden.zo.config import TrainConfig
    for field, kind in TrainConfig.field_types().items():
        check = field.metadata["check"]
        if field.name == "branch_lanes":         # auto (the tool's pick) or a number
            parser.add_argument(flag_name(field.name), default=argparse.SUPPRESS,
                                metavar="{auto,1,2,4,...}", help=field.metadata["help"]
                                + " (default: auto)")
            continue
        text = f"{field.metadata['help']} (default: {field.default})".replace("%", "%%")
        if kind is bool:
            parser.add_argument(flag_name(field.name), default=argparse.SUPPRESS, help=text,
                                action=argparse.BooleanOptionalAction)
            continue
        # checked by TrainConfig (one-line errors), not by argparse
        metavar = ("{" + ",".join(map(str, check.choices)) + "}" if isinstance(check, OneOf)
                   else field.name.upper())
        parser.add_argument(flag_name(field.name), type=kind, default=argparse.SUPPRESS,
                            help=text, metavar=metavar)


def run(args) -> int:
    from zoforge.config import config_type_of, field_of, read_table
    from zoforge.golden.zo.config import TrainConfig, inapplicable
    from zoforge.golden.zo.train import train
    from zoforge.sim.mapping import parse_branch_lanes, with_chosen_branch_lanes
    from_file: dict = {}
    if args.config:
        _, from_file = config_type_of(read_table(args.config), (TrainConfig,), args.config)
        TrainConfig.check_keys(from_file, f" in {args.config}")
    flags = {f.name: getattr(args, f.name) for f in TrainConfig.field_types()
             if hasattr(args, f.name)}
    if "branch_lanes" in flags:
        flags["branch_lanes"] = parse_branch_lanes(flags["branch_lanes"])
        if flags["branch_lanes"] is None:         # auto: as if not given
            del flags["branch_lanes"]
    values = {**from_file, **flags}

    def named(error: ConfigError) -> ConfigError:
        """The error naming ``KEY in FILE`` for a value read from the file (a field given
        as a flag stays a field: the command line shows it as the flag)."""
        field = field_of(error)
        if field in from_file and field not in flags:
            return error.renamed(f"{field} in {args.config}")
        return error

    try:
        cfg = TrainConfig(**values)
    except ConfigError as error:
        raise named(error) from None
    unused = inapplicable(cfg, values)
    if unused is not None:
        name, chosen, users = unused
        raise named(ConfigError(name, f"used only with {users}", chosen))
    if cfg.cache_dir is None:        # the features' cache: ZOFORGE_CACHE, checked first
        from zoforge.files import check_cache_dir
        check_cache_dir()
    if "branch_lanes" not in values:
        cfg = with_chosen_branch_lanes(cfg)
    result = train(cfg)
    print(json.dumps({k: result[k] for k in ("accuracy_before", "accuracy_after",
                                             "final_loss", "steps_per_s")}))
    print(f"wrote {Path(cfg.out) / 'result.json'} and {Path(cfg.out) / 'training.png'}")
    return 0
