"""The one configuration system: the strict reader of every configuration file
(:func:`zoforge.config.read_table`), strict typing, one-line errors that echo nothing raw,
and the training key (every field that changes a training's result changes its key)."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import ClassVar

import pytest

from zoforge.cli import main
from zoforge.config import (MAX_FILE_BYTES, Config, FloatRange, IntRange, data_hash,
                            load_config, param, read_table)
from zoforge.errors import ConfigError
from zoforge.files import content_key
from zoforge.golden.zo.config import NOT_RESULT, TrainConfig
from zoforge.sweep.spec import read_sweep, train_key


@dataclass(frozen=True)
class Sample(Config):
    kind: ClassVar[str] = "sample"

    count: int = param(1, "a count", IntRange(0, 10))
    scale: float = param(1.0, "a scale", FloatRange(0.0))
    label: str | None = param(None, "a label")


def _refused(path, *texts, reader=read_table) -> str:
    """The one-line message ``reader(path)`` refuses ``path`` with; it names the file."""
    with pytest.raises(ConfigError) as error:
        reader(path)
    message = str(error.value)
    assert "\n" not in message and str(path) in message, message
    for text in texts:
        assert text in message, message
    return message


def _within_seconds(function, seconds: float = 10.0):
    """``function()``'s exception, failing the test if it has not returned in time."""
    outcome = []

    def run():
        try:
            function()
            outcome.append(None)
        except Exception as error:     # what the caller checks
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still running after {seconds} s (blocked on the file?)"
    return outcome[0]


# -- files that are not configuration files --------------------------------------------------

def test_a_fifo_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    error = _within_seconds(lambda: read_table(fifo))
    assert isinstance(error, ConfigError) and "not a regular file" in str(error)


def test_a_fifo_given_to_the_command_line_is_one_line(tmp_path):
    fifo = tmp_path / "sweep.toml"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "zoforge", "sweep", "--config", str(fifo),
                           "--store", str(tmp_path / "store")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("zoforge: error: --config must be a readable TOML file")
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("path", ["/dev/null", "/dev/zero"])
def test_devices_are_refused(path):
    _refused(path, "not a regular file")


def test_a_folder_and_a_missing_file_are_refused(tmp_path):
    _refused(tmp_path, "not a regular file")
    _refused(tmp_path / "nope.json", "No such file")


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"label": "x" * MAX_FILE_BYTES}))
    _refused(path, "at most 1 MiB", f"{path.stat().st_size} bytes")


def test_invalid_utf8_is_refused(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('label = "caf\xe9"\n'.encode("latin-1"))
    _refused(path, "not UTF-8 text (byte 12)")


# -- what the file says ------------------------------------------------------------------

@pytest.mark.parametrize("text", ['{"count": 1, "count": 2}',
                                  '{"outer": {"count": 1, "count": 2}}'])
def test_duplicate_json_keys_are_refused(tmp_path, text):
    path = tmp_path / "dup.json"
    path.write_text(text)
    assert _refused(path).startswith(f"key 'count' in {path} must be given once")


def test_duplicate_toml_keys_are_refused(tmp_path):
    path = tmp_path / "dup.toml"
    path.write_text("count = 1\ncount = 2\n")
    _refused(path, "a readable TOML file")


@pytest.mark.parametrize("name, text", [
    ("arrays.json", "[" * 100_000 + "]" * 100_000),
    ("objects.json", '{"a":' * 100_000 + "1" + "}" * 100_000),
    ("arrays.toml", "a = " + "[" * 100_000 + "]" * 100_000 + "\n"),
])
def test_deep_nesting_is_refused_without_recursion_error(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    _refused(path, "nested too deeply")


@pytest.mark.parametrize("text", ["[1, 2]", '"text"', "3"])
def test_a_top_level_that_is_not_a_table_is_refused(tmp_path, text):
    path = tmp_path / "top.json"
    path.write_text(text)
    assert _refused(path).startswith(f"the top level of {path} must be a table")


@pytest.mark.parametrize("text", ['{"scale": NaN}', '{"scale": Infinity}'])
def test_non_json_numbers_are_refused(tmp_path, text):
    path = tmp_path / "nan.json"
    path.write_text(text)
    _refused(path, "is not a JSON number")


# -- strict types and one-line messages ----------------------------------------------------

def _load(tmp_path, values: dict) -> Sample:
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(values))
    return load_config(path, (Sample,))


@pytest.mark.parametrize("values, start", [
    ({"count": True}, "count"),              # a bool is not an int
    ({"count": 1.0}, "count"),               # nor is a float
    ({"scale": False}, "scale"),
    ({"scale": "1"}, "scale"),
    ({"label": 5}, "label"),
    ({"count": 11}, "count"),
    ({"cuont": 1}, "key 'cuont'"),
])
def test_strict_types_name_the_key_and_the_file(tmp_path, values, start):
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, values)
    message = str(error.value)
    assert message.startswith(f"{start} in {tmp_path / 'sample.json'} must be"), message


def test_an_int_is_a_fine_float_and_none_where_allowed(tmp_path):
    assert _load(tmp_path, {"scale": 2, "label": None}) == Sample(scale=2.0)


def test_an_unknown_key_suggests_the_closest(tmp_path):
    with pytest.raises(ConfigError, match=r"one of count, scale, label; did you mean count\?"):
        _load(tmp_path, {"cuont": 1})


@pytest.mark.parametrize("key, value", [
    ("label\nzoforge: error: forged", 1),
    ("count", "3\nzoforge: error: forged\x1b[2J"),
    ("lab\u2028el", 1),
])
def test_control_characters_are_escaped_in_one_line(tmp_path, key, value):
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, {key: value})
    message = str(error.value)
    assert "\n" not in message and "\x1b" not in message and "\u2028" not in message
    assert "\\n" in message or "\\u2028" in message


