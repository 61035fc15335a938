"""Measured and predicted figures of one run cover the same requests.

A per-request file's blank cells (a failed request, a metric the harness did not record)
and the requests the simulated server refused are left out of both sides of each mean and
of the SLO attainment; otherwise the error compares two different populations.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from conftest import ROOT

from simulator.validation import run_validation

DISTSERVE = ROOT / "scenarios" / "validation" / "distserve-opt13b-a100-vllm.yaml"
HEADER = "arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms,e2e_ms\n"


def _validate(tmp_path, text: str, sets: list[str] | None = None) -> tuple[dict, pd.DataFrame]:
    measured = tmp_path / "measured.csv"
    measured.write_text(text)
    _, out = run_validation([measured], DISTSERVE, sets or [], tmp_path / "out")
    return json.loads((out / "validation.json").read_text()), pd.read_csv(out / "validation.csv")


def test_a_blank_cell_leaves_the_request_out_of_both_means(tmp_path):
    text = HEADER + ("0.0,55,4,,26.1,148.0\n"  # no TTFT recorded
                     "0.5,800,9,220.0,26.0,428.0\n"
                     "1.0,300,0,,,\n"  # failed: replayed for its load, scored nowhere
                     "1.5,120,12,60.0,25.0,335.0\n")
    result, rows = _validate(tmp_path, text)
    run = result["per_run"][0]
    seen = rows["ttft_ms"].notna()
    assert run["measured_ttft_ms"] == rows.loc[seen, "ttft_ms"].mean()
    assert np.isclose(run["pred_ttft_ms"], rows.loc[seen, "pred_ttft_ms"].mean())
    assert not np.isclose(run["pred_ttft_ms"], rows["pred_ttft_ms"].mean())  # the blank rows would move it
    e2e = rows["e2e_ms"].notna()
    assert np.isclose(run["pred_e2e_ms"], rows.loc[e2e, "pred_e2e_ms"].mean())


def test_slo_attainment_skips_failed_requests_and_unmeasured_targets(tmp_path):
    """The failed row would be a miss on the measured side only; the E2E target, which
    this file does not measure, would apply on the predicted side only."""
    text = ("arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms\n"
            "0.0,55,4,60.0,26.1\n0.5,800,9,220.0,26.0\n1.0,300,0,,\n1.5,120,12,60.0,25.0\n")
    result, _ = _validate(tmp_path, text, ["slo.ttft_ms=10000", "slo.tpot_ms=10000", "slo.e2e_ms=1"])
    assert result["slo"]["runs"] == [{"run": "measured", "measured": 1.0, "predicted": 1.0, "diff_points": 0.0}]


def test_a_request_the_simulated_server_refuses_counts_on_neither_mean_and_misses_its_slo(tmp_path):
    text = HEADER + ("0.0,100,10,50.0,25.0,275.0\n"
                     "0.5,1900,120,400.0,30.0,3970.0\n"  # longer than max_model_len below
                     "1.0,100,10,60.0,25.0,285.0\n")
    result, rows = _validate(tmp_path, text, ["model.max_model_len=1024", "slo.ttft_ms=10000",
                                              "slo.tpot_ms=10000"])
    run = result["per_run"][0]
    assert run["measured_ttft_ms"] == 55.0  # the refused request's 400 ms is left out
    assert np.isclose(run["pred_ttft_ms"], rows["pred_ttft_ms"].iloc[[0, 2]].mean())
    assert "1 measured request(s) rejected by the simulated server" in run["note"]
    slo = result["slo"]["runs"][0]
    assert (slo["measured"], slo["predicted"]) == (1.0, 2 / 3)


def test_a_metric_measured_nowhere_is_still_predicted(tmp_path):
    """An all-blank e2e_ms column scores nothing, but the run's prediction is still there, as
    when the column is left out."""
    text = HEADER + "0.0,100,10,50.0,25.0,\n0.5,120,12,60.0,25.0,\n"
    result, _ = _validate(tmp_path, text)
    run = result["per_run"][0]
    assert run["measured_e2e_ms"] is None and run["err_pct_e2e_ms"] is None
    assert run["pred_e2e_ms"] > run["pred_ttft_ms"] > 0
