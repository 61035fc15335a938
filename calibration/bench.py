"""Kernel microbenchmarks with torch: one code path for CUDA and CPU.

Each grid point is warmed up, then timed `repeats` times: with CUDA events around the
kernel (the L2 cache flushed by writing a 256 MB buffer before every sample, so weights
come from HBM as they do in serving), or with time.perf_counter on CPU, where torch ops
are synchronous. The median, p10 and p90 of the samples are kept.

torch is imported inside the functions, never at module import: the CLI must load (and
say "install torch") on machines without it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import socket
import subprocess
import time
from collections.abc import Callable
from functools import partial

import numpy as np

from calibration.grid import BenchPlan
from calibration.power import LayerPower, measure_layer_power
from calibration.profile import (
    CalibrationError,
    MethodInfo,
    Profile,
    ProfileMetadata,
    make_table,
    round_sig,
)
from calibration.sustained import SHAPES as SUSTAINED_SHAPES
from calibration.sustained import measure_sustained, sustained_fractions

# Kernels faster than this are timed back to back in a CUDA graph (Stopwatch); slower ones
# one call at a time after an L2 flush, where a few µs of launch and drain do not matter.
GRAPH_BELOW_US = 300.0
# Idle seconds before each sustained-rate run, so the clocks recover from the one before.
SUSTAINED_REST_S = 2.0
# The layer-power runs: one prefill layer without and one with all-reduce waits.
LAYER_POWER_RUNS = 2
# Set-up and lone calls around each sustained-rate or layer-power run, on top of its seconds
# and rest, when the budget sets their time aside.
SUSTAINED_RUN_EXTRA_S = 2.0
TORCH_MISSING = "calibration needs torch, which is not installed"
_TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def require_torch():
    """torch, or a ServesimError that says how to install it."""
    try:
        import torch
    except ImportError:
        raise CalibrationError(TORCH_MISSING, where="simulate calibrate",
                               fix="pip install torch (>= 2.1; a CPU build works for a development profile), "
                                   "or in a servesim checkout pip install -e '.[calibrate]'") from None
    except Exception as exc:  # installed but broken: a CUDA wheel without its libraries, an ABI clash
        raise CalibrationError(f"torch is installed but failed to load: {type(exc).__name__}: {exc}",
                               where="simulate calibrate",
                               fix="reinstall a torch build for this machine, e.g. pip install --force-reinstall "
                                   "torch (a CPU build works for a development profile)") from None
    return torch


def pick_device(torch, requested: str | None):
    """The torch device to measure: CUDA when present (or asked for), else CPU."""
    if requested in (None, "auto"):
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise CalibrationError("--device cuda was requested but torch sees no CUDA device",
                               where="--device", fix="use --device cpu, or install a CUDA build of torch")
    if requested not in ("cuda", "cpu"):
        raise CalibrationError(f"unknown device {requested!r}", where="--device", fix="use cuda or cpu")
    return torch.device(requested)


# -- environment -------------------------------------------------------------------------
def _nvidia_smi(fields: str, index: int = 0) -> list[str] | None:
    """Query nvidia-smi; None where it is absent or refuses (containers, non-NVIDIA)."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader", "-i", str(index)],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    line = out.strip().splitlines()
    return [v.strip() for v in line[0].split(",")] if line else None


def read_clocks(index: int = 0) -> dict[str, str]:
    vals = _nvidia_smi("clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem", index)
    if vals is None or len(vals) < 4:
        return {"note": "nvidia-smi unavailable; clocks not recorded"}
    return dict(zip(("sm", "mem", "max_sm", "max_mem"), vals, strict=False))


def lock_clocks(mhz: int, index: int = 0) -> str:
    """Pin the SM clock (needs root); returns what happened, for the metadata."""
    try:
        subprocess.run(["nvidia-smi", "-i", str(index), f"--lock-gpu-clocks={mhz},{mhz}"],
                       capture_output=True, text=True, timeout=20, check=True)
        return f"locked at {mhz} MHz"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"lock to {mhz} MHz refused ({type(exc).__name__}); clocks as found"


