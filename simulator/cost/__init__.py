"""Execution-time model: one op decomposition, several sources of op times.

`COST_BACKENDS` maps the scenario's `cost_model.backend` to a factory that builds an
op timer; adding a back end is one entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from simulator.cost.config import CostModelConfig, RooflineEfficiency
from simulator.cost.model import IterationCostModel, OpTimer
from simulator.cost.ops import IterationShape, ShardedModel
from simulator.cost.roofline import RooflineTimer
from simulator.dtypes import tensor_rate_dtype
from simulator.hardware import GPUSpec


def _roofline(gpu: GPUSpec, config: CostModelConfig, profile: str | None) -> OpTimer:
    return RooflineTimer(gpu, config.efficiency, config.overheads().kernel_latency_us)


def _calibrated(gpu: GPUSpec, config: CostModelConfig, profile: str | None) -> OpTimer:
    # Imported here: it loads calibration/ on demand.
    from simulator.cost.calibrated.profiles import calibrated_backend

    return calibrated_backend(gpu, config, profile)


def _auto(gpu: GPUSpec, config: CostModelConfig, profile: str | None) -> OpTimer:
    """Measured kernel tables when we have them for this GPU, the roofline otherwise.

    A profile named in `hardware.profile` wins; otherwise the shipped profile measured on
    this GPU, if any. Per kernel the tables are several times closer than datasheet
    peaks (calibration/README.md), most of all on GPUs whose kernels reach an unusual
    fraction of peak (B200 FP8 GEMMs run at ~50%, not the ~70% of Hopper).
    """
    from simulator.cost.calibrated.profiles import NoShippedProfileError, shipped_profile_for

    if not profile or profile == "auto":
        try:
            profile = shipped_profile_for(gpu)
        except NoShippedProfileError:
            return _roofline(gpu, config, None)
    return _calibrated(gpu, config, profile)


def sustained_rates_used(timer: OpTimer, gemm_dtypes: Iterable[str] | None = None) -> dict:
    """The timer's sustained rates (cost/sustained.py) of the GEMM dtypes a run uses (default:
    all), by dtype; none for a timer without them (the roofline)."""
    rates = getattr(timer, "sustained", {})
    if gemm_dtypes is None:
        return dict(rates)
    used = {tensor_rate_dtype(d) for d in gemm_dtypes}  # an FP16 run slows down as BF16 does
    return {d: r for d, r in rates.items() if d in used}


def prefill_attention_rate(timer: OpTimer):
    """The timer's own sustained rate for prefill attention (the profile's or the GPU catalog's
    measurement inside a prefill layer, or Hopper's relation carried over: item 32), or None
    where prefill attention takes its dtype's rate (or there is none)."""
    return getattr(timer, "attention_sustained", None)


def kernel_times_source(timer: OpTimer, gemm_dtypes: Iterable[str] | None = None) -> str:
    """Where this run's kernel times come from, for the summary: the profile's source and
    measuring GPU (and date, for our own measurements), or the datasheet roofline; and the
    sustained rate of those of `gemm_dtypes` (default: all) that run below the burst rate."""
    profile = getattr(timer, "profile", None)
    if profile is None:
        return "roofline (datasheet peaks x cost_model.efficiency)"
    meta = profile.metadata
    if meta.source == "measured" and meta.device_kind == "cpu":
        where = (f"measured on {meta.gpu_name} ({meta.date[:10]}), a CPU: a development profile whose "
                 "times are that CPU's, not this GPU's")
    elif meta.source == "measured":
        where = f"measured on {meta.gpu_name} ({meta.date[:10]})"
    else:
        where = f"{meta.source} (measured on {meta.gpu_name})"
    sustained = sustained_rates_used(timer, gemm_dtypes)
    carried = "" if not any(r.source == "carried" for r in sustained.values()) else " (bf16 as fp8's, carried)"
    if sustained:
        where += "; sustained " + ", ".join(f"{d} {r.fraction:.2f}" for d, r in sorted(sustained.items())) + carried
    attention = prefill_attention_rate(timer)
    if attention is not None:
        where += f"; prefill attention {attention.fraction:.2f}" + (" (carried)" if attention.source == "carried" else "")
    wait_power = getattr(timer, "collective_wait_power", None)
    if wait_power is not None and (sustained or attention is not None):
        where += f"; raised by collective waits at {wait_power:.2f} of the power limit"
    return where


# Op families of newer attention designs that no shipped table times yet (docs/fidelity.md).
ESTIMATED_FAMILIES = {"linear_attn": "Gated DeltaNet", "mamba2": "Mamba2 scan", "attn_sparse": "sparse MLA",
                      "indexer": "DSA indexer"}
# A long lone prefill (past DSA's top-k) and a decode step: every op family a model runs.
_PROBE_SHAPES = (IterationShape(4096, 1, 0, 0, ((4096, 0),)), IterationShape(8, 8, 8, 8 * 4096, ()))


def roofline_estimated(timer: OpTimer, costs: Iterable[IterationCostModel]) -> list[str]:
    """The newer attention kernels a table-driven run still times by the roofline, so the
    summary does not pass them off as measured; none under the roofline back end, whose
    summary says so already."""
    source_of = getattr(timer, "source_of", None)
    if source_of is None:
        return []
    found: dict[str, None] = {}
    for op in _probe_ops(costs):
        if op.family in ESTIMATED_FAMILIES and source_of(op).startswith("roofline"):
            found[ESTIMATED_FAMILIES[op.family]] = None
    return list(found)


def _probe_ops(costs: Iterable[IterationCostModel]):
    """Every op of a long lone prefill and a decode step of each layout: every family a run reads."""
    for cost in costs:
        for shape in _PROBE_SHAPES:
            yield from cost.ops(shape)


def missing_tables(timer: OpTimer, costs: Iterable[IterationCostModel]) -> list[str]:
    """Op families this run needs that the profile has no rows for and does not declare
    unmeasured (`metadata.not_measured`, e.g. the elementwise kernels aiconfigurator does
    not time), with what times them instead: a profile cut short or edited by hand would
    otherwise be read as measured while those ops ran at another GPU's datasheet rate."""
    source_of = getattr(timer, "source_of", None)
    profile = getattr(timer, "profile", None)
    if source_of is None or profile is None:
        return []
    # Only families without rows are looked up: source_of on every op costs a run ~2%.
    skip = {k.split(" ")[0] for k in profile.metadata.not_measured} | set(ESTIMATED_FAMILIES)
    skip |= {family for family in profile.tables if profile.table(family) is not None}
    found: dict[str, str] = {}
    for op in _probe_ops(costs):
        if op.family in skip or op.family in found:
            continue
        source = source_of(op)
        if source == "roofline-default" or source.startswith("shipped:"):
            found[op.family] = "the roofline" if source == "roofline-default" else source.split(":", 1)[1]
    return [f"{family} from {source}" for family, source in found.items()]


COST_BACKENDS: dict[str, Callable[[GPUSpec, CostModelConfig, str | None], OpTimer]] = {
    "roofline": _roofline,
    "calibrated": _calibrated,
    "auto": _auto,
}

__all__ = [
    "COST_BACKENDS",
    "CostModelConfig",
    "IterationCostModel",
    "IterationShape",
    "OpTimer",
    "RooflineEfficiency",
    "RooflineTimer",
    "ShardedModel",
    "kernel_times_source",
    "prefill_attention_rate",
    "roofline_estimated",
    "sustained_rates_used",
]
