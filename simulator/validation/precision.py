"""A benchmark's precision (a sweep column, or a checkpoint name's token) mapped to the
scenario's weight, activation, expert and KV dtypes for the model and GPU."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from simulator.errors import CatalogError
from simulator.hardware import get_gpu
from simulator.models import get_model

if TYPE_CHECKING:
    from simulator.config import ModelConfig

PRECISIONS = {
    # precision column -> (weight, activation, kv) dtypes. FP8 serving on Hopper (vLLM
    # --quantization fp8 --kv-cache-dtype fp8) quantises the KV cache too; see docs/fidelity.md.
    "fp8": ("fp8", "fp8", "fp8"),
    # FP8 W8A8 from a checkpoint without KV-cache scales (compressed-tensors FP8-dynamic,
    # MXFP8, and Red Hat's / Neural Magic's `-FP8` releases, whose KV-scaled ones are named
    # `-FP8-KV`): vLLM's default KV dtype follows the model, so the cache stays 16-bit.
    "fp8_kv16": ("fp8", "fp8", "bf16"),
    "fp16": ("fp16", "fp16", "fp16"),
    "bf16": ("bf16", "bf16", "bf16"),
    "fp4": ("fp4", "fp4", "fp8"),  # NVFP4 W4A4 on Blackwell tensor cores, FP8 KV
    # FP4 weights dequantised into 16-bit GEMMs on any GPU (W4A16): an NVFP4 checkpoint
    # (aiconfigurator's nvfp4_wo, w4a16_nvfp4) keeps its FP8 KV; MXFP4 (w4a16_mxfp4, gpt-oss's
    # own format) has none.
    "fp4_wo": ("fp4", "bf16", "fp8"),
    "mxfp4_wo": ("fp4", "bf16", "bf16"),
    "int4": ("int4", "bf16", "bf16"),  # weight-only (W4A16: AWQ, GPTQ)
    "int4_fp8": ("int4", "fp8", "bf16"),  # W4A8: INT4 weights, FP8 GEMM inputs (aiconfigurator's w4afp8)
    "int8": ("int8", "int8", "bf16"),  # W8A8 INT8 (e.g. compressed-tensors w8a8, SmoothQuant): KV stays 16-bit
    "int8_wo": ("int8", "bf16", "bf16"),  # weight-only INT8 (W8A16)
}


# Other spellings of the same formats in benchmark tables and checkpoint names, as
# `canonical_precision` reads them (lower case, `-` and spaces as `_`). aiconfigurator's
# GEMM/MoE quant modes (sdk/common.py: GEMMQuantMode, MoEQuantMode) are among them:
# int4_wo = W4A16; fp8_static, fp8_block, fp8_ootb = FP8 W8A8 with other scalings; sq =
# SmoothQuant W8A8 INT8; w4afp8 = INT4 weights x FP8 inputs; nvfp4_wo, w4a16_nvfp4 = NVFP4
# weights x bf16; w4a16_mxfp4 = MXFP4 weights x bf16. TensorRT Model Optimizer's quant
# configs name the same formats w4a8_awq (INT4 AWQ weights x FP8 inputs) and nvfp4_awq.
PRECISION_ALIASES = {
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
    "nvfp4": "fp4", "mxfp4": "fp4", "w4a4": "fp4",
    "fp8_block": "fp8", "fp8_static": "fp8", "fp8_ootb": "fp8", "fp8_e4m3": "fp8", "w8a8_fp8": "fp8",
    "fp8_blockwise": "fp8", "fp8_block_scale": "fp8", "nvfp4_awq": "fp4", "w4a8_awq": "int4_fp8",
    "float8": "fp8", "fp8_dynamic": "fp8_kv16", "fp8dynamic": "fp8_kv16", "mxfp8": "fp8_kv16",
    "nvfp4_wo": "fp4_wo", "w4a16_nvfp4": "fp4_wo", "w4a16_mxfp4": "mxfp4_wo",
    "w4a16": "int4", "int4_wo": "int4", "awq": "int4", "int4_awq": "int4", "w4a16_awq": "int4",
    "gptq": "int4", "int4_gptq": "int4", "w4a16_gptq": "int4", "w4afp8": "int4_fp8", "w4a8_fp8": "int4_fp8",
    "w8a8": "int8", "w8a8_int8": "int8", "sq": "int8", "smoothquant": "int8",
    "w8a16": "int8_wo",
}


def canonical_precision(text: str) -> str | None:
    """A precision column value in PRECISIONS' terms, or None if it is not one we know."""
    key = re.sub(r"[-\s]+", "_", text.strip().lower())
    key = PRECISION_ALIASES.get(key, key)
    return key if key in PRECISIONS else None


def accepted_precisions() -> list[str]:
    """Every precision name a sweep row may give, for the fix of an unknown one."""
    return [*PRECISIONS, *PRECISION_ALIASES]


