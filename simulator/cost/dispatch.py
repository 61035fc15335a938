"""An eager engine's kernel dispatch, overlapped with the GPU kernel by kernel.

Without CUDA graphs the CPU issues every kernel from Python (tens of µs each) while the
GPU runs the kernels already queued. Kernel k cannot start before the CPU has issued it,
nor before kernel k-1 has finished, so the GPU finishes the iteration at

    max over k of (CPU time to issue kernels 1..k + GPU time of kernels k..n)

(Lindley's recursion for two stages in tandem). Long GEMMs let the CPU run ahead and
short kernels then drain its queue, so the iteration lasts between max(CPU, GPU) and
CPU + GPU, nearer the first when one side dominates. A fixed CPU cost added to each
kernel (CPU + GPU) over-counts GPU-bound steps and under-counts dispatch-bound ones; this
form fits vLLM 0.2's offline iteration times at TP 1-4 with one constant (docs/fidelity.md,
Known gaps).

An iteration's kernels are described by `Segment`s, each a run of identical kernels:
`head` before the first transformer layer, `layer` repeated `layers` times, `tail` after.
"""

from __future__ import annotations

from typing import NamedTuple


class Segment(NamedTuple):
    """`kernels` identical kernels (fractional where an op runs in only some layers), each
    taking `gpu_s` / `kernels` on the GPU and the dispatch cost on the CPU."""

    kernels: float
    gpu_s: float


def _scan(segments: list[Segment] | tuple[Segment, ...], issued: float, remaining: float,
          dispatch_s: float) -> tuple[float, float, float]:
    """(the latest finish over these segments' kernels, CPU time issued after them, GPU time
    remaining after them). `issued`: CPU time before the first; `remaining`: GPU time from
    the first kernel to the end of the iteration."""
    best = 0.0
    for kernels, gpu in segments:
        first = issued + min(kernels, 1.0) * dispatch_s + remaining  # the segment's first kernel
        if kernels > 1.0:  # a run of identical kernels peaks at its first or its last
            first += max(0.0, (kernels - 1.0) * (dispatch_s - gpu / kernels))
        if first > best:
            best = first
        issued += kernels * dispatch_s
        remaining -= gpu
    return best, issued, remaining


def dispatched_time(head: tuple[Segment, ...], layer: tuple[Segment, ...], layers: float,
                    tail: tuple[Segment, ...], dispatch_s: float) -> float:
    """When the GPU finishes an iteration whose CPU issues each kernel in `dispatch_s`."""
    layer_gpu = sum(s.gpu_s for s in layer)
    layer_cpu = sum(s.kernels for s in layer) * dispatch_s
    tail_gpu = sum(s.gpu_s for s in tail)
    total = sum(s.gpu_s for s in head) + layers * layer_gpu + tail_gpu
    best, issued, remaining = _scan(head, 0.0, total, dispatch_s)
    if layers and layer:
        # A kernel in layer j peaks j * (layer_cpu - layer_gpu) later than the same kernel in
        # layer 0: linear in j, so the first or the last layer holds the maximum.
        in_layer, _, _ = _scan(layer, issued, remaining, dispatch_s)
        shift = (layers - 1) * (layer_cpu - layer_gpu)
        best = max(best, in_layer + max(0.0, shift))
        issued += layers * layer_cpu
        remaining -= layers * layer_gpu
    in_tail, _, _ = _scan(tail, issued, remaining, dispatch_s)
    return max(best, in_tail)


def dispatch_stall(head: tuple[Segment, ...], layer: tuple[Segment, ...], layers: float,
                   tail: tuple[Segment, ...], dispatch_s: float, stages: int = 1) -> float:
    """How long the GPU idles waiting for the CPU over one iteration: `dispatched_time` less
    the kernels' own time. Pipeline stages are issued by their own workers, each once the
    micro-batch reaches it, so the stages' spans add up (the first holds `head`, the last
    `tail`, each `layers / stages` of the layers)."""
    gpu = sum(s.gpu_s for s in head) + layers * sum(s.gpu_s for s in layer) + sum(s.gpu_s for s in tail)
    if stages <= 1:
        return dispatched_time(head, layer, layers, tail, dispatch_s) - gpu
    per_stage = layers / stages
    span = (dispatched_time(head, layer, per_stage, (), dispatch_s)
            + (stages - 2) * dispatched_time((), layer, per_stage, (), dispatch_s)
            + dispatched_time((), layer, per_stage, tail, dispatch_s))
    return span - gpu
