"""A zoforge command started with its standard output closed (``>&-``) is one line on
standard error and exit 2, never a traceback (issue 34: ``rng dump`` wrote to None)."""
import subprocess
import sys

import pytest


@pytest.mark.parametrize("argv", [["rng", "dump", "--strategy", "onthefly", "--n-rng", "7",
                                   "--bits", "5", "--cycles", "4"], ["toolchain"]])
def test_closed_stdout_is_one_line_exit_2(argv):
    done = subprocess.run([sys.executable, "-m", "zoforge", *argv], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=120,
                          preexec_fn=lambda: __import__("os").close(1))
    assert done.returncode == 2
    assert done.stderr.strip() == ("zoforge: error: standard output must be open (it is "
                                   "closed; redirect it, e.g. > FILE or > /dev/null)")
