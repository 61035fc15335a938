"""Reports of layouts beyond one colocated pool: disaggregated pools, attention DP, and the
validation page's tables and scatter plots."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.lines import Line2D

from simulator import api
from simulator.report.aggregate import per_instance
from simulator.validation.report import _per_run_table, scatter_figure

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
FEW = "workload.num_requests=30"


def _page(result, out: Path) -> str:
    return (api.write_outputs(result, out) / "report.html").read_text(encoding="utf-8")


def _header(page: str) -> str:
    return re.search(r'<p class="config">(.*?)</p>', page).group(1)


@pytest.fixture(scope="module")
def disaggregated(tmp_path_factory) -> str:
    """Two prefill and two decode instances, so each pool has more than one row."""
    result = api.run(SCENARIOS / "disaggregated.yaml", [
        FEW, "disaggregation.prefill.replicas=2", "disaggregation.decode.replicas=2",
        "hardware.gpus_per_node=16",
    ])  # fmt: skip
    return _page(result, tmp_path_factory.mktemp("disaggregated") / "out")


def test_disaggregated_table_has_every_instance_of_both_pools(disaggregated: str) -> None:
    section = disaggregated[disaggregated.index("<h2>Per instance</h2>"):]
    rows = re.findall(r"<tr><td>(prefill|decode)</td><td>(\d+)</td>", section)
    assert rows == [("prefill", "0"), ("prefill", "1"), ("decode", "2"), ("decode", "3")]
    assert "Per replica" not in disaggregated


def test_disaggregated_figures_name_the_pools(disaggregated: str) -> None:
    assert "KV cache utilization per instance (prefill and decode pools)" in disaggregated
    assert "Queue length per instance (prefill and decode pools)" in disaggregated


def test_disaggregated_summary_shows_kv_transfer(disaggregated: str) -> None:
    assert "<h2>Disaggregated pools</h2>" in disaggregated
    for stat in ("mean", "p99"):
        assert re.search(rf"KV transfer {stat}</td><td[^>]*>[\d.]+ ms<", disaggregated), stat
    assert re.search(r"KV transfer links</td><td[^>]*>NVLink", disaggregated)
    assert "KV capacity (decode pool)" in disaggregated


def test_figure_legend_names_pool_and_instance() -> None:
    from simulator.report.figures import instance_label

    pools = {0: "prefill", 1: "decode"}
    assert instance_label(0, pools) == "prefill instance 0"
    assert instance_label(1, pools) == "decode instance 1"
    assert instance_label(3, None) == "replica 3"


def test_idle_instances_still_get_a_row() -> None:
    """Decode instance 3 served nothing; a one-token request ended at its prefill instance."""
    requests = pd.DataFrame({
        "replica": [2, 2, 1], "prefill_replica": [0, 1, -1], "ttft_ms": [10.0, 30.0, 50.0],
        "tpot_ms": [5.0, 7.0, np.nan], "finish_s": [1.0, 2.0, 3.0], "preemptions": [1, 0, 2],
        "status": ["completed"] * 3,
    })  # fmt: skip
    table = per_instance(requests, {0: "prefill", 1: "prefill", 2: "decode", 3: "decode"})
    assert table[["pool", "replica", "requests"]].values.tolist() == [
        ["prefill", 0, 1], ["prefill", 1, 2], ["decode", 2, 2], ["decode", 3, 0],
    ]  # fmt: skip
    assert table["ttft_mean"].tolist()[:2] == [10.0, 40.0]
    assert table["tpot_mean"].tolist()[2] == 6.0
    assert table["preemptions"].tolist() == [0, 2, 1, 0]


def test_data_parallel_header_shows_dp_and_ep(tmp_path: Path) -> None:
    result = api.run(SCENARIOS / "chatbot.yaml", [
        FEW, "model.name=qwen3-30b-a3b", "parallelism.dp=2", "parallelism.expert_parallel=true",
    ])  # fmt: skip
    page = _page(result, tmp_path / "out")
    header = _header(page)
    assert "DP <b>2</b>" in header and "EP <b>2</b>" in header
    assert "KV capacity per DP rank" in page


def test_header_leaves_out_ep_when_experts_are_not_split(tmp_path: Path) -> None:
    page = _page(api.run(SCENARIOS / "chatbot.yaml", [FEW]), tmp_path / "out")
    assert "DP <b>1</b>" in _header(page) and "EP" not in _header(page)


def _per_run(e2e: float | None) -> dict:
    return {"run": "r", "measured_ttft_ms": 100.0, "pred_ttft_ms": 110.0, "err_pct_ttft_ms": 10.0,
            "measured_tpot_ms": 20.0, "pred_tpot_ms": 19.0, "err_pct_tpot_ms": -5.0,
            "measured_e2e_ms": e2e, "pred_e2e_ms": 2100.0, "err_pct_e2e_ms": 5.0 if e2e else None}


def _headers(table: str) -> list[str]:
    return re.findall(r"<th>(.*?)</th>", table)


def test_validation_table_headers_carry_units() -> None:
    headers = _headers(_per_run_table([_per_run(None)]))
    assert "TTFT meas (ms)" in headers and "TPOT pred (ms)" in headers
    assert not any(h.startswith("E2E") for h in headers)


def test_validation_table_has_e2e_when_any_run_measured_it() -> None:
    table = _per_run_table([_per_run(None), _per_run(2000.0)])
    headers = _headers(table)
    assert headers[7:10] == ["E2E meas (ms)", "E2E pred (ms)", "E2E err %"]
    assert "2,000.0" in table and "2,100.0" in table


def test_scatter_band_is_drawn_under_the_points() -> None:
    m = np.array([10.0, 20.0, 40.0])
    runs = pd.DataFrame({"measured_tpot_ms": m, "pred_tpot_ms": m * 1.05, "group": ["a", "a", "b"],
                         "source": "x.csv", "family": "f"})
    fig = scatter_figure(runs, "tpot_ms", "TPOT (ms)")
    try:
        ax = fig.axes[0]
        (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
        points = [c for c in ax.collections if isinstance(c, PathCollection)]
        diagonal = [line for line in ax.lines if isinstance(line, Line2D)]
        assert len(points) == 2 and diagonal
        assert all(band.get_zorder() < c.get_zorder() for c in points + diagonal)
    finally:
        plt.close(fig)


def test_data_parallel_requests_are_tabled_per_rank() -> None:
    """A DP run's per-instance table has a row per rank of each replica, from dp_rank."""
    requests = pd.DataFrame({
        "replica": [0, 0, 0, 1], "dp_rank": [0, 1, 1, 0], "ttft_ms": [10.0, 20.0, 40.0, 5.0],
        "tpot_ms": [1.0, 2.0, 2.0, 1.0], "preemptions": [0, 1, 0, 0],
        "status": ["completed"] * 4,
    })
    table = per_instance(requests)
    assert list(zip(table["replica"], table["pool"], table["requests"], strict=True)) == [
        (0, "DP rank 0", 1), (0, "DP rank 1", 2), (1, "DP rank 0", 1)]
    assert table.loc[1, "ttft_mean"] == 30.0 and table.loc[1, "preemptions"] == 1
