# amaranth: UnusedElaboratable=no
"""The array's read stage (``read_stage``, hw/pe/array.py): the read-out's multiplexer in
two registered stages, ``sel`` one cycle earlier (``drain_lead`` C): the tiles drained as
without it, at the feeders' minimum interval and at the read-out's own (R)."""
import importlib.util
from functools import partial
from pathlib import Path

import pytest

from zoforge.hw.pe.array import (READ_GROUP_BITS, SystolicArray, drain_lead,
                                 min_tile_interval, read_out_interval)

_spec = importlib.util.spec_from_file_location(
    "_pe_array_tests", Path(__file__).with_name("test_pe_array.py"))
_base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_base)


def _run(rows, cols, tiles, **kw):
    """``test_pe_array``'s tile runner on arrays with the read stage."""
    plain = _base.SystolicArray
    _base.SystolicArray = partial(SystolicArray, read_stage=True)
    try:
        return _base._run_tiles(rows, cols, tiles, skewed_drain=True, **kw)
    finally:
        _base.SystolicArray = plain


@pytest.mark.parametrize("rows, cols, k, paired", [
    (2, 3, 1, False), (3, 2, 2, False), (4, 3, 1, True), (8, 4, 2, True),
    (20, 2, 1, False), (34, 3, 2, True)])
def test_read_stage_back_to_back_at_the_feeders_minimum(rows, cols, k, paired):
    """Rows past one group of 2^READ_GROUP_BITS included (20, 34): every sum exact."""
    tiles = _base._tiles(rows, cols, k)
    for (x, w), got in zip(tiles, _run(rows, cols, tiles, paired=paired)):
        assert (got == x @ w).all()
    assert min_tile_interval(rows, cols, paired, True) == max(
        (rows // 2 if paired else rows) + rows - 2, rows)


@pytest.mark.parametrize("rows, cols, paired", [(3, 2, False), (8, 3, True), (34, 2, True)])
def test_read_stage_at_the_read_out_s_own_interval(rows, cols, paired):
    """R apart exact, as without the stage (the earlier read only widens the margin to the
    next capture; the drain's R reads a tile still bound it): one cycle closer loses sums."""
    tiles = _base._tiles(rows, cols, 1)
    bound = read_out_interval(rows, cols, skewed_drain=True)
    exact = _run(rows, cols, tiles, paired=paired, interval=bound)
    assert all((got == x @ w).all() for (x, w), got in zip(tiles, exact))
    closer = _run(rows, cols, tiles, paired=paired, interval=bound, slack=-1)
    assert any((got != x @ w).any() for (x, w), got in zip(tiles, closer))


def test_read_stage_leads_by_one_and_needs_two_unit_rows():
    assert drain_lead(8, True, True) == 8 == SystolicArray(4, 8, paired=True,
                                                          skewed_drain=True,
                                                          read_stage=True).drain_lead
    assert READ_GROUP_BITS == 4
    for kw in ({"rows": 2, "paired": True, "skewed_drain": True},
               {"rows": 1, "skewed_drain": True}, {"rows": 4}):
        with pytest.raises(ValueError):
            SystolicArray(cols=2, read_stage=True, **kw)