def unlock_clocks(index: int = 0) -> None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["nvidia-smi", "-i", str(index), "--reset-gpu-clocks"],
                       capture_output=True, text=True, timeout=20, check=False)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _version(module: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return None


def describe_device(torch, device) -> dict:
    """Metadata fields for the device being measured."""
    from simulator.errors import CatalogError
    from simulator.hardware import get_gpu

    info: dict = {"torch": torch.__version__, "host": socket.gethostname()}
    if device.type == "cuda":
        idx = device.index or 0
        props = torch.cuda.get_device_properties(idx)
        name = torch.cuda.get_device_name(idx)
        try:
            gpu = get_gpu(name).name
        except CatalogError:
            gpu = None
        drv = _nvidia_smi("driver_version", idx)
        nccl = None
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:
            pass
        info.update(gpu_name=name, gpu=gpu, device_kind="cuda", memory_gib=props.total_memory / 2**30,
                    compute_units=props.multi_processor_count, driver=drv[0] if drv else None,
                    cuda=torch.version.cuda, clocks=read_clocks(idx),
                    versions={k: v for k, v in {"torch": torch.__version__, "nccl": nccl,
                                                "flash-attn": _version("flash-attn"),
                                                "vllm": _version("vllm")}.items() if v})
    else:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else None
        info.update(gpu_name=_cpu_name(), gpu=None, device_kind="cpu",
                    memory_gib=mem / 2**30 if mem else None, compute_units=torch.get_num_threads(),
                    versions={"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability()},
                    clocks={"note": "CPU: clocks not recorded"})
    info["versions"] = {**info["versions"], **_own_versions()}
    return info


def _own_versions() -> dict[str, str]:
    """The software that took the measurement besides torch: this servesim and its Python."""
    import platform

    from simulator import __version__

    return {"servesim": __version__, "python": platform.python_version()}


# -- timing ------------------------------------------------------------------------------
class OverBudget(Exception):
    """A point whose samples would not finish before the run's deadline."""


class Stopwatch:
    """Samples one callable: CUDA events with an L2 flush, or perf_counter on CPU.

    Short CUDA kernels (under `graph_below_us`) are timed as a serving engine runs them
    instead: back to back in a captured CUDA graph, cycling over enough copies of their
    operands (from `make`) that those copies overflow the L2 cache, so every call reads
    HBM. A single event-timed call after a flush overstates a short kernel by a few µs:
    the flush leaves L2 full of dirty lines and the kernel's ramp-up and drain are not
    overlapped with a neighbour's, as they are in a decode step's graph.
    """

    def __init__(self, torch, device, *, warmup: int, repeats: int, flush_mb: float,
                 deadline: float | None = None, graph_below_us: float = 0.0,
                 rotate_l2_multiple: float = 3.0, max_copies: int = 128, graph_calls: int = 32):
        self.torch = torch
        self.deadline = deadline
        self.cuda = device.type == "cuda"
        self.warmup = warmup
        self.repeats = repeats
        self.flush = (torch.empty(int(flush_mb * 2**20), dtype=torch.uint8, device=device)
                      if self.cuda and flush_mb > 0 else None)
        self.sync = torch.cuda.synchronize if self.cuda else torch.cpu.synchronize
        self.graph_below_us = graph_below_us if self.cuda else 0.0
        self.l2_bytes = (getattr(torch.cuda.get_device_properties(device.index or 0), "L2_cache_size", 50 * 2**20)
                         if self.cuda else 0)
        self.rotate_l2_multiple = rotate_l2_multiple
        self.max_copies = max_copies
        self.graph_calls = graph_calls
        self.graphed = 0  # points timed in graphs, for the metadata
        self.graph_failures: dict[str, str] = {}

    def samples(self, fn: Callable[[], object], make: Callable[[], Callable[[], object]] | None = None,
                footprint_bytes: float = 0.0) -> list[float]:
        """Per-call times, µs; OverBudget if the first call says the rest cannot fit.

        `make` builds another instance of the kernel with its own operands and
        `footprint_bytes` is what one call reads from HBM; both are needed for the graph path.
        """
        t0 = time.perf_counter()
        fn()
        self.sync()
        first = time.perf_counter() - t0
        if self.deadline is not None and time.perf_counter() + first * (self.warmup + self.repeats) > self.deadline:
            raise OverBudget
        for _ in range(self.warmup - 1):
            fn()
        self.sync()
        if (self.cuda and make is not None and self.graph_below_us > 0
                and self._event_us(fn) < self.graph_below_us):
            try:
                out = self._graph_samples(fn, make, footprint_bytes)
                self.graphed += 1
                return out
            except Exception as exc:  # capture refused (or out of memory): fall back to single calls
                self.graph_failures.setdefault(type(exc).__name__, str(exc).splitlines()[0][:120])
                self.sync()
        if self.cuda:
            ev = self.torch.cuda.Event
            pairs = []
            for _ in range(self.repeats):
                if self.flush is not None:
                    self.flush.zero_()
                start, end = ev(enable_timing=True), ev(enable_timing=True)
                start.record()
                fn()
                end.record()
                pairs.append((start, end))
            self.sync()
            return [s.elapsed_time(e) * 1e3 for s, e in pairs]
        out = []
        for _ in range(self.repeats):
            t0 = time.perf_counter()
            fn()
            self.sync()
            out.append((time.perf_counter() - t0) * 1e6)
        return out

    def _event_us(self, fn: Callable[[], object]) -> float:
        """One call's GPU time, µs, without a flush: only to pick the timing path."""
        start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        self.sync()
        return start.elapsed_time(end) * 1e3

    def copies_for(self, footprint_bytes: float) -> int:
        """How many operand copies make one pass over them overflow L2 `rotate_l2_multiple` times."""
        want = self.rotate_l2_multiple * self.l2_bytes / max(footprint_bytes, 1.0)
        return int(max(1, min(self.max_copies, -(-want // 1))))

    def _graph_samples(self, fn, make, footprint_bytes: float) -> list[float]:
        torch = self.torch
        copies = self.copies_for(footprint_bytes)
        fns = [fn] + [make() for _ in range(copies - 1)]
        calls = copies * max(1, -(-self.graph_calls // copies))  # whole passes over the copies
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm each instance outside capture (workspaces, handles)
            for f in fns:
                f()
        torch.cuda.current_stream().wait_stream(side)
        self.sync()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(calls):
                fns[i % copies]()
        for _ in range(2):
            graph.replay()
        self.sync()
        ev = torch.cuda.Event
        pairs = []
        for _ in range(min(self.repeats, 10)):  # each sample already averages `calls` calls
            start, end = ev(enable_timing=True), ev(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            pairs.append((start, end))
        self.sync()
        out = [s.elapsed_time(e) * 1e3 / calls for s, e in pairs]
        del graph
        return out


def stats(samples: list[float]) -> list:
    a = np.asarray(samples)
    return [round_sig(float(np.median(a))), round_sig(float(np.percentile(a, 10))),
            round_sig(float(np.percentile(a, 90))), len(samples)]


# -- bytes one call reads and writes (what the graph path must overflow L2 with) ----------
def gemm_bytes(m: int, n: int, k: int, dtype: str) -> float:
    elem = 1 if dtype == "fp8" else 2
    return (n * k + m * k) * elem + m * n * 2


def prefill_bytes(b: int, q: int, ctx: int, h: int, kvh: int, d: int) -> float:
    return 2.0 * b * d * (2 * h * q + 2 * kvh * (ctx + q))


def decode_bytes(b: int, ctx: int, h: int, kvh: int, d: int) -> float:
    return 2.0 * b * d * (2 * h + 2 * kvh * ctx)


def _first(builder, *args):
    """The callable of a builder that also returns labels."""
    return builder(*args)[0]


# -- kernels -----------------------------------------------------------------------------
def _dtype(torch, name: str):
    return getattr(torch, _TORCH_DTYPES.get(name, "bfloat16"))


def fp8_shape_ok(n: int, k: int) -> bool:
    return n % 16 == 0 and k % 16 == 0


def fp8_supported(torch, device) -> bool:
    if device.type != "cuda" or not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return False
    return torch.cuda.get_device_capability(device) >= (8, 9)


def gemm_fn(torch, device, m: int, n: int, k: int, dtype: str) -> Callable:
    """y = x W^T as a serving engine's linear layer runs it."""
    if dtype == "fp8":
        mp = -(-m // 16) * 16  # torch._scaled_mm wants multiples of 16; small M pads as cuBLASLt does
        a = torch.randn(mp, k, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=device).to(torch.float8_e4m3fn)
        one = torch.ones((), device=device)
        return lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dt = _dtype(torch, dtype)
    x = torch.randn(m, k, device=device, dtype=dt)
    w = torch.randn(n, k, device=device, dtype=dt)
    return lambda: torch.nn.functional.linear(x, w)


def _sdpa(torch, q, k, v, *, causal_offset: int | None):
    """SDPA with GQA (enable_gqa, or expanded KV on older torch) and bottom-right causality."""
    F = torch.nn.functional
    kwargs: dict = {}
    if causal_offset == 0:
        kwargs["is_causal"] = True  # square: top-left and bottom-right masks coincide
    elif causal_offset is not None:
        from torch.nn.attention.bias import causal_lower_right

        kwargs["attn_mask"] = causal_lower_right(q.shape[-2], k.shape[-2])
    groups = q.shape[1] // k.shape[1]
    if groups > 1:
        try:
            F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kwargs)
            return lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kwargs), "sdpa(enable_gqa)"
        except (TypeError, RuntimeError):
            k = k.repeat_interleave(groups, dim=1)
            v = v.repeat_interleave(groups, dim=1)
    return lambda: F.scaled_dot_product_attention(q, k, v, **kwargs), "sdpa"


def prefill_fn(torch, device, b: int, q_len: int, ctx: int, h: int, kvh: int, d: int):
    dt = torch.bfloat16
    q = torch.randn(b, h, q_len, d, device=device, dtype=dt)
    k = torch.randn(b, kvh, ctx + q_len, d, device=device, dtype=dt)
    v = torch.randn_like(k)
    return _sdpa(torch, q, k, v, causal_offset=ctx)


def _flash_kvcache():
    """flash_attn_with_kvcache from vLLM's fork or flash-attn, with its name; None if neither."""
    for mod, label in (("vllm.vllm_flash_attn", "vllm_flash_attn"), ("flash_attn", "flash_attn")):
        try:
            module = __import__(mod, fromlist=["flash_attn_with_kvcache"])
            return module.flash_attn_with_kvcache, f"{label} {_version(label.replace('_', '-')) or ''}".strip()
        except (ImportError, AttributeError):
            continue
    return None


def decode_fn(torch, device, b: int, ctx: int, h: int, kvh: int, d: int):
    """One query token per sequence over `ctx` cached tokens: a paged kernel when importable."""
    dt = torch.bfloat16
    flash = _flash_kvcache() if device.type == "cuda" else None
    if flash is not None:
        fn, label = flash
        q = torch.randn(b, 1, h, d, device=device, dtype=dt)
        lens = torch.full((b,), ctx, dtype=torch.int32, device=device)
        block = 256  # flash-attn's paged KV needs pages divisible by 256; vLLM's fork accepts it too
        pages = -(-ctx // block)
        try:
            kc = torch.randn(b * pages, block, kvh, d, device=device, dtype=dt)
            vc = torch.randn_like(kc)
            table = torch.arange(b * pages, dtype=torch.int32, device=device).view(b, pages)
            fn(q, kc, vc, cache_seqlens=lens, block_table=table)
            return (lambda: fn(q, kc, vc, cache_seqlens=lens, block_table=table)), f"{label} (paged, block {block})"
        except Exception:
            try:
                kc = torch.randn(b, ctx, kvh, d, device=device, dtype=dt)
                vc = torch.randn_like(kc)
                fn(q, kc, vc, cache_seqlens=lens)
                return (lambda: fn(q, kc, vc, cache_seqlens=lens)), f"{label} (contiguous cache)"
            except Exception:
                pass
    q = torch.randn(b, h, 1, d, device=device, dtype=dt)
    k = torch.randn(b, kvh, ctx, d, device=device, dtype=dt)
    v = torch.randn_like(k)
    fn, label = _sdpa(torch, q, k, v, causal_offset=None)
    return fn, f"{label} on contiguous KV"


def elementwise_fn(torch, device, kind: str, rows: int, cols: int):
    """(callable, bytes moved, kind as recorded, implementation)."""
    dt = torch.bfloat16
    if kind == "copy":
        src = torch.randn(rows * cols, device=device, dtype=dt)
        dst = torch.empty_like(src)
        return (lambda: dst.copy_(src)), 2 * src.numel() * 2, "copy", "Tensor.copy_"
    vllm_ops = None
    if device.type == "cuda":
        try:
            from vllm import _custom_ops as vllm_ops  # fused kernels, as vLLM runs them
        except Exception:
            vllm_ops = None
    if kind == "rmsnorm":
        x = torch.randn(rows, cols, device=device, dtype=dt)
        w = torch.ones(cols, device=device, dtype=dt)
        nbytes = 2 * rows * cols * 2
        if vllm_ops is not None:
            out = torch.empty_like(x)
            return (lambda: vllm_ops.rms_norm(out, x, w, 1e-6)), nbytes, "rmsnorm", "vllm._custom_ops.rms_norm"
        if hasattr(torch.nn.functional, "rms_norm"):
            return (lambda: torch.nn.functional.rms_norm(x, (cols,), w, 1e-6)), nbytes, "rmsnorm_eager", \
                "torch.nn.functional.rms_norm"
        return (lambda: x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(dt) * w), nbytes, \
            "rmsnorm_eager", "torch eager ops"
    if kind == "silu_mul":
        x = torch.randn(rows, 2 * cols, device=device, dtype=dt)
        nbytes = 3 * rows * cols * 2
        if vllm_ops is not None and hasattr(torch.ops, "_C") and hasattr(torch.ops._C, "silu_and_mul"):
            out = torch.empty(rows, cols, device=device, dtype=dt)
            return (lambda: torch.ops._C.silu_and_mul(out, x)), nbytes, "silu_mul", "vllm silu_and_mul"
        F = torch.nn.functional
        return (lambda: F.silu(x[:, :cols]) * x[:, cols:]), nbytes, "silu_mul_eager", "torch eager silu * mul"
    raise ValueError(kind)


# -- collectives (one process per GPU) --------------------------------------------------------
def _collective_worker(rank: int, world: int, port: int, jobs: list, warmup: int, repeats: int, queue) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    out = []
    try:
        for fam, nbytes in jobs:
            if fam == "p2p" and rank > 1:
                dist.barrier()
                continue
            n = max(world, nbytes // 2)
            if fam == "allreduce":
                buf = torch.empty(n, dtype=torch.bfloat16, device="cuda")

                def fn(buf=buf):
                    dist.all_reduce(buf)
            elif fam == "allgather":
                part = torch.empty(n // world, dtype=torch.bfloat16, device="cuda")
                full = torch.empty(part.numel() * world, dtype=torch.bfloat16, device="cuda")

                def fn(part=part, full=full):
                    dist.all_gather_into_tensor(full, part)
            else:
                buf = torch.empty(n, dtype=torch.bfloat16, device="cuda")

                def fn(buf=buf):
                    if rank == 0:
                        dist.send(buf, 1)
                    else:
                        dist.recv(buf, 0)
            for _ in range(warmup):
                fn()
            torch.cuda.synchronize()
            dist.barrier()
            pairs = []
            for _ in range(repeats):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn()
                e.record()
                pairs.append((s, e))
            torch.cuda.synchronize()
            dist.barrier()
            if rank == 0:
                out.append((fam, n * 2, [a.elapsed_time(b) * 1e3 for a, b in pairs]))
    finally:
        if rank == 0:
            queue.put(out)
        dist.destroy_process_group()


def measure_collectives(torch, jobs: list[tuple[str, int]], *, warmup: int, repeats: int,
                        timeout_s: float) -> tuple[dict[str, list], str | None]:
    """NCCL all-reduce / all-gather / send-recv on 2, 4, 8 GPUs; (rows, why-not) otherwise."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count < 2:
        return {}, f"{count} GPU visible; collectives need >= 2"
    if not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
        return {}, "torch.distributed with NCCL is not available in this torch build"
    ctx = torch.multiprocessing.get_context("spawn")
    rows: dict[str, list] = {"allreduce": [], "allgather": [], "p2p": []}
    for world in (r for r in (2, 4, 8) if r <= count):
        mine = [j for j in jobs if j[0] != "p2p" or world == 2]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        queue = ctx.SimpleQueue()
        procs = [ctx.Process(target=_collective_worker, args=(r, world, port, mine, warmup, repeats, queue))
                 for r in range(world)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout_s
        for p in procs:
            p.join(max(1.0, deadline - time.monotonic()))
        hung = [p for p in procs if p.is_alive()]
        for p in hung:
            p.terminate()
        if hung or queue.empty():
            return rows, f"collective run on {world} GPUs did not finish within {timeout_s:.0f} s"
        for fam, nbytes, samples in queue.get():
            rows[fam].append([nbytes, 2 if fam == "p2p" else world, "intra", "nccl", "bf16", *stats(samples)])
    return rows, None


# -- the run -----------------------------------------------------------------------------------
def _interleave(groups: list[list]) -> list:
    """Round-robin across families so a budget cut leaves every family a coarse grid."""
    out, idx = [], [0] * len(groups)
    while any(i < len(g) for i, g in zip(idx, groups, strict=True)):
        for j, g in enumerate(groups):
            if idx[j] < len(g):
                out.append(g[idx[j]])
                idx[j] += 1
    return out


def _measure_sustained(torch, dev, plan: list, seconds: float, deadline: float, not_measured: dict,
                       progress, done: int, total: int) -> tuple[dict[str, float], str]:
    """The sustained fractions per dtype (calibration/sustained.py) and a note of the runs."""
    if not plan:
        if dev.type != "cuda":
            not_measured["sustained"] = "not a GPU run: no power limit to measure"
        return {}, ""
    runs = []
    for shape, dtype in plan:
        if time.perf_counter() + seconds + SUSTAINED_REST_S > deadline:
            not_measured["sustained " + dtype] = "the time budget ran out"
            continue
        if progress:
            progress(done, total, f"sustained {dtype} {shape}")
        try:
            runs.append(measure_sustained(torch, dev, shape, dtype, seconds=seconds, rest_s=SUSTAINED_REST_S,
                                          clocks=clock_and_power))
        except (RuntimeError, MemoryError) as exc:
            not_measured[f"sustained {dtype} {shape}"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    note = "sustained: " + "; ".join(
        f"{r.dtype} {'x'.join(map(str, r.shape))} {r.burst_us:.1f} -> {r.steady_us:.1f} µs/call "
        f"({r.fraction:.3f}; {r.clocks_after or 'clocks not read'})" for r in runs)
    return sustained_fractions(runs), note if runs else ""


def _measure_layer_power(torch, dev, dtype: str | None, seconds: float, deadline: float, not_measured: dict,
                         progress, done: int, total: int) -> LayerPower | None:
    """Prefill attention's sustained fraction and the collective wait's power (calibration/power.py)."""
    if dtype is None:
        return None
    if time.perf_counter() + LAYER_POWER_RUNS * (seconds + SUSTAINED_REST_S + SUSTAINED_RUN_EXTRA_S) > deadline:
        not_measured["layer power"] = "the time budget ran out"
        return None
    if progress:
        progress(done, total, f"layer power ({dtype} prefill layer, with and without all-reduce waits)")
    try:
        found = measure_layer_power(torch, dev, dtype, seconds=seconds, rest_s=SUSTAINED_REST_S,
                                    clocks=clock_and_power)
    except (RuntimeError, MemoryError) as exc:
        torch.cuda.empty_cache()
        not_measured["layer power"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
        return None
    not_measured.update(found.missing)
    return found


def clock_and_power() -> str:
    """SM clock and board power against their limits, for notes; nvidia-smi's absence said."""
    vals = _nvidia_smi("clocks.sm,clocks.max.sm,power.draw,power.limit")
    return "nvidia-smi unavailable" if vals is None else "SM {} of {}, {} of {}".format(*vals)


def _timing_note(watch: Stopwatch) -> str:
    if not watch.graph_below_us:
        return "times are per call: CUDA-event (or perf_counter) time around one kernel launch"
    note = (f"kernels under {watch.graph_below_us:g} µs: mean per call of a CUDA graph of back-to-back calls "
            f"cycling over operand copies that overflow L2 {watch.rotate_l2_multiple:g}x "
            f"({watch.graphed} points); longer ones: CUDA events around one call after an L2 flush")
    if watch.graph_failures:
        note += "; graph capture refused for some points, timed singly: " + "; ".join(
            f"{k}: {v}" for k, v in watch.graph_failures.items())
    return note


def run_benchmarks(plan: BenchPlan, *, device: str | None = None, budget_s: float = 600.0,
                   quick: bool = False, warmup: int | None = None, repeats: int | None = None,
                   flush_mb: float = 256.0, lock_clock_mhz: int | None = None,
                   cpu_threads: int | None = None, graph_below_us: float = GRAPH_BELOW_US,
                   sustained_s: float = 0.0,
                   progress: Callable[[int, int, str], None] | None = None) -> Profile:
    """Measure every grid point (until the budget runs out) and return an unfitted profile."""
    torch = require_torch()
    dev = pick_device(torch, device)
    if cpu_threads and dev.type == "cpu":
        torch.set_num_threads(cpu_threads)
    warmup = warmup if warmup is not None else (2 if quick else 5)
    repeats = max(10, repeats if repeats is not None else (10 if quick or dev.type == "cpu" else 25))
    torch.manual_seed(0)
    env = describe_device(torch, dev)
    clocks = dict(env.pop("clocks", {}))
    if lock_clock_mhz and dev.type == "cuda":
        clocks["lock"] = lock_clocks(lock_clock_mhz, dev.index or 0)
    start = time.perf_counter()
    # The sustained-rate runs (after the grid) get their time set aside from the budget.
    dtypes = ["bf16"] + (["fp8"] if fp8_supported(torch, dev) else [])
    under_load = dev.type == "cuda" and sustained_s > 0 and not quick
    sustained_plan = [(shape, dt) for dt in dtypes for shape in SUSTAINED_SHAPES] if under_load else []
    # The layer-power runs use the fastest tensor dtype, as a serving engine's prefill does.
    layer_dtype = dtypes[-1] if under_load else None
    runs = len(sustained_plan) + (LAYER_POWER_RUNS if under_load else 0)
    reserve = min(budget_s / 2, runs * (sustained_s + SUSTAINED_REST_S + SUSTAINED_RUN_EXTRA_S))
    grid_budget = budget_s - reserve
    watch = Stopwatch(torch, dev, warmup=warmup, repeats=repeats, flush_mb=flush_mb,
                      deadline=start + grid_budget, graph_below_us=graph_below_us)
    not_measured: dict[str, str] = {}
    gemm = [g for g in plan.gemm if g[3] in dtypes] + [(m, n, k, "fp8") for m, n, k, dt in plan.gemm
                                                       if dt == "bf16" and "fp8" in dtypes and fp8_shape_ok(n, k)]
    odd = sorted({(n, k) for _, n, k, dt in plan.gemm if dt == "bf16" and "fp8" in dtypes and not fp8_shape_ok(n, k)})
    if odd:
        not_measured["gemm.fp8 (N, K) " + ", ".join(map(str, odd))] = (
            "torch._scaled_mm needs N and K divisible by 16; such layers are timed by the FP8 roofline fit")
    tasks = _interleave([[("gemm", g) for g in gemm], [("attn_prefill", p) for p in plan.attn_prefill],
                         [("attn_decode", d) for d in plan.attn_decode],
                         [("elementwise", e) for e in plan.elementwise]])
    rows: dict[str, list] = {f: [] for f in ("gemm", "attn_prefill", "attn_decode", "elementwise")}
    backends: dict[str, set] = {"attn_prefill": set(), "attn_decode": set()}
    impls: dict[str, str] = {}
    if "fp8" not in dtypes:
        not_measured["gemm.fp8"] = f"{env['gpu_name']} has no FP8 tensor cores (or torch lacks _scaled_mm)"
    done = skipped = 0
    total = len(tasks) + (1 if plan.collectives else 0)
    try:
        for fam, spec in tasks:
            if time.perf_counter() - start > grid_budget:
                skipped += 1
                continue
            if progress:
                progress(done, total, f"{fam} {spec}")
            try:
                if fam == "gemm":
                    m, n, k, dt = spec
                    make = partial(gemm_fn, torch, dev, m, n, k, dt)
                    rows[fam].append([m, n, k, dt, *stats(watch.samples(make(), make, gemm_bytes(m, n, k, dt)))])
                elif fam == "attn_prefill":
                    fn, label = prefill_fn(torch, dev, *spec)
                    backends[fam].add(label)
                    make = partial(_first, prefill_fn, torch, dev, *spec)
                    rows[fam].append([*spec, "bf16", *stats(watch.samples(fn, make, prefill_bytes(*spec)))])
                elif fam == "attn_decode":
                    fn, label = decode_fn(torch, dev, *spec)
                    backends[fam].add(label)
                    make = partial(_first, decode_fn, torch, dev, *spec)
                    rows[fam].append([*spec, "bf16", *stats(watch.samples(fn, make, decode_bytes(*spec)))])
                else:
                    fn, nbytes, kind, impl = elementwise_fn(torch, dev, *spec)
                    impls[kind] = impl
                    make = partial(_first, elementwise_fn, torch, dev, *spec)
                    rows[fam].append([kind, nbytes, "bf16", *stats(watch.samples(fn, make, nbytes))])
            except OverBudget:
                skipped += 1
            except (RuntimeError, MemoryError) as exc:  # out of memory on a big point: skip it
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
                not_measured[f"{fam} {spec}"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
            done += 1
        coll_rows: dict[str, list] = {}
        if plan.collectives:
            if progress:
                progress(done, total, "collectives")
            if dev.type == "cuda":
                left = max(60.0, budget_s - (time.perf_counter() - start))
                coll_rows, why = measure_collectives(torch, plan.collectives, warmup=warmup, repeats=repeats,
                                                     timeout_s=left)
            else:
                why = "CPU run: collectives not measured"
            if why:
                for fam in ("allreduce", "allgather", "p2p"):
                    not_measured.setdefault(fam, why)
            done += 1
        sustained, sustained_note = _measure_sustained(torch, dev, sustained_plan, sustained_s,
                                                       start + budget_s, not_measured, progress, done, total)
        power = _measure_layer_power(torch, dev, layer_dtype, sustained_s, start + budget_s, not_measured,
                                     progress, done, total)
        if progress:
            progress(done, total, "done")
    finally:
        if lock_clock_mhz and dev.type == "cuda":
            unlock_clocks(dev.index or 0)
    elapsed = time.perf_counter() - start
    tables = {f: make_table(f, r) for f, r in rows.items() if r}
    tables.update({f: make_table(f, r) for f, r in coll_rows.items() if r})
    meta = ProfileMetadata(
        **env,
        attention_backend={f: "; ".join(sorted(v)) for f, v in backends.items() if v},
        elementwise_impl=impls,
        date=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        source="measured",
        clocks=clocks,
        method=MethodInfo(timer="cuda-events" if dev.type == "cuda" else "perf_counter", warmup=warmup,
                          repeats=repeats, l2_flush_mb=flush_mb if dev.type == "cuda" else 0.0,
                          budget_s=budget_s, elapsed_s=round(elapsed, 2), truncated=skipped > 0,
                          skipped=skipped, quick=quick, graph_below_us=watch.graph_below_us,
                          rotate_l2_multiple=watch.rotate_l2_multiple if watch.graph_below_us else None,
                          graphed_points=watch.graphed),
        models=plan.models, tp=plan.tp, not_measured=not_measured, sustained_fraction=sustained,
        sustained_attention_fraction=power.attention_fraction if power else None,
        collective_wait_power_fraction=power.wait_power if power else None,
        notes=[_timing_note(watch), *([sustained_note] if sustained_note else []), *([power.note] if power else [])],
    )
    return Profile(metadata=meta, tables=tables)
