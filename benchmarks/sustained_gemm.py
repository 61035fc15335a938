"""Does a GEMM run slower when the GPU is kept busy than when timed alone?

    python benchmarks/sustained_gemm.py [--shape 8192,28672,8192] [--dtype fp8] [--seconds 5] [--series]

The shipped kernel tables time each kernel alone, a few calls at a time. A serving engine
prefilling a burst of prompts keeps the GPU at full load for seconds, where the power
limit can pull the SM clock below the one the tables saw (docs/fidelity.md item 16).
This script measures it on the GPU at hand with calibration/sustained.py, the code
`simulate calibrate` runs for its profile's sustained fractions:

1. "alone": after `--rest` idle seconds, the calibration package's Stopwatch (warm-up,
   then timed calls with an L2 flush between them);
2. "sustained": the same GEMM back to back for --seconds, timed in windows of --window
   seconds; the last quarter of the windows' per-call time is the steady state.
   nvidia-smi's SM clock and power are read before and after where available.

It prints both times, their ratio, the clocks, and with --series every window; nothing
is written. Defaults are Llama-3.1-70B's gate/up GEMM at TP1 on an 8,192-token chunk. On a
CPU it runs (small shapes make sense there) but says nothing about GPUs.
"""

from __future__ import annotations

import argparse

from calibration.bench import clock_and_power, fp8_supported, pick_device, require_torch
from calibration.sustained import measure_sustained


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="8192,28672,8192", help="M,N,K")
    parser.add_argument("--dtype", default="fp8", choices=["fp8", "bf16"])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--device", default=None)
    parser.add_argument("--series", action="store_true",
                        help="also print every window (seconds since the start, µs per call): how fast the clocks drop")
    parser.add_argument("--window", type=float, default=0.25, help="seconds per timing window")
    parser.add_argument("--rest", type=float, default=0.0, help="seconds idle before timing (cool down)")
    args = parser.parse_args()
    m, n, k = (int(x) for x in args.shape.split(","))
    torch = require_torch()
    dev = pick_device(torch, args.device)
    dtype = args.dtype if args.dtype != "fp8" or fp8_supported(torch, dev) else "bf16"
    run = measure_sustained(torch, dev, (m, n, k), dtype, seconds=args.seconds, rest_s=args.rest,
                            window_s=args.window, clocks=clock_and_power)
    tflops = 2.0 * m * n * k / 1e6
    print(f"{dtype} GEMM M={m} N={n} K={k} on {dev}")
    print(f"alone      {run.alone_us:,.1f} µs/call  ({tflops / run.alone_us:,.4g} TFLOP/s)   [{run.clocks_before}]")
    print(f"burst      {run.burst_us:,.1f} µs/call  (the faster of alone and the first windows)")
    print(f"sustained  {run.steady_us:,.1f} µs/call  ({tflops / run.steady_us:,.4g} TFLOP/s)   [{run.clocks_after}]")
    print(f"sustained fraction = {run.fraction:.3f} over {len(run.windows)} windows in {args.seconds:g} s")
    if args.series:
        for i, (t, us) in enumerate(run.windows):
            print(f"  window {i:3d}  t={t:6.3f} s  {us:9.1f} µs/call  ({us / run.burst_us:.3f} of burst)")


if __name__ == "__main__":
    main()
