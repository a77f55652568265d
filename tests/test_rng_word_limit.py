"""A Gaussian array's output word must fit Amaranth's widest signal (issue 34: ``--n-rng
4096`` failed with Amaranth's OverflowError after half a minute of elaboration): refused
before any work, accepted exactly at the limit."""
import pytest

from zoforge.errors import ConfigError
from zoforge.golden.rng.gaussian import MAX_LANES, MAX_WORD_BITS, GaussianConfig


@pytest.mark.parametrize("bits, terms", [(16, 3), (20, 16), (20, 1), (18, 8)])
def test_n_rng_at_the_word_limit_is_accepted_and_one_past_it_refused(bits, terms):
    value_bits = bits + (terms - 1).bit_length()       # a sum of `terms` signed b-bit values
    limit = min(MAX_WORD_BITS // value_bits, MAX_LANES)
    config = GaussianConfig(n_rng=limit, bits=bits, terms=terms)
    assert config.value_bits == value_bits == config.golden().width
    assert limit * value_bits <= MAX_WORD_BITS < (limit + 1) * value_bits or limit == MAX_LANES
    with pytest.raises(ConfigError) as error:
        GaussianConfig(n_rng=limit + 1, bits=bits, terms=terms)
    assert error.value.parameter in ("n_rng", "bits")
    if limit < MAX_LANES and error.value.parameter == "n_rng":
        assert f"at most {limit} with bits {bits}" in str(error.value)
