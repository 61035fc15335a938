"""The plan file: a base scenario, a search space, a target and an SLO, validated strictly.

A plan is YAML like a scenario and goes through the same kind of strict pydantic models
(`extra="forbid"`), so a misspelt knob is an error naming the field and the fix rather
than a silently ignored dimension of a sweep that takes minutes.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from simulator import __version__
from simulator.config import (
    KVTransferConfig,
    LoadedScenario,
    OverrideOrigin,
    PoolConfig,
    Scenario,
    format_validation_error,
    load_scenario,
)
from simulator.dtypes import DTYPE_BYTES, Dtype
from simulator.errors import ConfigError, ServesimError
from simulator.hardware import get_gpu
from simulator.scheduler import POLICIES
from simulator.strict import StrictModel
from simulator.yaml_input import load_yaml, read_yaml_text, yaml_error

#: Arrival processes whose rate the search can turn (rate-driven open loops).
RATE_ARRIVALS = ("poisson", "gamma", "constant")
PERCENTILE_KEYS = ("mean", "p50", "p90", "p95", "p99")


# -- SLO ---------------------------------------------------------------------------------
class PercentileLimits(StrictModel):
    """Upper limits on statistics of one per-request latency, ms (numpy linear percentiles)."""

    mean: float | None = Field(None, gt=0, description="mean at most this, ms")
    p50: float | None = Field(None, gt=0, description="median at most this, ms")
    p90: float | None = Field(None, gt=0, description="90th percentile at most this, ms")
    p95: float | None = Field(None, gt=0, description="95th percentile at most this, ms")
    p99: float | None = Field(None, gt=0, description="99th percentile at most this, ms")

    @model_validator(mode="after")
    def _some(self) -> PercentileLimits:
        if not self.limits():
            raise ValueError("give at least one of mean, p50, p90, p95, p99 (ms)")
        return self

    def limits(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in PERCENTILE_KEYS if getattr(self, k) is not None}


class AttainmentSLO(StrictModel):
    """A share of requests that must meet every per-request limit (goodput's definition)."""

    ttft_ms: float | None = Field(None, gt=0, description="per-request TTFT limit, ms")
    tpot_ms: float | None = Field(None, gt=0, description="per-request TPOT limit, ms")
    e2e_ms: float | None = Field(None, gt=0, description="per-request E2E limit, ms")
    min_fraction: float = Field(0.99, gt=0, le=1, description="share of measured requests that must meet them all")

    @model_validator(mode="after")
    def _some(self) -> AttainmentSLO:
        if not self.limits():
            raise ValueError("give at least one of ttft_ms, tpot_ms, e2e_ms")
        return self

    def limits(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in ("ttft_ms", "tpot_ms", "e2e_ms") if getattr(self, k) is not None}


class PlanSLO(StrictModel):
    """Percentile limits AND/OR an attainment target; a rate passes only if all hold."""

    ttft_ms: PercentileLimits | None = Field(None, description="limits on TTFT statistics, e.g. {p99: 2000}")
    tpot_ms: PercentileLimits | None = Field(None, description="limits on TPOT statistics, e.g. {p99: 100}")
    e2e_ms: PercentileLimits | None = Field(None, description="limits on E2E statistics")
    attainment: AttainmentSLO | None = Field(None, description="e.g. {ttft_ms: 2000, tpot_ms: 100, min_fraction: 0.99}")

    @model_validator(mode="after")
    def _some(self) -> PlanSLO:
        if not (self.ttft_ms or self.tpot_ms or self.e2e_ms or self.attainment):
            raise ValueError("give at least one limit: ttft_ms, tpot_ms, e2e_ms or attainment")
        return self

    def per_request_limits(self) -> dict[str, float]:
        """Limits for the scenario's `slo` section (goodput in reports): attainment first,
        else the tightest percentile limit of each metric."""
        if self.attainment is not None:
            return self.attainment.limits()
        out = {}
        for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
            lim = getattr(self, key)
            if lim is not None:
                out[key] = min(lim.limits().values())
        return out

    def describe(self) -> str:
        parts = []
        for key, label in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2e_ms", "E2E")):
            lim = getattr(self, key)
            if lim is not None:
                parts += [f"{stat} {label} <= {_ms(v)}" for stat, v in lim.limits().items()]
        if self.attainment is not None:
            a = self.attainment
            lims = " and ".join(f"{k.removesuffix('_ms').upper()} <= {_ms(v)}" for k, v in a.limits().items())
            parts.append(f">= {a.min_fraction:.1%} of requests with {lims}")
        return ", ".join(parts)


def _ms(v: float) -> str:
    return f"{v / 1000:g} s" if v >= 1000 else f"{v:g} ms"


# -- search space ------------------------------------------------------------------------
class SchedulerSpace(StrictModel):
    """Scheduler policies and knob values to try; a knob applies to the policies that have it.

    Omitted lists keep the base scenario's setting; `null` in a list means the policy's
    own default (e.g. vLLM's budget for the GPU).
    """

    policy: list[str] | None = Field(None, min_length=1, description="batching policies, e.g. [vllm-v1, vllm-v0]")
    max_num_batched_tokens: list[int | None] | None = Field(None, min_length=1, description="token budgets per iteration")
    max_num_seqs: list[int | None] | None = Field(None, min_length=1, description="most sequences running at once")
    enable_chunked_prefill: list[bool] | None = Field(None, min_length=1, description="vllm-v1 chunked prefill on/off")
    max_batch_size: list[int] | None = Field(None, min_length=1, description="static/dynamic batch sizes")
    max_wait_ms: list[float] | None = Field(None, min_length=1, description="dynamic batching wait, ms")

    def knobs(self) -> dict[str, list]:
        return {k: v for k, v in self.__dict__.items() if k != "policy" and v is not None}


class PoolSpace(StrictModel):
    """The layouts of one disaggregated pool to try: the product of its lists."""

    tp: list[Annotated[int, Field(ge=1)]] = Field([1], min_length=1, description="tensor-parallel degrees of each instance")
    pp: list[Annotated[int, Field(ge=1)]] = Field([1], min_length=1, description="pipeline-parallel stages of each instance")
    replicas: list[Annotated[int, Field(ge=1)]] = Field(
        [1], min_length=1, description="instances of this pool in one deployment unit")
    dp: list[Annotated[int, Field(ge=1)]] = Field([1], min_length=1, description="attention data-parallel ranks of each instance")
    expert_parallel: list[bool] = Field([False], min_length=1, description="expert parallelism off/on (MoE models)")
    gpu: list[str] | None = Field(None, min_length=1, description="this pool's GPUs to try (prefill on one type, "
                                  "decode on another); default the space's `gpu`")
    cost_per_gpu_hour: float | None = Field(None, ge=0, description="this pool's $ per GPU-hour; default `prices`, "
                                            "else the catalog's")


class DisaggregationSpace(StrictModel):
    """Disaggregated layouts to try: every prefill layout with every decode layout.

    One unit (its prefill and decode instances together) is what `space.replicas` counts:
    a deployment of N units runs N × each pool's instances behind one router, the way
    DistServe and aiconfigurator size prefill:decode ratios."""

    prefill: PoolSpace = Field(default_factory=PoolSpace, description="prefill pool layouts, e.g. {tp: [2, 4]}")
    decode: PoolSpace = Field(default_factory=PoolSpace, description="decode pool layouts, e.g. {tp: [4, 8]}")
    kv_transfer: KVTransferConfig | None = Field(
        None, description="how the KV moves between the pools; default the base's, else the scenario default")


class SearchSpace(StrictModel):
    """The configurations to compare: the product of every list (duplicates removed)."""

    gpu: list[str] | None = Field(None, min_length=1, description="catalog GPUs (see `simulate list gpus`); default the base's")
    tp: list[int] | None = Field(None, min_length=1, description="tensor-parallel degrees; default the base's")
    pp: list[int] | None = Field(None, min_length=1, description="pipeline-parallel degrees; default the base's")
    dp: list[int] | None = Field(None, min_length=1, description="attention data-parallel ranks per replica "
                                 "(MoE models: the experts span dp x tp GPUs); default the base's")
    expert_parallel: list[bool] | None = Field(
        None, min_length=1, description="expert parallelism off/on (vLLM --enable-expert-parallel; MoE models "
        "only, dense models keep one point); default the base's")
    replicas: Literal["minimise", "minimize"] | list[int] = Field(
        "minimise", description="replica counts allowed, or `minimise`: as many as the target needs")
    scheduler: SchedulerSpace = Field(default_factory=SchedulerSpace)
    disaggregation: DisaggregationSpace | None = Field(
        None, description="disaggregated prefill/decode layouts to try as well; default the base's, if it "
        "is disaggregated")
    colocated: bool | None = Field(
        None, description="search the colocated layouts (tp, pp, dp) too; default yes, except for a "
        "disaggregated base whose space names no tp, pp or dp")
    weight_dtype: list[Dtype] | None = Field(None, min_length=1, description="weight formats; default the base's")
    kv_dtype: list[Dtype] | None = Field(None, min_length=1, description="KV-cache formats; default the base's")
    activation_dtype: Literal["auto"] | list[Dtype] = Field(
        "auto", description="`auto`: W8A8 where the GPU has tensor cores for an 8-bit weight "
        "dtype (what vLLM runs), else the base's activation dtype (weight-only)")

    # Field validators, not one for the model: the error then names `space.tp`, and the
    # --set that wrote it.
    @field_validator("tp", "pp", "dp")
    @classmethod
    def _positive_sizes(cls, values: list[int] | None) -> list[int] | None:
        for v in values or []:
            if v < 1:
                raise ValueError("values must be >= 1: list whole numbers such as [1, 2, 4]")
        return values

    @field_validator("replicas")
    @classmethod
    def _positive_replicas(cls, replicas):
        if isinstance(replicas, list) and not replicas:
            raise ValueError("an empty list: give the counts to try, e.g. [1, 2, 4], or minimise")
        if isinstance(replicas, list) and any(r < 1 for r in replicas):
            raise ValueError("values must be >= 1: list whole numbers such as [1, 2, 4], or write minimise")
        return replicas


class Target(StrictModel):
    """A rate to carry at least cost, or a budget to carry the most rate under."""

    rate: float | None = Field(None, gt=0, description="requests per second to carry")
    max_usd_per_hour: float | None = Field(None, gt=0, description="budget, $ per hour (caps a rate target too)")
    max_gpus: int | None = Field(None, ge=1, description="budget, GPUs (caps a rate target too)")
    headroom: float = Field(0.0, ge=0, lt=1, description="spare capacity to keep: replicas are sized for rate × (1 + headroom)")

    @model_validator(mode="after")
    def _one(self) -> Target:
        if self.rate is None and self.max_usd_per_hour is None and self.max_gpus is None:
            raise ValueError("give `rate` (req/s to carry) or a budget: `max_usd_per_hour` and/or `max_gpus`")
        return self

    @property
    def mode(self) -> str:
        return "rate" if self.rate is not None else "budget"


class SearchSettings(StrictModel):
    """How each configuration's maximum sustainable rate is searched (defaults in README)."""

    requests_per_point: int = Field(600, ge=50, description="requests simulated per probed rate, at least")
    flight_multiple: float = Field(12.0, ge=2, description="each run simulates at least this × the requests in flight (Little: rate × mean E2E)")
    max_requests_per_point: int = Field(10000, ge=50, description="cap on the requests of one run")
    warmup_fraction: float = Field(0.1, ge=0, lt=0.5, description="first share of requests left out of SLO checks")
    tolerance: float = Field(0.05, gt=0, lt=1, description="stop when (hi - lo)/lo is at most this")
    max_probes: int = Field(16, ge=3, description="most simulated rates per configuration")
    stability_growth: float = Field(1.3, ge=1, description="unstable if median TTFT (or TPOT) of the last third > this × the middle third's + slack")
    stability_slack_ms: float = Field(100.0, ge=0, description="absolute slack of the stability test for TTFT, ms (TPOT: 1/20 of it)")
    early_stop: bool = Field(True, description="stop a run once its SLO verdict is decided or its queue runs away")
    queue_factor: float = Field(4.0, gt=0, description="early stop when the waiting queue exceeds this × max_num_seqs")
    seed: int | None = Field(None, ge=0, description="workload seed for every configuration and rate; default the base's")
    verify: bool = Field(True, description="re-simulate the recommendation with all its replicas at the target")
    verify_requests: int | None = Field(None, ge=100, description="requests of that run; default requests_per_point × replicas, 2000 to 20000")
    max_verify_bumps: int = Field(3, ge=0, description="replicas the verification may add before trying the runner-up")
    max_refine_runs: int = Field(6, ge=0, description="whole-deployment runs after the verification that test what "
                                 "pooling replicas buys: fewer replicas (rate target) or a higher rate (budget)")

    @model_validator(mode="after")
    def _cap_above_floor(self) -> SearchSettings:
        if self.max_requests_per_point < self.requests_per_point:
            raise ValueError(f"max_requests_per_point ({self.max_requests_per_point}) is below requests_per_point "
                             f"({self.requests_per_point}), which is a floor: raise the cap or lower the floor")
        return self


class Plan(StrictModel):
    name: str | None = Field(None, description="used in output names; default the file name")
    description: str | None = None
    base: str | dict[str, Any] = Field(description="scenario YAML path (relative to the plan file) or an inline scenario")
    overrides: list[str] = Field(default_factory=list, description="`dotted.path=value` edits of the base, like --set")
    space: SearchSpace = Field(default_factory=SearchSpace)
    target: Target
    slo: PlanSLO
    prices: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict, description="$ per GPU-hour by GPU name; default the catalog's")
    search: SearchSettings = Field(default_factory=SearchSettings)


