"""Cost-model settings in the scenario: which back end, its efficiencies, and overheads."""

from __future__ import annotations

from typing import NamedTuple

from pydantic import Field, field_validator

from simulator.cost.releases import RELEASE_FORMAT, parse_version
from simulator.strict import StrictModel


class RooflineEfficiency(StrictModel):
    """Fractions of datasheet peaks that kernels reach at large, well-shaped sizes.

    Defaults follow public H100/A100 measurements: dense GEMMs reach ~70-80% of the
    tensor peak, bandwidth-bound kernels 80-90% of HBM bandwidth, FlashAttention-2
    prefill ~50% of peak, paged decode attention ~70% of bandwidth. Shape effects
    (wave quantisation, small messages) are modelled on top, not folded in here.
    """

    gemm_compute: float = Field(0.72, gt=0, le=1, description="GEMM fraction of dense tensor peak")
    gemm_memory: float = Field(0.85, gt=0, le=1, description="GEMM fraction of HBM bandwidth")
    attention_compute: float = Field(0.5, gt=0, le=1, description="prefill attention fraction of tensor peak")
    attention_memory: float = Field(0.72, gt=0, le=1, description="attention fraction of HBM bandwidth (KV reads)")
    elementwise_memory: float = Field(0.8, gt=0, le=1, description="norm/activation fraction of HBM bandwidth")
    collective_bandwidth: float = Field(0.75, gt=0, le=1, description="collective fraction of link bandwidth")


class EngineOverhead(NamedTuple):
    """Costs that belong to the serving engine's software, not to the GPU kernels.

    kernel_latency_us: fixed cost per kernel: launch plus tail under CUDA graphs (a few
    µs), or CPU-side Python dispatch in eager mode (tens of µs).
    framework_overhead_ms: per-iteration CPU work the GPU waits for (scheduling, input
    preparation, output processing).
    per_sequence_overhead_us: the part of that work that grows with each scheduled
    sequence (sampling bookkeeping, detokenisation, stop checks).
    dispatch_us: CPU time to issue each kernel in eager mode, overlapped with the GPU kernel
    by kernel (simulator/cost/dispatch.py); 0 where CUDA graphs or C++ issue the kernels.
    tokenizer_batch, tokenizer_window_ms: how the API server tokenises prompts (used when
    `frontend_us_per_token` is set): up to this many prompts that reach an idle tokeniser
    within the window are encoded as one batch (simulator/frontend.py); 1 and 0: one by one.
    """

    kernel_latency_us: float
    framework_overhead_ms: float
    per_sequence_overhead_us: float
    note: str
    dispatch_us: float = 0.0
    tokenizer_batch: int = 1
    tokenizer_window_ms: float = 0.0


# The per-kernel launch+tail cost a timed kernel (CUDA events around one launch) already
# contains; engines slower than that (eager mode) add the difference to measured times.
MEASURED_LAUNCH_US = 3.5

# What a 2023 Python server's online loop adds to each iteration beyond an offline profile
# of the same engine (FastAPI/uvicorn and the engine's asyncio loop awaiting its Ray
# workers): vLLM 0.2's online decode step on the dev set, fitted to the measured schedule
# (benchmarks/distserve_run_offsets.py: 25.1 ms + 0.89 ms per sequence), less DistServe's
# offline profile of that vLLM (profiler-a100-80g.vllm.json, TP1: 19.6 ms + 0.50 ms per
# sequence at ~900 tokens of context). Only the fixed part carries to DistServe, whose
# engine runs inside its API server: vLLM's per-sequence part comes from shipping every
# sequence's output from its Ray engine actor (--engine-use-ray) each step (docs/fidelity.md).
ONLINE_LOOP_MS = 5.5
# DistServe's own overheads, least-squares fitted to its published offline profile of its
# engine (OPT-13B on A100-80GB, TP 1/2/4; docs/fidelity.md), not to end-to-end runs.
DISTSERVE_OFFLINE = (5.0, 4.0, 60.0)  # µs per kernel, ms per iteration, µs per sequence

# One entry per engine generation; the values are global constants documented (and fitted,
# where noted) in docs/fidelity.md. Never tuned per scenario or per measurement row.
ENGINES: dict[str, EngineOverhead] = {
    # The tokeniser: vLLM's AsyncMicrobatchTokenizer (vllm#19334, from 0.10): 32 prompts, 2 ms.
    "vllm-v1": EngineOverhead(MEASURED_LAUNCH_US, 0.6, 3.0, "vLLM >= 0.8 (V1 engine): CUDA graphs, overlapped CPU work",
                              tokenizer_batch=32, tokenizer_window_ms=2.0),
    "vllm-0.2": EngineOverhead(20.0, 4.0, 400.0, "vLLM 0.2.x: eager PyTorch, Python sampler and detokeniser"),
    # The offline fit plus the online loop's fixed cost per iteration.
    "distserve": EngineOverhead(DISTSERVE_OFFLINE[0], DISTSERVE_OFFLINE[1] + ONLINE_LOOP_MS, DISTSERVE_OFFLINE[2],
                                "DistServe (SwiftTransformer): C++ kernel dispatch, Python/Ray orchestration and "
                                "the API server's asyncio loop per iteration"),
}