# A blank precision cell (pandas reads it as NaN) or one of these words means "what the
# checkpoint is": the model name's quantisation token, else the model's native format.
UNSTATED_PRECISIONS = ("", "nan", "none", "auto", "default", "native")


def precision_overrides(prec: str, model_name: str, gpu_name: str) -> list[str]:
    """Scenario overrides for a row's precision column, given what the model and GPU support.

    - Checkpoints that quantise only their routed experts (gpt-oss MXFP4, Kimi-K2.5 INT4)
      keep attention, shared experts and the KV cache in bf16 when the row names that
      native format; another format (Kimi fp4 = NVIDIA's NVFP4 checkpoint) maps as below.
    - NVIDIA's NVFP4 checkpoints of some MoE models quantise the experts only
      (`nvfp4_experts_only`: MiniMax-M2.5, Kimi-K2.5): attention stays bf16, the experts run
      W4A4, and the KV cache is FP8 as in every ModelOpt NVFP4 checkpoint.
    - FP4 on a GPU without FP4 tensor cores (Hopper), and FP8 on one without FP8 tensor
      cores (Ampere), run weight-only: vLLM dequantises in the GEMM (Marlin) and computes
      in bf16.
    - FP8 of a model whose publisher ships a block-scaled FP8 checkpoint (`native_fp8`)
      keeps a bf16 KV cache: that checkpoint has no KV scales and vLLM's default KV dtype
      follows the model. ModelOpt FP8 checkpoints (the others) quantise the KV cache too.
    """
    w, a, kv = PRECISIONS[prec]
    try:
        model = get_model(model_name)
    except CatalogError:  # reported later as unsimulatable, with the catalog's reason
        model = None
    try:
        peaks = get_gpu(gpu_name).peak_tflops
    except CatalogError:
        peaks = {"fp4": 1.0, "fp8": 1.0}
    expert = None
    if model is not None and model.native_expert_dtype == w:
        w, a, kv, expert = "bf16", "bf16", "bf16", w
    elif prec in ("fp4", "fp4_wo") and model is not None and model.nvfp4_experts_only:
        w, expert = "bf16", "fp4"
    if a in ("fp4", "fp8") and not peaks.get(a):
        a = "bf16"
    if prec == "fp8" and model is not None and model.native_fp8:
        kv = "bf16"
    out = [f"model.weight_dtype={w}", f"model.activation_dtype={a}", f"model.kv_dtype={kv}"]
    return [*out, f"model.expert_weight_dtype={expert or 'null'}"]


# Quantisation tokens in checkpoint names, for runs that name their model (vLLM's model_id).
_ID_PRECISION_TOKENS = (("nvfp4", "fp4"), ("mxfp4", "fp4"), ("fp4", "fp4"), ("fp8", "fp8"),
                        ("awq", "int4"), ("gptq", "int4"), ("int4", "int4"), ("w4a16", "int4"),
                        ("w8a8", "int8"), ("int8", "int8"), ("w8a16", "int8_wo"),
                        # NVIDIA's `-BF16` releases (Nemotron 3) beside their FP8 and NVFP4 ones
                        ("bf16", "bf16"))


# Publishers of compressed-tensors checkpoints, whose FP8 releases carry KV-cache scales only
# when named `-FP8-KV` (huggingface.co/RedHatAI, formerly neuralmagic).
_KV_NAMED_PUBLISHERS = ("redhatai/", "neuralmagic/")


def checkpoint_token_precision(model_id: str) -> str | None:
    """The precision a checkpoint name's quantisation token states (`-FP8`, `-AWQ`,
    `-FP8-dynamic`), or None where the name has none."""
    name = model_id.strip().lower()
    if re.search(r"fp8[-_.]?dynamic", name):  # compressed-tensors FP8-dynamic: no KV scales
        return "fp8_kv16"
    tokens = re.split(r"[-_./\s]+", name)
    prec = next((prec for token, prec in _ID_PRECISION_TOKENS if token in tokens), None)
    if prec == "fp8" and name.startswith(_KV_NAMED_PUBLISHERS) and "kv" not in tokens:
        return "fp8_kv16"
    return prec


def stated_precision(model_id: str) -> str | None:
    """The precision a checkpoint's name states: its quantisation token, or FP8 for a
    release the catalog lists among the model's `fp8_releases`; None where it states none."""
    if (prec := checkpoint_token_precision(model_id)) is not None:
        return prec
    try:
        model = get_model(model_id)
    except CatalogError:
        return None
    repo = model_id.strip().lower().rsplit("/", 1)[-1]
    if any(repo == release.lower().rsplit("/", 1)[-1] for release in model.fp8_releases):
        return "fp8"
    return None


