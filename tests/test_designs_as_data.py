"""Designs as data: configurations round-trip, hash stably, read strictly, and drive every
command; a design registered here appears in generate, cosim and build; the architecture
document's example runs as it stands."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from hypothesis import given, settings, strategies as st

from zoforge.cli import main
from zoforge.config import (Config, FloatRange, IntRange, Mersenne, OneOf, config_from_dict,
                            dump_config, load_config, param)
from zoforge.errors import ConfigError
from zoforge.golden.rng import GENERATOR_CONFIGS, OnTheFlyConfig, PregenConfig
from zoforge.hw.designs import Design, Elaborated, designs, registered_designs
from zoforge.hw.engine.config import EngineConfig
from zoforge.sim.engine_cosim import EngineCosimOptions
from zoforge.sim.rng_cosim import RngCosimOptions

ROOT = Path(__file__).resolve().parent.parent
ALL_TYPES = (*GENERATOR_CONFIGS.values(), EngineConfig, RngCosimOptions, EngineCosimOptions)


# -- configurations -----------------------------------------------------------------------

def _value(check, kind):
    """A hypothesis strategy for one field's allowed values."""
    if kind is bool:
        return st.booleans()
    if isinstance(check, OneOf):
        return st.sampled_from(check.choices)
    if isinstance(check, Mersenne):
        return st.sampled_from([2 ** k - 1 for k in range(1, 64)
                                if check.low <= 2 ** k - 1 <= check.high])
    if isinstance(check, IntRange):
        return st.integers(check.low, check.high if check.high is not None else 2 ** 40)
    if isinstance(check, FloatRange):
        return st.floats(check.low, min(check.high, 1e6), exclude_min=check.low_open,
                         exclude_max=check.high_open, allow_nan=False)
    return st.text(max_size=5)


@st.composite
def configs(draw):
    config_type = draw(st.sampled_from(ALL_TYPES))
    values = {field.name: draw(_value(field.metadata.get("check"), kind))
              for field, kind in config_type.field_types().items()}
    try:
        return config_type(**values)
    except ConfigError:                   # a cross-field rule: fall back to the defaults
        return config_type()


@settings(max_examples=150, deadline=None)
@given(configs(), st.sampled_from([".toml", ".json"]))
def test_configurations_round_trip_exactly_through_files(tmp_path_factory, config, suffix):
    path = tmp_path_factory.mktemp("cfg") / f"c{suffix}"
    dump_config(config, path)
    again = load_config(path, ALL_TYPES)
    assert again == config and type(again) is type(config)
    assert again.stable_hash() == config.stable_hash()
    assert config_from_dict(json.loads(json.dumps(config.to_dict())), ALL_TYPES) == config


def test_stable_hash_is_the_same_in_another_process_and_differs_by_value():
    config = PregenConfig(pool_size=1023, bits=10, layout="striped")
    code = ("from zoforge.golden.rng import PregenConfig; "
            "print(PregenConfig(pool_size=1023, bits=10, layout='striped').stable_hash())")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip()
    assert other == config.stable_hash()
    hashes = {c.stable_hash() for c in (config, config.replace(bits=11), PregenConfig(),
                                         OnTheFlyConfig(), OnTheFlyConfig(snapshot=True))}
    assert len(hashes) == 5


@pytest.mark.parametrize("values, key", [
    ({"kind": "rng", "strategy": "onthefly", "n_rng": 8}, "n_rng"),
    ({"kind": "rng", "strategy": "onthefly", "bits": 21}, "bits"),
    ({"kind": "rng", "strategy": "onthefly", "n_rng": 63, "bits": 6}, "bits"),   # 2^b-1 < 2n
    ({"kind": "rng", "strategy": "onthefly", "snapshot": "no"}, "snapshot"),     # strict bool
    ({"kind": "rng", "strategy": "onthefly", "bits": 8.0}, "bits"),              # strict int
    ({"kind": "rng", "strategy": "onthefly", "pool_size": 255}, "key 'pool_size'"),
    ({"kind": "rng", "strategy": "lfsr"}, "strategy"),
    ({"kind": "rgn"}, "kind"),
    ({"kind": "engine", "rows": 4, "max_m": 2}, "max_m"),
    ({"kind": "engine", "zoforge_config": 99}, "zoforge_config"),
])
def test_bad_values_are_one_line_errors_naming_the_key_and_file(tmp_path, values, key):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(values))
    with pytest.raises(ConfigError) as info:
        load_config(path, ALL_TYPES)
    message = str(info.value)
    assert message.startswith(key) and str(path) in message and "\n" not in message