# -- loading -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigPoint:
    """One configuration of the space: its scenario (one replica) and its identity."""

    key: str
    label: str
    params: dict
    scenario: dict

    def task(self, plan: LoadedPlan) -> dict:
        """A JSON-able work item (the same for local processes and Ray workers)."""
        return {"key": self.key, "label": self.label, "params": self.params, "scenario": self.scenario,
                "base_dir": str(plan.base.base_dir), "slo": plan.plan.slo.model_dump(),
                "search": plan.plan.search.model_dump()}


@dataclass(frozen=True)
class LoadedPlan:
    plan: Plan
    path: Path | None
    base: LoadedScenario
    base_data: dict
    text: str
    points: list[ConfigPoint] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.plan.name or (self.path.stem if self.path else "plan")


def _model_at(loc: tuple) -> type[BaseModel] | None:
    cls: Any = Plan
    for part in loc[:-1]:
        fld = getattr(cls, "model_fields", {}).get(part) if isinstance(part, str) else None
        if fld is None:
            continue
        nxt = fld.annotation
        for cand in (nxt, *getattr(nxt, "__args__", ())):
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                cls = cand
                break
        else:
            return None
    return cls if isinstance(cls, type) and issubclass(cls, BaseModel) else None


def _fix(err: dict) -> str:
    loc = tuple(err["loc"])
    if err["type"] == "extra_forbidden":
        owner = _model_at(loc)
        allowed = sorted(owner.model_fields) if owner else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean `{close[0]}`? " if close else ""
        return f"{hint}remove it; allowed here: {', '.join(allowed)}"
    if err["type"] == "missing":
        return "add this field (see `## Capacity planning` in README, or scenarios/plans/)"
    if err["type"] == "literal_error":
        return f"use one of: {err.get('ctx', {}).get('expected', '')}"
    if err["type"] == "value_error":  # our validators' messages already say what to do
        return ""
    return "see `## Capacity planning` in README for this field"


