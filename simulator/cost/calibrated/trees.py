"""Interpolation trees: one level per coordinate axis, the measured values of that axis in
order, each with the sub-tree (or, at the last axis, the median time) beneath it."""

from __future__ import annotations

import statistics


class TreeNode:
    """Sorted measured values of one axis, each with the sub-tree (or time) beneath it."""

    __slots__ = ("kids", "max_last", "vals")

    def __init__(self, vals: list[float], kids: list):
        self.vals = vals
        self.kids = kids
        self.max_last = 0.0


def build_tree(points: list[tuple[tuple, float]], depth: int) -> TreeNode | float:
    if depth == len(points[0][0]):
        # Repeated measurements of one shape: their median (plain Python: most leaves hold
        # one row, and numpy's per-call cost dominated building a profile's trees).
        return float(statistics.median(t for _, t in points))
    groups: dict[float, list] = {}
    for c, t in points:
        groups.setdefault(c[depth], []).append((c, t))
    vals = sorted(groups)
    node = TreeNode(vals, [build_tree(groups[v], depth + 1) for v in vals])
    node.max_last = max(c[-1] for c, _ in points)
    return node
