"""The plan's files: plan.csv (every configuration), plan.json, and plan.html with figures.

plan.html is self-contained (inline CSS, base64 PNGs, like a run's report.html) and links
to recommended/report.html, the full simulation report of the chosen deployment.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from simulator import __version__
from simulator.plan.analysis import COLUMNS
from simulator.plan.config import (
    LoadedPlan,
    gpus_per_replica,
    layout_label,
    pool_gpus,
    unit_layout,
)
from simulator.plan.runner import RECOMMENDED, PlanOutcome, clean, write_atomic
from simulator.report.html import CSS

_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")


def gpu_name(gpu: str) -> str:
    from simulator.hardware import get_gpu

    return get_gpu(gpu).display_name.removeprefix("NVIDIA ").removeprefix("AMD ")


def headline(row: dict, loaded: LoadedPlan) -> str:
    """One line: '4 × H100 SXM5 80GB (TP2 × 2 replicas), vllm-v1 budget 8192: carries ...'."""
    plural = "s" if row["replicas"] > 1 else ""
    shape = (f"{unit_layout(row)}, {row['replicas']} unit{plural}" if row.get("pools")
             else f"{layout_label(row)} × {row['replicas']} replica{plural}")
    sched = f"{row['policy']}"
    if row.get("max_num_batched_tokens") and row["policy"] in ("vllm-v1", "vllm-v0", "continuous"):
        prefill = row.get("prefill_max_num_batched_tokens")  # pools on different GPUs: different defaults
        sched += (f" budget {prefill} prefill / {row['max_num_batched_tokens']} decode"
                  if prefill and prefill != row["max_num_batched_tokens"] else f" budget {row['max_num_batched_tokens']}")
    quant = "" if row["weight_dtype"] == "bf16" and row["kv_dtype"] == "bf16" else \
        f", {row['weight_dtype']} weights, {row['kv_dtype']} KV"
    ttft = row.get("verified_ttft_p99_ms") or row.get("ttft_p99_ms")
    lat = f" at p99 TTFT {_s(ttft)}" if ttft is not None else ""
    check = " (verified)" if row.get("verified") else " (estimate)"
    # Steady state at the carried rate ($/h over rate × mean output tokens). The verification
    # run's own figure divides by its whole duration, drain included, so it reads higher.
    per_m = row.get("usd_per_m_output_tokens")
    return (f"{_gpu_counts(row)} ({shape}), {sched}{quant}: carries "
            f"{_num(row['carried_rps'])} req/s{lat}{check}, ${row['usd_per_hour']:,.2f}/h"
            + (f", ${per_m:,.2f}/M output tokens at steady state" if per_m is not None else ""))


def _gpu_counts(row: dict) -> str:
    """'8 × H100 SXM5 80GB', or '4 × H100 SXM5 80GB + 4 × A100 80GB' for a unit whose pools
    run different GPUs."""
    pools = row.get("pools") or {}
    counts: dict[str, int] = {}
    for pool in pools.values():
        gpu = pool.get("gpu") or row["gpu"]
        counts[gpu] = counts.get(gpu, 0) + pool_gpus(pool)
    if len(counts) < 2:
        return f"{row['gpus']} × {gpu_name(row['gpu'])}"
    return " + ".join(f"{n * row['replicas']} × {gpu_name(g)}" for g, n in counts.items())


def why_it_fits(row: dict) -> str:
    """The figures to check the recommendation by hand: memory per GPU and the decode floor
    (of a decode GPU, for a disaggregated unit)."""
    where, per = ("decode GPU", "decode instance") if row.get("pools") else ("GPU", "replica")
    return (f"Per {where}: weights {row['weights_gib_per_gpu']:.1f} GiB, KV cache {row['kv_gib_per_gpu']:.1f} GiB "
            f"({row['kv_capacity_tokens']:,} tokens per {per}). Decode-step floor (the weights one token "
            f"reads ÷ HBM bandwidth): {row['decode_floor_ms']:.1f} ms. Utilisation at the carried rate: "
            f"{row['utilization']:.0%} "
            f"of {row['replicas']} × {row['max_rate_per_replica']:.3g} req/s"
            + (" (above 100%: the replicas pool their traffic, which one replica's search cannot see)."
               if row["utilization"] > 1 else "."))


def _s(ms: float) -> str:
    return f"{ms / 1000:.2g} s" if ms >= 1000 else f"{ms:.0f} ms"


def _num(v: float) -> str:
    return f"{v:,.1f}" if v >= 10 else f"{v:.3g}"


# -- figures ----------------------------------------------------------------------------------
def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _gpu_colors(rows: list[dict]) -> dict[str, str]:
    gpus = sorted({r["gpu"] for r in rows})
    return {g: _COLORS[i % len(_COLORS)] for i, g in enumerate(gpus)}


def _front_line(ax, pts: list[tuple[float, float]], label: str) -> None:
    if len(pts) > 1:
        xs, ys = zip(*sorted(pts), strict=True)
        ax.plot(xs, ys, "--", color="0.3", lw=1, label=label, zorder=1)


def fig_cost_latency(rows: list[dict], best: dict | None) -> bytes | None:
    pts = [r for r in rows if r["rank"] is not None and r.get("ttft_p99_ms") is not None]
    if not pts:
        return None
    fig, ax = _scatter_by_gpu(pts, lambda r: r["usd_per_hour"], lambda r: r["ttft_p99_ms"],
                              "pareto_cost_latency")
    if best is not None and best.get("ttft_p99_ms") is not None:
        # Where the verification run put it (the headline's figure), else the search's bound.
        verified = best.get("verified_ttft_p99_ms")
        ax.scatter([best["usd_per_hour"]], [verified if verified is not None else best["ttft_p99_ms"]],
                   marker="*", s=260, color="gold", edgecolor="black", zorder=3,
                   label="recommended (verified p99)" if verified is not None else "recommended")
    return _finish(fig, ax, "deployment cost, $/hour", "p99 TTFT at the carried load, ms (search bound)",
                   "Cost vs latency (deployments that meet the target)")


def fig_throughput(rows: list[dict]) -> bytes | None:
    pts = [r for r in rows if r.get("output_tok_s_per_gpu") and r.get("tok_s_per_user")]
    if not pts:
        return None
    fig, ax = _scatter_by_gpu(pts, lambda r: r["tok_s_per_user"], lambda r: r["output_tok_s_per_gpu"],
                              "pareto_throughput")
    return _finish(fig, ax, "tokens/s per user (1000 / mean TPOT at max rate)",
                   "output tokens/s per GPU at max rate",
                   "Throughput per GPU vs per user (each configuration at its max rate)")


def _scatter_by_gpu(pts: list[dict], x, y, front_key: str):
    """One colour per GPU type, with the Pareto front (rows flagged `front_key`) drawn over."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for g, c in _gpu_colors(pts).items():
        sel = [r for r in pts if r["gpu"] == g]
        ax.scatter([x(r) for r in sel], [y(r) for r in sel], color=c, label=g, zorder=2, s=36)
    _front_line(ax, [(x(r), y(r)) for r in pts if r[front_key]], "Pareto front")
    return fig, ax


