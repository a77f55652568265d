"""The planner's count of the array's input skew (``skew_register_bits``, hw/pe/array.py)
against the registers the RTL assigns: every ``a_skew``/``b_skew`` register's width from the
array's own synchronous statements, and the flags' chains (alike in every row, merged by
synthesis) as their distinct stages."""
import re

import pytest
from amaranth.hdl import Fragment

from zoforge.hw.pe.array import SystolicArray, skew_register_bits


@pytest.mark.parametrize("rows, cols, paired", [(1, 1, False), (3, 2, False), (4, 4, True),
                                                (8, 3, True), (6, 5, False), (64, 8, True)])
def test_skew_count_is_the_rtl_s_registers(rows, cols, paired):
    fragment = Fragment.get(SystolicArray(rows, cols, paired=paired), None)
    widths = {}
    for statement in fragment.statements.get("sync", []):
        match = re.fullmatch(r"(a|b|flags)_skew_\d+_(\d+)", statement.lhs.name)
        if match:
            widths[statement.lhs.name] = (match[1], match[2], len(statement.lhs))
    operands = sum(width for kind, _, width in widths.values() if kind != "flags")
    flag_stages = {stage for kind, stage, _ in widths.values() if kind == "flags"}
    units = rows // 2 if paired else rows
    assert len(flag_stages) == max(units - 1, 0)
    assert {width for kind, _, width in widths.values() if kind == "flags"} <= {3}
    assert operands + 3 * len(flag_stages) == skew_register_bits(rows, cols, paired)
    assert operands > 0 or (units == 1 and cols == 1)
