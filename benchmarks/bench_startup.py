"""Start-up cost of a table-driven scenario: import, load, find and fit the shipped profile.

    python benchmarks/bench_startup.py [--scenario scenarios/benchmark-concurrency.yaml] [--repeats 5]

Each repeat is a fresh Python process (the profile caches are per process), timed from
interpreter start to a built cost model, before any request is simulated.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import sys, time
t0 = time.perf_counter()
from simulator import api
from simulator.simulation import Simulation
loaded = api.load(sys.argv[1], ["workload.num_requests=1"])
t1 = time.perf_counter()
Simulation(loaded)
t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "benchmark-concurrency.yaml"))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    loads, builds = [], []
    for i in range(args.repeats):
        out = subprocess.run([sys.executable, "-c", CHILD, args.scenario], check=True, capture_output=True,
                             text=True, cwd=ROOT).stdout.split()
        loads.append(float(out[0]))
        builds.append(float(out[1]))
        print(f"run {i + 1}: import + load {loads[-1]:.2f} s, cost model {builds[-1]:.2f} s")
    print(f"median: import + load {statistics.median(loads):.2f} s, cost model {statistics.median(builds):.2f} s "
          f"({platform.processor() or platform.machine()}, Python {platform.python_version()})")


if __name__ == "__main__":
    main()
