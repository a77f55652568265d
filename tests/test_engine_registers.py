# amaranth: UnusedElaboratable=no
"""The engine's register map: docs/engine.md's table against ``hw/engine/regmap.py``, and the
generated engine against that table from the bus side (cocotb + cocotbext-axi, one build
per simulator, every check in one simulation: ``zoforge.sim.benches.engine_registers``).

What the documented table says (address, access, reset value, bits) is the contract; the
test reads it from the page, checks it against the register map the register file is
decoded from, and then checks the RTL against it: reset values, read-back of the written
bits, read-only registers ignoring writes, partial writes (SLVERR, nothing written),
writes while busy (ignored, except IRQ_EN), IRQ_EN gating ``irq`` through whole jobs, the
address and data channels in either order, and stalled response channels. Four jobs run
in between and their outputs are checked against the golden model: the job during which
everything is rewritten, and the one whose tables get partial writes, must still compute
with their own parameters.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from zoforge.hw.pe.axil import OKAY, SLVERR
from zoforge.hw.engine.config import EngineConfig
from zoforge.hw.engine.regmap import (CTRL_BITS, GELU_CTRL_BITS, GELU_REGISTER_MAP,
                                      GELU_TABLES, KINDS, PARAM_TABLES, REGISTER_MAP,
                                      STATUS_BITS, register_map, param_tables)
from zoforge.hw.engine.registers import RegisterFile
from zoforge.sim.benches.engine_registers import ONES, PATTERN, STROBES   # what it writes
from zoforge.sim.engine_cosim import EngineCosim, random_job

DOC = Path(__file__).resolve().parent.parent / "docs" / "engine.md"
# rows != cols != pack and three different buffer limits, so that INFO and MAX_* fields
# cannot be swapped unnoticed
CONFIG = EngineConfig(rows=3, cols=2, pack=1, max_m=20, max_k=24, max_n=14)
BENCH = "zoforge.sim.benches.engine_registers"

#: How docs/engine.md writes each kind of register's access (the kinds of regmap.KINDS).
ACCESS = {"ctrl": "RW (idle)", "status": "R, W1C", "rw": "RW", "config": "RW (idle)",
          "counter": "R", "info": "R"}
TABLE_ACCESS = "W (idle)"


# -- the documented table ---------------------------------------------------------------

def doc_table(page: Path = DOC) -> dict[str, dict]:
    """Rows of the register table in docs/engine.md, by register name."""
    text = page.read_text()
    section = text[text.index("### Registers"):text.index("## Parameters")]
    rows = {}
    for line in section.splitlines():
        if not line.startswith("| 0x"):
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        address, name, access, reset, bits, meaning = cells
        assert name not in rows, f"{name} twice in the table"
        rows[name] = {"address": int(address, 16), "access": access, "reset": reset,
                      "bits": bits, "meaning": meaning}
    return rows


def field_bits(text: str) -> dict[str, int]:
    """``"0 start, 1 relu"`` -> {"start": 0, "relu": 1}."""
    return {name: int(bit) for bit, name in (item.split() for item in text.split(","))}


def width_of(text: str) -> int:
    high, low = (int(v) for v in text.split(":"))
    assert low == 0
    return high + 1


def reset_value(text: str, config: EngineConfig) -> int:
    """A reset cell: a number or an expression of the build parameters."""
    names = {"R": config.rows, "C": config.cols, "pack": config.pack, "max_m": config.max_m,
             "max_k": config.max_k, "max_n": config.max_n}
    return int(eval(text, {"__builtins__": {}}, names))     # noqa: S307 (the doc's own cell)


def readable_mask(name: str, row: dict) -> int:
    """The bits a write to a writable register sets (CTRL: its fields except start)."""
    if "," in row["bits"] or name == "CTRL":
        fields = field_bits(row["bits"])
        return sum(1 << bit for field, bit in fields.items() if field != "start")
    return (1 << width_of(row["bits"])) - 1


DOCUMENTED = doc_table()
#: The rows of a build without gelu (the bench's engine); the GELU rows are checked apart.
TABLE = {name: row for name, row in DOCUMENTED.items()
         if name not in GELU_REGISTER_MAP and name not in GELU_TABLES}
WRITABLE = [n for n, r in TABLE.items() if r["access"] in ("RW", "RW (idle)")]
READ_ONLY = [n for n, r in TABLE.items() if r["access"] in ("R", "R, W1C")]


def test_the_documented_table_is_the_register_map():
    assert set(ACCESS) == set(KINDS)          # a new kind of register must be documented
    assert set(DOCUMENTED) == set(register_map(True)) | set(param_tables(True))
    assert set(TABLE) == set(REGISTER_MAP) | set(PARAM_TABLES)
    assert set(GELU_CTRL_BITS.values()).isdisjoint(CTRL_BITS.values())
    for name, register in register_map(True).items():
        row = DOCUMENTED[name]
        assert row["address"] == register.address, name
        assert row["access"] == ACCESS[register.kind], name
        assert row["meaning"] == register.doc, name
        if register.kind == "ctrl":
            assert field_bits(row["bits"]) == CTRL_BITS
        elif register.kind == "status":
            assert field_bits(row["bits"]) == STATUS_BITS
        else:
            assert width_of(row["bits"]) == register.width, name
        if register.kind != "info":
            assert row["reset"] == "0", name
    for name, table in param_tables(True).items():
        row = DOCUMENTED[name]
        assert (row["address"], row["access"], row["reset"], row["meaning"]) == (
            table.address, TABLE_ACCESS, "—", table.doc)
        assert width_of(row["bits"]) == table.shape.width, name
    addresses = [row["address"] for row in DOCUMENTED.values()]
    assert len(set(addresses)) == len(addresses)
    assert all(a % 4 == 0 for a in addresses)


@pytest.mark.parametrize("config", [CONFIG, EngineConfig(rows=8, cols=8, pack=2),
                                    EngineConfig(rows=1, cols=64, pack=8, max_n=64)])
def test_documented_build_constants_are_the_register_files(config):
    info = RegisterFile(config).info
    assert set(info) == {n for n, r in REGISTER_MAP.items() if r.kind == "info"}
    for name, value in info.items():
        assert reset_value(TABLE[name]["reset"], config) == value, name


def test_the_table_parser_sees_a_wrong_row(tmp_path):
    # the check can fail: one wrong address in a copy of the page
    page = tmp_path / "engine.md"
    page.write_text(DOC.read_text().replace("| 0x10 | K |", "| 0x40 | K |"))
    assert doc_table(page)["K"]["address"] == 0x40 != REGISTER_MAP["K"].address


# -- the RTL from the bus side ---------------------------------------------------------------

def _jobs() -> list:
    rng = np.random.default_rng(31)
    return [random_job(rng, 7, 5, 4),                                    # IRQ_EN = 0
            random_job(rng, 5, 6, 3, raw=True),                          # IRQ_EN = 1
            random_job(rng, 20, 24, 14, per_channel=True, relu=True),    # rewritten while busy
            random_job(rng, 8, 9, 5, per_channel=True)]                  # partial table writes


@pytest.fixture(scope="module")
def bus(simulator):
    cosim = EngineCosim(CONFIG, simulator=simulator)
    results, info = cosim.run(_jobs(), bench=BENCH)
    return results, info


def test_every_job_computes_with_its_own_parameters(bus):
    results, _ = bus
    assert len(results) == 4
    for result in results:
        assert result.bit_exact, (result.shape, result.mismatches)
        m, k, n = result.shape
        tiles = -(-m // CONFIG.rows) * -(-n // CONFIG.cols)
        assert result.array_cycles == tiles * -(-k // CONFIG.pack) * CONFIG.pack


def test_reset_values_are_the_documented_ones(bus):
    _, info = bus
    assert info["irq_after_reset"] == 0
    for name, row in TABLE.items():
        if name in REGISTER_MAP:
            assert info["reset"][name] == reset_value(row["reset"], CONFIG), name
            assert info["reset_responses"][name] == OKAY
    assert info["reset"]["INFO"] == 3 | 2 << 8 | 1 << 16          # by hand, for this build
    assert [info["reset"][n] for n in ("MAX_M", "MAX_K", "MAX_N")] == [20, 24, 14]


def test_unmapped_and_table_addresses_read_zero_and_unmapped_writes_change_nothing(bus):
    _, info = bus
    assert all(value == [0, OKAY] for value in info["unmapped"].values())
    assert set(info["unmapped"]) >= {hex(t.address) for t in PARAM_TABLES.values()}
    assert info["unmapped_writes"] == [OKAY] * len(info["unmapped_writes"])
    assert all(value == 0 for value in info["unmapped_after_writes"].values())
    # every register as the idle writes left it: written ones back at 0, constants intact
    for name in REGISTER_MAP:
        expected = 0 if name in WRITABLE else reset_value(TABLE[name]["reset"], CONFIG)
        assert info["after_unmapped_writes"][name] == expected, name


def test_writable_registers_read_back_their_documented_bits(bus):
    _, info = bus
    assert WRITABLE == ["CTRL", "IRQ_EN", "M", "K", "N", "MULT", "SHIFT"]
    for name in WRITABLE:
        mask = readable_mask(name, TABLE[name])
        record = info["idle"][name]
        assert record["ones"] == [OKAY, ONES & mask], name
        assert record["pattern"] == [OKAY, PATTERN & mask], name
        assert record["zero"] == [OKAY, 0], name
    assert readable_mask("CTRL", TABLE["CTRL"]) == 0b11110          # start reads 0
    assert readable_mask("SHIFT", TABLE["SHIFT"]) == 0x3F


def test_read_only_registers_ignore_writes(bus):
    _, info = bus
    assert READ_ONLY == ["STATUS", "CYCLES", "ARRAY_CYCLES", "INFO", "MAX_M", "MAX_K",
                         "MAX_N"]
    for name in READ_ONLY:                              # idle, after reset
        record = info["idle"][name]
        value = reset_value(TABLE[name]["reset"], CONFIG)
        for key in ("ones", "pattern", "zero"):
            assert record[key] == [OKAY, value], (name, key)
    after_job = info["readonly_after_job"]
    assert after_job["CYCLES"]["before"] > 0 and after_job["ARRAY_CYCLES"]["before"] > 0
    for name in READ_ONLY:                              # after a job: counters not 0
        record = after_job[name]
        assert record["writes"] == [[OKAY, record["before"]]] * 3, name


def test_partial_writes_change_nothing_and_answer_slverr(bus):
    results, info = bus
    for name in REGISTER_MAP:
        record = info["idle"][name]
        held = record["pattern"][1]
        assert len(record["partial"]) == len(STROBES) == 9    # every contiguous strobe
        for offset, length, response, value in record["partial"]:
            assert (response, value) == (SLVERR, held), (name, offset, length)
    partial = info["job3_partial"]
    for name in ("BIAS", "COL_MULT", "COL_SHIFT"):
        assert partial[name] == [SLVERR] * len(STROBES), name
    assert partial["CTRL"] == SLVERR
    assert partial["status_after_partial_start"] == 0         # no job was started
    assert results[3].bit_exact                               # its tables were not touched


def test_irq_stays_low_with_irq_en_0_and_follows_done_with_irq_en_1(bus):
    results, info = bus
    windows, edges = info["windows"], info["irq_edges"]
    assert info["job0_status"] & 0b11 == 0b10                # done, not busy
    assert info["job0_irq_while_done"] == 0
    assert not results[0].irq
    assert not [e for e in edges if windows[0][0] <= e[0] <= windows[0][1]]
    assert info["irq_after_irq_en"] == 1                     # done & IRQ_EN
    assert info["irq_after_clear"] == 0 and info["status_after_clear"] == 0
    assert results[1].irq and info["job1_irq_at_end"] == 1
    rises = [cycle for cycle, value in edges if value == 1]
    assert any(windows[1][0] < cycle <= windows[1][1] for cycle in rises)
    assert info["job2_irq_at_end"] == 0 and not results[2].irq   # IRQ_EN cleared while busy
    assert results[3].irq
    assert len(rises) == 3               # IRQ_EN set while done, job 1, job 3


def test_writes_while_busy_are_ignored_except_irq_en(bus):
    results, info = bus
    busy = info["while_busy"]
    assert busy["status_before"] & 1 and busy["status_after"] & 1     # all of it while busy
    assert busy["cycles_after"] > busy["cycles_before"]
    assert set(busy["responses"].values()) == {OKAY}
    job = _jobs()[2]
    m, k, n = job.shape
    held = {"M": m, "K": k, "N": n, "MULT": 0, "SHIFT": 0, "IRQ_EN": 0,
            "CTRL": 0b11010}                  # relu, per_channel, bias_en (not raw)
    for name, value in held.items():
        assert busy["registers"][name] == value, name
        assert info["after_job2"][name] == value, name
    assert busy["registers"]["STATUS"] & 0b11 == 0b01
    # the start written while busy was not queued: done, not busy, and the counters are
    # those of one job
    assert results[2].bit_exact and info["after_job2"]["STATUS"] & 0b11 == 0b10
    tiles = -(-m // CONFIG.rows) * -(-n // CONFIG.cols)
    assert results[2].array_cycles == tiles * k


def test_address_and_data_may_arrive_in_either_order(bus):
    _, info = bus
    for case, first, second, value in (("w_late", "aw", "w", 0x0123),
                                       ("aw_late", "w", "aw", 0x0456)):
        pins = info[case]["pins"]
        waiting = [p for p in pins if p[f"{first}valid"] and not p[f"{second}valid"]]
        assert len(waiting) >= 3, case                      # really in different cycles
        assert not any(p["awready"] or p["wready"] for p in waiting)
        taken = [p for p in pins if p["awvalid"] and p["awready"]]
        assert len(taken) == 1 and taken[0]["wvalid"] and taken[0]["wready"]
        assert any(p["bvalid"] for p in pins)
        assert info[case]["M"] == value


def test_a_stalled_response_holds_the_next_transfer(bus):
    _, info = bus
    stalled = info["b_stalled"]
    assert stalled["done_while_stalled"] == [False, False]
    assert stalled["responses"] == [OKAY, OKAY]
    assert (stalled["K"], stalled["N"]) == (0x0789, 0x0ABC)
    reads = info["r_stalled"]
    assert reads["done_while_stalled"] == [False, False]
    assert reads["reads"] == [[3 | 2 << 8 | 1 << 16, OKAY], [CONFIG.max_k, OKAY]]
