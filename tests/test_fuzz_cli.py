"""A fuzzer of the command line's contract (issue 22): malformed configuration files of every
kind and hostile argument vectors for every command are refused with exit code 2 and
exactly one printable line ``zoforge: error: ...`` on stderr, nothing on stdout, no
traceback, and nothing written (the current folder stays empty, no output folder appears).

Hypothesis generates the inputs:

* configuration files for every command that reads one (``--config``: training, designs,
  the generator dump, co-simulation, builds, fine-tuning, sweeps), as JSON or TOML: known
  and unknown keys, values of every wrong kind (booleans, huge integers, non-finite
  numbers, strings with control characters, nested tables and lists), too deep nesting,
  duplicate keys, ``zoforge_config = true``, truncated text, random bytes and files over the
  size limit. Each file
  carries at least one *poison* (an input that must be refused), so no valid file starts
  real work;
* argument vectors: a command's flags with hostile values (empty, negative, huge,
  non-finite, control characters, devices and folders where files are expected), ending
  with a poison flag that command refuses before any work.

The default run draws a few dozen examples of each (a few seconds); ``-m slow`` draws many
more.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zoforge.cli import build_parser, main
from zoforge.inputs import MAX_DEPTH, MAX_FILE_BYTES

FEW, MANY = 40, 400

# -- running one command -------------------------------------------------------------------


def _run(argv: list[str], folder: Path) -> tuple[int, str, str]:
    """``zoforge ARGV`` in process, in ``folder`` as the current folder."""
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exit_:       # argparse's own errors
                code = exit_.code
    finally:
        os.chdir(cwd)
    return code, out.getvalue(), err.getvalue()


def _check_contract(argv: list[str], code, out: str, err: str, cwd: Path) -> None:
    shown = f"argv {argv!r}: exit {code}, stderr {err!r}"
    assert "Traceback" not in out + err, shown
    assert code == 2, shown
    assert out == "", f"{shown}, stdout {out!r}"
    lines = err.split("\n")
    assert len(lines) == 2 and lines[1] == "", shown
    assert lines[0].startswith("zoforge: error: ") and lines[0].isprintable(), shown
    assert not list(cwd.iterdir()), f"{shown}: wrote {list(cwd.iterdir())}"


def test_the_contract_check_catches_what_it_must(tmp_path):
    for code, err in [(2, "zoforge: error: a\nzoforge: error: forged\n"),
                      (1, "zoforge: error: a\n"), (2, "zoforge: error: \x1b[2Ja\n"),
                      (2, "Traceback (most recent call last):\n")]:
        with pytest.raises(AssertionError):
            _check_contract([], code, "", err, tmp_path)
    (tmp_path / "written").write_text("")
    with pytest.raises(AssertionError):
        _check_contract([], 2, "", "zoforge: error: a\n", tmp_path)


# -- configuration files -------------------------------------------------------------------

#: command -> (argv before the file, argv after it, the fields its file may set, syntaxes)
CONFIG_COMMANDS = {
    "train": (["train", "--config"], ["--out", "{out}"], "train", ("json", "toml")),
    "generate": (["generate", "--config"], ["--out", "{out}"], "design", ("json", "toml")),
    "dump": (["rng", "dump", "--config"], [], "design", ("json", "toml")),
    "cosim": (["cosim", "rng", "--config"], [], "design", ("json", "toml")),
    "build": (["build", "--config"], ["--out", "{out}"], "design", ("json", "toml")),
    "finetune": (["finetune", "--config"], ["--out", "{out}"], "finetune", ("json", "toml")),
    "sweep": (["sweep", "--config"], ["--store", "{out}"], "sweep", ("toml",)),
}


def _fields(kind: str) -> list[str]:
    if kind == "train":
        from zoforge.golden.zo.config import TrainConfig
        return [f for f in TrainConfig.__dataclass_fields__]
    if kind == "finetune":
        from zoforge.golden.finetune.config import FinetuneConfig
        return [f for f in FinetuneConfig.__dataclass_fields__]
    if kind == "sweep":
        return ["name", "description", "train", "grid", "points", "report", "hardware",
                "search", "paper"]
    from zoforge.hw.designs import designs       # every registered design's fields
    names = {"kind", "strategy", "zoforge_config"}
    for design in designs().values():
        for config in design.configs:
            names |= set(config.__dataclass_fields__) | ({config.tag} - {None})
    return sorted(names)


CONTROL = st.sampled_from(["\n", "\r", "\x1b[2J", "\x07", "\u2028", "\t", "\x85", "\x1b]0;x\x07",
                           "\u202e"])
SCALARS = st.one_of(
    st.booleans(), st.integers(-2**80, 2**80), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.builds(lambda a, c, b: a + c + b, st.text(max_size=4), CONTROL,
                                    st.text(max_size=4)))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)


def _deep(depth: int):
    value: object = 1
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def _poisons(fields: list[str]):
    """Strategies of one (key, value) that must be refused, or a raw-text poison."""
    field = st.sampled_from(fields)
    return st.one_of(
        st.tuples(st.just("zz_not_a_field"), VALUES),                       # unknown key
        st.tuples(st.just("zoforge_config"), st.sampled_from([True, 2, 1.0, "1", 0])),
        st.tuples(field, st.builds(lambda c: "mezo" + c + "zoforge: error: fine", CONTROL)),
        st.tuples(field, st.integers(MAX_DEPTH + 1, 60).map(_deep)),         # too deep
        st.tuples(st.builds(lambda c: "key" + c, CONTROL), st.integers()),  # key, control
        st.sampled_from(["duplicate", "truncated", "bytes", "not-a-table", "oversize"]))


@st.composite
def config_files(draw, command: str) -> tuple[str, bytes]:
    """(suffix, file bytes) of a malformed configuration for ``command``."""
    _, _, kind, syntaxes = CONFIG_COMMANDS[command]
    fields = _fields(kind)
    syntax = draw(st.sampled_from(syntaxes))
    values = draw(st.dictionaries(st.sampled_from(fields), VALUES, max_size=4))
    if kind == "design" and draw(st.booleans()):      # a real design, so its fields are read
        values["kind"] = draw(st.sampled_from(["rng", "engine", "zo-layer"]))
    poison = draw(_poisons(fields))
    raw = None
    if isinstance(poison, tuple):
        values[poison[0]] = poison[1]
    elif poison == "bytes":
        raw = draw(st.binary(min_size=1, max_size=200))
    elif poison == "not-a-table":
        raw = b"[1, 2]" if syntax == "json" else b"= 1\n"
    elif poison == "oversize":                 # a valid-looking file over the size limit
        values["zz_padding"] = "x" * MAX_FILE_BYTES
    text = _serialise(values, syntax)
    if poison == "duplicate":
        key = draw(st.sampled_from(fields))
        text = (f'{{"{key}": 1, "{key}": 2, ' + text[1:] if syntax == "json"
                else f"{key} = 1\n{key} = 2\n{text}")
    elif poison == "truncated":
        text = text[:draw(st.integers(0, max(0, len(text) - 1)))] + (
            "{" if syntax == "json" else "[[")
    return "." + syntax, raw if raw is not None else text.encode("utf-8", "surrogatepass")


def _serialise(values: dict, syntax: str) -> str:
    if syntax == "json":
        return json.dumps(values)
    try:
        return tomli_w.dumps(_tomlable(values))
    except (TypeError, ValueError):       # what TOML cannot hold: JSON text, still refused
        return json.dumps(values)


def _tomlable(value):
    """``value`` without what TOML has no form for (null, mixed nesting is fine)."""
    if isinstance(value, dict):
        return {k: _tomlable(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_tomlable(v) for v in value if v is not None]
    return value


def _config_case(command: str, suffix: str, data: bytes) -> None:
    before, after, _, _ = CONFIG_COMMANDS[command]
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        cwd, out = folder / "cwd", folder / "never-written"
        cwd.mkdir()
        path = folder / f"config{suffix}"
        path.write_bytes(data)
        argv = before + [str(path)] + [a.format(out=out) for a in after]
        code, stdout, stderr = _run(argv, cwd)
        _check_contract(argv, code, stdout, stderr, cwd)
        assert not out.exists(), f"{argv}: created {out}"


@st.composite
def config_cases(draw):
    command = draw(st.sampled_from(sorted(CONFIG_COMMANDS)))
    return (command, *draw(config_files(command)))


_SETTINGS = dict(deadline=None, database=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(max_examples=FEW, **_SETTINGS)
@given(config_cases())
def test_malformed_configuration_files_are_one_line(case):
    _config_case(*case)


@pytest.mark.slow
@settings(max_examples=MANY, **{**_SETTINGS, "derandomize": False})
@given(config_cases())
def test_malformed_configuration_files_are_one_line_many(case):
    _config_case(*case)


# -- argument vectors ----------------------------------------------------------------------

#: command path -> the poison that ends its argument vector (refused before any work)
POISON = {
    ("build",): ["--out", ""],
    ("cosim", "accelerator"): ["--seed", "-1"],
    ("cosim", "engine"): ["--seed", "-5"],
    ("cosim", "rng"): ["--stimulus-seed", "-1"],
    ("cosim", "softmax"): ["--seed", "-1"],
    ("cosim", "zo-layer"): ["--seed", "-1"],
    ("demo",): ["--out", ""],
    ("finetune",): ["--blocks", "0"],
    ("generate", "accelerator"): ["--out", ""],
    ("generate", "engine"): ["--out", ""],
    ("generate", "link"): ["--out", ""],
    ("generate", "rng"): ["--out", ""],
    ("generate", "softmax"): ["--out", ""],
    ("generate", "zo-layer"): ["--out", ""],
    ("rng", "dump"): ["--start", "-1"],
    ("sweep",): ["--store", ""],
    ("toolchain",): ["--no-such-option"],
    ("train",): ["--out", ""],
}
#: Flags that end a command early with success (help, version, printing the sweep).
QUIET_EXITS = {"-h", "--help", "--version", "--print-config"}


def _command_flags() -> dict[tuple[str, ...], list[tuple[str, bool]]]:
    """Each command path -> its flags and whether each takes a value."""
    found: dict[tuple[str, ...], list[tuple[str, bool]]] = {}

    def walk(parser, path):
        if hasattr(parser, "complete"):
            parser.complete()
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs:
            for name, sub in subs[0].choices.items():
                walk(sub, path + (name,))
            return
        found[path] = [(a.option_strings[-1], a.nargs != 0) for a in parser._actions
                       if a.option_strings and not set(a.option_strings) & QUIET_EXITS]
    walk(build_parser(), ())
    return found


FLAGS = _command_flags()

HOSTILE = st.one_of(
    st.sampled_from(["", " ", "0", "-1", "nan", "inf", "-inf", "1e309", str(10**30), "abc",
                     "/dev/zero", "/", "/proc/zoforge", "a\nzoforge: error: forged",
                     "\x1b[2J", "\u2028", "x=1", "model=tiny", "bits=", "1,2,,3"]),
    st.integers(-2**70, 2**70).map(str),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            max_size=16).filter(lambda v: not v.startswith("-")))


@st.composite
def argument_vectors(draw) -> list[str]:
    path = draw(st.sampled_from(sorted(FLAGS)))
    argv = list(path)
    for flag, takes_value in draw(st.lists(st.sampled_from(FLAGS[path]), max_size=5)):
        argv.append(flag)
        if takes_value:
            argv.append(draw(HOSTILE))
    return argv + POISON[path]


def _argv_case(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        code, out, err = _run(argv, cwd)
        _check_contract(argv, code, out, err, cwd)


def test_every_command_has_a_poison():
    assert set(FLAGS) == set(POISON)


@settings(max_examples=FEW, **_SETTINGS)
@given(argument_vectors())
def test_hostile_argument_vectors_are_one_line(argv):
    _argv_case(argv)


@pytest.mark.slow
@settings(max_examples=MANY, **{**_SETTINGS, "derandomize": False})
@given(argument_vectors())
def test_hostile_argument_vectors_are_one_line_many(argv):
    _argv_case(argv)
