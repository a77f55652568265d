"""A bound on every test not marked slow (SIGALRM in the test's own thread: xdist runs each
test in a worker's main thread): past ``$ZOFORGE_TEST_DEADLINE_S`` seconds (default
:data:`DEFAULT_TEST_DEADLINE_S`) it fails with the bound named. A hang guard, not a timing
claim: the longest default test takes about 35 s on the 2-core machine."""
from __future__ import annotations

import os

import pytest

from hang_guard import deadline

#: Seconds a default (not slow) test may block.
DEFAULT_TEST_DEADLINE_S = 300


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if item.get_closest_marker("slow") is not None:
        return (yield)
    with deadline(int(os.environ.get("ZOFORGE_TEST_DEADLINE_S", DEFAULT_TEST_DEADLINE_S))):
        return (yield)
