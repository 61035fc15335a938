"""The server flags behind a published sweep row, where its harness is known.

A sweep row names the model, GPU, precision and layout, not how the server was launched,
yet the launch flags change what the row measures: an FP8 KV cache holds twice the
clients of a 16-bit one before the KV cliff, a batch budget of 2 x ISL tokens queues
prefills that 8,192 would not, and a release before vLLM 0.14 runs without async
scheduling. A harness is recognised by its length grid, and the rows aiconfigurator's
silicon sample publishes for it by model, GPU and precision:

- InferenceMAX/InferenceX (`INFERENCEMAX_GRID`), whose launch scripts are public
  (github.com/SemiAnalysisAI/InferenceX). Its entries give the flags in force while the
  sample was measured (vLLM images 0.15.1 to 0.19.0, March to April 2026, and the
  Oct 2025 Llama template) and the script they come from.
- NVIDIA's aiconfigurator gap analysis (`AICONFIGURATOR_EVAL_GRID`): the sample's
  `aic-auto-gap-analysis` rows, vLLM 0.12.0 in Dynamo's `vllm-runtime:0.8.0` image,
  launched with the flags aiconfigurator's generator writes (ai-dynamo/aiconfigurator,
  `generator/config/backend_templates/vllm/cli_args.0.12.0.j2`): its `--kv-cache-dtype` is
  the KV mode aiconfigurator infers, FP8 for every FP8 checkpoint, block-scaled ones
  included (`sdk/models/helpers.py`), where vLLM's own default would keep those 16-bit.

Flags that change no simulated quantity (parsers, `--stream-interval`, CUDA-graph capture
sizes, prefix caching with random prompts, `--max-model-len` above the row's lengths) are
left out, as is `--max-num-seqs`, which sweep rows already take from their concurrency.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.cost.releases import parse_version
from simulator.errors import CatalogError
from simulator.hardware import get_gpu
from simulator.models import get_model
from simulator.validation.lengths import HARNESS_LENGTH_RATIO, INFERENCEMAX_GRID
from simulator.validation.precision import precision_overrides


@dataclass(frozen=True)
class LaunchRecipe:
    """One harness configuration: which rows it covers and the flags it passed."""

    models: frozenset[str]  # catalog model names
    gpus: frozenset[str]  # catalog GPU names
    precisions: frozenset[str]  # canonical precision column values
    source: str  # the launch script, and the change that set these flags
    harness: str = "InferenceX"
    grid: frozenset[tuple[int, int]] = INFERENCEMAX_GRID  # the (isl, osl) pairs it ran
    length_ratio: float = HARNESS_LENGTH_RATIO  # its prompt and output length spread (lengths.py)
    kv_dtype: str | None = None  # --kv-cache-dtype
    expert_activation_dtype: str | None = None  # VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1: fp8
    gpu_memory_utilization: float | None = None  # --gpu-memory-utilization
    batched_tokens_per_isl: int | None = None  # --max-num-batched-tokens as a multiple of ISL
    block_size: int | None = None  # --block-size
    expert_parallel: bool = False  # --enable-expert-parallel
    async_scheduling: bool | None = None  # --async-scheduling, where the script passed it
    engine_version: str | None = None  # the vLLM image the script ran, for rows that do not name one
    expert_kernel: str | None = None  # VLLM_MXFP4_USE_MARLIN=1: marlin
    expert_kernel_since: str | None = None  # the first image the script set it for (rows naming a release)
    until: str | None = None  # the image a later script version moved to: rows naming an older release only

    def describe(self, isl: int, version: str | None = None) -> str:
        """The flags as applied to a row of this ISL (and release), and where they come from:
        the release simulated is the row's own (or --engine-version), else the script's image."""
        release = version or self.engine_version
        image = [f"vLLM {release}"] if release else []
        flags = [*self.overrides(isl, version), *image] or ["no flags beyond the base scenario's"]
        return f"{', '.join(flags)} ({self.harness} {self.source})"

    def overrides(self, isl: int, version: str | None = None) -> list[str]:
        """The scenario assignments for a row of this ISL; a flag the script set only from
        some image on applies to rows that name that release or a later one."""
        out = []
        if self.expert_kernel and _at_least(version, self.expert_kernel_since):
            out.append(f"model.expert_kernel={self.expert_kernel}")
        if self.kv_dtype:
            out.append(f"model.kv_dtype={self.kv_dtype}")
        if self.expert_activation_dtype:
            out.append(f"model.expert_activation_dtype={self.expert_activation_dtype}")
        if self.gpu_memory_utilization:
            out.append(f"memory.gpu_memory_utilization={self.gpu_memory_utilization}")
        if self.block_size:
            out.append(f"memory.block_size={self.block_size}")
        if self.batched_tokens_per_isl:
            out.append(f"scheduler.max_num_batched_tokens={self.batched_tokens_per_isl * isl}")
        if self.expert_parallel:
            out.append("parallelism.expert_parallel=true")
        if self.async_scheduling is not None and _at_least(version, ASYNC_FLAG_SINCE):
            out.append(f"scheduler.async_scheduling={str(self.async_scheduling).lower()}")
        return out

    def covers(self, version: str | None) -> bool:
        """Whether a row of this release ran this version of the script: one replaced with a
        later image (`until`) covers only rows that name an older release."""
        return self.until is None or not _at_least(version, self.until)


def _at_least(version: str | None, since: str | None) -> bool:
    """Whether a row's release is `since` or later (always, where there is no `since`). A
    row that names no release ran the script's latest version, which has the setting."""
    if since is None or version is None:
        return True
    release = parse_version(version)
    return release is None or release >= parse_version(since)


