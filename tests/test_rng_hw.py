"""PeZO generator hardware: lint, structure (flip-flops, memories) and quick elaboration."""
import re
import time

import pytest

from zoforge.golden.rng import GaussianConfig, OnTheFlyConfig, PregenConfig
from zoforge.hw.designs import get_design
from zoforge.hw.export import to_verilog
from zoforge.sim.lint import lint_verilog


def elaborate(config):
    return get_design("rng").elaborate(config)


def flip_flop_bits(verilog: str, module: str) -> int:
    """Bits of the registers with a power-up value (Amaranth's flip-flops) in ``module``."""
    body = verilog.split(f"module {module}", 1)[1].split("endmodule", 1)[0]
    total = 0
    for match in re.finditer(r"^\s*reg (?:\[(\d+):0\] )?(\S+) = ", body, re.MULTILINE):
        total += int(match.group(1) or 0) + 1
    return total


@pytest.mark.parametrize("config", [
    OnTheFlyConfig(n_rng=31, bits=8),
    OnTheFlyConfig(n_rng=31, bits=14),
    OnTheFlyConfig(n_rng=3, bits=5, snapshot=True),          # 2-bit shift amounts
    OnTheFlyConfig(n_rng=7, bits=6, snapshot=True),
    PregenConfig(pool_size=255, banks=4, layout="striped", snapshot=True),
    PregenConfig(pool_size=511, banks=8),
    PregenConfig(pool_size=255, banks=1, layout="striped"),
    GaussianConfig(n_rng=8, bits=8, terms=4, snapshot=True),
    GaussianConfig(n_rng=3, bits=6, terms=1),
], ids=lambda config: config.canonical_json())
def test_generated_verilog_is_lint_clean(config):
    design = elaborate(config)
    result = lint_verilog(to_verilog(design.top, design.name), design.name)
    assert result.clean, result.messages


@pytest.mark.parametrize("bits, memory_bits", [(8, 0), (14, 14)])
def test_onthefly_table6_core_flip_flops_and_lut(bits, memory_bits):
    design = elaborate(OnTheFlyConfig(n_rng=31, bits=bits))
    verilog = to_verilog(design.top, design.name)
    core = flip_flop_bits(verilog, f"\\{design.name}.core ")
    # lanes n*b, plus (non-constant LUT) the b-bit tracker; the priming flag is out.valid,
    # in the top's stream control
    assert core == 31 * bits + memory_bits
    assert core <= 1.05 * 31 * bits + 1
    assert set(design.blocks) == {"core", "shift"}
    if bits == 8:
        assert " lut [" not in verilog and design.facts["constant_shift"]
    else:
        assert re.search(r"reg \[0:0\] lut \[16383:0\]", verilog)   # 1-bit entries


def test_snapshot_is_optional_and_doubles_the_state():
    plain = elaborate(OnTheFlyConfig(n_rng=15, bits=6))
    snap = elaborate(OnTheFlyConfig(n_rng=15, bits=6, snapshot=True))
    plain_ff = flip_flop_bits(to_verilog(plain.top, plain.name), f"\\{plain.name}.core ")
    snap_ff = flip_flop_bits(to_verilog(snap.top, snap.name), f"\\{snap.name}.core ")
    assert plain_ff == 15 * 6 and snap_ff == 2 * 15 * 6
    assert "save" not in {p for p in plain.facts["ports"]}
    assert {"save", "restore"} <= set(snap.facts["ports"])


def test_pregen_table6_elaborates_quickly_with_eight_bram_banks():
    started = time.perf_counter()
    design = elaborate(PregenConfig())
    verilog = to_verilog(design.top, design.name)
    assert time.perf_counter() - started < 60
    assert len(re.findall(r"reg \[11:0\] bank\d \[4094:0\]", verilog)) == 8
    assert len(design.memory_files) == 8
    assert design.facts["W"] == 12 and design.config.pool_size == 4095


@pytest.mark.slow
def test_gaussian_table6_elaborates():
    design = elaborate(GaussianConfig())
    verilog = to_verilog(design.top, design.name)
    assert flip_flop_bits(verilog, f"\\{design.name}.lfsrs ") == 1024 * 3 * 16
