"""Output paths (:mod:`zoforge.outputs`): nothing is ever written through a symbolic link
inside the output folder, whether the link is the file itself or any folder between the
output folder and the file; the output folder itself may be a link (the user chose it).
Each refusal is judged by its effect: a one-line error naming the flag and the link, the
link's target untouched, no temporary file left behind."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from zoforge.errors import ConfigError
from zoforge.outputs import (check_targets, make_dirs, output_path, set_aside, write_bytes,
                             write_text)

KEEP = "keep me\n"


@pytest.fixture
def layout(tmp_path):
    """``out/`` (the output folder, holding ``a/b/``) and ``outside/`` (a folder a link may
    point to, holding ``precious.txt``)."""
    out, outside = tmp_path / "out", tmp_path / "outside"
    (out / "a" / "b").mkdir(parents=True)
    (outside / "a" / "b").mkdir(parents=True)
    (outside / "precious.txt").write_text(KEEP)
    return out, outside


def _link(at: Path, to: Path) -> None:
    """Replace the folder or file ``at`` with a symbolic link to ``to``."""
    if at.is_dir() and not at.is_symlink():
        for child in sorted(at.rglob("*"), reverse=True):
            child.rmdir() if child.is_dir() else child.unlink()
        at.rmdir()
    elif at.exists() or at.is_symlink():
        at.unlink()
    at.symlink_to(to)


def _everything(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (links not followed) with its text."""
    return {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*")
            if p.is_file() and not p.is_symlink()}


def _refused(error: pytest.ExceptionInfo, flag: str, link: Path) -> None:
    message = str(error.value)
    assert message.startswith(f"{flag} must be") and "\n" not in message
    assert "symbolic link" in message and str(link) in message


# where the link sits, relative to out/, for the file out/a/b/file.txt
LINKS = {"the file": "a/b/file.txt", "its folder": "a/b", "a folder two levels up": "a"}


@pytest.mark.parametrize("where", sorted(LINKS))
@pytest.mark.parametrize("writer", ["write_text", "write_bytes", "output_path"])
def test_a_link_anywhere_between_out_and_the_file_is_refused(layout, where, writer):
    """A link at the file, at its folder or at a folder above it (inside ``--out``): the
    write is refused with one line naming ``--out`` and the link, and neither the link's
    target nor the output folder gains or loses a byte."""
    out, outside = layout
    link = out / LINKS[where]
    target = outside / LINKS[where] if where != "the file" else outside / "precious.txt"
    _link(link, target)
    before_out, before_outside = _everything(out), _everything(outside)
    path = out / "a" / "b" / "file.txt"
    with pytest.raises(ConfigError) as error:
        if writer == "write_text":
            write_text(path, "new\n", root=out)
        elif writer == "write_bytes":
            write_bytes(path, b"new\n", root=out)
        else:
            with output_path(path, root=out) as tmp:
                Path(tmp).write_text("new\n")
    _refused(error, "--out", link)
    assert _everything(outside) == before_outside
    assert (outside / "precious.txt").read_text() == KEEP
    assert _everything(out) == before_out and link.is_symlink()


def test_the_flag_named_is_the_callers(layout):
    """``--json`` (or ``--store``) is named instead of ``--out`` when the caller says so."""
    out, outside = layout
    _link(out / "a", outside / "a")
    with pytest.raises(ConfigError) as error:
        write_text(out / "a" / "b" / "file.txt", "new\n", root=out, flag="--json")
    _refused(error, "--json", out / "a")


@pytest.mark.parametrize("where", ["a", "a/b"])
def test_check_targets_looks_at_every_folder_on_the_way(layout, where):
    """:func:`check_targets` alone: a link at either folder between ``out`` and the file is
    refused; the same paths without the link pass."""
    out, outside = layout
    path = out / "a" / "b" / "file.txt"
    check_targets(out, [path])                       # no link: fine
    _link(out / where, outside / where)
    with pytest.raises(ConfigError) as error:
        check_targets(out, [out / "other.txt", path])
    _refused(error, "--out", out / where)


