"""`simulate validate` fed the simulator's own output reproduces it exactly.

A per-request CSV written from a run's requests.csv, replayed under the same scenario,
must give every request its TTFT, TPOT and E2E back; a sweep row holding a closed-loop
run's means must give those means back. Any difference would be the replay's own error
(arrival rebasing, lengths, the API server, the row-to-scenario mapping), which the dev
sets could not tell apart from the model's.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import CHATBOT, ROOT

from simulator import api
from simulator.validation import run_validation

BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"
DISTSERVE = ROOT / "scenarios" / "validation" / "distserve-opt13b-a100-vllm.yaml"
COLUMNS = ["arrival_s", "prompt_tokens", "output_tokens", "ttft_ms", "tpot_ms", "e2e_ms"]


@pytest.mark.parametrize("scenario, sets", [
    (CHATBOT, ["workload.num_requests=150"]),
    (DISTSERVE, ["workload={arrival: {type: poisson, rate: 3}, prompt_tokens: {type: uniform, min: 20, "
                 "max: 1500}, output_tokens: {type: uniform, min: 2, max: 400}, num_requests: 120}"]),
])  # fmt: skip
def test_a_runs_own_requests_replay_exactly(scenario, sets, tmp_path):
    result = api.run(scenario, sets)
    req = result.requests
    done = req[req["status"] == "completed"] if "status" in req else req
    measured = tmp_path / "measured.csv"
    # Shifted in time and out of order, as a log might be: the replay rebases and sorts.
    shifted = done[COLUMNS].assign(arrival_s=done["arrival_s"] + 100.0).iloc[::-1]
    shifted.to_csv(measured, index=False, float_format="%.9f")
    _, out = run_validation([measured], scenario, sets, tmp_path / "out")
    rows = pd.read_csv(out / "validation.csv")
    assert len(rows) == len(done) > 50
    for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
        got = rows[f"pred_{metric}"].to_numpy()
        want = rows[metric].to_numpy()
        assert abs(got - want).max() < 1e-3, metric  # ms, after the CSV's rounding


def test_a_closed_loop_runs_means_replay_exactly_as_a_sweep_row(tmp_path):
    """The row's precision (fp8: weights, GEMMs and KV cache) and lengths set the same
    scenario the run had; recipes and the harness's length spread are off."""
    sets = ["workload.arrival.concurrency=8", "workload.prompt_tokens.value=500",
            "workload.output_tokens.value=200", "workload.num_requests=80", "model.kv_dtype=fp8"]
    summary = api.run(BENCH, sets).summary
    row = tmp_path / "sweep.csv"
    row.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms\n"
                   f"h200_sxm,llama-3.1-70b,fp8,1,500,200,8,{summary['ttft_ms']['mean']!r},"
                   f"{summary['tpot_ms']['mean']!r}\n")
    result, _ = run_validation([row], BENCH, [], tmp_path / "out", rounds=10, length_ratio=1.0, recipes=False)
    for metric in ("ttft_ms", "tpot_ms"):
        assert abs(result["metrics"][metric]["all"]["mean_signed_pct"]) < 1e-9, metric


def test_a_runs_shared_prompts_replay_with_their_cache_hits(tmp_path):
    """A run whose clients resent a few prompts (a trace's prefix columns) replays exactly
    when its per-request CSV carries the same prefix_id/prefix_tokens columns; without them
    every prompt is prefilled in full, and the replay reads slower."""
    n = 120
    trace = pd.DataFrame({"arrival_s": [i * 0.05 for i in range(n)], "prompt_tokens": 1500,
                          "output_tokens": 40, "prefix_id": [i % 4 for i in range(n)], "prefix_tokens": 1500})
    trace.to_csv(tmp_path / "trace.csv", index=False)
    sets = [f"workload={{arrival: {{type: trace, path: {tmp_path / 'trace.csv'}}}}}"]
    done = api.run(CHATBOT, sets).requests
    assert (done["status"] == "completed").all() and (done["cached_tokens"] > 0).sum() > n - 8
    measured = done[COLUMNS].assign(prefix_id=trace["prefix_id"], prefix_tokens=trace["prefix_tokens"])
    with_prefixes, without = tmp_path / "with.csv", tmp_path / "without.csv"
    measured.to_csv(with_prefixes, index=False, float_format="%.9f")
    measured[COLUMNS].to_csv(without, index=False, float_format="%.9f")
    _, out = run_validation([with_prefixes], CHATBOT, [], tmp_path / "out")
    rows = pd.read_csv(out / "validation.csv")
    for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
        assert abs(rows[f"pred_{metric}"] - rows[metric]).max() < 1e-3, metric
    assert list(rows.columns[:8]) == [*COLUMNS, "prefix_id", "prefix_tokens"]  # input columns unchanged
    result, _ = run_validation([without], CHATBOT, [], tmp_path / "out2")
    assert result["metrics"]["ttft_ms"]["all"]["mean_signed_pct"] > 50
