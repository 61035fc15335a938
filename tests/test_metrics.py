"""Metric semantics of vLLM's `bench serve` (DESIGN.md §3) and the summary.json contract."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, poisson, scenario, simulate, uniform
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.metrics import PERCENTILES, requests_frame, summarize, weighted_percentiles
from simulator.request import Request
from simulator.scheduler.base import ItlSink

STAT_KEYS = {"mean", "std", "p50", "p90", "p95", "p99"}


# -- weighted percentiles ------------------------------------------------------------------
@st.composite
def weighted_samples(draw):
    n = draw(st.integers(1, 40))
    values = draw(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=n, max_size=n))
    weights = draw(st.lists(st.integers(0, 25), min_size=n, max_size=n))
    if sum(weights) == 0:
        weights[draw(st.integers(0, n - 1))] = draw(st.integers(1, 25))
    pct = draw(st.lists(st.floats(0, 100), min_size=1, max_size=6))
    return np.array(values), np.array(weights, dtype=np.int64), [*pct, *PERCENTILES, 0, 100]


@settings(max_examples=30, deadline=None)
@given(weighted_samples())
def test_weighted_percentiles_equal_numpy_on_the_expanded_array(sample):
    values, weights, pct = sample
    got = weighted_percentiles(values, weights, pct)
    want = np.percentile(np.repeat(values, weights), pct)
    scale = float(np.abs(values).max()) + 1.0
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 * scale)


def test_weighted_percentiles_simple_cases():
    v = np.array([3.0, 1.0, 2.0])
    assert weighted_percentiles(v, np.array([1, 1, 1]), [50]) == [2.0]
    assert weighted_percentiles(v, np.array([0, 5, 0]), [0, 50, 100]) == [1.0, 1.0, 1.0]
    # [1, 2, 2, 2, 3]: p25 lands on index 1
    assert weighted_percentiles(v, np.array([1, 1, 3]), [25, 75]) == pytest.approx([2.0, 2.0])


# -- summarize ---------------------------------------------------------------------------------
def make_request(i, arrival, prompt, output, first=None, finish=None) -> Request:
    r = Request(i, arrival, prompt, output)
    if first is None:
        r.status, r.reject_reason = "rejected", "too long"
    else:
        r.status = "finished"
        r.first_token_time, r.finish_time = first, finish
        r.last_token_time = finish
        r.num_generated = output
    return r


def hand_made() -> tuple[pd.DataFrame, ItlSink]:
    reqs = [
        make_request(0, 0.0, 100, 11, first=0.1, finish=1.1),  # TTFT 100, TPOT 100, E2E 1100
        make_request(1, 0.5, 200, 1, first=0.7, finish=0.7),  # TTFT 200, single token: no TPOT
        make_request(2, 1.0, 300, 5, first=1.5, finish=3.5),  # TTFT 500, TPOT 500, E2E 2500
        make_request(3, 2.0, 9000, 10),  # rejected
    ]
    itl = ItlSink()
    itl.add(0.1, 10)  # request 0: ten gaps of 100 ms
    itl.add(0.5, 4)  # request 2: four gaps of 500 ms
    return requests_frame(reqs), itl


def test_requests_frame_latencies():
    df, _ = hand_made()
    assert list(df["status"]) == ["completed"] * 3 + ["rejected"]
    np.testing.assert_allclose(df["ttft_ms"][:3], [100, 200, 500])
    np.testing.assert_allclose(df["e2e_ms"][:3], [1100, 200, 2500])
    assert df["tpot_ms"][0] == pytest.approx(100.0)
    assert math.isnan(df["tpot_ms"][1])
    assert df["tpot_ms"][2] == pytest.approx(500.0)
    assert df["reject_reason"][3] == "too long"
    assert math.isnan(df["ttft_ms"][3])


def test_summarize_follows_bench_serve_semantics():
    df, itl = hand_made()
    s = summarize(df, itl, {"ttft_ms": 300.0, "tpot_ms": 200.0, "e2e_ms": None})
    assert s["requests"] == {"total": 4, "completed": 3, "rejected": 1,
                             "rejected_reasons": [{"reason": "too long", "count": 1}]}
    assert s["duration_s"] == pytest.approx(3.5)  # first arrival (0) to last completion (3.5)
    thr = s["throughput"]
    assert thr["requests_per_s"] == pytest.approx(3 / 3.5)
    assert thr["input_tokens_per_s"] == pytest.approx(600 / 3.5)  # completed requests only
    assert thr["output_tokens_per_s"] == pytest.approx(17 / 3.5)
    assert thr["total_tokens_per_s"] == pytest.approx((600 + 17) / 3.5)  # vLLM's "Total token throughput"
    # std: the population standard deviation (np.std), as vLLM prints it; ITL's is token-weighted.
    assert s["ttft_ms"]["std"] == pytest.approx(np.std([100, 200, 500]))
    assert s["itl_ms"]["std"] == pytest.approx(np.std([100] * 10 + [500] * 4))
    # TPOT: per-request mean over requests with > 1 output token.
    assert s["tpot_ms"]["mean"] == pytest.approx(300.0)
    assert s["tpot_ms"]["p50"] == pytest.approx(300.0)
    assert s["ttft_ms"]["mean"] == pytest.approx(800 / 3)
    for p in PERCENTILES:
        assert s["ttft_ms"][f"p{p}"] == pytest.approx(np.percentile([100, 200, 500], p))
        assert s["e2e_ms"][f"p{p}"] == pytest.approx(np.percentile([1100, 200, 2500], p))
    # ITL pools every gap: token-weighted, unlike TPOT.
    assert s["itl_ms"]["mean"] == pytest.approx((10 * 100 + 4 * 500) / 14)
    assert s["itl_ms"]["p50"] == pytest.approx(100.0)
    assert s["itl_ms"]["p99"] == pytest.approx(np.percentile([100] * 10 + [500] * 4, 99))
    # Goodput: requests 0 and 1 meet both SLOs (no TPOT counts as meeting it); 2 misses TTFT.
    assert s["goodput"]["requests_per_s"] == pytest.approx(2 / 3.5)
    assert s["goodput"]["slo_attainment"] == pytest.approx(2 / 4)  # the rejected one misses
    assert s["preemptions"] == 0


@pytest.mark.parametrize(("slo", "good"), [
    ({}, None),  # no SLO: nothing to be good against, so no goodput (vllm bench serve omits it)
    ({"ttft_ms": 150.0}, 1),
    ({"tpot_ms": 100.0}, 2),
    ({"e2e_ms": 2000.0}, 2),
    ({"ttft_ms": 1000.0, "tpot_ms": 1000.0, "e2e_ms": 1000.0}, 1),
    ({"ttft_ms": 50.0}, 0),
])
def test_goodput_counts_requests_meeting_every_given_slo(slo, good):
    df, itl = hand_made()
    s = summarize(df, itl, {"ttft_ms": None, "tpot_ms": None, "e2e_ms": None, **slo})
    if good is None:
        assert s["goodput"]["requests_per_s"] is None and s["goodput"]["slo_attainment"] is None
    else:
        assert s["goodput"]["requests_per_s"] == pytest.approx(good / 3.5)


def test_summarize_with_nothing_completed():
    df = requests_frame([make_request(0, 0.0, 10, 10), make_request(1, 1.0, 10, 10)])
    s = summarize(df, ItlSink(), {"ttft_ms": 100.0})
    assert s["requests"] == {"total": 2, "completed": 0, "rejected": 2,
                             "rejected_reasons": [{"reason": "too long", "count": 2}]}
    assert s["duration_s"] == 0.0
    assert s["throughput"]["requests_per_s"] == 0.0
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        assert set(s[key]) == STAT_KEYS and all(v is None for v in s[key].values())
    assert s["goodput"]["requests_per_s"] == 0.0


# -- the summary of a real run -------------------------------------------------------------
@pytest.fixture(scope="module")
def run():
    d = scenario("vllm-v1", arrival=poisson(30.0), prompt=uniform(16, 1000),
                 output=uniform(1, 300), num_requests=200, kv_tokens=4096, max_model_len=2048,
                 slo={"ttft_ms": 300.0, "tpot_ms": 40.0})
    return simulate(d)


def test_summary_contract_keys(run):
    _, res = run
    s = res.summary
    for key in ("completed", "rejected"):
        assert isinstance(s["requests"][key], int)
    assert isinstance(s["duration_s"], float) and s["duration_s"] > 0
    assert set(s["throughput"]) >= {"requests_per_s", "input_tokens_per_s", "output_tokens_per_s"}
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        assert set(s[key]) >= STAT_KEYS
        assert all(isinstance(v, float) for v in s[key].values())
        assert s[key]["p50"] <= s[key]["p90"] <= s[key]["p95"] <= s[key]["p99"]
    assert set(s["goodput"]) >= {"requests_per_s", "slo_attainment"}
    assert 0.0 <= s["goodput"]["slo_attainment"] <= 1.0
    assert set(s["kv_cache"]) >= {"capacity_tokens", "peak_utilization"}
    assert isinstance(s["sim_wall_s"], float) and s["sim_wall_s"] >= 0


def test_summary_agrees_with_the_frames(run):
    sim, res = run
    s, req, it = res.summary, res.requests, res.iterations
    done = req[req["status"] == "completed"]
    assert s["requests"]["completed"] == len(done) == len(req)
    duration = done["finish_s"].max() - req["arrival_s"].min()
    assert s["duration_s"] == pytest.approx(duration, rel=1e-12)
    assert s["throughput"]["requests_per_s"] == pytest.approx(len(done) / duration)
    assert s["throughput"]["output_tokens_per_s"] == pytest.approx(
        done["output_tokens"].sum() / duration)
    assert s["throughput"]["input_tokens_per_s"] == pytest.approx(
        done["prompt_tokens"].sum() / duration)
    assert s["ttft_ms"]["mean"] == pytest.approx(done["ttft_ms"].mean())
    assert s["ttft_ms"]["p99"] == pytest.approx(np.percentile(done["ttft_ms"], 99))
    assert s["tpot_ms"]["mean"] == pytest.approx(done["tpot_ms"].dropna().mean())
    assert s["e2e_ms"]["p90"] == pytest.approx(np.percentile(done["e2e_ms"], 90))
    # Gaps of a request sum to E2E − TTFT and number output − 1, so the pooled ITL mean is
    # Σ(E2E − TTFT) / Σ(output − 1), preemption stalls included.
    itl_mean = (done["e2e_ms"] - done["ttft_ms"]).sum() / (done["output_tokens"] - 1).sum()
    assert s["itl_ms"]["mean"] == pytest.approx(itl_mean, rel=1e-9)
    good = done[(done["ttft_ms"] <= 300.0) & (done["tpot_ms"].fillna(0) <= 40.0)]
    assert s["goodput"]["requests_per_s"] == pytest.approx(len(good) / duration)
    assert s["goodput"]["slo_attainment"] == pytest.approx(len(good) / len(req))
    assert s["preemptions"] == req["preemptions"].sum() > 0
    assert s["kv_cache"]["capacity_tokens"] == sim.memory.capacity_tokens == 4096
    peak = (it["kv_blocks_used"] / it["kv_blocks_total"]).max()
    assert s["kv_cache"]["peak_utilization"] == pytest.approx(peak)
    assert s["iterations"] == len(it)


def test_rejections_are_grouped_by_cause_not_by_request():
    """Per-request numbers do not split a cause; a setting's value (after "=") does."""
    reqs = [make_request(i, float(i), 10, 10) for i in range(4)]
    texts = ["prompt + output = 2419 tokens exceeds max_model_len=2048",
             "prompt + output = 3001 tokens exceeds max_model_len=2048",
             "needs 300 KV blocks at full length; the cache holds 200",
             "prompt + output = 2419 tokens exceeds max_model_len=1024"]
    for r, text in zip(reqs, texts, strict=True):
        r.status, r.reject_reason = "rejected", text
    s = summarize(requests_frame(reqs), ItlSink(), {})
    assert s["requests"]["rejected_reasons"] == [
        {"reason": texts[0], "count": 2}, {"reason": texts[2], "count": 1}, {"reason": texts[3], "count": 1}]


@pytest.mark.parametrize("scenario", ["chatbot.yaml", "disaggregated.yaml"])
def test_without_the_iteration_log_the_kv_mean_is_null_and_the_counts_agree(scenario):
    """compare, plan and validate run without the per-iteration rows: the summary's KV mean
    is then null (not a false 0.0), and the per-pool iteration counts, kept as running
    counts, agree with the rows'."""
    from simulator import api

    path = ROOT / "scenarios" / scenario
    kept = api.run(path, ["workload.num_requests=200"]).summary
    lean = api.run(path, ["workload.num_requests=200"], record_iterations=False).summary
    assert kept["kv_cache"]["mean_utilization"] > 0 and lean["kv_cache"]["mean_utilization"] is None
    assert lean["kv_cache"]["peak_utilization"] == kept["kv_cache"]["peak_utilization"]
    assert lean["iterations"] == kept["iterations"]
    for role in ("prefill", "decode") if "disaggregation" in kept else ():
        assert lean["disaggregation"][role]["iterations"] == kept["disaggregation"][role]["iterations"] > 0
        assert lean["disaggregation"][role]["kv_mean_utilization"] is None
