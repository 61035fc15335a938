"""One function per report figure; each writes a PNG to `path` and returns it.

The Agg backend renders without a display, so reports work on headless servers and CI.
Every figure is closed after saving because sweeps write many reports in one process.
Empty inputs draw a "no data" placeholder: a report of a fully rejected run is still useful.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.cm import ScalarMappable
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.ticker import MaxNLocator

from simulator.report.aggregate import bin_completions, finite, rank_label, ranked

DPI = 100
ECDF_POINTS = 2000
# Past this many lines (replicas, or replica DP ranks) a legend is unreadable; see _replica_lines.
MAX_LEGEND_SERIES = 8
HIST_COLOR = "#4c78a8"
CDF_COLOR = "#f58518"
SLO_COLOR = "#d62728"


@contextmanager
def _figure(path: Path, nrows: int = 1, height: float = 4.0) -> Iterator[np.ndarray]:
    """Yield axes, then save to `path` and close even if drawing fails."""
    fig, axes = plt.subplots(nrows, 1, figsize=(8, height), sharex=True, squeeze=False)
    try:
        yield axes[:, 0]
        fig.tight_layout()
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)


def no_data(path: Path, title: str) -> Path:
    """Placeholder figure, so the page layout and the file set stay fixed."""
    with _figure(path, height=3.0) as (ax,):
        ax.text(0.5, 0.5, "no data", ha="center", va="center", fontsize=18, color="0.5")
        ax.set_title(title)
        ax.set_xticks([])
        ax.set_yticks([])
    return path


def _ms(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:,.1f}"


def _ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ECDF thinned to ECDF_POINTS quantiles: a million-point line adds nothing visible."""
    xs = np.sort(values)
    ys = np.arange(1, xs.size + 1) / xs.size
    if xs.size > ECDF_POINTS:
        pick = np.linspace(0, xs.size - 1, ECDF_POINTS).astype(np.int64)
        xs, ys = xs[pick], ys[pick]
    return xs, ys


# How far past the data (its p99.9) the x axis stretches to show the SLO line: further,
# and the requests crowd into a few of the histogram's bins.
SLO_AXIS_REACH = 2.0


def plot_distribution(
    values: np.ndarray, path: Path, *, metric: str, slo_ms: float | None = None
) -> Path:
    """Histogram + ECDF of one latency metric (ms) with p50/p99 markers and the SLO line.

    The x axis stops at p99.9 (or the SLO, if larger but within SLO_AXIS_REACH of it) so
    a few stragglers do not squash the body of the distribution; the title says how many
    points fell past it. An SLO far above every request stays in the legend, off the axis.
    """
    title = f"{metric} distribution"
    v = finite(np.asarray(values, dtype=np.float64))
    if v.size == 0:
        return no_data(path, title)
    p50, p99, p999 = np.percentile(v, [50, 99, 99.9])
    slo_on_axis = slo_ms is not None and slo_ms <= SLO_AXIS_REACH * float(p999)
    hi = max(float(p999), float(slo_ms) if slo_on_axis else 0.0) * 1.05
    # From zero, unless every request sits in the upper half of the axis (a closed loop of
    # fixed lengths): then from just below the fastest one, so the body is not one bar.
    low = float(v.min())
    if slo_on_axis:
        low = min(low, float(slo_ms))
    lo = max(0.0, low - 0.1 * (hi - low)) if low > 0.5 * hi else min(0.0, low)
    if hi <= lo:
        hi = lo + 1.0
    with _figure(path) as (ax,):
        ax.hist(
            v,
            bins=60,
            range=(lo, hi),
            color=HIST_COLOR,
            alpha=0.75,
            label=f"requests (n={v.size:,})",
        )
        ax.axvline(p50, color="0.2", ls=":", lw=1.5, label=f"p50 = {_ms(p50)} ms")
        ax.axvline(p99, color="0.2", ls="--", lw=1.5, label=f"p99 = {_ms(p99)} ms")
        if slo_on_axis:
            ax.axvline(slo_ms, color=SLO_COLOR, lw=2, label=f"SLO = {_ms(slo_ms)} ms")
        elif slo_ms is not None:  # every request well within it: the legend says where it is
            ax.plot([], [], color=SLO_COLOR, lw=2, label=f"SLO = {_ms(slo_ms)} ms (off the axis, right)")
        ax.set_xlim(lo, hi)
        ax.set_xlabel(f"{metric} (ms)")
        ax.set_ylabel("requests")
        cdf_ax = ax.twinx()
        cdf_ax.plot(*_ecdf(v), color=CDF_COLOR, lw=1.8, label="CDF")
        cdf_ax.set_ylim(0, 1.02)
        cdf_ax.set_ylabel("CDF")
        handles = ax.get_legend_handles_labels()
        cdf_handles = cdf_ax.get_legend_handles_labels()
        # Below the plot: inside it, the legend hid either bars or the CDF over it.
        labels = handles[1] + cdf_handles[1]
        cdf_ax.legend(
            handles[0] + cdf_handles[0],
            labels,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.16),
            ncol=min(len(labels), 5),
            fontsize=8,
            frameon=False,
        )
        above = int((v > hi).sum())
        if above:
            title += f" ({above:,} above {_ms(hi)} ms not shown; max {_ms(float(v.max()))} ms)"
        ax.set_title(title)
    return path


