"""AXI4-Stream helpers for benches in Amaranth's simulator: a sink that takes beats under
random back-pressure and records them, and the stream rule every sink checks."""
from __future__ import annotations

__all__ = ["axis_sink", "stable_while_stalled"]


def axis_sink(port, count: int, rng, *, stall: float = 0.0, hold: int = 0,
              limit: int = 200_000):
    """``(testbench, record)``: a testbench taking ``count`` beats from ``port`` (an
    AXI4-Stream transmitter: ``tdata``, ``tvalid``, ``tready``, ``tlast``), ``tready`` low
    for the first ``hold`` cycles and then with probability ``stall`` (``rng.random()``),
    stopping after ``limit`` cycles; the record's ``beats`` (``tdata`` as ints), ``lasts``
    and ``cycles`` of each transfer and ``trace``, each cycle's (valid, ready, data,
    last)."""
    record = {"beats": [], "lasts": [], "cycles": [], "trace": []}

    async def bench(ctx):
        cycle = 0
        while len(record["beats"]) < count and cycle < limit:
            ready = cycle >= hold and rng.random() >= stall
            ctx.set(port.tready, ready)
            _, _, valid, data, last = await ctx.tick().sample(port.tvalid, port.tdata,
                                                              port.tlast)
            record["trace"].append((int(valid), int(ready), int(data), int(last)))
            if valid and ready:
                record["beats"].append(int(data))
                record["lasts"].append(int(last))
                record["cycles"].append(cycle)
            cycle += 1
    return bench, record


def stable_while_stalled(trace) -> bool:
    """AXI4-Stream: a beat offered and not taken is offered again, the same."""
    return all(now[0] and now[2:] == before[2:]
               for before, now in zip(trace, trace[1:]) if before[0] and not before[1])
