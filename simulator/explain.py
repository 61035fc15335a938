"""`simulate explain`: where one iteration's time goes, op by op.

A prediction is easier to trust (or to fix) when its parts can be read: how much of a
decode step is weight reads, attention, collectives or framework overhead, and which
numbers came from measured kernel tables. This times two reference iterations of the
scenario's model, GPU and layout with the same cost model a run uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simulator.config import LoadedScenario
from simulator.cost import prefill_attention_rate, sustained_rates_used
from simulator.cost.model import IterationCostModel
from simulator.cost.ops import IterationShape, compute_dtypes
from simulator.cost.releases import nccl_allreduce_note, untuned_fp8_decode_note
from simulator.dtypes import tensor_rate_dtype
from simulator.errors import ConfigError
from simulator.frontend import describe_api_server, lone_request_delay
from simulator.simulation import Simulation


@dataclass(frozen=True)
class Explanation:
    """Per-op seconds of a decode step and of a lone prefill, and what they describe."""

    decode: dict[str, float]
    prefill: dict[str, float]
    decode_label: str
    prefill_label: str
    layout: str
    sources: dict[str, str]  # op -> profile / profile-extrapolated / profile-standin / ... / roofline (timer.source_of)
    notes: tuple[str, ...] = ()

    def rows(self) -> list[tuple[str, float | None, float | None]]:
        """(op, decode s, prefill s), largest decode share first; None where an op is absent."""
        names = sorted(set(self.decode) | set(self.prefill),
                       key=lambda n: (-self.decode.get(n, 0.0), -self.prefill.get(n, 0.0), n))
        return [(n, self.decode.get(n), self.prefill.get(n)) for n in names]


def _sources(cost: IterationCostModel, shape: IterationShape) -> dict[str, str]:
    """Where each op's time comes from (the first op of each name decides)."""
    source_of = getattr(cost.timer, "source_of", None)
    out: dict[str, str] = {}
    for op in cost.ops(shape):
        out.setdefault(op.name, source_of(op) if source_of else "roofline")
    return out


def _relief_note(cost: IterationCostModel, shape: IterationShape, what: str) -> tuple[str, ...]:
    """How much the iteration's collective waits raise its sustained fractions."""
    relief = cost.iteration_relief(shape)
    if relief <= 1.0:
        gpu = getattr(cost.timer, "gpu", None)
        measured = gpu.collective_wait_power_fraction if gpu is not None else None
        throttled = (sustained_rates_used(cost.timer, compute_dtypes(cost.sharded))
                     or prefill_attention_rate(cost.timer) is not None)
        if (cost.wait_power is None and measured is not None and what == "prefill" and throttled
                and cost.collective_time(shape.num_tokens) > 0):
            return (f"prefill: this GPU's collective waits draw {measured:.2f} of its power limit (measured), which "
                    "lets its clocks rise in TP prefills; --set cost_model.collective_power_relief=true models it "
                    "(off by default: docs/fidelity.md item 30)",)
        return ()
    waits = cost.collective_time(shape.num_tokens)
    return (f"{what}: {waits * 1e3:.3f} ms of collective waits, drawing {cost.wait_power:.2f} of the power "
            f"limit, let the clocks run {relief:.3f}x as fast as when always busy: the sustained fractions "
            "above scale up by that, to at most 1 (cost_model.collective_power_relief)",)