def plot_throughput(requests: pd.DataFrame, path: Path) -> Path:
    """Output tokens/s over time (each request's tokens over its generation) and completed
    requests/s (by finish time)."""
    edges, req_rate, tok_rate = bin_completions(requests)
    if edges.size == 0:
        return no_data(path, "Throughput")
    with _figure(path, nrows=2, height=5.5) as (top, bottom):
        top.stairs(tok_rate, edges, fill=True, color=HIST_COLOR, alpha=0.8)
        top.set_ylabel("output tokens/s")
        top.set_title("Throughput: tokens as generated, requests as completed")
        bottom.stairs(req_rate, edges, fill=True, color=CDF_COLOR, alpha=0.8)
        bottom.set_ylabel("completed req/s")
        bottom.set_xlabel("simulated time (s)")
    return path


def instance_label(replica, pools: Mapping[int, str] | None) -> str:
    """Legend name; a disaggregated run's instances say which pool they serve in."""
    role = (pools or {}).get(int(replica)) if pd.notna(replica) else None
    return f"{role} instance {replica}" if role else f"replica {replica}"


def series(
    binned: pd.DataFrame, pools: Mapping[int, str] | None = None
) -> list[tuple[str, int, pd.DataFrame]]:
    """(legend label, DP rank, binned rows) of each time-series line, replica then rank order.

    A run with more than one attention-DP rank gets a line per (replica, rank), labeled
    "replica 0 · rank 1": each rank has its own queue, batch and KV cache, and one line
    per replica would mix their values. Other runs keep one line per replica.
    """
    if not ranked(binned):
        return [(instance_label(r, pools), 0, g) for r, g in binned.groupby("replica", sort=True)]
    noun = "virtual engine" if rank_label(binned) == "virtual engine" else "rank"
    return [
        (f"{instance_label(r, pools)} · {noun} {int(k)}", int(k), g)
        for (r, k), g in binned.groupby(["replica", "dp_rank"], sort=True)
    ]


def _rank_colors(ranks: list[int]):
    """One colour per DP rank (a slice of viridis without its faint yellow end) and its norm."""
    n = max(ranks) + 1
    cmap = ListedColormap(matplotlib.colormaps["viridis"](np.linspace(0.0, 0.85, n)))
    return cmap, BoundaryNorm(np.arange(n + 1) - 0.5, n)


