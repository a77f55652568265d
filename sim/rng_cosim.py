"""Co-simulation of the PeZO generators against their golden models.

Many generator configurations are checked in ONE Verilator build: :class:`SideBySide`
places them next to each other behind two wide ports (``ctrl``: every generator's
``out.ready``, ``save`` and ``restore``; ``observe``: every ``out.valid`` and payload), the
testbench (:mod:`zoforge.sim.benches.rng`) replays a random stimulus and records
``observe`` every cycle, and the host replays the same stimulus on the golden models
(:func:`expected_transfers`) and compares every transferred value.

:func:`cosim_rng` is the entry point used by ``zoforge cosim rng``, ``zoforge demo`` and
the tests.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.errors import check_int_range
from zoforge.hw.rng.designs import build_generator, design_name
from zoforge.golden.rng import make_golden

__all__ = ["GeneratorConfig", "SideBySide", "make_stimulus", "expected_transfers",
           "cosim_configs", "cosim_rng"]


@dataclass
class GeneratorConfig:
    """One generator to co-simulate: strategy, golden parameters, hardware options.

    ``length`` (pregen only) is the perturbation length d fed to the ``length`` input; the
    wrapper holds ``start`` high, so perturbations follow each other.
    """
    strategy: str
    params: dict
    snapshot: bool = False
    layout: str = "replicated"
    length: int = 100
    options: dict = field(init=False)

    def __post_init__(self):
        self.options = {"snapshot": self.snapshot}
        if self.strategy == "pregen":
            self.options.update(layout=self.layout, length_bits=24)

    @property
    def name(self) -> str:
        return design_name(self.strategy, self.params, self.options)

    def golden(self):
        return make_golden(self.strategy, **self.params)

    def hardware(self):
        return build_generator(self.strategy, self.params, self.options)

    def describe(self) -> dict:
        out = {"strategy": self.strategy, **self.params, **self.options}
        if self.strategy == "pregen":
            out["length"] = self.length
        return out


class SideBySide(wiring.Component):
    """Generators side by side. ``ctrl`` = Cat(ready[C], save[C], restore[C]);
    ``observe`` = Cat(valid[C], payload_0, payload_1, ...)."""

    def __init__(self, configs: list[GeneratorConfig]):
        self.configs = configs
        self.generators = [config.hardware() for config in configs]
        self.payload_widths = [len(g.out.payload) for g in self.generators]
        count = len(configs)
        super().__init__({"ctrl": In(3 * count),
                          "observe": Out(count + sum(self.payload_widths))})

    def elaborate(self, platform):
        m = Module()
        count = len(self.configs)
        offset = count
        for index, (config, gen) in enumerate(zip(self.configs, self.generators)):
            m.submodules[f"gen{index}"] = gen
            width = self.payload_widths[index]
            m.d.comb += [gen.out.ready.eq(self.ctrl[index]),
                         self.observe[index].eq(gen.out.valid),
                         self.observe[offset:offset + width].eq(gen.out.payload)]
            offset += width
            if config.snapshot:
                m.d.comb += [gen.save.eq(self.ctrl[count + index]),
                             gen.restore.eq(self.ctrl[2 * count + index])]
            if config.strategy == "pregen":
                m.d.comb += [gen.start.eq(1), gen.length.eq(config.length)]
        return m


def make_stimulus(configs: list[GeneratorConfig], cycles: int, seed: int = 0,
                  ready_probability: float = 0.85, save_probability: float = 0.02,
                  restore_probability: float = 0.01) -> dict[str, np.ndarray]:
    """Random ready/save/restore per cycle and generator (bool arrays, cycles x C).

    Save and restore never coincide; generators without a snapshot get neither.
    """
    rng = np.random.default_rng(seed)
    shape = (cycles, len(configs))
    ready = rng.random(shape) < ready_probability
    snapshot = np.array([c.snapshot for c in configs], dtype=bool)[None, :]
    save = (rng.random(shape) < save_probability) & snapshot
    restore = (rng.random(shape) < restore_probability) & snapshot & ~save
    return {"ready": ready, "save": save, "restore": restore}


def _pack(stimulus: dict[str, np.ndarray]) -> np.ndarray:
    bits = np.concatenate([stimulus["ready"], stimulus["save"], stimulus["restore"]], axis=1)
    packed = np.packbits(bits, axis=1, bitorder="little")
    return np.ascontiguousarray(packed)


def _unpack_lanes(bits: np.ndarray, offset: int, lanes: int, width: int) -> np.ndarray:
    """Signed lane values (cycles x lanes) from a bit matrix (cycles x total bits)."""
    chunk = bits[:, offset:offset + lanes * width].reshape(len(bits), lanes, width)
    weights = (1 << np.arange(width, dtype=np.int64))
    unsigned = (chunk.astype(np.int64) * weights).sum(axis=2)
    return np.where(unsigned >= 1 << (width - 1), unsigned - (1 << width), unsigned)


def expected_transfers(config: GeneratorConfig, golden, valid: np.ndarray,
                       ready: np.ndarray, save: np.ndarray, restore: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Replay one generator's observed handshakes on the golden model.

    Returns (transfer cycle indices, expected lane values per transfer, lanes that belong
    to a perturbation) — all lanes for the LFSR generators; for the pool, the lanes past
    the perturbation's end in its last transfer still carry the following pool values.
    Save captures the state shown in that cycle; restore returns to it (no transfer).
    """
    transfer = valid & ready & ~restore
    cycles = np.flatnonzero(transfer)
    if config.strategy != "pregen":
        t, saved, shown = 0, 0, []
        for c in range(len(valid)):
            if save[c]:
                saved = t
            if restore[c]:
                t = saved
            elif transfer[c]:
                shown.append(t)
                t += 1
        table = golden._take_cycles(0, max(shown, default=0) + 1)
        expected = table[np.asarray(shown, dtype=np.int64)]
        return cycles, expected, np.ones_like(expected, dtype=bool)
    n, lanes, d = golden.pool_size, golden.banks, config.length
    pointer, remaining, saved, rows, belongs = 0, 0, 0, [], []
    for c in range(len(valid)):
        if save[c]:
            saved = pointer
        if restore[c]:
            pointer, remaining = saved, 0
        elif transfer[c]:
            if remaining == 0:
                remaining = d
            count = min(lanes, remaining)
            rows.append((pointer + np.arange(lanes)) % n)
            belongs.append(np.arange(lanes) < count)
            pointer, remaining = (pointer + count) % n, remaining - count
    index = np.array(rows, dtype=np.int64).reshape(-1, lanes)
    return cycles, golden.pool[index], np.array(belongs, dtype=bool).reshape(-1, lanes)


