"""Do fast-forwarded decode stretches give what stepping every iteration gives?

    python benchmarks/fast_forward_check.py SWEEP.csv --scenario scenarios/benchmark-concurrency.yaml

Each row of a closed-loop sweep runs as `simulate validate` would run it, twice: with
decode stretches advanced in one event (the default) and with every iteration stepped
(`fast_forward=False`). The two should agree up to the stretches' documented
approximations (table-driven attention sampled every few steps); rows whose mean TPOT
differs by more than --tpot-tol or mean TTFT by more than --ttft-tol are listed.
Attention-DP ranks step every pass in lockstep (simulator/lockstep.py), so their rows
agree exactly. This is how the attention-DP resonance of docs/fidelity.md was found,
before lockstep: one rank kept pricing its steps with a peer's prefill for a whole stretch.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from simulator.config import load_scenario
from simulator.errors import ServesimError
from simulator.validation import prepare_measured
from simulator.validation.measurement import MeasuredRun
from simulator.validation.runner import simulate_run


def both_ways(run: MeasuredRun, scenario: Path) -> tuple[str, dict | None, dict | None, str | None]:
    """The run's mean metrics with stretches and stepped, or why it cannot run."""
    if run.error:
        return run.label, None, None, run.error.splitlines()[0]
    try:
        fast, stepped = (simulate_run(run, scenario, [], fast_forward=ff) for ff in (True, False))
    except ServesimError as exc:
        return run.label, None, None, exc.render().splitlines()[0]
    if fast.error or stepped.error:
        return run.label, None, None, (fast.error or stepped.error).splitlines()[0]
    return run.label, fast.predicted, stepped.predicted, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", type=Path)
    parser.add_argument("--scenario", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3, help="requests per client (validate's default is 10)")
    parser.add_argument("--tpot-tol", type=float, default=0.02)
    parser.add_argument("--ttft-tol", type=float, default=0.05)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()
    measured, _ = prepare_measured([args.sweep], load_scenario(args.scenario), [], rounds=args.rounds)
    runs = measured.runs
    worst, listed, skipped = 0.0, 0, 0
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for label, fast, stepped, why in pool.map(both_ways, runs, [args.scenario] * len(runs)):
            if why is not None:
                skipped += 1
                continue
            d_tpot = fast["tpot_ms"] / stepped["tpot_ms"] - 1
            d_ttft = fast["ttft_ms"] / stepped["ttft_ms"] - 1
            worst = max(worst, abs(d_tpot))
            if abs(d_tpot) > args.tpot_tol or abs(d_ttft) > args.ttft_tol:
                listed += 1
                print(f"{label}: TPOT {fast['tpot_ms']:.2f} vs {stepped['tpot_ms']:.2f} ms stepped ({d_tpot:+.1%}), "
                      f"TTFT {fast['ttft_ms']:.1f} vs {stepped['ttft_ms']:.1f} ms ({d_ttft:+.1%})")
    print(f"{len(runs) - skipped} runs compared ({skipped} not simulatable), {listed} beyond tolerance; "
          f"largest TPOT difference {worst:.1%}")


if __name__ == "__main__":
    main()