def _read_yaml(path: Path, what: str) -> dict:
    if path.is_dir():
        raise ConfigError(f"this is a folder, not a {what}", where=str(path),
                          fix="pass one YAML file, e.g. scenarios/plans/tiny.yaml")
    if not path.is_file():
        raise ConfigError(f"{what} not found", where=str(path),
                          fix="check the path; example plans live in scenarios/plans/")
    try:
        data = load_yaml(read_yaml_text(path, str(path)))
    except yaml.YAMLError as exc:
        raise yaml_error(exc, str(path)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"a {what} must be a YAML mapping (key: value)", where=str(path),
                          fix="start from scenarios/plans/tiny.yaml")
    return data


SCENARIO_ONLY = ("workload", "model", "hardware", "scheduler")


def _refuse_a_scenario(data: dict, source: str) -> None:
    """A scenario passed where a plan goes would list every plan field as a problem; say
    what it is instead."""
    if "base" not in data and "target" not in data and any(k in data for k in SCENARIO_ONLY):
        found = ", ".join(k for k in SCENARIO_ONLY if k in data)
        raise ConfigError(f"this is a scenario, not a plan: it has a scenario's sections ({found}) and "
                          "no plan `base` or `target`", where=source,
                          fix=f"run it with `simulate run {source}`, or write a plan whose `base:` names it "
                              "(as scenarios/plans/bench-100.yaml names ../chatbot.yaml)")


