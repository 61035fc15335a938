"""Assemble report.html: one self-contained file with inline CSS and base64 PNGs.

Self-contained so a report can be mailed, attached to a ticket or opened offline and
still show everything. All text goes through html.escape: titles, model names and
scenario YAML are user input.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.formatting import percent, significant
from simulator.layout_text import pool_layout
from simulator.metrics import slo_set

MISSING = "—"
PERCENTILES = ("mean", "p50", "p90", "p95", "p99")
LATENCIES = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2e_ms", "E2E"))

CSS = """
:root { --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --head: #f6f8fa; --accent: #0969da; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff; line-height: 1.45;
  font: 15px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.config { color: var(--muted); margin: 0 0 8px; }
.config b { color: var(--fg); font-weight: 600; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 12px; margin: 16px 0; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; }
.card .k { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .v { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
.tables { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: 14px; }
th, td { border: 1px solid var(--line); padding: 5px 10px; }
th { background: var(--head); text-align: left; font-weight: 600; }
td.n { text-align: right; }
.figs { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(520px, 100%), 1fr)); gap: 18px; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 8px; padding: 8px; }
figure img { width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 13px; padding: 4px 4px 0; }
pre { background: var(--head); border: 1px solid var(--line); border-radius: 8px;
  padding: 12px 14px; overflow-x: auto; font-size: 13px; }
footer { color: var(--muted); font-size: 12px; margin-top: 36px; }
"""


def get(d: Any, *keys: str) -> Any:
    """Nested lookup that yields None for any missing level, so partial summaries render."""
    for key in keys:
        if not isinstance(d, Mapping):
            return None
        d = d.get(key)
    return d


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, Real):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def fmt_num(value: Any, unit: str = "") -> str:
    """Human-scaled number; MISSING for None/NaN/non-numeric. Integers keep every digit."""
    x = _number(value)
    if x is None:
        return MISSING
    # The terminal's rule (formatting.significant), so a value reads the same in both.
    text = f"{int(x):,}" if isinstance(value, Integral) else significant(x)
    return f"{text} {unit}".rstrip()


def _usd(value: Any, per: str = "") -> str:
    x = _number(value)
    return MISSING if x is None else f"${x:,.2f}{per}"


def fmt_pct(value: Any) -> str:
    """Format a 0..1 fraction as a percentage (utilization and attainment are fractions)."""
    x = _number(value)
    return MISSING if x is None else percent(x)


def fmt_text(value: Any) -> str:
    return MISSING if value is None or value == "" else str(value)


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int = 1) -> str:
    """Plain table; columns from `numeric_from` on are right-aligned numbers."""
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="n">{_esc(c)}</td>' if i >= numeric_from else f"<td>{_esc(c)}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _data_parallel_items(cfg: Any) -> list[tuple[str, Any]]:
    """DP ranks per replica, and EP when experts are split: TP × replicas alone undercounts GPUs."""
    items = [("DP", get(cfg, "dp"))] if get(cfg, "dp") is not None else []
    ep = _number(get(cfg, "ep"))
    if ep is not None and ep > 1:
        items.append(("EP", get(cfg, "ep")))
    return items


def _config_line(summary: Mapping) -> str:
    cfg = get(summary, "config")
    dis = get(summary, "disaggregation")
    # A disaggregated run's tp/pp/replicas are its decode pool's; both pools are named below.
    layout = [] if dis else [("TP", get(cfg, "tp")), ("PP", get(cfg, "pp")), ("Replicas", get(cfg, "replicas"))]
    items = [
        ("Scenario", get(summary, "scenario")),
        ("Model", get(cfg, "model")),
        ("GPU", get(cfg, "gpu")),
        *layout,
        *([] if dis else _data_parallel_items(cfg)),  # a disaggregated run's are in its pools
        ("Scheduler", get(cfg, "scheduler")),
    ]
    if dis:
        pools = " + ".join(f"{role} {get(dis, role, 'replicas')}× {pool_layout(get(dis, role) or {}, get(cfg, 'gpu'))}"
                           for role in ("prefill", "decode"))
        items.append(("Disaggregated", pools))
    parts = [f"{_esc(k)} <b>{_esc(fmt_text(v))}</b>" for k, v in items]
    return f'<p class="config">{" · ".join(parts)}</p>'


def _cards(summary: Mapping) -> str:
    """The handful of numbers a reader looks for first."""
    cards = [
        (
            "Completed",
            f"{fmt_num(get(summary, 'requests', 'completed'))} / "
            f"{fmt_num(get(summary, 'requests', 'total'))}",
        ),
        ("Output tok/s", fmt_num(get(summary, "throughput", "output_tokens_per_s"))),
        *((("Goodput req/s", fmt_num(get(summary, "goodput", "requests_per_s"))),
           ("SLO attainment", fmt_pct(get(summary, "goodput", "slo_attainment")))) if slo_set(summary) else ()),
        ("TTFT p99", fmt_num(get(summary, "ttft_ms", "p99"), "ms")),
        ("TPOT p99", fmt_num(get(summary, "tpot_ms", "p99"), "ms")),
    ]
    inner = "".join(
        f'<div class="card"><div class="k">{_esc(k)}</div><div class="v">{_esc(v)}</div></div>'
        for k, v in cards
    )
    return f'<div class="cards">{inner}</div>'


def _kv_scopes(summary: Mapping) -> tuple[str, str]:
    """Label suffixes for (KV capacity, KV utilization): a disaggregated run's figures are the
    decode pool's (the pools table has both); with attention DP capacity is per rank, and
    with several replicas per replica (as the terminal says)."""
    if get(summary, "disaggregation"):
        dp = _number(get(summary, "disaggregation", "decode", "dp"))
        return (" (decode pool, per DP rank)" if dp is not None and dp > 1 else " (decode pool)"), " (decode pool)"
    dp = _number(get(summary, "config", "dp"))
    if dp is not None and dp > 1:
        return " per DP rank", ""
    replicas = _number(get(summary, "config", "replicas"))
    return (" per replica" if replicas is not None and replicas > 1 else ""), ""


def _overview_table(summary: Mapping) -> str:
    cap, kv = _kv_scopes(summary)
    rows = [
        ("Requests completed", fmt_num(get(summary, "requests", "completed"))),
        ("Requests rejected", fmt_num(get(summary, "requests", "rejected"))),
        ("Requests total", fmt_num(get(summary, "requests", "total"))),
        ("Simulated duration", fmt_num(get(summary, "duration_s"), "s")),
        ("Throughput", fmt_num(get(summary, "throughput", "requests_per_s"), "req/s")),
        ("Input tokens", fmt_num(get(summary, "throughput", "input_tokens_per_s"), "tok/s")),
        ("Output tokens", fmt_num(get(summary, "throughput", "output_tokens_per_s"), "tok/s")),
        (f"KV capacity{cap}", fmt_num(get(summary, "kv_cache", "capacity_tokens"), "tokens")),
        (f"KV peak utilization{kv}", fmt_pct(get(summary, "kv_cache", "peak_utilization"))),
        (f"KV mean utilization{kv}", fmt_pct(get(summary, "kv_cache", "mean_utilization"))),
        ("GPUs", fmt_num(get(summary, "cost", "gpus"))),
        ("Cost", _usd(get(summary, "cost", "usd_per_hour"), "/hour")),
        ("Cost per million output tokens", _usd(get(summary, "cost", "usd_per_million_output_tokens"))),
        ("Simulator wall time", fmt_num(get(summary, "sim_wall_s"), "s")),
    ]
    if get(summary, "kv_cache", "prefix_cache_hit_rate"):
        rows.insert(-1, ("Prompt tokens from the prefix cache",
                         fmt_pct(get(summary, "kv_cache", "prefix_cache_hit_rate"))))
    return _table(("Metric", "Value"), rows)


def _timed_with(summary: Mapping) -> str:
    """Where the times come from (the terminal's `kernels` and `API server` lines)."""
    parts = []
    if kernels := get(summary, "config", "kernel_times"):
        parts.append(f"Kernel times: {_esc(kernels)}.")
    server = get(summary, "config", "api_server")
    parts.append(f"API server, in every TTFT: {_esc(server)}." if server else
                 "No API-server time is added: TTFT is the engine's own (cost_model.frontend_*).")
    return f"<p>{' '.join(parts)}</p>"


def _latency_table(summary: Mapping) -> str:
    rows = [
        (name, *(fmt_num(get(summary, key, stat)) for stat in PERCENTILES))
        for key, name in LATENCIES
    ]
    return _table(("Latency (ms)", *PERCENTILES), rows)


def _rejections(summary: Mapping) -> str:
    """Why requests were turned away: each cause with its count and first request's words."""
    groups = get(summary, "requests", "rejected_reasons") or []
    if not groups:
        return ""
    rows = [(fmt_text(g.get("reason")), fmt_num(g.get("count"))) for g in groups]
    return "<h2>Rejected requests</h2>" + _table(("Cause (the first such request's words)", "Requests"), rows)


def _slo_section(summary: Mapping) -> str:
    if not slo_set(summary):
        return "<h2>SLO attainment</h2><p>No SLO set (<code>slo:</code> in the scenario), so no goodput or attainment.</p>"
    slo = get(summary, "goodput", "slo")
    targets = [
        ("TTFT ≤", fmt_num(get(slo, "ttft_ms"), "ms")),
        ("TPOT ≤", fmt_num(get(slo, "tpot_ms"), "ms")),
        ("E2E ≤", fmt_num(get(slo, "e2e_ms"), "ms")),
        ("Attainment", fmt_pct(get(summary, "goodput", "slo_attainment"))),
        ("Goodput", fmt_num(get(summary, "goodput", "requests_per_s"), "req/s")),
    ]
    return "<h2>SLO attainment</h2>" + _table(("SLO", "Value"), targets)


def _is_pooled(replicas: pd.DataFrame) -> bool:
    """True for a disaggregated run's table, whose rows name a pool."""
    return "pool" in replicas.columns and bool(replicas["pool"].astype(bool).any())


def _is_ranked(replicas: pd.DataFrame) -> bool:
    """True for an attention-DP run's table, whose rows name a rank of a replica."""
    return bool(replicas["pool"].astype(str).str.startswith("DP rank").all())


def _replica_table(replicas: pd.DataFrame) -> str:
    if replicas.empty:
        return "<p>No requests.</p>"
    pooled = _is_pooled(replicas)
    rows = [
        (
            *((fmt_text(r.pool.removeprefix("DP rank ")),) if pooled else ()),
            fmt_text(r.replica),
            fmt_num(r.requests),
            fmt_num(r.completed),
            fmt_num(r.rejected),
            fmt_num(r.ttft_mean),
            fmt_num(r.tpot_mean),
            fmt_num(r.preemptions),
        )
        for r in replicas.itertuples(index=False)
    ]
    ranks = pooled and _is_ranked(replicas)
    header = (
        *((("DP rank", "Replica") if ranks else ("Pool", "Instance")) if pooled else ("Replica",)),
        "Requests",
        "Completed",
        "Rejected",
        "Mean TTFT (ms)",
        "Mean TPOT (ms)",
        "Preemptions",
    )
    return _table(header, rows, numeric_from=2 if pooled else 1)


def _replica_section(replicas: pd.DataFrame) -> str:
    """Heading, note and table; a disaggregated run's rows are instances of two pools."""
    if not _is_pooled(replicas):
        return f"<h2>Per replica</h2>\n{_replica_table(replicas)}"
    if _is_ranked(replicas):
        note = ("<p>One row per attention data-parallel rank of each replica (dp_rank in "
                "requests.csv and iterations.csv): each rank schedules and caches on its own.</p>")
        return f"<h2>Per DP rank</h2>\n{note}{_replica_table(replicas)}"
    note = (
        "<p>Instance numbers as in requests.csv and iterations.csv, prefill first. A prefill "
        "row covers the requests it prefilled (TTFT), a decode row those it decoded (TPOT); "
        "preemptions count where the request ended.</p>"
    )
    return f"<h2>Per instance</h2>\n{note}{_replica_table(replicas)}"


def _pool_table(dis: Mapping) -> str:
    rows = [
        (
            role,
            fmt_num(get(dis, role, "replicas")),
            pool_layout(get(dis, role) or {}),  # with its GPU
            fmt_num(get(dis, role, "gpus")),
            # summaries from before pools took DP give the instance's capacity as this field
            fmt_num(get(dis, role, "kv_capacity_tokens_per_instance") or get(dis, role, "kv_capacity_tokens"),
                    "tokens"),
            fmt_pct(get(dis, role, "kv_peak_utilization")),
            fmt_pct(get(dis, role, "kv_mean_utilization")),
            fmt_num(get(dis, role, "iterations")),
        )
        for role in ("prefill", "decode")
    ]
    header = ("Pool", "Instances", "Layout", "GPUs", "KV capacity / instance",
              "KV peak", "KV mean", "Iterations")  # fmt: skip
    return _table(header, rows)


def _kv_transfer_table(dis: Mapping) -> str:
    """Prefill → decode KV moves: part of every request's second-token gap."""
    ms = get(dis, "kv_transfer", "ms")
    links = get(dis, "kv_transfer", "links")
    rows = [(f"KV transfer {stat}", fmt_num(get(ms, stat), "ms")) for stat in ("mean", "p50", "p99")]
    if isinstance(links, Sequence) and not isinstance(links, str) and links:
        rows.append(("KV transfer links", ", ".join(str(link) for link in links)))
    if get(dis, "kv_transfer", "protocol") == "distserve":
        rows.append(("KV transfer protocol", "distserve: pulled by the decode instance between its iterations"))
    return _table(("KV transfer", "Value"), rows)


def _disaggregation_section(summary: Mapping) -> str:
    """Both pools and the KV moves between them; empty for a colocated run."""
    dis = get(summary, "disaggregation")
    if not isinstance(dis, Mapping):
        return ""
    tables = f'<div class="tables">{_pool_table(dis)}{_kv_transfer_table(dis)}</div>'
    return f"<h2>Disaggregated pools</h2>\n{tables}"


def _figure(caption: str, path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{_esc(caption)}">'
        f"<figcaption>{_esc(caption)}</figcaption></figure>"
    )


def render_page(
    title: str,
    summary: Mapping,
    figures: Sequence[tuple[str, Path]],
    replicas: pd.DataFrame,
    scenario_yaml: str | None = None,
) -> str:
    """The complete HTML document; `figures` are (caption, png path) in display order."""
    summary = summary if isinstance(summary, Mapping) else {}
    yaml_block = (
        f"<h2>Scenario</h2><pre>{_esc(scenario_yaml)}</pre>" if scenario_yaml is not None else ""
    )
    figs = "".join(_figure(caption, path) for caption, path in figures)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_esc(title)}</title>
<style>{CSS}</style>
</head>
<body>
<main>
<h1>{_esc(title)}</h1>
{_config_line(summary)}
{_cards(summary)}
<h2>Headline metrics</h2>
<div class="tables">{_overview_table(summary)}{_latency_table(summary)}</div>
{_timed_with(summary)}
{_disaggregation_section(summary)}
{_rejections(summary)}
{_slo_section(summary)}
<h2>Figures</h2>
<div class="figs">{figs}</div>
{_replica_section(replicas)}
{yaml_block}
<footer>Generated by servesim. Self-contained: no external assets.</footer>
</main>
</body>
</html>
"""
