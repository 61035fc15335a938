"""GEMM table rows cleaned before interpolation: an isolated slower point is noise, a
slowdown most shapes share at one M is the kernel the engine runs there."""

from __future__ import annotations

import itertools
import math

# A GEMM is "slower than at the next measured M" when it takes this much longer there...
SLOWER_MARGIN = 1.02

# ...and such slowdowns at one (dtype, M) are the kernel's, not noise, when the share of
# shapes showing one exceeds 1/2 by this many binomial standard deviations (sign test).
SYSTEMATIC_SIGMAS = 4.0


def _by_shape(rows: list[list]) -> list[list[list]]:
    """GEMM rows grouped by (N, K, dtype), each group in increasing M."""
    groups: dict[tuple, list[list]] = {}
    for r in rows:
        groups.setdefault((r[1], r[2], r[3]), []).append(r)
    return [sorted(g, key=lambda r: r[0]) for g in groups.values()]


def systematic_gemm_slowdowns(rows: list[list]) -> set[tuple[str, int]]:
    """(dtype, M) where most measured shapes run slower than at the next larger M.

    Engines pick GEMM kernels by M (vLLM's CUTLASS FP8 dispatch), so a slow configuration
    at one M shows up across shapes: on the shipped H200 table FP8 at M=32 is >2% slower
    than at M=48 for 67% of 323 shapes (median +13% on N, K >= 4096); on B200/B300 FP8 at
    M=1 for 90%/99% (about +14 µs per GEMM). Timer noise slows a shape at random: at any
    other (dtype, M) the share stays within 1.5 standard deviations of one half.
    """
    return _slowdowns_in(_by_shape(rows))


def _slowdowns_in(groups: list[list[list]]) -> set[tuple[str, int]]:
    slower: dict[tuple[str, int], list[bool]] = {}
    for group in groups:
        for a, b in itertools.pairwise(group):
            slower.setdefault((a[3], a[0]), []).append(a[4] > SLOWER_MARGIN * b[4])
    return {key for key, v in slower.items()
            if len(v) >= 8 and sum(v) / len(v) > 0.5 + SYSTEMATIC_SIGMAS * 0.5 / math.sqrt(len(v))}


def monotone_gemm_rows(rows: list[list]) -> list[list]:
    """Each GEMM time capped by the fastest measured time at a larger M, unless the
    slowdown is systematic (`systematic_gemm_slowdowns`).

    A GEMM with fewer rows could run the larger one's kernel on padded input, so an
    isolated slower point is launch or clock noise (B200 FP8: 8192x8192 at M=2 timed
    38 µs, at M=4 19 µs); left in, such a spike makes a batch of 2 decode slower than a
    batch of 8. A slowdown most shapes share at that M is the kernel the engine really
    runs there, and is kept as measured.
    """
    groups = _by_shape(rows)
    keep = _slowdowns_in(groups)
    out: list[list] = []
    for group in groups:
        best = math.inf
        for r in reversed(group):
            as_measured = r[4] <= best or (r[3], r[0]) in keep
            out.append(r if as_measured else [*r[:4], best, *r[5:]])
            best = min(best, r[4])
    return out
