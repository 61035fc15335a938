"""What the power limit does to a whole prefill layer, measured on the GPU at hand.

Two numbers the calibrated back end needs beyond the GEMMs' own sustained rate
(calibration/sustained.py), both from one Llama-3.1-70B-shaped prefill layer run back to
back (docs/fidelity.md items 16 and 30):

- **prefill attention's sustained fraction.** Attention slows with the clock more than
  the GEMMs around it, so it gets its own fraction (`sustained_attention_fraction`).
- **the power a collective's wait draws** (`collective_wait_power_fraction`, q). A TP
  prefill waits on NVLink at each all-reduce; while it waits the tensor cores idle, the
  board draws less, and the clock rises for the rest of the pass by
  r = (1 - q s) / (1 - s) for a wait share s (simulator/cost/sustained.py's
  `power_relief`). One GPU cannot run a real all-reduce, so a device copy moving a TP2
  ring all-reduce's HBM traffic, then a spin kernel, stands in for the wait, and q is
  fitted to how much faster the big kernels run with it than without.

`simulate calibrate` runs `measure_layer_power` after its sustained-rate runs;
`benchmarks/sustained_gemm.py --op layer` prints the same layers kernel by kernel, and
`benchmarks/duty_cycle_fit.py` fits q over several TPs' logs with `fit_wait_power`.
torch is passed in by the caller.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

from calibration.sustained import SequenceRun, measure_sequence
from simulator.cost.sustained import power_relief


@dataclass(frozen=True)
class LayerDims:
    """A dense decoder layer's sizes (defaults: Llama-3.1-70B)."""

    hidden: int = 8192
    heads: int = 64
    kv_heads: int = 8
    head_dim: int = 128
    mlp: int = 28672


LLAMA_70B = LayerDims()
IDLE_LABEL = "idle (all-reduce)"
# The kernels long enough to throttle, whose change with and without a wait fits q.
BIG_KERNELS = ("gate_up GEMM", "down GEMM", "attention")
# The wait's share of the pass: large enough to relieve measurably, small enough that the
# relieved fractions stay below 1 (a capped kernel only bounds q). On a 700 W Hopper
# (fractions 0.84-0.88) 0.15 lifts them ~7%.
WAIT_SHARE = 0.15
# Under this, a kernel counts as throttled (and over the relieved one as capped).
THROTTLED_BELOW, CAPPED_FROM = 0.98, 0.995


def idle_fn(torch, dev, idle_us: float, copy_mb: float = 0.0):
    """A kernel that keeps one thread spinning for ~`idle_us` (sized by timing one spin at
    the current clock); a sleep on a CPU.

    With `copy_mb`, the wait starts with a device-to-device copy that reads and writes that
    many MB together: a ring all-reduce is not idle, its kernels stream the message through HBM
    several times over (each step writes what arrives, reads it and the local chunk, and
    writes the sum) on a few SMs, so the copy brings that traffic's power into the wait.
    The spin fills the rest of `idle_us`.
    """
    from calibration.bench import Stopwatch

    copy = None
    if copy_mb > 0:
        n = int(copy_mb * 1e6) // 4  # bf16 elements, each read and written
        src, dst = (torch.empty(n, dtype=torch.bfloat16, device=dev) for _ in range(2))
        copy = partial(dst.copy_, src)
    if dev.type != "cuda":
        def wait() -> None:
            if copy is not None:
                copy()
            time.sleep(idle_us * 1e-6)
        return wait
    copy_us = 0.0
    if copy is not None:
        copy_us = statistics.median(Stopwatch(torch, dev, warmup=1, repeats=20, flush_mb=0).samples(copy))
    probe = 1_000_000
    torch.cuda._sleep(probe)  # the first kernel pays the context's start-up: time the second
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(probe)
    end.record()
    torch.cuda.synchronize()
    cycles = int(max(0.0, idle_us - copy_us) * probe / (start.elapsed_time(end) * 1e3))
    if copy is None:
        return lambda: torch.cuda._sleep(cycles)

    def copy_then_spin() -> None:
        copy()
        torch.cuda._sleep(cycles)
    return copy_then_spin


