"""The scenario file: a strict, typed description of one simulated deployment.

Every section is a pydantic model with `extra="forbid"`, so a misspelt field is an error,
not a silently ignored setting. Field descriptions double as the README's reference.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo

from simulator.cost.config import CostModelConfig
from simulator.dtypes import Dtype
from simulator.errors import ConfigError, ServesimError
from simulator.hardware import LINKS
from simulator.models.spec import MoeRouting
from simulator.router import RouterConfig
from simulator.scheduler import POLICIES, SchedulerConfig
from simulator.scheduler.roles import DECODE_ROLES
from simulator.scheduler.vllm_v1 import VllmV1Config
from simulator.strict import StrictModel
from simulator.workload import WorkloadConfig
from simulator.yaml_input import load_yaml, read_yaml_text, yaml_error


class ModelConfig(StrictModel):
    name: str | None = Field(None, description="catalog name, e.g. `llama-3.1-8b` (see `simulate list models`)")
    config_json: str | None = Field(None, description="path to a Hugging Face config.json, instead of `name` (a `--set` of either replaces the other)")
    weight_dtype: Dtype = Field("bf16", description="weight format: bf16, fp16, fp8, int8, int4, fp4")
    activation_dtype: Dtype = Field("bf16", description="GEMM input format; fp8 with fp8 weights = W8A8 on FP8 tensor cores")
    kv_dtype: Dtype = Field("bf16", description="KV-cache element format")
    expert_weight_dtype: Dtype | None = Field(None, description="MoE routed experts' weight format when it differs from weight_dtype (gpt-oss: fp4 experts, bf16 rest); default weight_dtype")
    expert_activation_dtype: Dtype | None = Field(None, description="MoE routed experts' GEMM input format when it differs from activation_dtype (gpt-oss on Blackwell under vLLM's VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1: fp8, MXFP4 x MXFP8 experts); default activation_dtype")
    expert_kernel: Literal["auto", "marlin", "triton"] = Field("auto", description="MoE routed experts' kernel: `auto`, the one vLLM picks for the expert format, GPU and release (the kernel tables' default rows; Marlin for MXFP4 experts on Hopper under `cost_model.engine_version` before 0.12, which shipped no Triton MoE); `triton`, a Triton MoE: OpenAI's for MXFP4 experts on Hopper whatever the release (a pre-0.12 install with `triton_kernels` added by hand), vLLM's fused_moe for FP8 experts under FP8 inputs (on Blackwell, a run with VLLM_USE_FLASHINFER_MOE_FP8=0 and VLLM_MOE_USE_DEEP_GEMM=0; timed by the tables' Triton rows, which of the shipped profiles only B200's (and GB200, which reads it) carries, and refused with other kernel tables; on Hopper it is the default kernel under TP); `marlin`, vLLM's Marlin MoE for 4-bit experts with 16-bit inputs, chosen instead (gpt-oss on Hopper under VLLM_MXFP4_USE_MARLIN=1), padded to its tiles and timed by the tables' Marlin rows (on Hopper, at an expert shape timed only under the default kernel: that shape's rows, bounded below by Marlin's own compute rate measured at the nearest shape)")
    moe_routing: MoeRouting | None = Field(None, description="MoE: the token-to-expert routing the kernel tables' fused-MoE rows are read under, a power law over the experts (`power_law_1.2` is steeper: a decode batch reads fewer distinct experts, a long prefill waits on busier ones); default the model family's, as NVIDIA's aiconfigurator estimates it (1.2 for Mixtral, Qwen2/3-MoE, Qwen3.5, gpt-oss and MiniMax-M2; 1.01 for DeepSeek-style and other families). The roofline back end routes uniformly")
    max_model_len: int | None = Field(None, ge=2, description="longest prompt + output; default the model's max_position_embeddings")

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if (self.name is None) == (self.config_json is None):
            raise ValueError("give exactly one of `name` (a catalog model: `simulate list models`) or `config_json` "
                             "(a Hugging Face config.json path), e.g. --set model.name=llama-3.1-8b")
        return self


class HardwareConfig(StrictModel):
    gpu: str = Field("h100-sxm", description="catalog GPU, e.g. h100-sxm, h200, a100-80gb-sxm, l40s (see `simulate list gpus`)")
    gpus_per_node: int = Field(8, ge=1, description="GPUs per node; TP/PP beyond it crosses the inter-node link")
    intra_node_link: Literal["nvlink3", "nvlink4", "nvlink5", "infinity-fabric", "pcie4", "pcie5"] | None = Field(
        None, description="interconnect between GPUs of a node (TP collectives); default the GPU's own")
    inter_node_link: Literal["ib-ndr", "ib-hdr", "eth-200g", "pcie5"] | None = Field(
        None, description="interconnect between nodes, per GPU (TP/PP beyond a node); default the GPU's own")
    cost_per_gpu_hour: float | None = Field(None, ge=0, description="$ per GPU-hour; default the catalog's price")
    profile: str | None = Field(None, description="calibrated profile: a path (a relative one the file names is read from the scenario's folder when it is there, else from the working directory), a shipped name (e.g. h100_sxm-vllm), or `auto` (the shipped profile of this GPU); for cost_model.backend: calibrated or auto. It times this GPU only: a disaggregated pool on another GPU reads that GPU's shipped tables")


#: Replicas one run simulates at most: each is its own engines (100,000 take ~6 s and 0.6 GB
#: to build; ten million never finish on a laptop).
MAX_SIMULATED_REPLICAS = 100_000


class ParallelismConfig(StrictModel):
    tp: int = Field(1, ge=1, description="tensor-parallel degree (GPUs per pipeline stage)")
    pp: int = Field(1, ge=1, description="pipeline-parallel stages")
    replicas: int = Field(1, ge=1, le=MAX_SIMULATED_REPLICAS, description="independent copies of the model behind "
                          "the router (each simulated as its own engines: at most 100,000; a larger fleet is a "
                          "share of its traffic, simulated once)")
    dp: int = Field(
        1, ge=1, description="attention data-parallel ranks per copy (vLLM `--data-parallel-size`): each rank "
        "serves its own requests with its own scheduler and KV cache, attention and dense layers split tp "
        "ways; a MoE model's experts are split over all dp x tp GPUs, whose MoE layers run every rank's "
        "tokens together, so the ranks step in lockstep, each pass as long as its slowest rank's step. "
        "For a dense model the ranks are independent copies, as replicas are")
    expert_parallel: bool = Field(
        False, description="vLLM `--enable-expert-parallel`: a MoE model's routed experts are split by expert "
        "over the dp x tp GPUs (each holds whole experts and computes the tokens routed to them) instead of "
        "by width; the MoE layers then read expert-parallel kernel tables. No effect on dense models")


class PoolConfig(StrictModel):
    """One pool of a disaggregated deployment: identical instances of one parallel layout."""

    tp: int = Field(1, ge=1, description="tensor-parallel degree of each instance of this pool")
    pp: int = Field(1, ge=1, description="pipeline-parallel stages of each instance of this pool")
    replicas: int = Field(1, ge=1, le=MAX_SIMULATED_REPLICAS, description="instances in this pool, behind the router")
    dp: int = Field(1, ge=1, description="attention data-parallel ranks of each instance, as `parallelism.dp` "
                    "(an instance is then tp x pp x dp GPUs; the wide-EP layout of MoE decode pools)")
    expert_parallel: bool = Field(False, description="as `parallelism.expert_parallel`, for this pool's instances")
    gpu: str | None = Field(None, description="this pool's GPU (see `simulate list gpus`), e.g. prefill on H100 and "
                            "decode on A100 (Splitwise); default `hardware.gpu`. Pools on different GPUs sit on "
                            "different nodes")
    cost_per_gpu_hour: float | None = Field(None, ge=0, description="$ per GPU-hour of this pool's GPUs; default "
                                            "`hardware.cost_per_gpu_hour` for `hardware.gpu`, else the catalog's")


# Typed from the link catalog, so a new link needs no edit here.
KVLinkName = Literal[("auto", *LINKS)]  # type: ignore[valid-type]
# Typed from the decode roles, so a new hand-off protocol needs no edit here.
KVTransferProtocol = Literal[tuple(DECODE_ROLES)]  # type: ignore[valid-type]


class KVTransferConfig(StrictModel):
    """How a prompt's KV cache travels from a prefill instance to a decode instance."""

    link: KVLinkName = Field(
        "auto", description="link the KV moves over, per GPU; `auto`: the GPU's intra-node link when "
        "both instances sit on one node (instances are packed onto nodes in units of the pools' ratio, each "
        "unit's prefill instances first, none split over two nodes if it fits in one), else its inter-node link")
    bandwidth_gbps: float | None = Field(
        None, gt=0, description="GB/s per GPU per direction; default the link's")
    latency_ms: float | None = Field(
        None, ge=0, description="fixed cost per transfer (handshake, first byte), ms; default the link's latency")
    protocol: KVTransferProtocol = Field(
        "connector", description="how a request moves to its decode instance. `connector`: the KV is sent "
        "as soon as the prefill ends, beside both instances' iterations, and the decode instance admits "
        "the request once the KV has arrived and its blocks are free, recomputes the last prompt token and "
        "streams the first token (vLLM's KV connectors behind its P/D proxy: TTFT includes the transfer). "
        "`distserve`: the first token is the prefill instance's; "
        "DistServe's migration: after each iteration the decode instance accepts handed-off requests FCFS "
        "while the prompts it holds but has not yet scheduled take under 5% of its blocks, copies their KV "
        "itself (the copies delay its next iteration), and schedules a migrated request once the blocks of "
        "the running requests, of those held, and its own fit in the cache")


