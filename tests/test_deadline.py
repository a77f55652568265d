"""The default run's per-test bound (tests/deadline_plugin.py, which tests/conftest.py loads):
a test not marked slow that blocks past it fails with the bound named instead of hanging the
run (CI once waited 18 minutes on a co-simulation past its limits); slow tests are not
bound."""
import textwrap
from pathlib import Path

pytest_plugins = ["pytester"]

HERE = Path(__file__).parent


def test_a_default_test_past_the_bound_fails_and_a_slow_one_is_not_bound(pytester, monkeypatch):
    monkeypatch.setenv("ZOFORGE_TEST_DEADLINE_S", "1")
    for name in ("deadline_plugin", "hang_guard"):
        pytester.makepyfile(**{name: (HERE / f"{name}.py").read_text()})
    pytester.makeconftest("from deadline_plugin import pytest_runtest_call  # noqa: F401")
    pytester.makeini("[pytest]\nmarkers =\n    slow: long")
    pytester.makepyfile(test_sleepers=textwrap.dedent("""
        import time
        import pytest

        def test_hangs():
            time.sleep(3)

        @pytest.mark.slow
        def test_slow_may_run_long():
            time.sleep(2)

        def test_quick():
            pass
    """))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_hangs*", "*no answer within 1 s*"])
