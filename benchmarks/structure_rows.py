"""The structure-only sweep of BENCHMARKS.md: every vLLM aggregated configuration in
aiconfigurator-core's published silicon sample, with placeholder measurements.

    python benchmarks/structure_rows.py -o /tmp/structure.csv
    simulate validate /tmp/structure.csv --scenario scenarios/benchmark-concurrency.yaml -j 2

The sample (`systems/silicon_sample.csv` in the aiconfigurator-core wheel, Apache-2.0)
holds measured TTFT/TPOT. They are dropped on reading and every row gets the same
placeholders (100 ms TTFT, 10 ms TPOT): the sweep exercises the model x GPU x precision x TP
x length x concurrency grid for speed and coverage, and its "errors" mean nothing.
Rows that differ only in columns a sweep CSV cannot express (attention-DP, expert
parallelism, the vLLM version) collapse into one; with `--layout` the optional sweep
columns `pp_size`, `attention_dp_size` and `moe_ep_size` are kept, so those rows run with
their own layouts. Needs `pip install -e '.[aiconfigurator]'`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from calibration.aiconfigurator import package_root

COLUMNS = ["system", "model", "precision", "tp_size", "isl", "osl", "concurrency"]
PLACEHOLDER_TTFT_MS, PLACEHOLDER_TPOT_MS = 100.0, 10.0


LAYOUT_COLUMNS = ["pp_size", "attention_dp_size", "moe_ep_size"]


def structure_rows(sample: Path, layout: bool = False, version: bool = False) -> pd.DataFrame:
    frame = pd.read_csv(sample)
    frame = frame.drop(columns=[c for c in frame.columns if c.startswith("silicon_") and c.endswith("_ms")])
    frame = frame[(frame["mode"] == "agg") & (frame["backend"] == "vllm")]
    frame = frame.rename(columns={"model_path": "model", "batch_size": "concurrency"})
    frame = frame[COLUMNS + (LAYOUT_COLUMNS if layout else []) + (["backend_version"] if version else [])]
    frame = frame.astype({"tp_size": int, "concurrency": int}).drop_duplicates()
    if layout:  # the sample's batch_size is per attention-DP rank; a sweep's concurrency is the total
        frame["concurrency"] *= frame["attention_dp_size"].fillna(1).astype(int)
    frame["ttft_ms"] = PLACEHOLDER_TTFT_MS
    frame["tpot_ms"] = PLACEHOLDER_TPOT_MS
    return frame.reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=Path, help="silicon_sample.csv (default: the installed wheel's)")
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--layout", action="store_true", help="keep the pp, attention-DP and EP columns")
    parser.add_argument("--version", action="store_true",
                        help="keep the vLLM version column (backend_version), which validate reads")
    args = parser.parse_args()
    sample = args.sample or package_root() / "systems" / "silicon_sample.csv"
    rows = structure_rows(sample, args.layout, args.version)
    rows.to_csv(args.output, index=False)
    print(f"{len(rows)} rows -> {args.output}")


if __name__ == "__main__":
    main()
