"""The co-simulation's memory limit (``MAX_COSIM_WORDS`` in sim/finetune_cosim.py) at its
boundary, apart from the generator's larger one (``MAX_WORDS``, board-sized designs): with
MiniLM at seq_len 32, ``--rtl all`` takes a batch of 4 and refuses 5 (docs/finetune.md)."""
import pytest

from zoforge.errors import ConfigError
from zoforge.golden.finetune.config import FinetuneConfig
from zoforge.hw.designs import MAX_WORDS
from zoforge.sim.finetune_cosim import MAX_COSIM_WORDS, check_rtl_limits


def test_a_batch_of_four_fits_five_does_not():
    assert MAX_COSIM_WORDS == 65_536 < MAX_WORDS
    check_rtl_limits(FinetuneConfig(batch=4, seq_len=32), "all", 384, 1536)
    with pytest.raises(ConfigError) as refused:
        check_rtl_limits(FinetuneConfig(batch=5, seq_len=32), "all", 384, 1536)
    assert f"at most {MAX_COSIM_WORDS} words" in str(refused.value)
    assert "\n" not in str(refused.value)