def cosim_configs(configs: list[GeneratorConfig], cycles: int, simulator: str = "verilator",
                  seed: int = 0, ready_probability: float = 0.85) -> dict:
    """Co-simulate ``configs`` side by side for ``cycles`` cycles; per-config verdicts."""
    from zoforge.hw.export import to_verilog
    from zoforge.sim.cosim import run_cocotb

    check_int_range("--cycles", cycles, 1, 10_000_000)
    started = time.perf_counter()
    top = SideBySide(configs)
    verilog = to_verilog(top, "rng_side_by_side")
    elaborate_s = time.perf_counter() - started
    stimulus = make_stimulus(configs, cycles, seed, ready_probability)
    import tempfile
    from pathlib import Path
    data = Path(tempfile.mkdtemp(prefix="zoforge-rng-cosim-"))
    np.save(data / "stimulus.npy", _pack(stimulus))
    observe_width = len(top.observe)
    result = run_cocotb(verilog=verilog, toplevel="rng_side_by_side",
                        test_module="zoforge.sim.benches.rng",
                        args={"observe_bytes": -(-observe_width // 8)},
                        simulator=simulator, data_dir=data)
    report = {"simulator": simulator, "cycles": cycles, "elaborate_s": elaborate_s,
              "build_s": result.build_s, "run_s": result.run_s, "passed": result.passed,
              "failures": result.failures, "configs": []}
    if not result.passed:
        report["bit_exact"] = False
        return report
    loop_s = result.results["loop_s"]
    report["cycles_per_s"] = cycles / loop_s if loop_s > 0 else float("inf")
    bits = np.unpackbits(np.load(data / "observed.npy"), axis=1, bitorder="little")
    count, offset = len(configs), len(configs)
    for index, config in enumerate(configs):
        golden = config.golden()
        lanes = golden.values_per_cycle
        width = golden.width
        observed = _unpack_lanes(bits, offset, lanes, width)
        offset += lanes * width
        valid = bits[:, index].astype(bool)
        ready, save, restore = (stimulus[k][:, index] for k in ("ready", "save", "restore"))
        transfer_cycles, expected, belongs = expected_transfers(config, golden, valid, ready,
                                                                save, restore)
        got = observed[transfer_cycles]
        mismatch = (got != expected)
        report["configs"].append({
            **config.describe(), "name": config.name, "W": width, "F": golden.frac_bits,
            "transfers": int(len(transfer_cycles)), "values": int(belongs.sum()),
            "saves": int(save.sum()), "restores": int(restore.sum()),
            "mismatches": int(mismatch.sum()), "bit_exact": not mismatch.any(),
            "first_mismatch": _first_mismatch(mismatch, transfer_cycles, got, expected)})
    report["bit_exact"] = all(c["bit_exact"] for c in report["configs"])
    return report


def _first_mismatch(mismatch, cycles, got, expected):
    if not mismatch.any():
        return None
    row, lane = map(int, np.argwhere(mismatch)[0])
    return {"cycle": int(cycles[row]), "lane": lane, "got": int(got[row, lane]),
            "expected": int(expected[row, lane])}


def cosim_rng(strategy: str = "onthefly", params: dict | None = None, cycles: int = 2000,
              simulator: str = "verilator", snapshot: bool = False, layout: str = "replicated",
              length: int = 100, seed: int = 0, ready_probability: float = 0.85) -> dict:
    """Co-simulate one generator configuration; a flat JSON-able summary with at least
    ``bit_exact``, ``cycles``, ``cycles_per_s`` and ``simulator``."""
    from zoforge.hw.rng.designs import DEFAULTS
    params = dict(DEFAULTS.get(strategy, {}), **(params or {}))
    if strategy == "pregen":
        params.pop("n_rng", None)
        check_int_range("--length", length, 1, (1 << 24) - 1)
    config = GeneratorConfig(strategy, params, snapshot=snapshot, layout=layout,
                             length=length)
    config.golden()                                   # validates -> one-line ConfigError
    report = cosim_configs([config], cycles, simulator, seed, ready_probability)
    summary = {"bit_exact": report["bit_exact"], "cycles": cycles,
               "cycles_per_s": report.get("cycles_per_s"), "simulator": simulator,
               "build_s": report["build_s"], "run_s": report["run_s"],
               "elaborate_s": report["elaborate_s"]}
    if report["configs"]:
        summary.update(report["configs"][0])
    else:
        summary["failures"] = report["failures"]
    return summary
