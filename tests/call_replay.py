"""A second walk of the perturbation generator over a fine-tuning's call log, honouring only
each call's flags and shape (save, restore, sign): the z every call drew, derived apart from
the units that drew them (tests/test_zo_step_derivations.py,
tests/test_finetune_generators.py)."""
from __future__ import annotations

from zoforge.golden.finetune.calls import AdapterCall, UpdateCall


def walk_calls(log, generator, draw) -> list[tuple[object, object]]:
    """Each logged adapter call and update with the z ``draw(r, n)`` gives it (None for an
    unperturbed call), ``generator`` saved and restored as the calls' flags say."""
    saved, out = None, []
    for call in log:
        if isinstance(call, (AdapterCall, UpdateCall)):
            if getattr(call, "save", False):
                saved = generator.save()
            if call.restore:
                generator.restore(saved)
            drawn = isinstance(call, UpdateCall) or call.sign != 0
            out.append((call, draw(*call.master.shape) if drawn else None))
    return out
