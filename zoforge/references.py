"""Import references: ``"package.module:attribute"`` strings that registries hold in place
of the objects, so that listing what is registered (``zoforge --help``) imports nothing and
using one entry imports only its own modules.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["resolve", "is_reference"]


def is_reference(value: Any) -> bool:
    """Whether ``value`` is an import reference (a ``"module:attribute"`` string)."""
    return isinstance(value, str) and ":" in value


def resolve(reference: str) -> Any:
    """The object ``reference`` (``"package.module:attribute"``, the attribute may be
    dotted) names; importing its module."""
    module_name, _, path = reference.partition(":")
    if not module_name or not path:
        raise ValueError(f"not an import reference (module:attribute): {reference!r}")
    value = importlib.import_module(module_name)
    for name in path.split("."):
        value = getattr(value, name)
    return value
