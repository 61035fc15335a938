"""Does a sweep's TPOT error follow decode attention's share of the step?

    simulate validate SWEEP.csv --scenario BASE.yaml --output-dir OUT
    python benchmarks/attention_share.py OUT/validation.csv --scenario BASE.yaml

For each row of a validated closed-loop sweep this times one decode step of the row's
clients at mid-run context (isl + osl/2) under the row's own settings, as `simulate
explain` does, and prints decode attention's share of it next to the row's signed TPOT
error; then the correlation, and the two scale factors (attention, the rest of the step)
that would fit the measurements best. A strong correlation says the error sits in the
attention kernel's time, not in the GEMMs or the schedule; that is how
docs/fidelity.md item 17 was found. The factors are a diagnosis, never a setting.
Rows whose measured TTFT is a KV cliff (>= 5x the row group's lowest) are left out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.config import load_scenario
from simulator.explain import explain
from simulator.validation import prepare_measured

CLIFF = 5.0  # docs/fidelity.md: a cliff is TTFT >= 5x the configuration's lowest-concurrency TTFT


def attention_shares(table: pd.DataFrame, source: Path, scenario: Path) -> list[float]:
    """Decode attention's share of one mid-run decode step, per row of `source`."""
    measured, _ = prepare_measured([source], load_scenario(scenario), [])  # as validate does
    shares = []
    for run, (_, row) in zip(measured.runs, table.iterrows(), strict=True):
        loaded = load_scenario(scenario, run.overrides)
        e = explain(loaded, batch=int(row.concurrency), context=int(row.isl + row.osl / 2), prefill=int(row.isl))
        shares.append(e.decode.get("attn_decode", 0.0) / sum(e.decode.values()))
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("validation_csv", type=Path, help="validation.csv of a sweep")
    parser.add_argument("--scenario", type=Path, required=True, help="the base scenario it was validated with")
    args = parser.parse_args()
    table = pd.read_csv(args.validation_csv)
    source = args.validation_csv.parent / "_rows.csv"
    measured_cols = [c for c in table.columns if not c.startswith("pred_")]
    table[measured_cols].to_csv(source, index=False)
    try:
        table["attn_share"] = attention_shares(table, source, args.scenario)
    finally:
        source.unlink()
    table["tpot_err_pct"] = (table.pred_tpot_ms / table.tpot_ms - 1) * 100
    group = ["system", "model", "precision", "tp_size", "isl", "osl"]
    lowest = table.groupby(group).ttft_ms.transform("min")
    below = table[table.ttft_ms < CLIFF * lowest]
    pd.set_option("display.width", 160)
    print(below[[*group[3:], "concurrency", "attn_share", "tpot_err_pct"]].round(3).to_string(index=False))
    r = np.corrcoef(below.attn_share, below.tpot_err_pct)[0, 1]
    share = below.attn_share.to_numpy()
    a = np.c_[1 - share, share]
    scale, *_ = np.linalg.lstsq(a, (below.tpot_ms / below.pred_tpot_ms).to_numpy(), rcond=None)
    print(f"\n{len(below)} rows below the cliffs: correlation of TPOT error with attention share {r:+.2f}; "
          f"best-fit measured/predicted: rest of the step x{scale[0]:.3f}, decode attention x{scale[1]:.3f}")


if __name__ == "__main__":
    main()
