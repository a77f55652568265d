"""The softmax unit's input selector's golden model (:class:`zoforge.hw.link.select.
FrameSelect`): whole frames from several sources to one sink, in the host's order.

Semantics: source i offers its frames in order (a frame: its beats, the last one with
``tlast``); the host queues one source index a frame. The output is, for each queued index
in order, the next frame of that source, its beats unchanged (the same ``tdata`` words, the
same ``tlast`` marks); a source's frames are never reordered, split or interleaved with
another's, and a frame with no entry queued is not passed.
"""
from __future__ import annotations

from zoforge.errors import ConfigError

__all__ = ["select_frames"]


def select_frames(frames, order) -> list:
    """The output frames (each a list of words): ``frames[i]`` source i's frames in order,
    ``order`` the queued source indices; a ConfigError if an index names no source or a
    source has fewer frames than entries queued for it."""
    taken = [0] * len(frames)
    out = []
    for position, source in enumerate(order):
        if not 0 <= source < len(frames):
            raise ConfigError("order", f"source indices in 0..{len(frames) - 1}",
                              f"entry {position}: {source}")
        if taken[source] == len(frames[source]):
            raise ConfigError("order", f"at most {len(frames[source])} entries for source "
                              f"{source} (its frames)", f"entry {position}")
        out.append(list(frames[source][taken[source]]))
        taken[source] += 1
    return out
