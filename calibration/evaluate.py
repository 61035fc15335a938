"""Held-out accuracy of the calibrated back end against NVIDIA's published kernel tables.

    python -m calibration.evaluate [--system h100_sxm] [--backend vllm] [--version X]

Three experiments, each scoring rows the model was NOT fitted on:

A. grid hold-out: from the shipped-style profile, every `stride`-th value of the main
   axis (GEMM M, prefill tokens, decode context, collective size) is removed for every
   shape; the model is rebuilt on the rest and predicts the removed rows.
B. GEMM (N, K) hold-out: every `stride`-th (N, K) pair is removed entirely; its rows are
   predicted from the neighbouring pairs.
C. off-profile rows: NVIDIA rows the shipped subset dropped (GEMM M values between its
   grid points, e.g. 3, 17, 33, 129, 4097), predicted by the full shipped profile.
D. extrapolation: the largest and the smallest GEMM N (and K) removed, so their rows lie
   outside the measured range and come from the anchored, fitted roofline.

For each, the median absolute % error of the calibrated predictor, of the roofline with
its efficiencies fitted on the same training rows, and of the default roofline back end.
Needs the `aiconfigurator` extra (aiconfigurator-core and pyarrow).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from calibration.aiconfigurator import SHIP_MIN_NK, convert
from calibration.profile import FAMILY_COLUMNS, Profile
from simulator.cost.calibrated import reference_gpu, score_family
from simulator.hardware import get_gpu

MAIN_AXIS = {"gemm": "m", "attn_prefill": "q_len", "attn_decode": "ctx_len",
             "allreduce": "bytes", "allgather": "bytes"}


def _split_axis(rows: list[list], family: str, stride: int) -> tuple[list, list]:
    """Hold out every `stride`-th distinct value of the family's main axis (never the ends)."""
    col = FAMILY_COLUMNS[family].index(MAIN_AXIS[family])
    vals = sorted({r[col] for r in rows})
    held = {v for i, v in enumerate(vals[1:-1], start=1) if i % stride == stride // 2}
    return [r for r in rows if r[col] not in held], [r for r in rows if r[col] in held]


def _split_nk(rows: list[list], stride: int) -> tuple[list, list]:
    pairs = sorted({(r[1], r[2]) for r in rows})
    held = {p for i, p in enumerate(pairs) if i % stride == stride // 2}
    return [r for r in rows if (r[1], r[2]) not in held], [r for r in rows if (r[1], r[2]) in held]


def _summary(errs: dict[str, np.ndarray]) -> dict[str, float]:
    return {k: float(np.median(v)) for k, v in errs.items()} | {
        "p90_calibrated": float(np.percentile(errs["calibrated"], 90)), "n": len(errs["calibrated"])}


def evaluate(system: str = "h100_sxm", backend: str = "vllm", version: str | None = None,
             stride: int = 5, log: Callable[[str], None] = print) -> list[dict]:
    shipped = convert(system, backend, version)
    full = convert(system, backend, version, full=True)
    gpu = reference_gpu(shipped, get_gpu(shipped.metadata.gpu or "h100-sxm"))
    results: list[dict] = []

    def run(exp: str, family: str, train: list, test: list) -> None:
        if not test or not train:
            return
        res = {"experiment": exp, "family": family, **_summary(score_family(family, train, test, gpu))}
        results.append(res)
        log(f"{exp:<34} {family:<13} n={res['n']:>5}  calibrated {res['calibrated']:6.2f}%  "
            f"(p90 {res['p90_calibrated']:6.2f}%)  fitted roofline {res['roofline_fitted']:6.2f}%  "
            f"default roofline {res['roofline_default']:6.2f}%")

    for fam in MAIN_AXIS:
        table = shipped.table(fam)
        if table is not None:
            run(f"A: every {stride}th {MAIN_AXIS[fam]} held out", fam, *_split_axis(table.rows, fam, stride))
    gemm = shipped.table("gemm")
    if gemm is not None:
        run(f"B: every {stride}th (N,K) held out", "gemm", *_split_nk(gemm.rows, stride))
        have = {tuple(r[:4]) for r in gemm.rows}
        extra = [r for r in full.table("gemm").rows
                 if tuple(r[:4]) not in have and r[1] >= SHIP_MIN_NK and r[2] >= SHIP_MIN_NK]
        run("C: M values not in shipped profile", "gemm", gemm.rows, extra)
        for col, name in ((1, "N"), (2, "K")):
            vals = sorted({r[col] for r in gemm.rows})
            for edge, label in ((vals[-1], "largest"), (vals[0], "smallest")):
                run(f"D: {label} {name} ({edge}) extrapolated", "gemm",
                    [r for r in gemm.rows if r[col] != edge], [r for r in gemm.rows if r[col] == edge])
    return results


def markdown(results: list[dict]) -> str:
    lines = ["| experiment | op family | held-out rows | calibrated (median) | calibrated (p90) "
             "| roofline, fitted η | roofline, default |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['experiment']} | {r['family']} | {r['n']} | {r['calibrated']:.1f}% | "
                     f"{r['p90_calibrated']:.1f}% | {r['roofline_fitted']:.1f}% | {r['roofline_default']:.1f}% |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--system", default="h100_sxm")
    ap.add_argument("--backend", default="vllm")
    ap.add_argument("--version", default=None)
    ap.add_argument("--stride", type=int, default=5)
    ap.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    args = ap.parse_args(argv)
    results = evaluate(args.system, args.backend, args.version, args.stride)
    if args.markdown:
        print()
        print(markdown(results))


if __name__ == "__main__":
    main()


__all__ = ["Profile", "evaluate", "markdown"]
