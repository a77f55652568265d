# amaranth: UnusedElaboratable=no
"""Design ``rng``: the PeZO generators, elaborated from their configurations (registered in
:data:`zoforge.hw.designs.BUILTIN`).

The configuration types (:class:`~zoforge.golden.rng.OnTheFlyConfig`,
:class:`~zoforge.golden.rng.PregenConfig`, :class:`~zoforge.golden.rng.GaussianConfig`) live
beside the golden models; their defaults are the configurations of PeZO's Table 6
(on-the-fly 31 x 8 bits, pre-generated 4095 x 12 bits in 8 banks, Gaussian array of 1024);
:class:`~zoforge.golden.rng.MaskedConfig` (issue 25) defaults to the same 31 x 8 lanes.

First line: :mod:`zoforge.hw.verilog_cache`'s hits leave the top unelaborated.
"""
from __future__ import annotations

from zoforge.golden.rng import (GaussianConfig, GeneratorConfig, MaskedConfig, OnTheFlyConfig,
                                PregenConfig)
from zoforge.hw.designs import Elaborated, get_design
from zoforge.hw.rng.gaussian import GaussianGenerator
from zoforge.hw.rng.masked import MaskedGenerator
from zoforge.hw.rng.onthefly import OnTheFlyGenerator, lut_memory_init
from zoforge.hw.rng.pregen import PregenGenerator

__all__ = ["generator_for", "design_name", "elaborate_generator", "DESIGN"]

_HARDWARE = {OnTheFlyConfig: OnTheFlyGenerator, PregenConfig: PregenGenerator,
             GaussianConfig: GaussianGenerator, MaskedConfig: MaskedGenerator}

_BLOCKS = {"onthefly": {"core": "LFSR lanes with rotation, lane-0 tracker and scale LUT",
                        "shift": "power-of-two shift of the centred lane values"},
           "gaussian": {"lfsrs": "n*K LFSR registers (the adder trees are in the top)"},
           "pregen": {},
           "masked": {"core": "LFSR lanes with rotation, mask LFSR and output XOR",
                      "shift": "centring (MSB inversion) of the masked lane values"}}


def generator_for(config: GeneratorConfig):
    """The Amaranth stream component of one generator configuration."""
    return _HARDWARE[type(config)](config)


def design_name(config: GeneratorConfig) -> str:
    """The Verilog top name: the strategy and its distinguishing parameters."""
    if isinstance(config, OnTheFlyConfig):
        name = f"rng_onthefly_n{config.n_rng}_b{config.bits}"
    elif isinstance(config, PregenConfig):
        name = (f"rng_pregen_N{config.pool_size}_q{config.bits}_L{config.banks}"
                f"_{config.layout}" + (f"_s{config.pool_seed}" if config.pool_seed else ""))
    elif isinstance(config, MaskedConfig):
        name = f"rng_masked_n{config.n_rng}_b{config.bits}"
    else:
        name = f"rng_gaussian_n{config.n_rng}_b{config.bits}_k{config.terms}"
    return name + ("_snapshot" if config.snapshot else "")


def _hex_lines(values, bits: int) -> str:
    digits = max(1, -(-bits // 4))
    return "".join(f"{int(v) & ((1 << bits) - 1):0{digits}x}\n" for v in values)


def memory_files(name: str, config: GeneratorConfig, golden) -> dict[str, str]:
    """Hex initialisation files (one value per line) of the design's memories."""
    if isinstance(config, OnTheFlyConfig) and golden.k_max != golden.k_min:
        entry_bits = (golden.k_max - golden.k_min).bit_length()
        return {f"{name}_lut.hex": _hex_lines(lut_memory_init(config.n_rng, config.bits),
                                              entry_bits)}
    if isinstance(config, PregenConfig):
        return {f"{name}_bank{index}.hex": _hex_lines(contents, golden.bits)
                for index, contents in enumerate(golden.bank_contents(config.layout))}
    return {}


def _ports(config: GeneratorConfig) -> dict:
    ports = {"out": "stream: payload (lane 0 in the LSBs), valid, ready"}
    if isinstance(config, PregenConfig):
        ports.update(start="begin a perturbation of `length` values when idle",
                     length="perturbation length d", idle="no perturbation in flight",
                     pointer="current pool pointer")
    if config.snapshot:
        ports.update(save="copy the state into the shadow registers",
                     restore="copy the shadow registers back (out.valid low this cycle)",
                     offered="out.valid but for a restore cycle (for a consumer that takes "
                             "no transfer then)")
    return ports


def elaborate_generator(config: GeneratorConfig) -> Elaborated:
    top = generator_for(config)
    name = design_name(config)
    facts = dict(top.golden.config(), ports=_ports(config))
    if isinstance(config, OnTheFlyConfig) and facts["constant_shift"]:
        facts["note"] = ("constant LUT: no memory, no tracker; the fixed shift is folded "
                         "into F")
    return Elaborated(top=top, name=name, config=config, facts=facts,
                      memory_files=memory_files(name, config, top.golden),
                      blocks=dict(_BLOCKS[config.variant]))


#: The registered design (:data:`zoforge.hw.designs.BUILTIN`).
DESIGN = get_design("rng")
