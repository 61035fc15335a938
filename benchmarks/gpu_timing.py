"""CUDA-event and CUDA-graph timing shared by the device benchmarks (moe_triton_mxfp4.py,
fa3_attention.py, gptoss_layer_sustained.py)."""

from __future__ import annotations

import time


def time_calls(fn, calls: int, on_gpu: bool = True) -> float:
    """Mean microseconds per call over `calls` back-to-back calls (CUDA events on a GPU)."""
    if on_gpu:
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3 / calls
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) * 1e6 / calls


def graph_median_us(fn, calls: int, repeats: int) -> float:
    """Median per-call microseconds of `calls` calls captured in one CUDA graph, replayed
    `repeats` times: no Python launch cost, as a decode step's graph runs them. Raises what
    the capture raises."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = sorted(time_calls(graph.replay, 1) / calls for _ in range(repeats))
    return times[len(times) // 2]