def test_the_output_folder_itself_may_be_a_link(tmp_path):
    """``--out`` given as a link is the user's choice: files are written inside its target
    (only links inside ``--out`` are refused)."""
    real, out = tmp_path / "real", tmp_path / "out"
    (real / "a").mkdir(parents=True)
    out.symlink_to(real)
    write_text(out / "a" / "file.txt", "new\n", root=out)
    assert (real / "a" / "file.txt").read_text() == "new\n"
    assert sorted(p.name for p in (real / "a").iterdir()) == ["file.txt"]   # no temporary


def test_a_file_without_links_is_written_whole(layout):
    """The plain case, read back: the text, nothing else beside it."""
    out, _ = layout
    path = write_text(out / "a" / "b" / "file.txt", "line one\nline two\n", root=out)
    assert path == out / "a" / "b" / "file.txt"
    assert _everything(out) == {os.path.join("a", "b", "file.txt"): "line one\nline two\n"}


def test_a_link_made_at_the_file_during_the_write_is_refused(layout):
    """The check is repeated when the block ends: a link planted at the file while it was
    being written is refused, left as it was, and the temporary file is removed."""
    out, outside = layout
    path = out / "a" / "b" / "file.txt"
    with pytest.raises(ConfigError) as error:
        with output_path(path, root=out) as tmp:
            Path(tmp).write_text("new\n")
            path.symlink_to(outside / "precious.txt")
    _refused(error, "--out", path)
    assert path.is_symlink() and (outside / "precious.txt").read_text() == KEEP
    assert sorted(p.name for p in path.parent.iterdir()) == ["file.txt"]


@pytest.mark.parametrize("where", ["c", "c/d"])
def test_make_dirs_refuses_a_link_at_any_level(layout, where):
    """Folders created inside ``--out``: a link at the first or the second level of
    ``out/c/d/e`` is refused (one line naming it), nothing is created through it."""
    out, outside = layout
    (out / "c").mkdir()
    (outside / "c" / "d").mkdir(parents=True)
    if where == "c/d":
        (out / "c" / "d").symlink_to(outside / "c" / "d")
    else:
        _link(out / "c", outside / "c")
    with pytest.raises(ConfigError) as error:
        make_dirs(out, out / "c" / "d" / "e")
    _refused(error, "--out", out / where)
    assert not (outside / "c" / "d" / "e").exists()


def test_make_dirs_creates_every_level(layout):
    out, _ = layout
    made = make_dirs(out, out / "c" / "d" / "e")
    assert made == out / "c" / "d" / "e" and made.is_dir()


@pytest.mark.parametrize("where", ["a", "file.txt.damaged"])
def test_set_aside_refuses_a_link_on_the_way_or_at_the_new_name(layout, where):
    """:func:`set_aside` renames ``out/a/file.txt`` to ``file.txt.damaged`` beside it: a
    link at the folder on the way or at the new name is refused and nothing moves."""
    out, outside = layout
    path = out / "a" / "file.txt"
    path.write_text("damaged\n")
    if where == "a":
        (outside / "a" / "file.txt").write_text("theirs\n")
        _link(out / "a", outside / "a")
        link = out / "a"
    else:
        link = out / "a" / where
        link.symlink_to(outside / "precious.txt")
    before = _everything(outside)
    with pytest.raises(ConfigError) as error:
        set_aside(path, root=out)
    _refused(error, "--out", link)
    assert _everything(outside) == before


def test_set_aside_moves_the_file_beside_itself(layout):
    out, _ = layout
    path = out / "a" / "file.txt"
    path.write_text("damaged\n")
    moved = set_aside(path, root=out)
    assert moved == out / "a" / "file.txt.damaged" and not path.exists()
    assert moved.read_text() == "damaged\n"