def layer_parts(torch, dev, op: str, tokens: int, tp: int, dtype: str, context: int,
                idle_us: float = 0.0, idle_copy_mb: float = 0.0, dims: LayerDims = LLAMA_70B) -> list:
    """(label, callable) for one layer's kernels on one of `tp` GPUs.

    `op` "layer": a prefill of `tokens` prompt tokens; "decode-layer": one decode step of
    `tokens` sequences over `context` cached tokens each; "attention": prefill attention
    alone. With `idle_us`, an idle kernel of that length at each of the layer's two
    all-reduces (`idle_copy_mb` of it an HBM copy).
    """
    from calibration.bench import decode_fn, gemm_fn, prefill_fn

    heads, kv_heads = dims.heads // tp, max(1, dims.kv_heads // tp)
    if op == "decode-layer":
        attention = ("attention", decode_fn(torch, dev, tokens, context, heads, kv_heads, dims.head_dim)[0])
    else:
        attention = ("attention", prefill_fn(torch, dev, 1, tokens, 0, heads, kv_heads, dims.head_dim)[0])
    if op == "attention":
        return [attention]
    qkv = (heads + 2 * kv_heads) * dims.head_dim
    gemms = {"qkv": (tokens, qkv, dims.hidden), "o": (tokens, dims.hidden, heads * dims.head_dim),
             "gate_up": (tokens, 2 * dims.mlp // tp, dims.hidden), "down": (tokens, dims.hidden, dims.mlp // tp)}
    make = {name: (f"{name} GEMM", gemm_fn(torch, dev, *shape, dtype)) for name, shape in gemms.items()}
    if idle_us <= 0:
        return [make["qkv"], attention, make["o"], make["gate_up"], make["down"]]
    # Where a TP layer all-reduces (after O and after down), the GPU waits on NVLink with its
    # tensor cores idle: a spinning one-thread kernel stands in, so the power the GEMMs draw
    # is averaged over the idle share as in a TP prefill.
    idle = (IDLE_LABEL, idle_fn(torch, dev, idle_us, idle_copy_mb))
    return [make["qkv"], attention, make["o"], idle, make["gate_up"], make["down"], idle]


def wait_share(run: SequenceRun) -> float:
    """The idle kernels' share of the steady pass."""
    idle = sum(s for label, s in zip(run.labels, run.steady_us, strict=True) if label == IDLE_LABEL)
    total = sum(run.steady_us)
    return idle / total if total > 0 else 0.0


@dataclass(frozen=True)
class KernelPair:
    """One kernel's sustained fraction without a wait (f0) and with one of `share` (f)."""

    kernel: str
    share: float
    f0: float
    f: float

    @property
    def throttled(self) -> bool:
        return 0.0 < self.share < 1.0 and self.f0 < THROTTLED_BELOW

    @property
    def capped(self) -> bool:
        """Relieved up to its burst speed: it bounds q rather than measures it."""
        return self.f >= CAPPED_FROM


def kernel_pairs(base: SequenceRun, waited: SequenceRun, kernels: Iterable[str] = BIG_KERNELS,
                 alone: dict[str, float] | None = None) -> list[KernelPair]:
    """Pair each kernel's fractions; both against the fastest of the two runs' bursts and its
    lone calls' time (`alone`, µs): a burst read while the clocks ramp, or while the power
    limiter still averages the load before the rest, reads slow (on an H100 after 2 s rests
    attention's burst read 2,000-2,200 µs where lone calls and 8 s rests read ~1,760)."""
    share = wait_share(waited)
    alone = alone or {}
    out = []
    for k in kernels:
        if k not in base.labels or k not in waited.labels:
            continue
        i, j = base.labels.index(k), waited.labels.index(k)
        burst = min(base.burst_us[i], waited.burst_us[j], alone.get(k, math.inf))
        out.append(KernelPair(k, share, min(1.0, burst / base.steady_us[i]), min(1.0, burst / waited.steady_us[j])))
    return out


def fit_wait_power(pairs: Iterable[KernelPair]) -> tuple[float, float] | None:
    """q in [0, 1) minimising the squared log error of min(1, f0 r(s, q)) against f over the
    throttled pairs, and that error's RMS. None unless one of them stays below the cap: with
    every kernel relieved to its burst speed, any q under a bound fits."""
    ps = [p for p in pairs if p.throttled]
    if not any(not p.capped for p in ps):
        return None

    def loss(q: float) -> float:
        return sum(math.log(min(1.0, p.f0 * power_relief(p.share, q)) / p.f) ** 2 for p in ps)
    best_loss, best_q = min((loss(i / 1000), i / 1000) for i in range(0, 1000))
    return best_q, math.sqrt(best_loss / len(ps))


@dataclass
class LayerPower:
    """The layer runs' findings; a None says why in `missing` (family -> reason)."""

    attention_fraction: float | None
    wait_power: float | None
    note: str
    missing: dict[str, str]
    base: SequenceRun  # the layer without waits
    waited: SequenceRun  # and with them
    alone: dict[str, float]  # the big kernels' lone-call times, µs


def measure_layer_power(torch, dev, dtype: str, *, seconds: float = 6.0, rest_s: float = 2.0,
                        tokens: int = 8192, dims: LayerDims = LLAMA_70B, share: float = WAIT_SHARE,
                        window_s: float = 0.05, clocks: Callable[[], str] | None = None) -> LayerPower:
    """Time the TP1 prefill layer's big kernels in lone calls (the tables' way), run the layer
    back to back without waits, then with a wait at each of its two all-reduce points sized to
    `share` of the pass; fit q to the change."""
    from calibration.bench import Stopwatch

    plain = layer_parts(torch, dev, "layer", tokens, 1, dtype, 0, dims=dims)
    watch = Stopwatch(torch, dev, warmup=3, repeats=10, flush_mb=256.0 if dev.type == "cuda" else 0.0)
    time.sleep(rest_s)
    alone = {label: statistics.median(watch.samples(fn)) for label, fn in plain if label in BIG_KERNELS}
    base = measure_sequence(torch, dev, plain, seconds=seconds, rest_s=rest_s, window_s=window_s, clocks=clocks)
    # Each of the two waits: share / (1 - share) of the steady busy pass, halved; it opens
    # with a TP2 ring all-reduce's HBM traffic for the layer's output (3 x the message).
    idle_us = share / (1.0 - share) * sum(base.steady_us) / 2
    copy_mb = 3 * tokens * dims.hidden * 2 / 1e6
    parts = layer_parts(torch, dev, "layer", tokens, 1, dtype, 0, idle_us, copy_mb, dims=dims)
    waited = measure_sequence(torch, dev, parts, seconds=seconds, rest_s=rest_s, window_s=window_s, clocks=clocks)
    what = f"Llama-3.1-70B-shaped {dtype} prefill layer of {tokens} tokens, {seconds:g} s back to back"
    return layer_power(base, waited, alone, what)


def layer_power(base: SequenceRun, waited: SequenceRun, alone: dict[str, float],
                what: str = "logged layer runs") -> LayerPower:
    """The findings of a layer run without and with waits (`what` heads the note): attention's
    fraction, and q where the pairs measure it, else why not."""
    pairs = kernel_pairs(base, waited, alone=alone)
    attention = next(p.f0 for p in pairs if p.kernel == "attention")
    fit = fit_wait_power(pairs)
    missing: dict[str, str] = {}
    if fit is None:
        missing["collective wait power"] = (
            "the waits relieved every throttled kernel up to its burst speed: q is only bounded"
            if any(p.throttled for p in pairs) else "the layer kept its burst speed under load: no power limit to relieve")
    said = ", ".join(f"{p.kernel} {p.f0:.3f} -> {p.f:.3f}" for p in pairs)
    note = (f"layer power: {what}: attention fraction {attention:.3f} [{base.clocks_after or 'clocks not read'}]; "
            f"with a copy+spin wait of {wait_share(waited):.2f} of the pass: {said}"
            + (f"; q = {fit[0]:.2f} (RMS log error {fit[1]:.3f}) [{waited.clocks_after or 'clocks not read'}]"
               if fit else ""))
    # Two places, as the catalog's; a q at the grid's top stays below 1 (the waits draw less
    # than the limit, or the GPU could not run faster while waiting).
    return LayerPower(round(attention, 2), min(round(fit[0], 2), 0.99) if fit else None, note, missing,
                      base, waited, alone)
