"""How much of a closed-loop row's predicted mean TTFT is its first round, against the gap?

    python benchmarks/first_round_share.py MEASURED.csv [--scenario S.yaml] [-o out.csv]

In a closed-loop sweep every client sends at once, so the first C requests (C clients) queue
behind one another's prefills, and the harness's mean TTFT averages that burst with the
quieter rounds after it (docs/fidelity.md, Known gaps). For each row of a sweep CSV this
re-simulates the row as `simulate validate` does and splits the simulated requests into the
first round and the rest. It prints the measured and predicted mean TTFT, the gap, the
first round's share of the predicted mean (its mean times C over all requests), and the gap
over that share, then per configuration the correlation of the gap with each part. A gap
that follows the first round's share says the burst is what reads short; one that follows
the rest, the steady state. Nothing is written unless `-o` names a file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.validation.measured import read_measured
from simulator.validation.runner import simulate_run

ROOT = Path(__file__).resolve().parents[1]


def first_round_rows(measured: Path, scenario: Path) -> pd.DataFrame:
    rows = []
    for run in read_measured([measured]).runs:
        if run.concurrency is None:
            continue
        pred = simulate_run(run, scenario, [])
        if pred.error:
            continue
        ttft = pred.requests.sort_values("arrival_s")["ttft_ms"].to_numpy()
        c = run.concurrency
        rows.append({"run": run.label, "group": run.group, "clients": c,
                     "measured": run.measured["ttft_ms"], "predicted": float(np.mean(ttft)),
                     "first_round_share": float(ttft[:c].sum() / len(ttft)),
                     "rest_mean": float(ttft[c:].mean()) if len(ttft) > c else float("nan")})
    frame = pd.DataFrame(rows)
    frame["gap"] = frame["measured"] - frame["predicted"]
    frame["gap_over_share"] = frame["gap"] / frame["first_round_share"]
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("measured", type=Path)
    parser.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "benchmark-concurrency.yaml")
    parser.add_argument("-o", "--out", type=Path, default=None)
    args = parser.parse_args()
    frame = first_round_rows(args.measured, args.scenario)
    with pd.option_context("display.width", 200, "display.max_rows", None):
        print(frame.drop(columns=["group"]).round(2).to_string(index=False))
    # Correlations below the KV cliffs only (a cliff: 5x the configuration's lowest TTFT, the
    # dev set's definition), where the queue for the cache, not the burst, sets the mean.
    below = frame[frame["measured"] < 5 * frame.groupby("group")["measured"].transform("min")]
    for group, g in below.groupby("group"):
        if len(g) > 2:
            print(f"{group}: gap/share median {g['gap_over_share'].median():.2f}; correlation of the gap with "
                  f"the first round's share {np.corrcoef(g['gap'], g['first_round_share'])[0, 1]:.2f}, with the "
                  f"later rounds' mean {np.corrcoef(g['gap'], g['rest_mean'])[0, 1]:.2f}")
    if args.out is not None:
        frame.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