def checkpoint_precision(model_id: str) -> str:
    """The precision a checkpoint name implies: what it states, else the model's native format."""
    if (prec := stated_precision(model_id)) is not None:
        return prec
    model = get_model(model_id)
    if model.native_expert_dtype:
        return model.native_expert_dtype
    return "fp8" if model.released_in_fp8 else "bf16"


def model_id_overrides(model_id: str | None, base_model: str | ModelConfig | None, gpu_name: str) -> list[str]:
    """Overrides that make a run follow the model its result file names.

    Empty when the file names no model, a model outside the catalog (a local path), the
    model the base scenario already serves (whose dtypes the scenario then decides; with
    the scenario's ModelConfig, a checkpoint token that disagrees with them is followed,
    see `follow_model_id`), or when the scenario's own model is not a catalog entry (a
    config.json it loads). Otherwise the catalog entry and the precision its checkpoint
    name implies.
    """
    if base_model is not None and not isinstance(base_model, str):
        return follow_model_id(model_id, base_model, gpu_name).overrides
    if not model_id or not base_model:  # no name, or a scenario model loaded from config.json
        return []
    try:
        model = get_model(model_id)
        same = get_model(base_model).name == model.name
    except CatalogError:
        return []
    return [] if same else _other_model(model.name, model_id, gpu_name)


def _other_model(name: str, model_id: str, gpu_name: str) -> list[str]:
    """The overrides that put a run on catalog model `name`, at the precision its checkpoint
    name `model_id` implies."""
    prec = checkpoint_precision(model_id)
    return [f"model.name={name}", "model.config_json=null", *precision_overrides(prec, name, gpu_name)]


def unknown_model_id_note(model_id: str | None, scenario_model: str) -> str | None:
    """What a run says when its file names a model outside the catalog: it is simulated as
    the scenario's model, which may not be the one measured (the user may mean it so)."""
    if not model_id:
        return None
    try:
        get_model(model_id)
    except CatalogError:
        return (f"its model_id {model_id!r} is not in the catalog; simulated as {scenario_model} "
                "(set model.name or model.config_json to choose)")
    return None


class ModelFollow(NamedTuple):
    """What a run does about the model its result file names (`follow_model_id`)."""

    overrides: list[str]  # assignments that put the run on that model and precision
    model: str | None  # the catalog model followed, where it is not the scenario's
    note: str | None  # what the run says about it, where it needs saying


def follow_model_id(model_id: str | None, base_model: ModelConfig, gpu_name: str) -> ModelFollow:
    """The model a run's file names, followed where the catalog knows it.

    - Another catalog model: simulated as that model, at the precision its checkpoint
      name implies (`checkpoint_precision`).
    - The scenario's own model: the scenario's dtypes stand, unless the checkpoint name
      states a weight format that disagrees with them (`RedHatAI/...-FP8` under a bf16
      scenario): users benchmark quantised checkpoints under the base scenario of their
      model family, so the name is the better evidence of what ran. A name with no
      quantisation token says nothing about the format, and the scenario decides.
    - A model outside the catalog (a local path): the scenario's model, with a note.
    """
    if not model_id:
        return ModelFollow([], None, None)
    shown = base_model.name or f"the scenario's {base_model.config_json}"
    try:
        model = get_model(model_id)
    except CatalogError:
        return ModelFollow([], None, unknown_model_id_note(model_id, shown))
    if not base_model.name:  # a scenario model loaded from config.json: it decides
        return ModelFollow([], None, None)
    try:
        same = get_model(base_model.name).name == model.name
    except CatalogError:
        return ModelFollow([], None, None)
    if not same:
        return ModelFollow(_other_model(model.name, model_id, gpu_name), model.name, None)
    prec = stated_precision(model_id)
    if prec is None:
        return ModelFollow([], None, None)
    extra = precision_overrides(prec, model.name, gpu_name)
    stated = dict(a.split("=", 1) for a in extra)
    weights = (stated["model.weight_dtype"], _expert_weights(stated))
    scenario = (base_model.weight_dtype, base_model.expert_weight_dtype or base_model.weight_dtype)
    if weights == scenario:
        return ModelFollow([], None, None)
    shown_dtypes = ", ".join(a.removeprefix("model.") for a in extra if not a.endswith("=null"))
    note = (f"its model_id {model_id!r} is the scenario's {model.name} quantised to {prec}: simulated "
            f"with {shown_dtypes}, not the scenario's weight_dtype {base_model.weight_dtype} "
            f"(--set model.name={model.name} keeps the scenario's dtypes)")
    return ModelFollow(extra, None, note)


def _expert_weights(stated: dict[str, str]) -> str:
    """The routed experts' weight format a set of precision overrides gives."""
    expert = stated.get("model.expert_weight_dtype", "null")
    return stated["model.weight_dtype"] if expert == "null" else expert