def _finish(fig, ax, xlabel: str, ylabel: str, title: str) -> bytes:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def fig_rate_vs_gpus(rows: list[dict]) -> bytes | None:
    pts = [r for r in rows if r.get("max_rate_per_replica")]
    if not pts:
        return None
    colors = _gpu_colors(pts)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    families: dict[tuple, list[dict]] = {}
    for r in pts:
        fam = (r["gpu"], r["pp"], r["dp"], r["expert_parallel"], r["policy"], r["max_num_batched_tokens"],
               r["max_num_seqs"],
               r["weight_dtype"], r["activation_dtype"], r["kv_dtype"], r.get("prefill"), r.get("decode"))
        families.setdefault(fam, []).append(r)
    for fam, sel in families.items():
        sel.sort(key=gpus_per_replica)
        ax.plot([gpus_per_replica(r) for r in sel], [r["max_rate_per_replica"] for r in sel],
                "s" if fam[-1] else "o-",  # each disaggregated unit alone: a square, no line
                color=colors[fam[0]], alpha=0.8, lw=1)
    for g, c in colors.items():
        ax.plot([], [], "o-", color=c, label=g)
    if any(r.get("pools") for r in pts):
        ax.plot([], [], "s", color="#888888", label="disaggregated unit")
    ax.set_xscale("log", base=2)
    ticks = sorted({gpus_per_replica(r) for r in pts})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    return _finish(fig, ax, "GPUs per replica (TP × PP × DP; disaggregated: both pools of a unit)", "max sustainable rate per replica, req/s",
                   "Max rate under the SLO vs GPUs (one line per GPU/scheduler/dtype family)")