class DisaggregationConfig(StrictModel):
    """Separate prefill and decode pools (DistServe, vLLM disaggregated prefill).

    When present, it replaces `parallelism` (which must then be left at its defaults).
    """

    prefill: PoolConfig = Field(default_factory=PoolConfig)
    decode: PoolConfig = Field(default_factory=PoolConfig)
    kv_transfer: KVTransferConfig = Field(default_factory=KVTransferConfig)


class MemoryConfig(StrictModel):
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="fraction of GPU memory the engine may use (vLLM's flag)")
    block_size: int = Field(16, ge=1, description="tokens per KV block (DeepSeek-V3.2 and GLM-5: 64, which vLLM's sparse MLA kernels require)")
    runtime_reserve_gib: float = Field(1.0, ge=0, description="non-torch memory: CUDA context, CUDA graphs, NCCL buffers, GiB per GPU")
    kv_cache_tokens: int | None = Field(None, ge=1, description="force the KV capacity per replica, tokens (skips the memory plan; rounded up to whole blocks)")


class SLOConfig(StrictModel):
    ttft_ms: float | None = Field(None, gt=0, description="time-to-first-token target, ms")
    tpot_ms: float | None = Field(None, gt=0, description="time-per-output-token target, ms")
    e2e_ms: float | None = Field(None, gt=0, description="end-to-end latency target, ms")