class CostModelConfig(StrictModel):
    """How iteration times are computed (DESIGN.md §5)."""

    backend: str = Field("roofline", description="cost back end: `roofline` (datasheet peaks × efficiencies), `calibrated` "
        "(measured kernel tables from hardware.profile), or `auto` (calibrated with the shipped "
        "profile for this GPU when one exists, roofline otherwise)")
    engine: str = Field("vllm-v1", description=f"serving-engine generation, which sets the software overheads: {', '.join(ENGINES)}")
    engine_version: str | None = Field(
        None, description="the vLLM release being simulated (MAJOR.MINOR[.PATCH]) where its kernels differ "
        "from those the kernel tables time (vLLM 0.24): before 0.11.1 (0.11.0 for head_dim 64), FP8-KV decode "
        "attention on Hopper runs at the BF16 kernel's speed; before 0.11.0, TP all-reduces of 8 MiB and more "
        "on NVLink Hopper/Blackwell run on NCCL (simulator/cost/releases.py); null: the tables' "
        "own release. Scheduler defaults are set by their own fields")
    kernel_latency_us: float | None = Field(
        None, ge=0, description="fixed cost per kernel, µs; default from `engine`")
    dispatch_us_per_kernel: float | None = Field(
        None, ge=0, description="CPU time to issue each kernel in eager mode, µs, overlapped with the GPU kernel by "
        "kernel (the GPU idles only where the CPU falls behind; simulator/cost/dispatch.py); default from "
        "`engine`: 0 in every preset (docs/fidelity.md, Known gaps, gives vLLM 0.2's above TP1)")
    framework_overhead_ms: float | None = Field(
        None, ge=0, description="fixed per-iteration CPU cost: scheduling, input prep, output processing, ms; default from `engine`")
    per_sequence_overhead_us: float | None = Field(
        None, ge=0, description="extra per-iteration cost for each scheduled sequence (sampling, detokenise), µs; default from `engine`")
    frontend_latency_ms: float = Field(
        0.0, ge=0, description="fixed latency a request spends outside the engine before its first "
        "token reaches the client (HTTP, API server hand-offs, streaming), ms; not serialised")
    frontend_ms_per_request: float = Field(
        0.0, ge=0, description="API-server time per request before the engine sees it (HTTP, "
        "request parsing), ms; requests queue for it one at a time; benchmarks/api_server_burst.py "
        "measures it (~1.4 ms), which the shipped scenarios leave out (docs/fidelity.md, Known gaps)")
    frontend_us_per_token: float = Field(
        0.0, ge=0, description="API-server tokenisation time per prompt token, µs, on one tokeniser thread that "
        "`engine` batches as vLLM does (simulator/frontend.py); benchmarks/tokenize_prompts.py measures it "
        "(1.3 µs for benchmark prompts)")
    sustained_tensor_rate: bool = Field(
        True, description="calibrated back end: run the compute-bound part of GEMMs, MoE experts and prefill "
        "attention at the "
        "rate the GPU sustains under its power limit: measured back to back where the GPU catalog has it "
        "(H100/H200: BF16 and FP8, and prefill attention inside a prefill layer; a `simulate calibrate` profile's own "
        "measurements first), else the rate the profile's own long (>= 10 ms) GEMM rows of that dtype "
        "reach, where it is measurably below that of its short rows (FP8/FP4 on B200/B300/GB300, and BF16 on GB300); "
        "where those rows show FP8 slowing, BF16 and prefill attention carry the relations H100/H200 measured (BF16 at "
        "FP8's rate, attention at 0.85 of it; docs/fidelity.md item 32); false: every row's short-burst rate, as measured")
    collective_power_relief: bool = Field(
        False, description="with sustained_tensor_rate, on a GPU whose profile (`simulate calibrate`) or catalog "
        "entry measures how much power a collective's wait draws (H100 SXM, H200): the share of each iteration a TP/PP GPU "
        "spends waiting on all-reduces lets the clocks, and so the sustained fractions, rise for the rest "
        "of it (docs/fidelity.md item 30). Off by default: measured on kernels, but on the shipped "
        "end-to-end sets it helps only the 8k-prompt TP8 rows")
    efficiency: RooflineEfficiency = Field(default_factory=RooflineEfficiency)

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, v: str) -> str:
        if v not in ENGINES:
            raise ValueError(f"unknown engine {v!r}; use one of: {', '.join(ENGINES)}")
        return v

    @field_validator("engine_version", mode="before")
    @classmethod
    def _release_number(cls, v: object) -> object:
        if isinstance(v, int | float):  # YAML reads 0.10 as the number 0.1
            raise ValueError(f"{v!r} is a number; quote the release so YAML keeps it as written, e.g. '0.10.2'")
        if isinstance(v, str) and parse_version(v) is None:
            raise ValueError(f"{v!r} is not a vLLM release number; give it as {RELEASE_FORMAT}")
        return v

    def overheads(self) -> EngineOverhead:
        """The engine's overheads with any explicit setting applied on top."""
        base = ENGINES[self.engine]
        return base._replace(
            kernel_latency_us=base.kernel_latency_us if self.kernel_latency_us is None else self.kernel_latency_us,
            dispatch_us=base.dispatch_us if self.dispatch_us_per_kernel is None else self.dispatch_us_per_kernel,
            framework_overhead_ms=(base.framework_overhead_ms if self.framework_overhead_ms is None
                                   else self.framework_overhead_ms),
            per_sequence_overhead_us=(base.per_sequence_overhead_us if self.per_sequence_overhead_us is None
                                      else self.per_sequence_overhead_us),
        )