def test_flags_override_a_config_file_and_errors_say_which_one(tmp_path, capsys):
    path = tmp_path / "design.toml"
    dump_config(OnTheFlyConfig(n_rng=7, bits=6), path)
    out = tmp_path / "out"
    assert main(["generate", "rng", "--config", str(path), "--bits", "9", "--out",
                 str(out)]) == 0
    assert load_config(out / "design.toml", ALL_TYPES) == OnTheFlyConfig(n_rng=7, bits=9)
    assert main(["generate", "rng", "--config", str(path), "--bits", "3", "--out",
                 str(out)]) == 2
    assert capsys.readouterr().err.startswith("zoforge: error: --bits must be")
    path.write_text(path.read_text().replace("n_rng = 7", "n_rng = 6"))
    assert main(["generate", "rng", "--config", str(path), "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"zoforge: error: n_rng in {path} must be")


def test_a_flag_of_another_strategy_is_rejected(capsys):
    assert main(["generate", "rng", "--strategy", "onthefly", "--pool-size", "255",
                 "--out", "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zoforge: error: --pool-size must be used only with --strategy "
                          "pregen") and "\n" not in err.strip()


@pytest.mark.parametrize("argv", [
    ["rng", "--strategy", "onthefly", "--n-rng", "15", "--bits", "11", "--snapshot"],
    ["rng", "--strategy", "pregen", "--pool-size", "511", "--banks", "4", "--layout",
     "striped", "--pool-seed", "3"],
    ["rng", "--strategy", "gaussian", "--n-rng", "5", "--bits", "9", "--terms", "2"],
    ["engine", "--rows", "2", "--cols", "3", "--max-k", "16"],
])
def test_a_saved_configuration_reproduces_identical_files(tmp_path, argv, capsys):
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["generate", *argv, "--out", str(first)]) == 0
    assert main(["generate", "--config", str(first / "design.toml"), "--out",
                 str(second)]) == 0
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    summary = json.loads(next(first.glob("*.json")).read_text())
    config = load_config(first / "design.toml", ALL_TYPES)
    assert summary["config_hash"] == config.stable_hash()


def test_generate_config_alone_writes_beside_the_file(tmp_path, capsys):
    assert main(["generate", "rng", "--n-rng", "3", "--bits", "4", "--out",
                 str(tmp_path)]) == 0
    verilog = next(tmp_path.glob("*.v"))
    before = verilog.read_bytes()
    verilog.unlink()
    assert main(["generate", "--config", str(tmp_path / "design.toml")]) == 0
    assert verilog.read_bytes() == before


# -- a design registered here -------------------------------------------------------------

class Counter(wiring.Component):
    def __init__(self, width):
        super().__init__({"en": In(1), "count": Out(width)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.count.eq(self.count + 1)
        return m


@dataclass(frozen=True)
class CounterConfig(Config):
    kind: ClassVar[str] = "test-counter"
    width: int = param(4, "counter width", IntRange(1, 32))


@dataclass(frozen=True)
class CounterRun(Config):
    kind: ClassVar[str] = "cosim-test-counter"
    steps: int = param(10, "enabled cycles", IntRange(1, 1000))


def _elaborate_counter(config):
    return Elaborated(top=Counter(config.width), name=f"counter_{config.width}",
                      config=config, blocks={})


def _cosim_counter(config, run):
    # a real run would simulate; the golden model of a counter is arithmetic
    return {"bit_exact": True, "final": run.steps % (1 << config.width)}


COUNTER = Design("test-counter", "test-only counter (tests/test_designs_as_data.py)",
                       configs=(CounterConfig,), elaborate=_elaborate_counter,
                       cosim=_cosim_counter, cosim_options=CounterRun,
                       cosim_help="test-only counter run")


@pytest.fixture(autouse=True, scope="module")
def _test_designs():
    """This module's test-only designs, registered while its tests run (never leaking
    into another module's view of the commands)."""
    with registered_designs(COUNTER):
        yield


def test_a_registered_design_appears_in_every_command(tmp_path, capsys):
    for argv in (["generate", "--help"], ["cosim", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        assert "test-counter" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["build", "--design", "test-counter", "--help"])
    assert "--width" in capsys.readouterr().out
    assert main(["generate", "test-counter", "--width", "6", "--out", str(tmp_path)]) == 0
    assert "module counter_6" in (tmp_path / "counter_6.v").read_text()
    capsys.readouterr()
    assert main(["cosim", "test-counter", "--width", "40"]) == 2
    assert "--width must be an integer with 1 <= value <= 32" in capsys.readouterr().err


def test_a_registered_designs_cosim_gets_its_typed_options(capsys):
    assert main(["cosim", "test-counter", "--width", "3", "--steps", "11"]) == 0
    assert json.loads(capsys.readouterr().out) == {"bit_exact": True, "final": 3}


def test_every_registered_design_round_trips_its_default_configuration(tmp_path):
    for name, design in designs().items():
        config = design.default_config()
        path = dump_config(config, tmp_path / f"{name}.toml")
        assert design.load_config(path) == config


def test_build_takes_a_saved_configuration(tmp_path, capsys):
    path = dump_config(CounterConfig(width=5), tmp_path / "design.toml")
    assert main(["build", "--config", str(path), "--out", str(tmp_path / "build"),
                 "--no-power", "--quiet"]) == 0
    report = json.loads((tmp_path / "build" / "report.json").read_text())
    assert report["design"] == "counter_5" and report["config"]["width"] == 5
    assert report["config"]["config_hash"] == CounterConfig(width=5).stable_hash()
    assert report["resources"]["total"]["FF"] == 5
