"""Errors cross process boundaries intact (issue 34): a ConfigError raised in a sweep's local
worker reaches the coordinator as itself (it pickles by its fields) and fails only its own
task; it used to break the whole process pool (BrokenProcessPool) and every task with it."""
import pickle

import pytest

from zoforge.errors import ConfigError
from zoforge.sweep.executors import LocalExecutor


@pytest.mark.parametrize("got", [None, 3, "a\nb", 1.5])
def test_config_error_pickles_with_its_fields_and_message(got):
    error = ConfigError("--bits", "an integer with 4 <= value <= 20", got)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is ConfigError and str(copy) == str(error)
    assert (copy.parameter, copy.allowed, copy.got) == ("--bits", error.allowed, got)


def test_a_config_error_in_a_worker_fails_its_task_and_not_the_pool(tmp_path):
    """The task's folder cannot be made (the store is a file): that error comes back from
    the worker, twice in a row, from a pool that keeps working."""
    not_a_folder = tmp_path / "store"
    not_a_folder.write_text("a file")
    executor = LocalExecutor(1)
    try:
        for _ in range(2):
            future = executor.submit("train", "k" * 20, {}, str(not_a_folder))
            with pytest.raises(ConfigError) as error:
                future.result(timeout=120)
            assert error.value.parameter == "--store"
    finally:
        executor.close()
