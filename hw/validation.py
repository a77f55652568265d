"""Parameter validation inside Amaranth component constructors."""
from __future__ import annotations

import functools

from zoforge.errors import ConfigError

__all__ = ["config_checked"]


def config_checked(init):
    """Decorate a component's ``__init__`` that may raise :class:`ConfigError`.

    Amaranth warns (``UnusedElaboratable``) about every elaboratable that is created and
    never elaborated, including one whose constructor rejected its parameters. An invalid
    configuration is already reported as a one-line error, so the warning is silenced then.
    """
    @functools.wraps(init)
    def checked(self, *args, **kwargs):
        try:
            init(self, *args, **kwargs)
        except ConfigError:
            self._MustUse__silence = True
            raise
    return checked
