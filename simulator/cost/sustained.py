"""Sustained tensor-core rates: long compute-bound GEMMs run slower than short ones.

A kernel table times each shape in a short burst on an idle GPU, at boost clocks. A
serving engine's prefill keeps the tensor cores busy for hundreds of milliseconds to
seconds; that draws more than the board's power limit, and the clocks drop. The tables
show it themselves for FP8/FP4: on H100, H200, B200 and B300 the rows that last 10 ms or
more reach 77-87% of the rate that the same (N, K) shape reaches in rows of 0.3-3 ms.
Their BF16 rows keep within the rows' own ±5% scatter, as does every dtype on A100 and
L40S, but BF16 GEMMs run back to back for seconds on H100/H200 slow down by as much as
FP8 ones (benchmarks/sustained_gemm.py; docs/fidelity.md, item 16), so a GPU whose
catalog entry holds such a direct measurement uses it (`with_measured`).

Otherwise this module reads, per dtype, the ratio of the long rows' typical efficiency to
the short rows' (each row's rate relative to the fastest row of its (N, K)), and the
calibrated timer slows the compute-bound part of an op by it:
t' = t · max(c / s, m) / max(c, m), with c and m the op's compute and memory times under
the GEMM family's fitted roofline. A memory-bound GEMM (a decode step's) keeps its time:
its speed is set by HBM, not by the SM clock.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

# Rows at least this long run long enough to reach the power limit. Rows under 3 ms keep
# the short rows' efficiency in every shipped table; on Hopper so do those of 3-10 ms, on
# Blackwell they already slow down: 10 ms is the threshold that holds on both.
LONG_US = 10_000.0
# The short-burst reference rows.
BURST_US = (300.0, 3_000.0)
# Large, well-shaped GEMMs only: small N or K and small M are inefficient for reasons of
# shape (waves, tiles), not of power.
MIN_NK = 4096
MIN_M = 1024
# Fewer long rows than this is no evidence.
MIN_LONG_ROWS = 5
# The tables' BF16 rows, which show no slowdown, scatter by ±5% between the two groups: a
# ratio above this is not told apart from 1.
NOISE_FLOOR = 0.95


@dataclass(frozen=True)
class SustainedRate:
    """The sustained fraction of the burst rate for one dtype, and the rows it rests on."""

    fraction: float  # 1.0: no slowdown told apart from noise
    long_rows: int
    burst_rows: int
    # "tables": read off the profile's long rows; "catalog": the GPU catalog's measurement;
    # "profile": the profile's own back-to-back measurement (`simulate calibrate`);
    # "carried": Hopper's measured relations applied to this GPU's table rate (carried_over)
    source: str = "tables"


def with_measured(rates: dict[str, SustainedRate], catalog: dict[str, float],
                  profile: dict[str, float]) -> dict[str, SustainedRate]:
    """The table-derived rates, overridden per dtype by a direct measurement: the profile's
    own first, then the GPU catalog's."""
    return (rates | {d: SustainedRate(f, 0, 0, "catalog") for d, f in catalog.items()}
            | {d: SustainedRate(f, 0, 0, "profile") for d, f in profile.items()})


def carried_over(rates: dict[str, SustainedRate], attention_ratio: float) -> tuple[dict[str, SustainedRate],
                                                                                   SustainedRate | None]:
    """Hopper's measured relations, carried to a GPU measured only through its tables.

    On H100 and H200, run back to back for seconds, BF16 GEMMs slowed as much as FP8 ones
    although the tables' BF16 rows show nothing, and prefill attention inside a layer fell
    to `attention_ratio` (~0.85) of the FP8 fraction (item 16): the power limit lowers the
    clock of the whole chip. So where the tables show FP8 slowing down, BF16 takes the
    slower of its own rate and FP8's, and prefill attention that ratio of FP8's, both
    marked "carried". Elsewhere (no FP8 slowdown: A100, L40S) nothing changes.
    """
    fp8 = rates.get("fp8")
    if fp8 is None or fp8.fraction >= 1.0:
        return rates, None
    bf16 = rates.get("bf16")
    out = dict(rates)
    if bf16 is None or bf16.fraction > fp8.fraction:
        out["bf16"] = SustainedRate(fp8.fraction, fp8.long_rows, fp8.burst_rows, "carried")
    return out, SustainedRate(round(attention_ratio * fp8.fraction, 3), 0, 0, "carried")


def sustained_rates(rows: list[list]) -> dict[str, SustainedRate]:
    """Per dtype, from GEMM table rows [m, n, k, dtype, median_us, ...]."""
    best: dict[tuple, float] = {}
    kept = []
    for r in rows:
        m, n, k, dtype, us = int(r[0]), int(r[1]), int(r[2]), str(r[3]), float(r[4])
        if n < MIN_NK or k < MIN_NK or m < MIN_M or us <= 0:
            continue
        rate = m * n * k / us
        key = (dtype, n, k)
        best[key] = max(best.get(key, 0.0), rate)
        kept.append((key, rate, us))
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for key, rate, us in kept:
        long_rel, burst_rel = groups.setdefault(key[0], ([], []))
        rel = rate / best[key]
        if us >= LONG_US:
            long_rel.append(rel)
        elif BURST_US[0] <= us < BURST_US[1]:
            burst_rel.append(rel)
    out = {}
    for dtype, (long_rel, burst_rel) in groups.items():
        if len(long_rel) < MIN_LONG_ROWS or not burst_rel:
            continue
        ratio = statistics.median(long_rel) / statistics.median(burst_rel)
        out[dtype] = SustainedRate(ratio if ratio < NOISE_FLOOR else 1.0, len(long_rel), len(burst_rel))
    return out


def sustained_factor(compute_s: float, memory_s: float, fraction: float) -> float:
    """How much longer an op with these roofline parts takes when compute runs at `fraction`."""
    slow = max(compute_s / fraction, memory_s)
    fast = max(compute_s, memory_s)
    return slow / fast if fast > 0 else 1.0


def power_relief(wait_share: float, wait_power: float) -> float:
    """How much faster the clocks run when a share of an iteration waits on collectives.

    The board's limit caps the iteration's average power: if the waits (share s) draw a
    fraction q of the limit and the rest draws in proportion to the SM clock, the clock,
    and with it each sustained fraction, rises by r = (1 - q s) / (1 - s) over the clock
    of a GPU busy all the time. Measured on an H200 (benchmarks/duty_cycle_fit.py: one q
    fits gate/up, down and attention at TP2-8 to ~1%); the fractions it scales stay capped at 1.
    """
    if wait_share <= 0.0:
        return 1.0
    return (1.0 - wait_power * wait_share) / (1.0 - wait_share)
