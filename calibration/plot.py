"""Measured kernels against the roofline: one PNG, one panel per op family.

Compute-carrying families are drawn as a classic roofline (achieved FLOP/s against
arithmetic intensity, with the datasheet and the fitted rooflines); bandwidth-only
families as achieved bandwidth against size. Headless (Agg), closed after saving.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from calibration.profile import FAMILY_COLUMNS, Profile
from simulator.cost.calibrated import COLLECTIVES, FAMILY_ADAPTERS, CalibratedTimer
from simulator.hardware import GPUSpec

DPI = 100
MAX_SERIES = 10  # beyond this, points are drawn grey as "other"


def _series(pts):
    """(label, colour, points) per series, the largest first; the tail merged into grey."""
    labels = sorted({p[0] for p in pts}, key=lambda lab: -sum(p[0] == lab for p in pts))
    cmap = plt.get_cmap("tab10")
    out = [(lab, cmap(i % 10), [p for p in pts if p[0] == lab]) for i, lab in enumerate(labels[:MAX_SERIES])]
    rest = [p for p in pts if p[0] not in set(labels[:MAX_SERIES])]
    if rest:
        out.append(("other", "#bbbbbb", rest))
    return out


def _points(profile: Profile, family: str):
    """(label, flops, bytes, seconds) per row, via the same ops the simulator uses."""
    table = profile.table(family)
    if table is None:
        return []
    ad = FAMILY_ADAPTERS[family]
    n_shape = len(FAMILY_COLUMNS[family])
    out = []
    for r in table.rows:
        key, c = ad.split(tuple(r[:n_shape]))
        op = ad.eq_op(key, c)
        if family in ("gemm", "elementwise"):
            label = key[0]
        elif family in COLLECTIVES:
            label = f"{key[2]}/{key[0]}"
        elif family == "moe":
            label = op.dtype
        elif family == "linear_attn":
            label = f"{key[0]} K{key[1]}/V{key[2]}"
        else:
            label = f"H{key[0]}/KV{key[1]}"
        out.append((label, op.flops, op.bytes, r[n_shape] * 1e-6))
    return out


def _roofline_panel(ax, pts, gpu: GPUSpec, timer: CalibratedTimer, family: str, title: str,
                    peak_label: str) -> None:
    for lab, color, sel in reversed(_series(pts)):
        sel = [p for p in sel if p[1] > 0]
        ai = np.array([p[1] / p[2] for p in sel])
        perf = np.array([p[1] / p[3] / 1e12 for p in sel])
        ax.scatter(ai, perf, s=5, alpha=0.5, color=color, label=lab)
    all_ai = [p[1] / p[2] for p in pts if p[1] > 0]
    if not all_ai:
        return
    x = np.logspace(np.log10(min(all_ai)) - 0.3, np.log10(max(all_ai)) + 0.3, 200)
    bw = gpu.hbm_tbps
    dtypes = sorted({p[0] for p in pts} & set(gpu.peak_tflops)) if family == "gemm" else ["bf16"]
    model = timer.models.get(family)
    for dt in dtypes[:2]:
        peak = gpu.peak_tflops[dt]
        ax.plot(x, np.minimum(peak, x * bw), "k-", lw=1, label=f"{peak_label} {dt}")
        if model is not None:
            eff = model.timer.eff
            ec = eff.gemm_compute if family == "gemm" else eff.attention_compute
            em = eff.gemm_memory if family == "gemm" else eff.attention_memory
            ax.plot(x, np.minimum(peak * ec, x * bw * em), "k--", lw=1, label=f"fitted {dt}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(title)
    ax.legend(fontsize=6, loc="lower right")


def _bandwidth_panel(ax, pts, ref_gbps: float | None, title: str, ylabel: str,
                     ref_label: str = "datasheet") -> None:
    for lab, color, sel in _series(pts):
        sel = sorted(sel, key=lambda p: p[2])
        ax.plot([p[2] for p in sel], [p[2] / p[3] / 1e9 for p in sel], ".-" if lab != "other" else ".",
                ms=3, lw=0.8, color=color, label=lab)
    if ref_gbps:
        ax.axhline(ref_gbps, color="k", lw=1, label=ref_label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bytes")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=6, loc="lower right")


def roofline_png(profile: Profile, timer: CalibratedTimer, path: str | Path) -> Path:
    """Write the measured-vs-roofline figure for `profile` to `path`."""
    path = Path(path)
    gpu = timer.reference
    # A device outside the catalog (a CPU) has no datasheet: its best measurement stands in.
    label = "datasheet" if profile.metadata.gpu else "best measured"
    fig, axes = plt.subplots(2, 3, figsize=(15, 9))
    try:
        panels = [("gemm", "GEMM"), ("attn_prefill", "prefill attention"), ("attn_decode", "decode attention")]
        for ax, (fam, title) in zip(axes[0], panels, strict=True):
            pts = _points(profile, fam)
            if pts:
                _roofline_panel(ax, pts, gpu, timer, fam, title, label)
            else:
                ax.text(0.5, 0.5, f"{title}: not measured", ha="center", va="center")
                ax.set_axis_off()
        ew = _points(profile, "elementwise")
        if ew:
            _bandwidth_panel(axes[1][0], ew, gpu.hbm_tbps * 1e3, "elementwise / copy", "achieved GB/s", label)
        else:
            axes[1][0].text(0.5, 0.5, "elementwise: not measured", ha="center", va="center")
            axes[1][0].set_axis_off()
        coll = [(f"{fam} {lab}", f_, b, t) for fam in COLLECTIVES for lab, f_, b, t in _points(profile, fam)]
        if coll:
            _bandwidth_panel(axes[1][1], coll, gpu.intra_node_link.bandwidth_gbps, "collectives (message bytes / time)",
                             "algorithm GB/s")
        else:
            why = profile.metadata.not_measured.get("allreduce", "not measured")
            axes[1][1].text(0.5, 0.5, f"collectives:\n{why}", ha="center", va="center", wrap=True)
            axes[1][1].set_axis_off()
        ax = axes[1][2]
        ax.set_axis_off()
        meta = profile.metadata
        lines = [f"{meta.gpu_name}  ({meta.source})", f"date {meta.date}", ""]
        for fam, f in meta.fit.items():
            cv = "—" if f.cv_median_ape_pct is None else f"{f.cv_median_ape_pct:.1f}%"
            lines.append(f"{fam:<13} n={f.points:<6} held-out median |err| {cv}")
        ax.text(0.0, 1.0, "\n".join(lines), va="top", family="monospace", fontsize=8)
        fig.suptitle(f"Measured kernels vs roofline: {meta.gpu_name}")
        fig.tight_layout()
        fig.savefig(path, dpi=DPI, format="png")  # explicit: the path may be a staging name
    finally:
        plt.close(fig)
    return path
