"""Host programs as data: bus operations in batches, run the same way on every backend.

A design's co-simulation is written once, as a *host program*: a generator that yields a
batch (a list) of bus operations and receives the list of their :class:`Reply` values, so
that the host's own computation (g from the branch outputs, the next job's operands) runs
between batches. It ends by returning ``(arrays, results)``: named numpy arrays and
JSON-able results. :func:`zoforge.sim.backends.run_program` runs one on the persistent
Verilator job server (a batch is one pipe exchange) or in the cocotb bench
:mod:`zoforge.sim.benches.program` (cocotbext-axi, Verilator or Icarus).

The operations (on a top with zoforge's bus ports, ``hw/pe/bus.py``):

* :class:`Write` / :class:`Read`: one AXI4-Lite write / read (reply words ``[bresp]`` /
  ``[rdata, rresp]``);
* :class:`Send`: queue one input-stream frame (whole beats, TLAST on the last); it streams
  while the following operations run;
* :class:`Receive`: wait for the next complete output frame (up to TLAST): its words;
* :class:`Poll`: read an address until ``value & mask``, ``gap`` idle cycles between reads
  (reply ``[value]``);
* :class:`Idle`: let ``cycles`` clock cycles pass.

Every reply also carries the clock cycle after the operation and the ``irq`` pin.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Generator, NamedTuple

import numpy as np

__all__ = ["Write", "Read", "Send", "Receive", "Poll", "Idle", "Operation", "Reply",
           "HostProgram", "HostCheckFailed", "drive", "drive_async", "load_program",
           "stream_words", "check_frame", "streamed_job", "STATUS_DONE"]


@dataclass(frozen=True)
class Write:
    address: int
    value: int

    def __post_init__(self):
        object.__setattr__(self, "value", int(self.value) & 0xFFFFFFFF)


@dataclass(frozen=True)
class Read:
    address: int


@dataclass(frozen=True)
class Send:
    """One input-stream frame; ``words`` are taken modulo 2^32 (uint32, beat-major)."""
    words: np.ndarray = field(compare=False)

    def __post_init__(self):
        object.__setattr__(self, "words", stream_words(self.words))


@dataclass(frozen=True)
class Receive:
    pass


@dataclass(frozen=True)
class Poll:
    address: int
    mask: int
    gap: int


@dataclass(frozen=True)
class Idle:
    cycles: int


Operation = Write | Read | Send | Receive | Poll | Idle


class Reply(NamedTuple):
    cycle: int          # clock cycles simulated when the operation ended
    irq: bool           # the irq pin then
    words: np.ndarray   # uint32: see the operations

    @property
    def value(self) -> int:
        """The first word (a read's data, a poll's last value)."""
        return int(self.words[0])


#: A host program: yields batches of operations, receives their replies, returns
#: ``(arrays, results)``.
HostProgram = Generator[list, list, tuple]


class HostCheckFailed(RuntimeError):
    """A host program saw the design misbehave (a wrong status, a missing frame)."""


def check_frame(what: str, words: np.ndarray, lanes: int, beats: int) -> None:
    """A received frame (:class:`Receive`, up to TLAST) must be ``beats`` beats of ``lanes``
    words: TLAST on the frame's last beat, not before or after (HostCheckFailed)."""
    if words.size != beats * lanes:
        raise HostCheckFailed(f"{what}: TLAST after {words.size / lanes:g} beats, expected "
                              f"on beat {beats} (the frame's last)")


#: STATUS's done bit (bit 1, write 1 to clear) of every unit with a job's protocol.
STATUS_DONE = 0b10


def streamed_job(what: str, registers: dict, setup: list, frame, ctrl: int, lanes: int,
                 out_beats: int, counters: tuple[str, ...] = ("CYCLES",)):
    """One job of a unit with the GEMM engine's job protocol, as a host program's part
    (``yield from``): the ``setup`` writes, the input ``frame``, CTRL's start (``ctrl | 1``),
    the output frame (``out_beats`` beats of ``lanes`` words), STATUS (done, not busy), the
    ``counters``, done cleared (W1C) and STATUS read again; the irq raised at completion.
    Returns ``(words, stats)``: the output words and ``status``, each counter (its name in
    lower case), ``status_after_clear`` and ``irq``. A broken protocol: HostCheckFailed
    naming ``what``."""
    replies = yield [*setup, Send(frame), Write(registers["CTRL"], ctrl | 1), Receive(),
                     Idle(2), Read(registers["STATUS"]),
                     *(Read(registers[name]) for name in counters),
                     Write(registers["STATUS"], STATUS_DONE), Read(registers["STATUS"])]
    tail = replies[-(len(counters) + 5):]
    received, settled, status, *values = tail[0], tail[1], *(r.value for r in tail[2:])
    counted, cleared = values[:len(counters)], values[-1]
    check_frame(what, received.words, lanes, out_beats)
    if status & 0b11 != STATUS_DONE:
        raise HostCheckFailed(f"{what}: STATUS {status:#x} after its output frame")
    if cleared & 0b11:
        raise HostCheckFailed(f"{what}: done did not clear (STATUS {cleared:#x})")
    if not settled.irq:
        raise HostCheckFailed(f"{what}: irq not raised at completion")
    return received.words, {"status": status, **dict(zip(map(str.lower, counters), counted)),
                            "status_after_clear": cleared, "irq": settled.irq}


def stream_words(words) -> np.ndarray:
    """Any integers -> flat uint32 words (modulo 2^32)."""
    return (np.asarray(words, dtype=np.int64).reshape(-1) & 0xFFFFFFFF).astype(np.uint32)


def load_program(reference: str) -> Callable[[dict, dict], HostProgram]:
    """The program factory named ``module:function`` (called with ``(args, data)``)."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


def _advance(program, replies) -> tuple[bool, object]:
    """``(False, next batch)``, or ``(True, the program's value)`` once it has ended."""
    try:
        return False, program.send(replies)
    except StopIteration as stop:
        return True, stop.value


def drive(program, execute: Callable[[list], list]):
    """Run ``program`` (a generator) to its end, each batch through ``execute``; its value."""
    done, item = _advance(program, None)
    while not done:
        done, item = _advance(program, execute(item))
    return item


async def drive_async(program, execute):
    """:func:`drive` with an ``async`` ``execute`` (the cocotb bench)."""
    done, item = _advance(program, None)
    while not done:
        done, item = _advance(program, await execute(item))
    return item
