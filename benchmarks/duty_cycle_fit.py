"""How much of the power limit's slow-down does a TP prefill's all-reduce wait give back?

    python benchmarks/duty_cycle_fit.py [LOG ...]   # default: benchmarks/logs/*-duty-cycle-run*.log

Reads `benchmarks/gpu_duty_cycle_run.sh` logs: one Llama-3.1-70B FP8 prefill layer back to
back for 8 s, without a wait and with one at each all-reduce (a spin kernel, or a copy that
moves a ring all-reduce's HBM traffic, then the spin). It pairs each run with a wait with
the run without one at the same TP in the same log (a log without that baseline: the log
before it, which ran on the same warm machine), and fits the power balance that
`simulator/cost/sustained.py`'s `power_relief` applies per iteration:

    the busy share 1 - s of a pass and the wait's share s draw, on average, the board's limit:
    (1 - s) P_busy + s q P_limit = P_limit, with P_busy proportional to the SM clock, so the
    clock, and each kernel's sustained fraction f0, rise by r(s) = (1 - q s) / (1 - s),
    a fraction capped at 1.

q is the wait's draw over the limit: one number, fitted by least squares (log of the
predicted over the measured steady time) over the big kernels (gate/up, down, attention),
once for the spin waits and once for the copy waits. Each kernel's burst time is the
faster of its two runs' (a burst starts from idle clocks and reads slow when caught
mid-ramp). Prints every pair and the fits; nothing is written.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

from calibration.power import KernelPair, fit_wait_power
from simulator.cost.sustained import power_relief

LOGS = sorted(Path(__file__).resolve().parent.glob("logs/*-duty-cycle-run*.log"))
KERNELS = ("gate_up GEMM", "down GEMM", "attention")
RUN = re.compile(r"^=== --tp (\d+)(.*)$")
KERNEL = re.compile(r"^\s+(.+?)\s+burst\s+([\d,.]+) µs\s+sustained\s+([\d,.]+) µs")
SHARE = re.compile(r"idle share of the sustained pass ([\d.]+)")


@dataclass
class Run:
    log: str
    tp: int
    wait: str  # "", "spin" or "copy"
    share: float
    burst: dict[str, float]
    steady: dict[str, float]


def parse(path: Path) -> list[Run]:
    runs: list[Run] = []
    for line in path.read_text().splitlines():
        if m := RUN.match(line):
            flags = m.group(2)
            wait = "copy" if "--idle-copy-mb" in flags else "spin" if "--idle-us" in flags else ""
            runs.append(Run(path.name, int(m.group(1)), wait, 0.0, {}, {}))
        elif runs and (m := KERNEL.match(line)):
            runs[-1].burst[m.group(1)] = float(m.group(2).replace(",", ""))
            runs[-1].steady[m.group(1)] = float(m.group(3).replace(",", ""))
        elif runs and (m := SHARE.search(line)):
            runs[-1].share = float(m.group(1))
    return [r for r in runs if all(k in r.steady for k in KERNELS)]


@dataclass
class Pair:
    run: Run
    kernel: str
    f0: float  # sustained fraction without a wait
    f: float  # with it


def pairs(logs: list[Path]) -> list[Pair]:
    out = []
    earlier: list[Run] = []
    for path in logs:
        runs = parse(path)
        for run in runs:
            if not run.wait:
                continue
            base = [b for b in runs if not b.wait and b.tp == run.tp] or \
                   [b for b in earlier if not b.wait and b.tp == run.tp]
            if not base:
                continue  # no baseline on the same machine
            for k in KERNELS:
                steady0 = sum(b.steady[k] for b in base) / len(base)
                burst = min([run.burst[k]] + [b.burst[k] for b in base])
                out.append(Pair(run, k, min(1.0, burst / steady0), min(1.0, burst / run.steady[k])))
        earlier = runs
    return out


def fit(ps: list[Pair]) -> tuple[float, float]:
    """q minimising the squared log error, and that error's RMS (calibration/power.py)."""
    found = fit_wait_power(KernelPair(p.kernel, p.run.share, p.f0, p.f) for p in ps)
    if found is None:
        raise SystemExit("no throttled kernel stays below its burst speed with the wait: q is only bounded")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="*", type=Path, default=LOGS)
    args = parser.parse_args()
    ps = pairs(args.logs)
    fits = {w: fit([p for p in ps if p.run.wait == w]) for w in ("spin", "copy") if any(p.run.wait == w for p in ps)}
    print(f"{'log':38s} {'TP':>2s} {'wait':4s} {'share':>5s} {'kernel':13s} {'f0':>6s} {'f':>6s}  predicted")
    for p in ps:
        q = fits[p.run.wait][0]
        pred = min(1.0, p.f0 * power_relief(p.run.share, q))
        print(f"{p.run.log:38s} {p.run.tp:2d} {p.run.wait:4s} {p.run.share:5.2f} {p.kernel:13s} "
              f"{p.f0:6.3f} {p.f:6.3f}  {pred:6.3f}")
    for wait, (q, rms) in fits.items():
        n = sum(p.run.wait == wait for p in ps)
        print(f"{wait}: q = {q:.3f} of the limit drawn while waiting; RMS log error {rms:.3f} over {n} kernels")


if __name__ == "__main__":
    main()
