"""Simulator speed: simulated requests per wall-clock second on the chatbot scenario.

    python benchmarks/bench_chatbot.py [--requests 50000] [--repeats 5]

Runs the scenario in-process (no report writing) several times and prints the median.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

from simulator import api

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "chatbot.yaml"))
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--set", action="append", default=[], help="extra overrides")
    parser.add_argument("--no-iterations", action="store_true", help="do not record per-iteration rows")
    args = parser.parse_args()
    loaded = api.load(args.scenario, [f"workload.num_requests={args.requests}", *args.set])
    rates = []
    for i in range(args.repeats):
        t0 = time.perf_counter()
        result = api.run(loaded, record_iterations=not args.no_iterations)
        wall = time.perf_counter() - t0
        rates.append(args.requests / wall)
        print(f"run {i + 1}: {wall:.2f} s wall, {rates[-1]:,.0f} simulated req/s, "
              f"{result.summary['iterations']:,} iterations")
    print(f"median: {statistics.median(rates):,.0f} simulated requests per second "
          f"({platform.processor() or platform.machine()}, Python {platform.python_version()})")


if __name__ == "__main__":
    main()
