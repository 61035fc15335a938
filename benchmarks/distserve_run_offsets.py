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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args()
    files = sorted(args.folder.glob("vllm-*.csv"), key=lambda p: float(p.stem.split("-")[-1]))
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


if __name__ == "__main__":
    main()
