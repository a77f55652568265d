"""A stream handshake for the cocotb benches that set inputs at a falling edge: wait until
``ready`` is high there (read once settled), then through the rising edge (the transfer)."""
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

__all__ = ["handshake"]


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