def _rank_colorbar(ax, cmap, norm, replicas: int, pools: Mapping[int, str] | None, label: str = "DP rank") -> None:
    """Colour key inside the axes, in the legend's corner and boxed like a legend: the axes
    keep their size (a side colorbar would misalign the batch-size figure's shared x axis).
    The box is 0.5 in tall whatever the axes' height, to fit a two-panel figure's top one."""
    height = 0.5 / (ax.get_position().height * ax.figure.get_figheight())  # axes fraction
    box = ax.inset_axes([0.67, 0.98 - height, 0.32, height])
    box.set_xticks([])
    box.set_yticks([])
    box.patch.set_alpha(0.9)
    for spine in box.spines.values():
        spine.set_color("0.8")
    noun = "instances" if pools else "replicas"
    box.text(0.5, 0.92, f"{label} ({replicas} {noun})", ha="center", va="top", fontsize=8,
             transform=box.transAxes)
    cax = box.inset_axes([0.06, 0.38, 0.88, 0.2])
    bar = ax.figure.colorbar(ScalarMappable(norm, cmap), cax=cax, orientation="horizontal")
    bar.ax.xaxis.set_major_locator(MaxNLocator(nbins=8, integer=True))
    bar.ax.tick_params(labelsize=7, length=2, pad=1)


def _replica_lines(
    ax,
    binned: pd.DataFrame,
    mean_col: str,
    max_col: str | None,
    scale: float = 1.0,
    pools: Mapping[int, str] | None = None,
) -> str:
    """Mean line per `series` (replica, or replica and DP rank), with the bin max as a faint
    band above it when given; returns the title's key to what is drawn.

    Up to MAX_LEGEND_SERIES lines get their own colour and a legend entry. Past that a
    legend is unreadable: lines are drawn thin and unlabeled, without bands. Then an
    attention-DP run colours each line by its rank (shared by all replicas, keyed by a
    small colour bar), which still shows a rank that runs hotter than its peers; other
    runs only say how many replicas there are.
    """
    lines = series(binned, pools)
    labeled = len(lines) <= MAX_LEGEND_SERIES
    by_rank = not labeled and ranked(binned)
    if by_rank:
        cmap, norm = _rank_colors([k for _, k, _ in lines])
    for i, (label, rank, g) in enumerate(lines):
        color = cmap(norm(rank)) if by_rank else f"C{i % 10}"
        t = g["t_s"].to_numpy()
        mean = g[mean_col].to_numpy(dtype=np.float64) * scale
        ax.plot(
            t,
            mean,
            color=color,
            lw=1.4 if labeled else 0.7,
            label=label if labeled else None,
        )
        if max_col is not None and labeled:
            top = g[max_col].to_numpy(dtype=np.float64) * scale
            ax.fill_between(t, mean, top, color=color, alpha=0.15, lw=0)
    replicas = binned["replica"].nunique()
    key = "(line: bin mean, band: bin max)" if max_col is not None and labeled else "(bin means)"
    if labeled:
        ax.legend(fontsize=8, loc="upper right", framealpha=0.9)
    elif by_rank:
        _rank_colorbar(ax, cmap, norm, replicas, pools, rank_label(binned))
    else:
        ax.text(
            0.99,
            0.97,
            f"{replicas} {'instances' if pools else 'replicas'}",
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=8,
        )
    return key


def _has(binned: pd.DataFrame, col: str) -> bool:
    return not binned.empty and bool(np.isfinite(binned[col].to_numpy(dtype=np.float64)).any())


def plot_queue_length(
    binned: pd.DataFrame, path: Path, pools: Mapping[int, str] | None = None
) -> Path:
    """Waiting-queue length per replica (per DP rank: each rank queues its own requests);
    a rising trend means the load exceeds capacity."""
    title = "Queue length"
    if not _has(binned, "queue_mean"):
        return no_data(path, title)
    never = not np.nan_to_num(binned["queue_max"].to_numpy(dtype=np.float64)).any()
    with _figure(path) as (ax,):
        key = _replica_lines(ax, binned, "queue_mean", "queue_max", pools=pools)
        ax.set_title(f"{title}: no request waited" if never else f"{title} {key}")
        ax.set_ylabel("queued requests")
        ax.set_xlabel("simulated time (s)")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(0, 1 if never else None)
    return path


def plot_kv_utilization(
    binned: pd.DataFrame, path: Path, pools: Mapping[int, str] | None = None
) -> Path:
    """KV blocks used / total per replica; near 100% is where preemptions start.

    Under attention DP each line is one rank's own cache (its blocks used over its blocks),
    since a rank preempts when its cache fills, whatever its peers hold."""
    title = "KV cache utilization"
    if not _has(binned, "kv_mean"):
        return no_data(path, title)
    with _figure(path) as (ax,):
        key = _replica_lines(ax, binned, "kv_mean", "kv_max", scale=100.0, pools=pools)
        ax.set_title(f"{title} {key}")
        ax.set_ylabel("KV blocks used (%)")
        ax.set_xlabel("simulated time (s)")
        ax.set_ylim(0, 105)
    return path


