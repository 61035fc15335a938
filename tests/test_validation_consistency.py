"""simulator/validation/consistency.py: measured runs of one workload that got faster under
more load are flagged with the error floor they set for any model that slows with load."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.validation.consistency import MIN_SHARED, consistency_hint, load_consistency
from simulator.validation.measurement import MeasuredRun
from simulator.validation.runner import RunPrediction

N = MIN_SHARED + 10
PROMPTS = np.arange(100, 100 + N)
OUTPUTS = np.r_[1, np.full(N - 1, 50)]  # the first request has no TPOT


def _trace(label: str, rate: float, ttft: float, tpot: float, n: int = N, prompts=PROMPTS) -> RunPrediction:
    req = pd.DataFrame({"arrival_s": np.arange(n) / rate, "prompt_tokens": prompts[:n], "output_tokens": OUTPUTS[:n],
                        "ttft_ms": np.full(n, ttft), "tpot_ms": np.r_[np.nan, np.full(n - 1, tpot)]})
    run = MeasuredRun(label=label, source=f"{label}.csv", kind="trace", measured={}, requests=req)
    return RunPrediction(run, {}, pd.DataFrame(), {})


def _row(group: str, clients: int, ttft: float, tpot: float) -> RunPrediction:
    run = MeasuredRun(label=f"{group} c{clients}", source="sweep.csv", kind="closed_loop",
                      measured={"ttft_ms": ttft, "tpot_ms": tpot}, concurrency=clients, group=group)
    return RunPrediction(run, {}, pd.DataFrame(), {})


def test_a_busier_run_of_the_same_requests_that_measured_faster_sets_a_floor():
    check = load_consistency([_trace("slow", 2.0, 220.0, 60.0), _trace("fast", 2.5, 190.0, 65.0)])
    assert check["pairs_compared"] == 1 and check["contradictions"] == 1
    (pair,) = check["pairs"]
    assert (pair["metric"], pair["kind"], pair["slower_run"], pair["faster_run"]) == ("ttft_ms", "inverted", "slow",
                                                                                        "fast")
    assert pair["faster_load"] / pair["slower_load"] == pytest.approx(1.25)
    assert pair["shared_requests"] == N
    assert pair["drop_pct"] == pytest.approx(100 * (1 - 190 / 220))
    # The prediction closest to both is one value for the two, 2*lo*hi/(lo+hi): this far off each.
    best = 2 * 220 * 190 / (220 + 190)
    assert pair["floor_pct"] == pytest.approx(100 * (220 - best) / 220)
    assert pair["floor_pct"] == pytest.approx(100 * (best - 190) / 190)
    assert check["floor_pct"] == {"ttft_ms": pytest.approx(pair["floor_pct"]), "tpot_ms": 0.0}
    hint = consistency_hint(check)
    assert "fast measured a 13.6% lower mean TTFT than slow under 1.25× its load" in hint
    assert f"within {pair['floor_pct']:.1f}% of both" in hint


def test_runs_compare_over_the_requests_they_share_and_only_when_those_match():
    longer = _trace("longer", 3.0, 150.0, 40.0, n=N)
    shorter = _trace("shorter", 1.0, 200.0, 50.0, n=MIN_SHARED)
    other = _trace("other", 5.0, 100.0, 30.0, prompts=PROMPTS + 1)   # other prompts: not comparable
    check = load_consistency([longer, shorter, other])
    assert check["pairs_compared"] == 1
    assert {p["metric"] for p in check["pairs"]} == {"ttft_ms", "tpot_ms"}
    assert all(p["shared_requests"] == MIN_SHARED for p in check["pairs"])
    # Too few requests in common: nothing to compare at all.
    assert load_consistency([_trace("a", 1.0, 200.0, 50.0, n=MIN_SHARED - 1),
                             _trace("b", 2.0, 100.0, 40.0, n=MIN_SHARED - 1)]) is None


def test_runs_that_slow_with_load_agree_and_repeats_that_differ_do_not():
    rising = [_trace("a", 2.0, 200.0, 50.0), _trace("c", 3.0, 250.0, 70.0), _trace("d", 4.0, 250.0, 90.0)]
    check = load_consistency(rising)
    assert check["pairs_compared"] == 3 and check["contradictions"] == 0 and check["pairs"] == []
    assert consistency_hint(check) is None
    # The same requests sent again at the same rate (within 2%): any difference is spread.
    check = load_consistency([_trace("first", 2.0, 200.0, 50.0), _trace("again", 2.01, 180.0, 50.0)])
    (pair,) = check["pairs"]
    assert (pair["kind"], pair["slower_run"], pair["faster_run"]) == ("repeat", "first", "again")
    assert pair["floor_pct"] == pytest.approx(100 * 20 / 380)
    assert "again measured a 10.0% lower mean TTFT than first at the same load" in consistency_hint(check)


def test_sweep_rows_compare_within_their_configuration_by_clients():
    rows = [_row("tp1", 4, 100.0, 20.0), _row("tp1", 8, 120.0, 19.6), _row("tp1", 16, 150.0, 25.0),
            _row("tp2", 4, 300.0, 30.0)]  # another configuration: never compared with tp1's rows
    check = load_consistency(rows)
    assert check["pairs_compared"] == 3
    (pair,) = check["pairs"]
    assert (pair["metric"], pair["slower_run"], pair["faster_run"], pair["unit"]) == ("tpot_ms", "tp1 c4", "tp1 c8",
                                                                                      "clients")
    assert pair["shared_requests"] is None
    assert pair["floor_pct"] == pytest.approx(100 * 0.4 / 39.6)
    assert consistency_hint(check) is None  # a 1% floor is not worth a line
    assert load_consistency([_row("tp1", 4, 100.0, 20.0), _row("tp2", 8, 90.0, 19.0)]) is None
    # One configuration measured twice at the same client count: a repeat.
    (again,) = load_consistency([_row("tp1", 4, 100.0, 20.0), _row("tp1", 4, 100.0, 22.0)])["pairs"]
    assert (again["kind"], again["metric"], again["slower_measured"], again["faster_measured"]) == ("repeat", "tpot_ms",
                                                                                                    22.0, 20.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 256), st.floats(1.0, 1e4), st.floats(1.0, 1e3)), min_size=2, max_size=8,
                unique_by=lambda t: t[0]))
def test_a_sweep_that_slows_with_load_has_no_contradiction_and_its_mirror_has_every_one(points):
    points.sort()
    ttfts = np.maximum.accumulate([t for _, t, _ in points])  # made to rise with the clients
    tpots = np.maximum.accumulate([t for _, _, t in points])
    rising = [_row("g", c, a, b) for (c, _, _), a, b in zip(points, ttfts, tpots, strict=True)]
    check = load_consistency(rising)
    assert check["pairs_compared"] == len(points) * (len(points) - 1) // 2
    assert check["contradictions"] == 0
    # The same values handed to the client counts in reverse: every strictly lower pair contradicts.
    falling = [_row("g", c, a, b) for (c, _, _), a, b in zip(points, ttfts[::-1], tpots[::-1], strict=True)]
    mirrored = load_consistency(falling)
    strict = sum(int(x < y) for vals in (ttfts, tpots) for i, x in enumerate(vals) for y in vals[i + 1:])
    assert mirrored["contradictions"] == strict
    for pair in mirrored["pairs"]:
        assert pair["kind"] == "inverted"
        assert pair["faster_load"] > pair["slower_load"] and pair["faster_measured"] < pair["slower_measured"]
        assert 0 < pair["floor_pct"] < pair["drop_pct"] < 100
