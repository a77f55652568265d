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

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zoforge.config import Config, FloatRange, IntRange, OneOf, param
from zoforge.errors import ConfigError
from zoforge.golden.rng import GeneratorConfig, PregenConfig
from zoforge.hw.export import to_verilog
from zoforge.hw.rng.designs import design_name, generator_for
from zoforge.sim.cosim import SIMULATORS, run_cocotb

__all__ = ["RngCosimOptions", "SideBySide", "make_stimulus", "expected_transfers",
           "cosim_configs", "cosim_rng"]


@dataclass(frozen=True)
class RngCosimOptions(Config):
    """How ``zoforge cosim rng`` runs one generator configuration."""

    kind: ClassVar[str] = "cosim-rng"

    cycles: int = param(2000, "clock cycles to simulate", IntRange(1, 10_000_000))
    simulator: str = param("verilator", "simulator", OneOf(SIMULATORS))
    length: int = param(100, "pregen: perturbation length d (perturbations follow each "
                             "other)", IntRange(1, (1 << 24) - 1))
    backpressure: float = param(0.15, "probability that out.ready is low in a cycle",
                                FloatRange(0.0, 1.0, high_open=True))
    stimulus_seed: int = param(0, "seed of the ready/save/restore stimulus", IntRange(0))


class SideBySide(wiring.Component):
    """Generators side by side. ``ctrl`` = Cat(ready[C], save[C], restore[C]);
    ``observe`` = Cat(valid[C], payload_0, payload_1, ...). A pre-generated pool's ``start``
    is held high with its ``length`` input at ``lengths[i]``, so perturbations follow each
    other."""

    def __init__(self, configs: Sequence[GeneratorConfig], lengths: Sequence[int]):
        self.configs, self.lengths = list(configs), list(lengths)
        self.generators = [generator_for(config) for config in configs]
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
            if isinstance(config, PregenConfig):
                m.d.comb += [gen.start.eq(1), gen.length.eq(self.lengths[index])]
        return m


def make_stimulus(configs: Sequence[GeneratorConfig], cycles: int, seed: int = 0,
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


def expected_transfers(golden, length: int, valid: np.ndarray, ready: np.ndarray,
                       save: np.ndarray, restore: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Replay one generator's observed handshakes on its golden model's public interface.

    ``length`` is the perturbation length the hardware is given (a pool's ``length`` input;
    for the LFSR generators every transfer is a whole cycle, so any length works).
    Returns (transfer cycle indices, expected lane values per transfer, lanes that belong
    to a perturbation): in a perturbation's last transfer the lanes past its end still carry
    the values that follow. Save captures the state shown in that cycle; restore returns to
    it and abandons the perturbation in flight (no transfer in that cycle).
    """
    lanes = golden.values_per_cycle
    transfer = valid & ready & ~restore
    state = saved = golden.state
    remaining, shown, used = 0, [], []
    for cycle in range(len(valid)):
        if save[cycle]:
            saved = state
        if restore[cycle]:
            state, remaining = saved, 0
        elif transfer[cycle]:
            remaining = remaining or length
            count = min(lanes, remaining)
            shown.append(state)
            used.append(count)
            state, remaining = golden.advance(state, count), remaining - count
    expected = golden.values_at(np.asarray(shown, dtype=np.int64))
    belongs = np.arange(lanes)[None, :] < np.asarray(used, dtype=np.int64).reshape(-1, 1)
    return np.flatnonzero(transfer), expected, belongs


def cosim_configs(configs: Sequence[GeneratorConfig], cycles: int,
                  simulator: str = "verilator", seed: int = 0,
                  ready_probability: float = 0.85, lengths: Sequence[int] | int = 100) -> dict:
    """Co-simulate ``configs`` side by side for ``cycles`` cycles; per-config verdicts.

    ``lengths``: the perturbation length of each pre-generated pool (one value for all).
    """
    configs = list(configs)
    if isinstance(lengths, int):
        lengths = [lengths] * len(configs)
    RngCosimOptions(cycles=cycles)                    # validates --cycles
    for config, length in zip(configs, lengths):
        if isinstance(config, PregenConfig) and length >= 1 << config.length_bits:
            raise ConfigError("length", f"an integer with 1 <= value < 2^length_bits = "
                              f"{1 << config.length_bits}", length)
    started = time.perf_counter()
    top = SideBySide(configs, lengths)
    verilog = to_verilog(top, "rng_side_by_side")
    elaborate_s = time.perf_counter() - started
    stimulus = make_stimulus(configs, cycles, seed, ready_probability)
    with tempfile.TemporaryDirectory(prefix="zoforge-rng-cosim-") as folder:
        data = Path(folder)
        np.save(data / "stimulus.npy", _pack(stimulus))
        result = run_cocotb(verilog=verilog, toplevel="rng_side_by_side",
                            test_module="zoforge.sim.benches.rng",
                            args={"observe_bytes": -(-len(top.observe) // 8)},
                            simulator=simulator, data_dir=data)
        observed = np.load(data / "observed.npy") if result.passed else None
    report = {"simulator": simulator, "cycles": cycles, "elaborate_s": elaborate_s,
              "build_s": result.build_s, "run_s": result.run_s, "passed": result.passed,
              "failures": result.failures, "configs": []}
    if observed is None:
        report["bit_exact"] = False
        return report
    loop_s = result.results["loop_s"]
    report["cycles_per_s"] = cycles / loop_s if loop_s > 0 else float("inf")
    bits = np.unpackbits(observed, axis=1, bitorder="little")
    offset = len(configs)
    for index, (config, length) in enumerate(zip(configs, lengths)):
        golden = config.golden()
        lanes, width = golden.values_per_cycle, golden.width
        observed_lanes = _unpack_lanes(bits, offset, lanes, width)
        offset += lanes * width
        valid = bits[:, index].astype(bool)
        ready, save, restore = (stimulus[k][:, index] for k in ("ready", "save", "restore"))
        transfer_cycles, expected, belongs = expected_transfers(golden, length, valid, ready,
                                                                save, restore)
        got = observed_lanes[transfer_cycles]
        mismatch = got != expected
        described = config.to_dict()
        if isinstance(config, PregenConfig):
            described["length"] = length
        report["configs"].append({
            **described, "name": design_name(config), "W": width, "F": golden.frac_bits,
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


def cosim_rng(config: GeneratorConfig, options: RngCosimOptions | None = None) -> dict:
    """Co-simulate one generator configuration; a flat JSON-able summary with at least
    ``bit_exact``, ``cycles``, ``cycles_per_s`` and ``simulator``."""
    options = options or RngCosimOptions()
    report = cosim_configs([config], options.cycles, options.simulator,
                           options.stimulus_seed, 1.0 - options.backpressure, options.length)
    summary = {"bit_exact": report["bit_exact"], "cycles": options.cycles,
               "cycles_per_s": report.get("cycles_per_s"), "simulator": options.simulator,
               "build_s": report["build_s"], "run_s": report["run_s"],
               "elaborate_s": report["elaborate_s"], "config_hash": config.stable_hash()}
    if report["configs"]:
        summary.update(report["configs"][0])
    else:
        summary["failures"] = report["failures"]
    return summary