def plot_batch_size(
    binned: pd.DataFrame, path: Path, pools: Mapping[int, str] | None = None
) -> Path:
    """Running sequences per replica (or DP rank), and prefill vs decode tokens per iteration.

    Tokens per iteration are pooled across replicas (weighted by iteration count), prefill
    and decode each on its own axis (thousands against tens); a disaggregated run gets one
    line per pool instead (each pool's tokens per step). Under
    attention DP an iteration is one rank's step, as the token budget is per rank, so the
    panel is not the sum over the ranks of a forward pass.
    """
    title = "Batch size"
    if not _has(binned, "seqs_mean"):
        return no_data(path, title)
    roles = sorted(set((pools or {}).values()))
    with _figure(path, nrows=2, height=5.5) as (top, bottom):
        key = _replica_lines(top, binned, "seqs_mean", "seqs_max", pools=pools)
        top.set_title(f"{title} {key}")
        top.set_ylabel("running sequences")
        top.set_ylim(bottom=0)
        # Prefill's chunks of thousands of tokens and decode's one token per sequence on one
        # scale would hide decode: decode gets its own axis, on the right.
        twin = bottom.twinx()
        if len(roles) > 1:
            # Disaggregated: a prefill instance's long steps and a decode instance's short
            # ones pooled together would average into a step neither pool runs. Each pool
            # is drawn in its first instance's colour above.
            replica_role = binned["replica"].map(lambda r: (pools or {}).get(int(r)) if pd.notna(r) else None)
            first = {}
            for i, (_, _, g) in enumerate(series(binned, pools)):
                first.setdefault((pools or {}).get(int(g["replica"].iloc[0])), f"C{i % 10}")
            for role, style in zip(roles, ("-", "--", ":", "-."), strict=False):
                pooled = _tokens_per_iteration(binned[replica_role == role])
                total = pooled["prefill"] + pooled["decode"]
                axis = twin if role == "decode" else bottom
                axis.plot(pooled.index.to_numpy(), total, style, color=first.get(role, "0.3"), lw=1.5,
                          label=f"{role} instances" + (" (right axis)" if axis is twin else ""))
        else:
            pooled = _tokens_per_iteration(binned)
            t = pooled.index.to_numpy()
            bottom.fill_between(t, 0, pooled["prefill"], color=CDF_COLOR, alpha=0.7, lw=0, label="prefill")
            twin.plot(t, pooled["decode"], color=HIST_COLOR, lw=1.2, label="decode (right axis)")
        twin.set_ylim(bottom=0)
        twin.set_ylabel("decode tokens / iteration")
        handles = [h for a in (bottom, twin) for h in a.get_legend_handles_labels()[0]]
        twin.legend(handles, [h.get_label() for h in handles], fontsize=8, loc="upper right", framealpha=0.9)
        bottom.set_ylim(bottom=0)
        bottom.set_ylabel("prefill tokens / iteration")
        bottom.set_xlabel("simulated time (s)")
    return path


def _tokens_per_iteration(binned: pd.DataFrame) -> pd.DataFrame:
    """Mean prefill and decode tokens per iteration in each time bin, over the given
    replicas' iterations (weighted by how many each ran)."""
    w = binned["iterations"].to_numpy(dtype=np.float64)
    sums = (
        pd.DataFrame(
            {
                "t_s": binned["t_s"].to_numpy(dtype=np.float64),
                "w": w,
                "prefill": np.nan_to_num(binned["prefill_mean"].to_numpy(dtype=np.float64)) * w,
                "decode": np.nan_to_num(binned["decode_mean"].to_numpy(dtype=np.float64)) * w,
            }
        )
        .groupby("t_s", sort=True)
        .sum()
    )
    return pd.DataFrame({"prefill": sums["prefill"] / sums["w"], "decode": sums["decode"] / sums["w"]})
