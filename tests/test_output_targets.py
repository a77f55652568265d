"""A user-named output file is a regular file or a new one (issue 34):
``zoforge.outputs.check_out_file``, used by ``zoforge finetune --json``. A device, FIFO,
socket, folder or link is refused before any work (``--json /dev/null`` run as root used to
replace the system's), as are a name longer than the file system allows and a path that is
one of ``--out``'s own files."""
import os

import pytest

from planted_files import KINDS, plant
from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.outputs import MAX_NAME_BYTES, check_out_file


@pytest.mark.parametrize("kind", KINDS)
def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    target = tmp_path / "results.json"
    keep = plant(target, kind, tmp_path / "target.json")
    try:
        with pytest.raises(ConfigError) as error:
            check_out_file("--json", target)
    finally:
        if keep is not None:
            keep.close()
    assert str(error.value) == ("--json must be a regular file or a new one (never a device, "
                                f"FIFO, folder or link) (got {target}: a {kind})")
    assert not (tmp_path / "target.json").exists()


def test_a_character_device_is_refused_and_left_alone():
    before = os.stat("/dev/null")
    with pytest.raises(ConfigError, match="/dev/null: a character device"):
        check_out_file("--json", "/dev/null")
    after = os.stat("/dev/null")
    assert (before.st_ino, before.st_mode) == (after.st_ino, after.st_mode)


def test_a_regular_file_or_a_new_one_is_accepted(tmp_path):
    (tmp_path / "old.json").write_text("{}")
    assert check_out_file("--json", tmp_path / "old.json") == tmp_path / "old.json"
    assert check_out_file("--json", tmp_path / "new" / "deeper.json") == \
        tmp_path / "new" / "deeper.json"


def test_a_name_at_the_limit_is_accepted_and_one_byte_past_refused(tmp_path):
    assert check_out_file("--json", tmp_path / ("a" * MAX_NAME_BYTES))
    with pytest.raises(ConfigError, match=f"at most {MAX_NAME_BYTES} bytes"):
        check_out_file("--json", tmp_path / ("a" * (MAX_NAME_BYTES + 1)))
    assert MAX_NAME_BYTES == os.pathconf(tmp_path, "PC_NAME_MAX")


def test_a_path_another_output_writes_is_refused(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="no other output of the command writes"):
        check_out_file("--json", tmp_path / "x" / ".." / "out" / "a.json",
                       taken=[out / "a.json"])


@pytest.mark.parametrize("json_of", [
    lambda tmp: "/dev/null", lambda tmp: str(tmp / "out" / "finetune.json"),
    lambda tmp: str(tmp / "out"), lambda tmp: str(tmp / ("b" * 300))])
def test_finetune_refuses_the_json_target_before_any_work(tmp_path, capsys, json_of):
    code = main(["finetune", "--model", "tiny", "--steps", "0", "--out", str(tmp_path / "out"),
                 "--json", json_of(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and err.startswith("zoforge: error: --json must be")
    assert not (tmp_path / "out").exists()
