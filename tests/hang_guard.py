"""A bound on a test's blocking call: fail instead of hanging (a hang guard, not a timing
claim)."""
from __future__ import annotations

import contextlib
import signal


@contextlib.contextmanager
def deadline(seconds: int):
    """Raise TimeoutError in the block after ``seconds`` (SIGALRM; main thread only)."""
    def expired(*_):
        raise TimeoutError(f"no answer within {seconds} s")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
