"""The report writer renders every figure and one self-contained, escaped html page."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator.report import write_report

ROOT = Path(__file__).resolve().parent.parent

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FIGURES = (
    "ttft_distribution.png",
    "tpot_distribution.png",
    "e2e_distribution.png",
    "throughput.png",
    "queue_length.png",
    "kv_utilization.png",
    "batch_size.png",
)
TITLE = 'Run <A&B> "quoted"'
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*https?://""", re.IGNORECASE)

REQUEST_COLUMNS = [
    "request_id", "replica", "arrival_s", "prompt_tokens", "cached_tokens", "output_tokens", "first_token_s",
    "finish_s", "ttft_ms", "tpot_ms", "e2e_ms", "preemptions", "status", "reject_reason",
]  # fmt: skip
ITERATION_COLUMNS = [
    "replica", "start_s", "duration_ms", "prefill_tokens", "decode_tokens", "num_seqs",
    "kv_blocks_used", "kv_blocks_total", "queue_len",
]  # fmt: skip


def make_summary() -> dict:
    lat = {"mean": 120.5, "p50": 100.0, "p90": 180.0, "p95": 200.0, "p99": 250.0}
    return {
        "scenario": "chat <burst>",
        "requests": {"completed": 190, "rejected": 10, "total": 200},
        "duration_s": 60.0,
        "throughput": {
            "requests_per_s": 3.2,
            "input_tokens_per_s": 1500.0,
            "output_tokens_per_s": 640.0,
        },
        "ttft_ms": lat,
        "tpot_ms": {"mean": 20.0, "p50": 18.0, "p90": None, "p95": None, "p99": 40.0},
        "itl_ms": lat,
        "e2e_ms": lat,
        "goodput": {
            "requests_per_s": 3.0,
            "slo_attainment": 0.94,
            "slo": {"ttft_ms": 200.0, "tpot_ms": None, "e2e_ms": 5000.0},
        },
        "kv_cache": {"capacity_tokens": 100_000, "peak_utilization": 0.9, "mean_utilization": 0.5},
        "config": {"model": "llama-8b", "gpu": "H100", "tp": 1, "pp": 1, "replicas": 2,
                   "scheduler": "vllm"},
        "sim_wall_s": 1.25,
    }  # fmt: skip


def make_requests(n: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.uniform(0, 60, n))
    out = rng.integers(1, 300, n)
    ttft = rng.lognormal(4.5, 0.5, n)
    tpot = np.where(out > 1, rng.normal(20, 3, n), np.nan)
    e2e = ttft + np.nan_to_num(tpot) * (out - 1)
    rejected = rng.random(n) < 0.05
    status = np.where(rejected, "rejected", "completed")
    first = arrival + ttft / 1e3
    finish = arrival + e2e / 1e3
    for a in (ttft, tpot, e2e, first, finish):
        a[rejected] = np.nan
    return pd.DataFrame(
        {
            "request_id": np.arange(n),
            "replica": rng.integers(0, 2, n),
            "arrival_s": arrival,
            "prompt_tokens": rng.integers(10, 2000, n),
            "output_tokens": out,
            "first_token_s": first,
            "finish_s": finish,
            "ttft_ms": ttft,
            "tpot_ms": tpot,
            "e2e_ms": e2e,
            "preemptions": rng.integers(0, 3, n),
            "status": status,
            "reject_reason": np.where(rejected, "too_long", ""),
        }
    )


