"""The priced MiniLM step the docs quote (docs/finetune.md, the acceptance command of issue
32) read back from the price itself: seconds, clock, DSP and GOPS per DSP as printed."""
import re
from pathlib import Path

from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.reports.accel_cost import board_step_fields

DOC = Path(__file__).parent.parent / "docs" / "finetune.md"


def test_the_documented_acceptance_line_is_the_price():
    text = " ".join(DOC.read_text().split())
    quoted = re.search(r"prints `on the board ([\d.]+) s per step at (\d+) MHz .*?; "
                       r"([\d,]+) DSP, ([\d.]+) GOPS per DSP`", text)
    assert quoted, "the acceptance line is not in docs/finetune.md"
    cfg = FinetuneConfig(blocks=6, batch=4, seq_len=128, queries=2)
    fields = board_step_fields(cfg, hidden=384, ffn=1536, heads=12, classes=2, board="zcu102")
    seconds, mhz, dsp, gops = quoted.groups()
    assert f"{fields['seconds_per_step_at_fmax']:.4f}" == seconds
    assert f"{fields['fmax_mhz']:.0f}" == mhz
    assert f"{fields['dsp']:,}" == dsp
    assert f"{fields['gops_per_dsp']:.3f}" == gops