def load_plan(path: str | Path | None = None, *, data: dict | None = None,
              overrides: list[str] | None = None) -> LoadedPlan:
    """Read and validate a plan, its base scenario and every configuration of its space.
    `overrides` are the `--set` edits already in `data`: an error they caused names them."""
    source = str(path) if path is not None else "<plan>"
    if data is None:
        if path is None:
            raise ConfigError("no plan given", fix="pass a plan file, e.g. scenarios/plans/tiny.yaml")
        data = _read_yaml(Path(path), "plan file")
    _refuse_a_scenario(data, source)
    overrides = overrides or []
    as_written = _read_yaml(Path(path), "plan file") if overrides and path is not None else None
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        raise format_validation_error(exc, source, what="plan", fix_for=_fix,
                                      origin=OverrideOrigin(overrides, as_written)) from None
    plan_dir = Path(path).resolve().parent if path is not None else Path.cwd()
    base = _load_base(plan, plan_dir, source, overrides)
    base_data = load_yaml(base.text)
    arrival = base.scenario.workload.arrival.type
    if arrival not in RATE_ARRIVALS:
        raise ConfigError(f"the base scenario's arrival is `{arrival}`; a plan searches over the "
                          "arrival rate", where=f"{source}: base workload.arrival",
                          fix=f"use an open-loop arrival with a rate: {', '.join(RATE_ARRIVALS)} "
                          "(its rate is ignored: the search sets it)")
    _check_base(base, source)
    loaded = LoadedPlan(plan, Path(path) if path is not None else None, base, base_data,
                        yaml.safe_dump(data, sort_keys=False))
    return replace(loaded, points=expand(loaded, source))