def make_iterations(n: int, replicas: int = 2, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    total = 1000
    return pd.DataFrame(
        {
            "replica": np.arange(n) % replicas,
            "start_s": np.sort(rng.uniform(0, 60, n)),
            "duration_ms": rng.uniform(5, 50, n),
            "prefill_tokens": rng.integers(0, 2048, n),
            "decode_tokens": rng.integers(0, 256, n),
            "num_seqs": rng.integers(1, 256, n),
            "kv_blocks_used": rng.integers(0, total, n),
            "kv_blocks_total": np.full(n, total),
            "queue_len": rng.integers(0, 50, n),
        }
    )


def check_report(html_path: Path, out_dir: Path) -> str:
    assert html_path == out_dir / "report.html"
    page = html_path.read_text(encoding="utf-8")
    for name in FIGURES:
        data = (out_dir / name).read_bytes()
        assert data.startswith(PNG_MAGIC), name
    assert page.count('src="data:image/png;base64,') == len(FIGURES)
    assert not EXTERNAL.search(page)
    assert "<script" not in page.lower()
    assert "<link" not in page.lower()
    return page


def test_full_report(tmp_path: Path) -> None:
    yaml = "name: chat\nworkload:\n  rate: 5  # <requests/s> & more\n"
    html_path = write_report(
        tmp_path, make_summary(), make_requests(), make_iterations(5000), TITLE, yaml
    )
    page = check_report(html_path, tmp_path)
    assert "Run &lt;A&amp;B&gt; &quot;quoted&quot;" in page
    assert TITLE not in page
    assert "chat &lt;burst&gt;" in page
    assert "<pre>name: chat" in page and "&lt;requests/s&gt; &amp; more" in page
    assert "94.0%" in page  # SLO attainment
    assert "llama-8b" in page and "Per replica" in page
    assert "prefix cache" not in page  # nothing was shared


def test_prefix_cache_hit_rate_is_shown_when_prompts_shared(tmp_path: Path) -> None:
    summary = make_summary()
    summary["kv_cache"]["prefix_cache_hit_rate"] = 0.42
    page = check_report(write_report(tmp_path, summary, make_requests(), make_iterations(50), TITLE), tmp_path)
    assert re.search(r"Prompt tokens from the prefix cache</td><td[^>]*>42\.0%", page)


def test_all_rejected_and_no_iterations(tmp_path: Path) -> None:
    requests = make_requests(20)
    requests["status"] = "rejected"
    for col in ("first_token_s", "finish_s", "ttft_ms", "tpot_ms", "e2e_ms"):
        requests[col] = np.nan
    summary = {"requests": {"completed": 0, "rejected": 20, "total": 20}, "ttft_ms": None}
    iterations = pd.DataFrame(columns=ITERATION_COLUMNS)
    page = check_report(write_report(tmp_path, summary, requests, iterations, TITLE), tmp_path)
    assert "—" in page
    assert "<pre>" not in page


@pytest.mark.parametrize("summary", [{}, {"goodput": None, "config": "bogus"}])
def test_empty_frames_and_missing_summary(tmp_path: Path, summary: dict) -> None:
    requests = pd.DataFrame(columns=REQUEST_COLUMNS)
    out_dir = tmp_path / "nested" / "dir"
    page = check_report(
        write_report(out_dir, summary, requests, pd.DataFrame(), TITLE, ""), out_dir
    )
    assert "No requests." in page


def test_single_iteration_and_zero_kv_total(tmp_path: Path) -> None:
    iterations = make_iterations(1)
    iterations["kv_blocks_total"] = 0
    check_report(
        write_report(tmp_path, make_summary(), make_requests(3), iterations, TITLE), tmp_path
    )


def test_many_replicas(tmp_path: Path) -> None:
    requests = make_requests(500)
    requests["replica"] = np.arange(len(requests)) % 16
    check_report(
        write_report(tmp_path, make_summary(), requests, make_iterations(20_000, 16), TITLE),
        tmp_path,
    )


def test_large_iteration_log(tmp_path: Path) -> None:
    html_path = write_report(
        tmp_path, make_summary(), make_requests(5000), make_iterations(200_000, 4), TITLE
    )
    check_report(html_path, tmp_path)


def test_the_page_names_cost_and_where_the_times_come_from(tmp_path):
    """What the terminal prints under the table (GPUs and cost, the kernel tables, the API
    server's share of TTFT) is on the page too."""
    from simulator import api

    result = api.run(ROOT / "scenarios" / "chatbot.yaml", ["workload.num_requests=20"])
    page = (api.write_outputs(result, tmp_path / "out") / "report.html").read_text(encoding="utf-8")
    cost = result.summary["cost"]
    assert f"${cost['usd_per_hour']:,.2f}/hour" in page
    assert f"${cost['usd_per_million_output_tokens']:,.2f}</td>" in page
    assert f"Kernel times: {result.summary['config']['kernel_times']}" in page
    assert "API server, in every TTFT: tokenising 1.3 µs a prompt token" in page
    bare = api.run(ROOT / "scenarios" / "chatbot.yaml", ["workload.num_requests=20",
                                                         "cost_model.frontend_us_per_token=0",
                                                         "cost_model.frontend_latency_ms=0"])
    page = (api.write_outputs(bare, tmp_path / "bare") / "report.html").read_text(encoding="utf-8")
    assert "No API-server time is added" in page


def test_a_run_without_an_slo_claims_no_attainment(tmp_path: Path) -> None:
    summary = make_summary()
    summary["goodput"]["slo"] = {"ttft_ms": None, "tpot_ms": None, "e2e_ms": None}
    summary["goodput"]["slo_attainment"] = 1.0
    page = check_report(write_report(tmp_path, summary, make_requests(), make_iterations(50), TITLE), tmp_path)
    assert "No SLO set" in page and "100.0%" not in page and "Goodput" not in page


def test_the_page_says_why_requests_were_rejected(tmp_path: Path) -> None:
    summary = make_summary()
    summary["requests"]["rejected_reasons"] = [
        {"reason": "prompt + output = 1787 tokens exceeds max_model_len=1024", "count": 8},
        {"reason": "never scheduled <deadlock>", "count": 2}]
    page = check_report(write_report(tmp_path, summary, make_requests(), make_iterations(50), TITLE), tmp_path)
    assert "<h2>Rejected requests</h2>" in page
    assert re.search(r"exceeds max_model_len=1024</td><td[^>]*>8<", page)
    assert "never scheduled &lt;deadlock&gt;" in page
