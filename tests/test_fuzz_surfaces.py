"""The fuzzer on the new surfaces of issue 34 (the store's rows: ``test_store_rows.py``):

* **model folders crafted from the shipped MiniLM**: a size key of config.json given a value
  no size may have, the weights truncated or a tensor's dtype changed in the header, the
  tokenizer removed, a file replaced by a FIFO, a folder or a dangling link; each through
  the one guarded loader (:func:`zoforge.golden.model_folder.load_folder`): a one-line
  ``ConfigError`` naming ``model``, within a bounded time (``SIGALRM``: a FIFO must not
  hang). Unchanged files are links to the shipped ones (90 MB of weights are never copied);
* **output targets of every file type** for every command's output flag (``finetune
  --json`` and ``--out``, ``generate --out``, ``sweep --store``): a FIFO, a socket, a link,
  a dangling link, ``/dev/null``, a regular file where a folder is expected and a name past
  the file system's limit are exit 2 with one line naming the flag, no traceback, and the
  planted thing left as it was.

Every generated case is a poison (it must be refused). A small budget by default, a larger
one under ``-m slow``.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hang_guard import deadline
from planted_files import plant
from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.golden.model_folder import SIZE_KEYS, load_folder
from zoforge.golden.models import default_model_path

FEW, MANY = 8, 200
BOUND_S = 30
_SETTINGS = dict(deadline=None, database=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow,
                                        HealthCheck.function_scoped_fixture])
SHIPPED = default_model_path()
#: Values no size of a model may have (sizes are integers >= 1 within the bounds).
NOT_SIZES = (0, -1, 1.5, "8", None, True, [], {}, 10**12)


def _header(path) -> tuple[int, dict]:
    with open(path, "rb") as file:
        (size,) = struct.unpack("<Q", file.read(8))
        return size, json.loads(file.read(size))


def crafted(folder, damage: tuple) -> None:
    """The shipped folder at ``folder`` (each file a link to the shipped one), then
    ``damage`` done to it."""
    folder.mkdir()
    for name in os.listdir(SHIPPED):
        os.symlink(SHIPPED / name, folder / name)
    what, *args = damage
    weights = folder / "model.safetensors"
    if what == "config":
        key, value = args
        config = json.loads((SHIPPED / "config.json").read_text())
        config[key] = value
        (folder / "config.json").unlink()
        (folder / "config.json").write_text(json.dumps(config))
    elif what in ("truncate", "dtype"):
        size, header = _header(SHIPPED / "model.safetensors")
        if what == "dtype":
            name = sorted(k for k in header if k != "__metadata__")[args[0] % (len(header) - 1)]
            header[name]["dtype"] = args[1]
        text = json.dumps(header).encode()
        with open(SHIPPED / "model.safetensors", "rb") as source:
            source.seek(8 + size)
            data = source.read(args[0] * 4096 + 17 if what == "truncate" else 1 << 16)
        weights.unlink()
        weights.write_bytes(struct.pack("<Q", len(text)) + text + data)
    elif what == "no-tokenizer":
        for name in ("vocab.txt", "tokenizer.json"):
            (folder / name).unlink()
    elif what == "replace":
        name, kind = args
        (folder / name).unlink()
        if kind == "dangling link":
            os.symlink(folder / "nowhere", folder / name)
        else:
            return plant(folder / name, kind, folder / "nowhere")
    return None


DAMAGES = st.one_of(
    st.tuples(st.just("config"), st.sampled_from(SIZE_KEYS), st.sampled_from(NOT_SIZES)),
    st.tuples(st.just("truncate"), st.integers(0, 20000)),
    st.tuples(st.just("dtype"), st.integers(0, 200), st.sampled_from(["F16", "BF16", "I32",
                                                                       "F64", "X"])),
    st.tuples(st.just("no-tokenizer")),
    st.tuples(st.just("replace"), st.sampled_from(["config.json", "model.safetensors",
                                                   "vocab.txt", "tokenizer.json"]),
              st.sampled_from(["FIFO", "folder", "dangling link", "socket"])))


def check_folder(damage, root) -> None:
    folder = root / "model"
    keep = crafted(folder, damage)
    try:
        with deadline(BOUND_S), pytest.raises(ConfigError) as error:
            load_folder(folder, num_layers=1)
    finally:
        if keep is not None:
            keep.close()
    text = str(error.value)
    assert text.startswith("model must be") and "\n" not in text, (damage, text)


@settings(max_examples=FEW, **_SETTINGS)
@given(damage=DAMAGES)
def test_crafted_model_folders_are_one_line(damage, tmp_path_factory):
    check_folder(damage, tmp_path_factory.mktemp("folder"))


@pytest.mark.slow
@settings(max_examples=MANY, **{**_SETTINGS, "derandomize": False})
@given(damage=DAMAGES)
def test_crafted_model_folders_are_one_line_many(damage, tmp_path_factory):
    check_folder(damage, tmp_path_factory.mktemp("folder"))


# -- output targets of every file type ----------------------------------------------------

#: Each command's output flag, the rest of its arguments (refused before any work), and
#: whether the flag names a file (else a folder).
FLAGS = {
    "finetune --json": (["finetune", "--model", "tiny", "--steps", "0", "--out", "{tmp}/o",
                         "--json"], True),
    "finetune --out": (["finetune", "--model", "tiny", "--steps", "0", "--out"], False),
    "generate --out": (["generate", "rng", "--n-rng", "7", "--bits", "5", "--out"], False),
    "sweep --store": (["sweep", "--preset", "tiny", "--outputs-only", "--store"], False),
}
TARGETS = ("FIFO", "socket", "symbolic link", "dangling link", "/dev/null", "regular file",
           "folder", "too long")


def refused_target(flag: str, target: str) -> bool:
    """The oracle: a file flag takes a regular file or a new name; a folder flag a folder
    or a new name; a link, device, FIFO, socket and a name past 255 bytes neither."""
    is_file = FLAGS[flag][1]
    return not ((target == "regular file" and is_file) or (target == "folder" and not is_file))


def check_target(flag: str, target: str, root) -> None:
    path, keep = root / "target", None
    if target == "/dev/null":
        path = "/dev/null"
    elif target == "too long":
        path = root / ("n" * 300)
    elif target == "regular file":
        path.write_text("kept")
    elif target == "dangling link":
        os.symlink(root / "nowhere", path)
    else:
        keep = plant(path, target, root / "elsewhere")
    before = sorted(os.listdir(root))
    argv = [arg.replace("{tmp}", str(root)) for arg in FLAGS[flag][0]] + [str(path)]
    out, err = io.StringIO(), io.StringIO()
    try:
        with deadline(BOUND_S), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        if keep is not None:
            keep.close()
    text = err.getvalue()
    assert "Traceback" not in text and out.getvalue() == "", (argv, text)
    assert code == 2 and text.count("\n") == 1 and "must be" in text, (argv, code, text)
    assert f"error: {flag.split()[1]}" in text or target == "regular file", (argv, text)
    assert sorted(os.listdir(root)) == before                 # nothing made or replaced
    if target == "regular file":
        assert path.read_text() == "kept"


CASES = st.tuples(st.sampled_from(sorted(FLAGS)), st.sampled_from(TARGETS)).filter(
    lambda case: refused_target(*case))


@pytest.mark.parametrize("flag", ["finetune --out", "generate --out", "sweep --store"])
def test_a_too_long_folder_name_names_its_flag(flag, tmp_path):
    """A folder flag whose name is over 255 bytes: one line naming the flag (was the CLI's
    last resort "PATH: File name too long")."""
    check_target(flag, "too long", tmp_path)


@settings(max_examples=FEW, **_SETTINGS)
@given(case=CASES)
def test_output_targets_of_every_file_type_are_one_line(case, tmp_path_factory):
    check_target(*case, tmp_path_factory.mktemp("target"))


@pytest.mark.slow
def test_every_output_flag_with_every_file_type(tmp_path):
    for flag in sorted(FLAGS):
        for target in TARGETS:
            if refused_target(flag, target):
                root = tmp_path / f"{flag.replace(' ', '')}-{TARGETS.index(target)}"
                root.mkdir()
                check_target(flag, target, root)