def _load_base(plan: Plan, plan_dir: Path, source: str, user_sets: list[str]) -> LoadedScenario:
    """The base scenario with the plan's `overrides`; an error names the plan's edit or the
    user's `--set base....` that caused it, and a removal hint says how a plan removes."""
    label = f"{source}'s overrides"
    inline = not isinstance(plan.base, str)
    try:
        if not inline:
            p = Path(plan.base)
            p = p if p.is_absolute() else plan_dir / p
            if p.is_dir():
                raise ConfigError(f"base scenario {plan.base!r} is a folder ({p})", where=f"{source}: base",
                                  fix="name one scenario file, relative to the plan file")
            if not p.is_file():
                raise ConfigError(f"base scenario {plan.base!r} not found (looked in {p})",
                                  where=f"{source}: base",
                                  fix="give a path relative to the plan file, or an inline scenario")
            return load_scenario(p, plan.overrides, overrides_label=label)
        loaded = load_scenario(data=plan.base, overrides=plan.overrides, overrides_label=label,
                               blame=_base_sets_origin(user_sets))
        return replace(loaded, base_dir=plan_dir)
    except ServesimError as exc:
        if exc.fix:  # a removal: in the plan's overrides, or a --set through `base.` when inline
            exc.fix = re.sub(r"--set '~([^']*)'", (lambda m: f"--set '~base.{m[1]}'") if inline
                             else (lambda m: f"`~{m[1]}` in the plan's `overrides`"), exc.fix)
        if inline or not str(exc.where or "").startswith(source):
            exc.where = f"{source}: base" + (f" ({exc.where})" if exc.where and exc.where != "<scenario>" else "")
        exc.args = (exc.render(),)
        raise


def _base_sets_origin(user_sets: list[str]):
    """The user's `--set base.x=...` edits of an inline base, named as they were typed."""
    typed = {a.replace("base.", "", 1): a for a in user_sets if a.lstrip("~").startswith("base.")}
    return OverrideOrigin(list(typed), typed=typed)


def _check_base(base: LoadedScenario, source: str) -> None:
    """Errors every configuration would share (an unknown model, a missing length file)
    are the plan's errors, not a column of identical infeasible rows."""
    from simulator.simulation import resolve_model
    from simulator.workload import build_workload

    try:
        resolve_model(base.scenario, base.base_dir)
        build_workload(base.scenario.workload.model_copy(update={"num_requests": 10, "duration_s": None}),
                       base.base_dir)
    except ServesimError as exc:
        exc.where = f"{source}: base" + (f" ({exc.where})" if exc.where else "")
        exc.args = (exc.render(),)
        raise


def _check_gpu(name: str, where: str) -> str:
    try:
        return get_gpu(name).name
    except ServesimError as exc:
        exc.where = where
        exc.args = (exc.render(),)
        raise


# -- the space -------------------------------------------------------------------------------
def _activation(space: SearchSpace, weight: str, gpus: list[str], base_act: str) -> list[str]:
    """`auto`: W8A8 where every GPU the point runs on has 8-bit tensor cores for the weight
    dtype (what vLLM runs), else weight-only."""
    if space.activation_dtype != "auto":
        return list(space.activation_dtype)
    if weight in ("fp8", "int8") and all(weight in get_gpu(g).peak_tflops for g in gpus):
        return [weight]
    return [base_act]


