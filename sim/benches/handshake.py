"""A stream handshake for the cocotb benches that set inputs at a falling edge: wait until
``ready`` is high there (read once settled), then through the rising edge (the transfer);
and a host's queue of ``lib.stream`` entries driven with it."""
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

__all__ = ["handshake", "push_entries"]


async def handshake(clock, ready) -> None:
    """Until ``ready`` is high at a falling edge of ``clock``, then through the rising edge
    to the next falling edge."""
    while True:
        await ReadOnly()
        taken = bool(ready.value)
        await RisingEdge(clock)
        await FallingEdge(clock)
        if taken:
            return


async def push_entries(clock, valid, payload, ready, entries, rng, idle: float) -> None:
    """Offer each of ``entries`` on a ``lib.stream`` port (``valid``, ``payload``,
    ``ready``) in turn, idle cycles before each with probability ``idle`` (``rng``), each
    held until taken; ``valid`` low after the last."""
    for entry in entries:
        while rng.random() < idle:
            valid.value = 0
            await FallingEdge(clock)
        payload.value, valid.value = entry, 1
        await handshake(clock, ready)
    valid.value = 0
