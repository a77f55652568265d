"""The priced MiniLM step the docs quote (docs/finetune.md, the acceptance command of issue
32; docs/accelerator.md) read back from the price itself: seconds, clock, DSP and GOPS per
DSP as printed; and the composed board-sized design's table checked by its own sums."""
import re
from pathlib import Path

import pytest

from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.boards.registry import get_board
from zoforge.reports.accel_cost import board_step_fields
from zoforge.reports.step_price import ENGINE_FMAX_BY_PES, layer_fmax, link_fmax

DOC = Path(__file__).parent.parent / "docs" / "finetune.md"
ACCELERATOR_DOC = DOC.parent / "accelerator.md"


@pytest.fixture(scope="module")
def fields():
    cfg = FinetuneConfig(blocks=6, batch=4, seq_len=128, queries=2)
    return board_step_fields(cfg, hidden=384, ffn=1536, heads=12, classes=2, board="zcu102")


def test_the_documented_acceptance_line_is_the_price(fields):
    text = " ".join(DOC.read_text().split())
    quoted = re.search(r"prints `on the board ([\d.]+) s per step at (\d+) MHz .*?; "
                       r"([\d,]+) DSP, ([\d.]+) GOPS per DSP`", text)
    assert quoted, "the acceptance line is not in docs/finetune.md"
    seconds, mhz, dsp, gops = quoted.groups()
    assert f"{fields['seconds_per_step_at_fmax']:.4f}" == seconds
    assert f"{fields['fmax_mhz']:.0f}" == mhz
    assert f"{fields['dsp']:,}" == dsp
    assert f"{fields['gops_per_dsp']:.3f}" == gops


def test_docs_accelerator_quotes_the_same_step(fields):
    """docs/accelerator.md's "Left to do": the step, its clock and both GOPS per DSP."""
    text = " ".join(ACCELERATOR_DOC.read_text().split())
    quoted = re.search(r"the priced step is \*\*([\d.]+) ms at ([\d.]+) MHz\*\* \([^()]*?; "
                       r"[\d,]+ cycles, ([\d,]+) DSP, ([\d.]+) GOPS per DSP, ([\d.]+) GOPS per "
                       r"DSP of the device", text)
    assert quoted, "the priced step is not in docs/accelerator.md"
    ms, mhz, dsp, gops, device = quoted.groups()
    assert f"{fields['seconds_per_step_at_fmax'] * 1e3:.1f}" == ms
    assert float(mhz) == fields["fmax_mhz"]
    assert f"{fields['dsp']:,}" == dsp
    assert f"{fields['gops_per_dsp']:.3f}" == gops
    assert f"{fields['gops_per_device_dsp']:.3f}" == device


def test_docs_accelerator_cost_quotes_the_same_linked_step(fields):
    """docs/accelerator-cost.md's "The attention links": the search's choice, its step and
    clock as the price gives them."""
    path = DOC.parent / "accelerator-cost.md"
    text = " ".join(path.read_text().split())
    quoted = re.search(r"two (\d+)-lane softmax units on links, \*\*([\d.]+) ms at ([\d.]+) "
                       r"MHz\*\*", text)
    assert quoted, "the linked step is not in docs/accelerator-cost.md"
    lanes, ms, mhz = quoted.groups()
    accel = fields["accelerator"]
    assert accel["link"] and accel["softmax_units"] == 2 and accel["softmax_lanes"] == int(lanes)
    assert f"{fields['seconds_per_step_at_fmax'] * 1e3:.2f}" == ms
    assert f"{fields['fmax_mhz']:.1f}" == mhz


def test_the_composed_design_table_adds_up_and_is_the_prices_clocks():
    """The composed build's table in docs/accelerator.md: the design's row is count x each
    unit's (summed here, not read from the report), its percentages of the XCZU9EG's
    capacities, and the engine's and the ZO layer's Fmax the price's points."""
    text = ACCELERATOR_DOC.read_text()
    start = text.index("| unit | count | LUT | FF | BRAM18 | DSP | Fmax (yosys-estimate) |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        rows.append(line)
        if "**the design**" in line:
            break
    units = [[cell.strip() for cell in row.strip("| ").split("|")] for row in rows[:-1]]
    design = [cell.strip() for cell in rows[-1].strip("| ").split("|")]

    def number(cell):
        return int(re.match(r"\**([\d,]+)", cell).group(1).replace(",", ""))

    capacities = get_board("zcu102").capacities
    for column, key in enumerate(("LUT", "FF", "BRAM18", "DSP"), start=2):
        total = sum(int(unit[1]) * number(unit[column]) for unit in units)
        assert number(design[column]) == total, key
        assert f"({100 * total / capacities[key]:.1f} %)" in design[column], key
    fmax = [float(unit[6].split()[0]) for unit in units]
    sizes = [re.search(r"(\d+) x (\d+)", unit[0]).groups() for unit in units[:2]]
    engine_pes, layer_pes = (int(rows) * int(cols) for rows, cols in sizes)
    assert fmax[0] == dict(ENGINE_FMAX_BY_PES["zcu102"])[engine_pes]   # the price's point
    assert layer_fmax("zcu102", layer_pes)[0] <= fmax[1]           # never priced above it
    # the clock: the lowest of the sync units' (the softmax units' their own; a link's its
    # engine side, `clk`, the price's point by its lanes)
    sync = [mhz for unit, mhz in zip(units, fmax) if not unit[0].startswith("softmax")]
    links = [unit for unit in units if unit[0].startswith("attention link")]
    for unit in links:
        lanes = int(re.search(r"into (\d+) lanes", unit[0]).group(1))
        assert float(unit[6].split()[0]) == link_fmax("zcu102", lanes)[0]
    assert f"**{min(sync):.0f} MHz**" in design[6]
