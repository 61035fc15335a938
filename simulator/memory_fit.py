"""What would make a layout that does not fit GPU memory fit: each single change (more
GPUs, a bigger GPU, narrower weights or KV, a higher memory fraction) re-planned with the
same arithmetic, so an error only suggests changes that would let the server start."""

from __future__ import annotations

from dataclasses import replace

from simulator.dtypes import DTYPE_BYTES, stored_weight_bytes
from simulator.memory import MemorySetup

#: Largest deployment a fix suggests (GPUs per replica): eight nodes of eight.
MAX_FIX_GPUS = 64
#: The highest gpu_memory_utilization a fix suggests: higher leaves next to nothing for
#: memory outside the engine's budget.
MAX_FIX_UTILIZATION = 0.95


def fit_fix(setup: MemorySetup, gpus_per_node: int = 8) -> str:
    """The fix text of a setup that does not fit: the changes that each would make it fit."""
    fixes = fit_fixes(setup, gpus_per_node)
    if fixes:
        return one_of(fixes)
    narrower = stored_weight_bytes(setup.weight_dtype) > stored_weight_bytes("int4")
    return (f"no single change fits (tried parallelism.tp x parallelism.pp up to {MAX_FIX_GPUS} GPUs): "
            "combine more GPUs with a GPU with more memory" + (" or a smaller model.weight_dtype" if narrower else ""))


def fit_fixes(setup: MemorySetup, gpus_per_node: int = 8) -> list[str]:
    """Single changes that make `setup` fit, the cheapest of each kind, each checked by
    re-planning (a fix the user cannot apply, or that would not help, is left out)."""
    release = _release_format_fix(setup)
    found = [
        release,
        _parallel_fix(setup, gpus_per_node),
        _dp_fix(setup, gpus_per_node),
        _gpu_fix(setup),
        # A release format of FP8 weights is already the weight fix: said once.
        None if release and release.startswith("model.weight_dtype") else _weight_dtype_fix(setup),
        _kv_dtype_fix(setup),
        _utilization_fix(setup),
    ]
    return [f for f in found if f]


def one_of(fixes: list[str]) -> str:
    return f"set {fixes[0]}" if len(fixes) == 1 else f"set one of: {'; '.join(fixes)}"


def _valid(setup: MemorySetup, tp: int, dp: int) -> bool:
    """The layouts the simulator accepts (simulation.check_parallelism): TP splits the
    attention heads, and block-FP8 experts only along whole blocks (unless placed whole)."""
    model = setup.model
    expert_dtype = setup.expert_weight_dtype or setup.weight_dtype
    blocked = model.has_block_fp8_experts(expert_dtype) and not setup.expert_parallel
    return model.splits_heads(tp) and (not blocked or model.splits_fp8_expert_blocks(tp * dp))


def _parallel_fix(setup: MemorySetup, gpus_per_node: int) -> str | None:
    """The smallest TP within a node that fits; else that node's widest TP with the fewest
    pipeline stages (TP inside a node, PP across nodes, as deployments split a model)."""
    tps = [t for t in range(setup.tp, max(setup.tp, gpus_per_node) + 1) if _valid(setup, t, setup.dp)]
    for t in tps[1:] if tps and tps[0] == setup.tp else tps:
        if replace(setup, tp=t).starts():
            return f"parallelism.tp: {t}"
    if not tps or setup.dp > 1:  # attention DP runs without pipeline stages
        return None
    t = tps[-1]
    last = min(setup.model.num_layers, MAX_FIX_GPUS // t)
    for p in range(setup.pp + 1, last + 1):
        if replace(setup, tp=t, pp=p).starts():
            return f"parallelism.tp: {t} with parallelism.pp: {p}" if t != setup.tp else f"parallelism.pp: {p}"
    return None


def _dp_fix(setup: MemorySetup, gpus_per_node: int) -> str | None:
    """MoE: the fewest attention-DP ranks (which split the routed experts) that fit."""
    if not setup.model.num_experts or setup.pp > 1:
        return None
    for d in range(setup.dp + 1, gpus_per_node // setup.tp + 1):
        if _valid(setup, setup.tp, d) and replace(setup, dp=d).starts():
            return f"parallelism.dp: {d} (splits the experts)"
    return None


def _gpu_fix(setup: MemorySetup) -> str | None:
    """The catalog GPU with the least memory above this one's that fits at the same
    parallelism and has every low-precision tensor format this one has (same vendor first)."""
    from simulator.hardware import GPU_CATALOG

    low = {"fp8", "int8", "fp4"} & set(setup.gpu.peak_tflops)
    bigger = sorted((g for g in GPU_CATALOG.values() if g.usable_memory_gib > setup.gpu.usable_memory_gib
                     and low <= set(g.peak_tflops)),
                    key=lambda g: (g.vendor != setup.gpu.vendor, g.usable_memory_gib, g.cost_per_gpu_hour))
    for g in bigger:
        if replace(setup, gpu=g).starts():
            return f"hardware.gpu: {g.name}"
    return None


def _release_format_fix(setup: MemorySetup) -> str | None:
    """The format the model was published in, where the scenario asks for a wider one
    (gpt-oss's MXFP4 experts, DeepSeek-V3's FP8): what its users serve, and first to try."""
    model = setup.model
    native = model.native_expert_dtype
    if native and (setup.expert_weight_dtype or setup.weight_dtype) != native:
        if replace(setup, expert_weight_dtype=native).starts():
            return f"model.expert_weight_dtype: {native} (the format it was released in)"
    elif (model.released_in_fp8 and setup.weight_dtype != "fp8" and "fp8" in setup.gpu.peak_tflops
          and replace(setup, weight_dtype="fp8").starts()):
        return "model.weight_dtype: fp8 with model.activation_dtype: fp8 (the format it was released in)"
    return None


def _weight_dtype_fix(setup: MemorySetup) -> str | None:
    """The widest weight format narrower than the current one that fits: 8-bit, then 4-bit,
    each in the float form where the GPU has tensor cores for it, else the integer one."""
    peaks = setup.gpu.peak_tflops
    now = stored_weight_bytes(setup.weight_dtype)
    for dtype in ("fp8" if "fp8" in peaks else "int8", "fp4" if "fp4" in peaks else "int4"):
        if stored_weight_bytes(dtype) < now and replace(setup, weight_dtype=dtype).starts():
            return f"model.weight_dtype: {dtype}"
    return None


def _kv_dtype_fix(setup: MemorySetup) -> str | None:
    if DTYPE_BYTES[setup.kv_dtype] > 1 and replace(setup, kv_dtype="fp8").starts():
        return "model.kv_dtype: fp8"
    return None


def _utilization_fix(setup: MemorySetup) -> str | None:
    """The least gpu_memory_utilization, in steps of 0.01 up to MAX_FIX_UTILIZATION, that fits."""
    step = round(setup.utilization * 100) + 1
    for pct in range(step, round(MAX_FIX_UTILIZATION * 100) + 1):
        if replace(setup, utilization=pct / 100).starts():
            return f"memory.gpu_memory_utilization: {pct / 100:g}"
    return None