def _schedulers(space: SchedulerSpace, base_sched: dict, source: str) -> list[dict]:
    policies = space.policy or [base_sched["policy"]]
    for p in policies:
        if p not in POLICIES:
            raise ConfigError(f"unknown scheduler policy {p!r}", where=f"{source}: space.scheduler.policy",
                              fix=f"use one of: {', '.join(POLICIES)}")
    knobs = space.knobs()
    for knob in knobs:
        if not any(knob in POLICIES[p].config.model_fields for p in policies):
            raise ConfigError(f"no policy in {policies} has `{knob}`", where=f"{source}: space.scheduler.{knob}",
                              fix="remove it, or add a policy that has it (see `simulate list policies`)")
    out: list[dict] = []
    for p in policies:
        fields = POLICIES[p].config.model_fields
        keep = ({k: v for k, v in base_sched.items() if k in fields and v is not None}
                if p == base_sched["policy"] else {})
        mine = {k: v for k, v in knobs.items() if k in fields}
        for values in itertools.product(*mine.values()):
            d = {**keep, "policy": p}
            for k, v in zip(mine, values, strict=True):
                if v is None:
                    d.pop(k, None)
                else:
                    d[k] = v
            if d not in out:
                out.append(d)
    return out


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def expand(loaded: LoadedPlan, source: str = "<plan>") -> list[ConfigPoint]:
    """Every distinct configuration of the space as a one-replica scenario dict."""
    plan, base = loaded.plan, loaded.base.scenario
    space, s = plan.space, plan.search
    gpus = [_check_gpu(g, f"{source}: space.gpu") for g in (space.gpu or [base.hardware.gpu])]
    from simulator.simulation import resolve_model

    moe = resolve_model(base, loaded.base.base_dir).is_moe  # expert parallelism means nothing otherwise
    layouts = _colocated_layouts(loaded, source, moe) + _disaggregated_layouts(loaded, source, moe)
    weights = space.weight_dtype or [base.model.weight_dtype]
    kvs = space.kv_dtype or [base.model.kv_dtype]
    scheds = _schedulers(space.scheduler, loaded.base_data.get("scheduler") or base.scheduler.model_dump(), source)
    varying = {k for k, v in (("gpu", gpus), ("weight_dtype", weights), ("kv_dtype", kvs), ("scheduler", scheds))
               if len(v) > 1}
    varying |= {k for k in ("tp", "pp", "dp", "expert_parallel")
                if len({lay.get(k) for lay in layouts if "pools" not in lay}) > 1}
    if len({d["policy"] for d in scheds}) > 1:
        varying.add("policy")
    base_gpu = get_gpu(base.hardware.gpu).name
    prices = {_check_gpu(g, f"{source}: prices"): v for g, v in plan.prices.items()}
    points: dict[str, ConfigPoint] = {}
    for gpu, layout, sched, w, kv in itertools.product(gpus, layouts, scheds, weights, kvs):
        pools = json.loads(json.dumps(layout["pools"])) if "pools" in layout else None
        if pools and all("gpu" in p for p in pools.values()):
            gpu = pools["decode"]["gpu"]  # both pools name theirs: the space's GPU plays no part
        for p in (pools or {}).values():
            if p.get("gpu") == gpu:
                del p["gpu"]  # the run's own GPU: one point, however it is named
            elif "gpu" not in p or "cost_per_gpu_hour" in p:
                continue  # priced as the run's GPU, or by the pool itself
            elif p["gpu"] in prices:
                p["cost_per_gpu_hour"] = prices[p["gpu"]]
            elif p["gpu"] == base_gpu and base.hardware.cost_per_gpu_hour is not None:
                p["cost_per_gpu_hour"] = base.hardware.cost_per_gpu_hour  # the base's price for its GPU
        run_on = [gpu, *(p["gpu"] for p in (pools or {}).values() if "gpu" in p)]
        for act in _activation(space, w, run_on, base.model.activation_dtype):
            d = json.loads(json.dumps(loaded.base_data))
            d.pop("output", None)
            d["name"] = loaded.name
            d.setdefault("model", {}).update(weight_dtype=w, kv_dtype=kv, activation_dtype=act)
            hw = d.setdefault("hardware", {})
            hw["gpu"] = gpu
            if gpu != base_gpu:
                hw.pop("cost_per_gpu_hour", None)  # the base's price is for the base's GPU
            if gpu in prices:
                hw["cost_per_gpu_hour"] = prices[gpu]
            if pools is not None:
                d.pop("parallelism", None)
                d["disaggregation"] = {**json.loads(json.dumps(pools)),
                                       **({"kv_transfer": dict(layout["kv_transfer"])} if "kv_transfer" in layout
                                          else {})}
            else:
                d.pop("disaggregation", None)
                d["parallelism"] = {**layout, "replicas": 1}
            d["scheduler"] = dict(sched)
            wl = d["workload"]
            wl["arrival"]["rate"] = 1.0  # set per probe; fixed here so the key ignores the base's rate
            wl["num_requests"] = s.requests_per_point
            wl.pop("duration_s", None)
            wl["seed"] = s.seed if s.seed is not None else base.workload.seed
            d["slo"] = plan.slo.per_request_limits()
            shape = ({"tp": None, "pp": None, "dp": None, "expert_parallel": False, "pools": pools}
                     if pools is not None else dict(layout))
            params = {"gpu": gpu, **shape, "weight_dtype": w, "activation_dtype": act,
                      "kv_dtype": kv, "scheduler": dict(sched)}
            try:
                Scenario.model_validate(d)
            except ValidationError as exc:
                err = format_validation_error(exc, f"{source}: space")
                raise ConfigError(f"{describe(params)}: {err.message}", where=err.where, fix=err.fix) from None
            key = _hash({"scenario": d, "slo": plan.slo.model_dump(), "search": _search_identity(s),
                         "version": __version__})
            if key not in points:
                points[key] = ConfigPoint(key, describe(params, varying), params, d)
    return list(points.values())


