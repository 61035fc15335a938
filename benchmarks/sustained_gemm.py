"""Does a GEMM run slower when the GPU is kept busy than when timed alone?

    python benchmarks/sustained_gemm.py [--shape 8192,28672,8192] [--dtype fp8] [--seconds 5]

The shipped kernel tables time each kernel alone, a few calls at a time. A serving engine
prefilling a burst of prompts keeps the GPU at full load for seconds, where the power
limit can pull the SM clock below the one the tables saw. docs/fidelity.md (Known gaps)
suspects this behind the silicon set's low TTFT at TP1/TP2; this script measures it on
the GPU at hand, to settle it with a kernel measurement rather than a fit:

1. "alone": the calibration package's Stopwatch (warm-up, then timed calls with an L2
   flush between them), as `simulate calibrate` times every point;
2. "sustained": the same GEMM back to back for --seconds, timed in windows of ~0.25 s;
   the last windows' per-call time is the steady state. nvidia-smi's SM clock and power
   are read at the start and end where available.

It prints both times, their ratio and the clocks; nothing is written. Defaults are
Llama-3.1-70B's gate/up GEMM at TP1 on an 8,192-token chunk. On a CPU it runs (small
shapes make sense there) but says nothing about GPUs.
"""

from __future__ import annotations

import argparse
import statistics
import time

from calibration.bench import (
    Stopwatch,
    _nvidia_smi,
    fp8_supported,
    gemm_fn,
    pick_device,
    require_torch,
)


def _clock_and_power() -> str:
    vals = _nvidia_smi("clocks.sm,clocks.max.sm,power.draw,power.limit")
    return "nvidia-smi unavailable" if vals is None else "SM {} of {} MHz, {} of {} W".format(*vals)


_calls: list[int] = []  # calls per window of the last sustained_us run, for --series


def sustained_us(fn, sync, seconds: float, window_s: float = 0.25) -> list[float]:
    """Per-call µs in consecutive windows of back-to-back calls over `seconds`."""
    out = []
    _calls.clear()
    end = time.perf_counter() + seconds
    calls = 1
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        dt = time.perf_counter() - t0
        out.append(dt / calls * 1e6)
        _calls.append(calls)
        calls = max(1, int(calls * window_s / max(dt, 1e-9)))  # aim each window at window_s
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="8192,28672,8192", help="M,N,K")
    parser.add_argument("--dtype", default="fp8", choices=["fp8", "bf16"])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--device", default=None)
    parser.add_argument("--series", action="store_true",
                        help="also print every window (seconds since the start, µs per call): how fast the clocks drop")
    parser.add_argument("--window", type=float, default=0.25, help="seconds per timing window")
    parser.add_argument("--rest", type=float, default=0.0, help="seconds idle before starting (cool down)")
    args = parser.parse_args()
    m, n, k = (int(x) for x in args.shape.split(","))
    torch = require_torch()
    dev = pick_device(torch, args.device)
    dtype = args.dtype if args.dtype != "fp8" or fp8_supported(torch, dev) else "bf16"
    fn = gemm_fn(torch, dev, m, n, k, dtype)
    watch = Stopwatch(torch, dev, warmup=5, repeats=25, flush_mb=256.0 if dev.type == "cuda" else 0.0)
    before = _clock_and_power()
    alone = statistics.median(watch.samples(fn))
    time.sleep(args.rest)
    windows = sustained_us(fn, watch.sync, args.seconds, args.window)
    after = _clock_and_power()
    steady = statistics.median(windows[-max(1, len(windows) // 4):])
    tflops = 2.0 * m * n * k / 1e6
    print(f"{dtype} GEMM M={m} N={n} K={k} on {dev}")
    print(f"alone      {alone:,.1f} µs/call  ({tflops / alone:,.4g} TFLOP/s)   [{before}]")
    print(f"sustained  {steady:,.1f} µs/call  ({tflops / steady:,.4g} TFLOP/s)   [{after}]")
    print(f"sustained / alone = {steady / alone:.3f} over {len(windows)} windows in {args.seconds:g} s")
    if args.series:
        t = 0.0
        for i, (us, calls) in enumerate(zip(windows, _calls, strict=True)):
            t += us * calls * 1e-6
            print(f"  window {i:3d}  t={t:6.3f} s  {us:9.1f} µs/call  ({us / alone:.3f} of alone)")


if __name__ == "__main__":
    main()
