"""How much of its short-burst rate a GEMM keeps when the GPU runs it for seconds.

A kernel table times each shape for a fraction of a second, at boost clocks. A serving
engine's long prefill keeps the tensor cores busy for seconds, and the board's power limit
pulls the SM clock down within ~0.1-0.2 s (H100/H200 at 700 W: 1980 -> 1215-1455 MHz, in
BF16 as in FP8; docs/fidelity.md item 16). `simulate calibrate` measures that fraction
per dtype with `measure_sustained` and records it in the profile, whose timer then slows
the compute-bound part of long GEMMs by it (simulator/cost/sustained.py).
`benchmarks/sustained_gemm.py` prints the same measurement with its time series.

torch is imported by the caller (calibration.bench.require_torch) and passed in.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# Compute-bound shapes: Llama-3.1-70B's gate/up projection at TP1 on an 8k-token chunk,
# and a mid-size one (~0.25 ms in FP8 on Hopper) whose short calls show the drop clearest.
SHAPES = ((8192, 28672, 8192), (2048, 10240, 8192))


@dataclass
class SustainedRun:
    """One shape and dtype: the unthrottled and steady per-call times, µs."""

    shape: tuple[int, int, int]
    dtype: str
    alone_us: float  # single calls after an L2 flush, median (the Stopwatch's way)
    burst_us: float  # the faster of that and the first back-to-back windows: clocks still high
    steady_us: float  # median of the last quarter of the windows
    windows: list[tuple[float, float]] = field(default_factory=list)  # (seconds since start, µs per call)
    clocks_before: str = ""
    clocks_after: str = ""

    @property
    def fraction(self) -> float:
        """Steady rate over burst rate, at most 1."""
        return min(1.0, self.burst_us / self.steady_us)


def back_to_back(fn: Callable[[], object], sync: Callable[[], object], seconds: float,
                 window_s: float = 0.25) -> list[tuple[float, float]]:
    """(seconds since start, µs per call) for consecutive windows of back-to-back calls."""
    out: list[tuple[float, float]] = []
    start = time.perf_counter()
    end = start + seconds
    calls = 1
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        t1 = time.perf_counter()
        out.append((t1 - start, (t1 - t0) / calls * 1e6))
        calls = max(1, int(calls * window_s / max(t1 - t0, 1e-9)))  # aim each window at window_s
    return out


def measure_sustained(torch, device, shape: tuple[int, int, int], dtype: str, *, seconds: float = 6.0,
                      rest_s: float = 2.0, window_s: float = 0.05,
                      clocks: Callable[[], str] | None = None) -> SustainedRun:
    """Time one GEMM alone (after `rest_s` idle, so the clocks recover), then back to back."""
    from calibration.bench import Stopwatch, gemm_fn

    m, n, k = shape
    fn = gemm_fn(torch, device, m, n, k, dtype)
    watch = Stopwatch(torch, device, warmup=3, repeats=10, flush_mb=256.0 if device.type == "cuda" else 0.0)
    time.sleep(rest_s)
    before = clocks() if clocks else ""
    alone = statistics.median(watch.samples(fn))
    windows = back_to_back(fn, watch.sync, seconds, window_s)
    after = clocks() if clocks else ""
    times = [us for _, us in windows]
    early = min(times[1:3]) if len(times) > 2 else alone  # window 0 pays the first call's set-up
    steady = statistics.median(times[-max(1, len(times) // 4):])
    return SustainedRun(shape, dtype, alone, min(alone, early), steady, windows, before, after)


def sustained_fractions(runs: list[SustainedRun]) -> dict[str, float]:
    """Per dtype, the median fraction over its shapes, rounded to two places."""
    by_dtype: dict[str, list[float]] = {}
    for run in runs:
        by_dtype.setdefault(run.dtype, []).append(run.fraction)
    return {d: round(statistics.median(v), 2) for d, v in by_dtype.items()}


@dataclass
class SequenceRun:
    """Kernels run in a fixed order (one transformer layer, say), timed each on its own."""

    labels: list[str]
    burst_us: list[float]  # per kernel, right after an idle rest: clocks high
    steady_us: list[float]  # per kernel, after `seconds` of the sequence back to back
    windows: list[tuple[float, float]] = field(default_factory=list)  # (seconds since start, µs per pass)
    clocks_before: str = ""
    clocks_after: str = ""

    @property
    def fractions(self) -> list[float]:
        """Per kernel, steady rate over burst rate, at most 1."""
        return [min(1.0, b / s) for b, s in zip(self.burst_us, self.steady_us, strict=True)]


def split_pass(torch, fns: list[Callable[[], object]], sync: Callable[[], object], cuda: bool,
               passes: int = 3) -> list[float]:
    """Per-kernel µs inside back-to-back passes over `fns` (the median over `passes`).

    On a GPU, CUDA events between the kernels split one pass without stalling it, so each
    kernel is timed at the clock its neighbours left it; on a CPU each call is synced.
    """
    per: list[list[float]] = [[] for _ in fns]
    for _ in range(passes):
        if cuda:
            events = [torch.cuda.Event(enable_timing=True) for _ in range(len(fns) + 1)]
            events[0].record()
            for fn, end in zip(fns, events[1:], strict=True):
                fn()
                end.record()
            sync()
            for i in range(len(fns)):
                per[i].append(events[i].elapsed_time(events[i + 1]) * 1e3)
        else:
            for i, fn in enumerate(fns):
                t0 = time.perf_counter()
                fn()
                sync()
                per[i].append((time.perf_counter() - t0) * 1e6)
    return [statistics.median(p) for p in per]


def measure_sequence(torch, device, parts: list[tuple[str, Callable[[], object]]], *, seconds: float = 6.0,
                     rest_s: float = 2.0, window_s: float = 0.05,
                     clocks: Callable[[], str] | None = None) -> SequenceRun:
    """Each kernel's time in a sequence at boost clocks, then after `seconds` of it back to back.

    Answers whether the kernels between a long prefill's GEMMs (attention, say) slow down
    with them: the power limit lowers the clock of the whole chip, not of one kernel.
    """
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else torch.cpu.synchronize
    labels = [label for label, _ in parts]
    fns = [fn for _, fn in parts]

    def one_pass() -> None:
        for fn in fns:
            fn()

    one_pass()  # compile, allocate, pick algorithms
    sync()
    time.sleep(rest_s)
    before = clocks() if clocks else ""
    back_to_back(one_pass, sync, 0.03, 0.01)  # out of the idle power state, well before the limit bites
    burst = split_pass(torch, fns, sync, cuda)
    # The clocks oscillate about their steady value at the power limit, so the steady split
    # is the median over passes spread across the last third of the run, not a few at its end.
    tail_s = seconds / 3
    windows = back_to_back(one_pass, sync, seconds - tail_s, window_s)
    per: list[list[float]] = [[] for _ in fns]
    end = time.perf_counter() + tail_s
    while time.perf_counter() < end:
        for i, us in enumerate(split_pass(torch, fns, sync, cuda, passes=1)):
            per[i].append(us)
    steady = [statistics.median(p) for p in per]
    after = clocks() if clocks else ""
    return SequenceRun(labels, burst, steady, windows, before, after)