class OutputConfig(StrictModel):
    dir: str | None = Field(None, description="output folder; default reports/<scenario>-<timestamp>/")
    report: bool = Field(True, description="write report.html and the PNG figures")
    iterations_csv: bool = Field(True, description="write iterations.csv (one row per iteration)")


class Scenario(StrictModel):
    name: str | None = Field(None, description="used in output names; default the file name")
    description: str | None = Field(None, description="free text shown in the report")
    model: ModelConfig
    hardware: HardwareConfig = Field(default_factory=HardwareConfig)
    parallelism: ParallelismConfig = Field(default_factory=ParallelismConfig)
    scheduler: SchedulerConfig = Field(
        default_factory=VllmV1Config, description="batching policy and its limits; left out, vLLM v1 "
        "with vLLM's defaults")
    router: RouterConfig = Field(default_factory=RouterConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    workload: WorkloadConfig
    slo: SLOConfig = Field(default_factory=SLOConfig)
    cost_model: CostModelConfig = Field(default_factory=CostModelConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    disaggregation: DisaggregationConfig | None = Field(
        None, description="serve prefill and decode on separate pools, moving the KV between them; "
        "each pool sets its own tp/pp/replicas, so `parallelism` must stay at its defaults")


@dataclass(frozen=True)
class LoadedScenario:
    """A validated scenario with where it came from: its file (None for a dict), the folder
    its relative paths resolve against, its YAML after overrides, and the overrides."""

    scenario: Scenario
    path: Path | None
    base_dir: Path
    text: str  # the YAML after overrides, for the report
    warnings: tuple[str, ...] = ()  # valid but probably unintended, e.g. switched_arrival_leftovers
    overrides: tuple[str, ...] = ()  # the `--set`s applied, to name one a later error comes from

    @property
    def name(self) -> str:
        if self.scenario.name:
            return self.scenario.name
        return self.path.stem if self.path else "scenario"


# -- overrides -----------------------------------------------------------------------
def apply_override(data: dict, assignment: str) -> None:
    """Apply `dotted.path=value` to a raw scenario dict; the value is parsed as YAML.

    `~dotted.path` removes a field the file sets, e.g. a policy-specific one when another
    override switches the policy (a value, even null, would still be an unknown field)."""
    if assignment.startswith("~"):
        if "=" in assignment:
            raise ConfigError(f"override {assignment!r} both removes a field and sets it", where="--set",
                              fix="write `~dotted.path` to remove a field, or dotted.path=value to set it")
        _remove_field(data, assignment[1:].strip())
        return
    if "=" not in assignment:
        raise ConfigError(f"override {assignment!r} has no '='", where="--set",
                          fix="write it as dotted.path=value, e.g. --set workload.arrival.rate=20")
    key, _, raw = assignment.partition("=")
    parts = [p.strip() for p in key.strip().split(".")]
    if not any(parts):
        raise ConfigError(f"override {assignment!r} has an empty path", where="--set",
                          fix="write it as dotted.path=value")
    if not all(parts):
        raise ConfigError(f"override {assignment!r} has an empty name between dots", where="--set",
                          fix="write the path with single dots, e.g. --set workload.arrival.rate=20")
    try:
        value = load_yaml(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError(f"cannot set {key}: {'.'.join(parts[: i + 1])} is not a section",
                              where="--set", fix="check the path against the scenario reference in README")
        node = child
    node[parts[-1]] = value


def _remove_field(data: dict, key: str) -> None:
    parts = [p for p in key.split(".") if p]
    node: Any = data
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if not parts or not isinstance(node, dict) or parts[-1] not in node:
        raise ConfigError(f"override '~{key}': the scenario sets no field {key!r} to remove", where="--set",
                          fix="check the path against the scenario file; `~dotted.path` removes a field it sets")
    del node[parts[-1]]


# -- discriminated unions ------------------------------------------------------------
def variants(field: FieldInfo) -> tuple[str, dict[str, type[BaseModel]]] | None:
    """(tag field, {tag: model}) of a discriminated-union field, else None.

    Read from the models themselves, so a new policy, arrival or length type shows up in
    the reference and in error messages without an edit elsewhere."""
    tag = field.discriminator if isinstance(field.discriminator, str) else _discriminator_in(field.annotation)
    if tag is None:
        return None
    return tag, {m.model_fields[tag].default: m for m in models_in(field.annotation)}


def _discriminator_in(ann: Any) -> str | None:
    """The tag field of an `Annotated[Union, Field(discriminator=...)]` nested in `ann`
    (pydantic lifts it onto the FieldInfo only when it is the whole annotation)."""
    if get_origin(ann) is Annotated:
        for meta in get_args(ann)[1:]:
            if isinstance(getattr(meta, "discriminator", None), str):
                return meta.discriminator
    return next((d for arg in get_args(ann) if (d := _discriminator_in(arg))), None)


def models_in(ann: Any) -> list[type[BaseModel]]:
    """The models anywhere in an annotation: unions, Optional and Annotated unwrapped."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [ann]
    return [m for arg in get_args(ann) for m in models_in(arg)]


def default_variant(field: FieldInfo, tag: str) -> str | None:
    """The tag a union field takes when its section is left out, if it has one."""
    if field.default_factory is None:
        return None
    return getattr(field.get_default(call_default_factory=True), tag, None)


# -- error formatting ----------------------------------------------------------------
def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The pydantic model class that owns the last element of `loc`, for fix hints."""
    cls: Any = Scenario
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if part in POLICIES and cls is not Scenario:
            cls = POLICIES[part].config
            continue
        field = getattr(cls, "model_fields", {}).get(part)
        if field is None:
            return _tagged(part) or None
        ann = field.annotation
        cls = next(iter(models_in(ann)), None) or _tagged(part)
        if cls is None:
            return None
    return cls if isinstance(cls, type) and issubclass(cls, BaseModel) else None


def _tagged(tag: Any) -> type[BaseModel] | None:
    if tag in POLICIES:
        return POLICIES[tag].config
    from simulator import workload as wl

    for obj in vars(wl).values():
        if isinstance(obj, type) and issubclass(obj, BaseModel):
            fld = obj.model_fields.get("type")
            if fld is not None and getattr(fld, "default", None) == tag:
                return obj
    return None


def _fix_for(err: dict) -> str:
    kind = err["type"]
    loc = tuple(err["loc"])
    if kind == "extra_forbidden":
        owner = _model_at(loc)
        allowed = sorted(owner.model_fields) if owner else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean `{close[0]}`? " if close else _other_variants_field(loc)
        remove = _removal(loc)
        return f"{hint}{remove}; allowed here: {', '.join(allowed)}" if allowed else remove
    if kind == "union_tag_invalid":
        return f"use one of: {err.get('ctx', {}).get('expected_tags', '')}"
    if kind == "union_tag_not_found":
        return _missing_tag_fix(loc, _tag_name(err))
    if kind == "missing":
        return "add this field (see the scenario reference in README)"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return "use a value in the allowed range"
    if kind == "literal_error":
        return f"use one of: {err.get('ctx', {}).get('expected', '')}"
    if kind == "value_error":  # our own validators' messages already say what to do
        return ""
    if kind == "string_type":  # YAML read the value as a number, a boolean, a list or a mapping
        field = _plain(loc)
        return ("quote the value to keep it text (unquoted, YAML reads 123, true and `a: b` as a number, a "
                f"boolean and a mapping): '...' in the file, or --set \"{field}='...'\"")
    if kind in ("int_type", "int_from_float") and isinstance(err.get("input"), float):
        value = err["input"]  # `1e3` reads as a number, but a count is written whole
        whole = f": {int(value)}" if value.is_integer() else ""
        return f"write a whole number{whole} (a count takes no exponent or decimal point)"
    if kind in ("model_type", "dict_type"):  # a section given a scalar or a list
        return f"give `{_plain(loc)}` as a section of fields (`key: value` lines under it), or set one of " \
               f"them with --set {_plain(loc)}.FIELD=VALUE"
    return "see the scenario reference in README for this field's type"


def _other_variants_field(loc: tuple) -> str:
    """Where a field this variant lacks belongs to another variant of the same section
    (`burstiness` on a poisson arrival is a gamma arrival's): that variant, as a hint."""
    if len(loc) < 3 or _tagged(loc[-2]) is None:
        return ""
    parent = _model_at(loc[:-2])
    field = getattr(parent, "model_fields", {}).get(loc[-3]) if parent else None
    found = variants(field) if field is not None else None
    if found is None:
        return ""
    tag, by_tag = found
    others = [t for t, m in by_tag.items() if t != loc[-2] and loc[-1] in m.model_fields]
    return f"`{loc[-1]}` belongs to {tag}: {' or '.join(map(str, others))}; " if others else ""


def _tag_name(err: dict) -> str:
    return str(err.get("ctx", {}).get("discriminator", "type")).strip("'\"")


def _missing_tag_fix(loc: tuple, tag: str) -> str:
    """Name the tag field and its allowed values: pydantic's message gives neither."""
    owner = _model_at(loc)
    field = owner.model_fields.get(loc[-1]) if owner else None
    found = variants(field) if field is not None else None
    if found is None:
        return f"add `{tag}` (see the scenario reference in README)"
    tag, by_tag = found
    default = default_variant(field, tag)
    example = f"`{tag}: {default}` (the default when the section is left out)" if default else \
        f"`{tag}: {next(iter(by_tag))}`"
    return f"add `{tag}`, one of: {', '.join(by_tag)}; e.g. {example}"


def _message_for(err: dict) -> str:
    if err["type"] == "union_tag_not_found":
        tag = _tag_name(err)
        return f"`{tag}` is missing: it picks which fields this section takes, so a written section needs it"
    return plain_message(err)


def plain_message(err: dict) -> str:
    """pydantic's message without its "Value error, " prefix (our validators' own words),
    and without the class a section is read into (`instance of ModelConfig`)."""
    if err["type"] == "model_type":
        return "expected a section of fields"
    return err["msg"].removeprefix("Value error, ")


def _plain(loc: tuple) -> str:
    """The field's dotted path as a file or `--set` writes it: `workload.arrival.rate`."""
    return ".".join(str(x) for x in loc if not (isinstance(x, str) and x != loc[-1] and _tagged(x) is not None))


def _removal(loc: tuple) -> str:
    return f"remove it (from the file, or with --set '~{_plain(loc)}')"


TAG_FIELDS = ("type", "policy")  # the fields that pick a section's variant


class OverrideOrigin:
    """Which override caused a problem at a field: (how to name it, whether it wrote the
    field itself). It did when its path is the field or a section above it, or lies below
    a section the file does not have (`--set foo.bar=1` made the unknown `foo`). An override
    that switched the field's section to another variant (`...type`, `...policy`) caused a
    problem there without writing it (a field the new variant lacks or needs). A `--set`
    below a section the file has is not blamed for that section's own errors (a typo in
    the file's `type` stays the file's). `typed` maps an assignment to the words the user
    typed for it, where they differ (a plan's `--set base.x=1` reaches its base as `x=1`)."""

    def __init__(self, overrides: list[str], written: dict | None = None, *, label: str = "--set",
                 typed: dict[str, str] | None = None):
        typed = typed or {}
        self.paths = [(a.lstrip("~").partition("=")[0].strip(), f"{label} '{typed.get(a, a)}'") for a in overrides]
        self.written = written

    def __call__(self, field: str) -> tuple[str, bool] | None:
        section = field.rpartition(".")[0]
        for path, named in reversed(self.paths):
            if path == field or field.startswith(path + "."):
                return named, True
            if path.startswith(field + "."):
                rest = path[len(field) + 1:]
                if rest in TAG_FIELDS or not _has_path(self.written, field):
                    return named, True
        for path, named in reversed(self.paths):
            if section and path in (f"{section}.{t}" for t in TAG_FIELDS):
                return named, False
        return None

    def below(self, field: str) -> str | None:
        """The last override that wrote inside section `field`: a party to a rule that
        relates the section's fields (min below max, one of two fields), not its sole author."""
        return next((named for path, named in reversed(self.paths) if path.startswith(field + ".")), None)



def blamed(exc: ServesimError, source: str | Path | None, named: str | None) -> ServesimError:
    """An error found past pydantic's field checks (a validator's own, or one raised while
    building the run), named as a validation error is: its file before the field, and the
    override that wrote the field."""
    if named is not None and "[from " not in exc.message:
        exc.message = f"{exc.message} [from {named}]"
    field = str(exc.where or "")
    if source is not None and not field.startswith(str(source)):
        exc.where = f"{source}: {field}" if field else str(source)
    exc.args = (exc.render(),)
    return exc


def override_behind(field: str, overrides: list[str] | tuple[str, ...]) -> str | None:
    """The `--set` that wrote `field` (a dotted path an error names), as a message tags it,
    for errors raised after validation; None for anything that is not a plain field path."""
    if not field or " " in field:
        return None
    found = OverrideOrigin(list(overrides))(field)
    return found[0] if found is not None and found[1] else None


def _has_path(data: Any, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def _dotted(loc: tuple) -> str:
    """`workload.arrival.rate (poisson)` rather than pydantic's `workload.arrival.poisson.rate`."""
    parts, tags = [], []
    for i, part in enumerate(loc):
        if i > 0 and i < len(loc) - 1 and isinstance(part, str) and _tagged(part) is not None:
            tags.append(part)
        else:
            parts.append(str(part))
    return ".".join(parts) + (f" ({', '.join(tags)})" if tags else "")


# pydantic's labels for the members of a plain (untagged) union in an error's location:
# `literal['minimise','minimize']`, `list[int]`, `int`. Not field names.
_UNION_MEMBER = re.compile(r"^(?:(?:literal|list|dict|tuple|set)\[.*\]|int|float|str|bool|none|function-.*)$")


def format_validation_error(exc: ValidationError, source: str, *, what: str = "scenario",
                            fix_for: Callable[[dict], str] = _fix_for,
                            origin: Callable[[str], tuple[str, bool] | None] | None = None,
                            within: Callable[[str], str | None] | None = None) -> ConfigError:
    """One error for every problem pydantic found, each with its field and fix (a plan
    passes its own `fix_for`, which knows the plan's fields). `origin` names the `--set`
    behind a field, so a problem the command line made is not blamed on the file; `within`
    names one that wrote inside a section whose own rule (a validator relating its fields)
    failed, as taking part in it."""
    said: dict[str, tuple[list[str], str]] = {}  # by field: a union's members' complaints are one line
    fixes: dict[str, str] = {}
    for err in exc.errors():
        members = [x for x in err["loc"] if isinstance(x, str) and _UNION_MEMBER.match(x)]
        err = {**err, "loc": tuple(x for x in err["loc"] if x not in members)}
        loc = _dotted(tuple(err["loc"])) or f"({what})"
        got = err.get("input")
        shown = "" if isinstance(got, dict) or err["type"] == "missing" else f" (got {got!r})"
        found = origin(_plain(tuple(err["loc"]))) if origin is not None and err["loc"] else None
        named, wrote = found or (None, False)
        by = f" [from {named}]" if named else ""
        if not named and within is not None and err["type"] == "value_error" and err["loc"]:
            section = ".".join(str(x) for x in err["loc"] if not (isinstance(x, str) and _tagged(x) is not None))
            party = within(section)
            by = f" [with {party}]" if party else ""
        message = _message_for(err)
        if members and loc in said:  # another form the field may take
            said[loc][0].append(message)
        else:
            said[loc] = ([message], f"{shown}{by}")
        fix = fix_for(err)
        if wrote and err["type"] == "extra_forbidden":
            instead = f"correct or drop {named}"
            fix = fix.replace(_removal(tuple(err["loc"])), instead)
            if instead not in fix:  # a plan's own wording
                fix = fix.replace("remove it", instead, 1)
        if fix:
            fixes[loc] = f"{fixes[loc]}; or {fix}" if loc in fixes else f"{loc}: {fix}"
    lines = [f"{loc}: {'; or '.join(messages)}{tail}" for loc, (messages, tail) in said.items()]
    n = len(lines)
    head = f"invalid {what} ({n} problem{'s' if n > 1 else ''}):\n  " + "\n  ".join(lines)
    return ConfigError(head, where=source, fix="\n       ".join(fixes.values()) or None)


# -- loading -------------------------------------------------------------------------
def load_scenario(path: str | Path | None = None, overrides: list[str] | None = None,
                  *, data: dict | None = None, overrides_label: str = "--set",
                  blame: Callable[[str], tuple[str, bool] | None] | None = None) -> LoadedScenario:
    """Read a scenario file (or a dict), apply `--set` overrides, validate strictly.

    An error an override caused names it, as `overrides_label` (a plan's own edits of its
    base are not `--set`s); `blame` answers for fields edited before this call."""
    source = str(path) if path is not None else "<scenario>"
    if data is None:
        if path is None:
            raise ConfigError("no scenario given", fix="pass a scenario file, e.g. scenarios/chatbot.yaml")
        p = Path(path)
        if p.is_dir():
            found = min(p.glob("*.yaml"), default=None)
            raise ConfigError("this is a folder, not a scenario file", where=source,
                              fix="pass one YAML file" + (f", e.g. {found}" if found else ""))
        if not p.is_file():
            raise ConfigError("scenario file not found", where=source,
                              fix="check the path; the project's example scenarios are in its scenarios/ folder")
        try:
            data = load_yaml(read_yaml_text(p, source))
        except yaml.YAMLError as exc:
            raise yaml_error(exc, source) from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError("a scenario must be a YAML mapping (key: value)", where=source,
                              fix="start from scenarios/chatbot.yaml")
        if "workload" not in data and {"base", "target"} & set(data):
            raise ConfigError("this is a capacity plan, not a scenario: it has a plan's `base` and "
                              "`target`", where=source, fix=f"run it with `simulate plan {source}`")
    else:
        data = _deepcopy(data)
    as_written = _deepcopy(data) if overrides else data  # the file's own arrival, for the warnings
    for assignment in overrides or []:
        apply_override(data, assignment)
        _one_model_source(data, assignment)
    if path is not None:
        _profile_beside_the_file(data, as_written, Path(path).resolve().parent)
    _default_tags(data, as_written)
    ours = OverrideOrigin(overrides or [], as_written, label=overrides_label)

    def origin(field: str) -> tuple[str, bool] | None:
        return ours(field) or (blame(field) if blame else None)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise format_validation_error(exc, source, origin=origin, within=ours.below) from None
    except ConfigError as exc:  # a validator's own error, raised through pydantic as it is
        found = origin(str(exc.where)) if exc.where else None
        raise blamed(exc, source, found[0] if found else None) from None
    base = Path(path).resolve().parent if path is not None else Path.cwd()
    text = yaml.safe_dump(_with_absolute_paths(data, base), sort_keys=False)
    return LoadedScenario(scenario, Path(path) if path is not None else None, base, text,
                          switched_arrival_leftovers(as_written, overrides or []) + _unread_profile(scenario)
                          + _swap_without_space(scenario) + _profile_beside_pools(scenario)
                          + _profile_off_catalog(scenario)
                          + _surprising_defaults(scenario, data),
                          tuple(overrides or ()) if overrides_label == "--set" else ())


# A model is named from the catalog or described by a config.json, never both.
_MODEL_SOURCES = ("name", "config_json")


def _one_model_source(data: dict, assignment: str) -> None:
    """`--set model.config_json=PATH` on a scenario that names a catalog model (or
    `model.name` on one that points to a config.json) replaces the other, as the user meant,
    rather than failing as two model sources."""
    key = assignment.partition("=")[0].strip()
    model = data.get("model")
    if assignment.startswith("~") or not isinstance(model, dict) or key not in {f"model.{f}" for f in _MODEL_SOURCES}:
        return
    field = key.split(".", 1)[1]
    if model.get(field) is not None:
        other = _MODEL_SOURCES[1 - _MODEL_SOURCES.index(field)]
        model.pop(other, None)


def _default_tags(data: dict, as_written: dict) -> None:
    """A section the file leaves out runs as its default variant (scheduler: vllm-v1); a
    `--set` that creates it with one field (`scheduler.enable_prefix_caching=false`) edits
    that default rather than a section without a variant."""
    for name, field in Scenario.model_fields.items():
        section = data.get(name)
        found = variants(field)
        if name in as_written or not isinstance(section, dict) or found is None:
            continue
        tag = found[0]
        default = default_variant(field, tag)
        if tag not in section and default is not None:
            section[tag] = default


def _surprising_defaults(scenario: Scenario, data: dict) -> tuple[str, ...]:
    """Defaults a hand-written scenario most likely did not mean: FP8 weights under 16-bit
    activations on a GPU with FP8 tensor cores (weight-only FP8, where vLLM serves an FP8
    checkpoint W8A8), and the datasheet roofline where measured kernel tables exist."""
    from simulator.cost.calibrated import NoShippedProfileError, shipped_profile_for
    from simulator.errors import CatalogError
    from simulator.hardware import get_gpu

    try:
        gpu = get_gpu(scenario.hardware.gpu)
    except CatalogError:
        return ()
    said = data.get("model") if isinstance(data.get("model"), dict) else {}
    m = scenario.model
    out = []
    if (m.weight_dtype == "fp8" and m.activation_dtype in ("bf16", "fp16") and "activation_dtype" not in said
            and "fp8" in gpu.peak_tflops):
        out.append(f"model.weight_dtype fp8 with the default activation_dtype {m.activation_dtype} runs weight-only "
                   "FP8 (W8A16); vLLM serves an FP8 checkpoint W8A8 on this GPU: add model.activation_dtype: fp8")
    cost = data.get("cost_model") if isinstance(data.get("cost_model"), dict) else {}
    if "backend" not in cost and scenario.cost_model.backend == "roofline" and scenario.disaggregation is None:
        try:
            tables = shipped_profile_for(gpu)
        except NoShippedProfileError:
            tables = None
        if tables:
            out.append(f"timed by the datasheet roofline (cost_model.backend's default), though {gpu.name} has "
                       f"measured kernel tables ({tables}), which docs/fidelity.md finds closer to measurements: "
                       "set cost_model.backend: auto to use them")
    return tuple(out)


def _swap_without_space(scenario: Scenario) -> tuple[str, ...]:
    """Swap preemption with no host space: valid, but every preemption then recomputes."""
    sched = scenario.scheduler
    if getattr(sched, "preemption_mode", None) != "swap" or sched.swap_space_gib > 0:
        return ()
    return ("scheduler.preemption_mode swap with swap_space_gib 0: no KV block fits in host memory, so every "
            "preemption recomputes (vLLM aborts the engine at the first one): give swap_space_gib > 0",)


def _profile_beside_pools(scenario: Scenario) -> tuple[str, ...]:
    """A named profile times `hardware.gpu`'s kernels only: a disaggregated pool on another
    GPU reads that GPU's shipped tables instead (Simulation._timer), which is said."""
    from simulator.errors import CatalogError
    from simulator.hardware import get_gpu

    dis, profile = scenario.disaggregation, scenario.hardware.profile
    if dis is None or profile in (None, "auto") or scenario.cost_model.backend == "roofline":
        return ()
    try:
        main = get_gpu(scenario.hardware.gpu).name
        elsewhere = {role: get_gpu(pool.gpu).name for role in ("prefill", "decode")
                     if (pool := getattr(dis, role)).gpu is not None and get_gpu(pool.gpu).name != main}
    except CatalogError:
        return ()  # the run names the unknown GPU
    if not elsewhere:
        return ()
    pools = " and ".join(f"the {role} pool on {gpu}" for role, gpu in elsewhere.items())
    unread = " (so it is not read at all)" if len(elsewhere) == 2 else ""
    return (f"hardware.profile {profile} times {main}'s kernels only: {pools} read{'s' if len(elsewhere) == 1 else ''} "
            f"that GPU's shipped tables{unread}",)


def _profile_off_catalog(scenario: Scenario) -> tuple[str, ...]:
    """A profile measured on a device outside the GPU catalog cannot be checked against
    `hardware.gpu` (a catalog GPU's profile is, and a mismatch refused): its kernel times
    stand for that GPU as they are, which is said."""
    from calibration.profile import profile_origin

    profile = scenario.hardware.profile
    if profile in (None, "auto") or scenario.cost_model.backend == "roofline":
        return ()
    try:
        origin = profile_origin(profile)
    except (ServesimError, OSError):
        return ()  # the run says what is wrong with the file
    if origin.gpu is not None:
        return ()
    device = "a CPU" if origin.device_kind == "cpu" else "a GPU the catalog does not hold"
    return (f"hardware.profile {profile} was measured on {origin.gpu_name} ({device}): its kernel times stand "
            f"for hardware.gpu {scenario.hardware.gpu} unchanged, with {scenario.hardware.gpu}'s memory and links",)


def _unread_profile(scenario: Scenario) -> tuple[str, ...]:
    """A profile the roofline back end does not read: valid, but most likely not meant."""
    profile = scenario.hardware.profile
    if scenario.cost_model.backend != "roofline" or profile in (None, "auto"):
        return ()
    return (f"hardware.profile {profile} is not read: cost_model.backend is roofline (set it to calibrated "
            "to time kernels from the profile)",)


def _profile_beside_the_file(data: dict, as_written: dict, folder: Path) -> None:
    """A `hardware.profile` the file names by a relative path is read from the file's folder,
    as its trace and config.json are, when it is there; else from the working directory
    (where calibration writes it, and where a `--set` path is meant)."""
    hardware, written = data.get("hardware"), as_written.get("hardware")
    if not isinstance(hardware, dict) or not isinstance(written, dict):
        return
    value = hardware.get("profile")
    if not isinstance(value, str) or value != written.get("profile") or Path(value).expanduser().is_absolute():
        return
    beside = folder / value
    if beside.is_file():
        hardware["profile"] = str(beside)


# The scenario's file fields: (section path, key, whether it is read from the scenario's
# folder; a hardware.profile found beside the file was made absolute above, and any other is
# read from the working directory, where calibration writes it).
_FILE_FIELDS = ((("workload", "arrival"), "path", True), (("workload", "prompt_tokens"), "path", True),
                (("workload", "output_tokens"), "path", True), (("model",), "config_json", True),
                (("hardware",), "profile", False))


def _with_absolute_paths(data: dict, base: Path) -> dict:
    """The scenario as saved beside a run's outputs (scenario.yaml): relative file paths that
    name an existing file made absolute, so the saved copy re-runs from its own folder."""
    out = _deepcopy(data)
    for section, key, from_base in _FILE_FIELDS:
        node = out
        for part in section:
            node = node.get(part) if isinstance(node, dict) else None
        value = node.get(key) if isinstance(node, dict) else None
        if not isinstance(value, str) or not value or Path(value).expanduser().is_absolute():
            continue
        found = (base if from_base else Path.cwd()) / Path(value).expanduser()
        if found.is_file():
            node[key] = str(found.resolve())
    return out


def switched_arrival_leftovers(as_written: dict, overrides: list[str]) -> tuple[str, ...]:
    """Fields of the file's arrival that outlive a `--set` switching it to a closed loop.

    An open loop's `rate` (and `burstiness`) is also a closed loop's send-rate cap (vLLM
    bench serve's --request-rate under --max-concurrency), so `--set
    workload.arrival.type=closed_loop` on a Poisson scenario validates yet paces its clients
    at the old rate: say so. Between open loops a kept rate means what it meant."""
    section = ("workload", "arrival")
    written: Any = as_written
    for part in section:
        written = written.get(part) if isinstance(written, dict) else None
    if not isinstance(written, dict):
        return ()
    prefix = ".".join(section) + "."
    touched = {a.lstrip("~").partition("=")[0].strip() for a in overrides}
    switch = next((a for a in reversed(overrides)
                   if a.partition("=")[0].strip() == prefix + "type" and not a.startswith("~")), None)
    if switch is None:
        return ()
    new_type = str(load_yaml(switch.partition("=")[2]) if switch.partition("=")[2].strip() else None)
    old_type = written.get("type")
    if new_type != "closed_loop" or old_type in (None, "closed_loop"):
        return ()  # between open loops a kept rate or burstiness means what it meant
    meaning = {"rate": "caps how fast the clients send", "burstiness": "shapes the capped sending"}
    kept = [k for k in written if k in meaning and prefix + k not in touched]
    return tuple(
        f"--set {switch}: the file's `{k}: {written[k]}`, written for {old_type}, still applies and now "
        f"{meaning[k]} (as vllm bench serve's --request-rate under --max-concurrency); drop it with "
        f"--set '~{prefix}{k}' if it is not meant"
        for k in kept)


def _deepcopy(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _deepcopy(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_deepcopy(v) for v in d]
    return d
