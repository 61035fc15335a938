"""The KV-occupancy check of `simulate validate`: peak blocks from timestamps, and the
capacity it implies when a simulation fills its cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator.validation import run_validation
from simulator.validation.occupancy import occupancy_hint, peak_blocks_in_use

ROOT = Path(__file__).resolve().parent.parent
CHATBOT = ROOT / "scenarios" / "chatbot.yaml"


def _frame(rows):
    return pd.DataFrame(rows, columns=["arrival_s", "prompt_tokens", "output_tokens", "ttft_ms", "e2e_ms"])


def test_peak_of_one_request_is_its_full_context_in_blocks():
    one = _frame([(0.0, 32, 16, 100.0, 1100.0)])
    assert peak_blocks_in_use(one, 16) == 3  # ceil((32 + 16) / 16), just before it ends


def test_peak_adds_overlapping_requests_only():
    overlapping = _frame([(0.0, 32, 16, 100.0, 1100.0), (0.05, 32, 16, 50.0, 1050.0)])
    apart = _frame([(0.0, 32, 16, 100.0, 1100.0), (5.0, 32, 16, 100.0, 1100.0)])
    assert peak_blocks_in_use(overlapping, 16) == 6
    assert peak_blocks_in_use(apart, 16) == 3


def test_missing_columns_give_nan():
    assert np.isnan(peak_blocks_in_use(pd.DataFrame({"prompt_tokens": [1]}), 16))


@pytest.fixture(scope="module")
def measured_on_a_small_cache(tmp_path_factory):
    """A 'measurement' made by the simulator itself on a server with 1,000 KV blocks."""
    tmp = tmp_path_factory.mktemp("occ")
    rng = np.random.default_rng(3)
    n = 400
    arrival = np.cumsum(rng.exponential(1 / 40.0, n))
    seed = pd.DataFrame({"arrival_s": arrival - arrival[0], "prompt_tokens": rng.integers(200, 900, n),
                         "output_tokens": rng.integers(50, 300, n), "ttft_ms": 1.0, "tpot_ms": 1.0,
                         "e2e_ms": 1.0})
    seed.to_csv(tmp / "seed.csv", index=False)
    truth = ["memory.kv_cache_tokens=16000", "scheduler.policy=vllm-v0"]
    _, out = run_validation([tmp / "seed.csv"], CHATBOT, truth, tmp / "truth")
    sim = pd.read_csv(out / "validation.csv")
    measured = seed.assign(ttft_ms=sim["pred_ttft_ms"], tpot_ms=sim["pred_tpot_ms"], e2e_ms=sim["pred_e2e_ms"])
    measured.to_csv(tmp / "measured.csv", index=False)
    return tmp / "measured.csv"


def test_a_larger_simulated_cache_is_detected_and_the_true_size_recovered(measured_on_a_small_cache, tmp_path):
    result, _ = run_validation([measured_on_a_small_cache], CHATBOT,
                               ["memory.kv_cache_tokens=20000", "scheduler.policy=vllm-v0"], tmp_path / "o")
    kv = result["kv_occupancy"]
    assert kv["sim_capacity_blocks"] == 1250
    assert kv["runs"][0]["sim_cache_full"]
    assert kv["implied_capacity_blocks"] == pytest.approx(1000, rel=0.03)
    hint = occupancy_hint(kv)
    assert hint is not None and "smaller" in hint


def test_the_right_cache_size_gives_no_hint(measured_on_a_small_cache, tmp_path):
    result, _ = run_validation([measured_on_a_small_cache], CHATBOT,
                               ["memory.kv_cache_tokens=16000", "scheduler.policy=vllm-v0"], tmp_path / "o")
    kv = result["kv_occupancy"]
    assert abs(kv["diff_pct"]) < 1.0
    assert occupancy_hint(kv) is None


def test_an_unsaturated_run_implies_nothing(measured_on_a_small_cache, tmp_path):
    result, out = run_validation([measured_on_a_small_cache], CHATBOT,
                                 ["memory.kv_cache_tokens=400000", "scheduler.policy=vllm-v0"], tmp_path / "o")
    kv = result["kv_occupancy"]
    assert not kv["runs"][0]["sim_cache_full"]
    assert kv["implied_capacity_blocks"] is None and occupancy_hint(kv) is None
    assert "KV-cache occupancy" in (out / "validation.html").read_text()


def test_the_hint_as_a_reserve_reproduces_the_measured_capacity(measured_on_a_small_cache, tmp_path):
    """The capacity difference, entered as memory kept outside the cache, gives back the
    measured server's cache when the memory plan runs (no forced token count)."""
    on_l4 = ["scheduler.policy=vllm-v0", "hardware.gpu=l4"]  # a ~1,350-block plan the trace fills
    result, _ = run_validation([measured_on_a_small_cache], CHATBOT, on_l4, tmp_path / "plan")
    kv = result["kv_occupancy"]
    assert kv["runs"][0]["sim_cache_full"]
    extra = kv["implied_extra_reserve_gib"]
    assert extra > 0 and "raise memory.runtime_reserve_gib" in occupancy_hint(kv)
    fixed = [*on_l4, f"memory.runtime_reserve_gib={1.0 + extra}"]
    again, _ = run_validation([measured_on_a_small_cache], CHATBOT, fixed, tmp_path / "fixed")
    assert again["kv_occupancy"]["sim_capacity_blocks"] == pytest.approx(kv["implied_capacity_blocks"], rel=0.02)


def test_the_reserve_hint_holds_with_several_replicas(measured_on_a_small_cache, tmp_path):
    """Two L4 replicas: the capacity difference is shared by both replicas' GPUs."""
    two = ["scheduler.policy=vllm-v0", "hardware.gpu=l4", "parallelism.replicas=2",
           "memory.kv_cache_tokens=null"]
    result, _ = run_validation([measured_on_a_small_cache], CHATBOT, two, tmp_path / "plan")
    kv = result["kv_occupancy"]
    assert kv["implied_capacity_blocks"] is not None  # both replicas' caches fill on this trace
    fixed = [*two, f"memory.runtime_reserve_gib={1.0 + kv['implied_extra_reserve_gib']}"]
    again, _ = run_validation([measured_on_a_small_cache], CHATBOT, fixed, tmp_path / "fixed")
    assert again["kv_occupancy"]["sim_capacity_blocks"] == pytest.approx(kv["implied_capacity_blocks"], rel=0.03)


def test_the_per_request_page_says_what_its_figures_are(measured_on_a_small_cache, tmp_path):
    """Per-request runs have no cliffs (no below-cliff rows or cliff columns), the SLO
    targets the attainment table is measured against are named, and the occupancy peaks
    are labelled as the timestamp estimates they are."""
    result, out = run_validation([measured_on_a_small_cache], CHATBOT,
                                 ["memory.kv_cache_tokens=20000", "scheduler.policy=vllm-v0"], tmp_path / "o")
    page = (out / "validation.html").read_text()
    assert "below_cliff" not in page and "cliff (meas)" not in page
    assert "mean TTFT meas (ms)" in page
    assert "Per request (|signed error| of each request" in page
    assert "simulated peak (est.)" in page and "even while preempted" in page
    assert result["slo"]["runs"]  # the chatbot scenario sets TTFT and TPOT SLOs
    assert "Share of requests within TTFT ≤" in page