# `--async-scheduling` first shipped in vLLM 0.10.0 (vllm-project/vllm#19970): a row naming an
# older release cannot have passed it, whatever the script's later versions did.
ASYNC_FLAG_SINCE = "0.10.0"
BLACKWELL = frozenset({"b200", "b300"})
INFERENCEX_RECIPES: tuple[LaunchRecipe, ...] = (
    # InferenceMAX's first Llama 70B sweeps (Oct 2025): `.github/workflows/70b-tmpl.yml` ran
    # the vllm/vllm-openai:v0.10.2 image with the FP8 ModelOpt checkpoint, and the scripts'
    # config.yaml set kv-cache-dtype fp8 and async-scheduling true. The release matters for
    # the FP8 decode-attention kernel it ran (simulator/cost/releases.py).
    LaunchRecipe(
        frozenset({"llama-3.1-70b"}), frozenset({"h100-sxm", "h200"}), frozenset({"fp8"}),
        "benchmarks/70b_fp8_{h100,h200}_slurm.sh with .github/workflows/70b-tmpl.yml's v0.10.2 image",
        kv_dtype="fp8", async_scheduling=True, engine_version="0.10.2"),
    # The first B200 script (PR 757, the v0.17.0 image) turned FlashInfer's and DeepGEMM's MoE
    # off (VLLM_USE_FLASHINFER_MOE_FP8=0, VLLM_MOE_USE_DEEP_GEMM=0), so the experts ran vLLM's
    # Triton fused MoE, and its `-ge 1` test turned expert parallelism on for every row. PR 947
    # moved to v0.19.0, dropped both variables (vLLM 0.19 runs FlashInfer's TRT-LLM modular
    # kernel for MiniMax's routing, vllm-project/vllm#36307 and #37346), fixed the test to
    # `-gt 1` and added the flags of the recipe below.
    LaunchRecipe(
        frozenset({"minimax-m2"}), frozenset({"b200"}), frozenset({"fp8"}),
        "benchmarks/single_node/minimaxm2.5_fp8_b200.sh of PR 757 with the vLLM 0.17.0 image "
        "(VLLM_USE_FLASHINFER_MOE_FP8=0, VLLM_MOE_USE_DEEP_GEMM=0)",
        gpu_memory_utilization=0.95, block_size=32, expert_parallel=True, expert_kernel="triton",
        until="0.19.0"),
    LaunchRecipe(
        frozenset({"minimax-m2"}), BLACKWELL, frozenset({"fp8"}),
        "benchmarks/single_node/minimaxm2.5_fp8_{b200,b300}.sh with the vLLM 0.19 images (PRs 947, 1054)",
        kv_dtype="fp8", gpu_memory_utilization=0.90, batched_tokens_per_isl=2, block_size=32),
    LaunchRecipe(
        frozenset({"minimax-m2"}), BLACKWELL, frozenset({"fp4"}),
        "benchmarks/single_node/minimaxm2.5_fp4_{b200,b300}.sh with the vLLM 0.19 images (PRs 996, 1055)",
        kv_dtype="fp8", gpu_memory_utilization=0.90, batched_tokens_per_isl=2),
    # The first H200 script (PR 831, vLLM 0.16.0, TP4) passed no expert-parallel flag; PR 869
    # moved the sweep to TP8 with the EP test below, and PR 958 to the v0.18.0 image.
    LaunchRecipe(
        frozenset({"minimax-m2"}), frozenset({"h200"}), frozenset({"fp8"}),
        "benchmarks/single_node/minimaxm2.5_fp8_h200.sh of PR 831 with the vLLM 0.16.0 image (no expert parallelism)",
        gpu_memory_utilization=0.95, until="0.18.0"),
    LaunchRecipe(
        frozenset({"minimax-m2"}), frozenset({"h200"}), frozenset({"fp8"}),
        "benchmarks/single_node/minimaxm2.5_fp8_h200.sh (PRs 869, 958; its EP test `-ge 1` holds for every row)",
        gpu_memory_utilization=0.95, expert_parallel=True),
    # The H100 script (PR 832, vLLM 0.16.0; PR 958, 0.18.0) runs TP4 with EP_SIZE 4, and its
    # test `[ "$EP_SIZE" -gt 1 ]` passes --enable-expert-parallel (perf-changelog: "TP=4/EP=4").
    LaunchRecipe(
        frozenset({"minimax-m2"}), frozenset({"h100-sxm"}), frozenset({"fp8"}),
        "benchmarks/single_node/minimaxm2.5_fp8_h100.sh (PRs 832, 958; TP4 with EP4)",
        expert_parallel=True),
    # The B200 script also exports VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 (in every version
    # since the Dec 2025 docker script): MXFP4 experts under MXFP8 inputs, 0.75x the W4A16
    # kernel's time at decode batches and under 0.3x at 8k-token prefills. The gpt-oss scripts
    # passed --async-scheduling up to vLLM 0.13 (PR 789 dropped it as the default from 0.14).
    LaunchRecipe(
        frozenset({"gpt-oss-120b"}), frozenset({"b200"}), frozenset({"fp4"}),
        "benchmarks/single_node/gptoss_fp4_b200.sh (kv-cache-dtype fp8 since PR 273, "
        "VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1)",
        kv_dtype="fp8", expert_activation_dtype="fp8", async_scheduling=True),
    # The H100/H200 scripts export VLLM_MXFP4_USE_MARLIN=1 from the move to vLLM 0.13.0 (PR 327,
    # January 2026) on; before it they ran vLLM's default, which under 0.11.2 was Marlin too:
    # that release shipped no Triton MoE (simulator/cost/releases.py). So every InferenceX
    # gpt-oss run on Hopper ran Marlin, and a row that names no release (a 9-column sweep)
    # runs it too; only a row naming a 0.12 release keeps that release's default, Triton. The
    # two shipped InferenceMAX runs name theirs (0.13.0 of 2026-01-02 and 0.11.2 of December
    # 2025, validation/) and measured the same.
    LaunchRecipe(
        frozenset({"gpt-oss-120b"}), frozenset({"h100-sxm", "h200"}), frozenset({"fp4"}),
        "benchmarks/single_node/gptoss_fp4_{h100,h200}.sh (VLLM_MXFP4_USE_MARLIN=1 since PR 327, vLLM 0.13.0)",
        expert_kernel="marlin", expert_kernel_since="0.13.0", async_scheduling=True),
    LaunchRecipe(
        frozenset({"kimi-k2"}), frozenset({"b200", "h200"}), frozenset({"int4"}),
        "benchmarks/single_node/kimik2.5_int4_{b200,h200}.sh (PRs 735, 847)",
        gpu_memory_utilization=0.95),
)


