"""Design ``rng``: the PeZO generators for ``zoforge generate rng`` and ``zoforge build``.

``--strategy`` picks the generator; every parameter has a per-strategy default (the
configurations of PeZO's Table 6: on-the-fly 31 x 8 bits, pre-generated 4095 x 12 bits in
8 banks, Gaussian array of 1024 generators).
"""
from __future__ import annotations

import argparse

from zoforge.errors import check_choice
from zoforge.hw.designs import Elaborated, register_design

__all__ = ["RngDesign", "add_rng_arguments", "rng_params", "build_generator", "STRATEGIES",
           "DEFAULTS"]

STRATEGIES = ("onthefly", "pregen", "gaussian")
# Per-strategy defaults of the parameters that several strategies share.
DEFAULTS = {"onthefly": {"n_rng": 31, "bits": 8},
            "pregen": {"bits": 12},
            "gaussian": {"n_rng": 1024, "bits": 16}}


def add_rng_arguments(parser) -> None:
    """The generator parameters (shared by generate, build, cosim and dump)."""
    parser.add_argument("--strategy", default="onthefly",
                        help="generator: onthefly, pregen or gaussian")
    parser.add_argument("--n-rng", type=int, default=None,
                        help="lanes: on-the-fly 2^k-1 in 3..255 (default 31); Gaussian "
                             "1..4096 (default 1024)")
    parser.add_argument("--bits", type=int, default=None,
                        help="LFSR bits b (on-the-fly 4..20, default 8; Gaussian default 16) "
                             "or pool value bits q (pregen 4..32, default 12)")
    parser.add_argument("--pool-size", type=int, default=4095,
                        help="pregen: pool size N, 2^k-1 in 255..65535")
    parser.add_argument("--banks", type=int, default=8,
                        help="pregen: BRAM banks L = values per cycle (1, 2, 4, ..., 64)")
    parser.add_argument("--seed", type=int, default=0, help="pregen: pool seed")
    parser.add_argument("--layout", default="replicated",
                        help="pregen: bank layout, replicated (L rotated copies, no "
                             "crossbar) or striped (one copy, crossbar)")
    parser.add_argument("--length-bits", type=int, default=24,
                        help="pregen: width of the perturbation-length input")
    parser.add_argument("--terms", type=int, default=3,
                        help="gaussian: uniform LFSR values summed per generator (1..16)")
    parser.add_argument("--snapshot", action="store_true",
                        help="add save/restore ports (shadow registers; costs a flip-flop "
                             "and a 2:1 mux per state bit on LFSR generators)")


def rng_params(args: argparse.Namespace) -> tuple[str, dict]:
    """(strategy, golden-model keyword arguments) from parsed arguments."""
    strategy = check_choice("--strategy", args.strategy, STRATEGIES)
    defaults = DEFAULTS[strategy]
    bits = args.bits if args.bits is not None else defaults["bits"]
    if strategy == "pregen":
        return strategy, {"pool_size": args.pool_size, "bits": bits, "banks": args.banks,
                          "seed": args.seed}
    n_rng = args.n_rng if args.n_rng is not None else defaults["n_rng"]
    if strategy == "onthefly":
        return strategy, {"n_rng": n_rng, "bits": bits}
    return strategy, {"n_rng": n_rng, "bits": bits, "terms": args.terms}


def hardware_options(strategy: str, args: argparse.Namespace) -> dict:
    """Elaboration options that exist only in hardware."""
    options = {"snapshot": bool(getattr(args, "snapshot", False))}
    if strategy == "pregen":
        options.update(layout=getattr(args, "layout", "replicated"),
                       length_bits=getattr(args, "length_bits", 24))
    return options


def build_generator(strategy: str, params: dict, options: dict):
    """The Amaranth stream component for one generator configuration."""
    if strategy == "onthefly":
        from zoforge.hw.rng.onthefly import OnTheFlyGenerator
        return OnTheFlyGenerator(**params, **options)
    if strategy == "pregen":
        from zoforge.hw.rng.pregen import PregenGenerator
        return PregenGenerator(**params, **options)
    from zoforge.hw.rng.gaussian import GaussianGenerator
    return GaussianGenerator(**params, **options)


def design_name(strategy: str, params: dict, options: dict) -> str:
    if strategy == "onthefly":
        name = f"rng_onthefly_n{params['n_rng']}_b{params['bits']}"
    elif strategy == "pregen":
        name = (f"rng_pregen_N{params['pool_size']}_q{params['bits']}_L{params['banks']}"
                f"_{options['layout']}")
    else:
        name = f"rng_gaussian_n{params['n_rng']}_b{params['bits']}_k{params['terms']}"
    return name + ("_snapshot" if options["snapshot"] else "")


def memory_files(name: str, strategy: str, top) -> dict[str, str]:
    """Hex initialisation files (one value per line) of the design's memories."""
    def hex_lines(values, bits):
        digits = max(1, -(-bits // 4))
        return "".join(f"{int(v) & ((1 << bits) - 1):0{digits}x}\n" for v in values)

    if strategy == "onthefly" and top.golden.k_max != top.golden.k_min:
        from zoforge.hw.rng.onthefly import lut_memory_init
        entry_bits = (top.golden.k_max - top.golden.k_min).bit_length()
        return {f"{name}_lut.hex": hex_lines(lut_memory_init(top.n_rng, top.bits), entry_bits)}
    if strategy == "pregen":
        golden = top.golden
        return {f"{name}_bank{index}.hex": hex_lines(contents, golden.bits)
                for index, contents in enumerate(golden.bank_contents(top.layout))}
    return {}


def elaborate_rng(strategy: str, params: dict, options: dict) -> Elaborated:
    top = build_generator(strategy, params, options)
    name = design_name(strategy, params, options)
    config = dict(top.golden.config(), hardware=options,
                  ports=_port_summary(strategy, options))
    blocks = {"onthefly": {"core": "LFSR lanes with rotation, lane-0 tracker and scale LUT",
                           "shift": "power-of-two shift of the centred lane values"},
              "gaussian": {"lfsrs": "n*K LFSR registers (the adder trees are in the top)"},
              "pregen": {}}[strategy]
    if strategy == "onthefly" and config["constant_shift"]:
        config["note"] = ("constant LUT: no memory, no tracker; the fixed shift is folded "
                          "into F")
    return Elaborated(top=top, name=name, config=config,
                      memory_files=memory_files(name, strategy, top), blocks=blocks)


def _port_summary(strategy: str, options: dict) -> dict:
    ports = {"out": "stream: payload (lane 0 in the LSBs), valid, ready"}
    if strategy == "pregen":
        ports.update(start="begin a perturbation of `length` values when idle",
                     length="perturbation length d", idle="no perturbation in flight",
                     pointer="current pool pointer")
    if options["snapshot"]:
        ports.update(save="copy the state into the shadow registers",
                     restore="copy the shadow registers back (out.valid low this cycle)")
    return ports


@register_design("rng", help="PeZO perturbation generator (on-the-fly, pre-generated pool, "
                             "or the Gaussian baseline)")
class RngDesign:
    @staticmethod
    def add_arguments(parser) -> None:
        add_rng_arguments(parser)

    @staticmethod
    def elaborate(args: argparse.Namespace) -> Elaborated:
        strategy, params = rng_params(args)
        return elaborate_rng(strategy, params, hardware_options(strategy, args))