# -- files ------------------------------------------------------------------------------------
def _cell(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def write_csv(path: Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in COLUMNS])
    write_atomic(path, buf.getvalue())


def summary_dict(loaded: LoadedPlan, outcome: PlanOutcome) -> dict:
    plan = loaded.plan
    rows = outcome.rows
    status = [r["status"] for r in rows]
    best, second = outcome.recommendation, outcome.runner_up
    return clean({
        "plan": loaded.name,
        "servesim_version": __version__,
        "target": plan.target.model_dump(exclude_none=True),
        "slo": plan.slo.model_dump(exclude_none=True),
        "slo_text": plan.slo.describe(),
        "search": plan.search.model_dump(),
        "counts": {"configurations": len(rows), "feasible": status.count("ok"),
                   "infeasible": status.count("infeasible"), "errors": status.count("error"),
                   "meeting_target": sum(1 for r in rows if r["rank"] is not None),
                   # searched: configurations whose rate was searched (feasible ones), as the
                   # terminal and page count them; computed/reused: this run's work vs --resume's
                   "searched": status.count("ok"), "computed": outcome.searched, "reused": outcome.reused},
        "wall_s": outcome.wall_s,
        "recommendation": None if best is None else {"headline": headline(best, loaded), **_public(best)},
        "runner_up": None if second is None else {"headline": headline(second, loaded), **_public(second)},
        "verification": outcome.verification,
        "configurations": [_public(r) for r in rows],
    })


def _public(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith("_")}


def _esc(v) -> str:
    return html.escape(str(v))