def _sustained_notes(cost: IterationCostModel) -> tuple[str, ...]:
    """Which dtypes' compute-bound GEMMs run below the tables' short-burst rate, and why."""
    dtypes = compute_dtypes(cost.sharded)
    rates = sustained_rates_used(cost.timer, dtypes)

    def runs(rate_dtype: str) -> str:  # an FP16 run takes BF16's measured rate: say so
        borrowers = sorted({d for d in dtypes if d != rate_dtype and tensor_rate_dtype(d) == rate_dtype})
        if not borrowers:
            return rate_dtype
        return ", ".join(([rate_dtype] if rate_dtype in dtypes else []) + [f"{', '.join(borrowers)} (at {rate_dtype}'s rate)"])

    def why(r) -> str:
        if r.source in ("catalog", "profile"):
            where = "GPU catalog" if r.source == "catalog" else "the profile's own measurement"
            return f"as measured on this GPU run back to back for seconds ({where})"
        if r.source == "carried":
            return (f"FP8's rate in the profile's {r.long_rows} GEMM rows of >= 10 ms, which H100/H200 measured "
                    "back to back show BF16 shares (not measured on this GPU)")
        return f"as the profile's {r.long_rows} GEMM rows of >= 10 ms sustain it"

    attention = prefill_attention_rate(cost.timer)
    kernels = "GEMMs, experts" if attention is not None else "GEMMs, experts, prefill attention"
    notes = tuple(f"{runs(dtype)} kernels ({kernels}): compute at {r.fraction:.2f} of the "
                  "tables' short-burst rate, "
                  + why(r) for dtype, r in sorted(rates.items()))
    if attention is not None and attention.source == "carried":
        notes += (f"prefill attention: compute at {attention.fraction:.2f} of the tables' short-burst rate, "
                  "FP8's times the ratio H100/H200 measured inside a prefill layer (not measured on this GPU)",)
    elif attention is not None:
        where = "GPU catalog" if attention.source == "catalog" else "the profile's own measurement"
        notes += (f"prefill attention: compute at {attention.fraction:.2f} of the tables' short-burst rate, "
                  f"as measured inside a prefill layer run back to back on this GPU ({where})",)
    return notes


# The sizes shown when none is asked for, shortened to fit a smaller max_model_len.
DEFAULT_TOKENS = 2048


DEFAULT_BATCH = 32


