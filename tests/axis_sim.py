"""AXI4-Stream helpers for benches in Amaranth's simulator: a sink that takes beats under
random back-pressure and records them, the stream rule every sink checks, and a source's
wait for its offer to be taken."""
from __future__ import annotations

__all__ = ["axis_sink", "split_frames", "stable_while_stalled"]


def axis_sink(port, count: int, rng, *, stall: float = 0.0, hold: int = 0,
              limit: int = 200_000, domain: str = "sync", watch: int = 0):
    """``(testbench, record)``: a testbench in clock ``domain`` taking ``count`` beats from
    ``port`` (an AXI4-Stream transmitter: ``tdata``, ``tvalid``, ``tready``, ``tlast``),
    ``tready`` low for the first ``hold`` cycles and then with probability ``stall``
    (``rng.random()``), stopping after ``limit`` cycles; then ``watch`` cycles more with
    ``tready`` high, each beat offered in them counted in ``extra`` (none should come). The
    record: ``beats`` (``tdata`` as ints), ``lasts`` and ``cycles`` of each transfer,
    ``trace`` (each cycle's valid, ready, data, last), ``extra``, and ``done`` once the
    testbench has ended."""
    record = {"beats": [], "lasts": [], "cycles": [], "trace": [], "extra": 0, "done": False}

    async def bench(ctx):
        cycle, after = 0, 0
        while cycle < limit and after <= watch:
            full = len(record["beats"]) >= count
            if full and after == watch:
                break
            ready = full or cycle >= hold and rng.random() >= stall
            ctx.set(port.tready, ready)
            _, _, valid, data, last = await ctx.tick(domain).sample(port.tvalid, port.tdata,
                                                                    port.tlast)
            record["trace"].append((int(valid), int(ready), int(data), int(last)))
            if full:
                after += 1
                record["extra"] += int(valid)
            elif valid and ready:
                record["beats"].append(int(data))
                record["lasts"].append(int(last))
                record["cycles"].append(cycle)
            cycle += 1
        record["done"] = True
    return bench, record


def split_frames(words, lasts) -> list[list[int]]:
    """The frames of a sink's ``words``, each ending at a ``tlast``; beats after the last
    ``tlast`` fail."""
    out, current = [], []
    for word, last in zip(words, lasts):
        current.append(word)
        if last:
            out.append(current)
            current = []
    assert not current, "beats after the last tlast"
    return out


def stable_while_stalled(trace) -> bool:
    """AXI4-Stream: a beat offered and not taken is offered again, the same."""
    return all(now[0] and now[2:] == before[2:]
               for before, now in zip(trace, trace[1:]) if before[0] and not before[1])


async def until_taken(ctx, domain: str, ready) -> None:
    """Tick ``domain`` until ``ready`` is sampled high at a clock edge: the beat or entry
    the bench offers (its valid set) is taken there."""
    while True:
        _, _, taken = await ctx.tick(domain).sample(ready)
        if taken:
            return
