"""Does a GEMM run slower when the GPU is kept busy than when timed alone?

    python benchmarks/sustained_gemm.py [--shape 8192,28672,8192] [--dtype fp8] [--seconds 5] [--series]
    python benchmarks/sustained_gemm.py --op layer [--tokens 8192] [--tp 1]   # each kernel of a prefill layer

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
is written.

`--op attention` and `--op layer` ask the same of what runs between a prefill's GEMMs:
causal prefill attention over `--tokens` alone, or one Llama-3.1-70B layer per GPU at
`--tp` (QKV, attention, O, gate/up, down) with each kernel timed by CUDA events at the
start and after `--seconds` of the layer back to back (calibration/sustained.py's
measure_sequence). The simulator slows prefill attention by what this measures
(GPUSpec.sustained_attention_fraction).
`--op decode-layer` times a decode step's layer the same way: the simulator assumes a
memory-bound step keeps its speed. `--idle-us` adds an idle kernel at each of a TP layer's
two all-reduces, so a TP prefill's duty cycle can be compared with the layer without it
(docs/fidelity.md, Known gaps: 8k TTFT grows too fast with TP).

Defaults are Llama-3.1-70B's gate/up GEMM at TP1 on an 8,192-token chunk. On a CPU it runs
(small shapes make sense there) but says nothing about GPUs.
"""

from __future__ import annotations

import argparse

from calibration.bench import clock_and_power, fp8_supported, pick_device, require_torch
from calibration.power import IDLE_LABEL, layer_parts
from calibration.sustained import measure_sequence, measure_sustained


def report_sequence(args, torch, dev, dtype: str) -> None:
    parts = layer_parts(torch, dev, args.op, args.tokens, args.tp, dtype, args.context, args.idle_us,
                        args.idle_copy_mb)
    run = measure_sequence(torch, dev, parts, seconds=args.seconds, rest_s=args.rest, window_s=args.window,
                           clocks=clock_and_power)
    what = (f"{args.tokens} sequences over {args.context} cached tokens" if args.op == "decode-layer"
            else f"{args.tokens} prompt tokens")
    print(f"{args.op}: Llama-3.1-70B at TP{args.tp}, {what}, {dtype} GEMMs, on {dev}")
    print(f"clocks before [{run.clocks_before}]  after [{run.clocks_after}]")
    for label, burst, steady, frac in zip(run.labels, run.burst_us, run.steady_us, run.fractions, strict=True):
        print(f"  {label:14s} burst {burst:10,.1f} µs  sustained {steady:10,.1f} µs  fraction {frac:.3f}")
    busy = [(b, s) for label, b, s in zip(run.labels, run.burst_us, run.steady_us, strict=True) if label != IDLE_LABEL]
    total_b, total_s = sum(b for b, _ in busy), sum(s for _, s in busy)
    if args.idle_us > 0:
        idle = sum(s for label, s in zip(run.labels, run.steady_us, strict=True) if label == IDLE_LABEL)
        print(f"  idle share of the sustained pass {idle / (idle + total_s):.2f} (the kernels below exclude it)")
    print(f"  {'whole pass':14s} burst {total_b:10,.1f} µs  sustained {total_s:10,.1f} µs  "
          f"fraction {min(1.0, total_b / total_s):.3f} over {len(run.windows)} windows in {args.seconds:g} s")
    if args.series:
        for i, (t, us) in enumerate(run.windows):
            print(f"  window {i:3d}  t={t:6.3f} s  {us:9.1f} µs/pass  ({us / total_b:.3f} of burst)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", default="gemm", choices=["gemm", "attention", "layer", "decode-layer"],
                        help="a GEMM (--shape), prefill attention alone, a whole prefill layer, or a decode step's layer")
    parser.add_argument("--shape", default="8192,28672,8192", help="M,N,K (--op gemm)")
    parser.add_argument("--tokens", type=int, default=8192,
                        help="prompt tokens (--op attention/layer) or sequences (--op decode-layer)")
    parser.add_argument("--context", type=int, default=2048, help="cached tokens per sequence (--op decode-layer)")
    parser.add_argument("--tp", type=int, default=1, choices=[1, 2, 4, 8], help="per-GPU share (--op attention/layer)")
    parser.add_argument("--dtype", default="fp8", choices=["fp8", "bf16"])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--device", default=None)
    parser.add_argument("--series", action="store_true",
                        help="also print every window (seconds since the start, µs per call): how fast the clocks drop")
    parser.add_argument("--idle-us", type=float, default=0.0,
                        help="--op layer: an idle kernel of this many µs at each of the layer's two all-reduces, "
                             "standing in for a TP prefill's NVLink waits (H200 TP8, 8,192 tokens: ~560): does the "
                             "duty cycle let the GEMMs keep a higher clock?")
    parser.add_argument("--idle-copy-mb", type=float, default=0.0,
                        help="with --idle-us: start each all-reduce's wait with a device-to-device copy moving this "
                             "many MB (read + written), standing in for a ring all-reduce's own HBM traffic "
                             "(~3 x 2(p-1)/p x the message: H200 TP8, 8,192 tokens: ~700)")
    parser.add_argument("--window", type=float, default=0.25, help="seconds per timing window")
    parser.add_argument("--rest", type=float, default=0.0, help="seconds idle before timing (cool down)")
    args = parser.parse_args()
    m, n, k = (int(x) for x in args.shape.split(","))
    torch = require_torch()
    dev = pick_device(torch, args.device)
    dtype = args.dtype if args.dtype != "fp8" or fp8_supported(torch, dev) else "bf16"
    if args.op != "gemm":
        report_sequence(args, torch, dev, dtype)
        return
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