def explain(loaded: LoadedScenario, *, batch: int | None = None, context: int | None = None,
            prefill: int | None = None) -> Explanation:
    """Time a decode step of `batch` sequences at `context` tokens each, and one prefill of
    `prefill` tokens, on the scenario's layout (its decode and prefill pools when
    disaggregated). Sums run over every pipeline stage: one micro-batch's path. Sizes not
    asked for are DEFAULT_TOKENS and DEFAULT_BATCH, shortened to what the server holds."""
    for name, value in (("--batch", batch), ("--context", context), ("--prefill", prefill)):
        if value is not None and value < 1:
            raise ConfigError(f"must be >= 1, got {value}", where=name, fix="pass a positive count")
    sim = Simulation(loaded)
    context = min(DEFAULT_TOKENS, sim.max_model_len - 1) if context is None else context
    prefill = min(DEFAULT_TOKENS, sim.max_model_len) if prefill is None else prefill
    # A decode step's sequence holds its context plus the token it makes.
    for name, value, limit in (("--context", context, sim.max_model_len - 1),
                               ("--prefill", prefill, sim.max_model_len)):
        if value > limit:  # the server would refuse such a request
            raise ConfigError(f"{name} {value} is longer than max_model_len={sim.max_model_len} allows",
                              where=name, fix=f"pass at most {limit}, or raise model.max_model_len with --set")
    decode_pool = sim.batch_pool
    prefill_pool = sim.pools.get("serve") or sim.pools["prefill"]
    fits = decode_pool.memory.sequences_at(context + 1)  # each holds its context and the token it makes
    shortened = batch is None and 0 < fits < DEFAULT_BATCH
    batch = (min(DEFAULT_BATCH, fits) or DEFAULT_BATCH) if batch is None else batch
    if batch > fits:  # a step the engine could never run: its KV cache cannot hold the batch
        raise ConfigError(f"{batch} sequences at {context} tokens of context do not fit this layout's KV cache "
                          f"({decode_pool.memory.capacity_tokens:,} tokens, {fits:,} such sequences)", where="--batch",
                          fix=f"pass at most --batch {fits} at this --context, or a shorter --context"
                          if fits else "pass a shorter --context")
    decode_shape = IterationShape(batch, batch, batch, batch * context)
    prefill_shape = IterationShape(prefill, 1, 0, 0, ((prefill, 0),))
    decode = decode_pool.cost.breakdown(decode_shape)  # one step of many: follows another
    lone = prefill_pool.cost.breakdown(prefill_shape, from_idle=True)
    overlap = (" (async: overlapped with the GPU in decode steps; a lone prefill from idle pays it)"
               if decode_pool.cost.overlap_cpu else "")
    prefill_sources = _sources(prefill_pool.cost, prefill_shape)
    sources = {**prefill_sources, **_sources(decode_pool.cost, decode_shape)}
    for name, where in prefill_sources.items():  # an op timed one way in decode, another in prefill
        if sources[name] != where:
            sources[name] = f"{sources[name]} (prefill: {where})"
    sources["framework_overhead"] = "engine preset" + overlap
    sc = loaded.scenario
    m = sc.model
    experts = f", {m.expert_weight_dtype} experts" if m.expert_weight_dtype else ""
    model = f"{m.name or Path(m.config_json).stem} ({m.weight_dtype} weights{experts}, {m.kv_dtype} KV)"
    if sc.disaggregation is None:
        par = sc.parallelism
        layout = f"{model} on {decode_pool.gpu.name}, TP{par.tp} PP{par.pp}"
        if decode_pool.sharded.ep > 1:
            layout += f" EP{decode_pool.sharded.ep}"
        if par.dp > 1:
            layout += f" DP{par.dp} (one rank, its peers idle)"
    else:
        d = sc.disaggregation
        layout = f"{model} on {decode_pool.gpu.name}: " + ", ".join(
            f"{role} TP{pool.tp} PP{pool.pp}" + (f" EP{plan.sharded.ep}" if plan.sharded.ep > 1 else "")
            + (f" DP{pool.dp} (one rank, its peers idle)" if pool.dp > 1 else "")
            + (f" on {plan.gpu.name}" if prefill_pool.gpu.name != decode_pool.gpu.name else "")
            for role, pool, plan in (("prefill", d.prefill, prefill_pool), ("decode", d.decode, decode_pool)))
    mem = decode_pool.memory
    notes = (f"memory per GPU{' (decode pool)' if sc.disaggregation is not None else ''}: weights "
             f"{mem.weights_gib:.1f} GiB, KV cache {mem.kv_gib:.1f} GiB = {mem.capacity_tokens:,} tokens, "
             f"{fits:,} sequences at this context",)
    notes += _sustained_notes(prefill_pool.cost) + _sustained_notes(decode_pool.cost)
    notes += _relief_note(prefill_pool.cost, prefill_shape, "prefill") + _relief_note(decode_pool.cost, decode_shape,
                                                                                       "decode step")
    server = describe_api_server(sc.cost_model)
    if server:
        before = lone_request_delay(sc.cost_model, prefill) * 1e3
        notes += (f"API server: a lone request of {prefill} prompt tokens spends {before:.3f} ms there before "
                  f"the engine sees it, on top of the prefill above ({server})",)
    if decode_pool.cost.older_decode_kernel:
        notes += (untuned_fp8_decode_note(sc.cost_model.engine_version),)
    if prefill_pool.sharded.nccl_pinned or decode_pool.sharded.nccl_pinned:
        notes += (nccl_allreduce_note(sc.cost_model.engine_version),)
    if shortened:
        notes += (f"the decode step holds {batch} sequences, not the default {DEFAULT_BATCH}: no more fit "
                  "the KV cache at this context (--batch, --context choose)",)
    return Explanation(decode, lone, f"decode: one step of {batch} sequences at {context} tokens of context",
                       f"prefill: {prefill} prompt tokens alone", layout, sources, tuple(dict.fromkeys(notes)))