def _colocated_layouts(loaded: LoadedPlan, source: str, moe: bool) -> list[dict]:
    """One replica's `parallelism` for each colocated point of the space."""
    space, base = loaded.plan.space, loaded.base.scenario
    named = any(v is not None for v in (space.tp, space.pp, space.dp, space.expert_parallel))
    colocated = space.colocated if space.colocated is not None else (base.disaggregation is None or named)
    if not colocated:
        if named:
            listed = ", ".join(k for k in ("tp", "pp", "dp", "expert_parallel") if getattr(space, k) is not None)
            raise ConfigError(f"space.colocated is false, yet the space lists colocated layouts ({listed})",
                              where=f"{source}: space.colocated",
                              fix=f"drop `colocated: false` to search them too, or remove space.{listed.split(',')[0]}")
        if space.disaggregation is None and base.disaggregation is None:
            raise ConfigError("space.colocated is false and the space has no disaggregated layouts: "
                              "nothing to search", where=f"{source}: space.colocated",
                              fix="add space.disaggregation: {prefill: {tp: [...]}, decode: {tp: [...]}}, "
                                  "or drop `colocated: false`")
        return []
    if base.disaggregation is not None and space.tp is None:
        # the base's `parallelism` is a placeholder beside its pools, not a layout to try
        raise ConfigError("space.colocated is true, but the base is disaggregated and the space names no "
                          "colocated tp", where=f"{source}: space.colocated",
                          fix="list the colocated layouts to compare, e.g. space.tp: [4, 8]")
    tps = space.tp or [base.parallelism.tp]
    pps = space.pp or [base.parallelism.pp]
    dps = space.dp or [base.parallelism.dp]
    eps = _expert_flags(space.expert_parallel or [base.parallelism.expert_parallel], moe)
    return [{"tp": tp, "pp": pp, "dp": dp, "expert_parallel": ep}
            for tp, pp, dp, ep in itertools.product(tps, pps, dps, eps) if not _redundant_ep(ep, tp, dp, eps)]


def _expert_flags(flags: list[bool], moe: bool) -> list[bool]:
    return flags if moe else [False]  # the flag changes nothing for a dense model


def _redundant_ep(ep: bool, tp: int, dp: int, flags: list[bool]) -> bool:
    """Experts over one GPU: the same point as without the flag, when that is searched too."""
    return ep and tp * dp == 1 and False in flags


def _disaggregated_layouts(loaded: LoadedPlan, source: str, moe: bool) -> list[dict]:
    """Each disaggregated point's pools (one unit) and KV transfer: the space's product,
    else the base's own layout."""
    space, base = loaded.plan.space, loaded.base.scenario
    dis, based = space.disaggregation, base.disaggregation
    if dis is None:
        if based is None:
            return []
        dis = DisaggregationSpace(prefill=_pool_space(based.prefill), decode=_pool_space(based.decode))
    if dis.kv_transfer is not None:
        kv = dis.kv_transfer.model_dump(exclude_unset=True)
    else:  # the base's as written (the scenario's defaults where it has none)
        kv = (loaded.base_data.get("disaggregation") or {}).get("kv_transfer") or {}
    where = f"{source}: space.disaggregation"
    return [{"pools": {"prefill": pre, "decode": dec}, **({"kv_transfer": dict(kv)} if kv else {})}
            for pre, dec in itertools.product(_pool_layouts(dis.prefill, moe, f"{where}.prefill"),
                                              _pool_layouts(dis.decode, moe, f"{where}.decode"))]


def _pool_space(pool: PoolConfig) -> PoolSpace:
    """A scenario's pool as the one-point space a plan over that base searches."""
    return PoolSpace(tp=[pool.tp], pp=[pool.pp], replicas=[pool.replicas], dp=[pool.dp],
                     expert_parallel=[pool.expert_parallel], gpu=None if pool.gpu is None else [pool.gpu],
                     cost_per_gpu_hour=pool.cost_per_gpu_hour)


