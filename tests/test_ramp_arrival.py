"""Rate ramps (`vllm bench serve --ramp-up-strategy`): the arrival process and the
benchmark results sent with one."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulator.errors import ConfigError
from simulator.validation.measured import read_measured
from simulator.validation.measurement import MeasurementError
from simulator.workload import RampArrival


@pytest.mark.parametrize("strategy", ["linear", "exponential"])
def test_the_rate_climbs_request_by_request_as_vllm_sends_it(strategy):
    ramp = RampArrival(start_rate=1.0, end_rate=16.0, strategy=strategy)
    rates = ramp.rates(5)
    assert rates[0] == 1.0 and rates[-1] == pytest.approx(16.0)
    # vLLM's _get_current_request_rate at progress i/(n-1): equal steps, or equal factors.
    expected = [1.0, 4.75, 8.5, 12.25, 16.0] if strategy == "linear" else [1.0, 2.0, 4.0, 8.0, 16.0]
    assert rates == pytest.approx(expected)


def test_ramp_gaps_have_the_mean_of_each_request_rate():
    """Each gap is drawn at the rate of the request before it: over many runs the mean gap
    after request i is 1/rate_i, so the arrivals bunch up as the ramp climbs."""
    ramp = RampArrival(start_rate=2.0, end_rate=20.0)
    runs = np.array([ramp.arrival_times(50, None, np.random.default_rng(s)) for s in range(400)])
    assert (runs[:, 0] == 0).all() and (np.diff(runs, axis=1) >= 0).all()
    mean_gaps = np.diff(runs, axis=1).mean(axis=0)
    assert mean_gaps == pytest.approx(1.0 / ramp.rates(50)[:-1], rel=0.2)
    assert mean_gaps[:10].mean() > 4 * mean_gaps[-10:].mean()


def test_a_ramp_is_deterministic_for_a_seed_and_cut_at_the_duration():
    ramp = RampArrival(start_rate=1.0, end_rate=5.0, burstiness=0.5)
    a = ramp.arrival_times(30, None, np.random.default_rng(7))
    assert np.array_equal(a, ramp.arrival_times(30, None, np.random.default_rng(7)))
    cut = ramp.arrival_times(30, float(a[10]), np.random.default_rng(7))
    assert np.array_equal(cut, a[:10])


def test_a_ramp_needs_a_request_count():
    with pytest.raises(ConfigError, match=r"workload\.num_requests"):
        RampArrival(start_rate=1.0, end_rate=2.0).arrival_times(None, 60.0, np.random.default_rng(0))


def _write(tmp_path, doc) -> list:
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(doc))
    return [path]


RAMP = {"ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 10}


def test_a_detailed_result_sent_on_a_ramp_replays_the_ramp(tmp_path):
    n = 6
    doc = {"request_rate": "inf", "burstiness": 1.0, "max_concurrency": None, **RAMP,
           "input_lens": [100] * n, "output_lens": [20] * n, "ttfts": [0.05] * n, "itls": [[0.01] * 19] * n}
    run = read_measured(_write(tmp_path, doc)).runs[0]
    assert run.kind == "rate" and run.ramp == RampArrival(start_rate=1.0, end_rate=10.0)


def test_a_summary_sent_on_a_ramp_is_simulated_on_it(tmp_path):
    doc = {"num_prompts": 40, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": None,
           "completed": 40, "total_input_tokens": 4000, "total_output_tokens": 800, "mean_ttft_ms": 30.0,
           "mean_tpot_ms": 8.0, **RAMP}
    run = read_measured(_write(tmp_path, doc)).runs[0]
    assert run.kind == "rate"  # not every request at once, as request_rate "inf" alone would say
    assert ("workload.arrival={type: ramp, start_rate: 1.0, end_rate: 10.0, strategy: linear, burstiness: 1.0}"
            in run.overrides)
    with pytest.raises(MeasurementError, match="--save-detailed"):  # a ramp under a client cap
        read_measured(_write(tmp_path, {**doc, "max_concurrency": 4}))


@pytest.mark.parametrize(("patch", "match"), [
    ({"ramp_up_strategy": "sine"}, "not one of linear, exponential"),
    ({"ramp_up_end_rps": None}, "without `ramp_up_start_rps` and `ramp_up_end_rps`"),
    ({"ramp_up_start_rps": 0}, "`ramp_up_start_rps` is 0, must be a number > 0"),
])
def test_a_malformed_ramp_names_the_field(tmp_path, patch, match):
    doc = {"num_prompts": 4, "request_rate": "inf", "completed": 4, "total_input_tokens": 400,
           "total_output_tokens": 80, "mean_ttft_ms": 30.0, **RAMP, **patch}
    with pytest.raises(MeasurementError, match=match):
        read_measured(_write(tmp_path, {k: v for k, v in doc.items() if v is not None}))
