"""Do the DistServe vLLM files agree with one another? A diagnostic, not a fit.

    python benchmarks/distserve_run_offsets.py [../shared/validation/distserve-opt13b-a100-vllm]

Each request's decode phase (from its first token to its last) is spent in decode steps
and in the prefills that interrupt them (vLLM v0 runs a prefill iteration on its own,
stalling every running decode). From each file's own measured timeline this counts, per
request, the decode steps (`output_tokens - 1`), the mean number of requests decoding
alongside it, and the prefills (and their prompt tokens) that completed inside its
decode phase. One least-squares line over all eight files,

    decode time = steps x (a + b x batch) + prefills x p0 + prompt tokens x p1,

is the best any iteration-level cost model of this shape can do *given the measured
schedule*. The script prints its coefficients, each file's mean-TPOT residual, and the
residual in each fifth of each run: a file whose residual is the same sign in every fifth
ran uniformly faster or slower than the others, which no load-dependent cost explains.

It then checks the files against each other with no model at all. Every file's requests
are a prefix of one list (the same prompts and output lengths in the same order) and its
arrival gaps are that list's gaps scaled by 1/rate, so the first 100 requests (the shortest
file) are one workload replayed at eight rates. A server can only get slower on the same
workload sent faster; a pair where the higher rate measured a lower mean TTFT or TPOT on
those requests is printed as a contradiction. With `--predicted validation.csv` (written by
`simulate validate` on these files) the table gains the predicted means beside them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "validation" / "distserve-opt13b-a100-vllm"
SAMPLES_PER_REQUEST = 50  # points at which the decoding batch is counted, per decode phase


def decode_phase_features(frame: pd.DataFrame) -> pd.DataFrame:
    """Per request with at least two output tokens: steps, mean batch, prefills inside."""
    first = (frame.arrival_s * 1000 + frame.ttft_ms).to_numpy()
    last = (frame.arrival_s * 1000 + frame.e2e_ms).to_numpy()
    prompts = frame.prompt_tokens.to_numpy()
    rows = []
    for i in np.flatnonzero(frame.output_tokens.to_numpy() >= 2):
        inside = (first > first[i]) & (first < last[i])
        probes = np.linspace(first[i], last[i], SAMPLES_PER_REQUEST)
        batch = ((first[None, :] <= probes[:, None]) & (last[None, :] > probes[:, None])).sum(1).mean()
        rows.append({"steps": frame.output_tokens.iat[i] - 1, "batch": batch, "prefills": inside.sum(),
                     "prefill_ktokens": prompts[inside].sum() / 1000, "decode_ms": last[i] - first[i],
                     "tpot_ms": frame.tpot_ms.iat[i], "fifth": 5 * i // len(frame)})
    return pd.DataFrame(rows)


def rate_of(path: Path) -> float:
    """The request rate a DistServe file's name carries: vllm-<N>-<rate>.csv."""
    return float(path.name.removesuffix(".csv").split("-")[-1])


def common_prefix_means(frames: dict[str, pd.DataFrame], predicted: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean TTFT and TPOT over the requests every file shares (the shortest file's count),
    per file; raises ValueError when the files do not share them in order."""
    n = min(len(f) for f in frames.values())
    first = next(iter(frames.values())).iloc[:n]
    rows = []
    for name, frame in frames.items():
        head = frame.iloc[:n]
        same = (head[["prompt_tokens", "output_tokens"]].to_numpy() == first[["prompt_tokens", "output_tokens"]].to_numpy())
        if not same.all():
            raise ValueError(f"{name}: its first {n} requests are not the other files' requests")
        decoded = head.output_tokens >= 2
        row = {"file": name, "rate": rate_of(Path(f"{name}.csv")), "requests": n,
               "ttft_ms": head.ttft_ms.mean(), "tpot_ms": head.tpot_ms[decoded].mean()}
        if predicted is not None:
            pred = predicted[predicted.source == f"{name}.csv"].iloc[:n]
            row["pred_ttft_ms"] = pred.pred_ttft_ms.mean()
            row["pred_tpot_ms"] = pred.pred_tpot_ms[decoded.to_numpy()].mean()
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["rate", "file"], kind="stable").reset_index(drop=True)


def contradictions(means: pd.DataFrame, metric: str) -> list[tuple[str, str, float]]:
    """(slower-rate file, faster-rate file, how much lower the faster rate measured, %) for
    every pair of rates where the higher rate measured the lower mean."""
    out = []
    for lo in means.itertuples():
        for hi in means.itertuples():
            if hi.rate > lo.rate and getattr(hi, metric) < getattr(lo, metric):
                out.append((lo.file, hi.file, 100 * (1 - getattr(hi, metric) / getattr(lo, metric))))
    return out


def print_common_prefix(files: list[Path], predicted: Path | None) -> None:
    frames = {f.name.removesuffix(".csv"): pd.read_csv(f) for f in files}
    means = common_prefix_means(frames, pd.read_csv(predicted) if predicted else None)
    print(f"\nThe first {means.requests.iat[0]} requests, the same workload in every file, by rate:")
    with pd.option_context("display.width", 200, "display.float_format", "{:.1f}".format):
        print(means.drop(columns="requests").to_string(index=False))
    for metric in ("ttft_ms", "tpot_ms"):
        for lo, hi, pct in contradictions(means, metric):
            print(f"  {metric}: {hi} measured {pct:.1f}% below {lo}, at a higher rate")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--predicted", type=Path, help="a validation.csv of these files, for predicted means")
    args = parser.parse_args()
    files = sorted(args.folder.glob("vllm-*.csv"), key=rate_of)
    if not files:
        raise SystemExit(f"no vllm-*.csv in {args.folder}")
    data = pd.concat([decode_phase_features(pd.read_csv(f)).assign(file=f.stem) for f in files])
    design = np.column_stack([data.steps, data.steps * data.batch, data.prefills, data.prefill_ktokens])
    (a, b, p0, p1), *_ = np.linalg.lstsq(design, data.decode_ms.to_numpy(), rcond=None)
    print(f"decode step {a:.1f} ms + {b:.2f} ms per sequence; prefill {p0:.1f} ms + {p1:.0f} ms per 1k tokens")
    data["fit_tpot_ms"] = design @ np.array([a, b, p0, p1]) / data.steps
    data["residual"] = data.tpot_ms / data.fit_tpot_ms - 1
    per_file = data.groupby("file", sort=False).agg(tpot_ms=("tpot_ms", "mean"), fit_tpot_ms=("fit_tpot_ms", "mean"),
                                                    batch=("batch", "mean"))
    per_file["fit_error_%"] = 100 * (per_file.fit_tpot_ms / per_file.tpot_ms - 1)
    fifths = data.pivot_table(index="file", columns="fifth", values="residual", aggfunc="median", sort=False)
    fifths.columns = [f"measured/fit-1, fifth {c + 1}" for c in fifths.columns]
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        print(per_file.round(2).to_string())
        print(fifths.to_string())
    print_common_prefix(files, args.predicted)


if __name__ == "__main__":
    main()
