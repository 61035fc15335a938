"""validation.html: predicted-vs-measured scatter plots, per-configuration curves, tables."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, NullFormatter

from simulator.report.html import CSS, _esc, _figure, _table
from simulator.validation.scoring import BREAKDOWNS

DPI = 110
# Draw order: the ±10% band under the identity line, both under the points, so the band
# never hides the points it is there to judge.
BAND_Z, DIAGONAL_Z, POINTS_Z = 0.5, 1.5, 2.5


def scatter_figure(runs: pd.DataFrame, metric: str, label: str):
    """Predicted vs measured `metric`, one colour per configuration.

    Returns the open figure so the caller (or a test) can inspect it; the caller closes it.
    """
    fig, ax = plt.subplots(figsize=(5.2, 5))
    try:
        _draw_scatter(ax, runs, metric, label)
        fig.tight_layout()
    except BaseException:
        plt.close(fig)
        raise
    return fig


def _draw_scatter(ax, runs: pd.DataFrame, metric: str, label: str) -> None:
    m = runs[f"measured_{metric}"].to_numpy(dtype=float)
    p = runs[f"pred_{metric}"].to_numpy(dtype=float)
    ok = np.isfinite(m) & np.isfinite(p) & (m > 0) & (p > 0)
    groups = runs["group"].where(runs["group"].astype(bool), runs["source"])
    if len(set(groups[ok])) > 12 and "family" in runs and 1 < runs["family"][ok].nunique() <= 20:
        groups = runs["family"]  # too many configurations to tell apart: colour by model and GPU
    names = sorted(set(groups[ok]))
    legend = len(names) <= 20
    shared = _shared_prefix(names)
    palette = plt.get_cmap("tab20").colors if len(names) > 10 else plt.get_cmap("tab10").colors
    for i, g in enumerate(names):
        sel = ok & (groups == g).to_numpy()
        ax.scatter(m[sel], p[sel], s=22, color=palette[i % len(palette)], zorder=POINTS_Z,
                   label=(g[len(shared):] or g) if legend else None)
    if ok.any():
        lo, hi = min(m[ok].min(), p[ok].min()) * 0.8, max(m[ok].max(), p[ok].max()) * 1.25
        xs = np.array([lo, hi])
        ax.plot(xs, xs, color="0.3", lw=1, zorder=DIAGONAL_Z)
        ax.fill_between(xs, xs * 0.9, xs * 1.1, color="0.85", lw=0, zorder=BAND_Z, label="±10%")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        if hi / lo > 20:
            ax.set_xscale("log")
            ax.set_yscale("log")
    ax.set_xlabel(f"measured {label}")
    ax.set_ylabel(f"predicted {label}")
    ax.set_title(f"{label}: predicted vs measured" + (f"\n{shared.strip()}" if shared else ""),
                 fontsize=10 if shared else None)
    if legend and ok.any():
        if len(names) <= LEGEND_INSIDE:
            ax.legend(fontsize=7, loc="upper left")
        else:  # beside the axes: a long legend inside would cover the points near the diagonal
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
            ax.figure.set_size_inches(8.0, 5.0)


LEGEND_INSIDE = 5


def _shared_prefix(names: list[str]) -> str:
    """The words every legend entry starts with (one system, model and precision), which
    the title then carries once; empty when there is one entry or nothing is shared."""
    if len(names) < 2:
        return ""
    words = [n.split(" ") for n in names]
    shared = []
    for column in zip(*words, strict=False):
        if len(set(column)) > 1:
            break
        shared.append(column[0])
    if len(shared) >= min(len(w) for w in words):  # one entry is all prefix: keep it whole
        shared = shared[:-1]
    return " ".join(shared) + " " if shared else ""


def _scatter(runs: pd.DataFrame, metric: str, label: str, path: Path) -> Path:
    fig = scatter_figure(runs, metric, label)
    try:
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)
    return path


def _file_stems(families: list[str]) -> list[str]:
    """A file-name part per family that says which it is (`h100_sxm-Llama-3.1-8B-fp8`: the
    model without its organisation), numbered only where two would read the same."""
    stems = []
    for family in families:
        words = [w.rsplit("/", 1)[-1] for w in family.split()]
        stem = re.sub(r"[^A-Za-z0-9._]+", "-", "-".join(words)).strip("-")[:80] or "family"
        stems.append(stem if stem not in stems else f"{stem}-{len(stems) + 1}")
    return stems


def _small_multiples(n: int):
    """A grid of up to 4 columns for n panels; unused panels are hidden by the caller."""
    cols = min(4, n)
    rows = math.ceil(n / cols)
    return plt.subplots(rows, cols, figsize=(3.4 * cols, 2.6 * rows), squeeze=False)


def _finish_small_multiples(fig, axes, used: int, path: Path, xlabel: str, ylabel: str | None = None,
                            title: str | None = None) -> None:
    """Hide the unused panels, label the grid once and save it."""
    for ax in list(axes.flat)[used:]:
        ax.axis("off")
    if axes.flat[0].get_legend_handles_labels()[0]:  # none when no run has this metric (one-token outputs)
        axes.flat[0].legend(fontsize=7)
    if title:  # wrapped to the figure's width: a one-panel figure is narrower than a family's name
        fig.suptitle(textwrap.fill(title, width=max(40, int(fig.get_figwidth() * 13)), break_on_hyphens=False),
                     fontsize=10)
    fig.supxlabel(xlabel, fontsize=9)
    if ylabel is not None:
        fig.supylabel(ylabel, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)


def _plain_ticks(ax) -> None:
    """Log axes labelled 8, 16, 32 and 100, 200, 500 rather than 2^3 and 10^2: easier to read,
    and rendering no mathtext makes a page of small multiples about twice as fast."""

    def plain(v: float) -> str:
        return f"{v:,.0f}" if v >= 1 else f"{v:.2g}"

    def minor(v: float, _pos) -> str:  # 2 and 5 of each decade, when the axis spans few decades
        lo, hi = ax.get_ylim()
        if v <= 0 or lo <= 0 or hi / lo > 100:
            return ""
        lead = round(v / 10 ** math.floor(math.log10(v)), 6)
        return plain(v) if lead in (2.0, 5.0) else ""

    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_major_formatter(FuncFormatter(lambda v, _pos: plain(v)))
            axis.set_minor_formatter(FuncFormatter(minor) if axis is ax.yaxis else NullFormatter())
    ax.tick_params(which="both", labelsize=7)


def _curves(runs: pd.DataFrame, metric: str, label: str, path: Path, family: str = "") -> Path | None:
    """One panel per configuration; within one family (system, model, precision), the figure's
    title names it and panel titles drop it."""
    groups = [g for g in dict.fromkeys(runs["group"]) if g]
    if not groups:
        return None
    fig, axes = _small_multiples(len(groups))
    try:
        for ax, g in zip(axes.flat, groups, strict=False):
            sel = runs[runs["group"] == g].sort_values("concurrency")
            ax.plot(sel["concurrency"], sel[f"measured_{metric}"], "o", color="#4c78a8", label="measured")
            # a marker too, so a configuration measured at one concurrency still shows its prediction
            ax.plot(sel["concurrency"], sel[f"pred_{metric}"], "-x", color="#f58518", label="predicted")
            ax.set_xscale("log", base=2)
            values = pd.concat([sel[f"measured_{metric}"], sel[f"pred_{metric}"]]).to_numpy(dtype=float)
            values = values[np.isfinite(values) & (values > 0)]
            if values.size and values.max() >= 10 * values.min():  # a cliff: a decade or more
                ax.set_yscale("log")
            _plain_ticks(ax)
            name = g[len(family):].strip() if family and g.startswith(family) else g
            # Panels differ in y scale (a cliff's decade needs log), so each says which it has.
            ax.set_title(name + (" (log y)" if ax.get_yscale() == "log" else ""), fontsize=7)
        _finish_small_multiples(fig, axes, len(groups), path, "concurrency", label,
                                title=f"{label} vs concurrency: {family}" if family else None)
    finally:
        plt.close(fig)
    return path


def _cdfs(preds, metric: str, label: str, path: Path) -> Path | None:
    items = [p for p in preds if p.error is None and p.run.requests is not None and metric in p.run.requests]
    if not items:
        return None
    fig, axes = _small_multiples(len(items))
    try:
        for ax, p in zip(axes.flat, items, strict=False):
            for vals, name, color in ((p.run.requests[metric], "measured", "#4c78a8"),
                                      (p.requests[metric], "predicted", "#f58518")):
                v = np.sort(vals.dropna().to_numpy(dtype=float))
                if v.size:
                    ax.plot(v, np.arange(1, v.size + 1) / v.size, color=color, label=name)
            ax.set_title(p.run.label, fontsize=8)
            ax.tick_params(labelsize=7)
        _finish_small_multiples(fig, axes, len(items), path, label, "share of requests (CDF)")
    finally:
        plt.close(fig)
    return path


def _fmt(v, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return f"{v:,.{digits}f}"


def _measured(value) -> bool:
    """A finite number: null or NaN means the run did not measure it."""
    return isinstance(value, (int, float)) and math.isfinite(value)


def _per_run_table(per_run: list[dict], cliffs: bool) -> str:
    """Measured, predicted and error per run (each a run's mean); E2E columns only where
    some run measured E2E, cliff columns only for sweeps (where cliffs are defined)."""
    metrics = [("ttft_ms", "TTFT", 1), ("tpot_ms", "TPOT", 2)]
    if any(_measured(r.get("measured_e2e_ms")) for r in per_run):
        metrics.append(("e2e_ms", "E2E", 1))
    header = ["run"]
    for _, name, _ in metrics:
        header += [f"mean {name} meas (ms)", f"mean {name} pred (ms)", f"{name} err %"]
    rows = []
    for r in per_run:
        row = [r["run"]]
        for key, _, digits in metrics:
            row += [_fmt(r.get(f"measured_{key}"), digits), _fmt(r.get(f"pred_{key}"), digits),
                    _fmt(r.get(f"err_pct_{key}"))]
        if cliffs:
            row += ["yes" if r.get("measured_cliff") else "", "yes" if r.get("pred_cliff") else ""]
        rows.append(row)
    return _table([*header, *(["cliff (meas)", "cliff (pred)"] if cliffs else [])], rows)


def _inputs_line(result: dict) -> str:
    """What was compared: the measured files, the base scenario and its overrides."""
    parts = []
    if result.get("inputs"):
        parts.append("Measured: " + ", ".join(f"<code>{_esc(p)}</code>" for p in result["inputs"]))
    if result.get("scenario"):
        parts.append(f"base scenario: <code>{_esc(result['scenario'])}</code>")
    if result.get("overrides"):
        parts.append("with " + " ".join(f"<code>--set {_esc(o)}</code>" for o in result["overrides"]))
    return f"<p>{'; '.join(parts)}.</p>" if parts else ""


def write_validation_report(out_dir: Path, result: dict, runs: pd.DataFrame, preds, title: str) -> Path:
    figs = []
    for metric, label in (("ttft_ms", "TTFT (ms)"), ("tpot_ms", "TPOT (ms)"), ("e2e_ms", "E2E (ms)")):
        if runs[f"measured_{metric}"].notna().any():
            figs.append((f"{label}: predicted vs measured", _scatter(runs, metric, label, out_dir / f"scatter_{metric}.png")))
    simulated = runs[runs["error"].isna()] if "error" in runs else runs  # a skipped row has no curve
    families = [f for f in dict.fromkeys(simulated.get("family", pd.Series(dtype=str))) if f]
    if len(families) > 1:  # one figure per system/model/precision, not one of hundreds of panels
        for family, stem in zip(families, _file_stems(families), strict=True):
            for metric, label in (("ttft_ms", "TTFT (ms)"), ("tpot_ms", "TPOT (ms)")):
                p = _curves(simulated[simulated["family"] == family], metric, label,
                            out_dir / f"curves_{metric}_{stem}.png", family=family)
                if p is not None:
                    figs.append((f"{label} vs concurrency: {family}", p))
    for metric, label in (("ttft_ms", "TTFT (ms)"), ("tpot_ms", "TPOT (ms)")):
        if len(families) <= 1:
            family = families[0] if families else ""
            p = _curves(simulated, metric, label, out_dir / f"curves_{metric}.png", family=family)
            if p is not None:
                figs.append((f"{label} vs concurrency per configuration" + (f": {family}" if family else ""), p))
        c = _cdfs(preds, metric, label, out_dir / f"cdf_{metric}.png")
        if c is not None:
            figs.append((f"{label} per-request distribution per run", c))
    metric_rows = []
    for m, blocks in result["metrics"].items():
        for scope, b in blocks.items():
            if scope == "below_cliff" and "cliffs" not in result:
                continue  # cliffs are defined on sweeps only; the row would repeat "all"
            metric_rows.append([m, scope, str(b["n"]), _fmt(b["mape"]), _fmt(b["mean_signed_pct"]), _fmt(b["max_abs_pct"])])
    metrics_html = _table(["metric", "rows", "n", "MAPE %", "mean signed %", "max |err| %"], metric_rows, numeric_from=2)
    per_request = result.get("per_request") or {}
    if per_request:
        metrics_html += ("<p>Per request (|signed error| of each request's own value): "
                         + "; ".join(f"{_esc(m)} median {d['median_abs_pct']:.1f}%, p90 {d['p90_abs_pct']:.1f}%"
                                     for m, d in per_request.items()) + ".</p>")
    runs_html = _per_run_table(result["per_run"], "cliffs" in result)
    sources = result.get("kernel_times")
    extra = ("<p>Kernel times from:</p><ul>" + "".join(f"<li>{_esc(src)}</li>" for src in sources) + "</ul>"
             if sources else "")
    servers = result.get("api_server")
    extra += ("<p>API server (in every predicted TTFT):</p><ul>"
              + "".join(f"<li>{_esc(s)}</li>" for s in servers) + "</ul>" if servers else "")
    if "cliffs" in result:
        c = result["cliffs"]
        extra += (f"<p>KV-capacity cliffs (TTFT ≥ 5× the configuration's lowest-concurrency TTFT): "
                  f"{c['measured']} measured, {c['predicted']} predicted, {c['both']} both, "
                  f"{c['missed']} missed, {c['false_alarms']} false alarms.</p>")
    for column, heading in BREAKDOWNS.items():
        if result.get(f"by_{column}"):
            rows = [[f[column], str(f["runs"]), _fmt(f["ttft_ms_below_cliff"]["mape"]),
                     _fmt(f["ttft_ms_below_cliff"]["mean_signed_pct"]), _fmt(f["tpot_ms"]["mape"]),
                     _fmt(f["tpot_ms"]["mean_signed_pct"]), f"{f['cliffs_measured']}/{f['cliffs_predicted']}"]
                    for f in result[f"by_{column}"]]
            extra += (f"<h2>By {heading}</h2><p>TTFT over the rows below the measured KV cliffs.</p>"
                      + _table([heading, "runs", "TTFT MAPE %", "TTFT signed %", "TPOT MAPE %", "TPOT signed %",
                                "cliffs meas/pred"], rows))
    if result.get("launch_flags"):
        rows = [[str(f["runs"]), f["flags"]] for f in result["launch_flags"]]
        extra += ("<h2>Server flags of the harness behind the rows (InferenceX grid)</h2>"
                  + _table(["runs", "flags (source)"], rows, numeric_from=2))
    if result.get("notes"):
        rows = [[n["run"], n["note"]] for n in result["notes"]]
        extra += "<h2>Runs simulated with inferred settings (layout, context limit)</h2>" + _table(["run", "how"], rows, numeric_from=2)
    if result.get("skipped"):
        rows = [[s["run"], s["error"]] for s in result["skipped"]]
        extra += "<h2>Skipped runs</h2>" + _table(["run", "why"], rows, numeric_from=2)
    if result.get("slo"):
        rows = [[r["run"], _fmt(r["measured"] * 100), _fmt(r["predicted"] * 100), _fmt(r["diff_points"])]
                for r in result["slo"]["runs"]]
        targets = ", ".join(f"{m.removesuffix('_ms').upper()} ≤ {v:g} ms"
                            for m, v in (result["slo"].get("targets") or {}).items() if v is not None)
        extra += ("<h2>SLO attainment</h2>" + (f"<p>Share of requests within {_esc(targets)}.</p>" if targets else "")
                  + _table(["run", "measured %", "predicted %", "diff (points)"], rows))
    kv = result.get("kv_occupancy")
    if kv:
        rows = [[r["run"], _fmt(r["measured_peak_blocks"], 0), _fmt(r["pred_peak_blocks"], 0),
                 _fmt(r["sim_capacity_blocks"], 0), "yes" if r["sim_cache_full"] else "",
                 _fmt(r["implied_capacity_blocks"], 0)] for r in kv["runs"]]
        extra += ("<h2>KV-cache occupancy</h2><p>Peak blocks in use, estimated the same way from the "
                  "measured and the simulated timestamps (each request holding its prompt and the tokens "
                  "generated so far from its first token to its last, even while preempted with its "
                  "blocks freed), so it can pass the simulated capacity, which the simulation itself "
                  "never does; the ratio of the two estimates is what the implied capacity reads. "
                  f"{_esc(kv['note'])}.</p>"
                  + _table(["run", "measured peak (est.)", "simulated peak (est.)", "simulated capacity",
                            "simulated cache full", "implied capacity"], rows))
    spread = result.get("consistency")
    if spread and spread["pairs"]:
        rows = [[e["metric"], e["slower_run"], e["faster_run"],
                 "same" if e["kind"] == "repeat" else f"{e['faster_load'] / e['slower_load']:.2f}×",
                 "" if e["shared_requests"] is None else f"{e['shared_requests']:,}", _fmt(e["slower_measured"]),
                 _fmt(e["faster_measured"]), _fmt(e["drop_pct"]), _fmt(e["floor_pct"])] for e in spread["pairs"]]
        extra += ("<h2>Where the measurements contradict each other</h2><p>The same workload measured "
                  "faster under more load, or differently at the same load, in "
                  f"{spread['contradictions']} of {spread['pairs_compared']} comparable pair(s) of runs: "
                  "run-to-run spread. No model that slows with load can be closer to both runs of a pair "
                  "than its floor.</p>"
                  + _table(["metric", "slower run", "faster run", "load, faster/slower", "shared requests",
                            "slower measured", "faster measured", "faster by %", "floor %"], rows, numeric_from=3))
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title><style>{CSS}</style></head>
<body><main><h1>{_esc(title)}</h1>
{_inputs_line(result)}
<h2>Errors</h2>{metrics_html}{extra}
<h2>Figures</h2><div class="figs">{"".join(_figure(c, p) for c, p in figs)}</div>
<h2>Per run</h2>{runs_html}
<footer>Generated by servesim validate. Signed error = (predicted − measured)/measured.</footer>
</main></body></html>
"""
    path = out_dir / "validation.html"
    path.write_text(page)
    return path
