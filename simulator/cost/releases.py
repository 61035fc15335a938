"""Kernels that differ between vLLM releases, where the shipped tables time another one.

The shipped kernel tables time vLLM 0.24's kernels (aiconfigurator-core 0.12). A run of an
older release ran that release's kernels, and one of them changed enough to show in a
serving benchmark:

- FP8-KV decode attention on Hopper (FlashAttention-3). With `--kv-cache-dtype fp8`,
  vLLM runs FA3's FP8 kernel, whose tile sizes were tuned for decoding only in
  vllm-project/flash-attention#91 (head_dim 64, picked up by vLLM in #25537, in 0.11.0)
  and #96 (head_dim 128, picked up with #27889, in 0.11.1). Before them the FP8 kernel read
  half the bytes but was no faster than the BF16 one: "with the current mainline config,
  FP8 decoding is not faster at all than BF16" (#96, for Qwen3-Coder-30B), and the vLLM
  blog's v0.10.2 measurements put gpt-oss-20b's FP8 ITL slope at 96% of BF16's
  ("The State of FP8 KV-Cache and Attention Quantization in vLLM", 2026-04-22). The
  tables' FP8 rows time the tuned kernel (on H200 its per-token cost is ~0.7 of BF16's),
  so a run of an earlier release times FP8-KV decode attention by the BF16 rows, at BF16
  bytes. The cache still holds FP8: only the kernel's speed is the older one.

- OpenAI's Triton MoE for MXFP4 experts on Hopper. vLLM picks it only when the
  `triton_kernels` package imports (`get_mxfp4_backend`), and falls back to Marlin
  otherwise. The package was not on PyPI and not a dependency; vLLM vendors it from 0.12.0
  on (vllm-project/vllm#28788, `vllm/third_party/triton_kernels`). The 0.11.2 wheel has no
  copy, so a stock install of a release before 0.12.0 ran gpt-oss's experts on Marlin
  (`model.expert_kernel: auto` resolves so; docs/fidelity.md item 25).

- TP all-reduce on Hopper and Blackwell. The tables' `vllm_custom_graph` rows time vLLM
  0.24's own dispatch (aiconfigurator's collector calls `tensor_model_parallel_all_reduce`
  inside vLLM's graph capture), which sends mid-size messages to torch's symmetric-memory
  all-reduce: on an H200 at TP8 16 MiB takes 87 us there against NCCL's 121 (multimem;
  vLLM's own benchmark in vllm-project/vllm#42324 puts them at 0.087 and 0.121 ms). That
  path is on by default from 0.11.0 (vllm-project/vllm#24111, #25070). Before it, vLLM's
  custom all-reduce took messages under its 8 MiB buffer and NCCL the rest (the 0.10.2
  wheel's `cuda_communicator.py`), so a run of an earlier release times all-reduces of
  8 MiB and more by the NCCL rows (docs/fidelity.md item 31).
"""

from __future__ import annotations

import dataclasses
import re

from simulator.cost.ops import ShardedModel
from simulator.hardware import GPUSpec

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
RELEASE_FORMAT = "MAJOR.MINOR[.PATCH], e.g. 0.10.2"

# head_dim -> the first vLLM release whose FA3 FP8 decode tiles were tuned (see above).
FP8_DECODE_TUNED_SINCE: dict[int, tuple[int, int, int]] = {64: (0, 11, 0), 128: (0, 11, 1)}


# The first vLLM release that ships OpenAI's triton_kernels (see above).
TRITON_MOE_SHIPPED_SINCE = (0, 12, 0)

# The first release whose TP all-reduce uses symmetric memory by default, and the custom
# all-reduce's buffer before it, above which NCCL ran (see above). Multimem needs NVLink.
SYMM_MEM_ALLREDUCE_SINCE = (0, 11, 0)
CUSTOM_ALLREDUCE_BUFFER_BYTES = 8 * 1024 * 1024
SYMM_MEM_ARCHITECTURES = frozenset({"hopper", "blackwell"})


def release_allreduce(sharded: ShardedModel, gpu: GPUSpec, engine_version: str | None) -> ShardedModel:
    """The layout with its all-reduces timed as the release ran them: NCCL from the custom
    all-reduce's buffer size up, under a release before symmetric-memory all-reduce."""
    release = parse_version(engine_version)
    if (release is None or release >= SYMM_MEM_ALLREDUCE_SINCE or sharded.tp < 2
            or gpu.architecture not in SYMM_MEM_ARCHITECTURES or "NVLink" not in gpu.intra_node_link.name):
        return sharded
    return dataclasses.replace(sharded, allreduce_nccl_from=float(CUSTOM_ALLREDUCE_BUFFER_BYTES))


def release_expert_kernel(kernel: str, expert_weight_dtype: str | None, activation_dtype: str,
                          gpu: GPUSpec, engine_version: str | None) -> str:
    """The MoE kernel a run's `model.expert_kernel` stands for under its release: `auto`
    is Marlin for MXFP4 experts on Hopper under a release that shipped no Triton MoE."""
    release = parse_version(engine_version)
    if (kernel == "auto" and release is not None and release < TRITON_MOE_SHIPPED_SINCE
            and gpu.architecture == "hopper" and expert_weight_dtype == "fp4" and activation_dtype == "bf16"):
        return "marlin"
    return kernel


def parse_version(text: object) -> tuple[int, int, int] | None:
    """(major, minor, patch) of "0.12.0", "v0.19.0-cu130" or "0.10.1.1"; None otherwise."""
    if text is None or (isinstance(text, float) and text != text):
        return None
    m = _VERSION.match(str(text).strip())
    if not m:
        return None
    return int(m[1]), int(m[2]), int(m[3] or 0)


def untuned_fp8_decode(sharded: ShardedModel, gpu: GPUSpec, engine_version: str | None) -> bool:
    """Whether this layout's decode attention runs FA3's FP8 kernel from before its decode
    tuning: an FP8 KV cache of GQA attention on Hopper under a release older than the fix."""
    release = parse_version(engine_version)
    since = FP8_DECODE_TUNED_SINCE.get(sharded.head_dim)
    return (release is not None and since is not None and release < since
            and gpu.architecture == "hopper" and sharded.kv_bytes < 2 and not sharded.kv_lora)


def decode_attention_model(sharded: ShardedModel, gpu: GPUSpec, engine_version: str | None) -> ShardedModel:
    """The dimensions decode attention is timed with: the model's own, or a BF16 cache's
    where the release's FP8 kernel ran at the BF16 kernel's speed."""
    if untuned_fp8_decode(sharded, gpu, engine_version):
        return dataclasses.replace(sharded, kv_bytes=2.0)
    return sharded


def untuned_fp8_decode_note(engine_version: str | None) -> str:
    """What a run whose decode attention runs the older FP8 kernel says about it."""
    return (f"FP8-KV decode attention at the BF16 kernel's speed (vLLM {engine_version} ran "
            "FlashAttention-3's FP8 decode tiles before their tuning)")


def nccl_allreduce_note(engine_version: str | None) -> str:
    """What a run whose large all-reduces are pinned to NCCL says about it."""
    return (f"all-reduces of {CUSTOM_ALLREDUCE_BUFFER_BYTES // 2**20} MiB and more on NCCL (vLLM {engine_version} "
            "predates symmetric-memory all-reduce)")