# aiconfigurator's gap-analysis sweeps: its default ISL/OSL grid, at the batch size its search
# picked (the row's concurrency); Qwen3-32B in bf16 ran a TP x concurrency sweep of its own.
AICONFIGURATOR_EVAL_GRID = frozenset((i, o) for i in (1000, 2000, 4000, 8000) for o in (100, 500, 1000, 2000))
QWEN3_32B_SWEEP_GRID = frozenset((i, o) for i in (1024, 4096) for o in (128, 512, 1024))
AICONFIGURATOR_SOURCE = ("aic-auto-gap-analysis rows of aiconfigurator's sample (Dynamo vllm-runtime:0.8.0), "
                         "flags of aiconfigurator's generator")
AICONFIGURATOR_RECIPES: tuple[LaunchRecipe, ...] = (
    LaunchRecipe(
        frozenset({"llama-3.1-8b", "qwen3-235b-a22b", "qwen3-32b"}), frozenset({"h100-sxm", "h200"}),
        frozenset({"fp8"}), AICONFIGURATOR_SOURCE, harness="aiconfigurator eval",
        grid=AICONFIGURATOR_EVAL_GRID, length_ratio=1.0, kv_dtype="fp8", engine_version="0.12.0"),
    LaunchRecipe(
        frozenset({"qwen3-32b"}), frozenset({"h100-sxm"}), frozenset({"bf16"}), AICONFIGURATOR_SOURCE,
        harness="aiconfigurator eval", grid=QWEN3_32B_SWEEP_GRID, length_ratio=1.0, engine_version="0.12.0"),
)


def launch_recipe(model: str, gpu: str, precision: str, isl: int, osl: int,
                  version: str | None = None) -> LaunchRecipe | None:
    """The recipe for a row's model, GPU, (canonical) precision, lengths and release, if one
    applies (a row that names no release gets the script's latest version)."""
    try:
        model_name, gpu_name = get_model(model).name, get_gpu(gpu).name
    except CatalogError:  # reported later as unsimulatable, with the catalog's reason
        return None
    for recipe in (*INFERENCEX_RECIPES, *AICONFIGURATOR_RECIPES):
        if (model_name in recipe.models and gpu_name in recipe.gpus
                and any(_same_checkpoint(precision, p, model, gpu) for p in recipe.precisions)
                and (isl, osl) in recipe.grid and recipe.covers(version)):
            return recipe
    return None


def _same_checkpoint(precision: str, recipe_precision: str, model: str, gpu: str) -> bool:
    """Whether a row's precision names the checkpoint a recipe's does: the same name, or
    another that runs the model in the same formats (gpt-oss's own MXFP4 experts are `fp4`
    in InferenceX's rows and `w4a16_mxfp4` in aiconfigurator's terms)."""
    return precision == recipe_precision or (
        precision_overrides(precision, model, gpu) == precision_overrides(recipe_precision, model, gpu))
