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
from test_report import make_iterations

from simulator import api
from simulator.report import figures
from simulator.report.aggregate import bin_iterations, per_instance
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


def test_disaggregated_header_names_both_pools_not_one_pools_replicas(disaggregated: str) -> None:
    header = _header(disaggregated)
    assert "Disaggregated <b>prefill 2× TP" in header and "decode 2× TP" in header
    assert "Replicas" not in header and "TP <b>" not in header


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


@pytest.fixture(scope="module")
def data_parallel():
    """Two attention-DP ranks of one replica of a MoE model."""
    return api.run(SCENARIOS / "chatbot.yaml", [
        FEW, "model.name=qwen3-30b-a3b", "parallelism.dp=2", "parallelism.expert_parallel=true",
    ])  # fmt: skip


def test_data_parallel_header_shows_dp_and_ep(data_parallel, tmp_path: Path) -> None:
    page = _page(data_parallel, tmp_path / "out")
    header = _header(page)
    assert "DP <b>2</b>" in header and "EP <b>2</b>" in header
    assert "KV capacity per DP rank" in page
    assert "<figcaption>KV cache utilization per replica and DP rank</figcaption>" in page


def test_header_leaves_out_ep_when_experts_are_not_split(tmp_path: Path) -> None:
    page = _page(api.run(SCENARIOS / "chatbot.yaml", [FEW]), tmp_path / "out")
    assert "DP <b>1</b>" in _header(page) and "EP" not in _header(page)
    assert "<figcaption>KV cache utilization per replica</figcaption>" in page


def _drawn(monkeypatch, plot, binned: pd.DataFrame, tmp_path: Path):
    """The figure `plot` draws, kept open (the report closes each one after saving)."""
    kept: list = []
    with monkeypatch.context() as m:
        m.setattr(figures.plt, "close", kept.append)
        plot(binned, tmp_path / "figure.png")
    return kept[0]


def _lines(monkeypatch, plot, binned: pd.DataFrame, tmp_path: Path) -> dict[str, np.ndarray]:
    """Legend label -> y values of each line of the figure's first panel."""
    fig = _drawn(monkeypatch, plot, binned, tmp_path)
    try:
        return {line.get_label(): np.asarray(line.get_ydata()) for line in fig.axes[0].lines}
    finally:
        plt.close(fig)


def _bin_means(iterations: pd.DataFrame, values: pd.Series, keys: list[str], bins: int) -> pd.Series:
    """Per-iteration means of `values` per `keys` and time bin, on the report's shared grid."""
    t = iterations["start_s"]
    width = (t.max() - t.min()) / bins
    idx = ((t - t.min()) / width).astype(int).clip(upper=bins - 1).rename("bin")
    return values.groupby([*(iterations[k] for k in keys), idx]).mean()


