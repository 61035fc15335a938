"""The calibration Stopwatch's choice of timing path, on a fake CUDA runtime.

The graph path (short kernels timed back to back over operand copies that overflow L2)
only runs on a GPU; these tests drive its control flow with a stand-in for torch whose
"kernels" advance a simulated GPU clock, so what it measures is known exactly.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from calibration.bench import Stopwatch, decode_bytes, gemm_bytes, prefill_bytes


class FakeCuda:
    """A GPU clock: each kernel call advances it; events read it when 'recorded'."""

    def __init__(self, kernel_us: float, launch_gap_us: float, capture_ok: bool = True):
        self.now_us = 0.0
        self.kernel_us = kernel_us
        self.gap_us = launch_gap_us  # what a single, eagerly launched call adds
        self.capture_ok = capture_ok
        self.capturing: list | None = None
        fake = self

        class Event:
            def __init__(self, enable_timing=True):
                self.t = None

            def record(self):
                self.t = fake.now_us

            def elapsed_time(self, other):  # ms, like torch
                return (other.t - self.t) / 1e3

        class CUDAGraph:
            def __init__(self):
                self.calls: list = []

            def replay(self):
                for f in self.calls:
                    f(graphed=True)

        @contextlib.contextmanager
        def graph(g):
            if not fake.capture_ok:
                raise RuntimeError("operation not permitted when stream is capturing")
            fake.capturing = g.calls
            try:
                yield
            finally:
                fake.capturing = None

        self.Event, self.CUDAGraph, self.graph = Event, CUDAGraph, graph
        self.synchronize = lambda: None
        self.Stream = lambda: SimpleNamespace(wait_stream=lambda s: None)
        self.current_stream = lambda: SimpleNamespace(wait_stream=lambda s: None)
        self.stream = lambda s: contextlib.nullcontext()
        self.get_device_properties = lambda i: SimpleNamespace(L2_cache_size=50 * 2**20)

    def kernel(self, tag: str, log: list):
        def call(graphed: bool = False):
            if self.capturing is not None and not graphed:
                self.capturing.append(call)
                return
            log.append(tag)
            self.now_us += self.kernel_us + (0.0 if graphed else self.gap_us)
        return call


def _fake_torch(cuda: FakeCuda):
    return SimpleNamespace(cuda=cuda, empty=lambda *a, **k: SimpleNamespace(zero_=lambda: None),
                           uint8=None)


def _watch(cuda: FakeCuda, graph_below_us: float = 300.0) -> Stopwatch:
    dev = SimpleNamespace(type="cuda", index=0)
    return Stopwatch(_fake_torch(cuda), dev, warmup=2, repeats=12, flush_mb=1.0, graph_below_us=graph_below_us)


def test_short_kernels_are_timed_back_to_back_over_copies_that_overflow_l2():
    cuda = FakeCuda(kernel_us=5.0, launch_gap_us=4.0)
    log: list = []
    made = []

    def make():
        made.append(1)
        return cuda.kernel(f"copy{len(made)}", log)

    watch = _watch(cuda)
    out = watch.samples(cuda.kernel("copy0", log), make, footprint_bytes=2 * 2**20)
    copies = watch.copies_for(2 * 2**20)
    assert copies == 75  # 3 x 50 MiB of L2 over 2 MiB a call
    assert len(made) == copies - 1
    assert out == pytest.approx([5.0] * 10)  # the launch gap of a lone call is gone
    assert watch.graphed == 1
    # Every copy ran in each replay, in turn.
    assert {f"copy{i}" for i in range(copies)} <= set(log[-copies:])


def test_long_kernels_keep_the_single_call_after_a_flush():
    cuda = FakeCuda(kernel_us=500.0, launch_gap_us=4.0)
    log: list = []
    watch = _watch(cuda)
    out = watch.samples(cuda.kernel("k", log), lambda: cuda.kernel("other", log), 1e9)
    assert out == pytest.approx([504.0] * 12)
    assert watch.graphed == 0 and "other" not in log


def test_a_refused_capture_falls_back_and_is_recorded():
    cuda = FakeCuda(kernel_us=5.0, launch_gap_us=4.0, capture_ok=False)
    log: list = []
    watch = _watch(cuda)
    out = watch.samples(cuda.kernel("k", log), lambda: cuda.kernel("k", log), 1e6)
    assert out == pytest.approx([9.0] * 12)
    assert watch.graphed == 0 and "RuntimeError" in watch.graph_failures


def test_graph_path_off_and_without_a_builder():
    cuda = FakeCuda(kernel_us=5.0, launch_gap_us=4.0)
    log: list = []
    assert _watch(cuda, graph_below_us=0.0).samples(cuda.kernel("k", log), lambda: cuda.kernel("k", log)) \
        == pytest.approx([9.0] * 12)
    assert _watch(cuda).samples(cuda.kernel("k", log)) == pytest.approx([9.0] * 12)


def test_copies_are_bounded():
    watch = _watch(FakeCuda(1.0, 0.0))
    assert watch.copies_for(1.0) == watch.max_copies
    assert watch.copies_for(10 * 2**30) == 1


def test_footprints_count_operands_and_outputs():
    assert gemm_bytes(1, 4096, 4096, "bf16") == 2 * (4096 * 4096 + 4096) + 2 * 4096
    assert gemm_bytes(16, 4096, 4096, "fp8") == 4096 * 4096 + 16 * 4096 + 2 * 16 * 4096
    # decode: q and output per head, K and V over the context per KV head
    assert decode_bytes(2, 1000, 8, 1, 128) == 2 * 2 * 128 * (2 * 8 + 2 * 1000)
    assert prefill_bytes(1, 512, 0, 8, 1, 128) == 2 * 128 * (2 * 8 * 512 + 2 * 512)


def test_sustained_runs_are_recorded_per_dtype_and_skipped_past_the_budget(monkeypatch):
    import time as _time

    import calibration.bench as bench
    from calibration.sustained import SustainedRun

    steady = {"bf16": 11.8, "fp8": 12.0}
    monkeypatch.setattr(bench, "measure_sustained", lambda torch, dev, shape, dtype, **kw:
                        SustainedRun(shape, dtype, 10.0, 10.0, steady[dtype], clocks_after="SM 1320 MHz"))
    dev = SimpleNamespace(type="cuda", index=0)
    plan = [((8, 8, 8), "bf16"), ((16, 16, 16), "bf16"), ((8, 8, 8), "fp8")]
    missing: dict = {}
    fractions, note = bench._measure_sustained(None, dev, plan, 1.0, _time.perf_counter() + 1e6, missing,
                                               None, 0, 1)
    assert fractions == {"bf16": 0.85, "fp8": 0.83} and missing == {}
    assert note.startswith("sustained: bf16 8x8x8 10.0 -> 11.8 µs/call (0.847; SM 1320 MHz)")
    fractions, _ = bench._measure_sustained(None, dev, plan, 1.0, _time.perf_counter(), missing, None, 0, 1)
    assert fractions == {} and set(missing) == {"sustained bf16", "sustained fp8"}
    cpu: dict = {}
    assert bench._measure_sustained(None, SimpleNamespace(type="cpu"), [], 1.0, 0.0, cpu, None, 0, 1) == ({}, "")
    assert "not a GPU run" in cpu["sustained"]
