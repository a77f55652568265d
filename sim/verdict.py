"""A co-simulation's verdict: ``bit_exact`` is the conjunction of named, exact comparisons.

A co-simulation compares what the RTL produced with what the golden model (or an independent
count) says, array by array. :class:`Verdict` keeps each comparison under its name, so no
comparison can drop out of ``bit_exact`` unseen: a co-simulation declares the names it must
compare (:meth:`Verdict.of` refuses a verdict missing one or naming another), ``checks``
shows each, and a run that broke off (``ran`` False) fails every one. :func:`same_values` is
the one equality: the same shape and the same integers, element by element.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Verdict", "same_values"]


def same_values(rtl, golden) -> bool:
    """``rtl`` and ``golden`` (arrays, nested lists or scalars) have the same shape and the
    same values element by element; None (nothing produced) equals nothing."""
    if rtl is None or golden is None:
        return False
    rtl, golden = np.asarray(rtl), np.asarray(golden)
    return rtl.shape == golden.shape and bool(np.array_equal(rtl, golden))


@dataclass(frozen=True)
class Verdict:
    """Named comparisons (name -> equal) of a run; ``ran``: the run completed."""

    ran: bool
    equal: dict

    @classmethod
    def of(cls, names: tuple[str, ...], ran: bool, pairs: dict) -> "Verdict":
        """Compare each ``pairs[name] = (rtl, golden)`` with :func:`same_values`; ``names``
        are the comparisons the co-simulation must make, exactly (ValueError otherwise)."""
        if set(pairs) != set(names) or not names:
            raise ValueError(f"a verdict compares exactly {list(names)} "
                             f"(got {sorted(pairs)})")
        return cls(ran, {name: bool(ran) and same_values(*pairs[name]) for name in names})

    @property
    def checks(self) -> dict[str, bool]:
        """Each comparison, False everywhere when the run did not complete."""
        return {name: self.ran and equal for name, equal in self.equal.items()}

    @property
    def failed(self) -> list[str]:
        """The names of the comparisons that failed."""
        return [name for name, equal in self.checks.items() if not equal]

    @property
    def bit_exact(self) -> bool:
        return bool(self.equal) and not self.failed
