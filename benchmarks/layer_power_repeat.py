"""How repeatable is `simulate calibrate`'s layer-power step (calibration/power.py)?

    python benchmarks/layer_power_repeat.py [--runs 3] [--rest 2] [--seconds 6] [--tokens 8192]

Runs measure_layer_power `--runs` times back to back on the GPU at hand and prints, per
run, the big kernels' lone-call times, each kernel's burst and steady time without and
with the all-reduce waits, the
clocks before and after each layer run, and the fitted attention fraction and wait power.
Nothing is written. `refit(LOG)` recomputes each logged run's fractions and q from the
kernel times it printed (tests/test_power_relief.py checks the H100 catalog entry so).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calibration.bench import clock_and_power, fp8_supported, pick_device, require_torch
from calibration.power import LayerPower, layer_power, measure_layer_power
from calibration.sustained import SequenceRun

RUN = re.compile(r"^run \d+: attention ([\d.]+), q ([\d.]+|None)")
ALONE = re.compile(r"^  lone calls: (.*)$")
PART = re.compile(r"^  (no wait|waits): ")
KERNEL = re.compile(r"^    (.+?)\s+burst\s+([\d,.]+) µs\s+steady\s+([\d,.]+) µs")


def _us(text: str) -> float:
    return float(text.replace(",", ""))


def refit(path: Path) -> list[tuple[LayerPower, float | None]]:
    """Per logged run: its findings recomputed from the printed times, and the q it printed."""
    runs: list[dict] = []
    for line in path.read_text().splitlines():
        if m := RUN.match(line):
            runs.append({"printed": None if m.group(2) == "None" else float(m.group(2)), "alone": {}, "parts": {}})
        elif runs and (m := ALONE.match(line)):
            for item in m.group(1).split(", "):
                label, us, _ = item.rsplit(" ", 2)
                runs[-1]["alone"][label] = _us(us)
        elif runs and (m := PART.match(line)):
            part = runs[-1]["parts"].setdefault(m.group(1), SequenceRun([], [], []))
        elif runs and (m := KERNEL.match(line)):
            part.labels.append(m.group(1))
            part.burst_us.append(_us(m.group(2)))
            part.steady_us.append(_us(m.group(3)))
    return [(layer_power(run["parts"]["no wait"], run["parts"]["waits"], run["alone"]), run["printed"])
            for run in runs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rest", type=float, default=2.0, help="idle seconds before each layer run")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    torch = require_torch()
    dev = pick_device(torch, args.device)
    dtype = "fp8" if fp8_supported(torch, dev) else "bf16"
    for i in range(args.runs):
        found = measure_layer_power(torch, dev, dtype, seconds=args.seconds, rest_s=args.rest, tokens=args.tokens,
                                    clocks=clock_and_power)
        print(f"run {i + 1}: attention {found.attention_fraction}, q {found.wait_power} {found.missing or ''}")
        print("  lone calls: " + ", ".join(f"{k} {us:,.1f} µs" for k, us in found.alone.items()))
        for name, run in (("no wait", found.base), ("waits", found.waited)):
            print(f"  {name}: clocks before [{run.clocks_before}] after [{run.clocks_after}]")
            for label, b, s, f in zip(run.labels, run.burst_us, run.steady_us, run.fractions, strict=True):
                print(f"    {label:18s} burst {b:9,.1f} µs  steady {s:9,.1f} µs  fraction {f:.3f}")


if __name__ == "__main__":
    main()