def test_the_command_line_escapes_a_forged_line(tmp_path, capsys):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"method": "mezo\nzoforge: error: all good\x1b[0m"}))
    assert main(["train", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err
    assert err.startswith(f"zoforge: error: method in {path} must be a string of printable")


def test_the_sweep_reads_through_the_same_reader(tmp_path):
    path = tmp_path / "SWEEP.toml"
    path.write_bytes(b"[train]\nmodel = \"t\xffny\"\n")
    _refused(path, "not UTF-8 text", reader=read_sweep)


# -- one hash recipe ---------------------------------------------------------------------

def test_the_hash_of_data_is_the_content_key_of_its_canonical_json():
    assert data_hash({"b": 1, "a": [1.5, None]}) == content_key('{"a":[1.5,null],"b":1}')
    assert Sample().stable_hash() == data_hash({"zoforge_config": 1, **Sample().to_dict()})
    assert len(Sample().stable_hash()) == 20


# -- the training key ----------------------------------------------------------------------

_HW = dict(trainable="hw-mlp", method="hw-prge", perturbation="pezo-onthefly", batch=8,
           hidden=8)
#: field -> (the fields that make it apply, another valid value)
CHANGES = {
    "method": ({}, "prge"), "perturbation": ({}, "rademacher"), "trainable": ({}, "lora-fa"),
    "queries": ({}, 2), "batch": ({}, 8), "lr": ({}, 2e-3), "eps": ({}, 2e-2),
    "steps": ({}, 5), "seed": ({}, 1),
    "n_rng": ({"perturbation": "pezo-onthefly"}, 15),
    "bits": ({"perturbation": "pezo-onthefly"}, 9),
    "terms": ({"perturbation": "gaussian-hw"}, 2),
    "pool_size": ({"perturbation": "pezo-pregen"}, 1023),
    "banks": ({"perturbation": "pezo-pregen"}, 4),
    "pool_seed": ({"perturbation": "pezo-pregen"}, 7),
    "chunk": ({"perturbation": "uniform-scaled"}, 4),
    "inner": ({"method": "prge"}, False), "outer": ({"method": "prge"}, False),
    "dual": ({"method": "prge"}, True),
    "hessian_smooth": ({"method": "hizoo"}, 0.5), "d_min": ({"method": "pefoo"}, 0.2),
    "d_max": ({"method": "pefoo"}, 100.0), "layer_steps": ({"method": "pefoo-l"}, 3),
    "model": ({}, "another/model"), "num_layers": ({}, 1),
    "lora_layers": ({"trainable": "lora-fa"}, 2), "rank": ({"trainable": "lora-fa"}, 4),
    "alpha": ({"trainable": "lora-fa"}, 8.0), "head_init": ({}, "prompt"),
    "hw_arith": ({}, True),
    "hidden": (_HW, 16), "rows": (_HW, 8), "cols": (_HW, 8),
    "branch_lanes": ({**_HW, "hidden": 0}, 2),
    "data": ({}, "words.csv"), "split_seed": ({}, 1), "n_train": ({}, 300),
    "n_val": ({}, 100), "n_test": ({}, 100), "max_len": ({}, 32),
}
NOT_CHANGING = {"out": "elsewhere", "eval_every": 7, "checkpoint_every": 9,
                "cache_dir": "cache", "progress": False, "threads": 2}
BASE = TrainConfig(model="tiny", n_train=200)


def test_the_lists_cover_every_field():
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert set(CHANGES) == fields - set(NOT_RESULT)
    assert set(NOT_CHANGING) == set(NOT_RESULT)


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_every_result_field_changes_the_training_key(field):
    context, value = CHANGES[field]
    base = dataclasses.replace(BASE, **context)
    changed = dataclasses.replace(base, **{field: value})
    assert getattr(changed, field) != getattr(base, field)
    assert train_key(changed) != train_key(base)


@pytest.mark.parametrize("field", sorted(NOT_CHANGING))
def test_bookkeeping_fields_do_not_change_the_training_key(field):
    changed = dataclasses.replace(BASE, **{field: NOT_CHANGING[field]})
    assert changed != BASE and train_key(changed) == train_key(BASE)


def test_a_train_config_is_frozen_and_replace_validates():
    with pytest.raises(dataclasses.FrozenInstanceError):
        BASE.steps = 3
    with pytest.raises(ConfigError, match="^steps must be an integer >= 0"):
        dataclasses.replace(BASE, steps=-1)


# -- the command line shows a field as its flag (one place) ----------------------------------

@pytest.mark.parametrize("argv, parameter, shown", [
    (["train"], "n_rng", "--n-rng"),
    (["train"], "inner", "--inner"),                 # --inner / --no-inner
    (["train"], "n_rng in cfg.json", "n_rng in cfg.json"),
    (["rng", "dump"], "n_rng", "--n-rng"),            # a sub-command of a group
    (["sweep"], "steps", "steps"),                   # not one of the command's flags
    (["train"], "ZOFORGE_CACHE", "ZOFORGE_CACHE"),
])
def test_the_command_line_maps_a_field_to_its_flag(argv, parameter, shown):
    from zoforge.cli import build_parser
    from zoforge.cli._flags import as_flag
    parser = build_parser()
    error = as_flag(ConfigError(parameter, "valid", 8), parser, parser.parse_args(argv))
    assert str(error) == f"{shown} must be valid (got 8)"
