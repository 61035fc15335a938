"""`simulate validate` speed: wall time of a closed-loop sweep, one process against several.

    python benchmarks/bench_validate.py [--sweep FILE.csv] [--workers 1,2] [--repeats 3]

Validates the silicon dev sweep (60 rows, 4-64 clients, 10 requests each) under
`scenarios/benchmark-concurrency.yaml` in-process, writing to a temporary folder, and
prints the median wall time per worker count. Checks the predictions agree across counts.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

from simulator.validation import run_validation

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT.parent / "shared" / "validation" / "nvidia-silicon-h200-llama70b-fp8-vllm" / "measurements.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default=str(SWEEP))
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "benchmark-concurrency.yaml"))
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = len(pd.read_csv(args.sweep))
    tables = {}
    for workers in (int(w) for w in args.workers.split(",")):
        walls = []
        for i in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                _, out = run_validation([Path(args.sweep)], Path(args.scenario), [], Path(tmp) / "v", workers=workers)
                walls.append(time.perf_counter() - t0)
                tables[workers] = pd.read_csv(out / "validation.csv")
            print(f"workers {workers}, run {i + 1}: {walls[-1]:.1f} s")
        print(f"workers {workers}: median {statistics.median(walls):.1f} s for {rows} rows "
              f"({rows / statistics.median(walls):.2f} rows/s)")
    first = next(iter(tables.values()))
    same = all(t.equals(first) for t in tables.values())
    print(f"predictions identical across worker counts: {same}")
    print(f"({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()})")


if __name__ == "__main__":
    main()
