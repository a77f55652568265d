"""The sweep's quick flags refuse what would silently drop a value (issue 34): a key given
twice to ``--set``, ``--grid`` or ``--budget`` (as a key written twice in a file is), and a
control character in a ``--set``/``--grid`` value (a newline would end it early)."""
import pytest

from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.sweep.recommend import parse_budget


@pytest.mark.parametrize("argv, fragment", [
    (["--set", "steps=5", "--set", "steps=6"], "--set steps must be given once"),
    (["--set", "steps=5", "--set", "model=tiny", "--set", "steps=5"], "--set steps must be given once"),
    (["--set", "eps-scale=1", "--set", "eps_scale=2"], "--set eps_scale must be given once"),
    (["--grid", "bits=6,8", "--grid", "bits=10"], "--grid bits must be given once"),
    (["--set", "steps=5\nbits=3"], "--set must be KEY=VALUE without control characters"),
    (["--grid", "bits=6,8\tseed=1"], "--grid must be KEY=VALUE without control characters"),
    (["--set", "steps=5\x1b[2J"], "--set must be KEY=VALUE without control characters"),
])
def test_a_flag_that_would_drop_a_value_is_one_line_exit_2(tmp_path, capsys, argv, fragment):
    code = main(["sweep", "--store", str(tmp_path / "store"), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "\x1b" not in err
    assert err.startswith("zoforge: error: " + fragment)
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("text", ["lut=1,lut=999999", "power=0.5,LUT=3,Power=0.7",
                                  "dsp=1, dsp =2"])
def test_a_budget_key_given_twice_is_refused(text):
    with pytest.raises(ConfigError, match="given once"):
        parse_budget(text)


def test_distinct_budget_keys_and_distinct_flags_are_kept():
    assert parse_budget("lut=1,dsp=2,power=0.5") == {"LUT": 1.0, "DSP": 2.0, "power_w": 0.5}


def test_a_store_file_that_is_a_link_is_refused_and_its_target_untouched(tmp_path, capsys):
    """``sweep.db`` linked to an empty file outside the store: refused before anything is
    opened (it used to turn that file into a store)."""
    outside = tmp_path / "elsewhere.db"
    outside.write_bytes(b"")
    store = tmp_path / "store"
    store.mkdir()
    (store / "sweep.db").symlink_to(outside)
    code = main(["sweep", "--store", str(store), "--preset", "tiny", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "sweep.db: a symbolic link" in err
    assert outside.read_bytes() == b""