def _pool_layouts(pool: PoolSpace, moe: bool, where: str) -> list[dict]:
    """Each layout of one pool, as its scenario section (defaults left out); the
    expert-parallel flag only for MoE models, and only where the experts span more than
    one GPU (else it is the point without it)."""
    eps = _expert_flags(pool.expert_parallel, moe)
    gpus = [None] if pool.gpu is None else list(dict.fromkeys(_check_gpu(g, f"{where}.gpu") for g in pool.gpu))
    out = []
    for tp, pp, n, dp, ep, gpu in itertools.product(pool.tp, pool.pp, pool.replicas, pool.dp, eps, gpus):
        if _redundant_ep(ep, tp, dp, eps):
            continue
        layout = {"tp": tp, "pp": pp, "replicas": n}
        if gpu is not None:
            layout["gpu"] = gpu
        if pool.cost_per_gpu_hour is not None:
            layout["cost_per_gpu_hour"] = pool.cost_per_gpu_hour
        if dp > 1:
            layout["dp"] = dp
        if ep:
            layout["expert_parallel"] = True
        out.append(layout)
    return out


def _search_identity(s: SearchSettings) -> dict:
    """The settings that change a configuration's result (verification ones do not)."""
    return s.model_dump(exclude={"verify", "verify_requests", "max_verify_bumps", "max_refine_runs"})


def layout_label(params: dict) -> str:
    """'TP2', 'TP4 PP2', 'TP2 DP2 EP': the parallel layout of one replica; a disaggregated
    unit reads 'prefill 2×TP2 + decode TP4'."""
    pools = params.get("pools")
    if pools:
        return f"prefill {pool_label(pools['prefill'])} + decode {pool_label(pools['decode'])}"
    out = f"TP{params['tp']}" + (f" PP{params['pp']}" if params["pp"] > 1 else "")
    out += f" DP{params['dp']}" if params.get("dp", 1) > 1 else ""
    return out + (" EP" if params.get("expert_parallel") else "")


def _named_pools(params: dict) -> dict | None:
    """A unit's pools each with its GPU named, where one runs a GPU of its own; else None."""
    pools = params.get("pools") or {}
    if not any(p.get("gpu") for p in pools.values()):
        return None
    return {role: {**p, "gpu": p.get("gpu") or params["gpu"]} for role, p in pools.items()}


def unit_layout(params: dict) -> str:
    """layout_label, with each pool's GPU named where the pools run different GPUs."""
    named = _named_pools(params)
    return layout_label(params if named is None else {**params, "pools": named})


def gpu_and_layout(params: dict) -> str:
    """'h100-sxm TP4', or 'prefill TP4 h100-sxm + decode TP4 a100-80gb-sxm' for a unit whose
    pools run different GPUs (each pool then named with its own)."""
    text = unit_layout(params)
    return text if _named_pools(params) else f"{params['gpu']} {text}"


def pool_label(pool: dict) -> str:
    """'2×TP2', 'TP4 PP2', 'TP1 DP8 EP a100-80gb-sxm': the instances of one disaggregated pool."""
    one = layout_label(pool) + (f" {pool['gpu']}" if pool.get("gpu") else "")
    return f"{pool['replicas']}×{one}" if pool["replicas"] > 1 else one


def pool_gpus(pool: dict) -> int:
    """GPUs of all the instances of one pool of a unit."""
    return pool["tp"] * pool["pp"] * pool.get("dp", 1) * pool["replicas"]


def gpus_per_replica(params: dict) -> int:
    """GPUs of one replica, or of one disaggregated unit (both pools' instances)."""
    pools = params.get("pools")
    if pools:
        return sum(pool_gpus(p) for p in pools.values())
    return params["tp"] * params["pp"] * params.get("dp", 1)


def describe(params: dict, varying: set[str] | None = None) -> str:
    """A short label: GPU and TP always, the other dimensions when the space varies them."""
    varying = varying or set()
    parts = [gpu_and_layout(params)]
    sched = params["scheduler"]
    name = [sched["policy"]] if "policy" in varying or sched["policy"] != "vllm-v1" else []
    knobs = [f"{_SHORT.get(k, k)}={v}" for k, v in sched.items() if k != "policy"] if "scheduler" in varying else []
    if name or knobs:
        parts.append(" ".join(name + knobs))
    w, a, kv = params["weight_dtype"], params["activation_dtype"], params["kv_dtype"]
    if {"weight_dtype", "kv_dtype"} & varying or w != "bf16" or kv != "bf16":
        weight_only = a != w and DTYPE_BYTES[w] == 1  # 8-bit weights on 16-bit tensor cores
        quant = f"{w}-weights" if weight_only else w
        parts.append(f"{quant} kv-{kv}")
    return " · ".join(parts)


_SHORT = {"max_num_batched_tokens": "budget", "max_num_seqs": "seqs", "enable_chunked_prefill": "chunked",
          "max_batch_size": "batch", "max_wait_ms": "wait_ms"}