def _table(header, rows) -> str:
    """Numbers right-aligned; text (labels, reasons) left."""
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)

    def cell(c) -> str:
        numeric = isinstance(c, int | float) or (isinstance(c, str) and (c[:1].isdigit() or c == "—"))
        return f'<td class="n">{_esc(c)}</td>' if numeric else f"<td>{_esc(c)}</td>"

    body = "".join("<tr>" + "".join(cell(c) for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _f(v, fmt="{:,.2f}") -> str:
    return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else fmt.format(v)


def render_html(loaded: LoadedPlan, outcome: PlanOutcome, figures: list[tuple[str, bytes]], has_report: bool) -> str:
    plan = loaded.plan
    rows = outcome.rows
    best, second = outcome.recommendation, outcome.runner_up
    target = (f"carry {plan.target.rate:g} req/s at least cost" if plan.target.mode == "rate"
              else "carry the most traffic within "
              + " and ".join(x for x in (f"${plan.target.max_usd_per_hour:g}/h" if plan.target.max_usd_per_hour else "",
                                          f"{plan.target.max_gpus} GPUs" if plan.target.max_gpus else "") if x))
    rec_html = "<p>No configuration meets the target.</p>"
    if best is not None:
        link = (f' — <a href="{RECOMMENDED}/report.html">full simulation report of this deployment</a>'
                if has_report else "")
        rec_html = f"<p><b>Recommended:</b> {_esc(headline(best, loaded))}{link}</p>"
        if best.get("weights_gib_per_gpu") is not None:
            rec_html += f"<p class='config'>{_esc(why_it_fits(best))}</p>"
        if second is not None:
            rec_html += f"<p><b>Runner-up:</b> {_esc(headline(second, loaded))}</p>"
    ranked = [[r["rank"], r["label"], r["replicas"], r["gpus"], _f(r["usd_per_hour"]), _f(r["carried_rps"], "{:.3g}"),
               _f(r["max_rate_per_replica"], "{:.3g}"),
               _f(r["utilization"], "{:.0%}"), _f(r["ttft_p99_ms"], "{:,.0f}"), _f(r["tpot_p99_ms"], "{:,.1f}"),
               _f(r["usd_per_m_output_tokens"]), _f(r["output_tok_s_per_gpu"], "{:,.0f}"), _f(r["tok_s_per_user"], "{:,.1f}"),
               ("cost/latency " if r["pareto_cost_latency"] else "") + ("throughput" if r["pareto_throughput"] else "")]
              for r in rows if r["rank"] is not None]
    ranked_html = _table(["#", "configuration", "replicas (units)", "GPUs", "$/h", "carried req/s",
                          "max req/s per replica (unit)",
                          "utilization",
                          "p99 TTFT ms", "p99 TPOT ms", "$/M out tok", "out tok/s/GPU", "tok/s/user", "Pareto"], ranked)
    other = [[r["label"], r["status"], _f(r.get("max_rate_per_replica"), "{:.3g}"), r.get("reason") or r.get("limited_by") or ""]
             for r in rows if r["rank"] is None and r["status"] == "ok"]
    bad = [[r["label"], r["status"], r.get("reason") or ""] for r in rows if r["status"] not in ("ok",)]
    ver = [[v["label"], v["replicas"], _f(v["rate"], "{:.3g}"), v.get("check", ""), "yes" if v["passed"] else "no",
            _f(v["ttft_p99_ms"], "{:,.0f}"), _f(v["tpot_p99_ms"], "{:,.1f}"), v["reason"]] for v in outcome.verification]
    figs = "".join(f'<figure><img src="data:image/png;base64,{base64.b64encode(png).decode()}" alt="{_esc(c)}">'
                   f"<figcaption>{_esc(c)}</figcaption></figure>" for c, png in figures)
    counts = (f"{len(rows)} configurations: {sum(r['status'] == 'ok' for r in rows)} searched, "
              f"{sum(r['status'] == 'infeasible' for r in rows)} infeasible, {sum(r['status'] == 'error' for r in rows)} failed; "
              f"{len(ranked)} meet the target")
    title = f"servesim plan: {loaded.name}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_esc(title)}</title><style>{CSS} pre.reason {{ white-space: pre-wrap; margin: 0; padding: 4px; font-size: 12px; }}</style></head>
<body><main>
<h1>{_esc(title)}</h1>
<p class="config">Goal: <b>{_esc(target)}</b>. SLO: <b>{_esc(plan.slo.describe())}</b>. {_esc(counts)}.</p>
{rec_html}
<h2>Ranked deployments</h2>
<p class="config">Latency columns are bounds at the carried load per replica (the nearest passing probe above it);
$/M output tokens at the carried rate. Throughput per GPU and per user are at each configuration's max rate.</p>
{ranked_html}
<h2>Verification</h2>
<p class="config">The top deployment re-simulated with all its replicas at the carried rate.</p>
{_table(["configuration", "replicas", "req/s", "run for", "passed", "p99 TTFT ms", "p99 TPOT ms", "reason"], ver) if ver else "<p>Not run.</p>"}
<h2>Figures</h2><div class="figs">{figs}</div>
<h2>Feasible, not meeting the target</h2>
{_table(["configuration", "status", "max req/s per replica", "why"], other) if other else "<p>None.</p>"}
<h2>Infeasible or failed</h2>
{"".join(f"<h3>{_esc(lbl)} ({_esc(st)})</h3><pre class='reason'>{_esc(why)}</pre>" for lbl, st, why in bad) or "<p>None.</p>"}
<h2>Plan</h2><pre>{_esc(loaded.text)}</pre>
<footer>Generated by servesim {__version__} in {outcome.wall_s:,.1f} s. Self-contained: no external assets.</footer>
</main></body></html>
"""


def write_plan_outputs(loaded: LoadedPlan, outcome: PlanOutcome, *, has_report: bool) -> None:
    out = outcome.out_dir
    rows = outcome.rows
    figures = []
    for name, caption, png in (
        ("pareto_cost_latency.png", "Cost vs p99 TTFT; dashed: Pareto front", fig_cost_latency(rows, outcome.recommendation)),
        ("pareto_throughput.png", "Output tokens/s per GPU vs tokens/s per user; dashed: Pareto front", fig_throughput(rows)),
        ("max_rate_vs_gpus.png", "Max sustainable rate per replica vs GPUs per replica", fig_rate_vs_gpus(rows)),
    ):
        if png is not None:
            (out / name).write_bytes(png)
            figures.append((caption, png))
        else:
            (out / name).unlink(missing_ok=True)  # no stale figure from an earlier run
    write_csv(out / "plan.csv", rows)
    write_atomic(out / "plan.json", json.dumps(summary_dict(loaded, outcome), indent=2) + "\n")
    write_atomic(out / "plan.html", render_html(loaded, outcome, figures, has_report))
