"""Pareto fronts and how close two fronts are (every objective minimised).

* :func:`pareto_mask`: which points no other point dominates;
* :func:`pareto_mask_within`: the same when a point is dominated only by one that is no
  worse in every objective and better beyond a tolerance in at least one (a difference
  within the noise never removes a point);
* :func:`hypervolume`: the volume dominated by a front up to a reference point (exact,
  by slicing along the last objective; fine for the tens of points a sweep has);
* :func:`igd`: inverted generational distance, the mean distance from each point of a
  reference front to the nearest point of another front;
* :func:`normaliser`: maps objectives to [0, 1] over a set of points, so that fronts on
  LUTs and watts can be compared on one scale.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["pareto_mask", "pareto_mask_within", "hypervolume", "igd", "normaliser"]

Vector = Sequence[float]


def _dominates(a: Vector, b: Vector) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def pareto_mask(points: Sequence[Vector]) -> list[bool]:
    """``True`` for each point that no other point dominates (duplicates all stay)."""
    return [not any(_dominates(other, p) for other in points) for p in points]


def pareto_mask_within(points: Sequence[Vector], tolerance) -> list[bool]:
    """``True`` for each point that no other point dominates beyond ``tolerance(i, j, k)``
    (the gap in objective ``k`` below which points ``i`` and ``j`` count as equal; 0 gives
    :func:`pareto_mask`): a point is dominated only by one that is no worse in every
    objective and better beyond the tolerance in at least one. Every point
    :func:`pareto_mask` keeps, this keeps too."""
    def dominates(i: int, j: int) -> bool:
        a, b = points[i], points[j]
        return (all(x <= y for x, y in zip(a, b))
                and any(x < y - tolerance(i, j, k) for k, (x, y) in enumerate(zip(a, b))))
    return [not any(dominates(i, j) for i in range(len(points)) if i != j)
            for j in range(len(points))]


def hypervolume(points: Sequence[Vector], reference: Vector) -> float:
    """Volume dominated by ``points`` and bounded by ``reference`` (points beyond the
    reference in any objective add nothing)."""
    inside = [tuple(p) for p in points if all(x < r for x, r in zip(p, reference))]
    return _volume(inside, tuple(reference))


def _volume(points: list[tuple], reference: tuple) -> float:
    if not points:
        return 0.0
    if len(reference) == 1:
        return reference[0] - min(p[0] for p in points)
    ordered = sorted(points, key=lambda p: p[-1])
    total = 0.0
    for index, point in enumerate(ordered):
        upper = ordered[index + 1][-1] if index + 1 < len(ordered) else reference[-1]
        if upper > point[-1]:
            total += (upper - point[-1]) * _volume([p[:-1] for p in ordered[:index + 1]],
                                                   reference[:-1])
    return total


def igd(reference_front: Sequence[Vector], front: Sequence[Vector]) -> float:
    """Mean Euclidean distance from each point of ``reference_front`` to ``front``."""
    if not reference_front:
        return 0.0
    if not front:
        return math.inf
    return sum(min(math.dist(r, p) for p in front) for r in reference_front) / len(
        reference_front)


def normaliser(points: Sequence[Vector]):
    """A function mapping a vector to [0, 1] per objective over ``points``' range."""
    lows = [min(column) for column in zip(*points)]
    highs = [max(column) for column in zip(*points)]

    def scale(vector: Vector) -> tuple:
        return tuple((x - lo) / (hi - lo) if hi > lo else 0.0
                     for x, lo, hi in zip(vector, lows, highs))
    return scale
