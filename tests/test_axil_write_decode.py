"""The AXI4-Lite target's decoded writes (``write_addresses`` -> ``wr_hit``), on Amaranth's
simulator: random writes (addresses decoded and not, full-word and partial strobes, the
address and data channels idling apart, the response held back), each flag checked against
a plain-Python model of the writes the target took: ``wr_hit[i]`` is ``wr_en`` at address
``write_addresses[i]`` in the same cycle, never at another address, never for a partial
write; ``wr_en``/``wr_addr``/``wr_data`` as without the decode."""
from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from zoforge.hw.pe.axil import OKAY, SLVERR, AxiLiteTarget, RegisterPortSignature

ADDR_BITS = 8
DECODED = (0x00, 0x04, 0x3C, 0xFC)


def test_signature_checks_and_compares_the_addresses():
    assert RegisterPortSignature(8, DECODED) == RegisterPortSignature(8, DECODED)
    assert RegisterPortSignature(8, DECODED) != RegisterPortSignature(8)
    assert "wr_hit" not in RegisterPortSignature(8).members
    with pytest.raises(ValueError, match="outside 8 bits"):
        RegisterPortSignature(8, (0x100,))


@pytest.mark.parametrize("seed", [1, 2])
def test_decoded_writes_pulse_with_wr_en_at_their_address(seed):
    dut = AxiLiteTarget(ADDR_BITS, DECODED)
    bus, regs = dut.bus, dut.regs
    rng = random.Random(seed)
    # addresses: every decoded one, its neighbours and others
    addresses = list(DECODED) + [0x08, 0x38, 0x40, 0xF8, 0x01]
    writes = [(rng.choice(addresses), rng.getrandbits(32),
               0b1111 if rng.random() < 0.8 else rng.choice([0b0111, 0b1110, 0b0001, 0]))
              for _ in range(60)]
    seen = []           # (wr_addr, wr_data) of each wr_en pulse, hits checked as they come

    async def monitor(ctx):
        async for _, _, hits, en, addr, data in ctx.tick().sample(regs.wr_hit, regs.wr_en,
                                                                  regs.wr_addr, regs.wr_data):
            # the values sampled at the edge are the ones the register file sees
            expected = [int(en and addr == a) for a in DECODED]
            assert [(hits >> i) & 1 for i in range(len(DECODED))] == expected, (addr, en)
            if en:
                seen.append((addr, data))

    async def host(ctx):
        responses = []
        for address, data, strobe in writes:
            aw_at, w_at = rng.randrange(3), rng.randrange(3)    # the channels apart
            ctx.set(bus.wstrb, strobe)
            ctx.set(bus.awaddr, address)
            ctx.set(bus.wdata, data)
            aw_done = w_done = False
            cycle = 0
            while not (aw_done and w_done):
                ctx.set(bus.awvalid, not aw_done and cycle >= aw_at)
                ctx.set(bus.wvalid, not w_done and cycle >= w_at)
                ctx.set(bus.bready, rng.random() < 0.5)
                await ctx.delay(1e-9)
                aw_done |= bool(ctx.get(bus.awvalid) and ctx.get(bus.awready))
                w_done |= bool(ctx.get(bus.wvalid) and ctx.get(bus.wready))
                await ctx.tick()
                cycle += 1
            ctx.set(bus.awvalid, 0)
            ctx.set(bus.wvalid, 0)
            while True:                 # the response, with bready sometimes low
                ready = rng.random() < 0.6
                ctx.set(bus.bready, ready)
                await ctx.delay(1e-9)
                if ctx.get(bus.bvalid) and ready:
                    responses.append(ctx.get(bus.bresp))
                    await ctx.tick()
                    break
                await ctx.tick()
            ctx.set(bus.bready, 0)
        await ctx.tick().repeat(3)
        assert responses == [OKAY if strobe == 0b1111 else SLVERR for _, _, strobe in writes]
        assert seen == [(a, d) for a, d, strobe in writes if strobe == 0b1111]
        assert any(a in DECODED for a, _ in seen) and any(a not in DECODED for a, _ in seen)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_process(monitor)
    sim.add_testbench(host)
    sim.run()
