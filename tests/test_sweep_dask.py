"""The Dask executor: a scheduler that accepts the connection and never answers is a
one-line error within the connect timeout, not a hang; without --scheduler the sweep runs
on its own local cluster (end to end in tests/test_sweep.py, -m slow)."""
from __future__ import annotations

import socket
import threading

import pytest

from zoforge.cli import main
from zoforge.errors import ConfigError
from zoforge.sweep import executors


@pytest.fixture()
def silent_scheduler():
    """A TCP server on localhost that accepts every connection and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted = []
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}", accepted
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    server.close()


def _in_thread(call, limit_s: float):
    """``call()`` in a thread; its exception, or a failure if it is still running after
    ``limit_s`` (a hang guard, far above the timeout under test)."""
    outcome = {}

    def run():
        try:
            call()
        except BaseException as error:      # noqa: BLE001 - handed to the test
            outcome["error"] = error
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), "the connection hung past the overall timeout"
    return outcome.get("error")


def test_a_silent_scheduler_is_a_one_line_error(silent_scheduler):
    address, accepted = silent_scheduler
    error = _in_thread(lambda: executors.make_executor("dask", None, address,
                                                       connect_timeout_s=1.0), 60)
    assert isinstance(error, ConfigError)
    assert accepted                                   # it did connect, then waited
    assert "\n" not in str(error)
    assert str(error).startswith("scheduler must be a Dask scheduler that answers within 1 s")
    assert address in str(error)


def test_the_command_line_reports_a_silent_scheduler(silent_scheduler, capsys, tmp_path):
    address, _ = silent_scheduler
    codes = []
    error = _in_thread(lambda: codes.append(main([
        "sweep", "--set", "model=tiny", "--store", str(tmp_path / "s"), "--executor", "dask",
        "--scheduler", address, "--connect-timeout-s", "1", "--no-progress"])), 60)
    assert error is None and codes == [2]
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith("zoforge: error: --scheduler must be a Dask scheduler that answers "
                          "within 1 s")


def test_the_default_timeout_is_the_module_s(silent_scheduler, monkeypatch):
    address, _ = silent_scheduler
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 1.0)
    error = _in_thread(lambda: executors.make_executor("dask", None, address), 60)
    assert isinstance(error, ConfigError) and "within 1 s" in str(error)


def test_an_address_nobody_listens_on_is_a_one_line_error(silent_scheduler):
    address, _ = silent_scheduler
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()                                      # nothing listens there now
    error = _in_thread(lambda: executors.make_executor(
        "dask", None, f"tcp://127.0.0.1:{port}", connect_timeout_s=1.0), 60)
    assert isinstance(error, ConfigError) and "\n" not in str(error)
    assert str(error).startswith("scheduler must be")


@pytest.fixture()
def http_server():
    """An HTTP server on localhost: something that answers, but not a Dask scheduler."""
    import http.server

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):         # not on the test's stderr
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.parametrize("protocol", ["ws", "tcp"])
def test_an_http_server_as_scheduler_is_a_one_line_error(http_server, protocol, capsys,
                                                          tmp_path):
    """A websocket handshake refused by an HTTP server (tornado's WebSocketError, not an
    OSError) or a TCP peer that speaks HTTP: one line naming --scheduler, exit 2."""
    address = f"{protocol}://127.0.0.1:{http_server}"
    codes = []
    error = _in_thread(lambda: codes.append(main([
        "sweep", "--preset", "tiny", "--store", str(tmp_path / "s"), "--executor", "dask",
        "--scheduler", address, "--connect-timeout-s", "5", "--no-progress"])), 60)
    assert error is None and codes == [2]
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("zoforge: error: --scheduler must be")
    assert address in err
