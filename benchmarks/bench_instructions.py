"""Simulator cost in CPU instructions, counted by valgrind's callgrind.

    python benchmarks/bench_instructions.py [--scenario S] [--requests 3000] [--set k=v ...] [--no-iterations]

Wall-clock rates on a shared virtual machine drift by ±20% from minute to minute; an
instruction count does not, so two commits can be compared with one run each. Only the
simulation itself is counted: imports, table loading and a 50-request warm-up run happen
with instrumentation off. `--no-iterations` counts the path compare, plan and validate take (no
per-iteration rows kept). Needs valgrind (`apt install valgrind`); runs ~40x slower than
natively (about a minute for 3,000 chatbot requests).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _child(args: argparse.Namespace) -> None:
    from simulator import api

    warm = api.load(args.scenario, ["workload.num_requests=50", *args.set])
    api.run(warm, record_iterations=not args.no_iterations)
    loaded = api.load(args.scenario, [f"workload.num_requests={args.requests}", *args.set])
    pid = str(os.getpid())
    subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
    api.run(loaded, record_iterations=not args.no_iterations)
    subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "chatbot.yaml"))
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--set", action="append", default=[], help="extra overrides")
    parser.add_argument("--no-iterations", action="store_true", help="keep no per-iteration rows (compare, plan, validate)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("valgrind is not installed: `apt install valgrind`, or time with bench_chatbot.py")
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
           sys.executable, __file__, "--child", "--scenario", args.scenario, "--requests", str(args.requests)]
    for s in args.set:
        cmd += ["--set", s]
    if args.no_iterations:
        cmd.append("--no-iterations")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        sys.exit(f"callgrind run failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    total = int(found.group(1))
    print(f"{total:,} instructions for {args.requests:,} requests ({total / args.requests:,.0f} per request)")


if __name__ == "__main__":
    main()