def _ranked_log(replicas: int, ranks: int, steps: int = 40) -> pd.DataFrame:
    """Lockstep ranks (one row per rank per pass, same start) whose cache and queue differ
    by rank: rank k holds 10 + 20k % of its blocks and queues k requests throughout."""
    rows = [
        {"replica": r, "dp_rank": k, "start_s": 0.01 * i, "duration_ms": 10.0,
         "prefill_tokens": 0, "decode_tokens": 2 + k, "num_seqs": 2 + k,
         "kv_blocks_used": 100 + 200 * k, "kv_blocks_total": 1000, "queue_len": k}
        for i in range(steps) for r in range(replicas) for k in range(ranks)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_data_parallel_figures_draw_a_line_per_rank(monkeypatch, tmp_path: Path) -> None:
    """Each rank's line is flat at that rank's own value: lumping the interleaved ranks of a
    replica would draw one line at their mean (or a zig-zag between them)."""
    binned = bin_iterations(_ranked_log(replicas=2, ranks=2), max_bins=10)
    labels = ["replica 0 · rank 0", "replica 0 · rank 1", "replica 1 · rank 0", "replica 1 · rank 1"]
    kv = _lines(monkeypatch, figures.plot_kv_utilization, binned, tmp_path)
    queue = _lines(monkeypatch, figures.plot_queue_length, binned, tmp_path)
    seqs = _lines(monkeypatch, figures.plot_batch_size, binned, tmp_path)
    assert list(kv) == list(queue) == list(seqs) == labels
    for label in labels:
        k = int(label[-1])
        assert len(kv[label]) == 10
        np.testing.assert_allclose(kv[label], 10.0 + 20.0 * k)  # its own blocks, in %
        np.testing.assert_allclose(queue[label], k)
        np.testing.assert_allclose(seqs[label], 2 + k)
    pools = figures.series(binned, {0: "prefill", 1: "decode"})
    assert [label for label, _, _ in pools][1] == "prefill instance 0 · rank 1"


def test_many_data_parallel_ranks_are_coloured_by_rank(monkeypatch, tmp_path: Path) -> None:
    """Past the legend cap, lines are unlabeled and coloured by rank, with a colour key."""
    binned = bin_iterations(_ranked_log(replicas=2, ranks=8, steps=5), max_bins=5)
    fig = _drawn(monkeypatch, figures.plot_kv_utilization, binned, tmp_path)
    try:
        ax = fig.axes[0]
        assert ax.get_legend() is None and ax.child_axes  # the boxed colour bar
        assert len(ax.lines) == 16
        assert not any(line.get_label().startswith("replica") for line in ax.lines)
        colors = [tuple(line.get_color()) for line in ax.lines]  # replica 0's ranks, then 1's
        assert colors[:8] == colors[8:] and len(set(colors[:8])) == 8
    finally:
        plt.close(fig)


def test_figures_without_dp_keep_a_line_per_replica(monkeypatch, tmp_path: Path) -> None:
    """No dp_rank column, or a single rank, draws what the report drew before ranks: one line
    per replica of its iterations' bin means, labeled by replica."""
    it = make_iterations(600, replicas=2)
    binned = bin_iterations(it, max_bins=20)
    single = bin_iterations(it.assign(dp_rank=0), max_bins=20)
    pd.testing.assert_frame_equal(single, binned)
    seqs = _lines(monkeypatch, figures.plot_batch_size, binned, tmp_path)
    kv = _lines(monkeypatch, figures.plot_kv_utilization, single, tmp_path)
    assert list(seqs) == list(kv) == ["replica 0", "replica 1"]
    want_seqs = _bin_means(it, it["num_seqs"], ["replica"], 20)
    want_kv = _bin_means(it, it["kv_blocks_used"] / it["kv_blocks_total"] * 100, ["replica"], 20)
    for r in (0, 1):
        np.testing.assert_allclose(seqs[f"replica {r}"], want_seqs.loc[r].to_numpy())
        np.testing.assert_allclose(kv[f"replica {r}"], want_kv.loc[r].to_numpy())


def test_a_data_parallel_runs_kv_lines_are_each_ranks_own_cache(data_parallel, monkeypatch,
                                                                 tmp_path: Path) -> None:
    it = data_parallel.iterations
    binned = bin_iterations(it, max_bins=50)
    kv = _lines(monkeypatch, figures.plot_kv_utilization, binned, tmp_path)
    assert list(kv) == ["replica 0 · rank 0", "replica 0 · rank 1"]
    want = _bin_means(it, it["kv_blocks_used"] / it["kv_blocks_total"] * 100, ["replica", "dp_rank"], 50)
    for k in (0, 1):
        np.testing.assert_allclose(kv[f"replica 0 · rank {k}"], want.loc[(0, k)].to_numpy())


def _per_run(e2e: float | None) -> dict:
    return {"run": "r", "measured_ttft_ms": 100.0, "pred_ttft_ms": 110.0, "err_pct_ttft_ms": 10.0,
            "measured_tpot_ms": 20.0, "pred_tpot_ms": 19.0, "err_pct_tpot_ms": -5.0,
            "measured_e2e_ms": e2e, "pred_e2e_ms": 2100.0, "err_pct_e2e_ms": 5.0 if e2e else None}


def _headers(table: str) -> list[str]:
    return re.findall(r"<th>(.*?)</th>", table)


def test_validation_table_headers_carry_units() -> None:
    headers = _headers(_per_run_table([_per_run(None)], cliffs=True))
    assert "mean TTFT meas (ms)" in headers and "mean TPOT pred (ms)" in headers
    assert not any("E2E" in h for h in headers)
    assert headers[-2:] == ["cliff (meas)", "cliff (pred)"]


def test_validation_table_has_e2e_when_any_run_measured_it() -> None:
    table = _per_run_table([_per_run(None), _per_run(2000.0)], cliffs=False)
    headers = _headers(table)
    assert headers[7:10] == ["mean E2E meas (ms)", "mean E2E pred (ms)", "E2E err %"]
    assert "2,000.0" in table and "2,100.0" in table
    assert not any("cliff" in h for h in headers)  # per-request runs have no cliffs


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


def test_an_idle_replica_keeps_its_row() -> None:
    """Two requests on three replicas: the third's empty row is the imbalance to see."""
    requests = pd.DataFrame({"replica": [0, 1], "ttft_ms": [10.0, 20.0], "tpot_ms": [1.0, 2.0],
                             "preemptions": [0, 0], "status": ["completed"] * 2})
    table = per_instance(requests, replicas=3)
    assert list(table["replica"]) == [0, 1, 2] and list(table["requests"]) == [1, 1, 0]
    assert table.loc[2, "rejected"] == 0 and pd.isna(table.loc[2, "ttft_mean"])
    assert list(per_instance(requests)["replica"]) == [0, 1]  # without the count: those seen


def test_an_idle_dp_rank_keeps_its_row() -> None:
    """Regression (session-56 audit): DP rows came only from ranks that served a request."""
    requests = pd.DataFrame({"replica": [0, 1], "dp_rank": [0, 0], "ttft_ms": [10.0, 20.0],
                             "tpot_ms": [1.0, 2.0], "preemptions": [0, 0], "status": ["completed"] * 2})
    table = per_instance(requests, replicas=2, dp=2)
    assert list(zip(table["replica"], table["pool"], table["requests"], strict=True)) == [
        (0, "DP rank 0", 1), (0, "DP rank 1", 0), (1, "DP rank 0", 1), (1, "DP rank 1", 0)]


def test_pipeline_virtual_engines_get_lines_of_their_own() -> None:
    """Each PP virtual engine schedules and caches on its own: one line each, named so,
    not one zigzag line per replica (regression, session-56 audit)."""
    from simulator.report.aggregate import bin_iterations
    from simulator.report.figures import series

    it = pd.DataFrame({"replica": [0, 0, 0, 0], "virtual_engine": [0, 1, 0, 1], "start_s": [0.0, 0.1, 0.2, 0.3],
                       "kv_blocks_used": [5, 2, 6, 2], "kv_blocks_total": [10, 10, 10, 10], "queue_len": [0] * 4,
                       "num_seqs": [5, 2, 5, 2], "prefill_tokens": [0] * 4, "decode_tokens": [5, 2, 5, 2]})
    lines = series(bin_iterations(it, max_bins=2))
    assert [label for label, _, _ in lines] == ["replica 0 · virtual engine 0", "replica 0 · virtual engine 1"]
    assert [g["seqs_mean"].tolist() for _, _, g in lines] == [[5.0, 5.0], [2.0, 2.0]]


# -- what the figures say when the data is lopsided (session 39) --------------------------
def _kept(monkeypatch, draw):
    kept: list = []
    with monkeypatch.context() as m:
        m.setattr(figures.plt, "close", kept.append)
        draw()
    return kept[0]


def test_a_far_slo_stays_in_the_legend_not_on_the_axis(monkeypatch, tmp_path: Path) -> None:
    """Requests of 10-40 ms under a 500 ms SLO: the axis follows the requests (the bins
    resolve them) and the legend still names the SLO; a near SLO keeps its line."""
    v = np.random.default_rng(0).uniform(10, 40, 2000)
    fig = _kept(monkeypatch, lambda: figures.plot_distribution(v, tmp_path / "d.png", metric="TTFT", slo_ms=500))
    try:
        ax = fig.axes[0]
        assert ax.get_xlim()[1] < 50
        legend = fig.axes[1].get_legend()  # on the CDF's axis, below the plot
        assert any("SLO = 500.0 ms (off the axis, right)" in t.get_text() for t in legend.get_texts())
    finally:
        plt.close(fig)
    fig = _kept(monkeypatch, lambda: figures.plot_distribution(v, tmp_path / "e.png", metric="TTFT", slo_ms=60))
    try:
        ax = fig.axes[0]
        assert ax.get_xlim()[1] >= 60
        assert any(t.get_text() == "SLO = 60.0 ms" for t in fig.axes[1].get_legend().get_texts())
    finally:
        plt.close(fig)


def test_a_tight_distribution_is_not_squashed_against_zero(monkeypatch, tmp_path: Path) -> None:
    """A closed loop's TPOTs of 30-34 ms: the axis starts just below them, not at 0, and
    a near SLO below them stays on it."""
    v = np.random.default_rng(1).uniform(30, 34, 500)
    for slo, low in ((None, 29.0), (25.0, 23.0)):
        fig = _kept(monkeypatch, lambda slo=slo: figures.plot_distribution(v, tmp_path / "t.png", metric="TPOT",
                                                                          slo_ms=slo))
        try:
            lo, hi = fig.axes[0].get_xlim()
            assert low < lo <= min(v.min(), slo or np.inf) and hi >= v.max()
        finally:
            plt.close(fig)


def test_a_queue_that_never_formed_says_so(monkeypatch, tmp_path: Path) -> None:
    binned = bin_iterations(make_iterations(200).assign(queue_len=0), max_bins=10)
    fig = _drawn(monkeypatch, figures.plot_queue_length, binned, tmp_path)
    try:
        assert fig.axes[0].get_title() == "Queue length: no request waited"
        assert fig.axes[0].get_ylim() == (0.0, 1.0)
    finally:
        plt.close(fig)


def test_disaggregated_tokens_per_iteration_are_drawn_per_pool(monkeypatch, tmp_path: Path) -> None:
    """A prefill instance's 8,192-token steps and a decode instance's 64-token steps are not
    averaged into one line: each pool gets its own."""
    rows = [{"replica": r, "start_s": 0.01 * i, "duration_ms": 10.0, "prefill_tokens": 8192 if r == 0 else 0,
             "decode_tokens": 0 if r == 0 else 64, "num_seqs": 4 if r == 0 else 64,
             "kv_blocks_used": 100, "kv_blocks_total": 1000, "queue_len": 0}
            for i in range(50) for r in (0, 1) for _ in range(1 if r == 0 else 5)]
    binned = bin_iterations(pd.DataFrame(rows), max_bins=5)
    kept: list = []
    with monkeypatch.context() as m:
        m.setattr(figures.plt, "close", kept.append)
        figures.plot_batch_size(binned, tmp_path / "b.png", pools={0: "prefill", 1: "decode"})
    fig = kept[0]
    try:
        lines = {line.get_label(): np.asarray(line.get_ydata()) for ax in fig.axes[1:] for line in ax.lines}
        np.testing.assert_allclose(lines["prefill instances"], 8192)
        np.testing.assert_allclose(lines["decode instances (right axis)"], 64)  # its own scale
    finally:
        plt.close(fig)


def test_scatter_titles_the_shared_family_and_moves_a_long_legend_aside() -> None:
    family = "h200_sxm meta-llama/Llama-3.1-70B fp8"
    groups = [f"{family} tp{tp} isl{isl}" for tp in (1, 2, 4) for isl in (1024, 8192)]
    runs = pd.DataFrame({"group": groups, "source": "s.csv", "family": family,
                         "measured_ttft_ms": np.linspace(100, 600, 6), "pred_ttft_ms": np.linspace(105, 590, 6)})
    fig = scatter_figure(runs, "ttft_ms", "TTFT (ms)")
    try:
        ax = fig.axes[0]
        assert ax.get_title().endswith(f"\n{family}")
        texts = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "tp1 isl1024" in texts and not any(t.startswith("h200_sxm") for t in texts)
        assert ax.get_legend().get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1  # beside the axes
    finally:
        plt.close(fig)


def test_output_tokens_are_counted_as_they_are_made_not_at_finish() -> None:
    """Four clients in lockstep, each request 100 tokens over 10 s: requests finish only at
    10, 20, 30 s, but tokens flow at 40/s throughout, and all of them are counted."""
    from simulator.report.aggregate import bin_completions

    rounds = [(r * 10.0, r * 10.0 + 10.0) for r in range(3)]
    requests = pd.DataFrame([{"status": "completed", "first_token_s": a, "finish_s": b, "output_tokens": 100}
                             for a, b in rounds for _ in range(4)])
    edges, _, tokens_per_s = bin_completions(requests, max_bins=6)
    assert np.diff(edges) @ tokens_per_s == pytest.approx(1200.0)
    assert tokens_per_s.min() > 0.5 * tokens_per_s.max()  # no empty bins between the finishes


def test_kv_capacity_is_said_per_replica_when_there_are_several(tmp_path: Path) -> None:
    """The terminal says 'tokens per replica'; the page says so too (the summary's
    capacity_tokens is one replica's), and a one-replica page adds no scope."""
    two = _page(api.run(SCENARIOS / "chatbot.yaml", [FEW, "parallelism.replicas=2"]), tmp_path / "two")
    one = _page(api.run(SCENARIOS / "chatbot.yaml", [FEW]), tmp_path / "one")
    assert "KV capacity per replica" in two and "KV capacity per replica" not in one
    assert "KV capacity</td>" in one
