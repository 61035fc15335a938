"""Write one run's report: the PNG figures, then report.html embedding them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from simulator.report import figures
from simulator.report.aggregate import (
    bin_iterations,
    column,
    completed_mask,
    instance_pools,
    per_instance,
    ranked,
)
from simulator.report.html import get, render_page

HTML_NAME = "report.html"


def write_report(
    out_dir: Path,
    summary: dict,
    requests: pd.DataFrame,
    iterations: pd.DataFrame,
    title: str,
    scenario_yaml: str | None = None,
) -> Path:
    """Writes PNG figures and a self-contained report.html into out_dir; returns the html path.

    The PNGs are kept next to the page so they can be reused in slides or diffs, and are
    also embedded as base64 data URIs so the html alone is a complete, offline report.
    Iterations are binned once and shared by the three time-series figures.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    slo = get(summary, "goodput", "slo")
    done = completed_mask(requests)

    plotted: list[tuple[str, Path]] = []
    for key, metric, name in (
        ("ttft_ms", "TTFT", "ttft_distribution.png"),
        ("tpot_ms", "TPOT", "tpot_distribution.png"),
        ("e2e_ms", "E2E latency", "e2e_distribution.png"),
    ):
        path = figures.plot_distribution(
            column(requests, key)[done], out_dir / name, metric=metric, slo_ms=get(slo, key)
        )
        plotted.append((f"{metric} distribution (completed requests)", path))

    plotted.append(
        ("Throughput over time", figures.plot_throughput(requests, out_dir / "throughput.png"))
    )
    binned = bin_iterations(iterations)
    pools = instance_pools(summary, iterations)
    rank = " and DP rank" if ranked(binned) else ""
    per = f"instance{rank} (prefill and decode pools)" if pools else f"replica{rank}"
    plotted += [
        (
            f"Queue length per {per}",
            figures.plot_queue_length(binned, out_dir / "queue_length.png", pools),
        ),
        (
            f"KV cache utilization per {per}",
            figures.plot_kv_utilization(binned, out_dir / "kv_utilization.png", pools),
        ),
        (
            "Batch size and tokens per iteration",
            figures.plot_batch_size(binned, out_dir / "batch_size.png", pools),
        ),
    ]

    replicas, dp = get(summary, "config", "replicas"), get(summary, "config", "dp")
    page = render_page(title, summary, plotted,
                       per_instance(requests, pools, replicas if isinstance(replicas, int) else None,
                                    dp if isinstance(dp, int) else None), scenario_yaml)
    html_path = out_dir / HTML_NAME
    html_path.write_text(page, encoding="utf-8")
    return html_path
