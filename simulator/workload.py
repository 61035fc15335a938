"""Workloads: when requests arrive and how long their prompts and outputs are.

A scenario's ``workload`` section is validated into :class:`WorkloadConfig`, and
:func:`build_workload` turns it into plain numpy arrays before the simulation starts:

- open-loop traffic (Poisson, gamma, constant, trace replay) becomes an
  :class:`OpenLoopWorkload` with one arrival time and two lengths per request;
- closed-loop traffic (N clients that each wait for their previous reply) becomes a
  :class:`ClosedLoopWorkload`: arrival times depend on the simulated latency, so only the
  lengths can be drawn up front.

Randomness is split into three independent streams (arrivals, prompt lengths, output
lengths) derived from one seed. The same seed gives bit-identical arrays, and changing
only the arrival rate leaves the sampled lengths unchanged (common random numbers), so
two configurations are compared on the same requests.

Arrival semantics follow vLLM's benchmark client: gamma gaps with shape ``burstiness``
and scale ``1/(rate*burstiness)``, the first request sent at t = 0.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import IO, Annotated, Any, Literal

import numpy as np
from pydantic import Field, model_validator

from simulator.errors import ConfigError, TraceError
from simulator.request import Request
from simulator.strict import StrictModel

logger = logging.getLogger(__name__)

#: Requests generated when neither ``num_requests`` nor ``duration_s`` is set (vLLM's
#: ``--num-prompts`` default).
DEFAULT_NUM_REQUESTS = 1000
#: Closed loop with only ``duration_s``: lengths are pre-sampled for this many requests
#: per client. A run that needs more stops sending when they are used up.
CLOSED_LOOP_REQUESTS_PER_CLIENT = 1000
#: Refuse to pre-generate more requests than this from a duration (a typo guard: a rate or
#: duration off by 1000x would otherwise exhaust memory before the run starts).
MAX_IMPLIED_REQUESTS = 100_000_000

# ---------------------------------------------------------------------------------------
# Arrival processes
# ---------------------------------------------------------------------------------------


def _first_at_zero(gaps: np.ndarray) -> np.ndarray:
    """Arrival times for gaps: the first request at t = 0, each next one a gap later."""
    t = np.empty(gaps.size + 1, dtype=np.float64)
    t[0] = 0.0
    np.cumsum(gaps, out=t[1:])
    return t


def _before(t: np.ndarray, duration_s: float | None) -> np.ndarray:
    """Keep the (sorted) arrivals strictly before ``duration_s``."""
    if duration_s is None:
        return t
    return t[: int(np.searchsorted(t, duration_s, side="left"))]


def _check_implied_count(expected: float, field: str) -> None:
    if expected > MAX_IMPLIED_REQUESTS:
        raise ConfigError(
            f"this would pre-generate about {expected:.3g} requests "
            f"(more than {MAX_IMPLIED_REQUESTS:.0e})",
            where=field,
            fix="lower workload.duration_s or the rate, or set workload.num_requests",
        )


class _RenewalArrival(StrictModel):
    """Open-loop arrivals with i.i.d. gaps; subclasses only say how a gap is drawn."""

    rate: float

    def _gaps(self, rng: np.random.Generator, size: int) -> np.ndarray:
        raise NotImplementedError

    def arrival_times(
        self, n: int | None, duration_s: float | None, rng: np.random.Generator
    ) -> np.ndarray:
        """``n`` arrivals, or those before ``duration_s``, or both limits (whichever first).

        Gaps are drawn in chunks from one stream, so the arrivals up to a duration are
        exactly the first arrivals of the ``n``-request sequence with the same seed.
        """
        if n is not None:
            return _before(_first_at_zero(self._gaps(rng, n - 1)), duration_s)
        assert duration_s is not None
        expected = self.rate * duration_s
        _check_implied_count(expected, "workload.duration_s")
        chunk = int(expected + 6.0 * math.sqrt(expected)) + 16
        parts: list[np.ndarray] = []
        while True:
            parts.append(self._gaps(rng, chunk))
            t = _first_at_zero(np.concatenate(parts))
            if t[-1] >= duration_s:
                return _before(t, duration_s)


class PoissonArrival(_RenewalArrival):
    """Memoryless open-loop traffic: many independent users (vLLM ``--request-rate``)."""

    type: Literal["poisson"] = Field(
        "poisson",
        description="Poisson process: exponential gaps between arrivals; first request at t = 0.",
    )
    rate: float = Field(
        gt=0, allow_inf_nan=False, description="Mean arrival rate, requests per second (> 0)."
    )

    def _gaps(self, rng: np.random.Generator, size: int) -> np.ndarray:
        # Standard draws scaled by 1/rate: a rate change rescales the same arrivals.
        return rng.standard_exponential(size) / self.rate


class GammaArrival(_RenewalArrival):
    """Bursty (b < 1) or smoothed (b > 1) traffic, as vLLM's ``--burstiness``."""

    type: Literal["gamma"] = Field(
        "gamma",
        description=(
            "Gamma-distributed gaps with shape = burstiness and scale = 1/(rate*burstiness), "
            "as vLLM's --burstiness; first request at t = 0."
        ),
    )
    rate: float = Field(
        gt=0, allow_inf_nan=False, description="Mean arrival rate, requests per second (> 0)."
    )
    burstiness: float = Field(
        gt=0,
        allow_inf_nan=False,
        description=(
            "Gamma shape b (> 0, dimensionless). 1 = Poisson; < 1 burstier, > 1 more regular. "
            "Coefficient of variation of the gaps is 1/sqrt(b)."
        ),
    )

    def _gaps(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.standard_gamma(self.burstiness, size) / (self.rate * self.burstiness)


class ConstantArrival(StrictModel):
    """Evenly spaced requests: a deterministic load with no queueing from bursts."""

    type: Literal["constant"] = Field(
        "constant", description="One request every 1/rate seconds: request i arrives at i/rate."
    )
    rate: float = Field(
        gt=0, allow_inf_nan=False, description="Arrival rate, requests per second (> 0)."
    )

    def arrival_times(
        self, n: int | None, duration_s: float | None, rng: np.random.Generator
    ) -> np.ndarray:
        """``n`` arrivals at ``i/rate``, cut at ``duration_s`` when given (no randomness)."""
        if n is None:
            assert duration_s is not None
            expected = self.rate * duration_s
            _check_implied_count(expected, "workload.duration_s")
            n = math.ceil(expected) + 1
        return _before(np.arange(n, dtype=np.float64) / self.rate, duration_s)


class ClosedLoopArrival(StrictModel):
    """A fixed number of clients, each waiting for its reply: the load adapts to latency."""

    type: Literal["closed_loop"] = Field(
        "closed_loop",
        description=(
            "Closed loop (vLLM --max-concurrency, genai-perf concurrency mode): each client "
            "sends its next request when its previous one completes, plus the think time."
        ),
    )
    concurrency: int = Field(ge=1, description="Number of clients (requests in flight), >= 1.")
    think_time_s: float = Field(
        default=0.0,
        ge=0,
        allow_inf_nan=False,
        description="Seconds a client waits after a reply before sending its next request.",
    )
    think_time_distribution: Literal["fixed", "exponential"] = Field(
        default="fixed",
        description=(
            "fixed: every wait is think_time_s (first requests at t = 0). exponential: each "
            "wait, the first included, is drawn with mean think_time_s: people reading and "
            "typing, which spreads clients apart (benchmark clients with fixed lengths stay in "
            "lockstep instead; see docs/fidelity.md)."
        ),
    )
    rate: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Requests per second issued to the clients (vLLM --request-rate together with "
            "--max-concurrency): a request goes out at its arrival time or, if all clients "
            "are busy, as soon as one frees up; TTFT counts from when it is sent. None: "
            "every client sends again at once."
        ),
    )
    burstiness: float = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description="Gamma shape of the gaps between issued requests when `rate` is set (1 = Poisson).",
    )

    @model_validator(mode="after")
    def _rate_or_think_time(self) -> ClosedLoopArrival:
        if self.rate is not None and self.think_time_s > 0:
            raise ValueError("set either rate (requests issued at a rate, capped at concurrency) "
                             "or think_time_s (clients pause between requests), not both")
        return self


class TraceArrival(StrictModel):
    """Replay of recorded traffic: exact timestamps and lengths from a file."""

    type: Literal["trace"] = Field(
        "trace",
        description="Replay a trace file: arrival times and token lengths come from the file.",
    )
    path: str = Field(
        min_length=1,
        description="Trace file; a relative path is resolved against the scenario file's folder.",
    )
    format: Literal["auto", "csv", "azure", "burstgpt", "mooncake"] = Field(
        default="auto",
        description=(
            "File format. csv: arrival_s,prompt_tokens,output_tokens[,session_id,prefix_id,prefix_tokens]; "
            "azure: TIMESTAMP,ContextTokens,GeneratedTokens; burstgpt: Timestamp,Model,"
            "Request tokens,Response tokens,...; mooncake: JSON lines with timestamp (ms), "
            "input_length, output_length[, hash_ids]. auto: .jsonl means mooncake, else "
            "decided by the header."
        ),
    )
    rate_scale: float = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description="Multiplies the arrival rate: timestamps are divided by it (2 = twice the load).",
    )
    length_scale: float = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description="Multiplies prompt and output lengths (rounded to the nearest token, at least 1).",
    )
    start_s: float = Field(
        default=0.0,
        ge=0,
        allow_inf_nan=False,
        description=(
            "Skip requests earlier than this many seconds after the trace's first request "
            "(trace time, before rate_scale). The window's first request arrives at t = 0."
        ),
    )
    max_requests: int | None = Field(
        default=None,
        ge=1,
        description="Take at most this many requests from start_s on (default: all).",
    )
    hash_block_tokens: int = Field(
        default=512,
        ge=1,
        description=(
            "Tokens per entry of a Mooncake trace's hash_ids (512 in the published traces); "
            "equal hashes mark equal prompt content for prefix caching. Scaled by length_scale."
        ),
    )


ArrivalConfig = Annotated[
    PoissonArrival | GammaArrival | ConstantArrival | ClosedLoopArrival | TraceArrival,
    Field(discriminator="type"),
]


# ---------------------------------------------------------------------------------------
# Length distributions
# ---------------------------------------------------------------------------------------


def _round_clip(x: np.ndarray, lo: int, hi: int | None) -> np.ndarray:
    """Round to whole tokens and clip; bounds are applied before the int cast so that an
    extreme draw cannot overflow int64."""
    upper = float(hi) if hi is not None else 2.0**53
    return np.clip(np.rint(x), float(lo), upper).astype(np.int64)


class FixedLength(StrictModel):
    """Every request has the same length: isolates batching effects from length noise."""

    type: Literal["fixed"] = Field("fixed", description="Every request has exactly `value` tokens.")
    value: int = Field(ge=1, description="Tokens per request, >= 1.")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.full(n, self.value, dtype=np.int64)


class UniformLength(StrictModel):
    """Lengths spread evenly over a range."""

    type: Literal["uniform"] = Field(
        "uniform", description="Uniform integer lengths in [min, max]."
    )
    min: int = Field(ge=1, description="Smallest length, tokens (inclusive, >= 1).")
    max: int = Field(ge=1, description="Largest length, tokens (inclusive, >= min).")

    @model_validator(mode="after")
    def _min_le_max(self) -> UniformLength:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max}); swap them")
        return self

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(self.min, self.max, size=n, endpoint=True, dtype=np.int64)


class _ClippedLength(StrictModel):
    """Shared bounds for continuous distributions: rounded, then clipped to [min, max]."""

    min: int = Field(default=1, ge=1, description="Lower clip, tokens (>= 1).")
    max: int | None = Field(
        default=None, ge=1, description="Upper clip, tokens (default: no upper clip)."
    )

    @model_validator(mode="after")
    def _min_le_max(self) -> _ClippedLength:
        if self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max}); swap them")
        return self


class NormalLength(_ClippedLength):
    """Symmetric spread around a typical length."""

    type: Literal["normal"] = Field(
        "normal", description="Normal lengths, rounded to whole tokens and clipped to [min, max]."
    )
    mean: float = Field(allow_inf_nan=False, description="Mean length before clipping, tokens.")
    std: float = Field(
        ge=0, allow_inf_nan=False, description="Standard deviation before clipping, tokens."
    )

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return _round_clip(rng.normal(self.mean, self.std, size=n), self.min, self.max)


class LognormalLength(_ClippedLength):
    """Right-skewed lengths, the usual shape of real prompt and output lengths."""

    type: Literal["lognormal"] = Field(
        "lognormal",
        description=(
            "Lognormal lengths with the given mean and std in tokens (not log space), "
            "rounded to whole tokens and clipped to [min, max]."
        ),
    )
    mean: float = Field(
        gt=0, allow_inf_nan=False, description="Mean length before clipping, tokens (> 0)."
    )
    std: float = Field(
        ge=0, allow_inf_nan=False, description="Standard deviation before clipping, tokens."
    )

    def log_params(self) -> tuple[float, float]:
        """(mu, sigma) of the underlying normal that give this mean and std in tokens."""
        sigma2 = math.log1p((self.std / self.mean) ** 2)
        return math.log(self.mean) - sigma2 / 2.0, math.sqrt(sigma2)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        mu, sigma = self.log_params()
        return _round_clip(rng.lognormal(mu, sigma, size=n), self.min, self.max)


class EmpiricalLength(StrictModel):
    """Resample observed lengths (with replacement) to keep their exact distribution."""

    type: Literal["empirical"] = Field(
        "empirical", description="Sample with replacement from given values, or from a CSV column."
    )
    values: list[Annotated[int, Field(ge=1)]] | None = Field(
        default=None, min_length=1, description="Observed lengths, tokens (each >= 1)."
    )
    weights: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = Field(
        default=None,
        description="Relative weight of each value (same count as values; default: equal).",
    )
    path: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "CSV file with a header row (instead of values); a relative path is resolved "
            "against the scenario file's folder."
        ),
    )
    column: str | None = Field(
        default=None, min_length=1, description="Column of `path` that holds the lengths."
    )

    @model_validator(mode="after")
    def _one_source(self) -> EmpiricalLength:
        if (self.values is None) == (self.path is None):
            raise ValueError(
                "give exactly one of `values` (a list of lengths) or `path` + `column` (a CSV)"
            )
        if self.path is not None and self.column is None:
            raise ValueError("`path` needs `column`: the CSV column that holds the lengths")
        if self.path is None and self.column is not None:
            raise ValueError("`column` is only used with `path`")
        if self.weights is not None:
            if self.values is None:
                raise ValueError("`weights` are only used with `values`")
            if len(self.weights) != len(self.values):
                raise ValueError(
                    f"`weights` has {len(self.weights)} entries but `values` has "
                    f"{len(self.values)}; give one weight per value"
                )
            if not sum(self.weights) > 0:
                raise ValueError("`weights` must not all be zero")
        return self

    def sample(
        self, n: int, rng: np.random.Generator, pool: np.ndarray | None = None
    ) -> np.ndarray:
        """Draw ``n`` values; a `path`-based config needs the file's column as ``pool``
        (:func:`sample_lengths` reads it)."""
        if self.values is not None:
            pool = np.asarray(self.values, dtype=np.int64)
            if self.weights is not None:
                p = np.asarray(self.weights, dtype=np.float64)
                return rng.choice(pool, size=n, p=p / p.sum())
        elif pool is None:
            raise ValueError("a `path`-based empirical distribution needs its column as `pool`")
        return pool[rng.integers(0, pool.size, size=n)]


LengthConfig = Annotated[
    FixedLength | UniformLength | NormalLength | LognormalLength | EmpiricalLength,
    Field(discriminator="type"),
]


def sample_lengths(
    cfg: LengthConfig,
    n: int,
    rng: np.random.Generator,
    base_dir: Path | None = None,
    *,
    field: str = "lengths",
) -> np.ndarray:
    """Draw ``n`` token lengths (int64, each >= 1) from ``cfg`` using ``rng``.

    Every distribution consumes its stream sequentially, so the first k of n draws equal
    a k-draw sample with the same stream: the basis of common random numbers.
    ``base_dir`` resolves an empirical `path`; ``field`` names the config field in errors.
    """
    if isinstance(cfg, EmpiricalLength) and cfg.path is not None:
        assert cfg.column is not None
        path = _resolve(cfg.path, base_dir, f"{field}.path")
        return cfg.sample(n, rng, read_length_column(path, cfg.column, label=cfg.path))
    return cfg.sample(n, rng)


# ---------------------------------------------------------------------------------------
# Workload config
# ---------------------------------------------------------------------------------------

_LENGTH_EXAMPLE = {
    "prompt_tokens": "prompt_tokens: {type: lognormal, mean: 512, std: 256}",
    "output_tokens": "output_tokens: {type: lognormal, mean: 128, std: 64}",
}


class SharedPrefixConfig(StrictModel):
    """Prompts that start with one of a few shared texts (a system prompt, few-shot examples)."""

    tokens: int = Field(
        ge=1,
        description=(
            "Length of the shared prefix: the first `tokens` tokens of every prompt (all of a "
            "shorter prompt). Prompt lengths still come from prompt_tokens."
        ),
    )
    groups: int = Field(
        default=1,
        ge=1,
        description=(
            "Distinct prefixes; each request draws one uniformly at random (seeded), as "
            "vLLM's prefix_repetition benchmark data set does."
        ),
    )


class WorkloadConfig(StrictModel):
    """The scenario's ``workload`` section: an arrival process plus request lengths."""

    arrival: ArrivalConfig = Field(
        description=(
            "How requests arrive: poisson, gamma, constant, closed_loop or trace (selected "
            "by `type`)."
        )
    )
    prompt_tokens: LengthConfig | None = Field(
        default=None,
        description=(
            "Prompt (input) length distribution, tokens. Required unless arrival is a trace, "
            "whose lengths come from the file."
        ),
    )
    output_tokens: LengthConfig | None = Field(
        default=None,
        description=(
            "Output (generated) length distribution, tokens. Required unless arrival is a trace."
        ),
    )
    num_requests: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Number of requests to send. With duration_s too, whichever limit is reached "
            f"first. If neither is set: {DEFAULT_NUM_REQUESTS} for synthetic arrivals, the "
            "whole file for a trace."
        ),
    )
    duration_s: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Send requests only during the first duration_s seconds of simulated time. "
            "Closed loop with only duration_s pre-samples lengths for "
            f"{CLOSED_LOOP_REQUESTS_PER_CLIENT} requests per client."
        ),
    )
    shared_prefix: SharedPrefixConfig | None = Field(
        default=None,
        description=(
            "Mark the start of every prompt as shared text, which vllm-v1's prefix cache can "
            "reuse (e.g. `{tokens: 1000, groups: 4}`). A trace marks shared content itself "
            "(csv prefix_id/prefix_tokens columns, Mooncake hash_ids)."
        ),
    )
    seed: int = Field(
        default=0,
        ge=0,
        description=(
            "Random seed. Arrivals, prompt lengths and output lengths use separate streams, "
            "so changing the rate keeps the same lengths."
        ),
    )

    @model_validator(mode="after")
    def _lengths_match_arrival(self) -> WorkloadConfig:
        if isinstance(self.arrival, TraceArrival):
            if self.shared_prefix is not None:
                raise ConfigError(
                    "`shared_prefix` cannot be set with a trace arrival: the trace marks shared "
                    "content itself",
                    where="workload.shared_prefix",
                    fix=(
                        "remove it; in a csv trace give prefix_id and prefix_tokens columns, in a "
                        "Mooncake trace hash_ids"
                    ),
                )
            for name in ("prompt_tokens", "output_tokens"):
                if getattr(self, name) is not None:
                    raise ConfigError(
                        f"`{name}` cannot be set with a trace arrival: lengths come from the "
                        "trace file",
                        where=f"workload.{name}",
                        fix=(
                            f"remove `{name}`; to lengthen or shorten requests use "
                            "`arrival.length_scale` (e.g. 2.0 doubles every length)"
                        ),
                    )
        else:
            for name in ("prompt_tokens", "output_tokens"):
                if getattr(self, name) is None:
                    raise ConfigError(
                        f"`{name}` is missing: a {self.arrival.type} arrival needs length "
                        "distributions",
                        where=f"workload.{name}",
                        fix=f"add e.g. `{_LENGTH_EXAMPLE[name]}`",
                    )
        return self


# ---------------------------------------------------------------------------------------
# Generated workloads
# ---------------------------------------------------------------------------------------


def _frozen(a: np.ndarray | None, dtype: type) -> np.ndarray | None:
    """A read-only view (no copy when the dtype already matches; the caller's array
    stays writable)."""
    if a is None:
        return None
    view = np.asarray(a, dtype=dtype).view()
    view.setflags(write=False)
    return view


def scale_lengths(tokens: np.ndarray, scale: float) -> np.ndarray:
    """Token counts times `scale`, rounded, at least 1 (a trace's `length_scale`)."""
    if scale == 1.0:
        return tokens
    return np.maximum(np.rint(tokens * scale), 1).astype(np.int64)


@dataclass(frozen=True, eq=False)
class SharedPrefixes:
    """Request i's first ``tokens[i]`` prompt tokens are shared text number ``ids[i]``
    (-1: nothing shared). From `shared_prefix` or a csv trace's prefix columns."""

    ids: np.ndarray
    tokens: np.ndarray

    def __len__(self) -> int:
        return int(self.ids.size)

    def window(self, lo: int, hi: int, scale: float = 1.0) -> SharedPrefixes:
        return SharedPrefixes(self.ids[lo:hi], scale_lengths(self.tokens[lo:hi], scale))

    def chain(self, i: int) -> tuple[tuple[int, int], ...] | None:
        pid = int(self.ids[i])
        return None if pid < 0 else ((pid, int(self.tokens[i])),)

    def tail(self, i: int) -> int | None:
        return None


@dataclass(frozen=True, eq=False)
class HashedBlocks:
    """Mooncake-style content hashes: entry j of ``hash_ids[i]`` identifies prompt tokens
    [j·block_tokens, (j+1)·block_tokens) of request i, given everything before them."""

    hash_ids: tuple[tuple[int, ...], ...]
    block_tokens: int

    def __len__(self) -> int:
        return len(self.hash_ids)

    def window(self, lo: int, hi: int, scale: float = 1.0) -> HashedBlocks:
        return HashedBlocks(self.hash_ids[lo:hi], max(round(self.block_tokens * scale), 1))

    def chain(self, i: int) -> tuple[tuple[int, int], ...] | None:
        b = self.block_tokens
        hashes = self.hash_ids[i]
        return tuple((h, (j + 1) * b) for j, h in enumerate(hashes)) if hashes else None

    def tail(self, i: int) -> int | None:
        return None


@dataclass(frozen=True, eq=False)
class SessionTurns:
    """Conversations: a turn whose prompt is at least the previous turn's prompt plus answer
    is taken to extend it (a chat client resends the history), so its prompt opens with
    that whole context, which the previous turn leaves cached. Other turns start afresh
    (with ``base``'s shared content, if any)."""

    chains: tuple[tuple[tuple[int, int], ...] | None, ...]
    tails: tuple[int | None, ...]

    @classmethod
    def build(cls, session_id: np.ndarray, prompts: np.ndarray, outputs: np.ndarray,
              base: PromptPrefixes | None) -> SessionTurns:
        last: dict[int, tuple[tuple[tuple[int, int], ...], int, int]] = {}  # chain, context, turn
        chains: list[tuple[tuple[int, int], ...] | None] = []
        tails: list[int | None] = []
        for i, (sid, p, o) in enumerate(zip(session_id.tolist(), prompts.tolist(), outputs.tolist(), strict=True)):
            own = base.chain(i) if base is not None else None
            if sid < 0:
                chains.append(own)
                tails.append(None)
                continue
            prev = last.get(sid)
            turn = prev[2] + 1 if prev else 0
            if prev is not None and p >= prev[1]:
                chain = (*prev[0], (hash((-7, sid, prev[2])), prev[1]))
            else:
                chain = own or ()
            chains.append(chain or None)
            tails.append(hash((-7, sid, turn)))
            last[sid] = (chain, p + o, turn)
        return cls(tuple(chains), tuple(tails))

    def __len__(self) -> int:
        return len(self.chains)

    def chain(self, i: int) -> tuple[tuple[int, int], ...] | None:
        return self.chains[i]

    def tail(self, i: int) -> int | None:
        return self.tails[i]


PromptPrefixes = SharedPrefixes | HashedBlocks | SessionTurns


def prompt_content(prefixes: PromptPrefixes | None, i: int) -> dict:
    """Request i's shared prompt content, as `Request` keyword arguments."""
    if prefixes is None:
        return {}
    return {"prefix": prefixes.chain(i), "prefix_tail": prefixes.tail(i)}


@dataclass(frozen=True, eq=False)
class OpenLoopWorkload:
    """Requests whose arrival times do not depend on the server (rate or trace driven).

    Arrays are read-only and aligned: element i describes request i, in arrival order.
    ``session_id``/``prefix_id`` use -1 for "none" and are None when the source has no
    such column. ``hash_ids`` (Mooncake traces only) are the per-request KV block hashes
    (512-token blocks in the published traces); ``prefix_id`` is then the first hash.
    ``skipped_rows`` counts trace rows dropped as failed requests (BurstGPT).
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    session_id: np.ndarray | None = None
    prefix_id: np.ndarray | None = None
    hash_ids: tuple[tuple[int, ...], ...] | None = None
    skipped_rows: int = 0
    prefixes: PromptPrefixes | None = None  # shared prompt content, for prefix caching

    def __post_init__(self) -> None:
        for name, dtype in (
            ("arrival_s", np.float64),
            ("prompt_tokens", np.int64),
            ("output_tokens", np.int64),
            ("session_id", np.int64),
            ("prefix_id", np.int64),
        ):
            object.__setattr__(self, name, _frozen(getattr(self, name), dtype))
        n = self.arrival_s.size
        for name in ("prompt_tokens", "output_tokens", "session_id", "prefix_id", "hash_ids", "prefixes"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise ValueError(f"{name} has {len(value)} entries, arrival_s has {n}")

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    def iter_requests(self, first_id: int = 0) -> Iterator[Request]:
        """Yield one :class:`Request` per row, lazily, so large runs hold only arrays."""
        sid = self.session_id.tolist() if self.session_id is not None else None
        pid = self.prefix_id.tolist() if self.prefix_id is not None else None
        rows = zip(
            self.arrival_s.tolist(),
            self.prompt_tokens.tolist(),
            self.output_tokens.tolist(),
            strict=True,
        )
        for i, (t, p, o) in enumerate(rows):
            yield Request(
                first_id + i,
                t,
                p,
                o,
                session_id=sid[i] if sid is not None else -1,
                prefix_id=pid[i] if pid is not None else -1,
                **prompt_content(self.prefixes, i),
            )


@dataclass(frozen=True, eq=False)
class ClosedLoopWorkload:
    """N clients sending back to back: only lengths are known before the run.

    Request i (in send order, across all clients) uses ``prompt_tokens[i]`` and
    ``output_tokens[i]``. Sending stops when the lengths run out or, if ``duration_s``
    is set, at that simulated time.
    """

    concurrency: int
    think_time_s: float
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    duration_s: float | None
    think_times: np.ndarray | None = None  # per request, seconds before it is sent (jittered clients)
    release_s: np.ndarray | None = None  # per request, earliest send time (issued at a rate)
    prefixes: PromptPrefixes | None = None  # shared prompt content, for prefix caching

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt_tokens", _frozen(self.prompt_tokens, np.int64))
        object.__setattr__(self, "output_tokens", _frozen(self.output_tokens, np.int64))
        object.__setattr__(self, "think_times", _frozen(self.think_times, np.float64))
        object.__setattr__(self, "release_s", _frozen(self.release_s, np.float64))
        if self.prompt_tokens.size != self.output_tokens.size:
            raise ValueError("prompt_tokens and output_tokens differ in length")

    def __len__(self) -> int:
        return int(self.prompt_tokens.size)


def _streams(seed: int) -> tuple[np.random.Generator, ...]:
    """Independent generators: arrivals, prompt lengths, output lengths, think times and
    prefix groups (spawned children do not depend on how many are spawned)."""
    return tuple(np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5))


def _shared_prefixes(cfg: WorkloadConfig, n: int, rng: np.random.Generator) -> SharedPrefixes | None:
    sp = cfg.shared_prefix
    if sp is None:
        return None
    ids = rng.integers(0, sp.groups, n) if sp.groups > 1 else np.zeros(n, dtype=np.int64)
    return SharedPrefixes(ids.astype(np.int64), np.full(n, sp.tokens, dtype=np.int64))


def build_workload(
    cfg: WorkloadConfig, base_dir: Path | str | None = None
) -> OpenLoopWorkload | ClosedLoopWorkload:
    """Generate the requests of ``cfg``; relative file paths are taken from ``base_dir``
    (the scenario file's folder; default: the working directory)."""
    base = Path(base_dir) if base_dir is not None else None
    arrival = cfg.arrival
    if isinstance(arrival, TraceArrival):
        return _build_trace_workload(cfg, arrival, base)

    rng_arrival, rng_prompt, rng_output, rng_think, rng_prefix = _streams(cfg.seed)
    assert cfg.prompt_tokens is not None and cfg.output_tokens is not None

    if isinstance(arrival, ClosedLoopArrival):
        if cfg.num_requests is not None:
            n = cfg.num_requests
        elif cfg.duration_s is not None:
            n = arrival.concurrency * CLOSED_LOOP_REQUESTS_PER_CLIENT
            _check_implied_count(n, "workload.arrival.concurrency")
        else:
            n = DEFAULT_NUM_REQUESTS
        return ClosedLoopWorkload(
            concurrency=arrival.concurrency,
            think_time_s=float(arrival.think_time_s),
            prompt_tokens=sample_lengths(
                cfg.prompt_tokens, n, rng_prompt, base, field="workload.prompt_tokens"
            ),
            output_tokens=sample_lengths(
                cfg.output_tokens, n, rng_output, base, field="workload.output_tokens"
            ),
            duration_s=cfg.duration_s,
            think_times=(
                rng_think.exponential(arrival.think_time_s, n)
                if arrival.think_time_distribution == "exponential" and arrival.think_time_s > 0
                else None
            ),
            release_s=(
                GammaArrival(rate=arrival.rate, burstiness=arrival.burstiness).arrival_times(n, None, rng_arrival)
                if arrival.rate is not None
                else None
            ),
            prefixes=_shared_prefixes(cfg, n, rng_prefix),
        )

    n_req = cfg.num_requests
    if n_req is None and cfg.duration_s is None:
        n_req = DEFAULT_NUM_REQUESTS
    t = arrival.arrival_times(n_req, cfg.duration_s, rng_arrival)
    return OpenLoopWorkload(
        arrival_s=t,
        prompt_tokens=sample_lengths(
            cfg.prompt_tokens, t.size, rng_prompt, base, field="workload.prompt_tokens"
        ),
        output_tokens=sample_lengths(
            cfg.output_tokens, t.size, rng_output, base, field="workload.output_tokens"
        ),
        prefixes=_shared_prefixes(cfg, t.size, rng_prefix),
    )


def _build_trace_workload(
    cfg: WorkloadConfig, arrival: TraceArrival, base: Path | None
) -> OpenLoopWorkload:
    """Window, rescale and cut a trace, in that order (see the TraceArrival fields)."""
    path = _resolve(arrival.path, base, "workload.arrival.path")
    trace = read_trace(path, arrival.format, label=arrival.path)
    t = trace.arrival_s
    lo = int(np.searchsorted(t, arrival.start_s, side="left"))
    hi = t.size
    for limit in (arrival.max_requests, cfg.num_requests):
        if limit is not None:
            hi = min(hi, lo + limit)
    if lo >= t.size:
        raise ConfigError(
            f"start_s = {arrival.start_s} s is after the trace's last request "
            f"(at {t[-1]:.3f} s), so no request is left",
            where="workload.arrival.start_s",
            fix=f"use a start_s below {t[-1]:.3f}",
        )
    t = (t[lo:hi] - t[lo]) / arrival.rate_scale
    hi = lo + _before(t, cfg.duration_s).size
    t = t[: hi - lo]

    def window(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else a[lo:hi]

    def scaled(a: np.ndarray) -> np.ndarray:
        return scale_lengths(a[lo:hi], arrival.length_scale)

    prompts, outputs, sessions = scaled(trace.prompt_tokens), scaled(trace.output_tokens), window(trace.session_id)
    prefixes = _trace_prefixes(trace, arrival)
    if prefixes is not None:
        prefixes = prefixes.window(lo, hi, arrival.length_scale)
    if sessions is not None:
        prefixes = SessionTurns.build(sessions, prompts, outputs, prefixes)
    return OpenLoopWorkload(
        arrival_s=t,
        prompt_tokens=prompts,
        output_tokens=outputs,
        session_id=sessions,
        prefix_id=window(trace.prefix_id),
        hash_ids=trace.hash_ids[lo:hi] if trace.hash_ids is not None else None,
        skipped_rows=trace.skipped_rows,
        prefixes=prefixes,
    )


def _trace_prefixes(trace: Trace, arrival: TraceArrival) -> SharedPrefixes | HashedBlocks | None:
    """The shared content a trace marks per request (before any session chaining)."""
    if trace.hash_ids is not None:
        return HashedBlocks(trace.hash_ids, arrival.hash_block_tokens)
    if trace.prefix_id is not None and trace.prefix_tokens is not None:
        return SharedPrefixes(trace.prefix_id, trace.prefix_tokens)
    return None


# ---------------------------------------------------------------------------------------
# Trace files
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Trace:
    """A parsed trace file: sorted by arrival (stable), first arrival rebased to t = 0."""

    path: Path
    format: str
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    session_id: np.ndarray | None = None
    prefix_id: np.ndarray | None = None
    hash_ids: tuple[tuple[int, ...], ...] | None = None
    skipped_rows: int = 0
    prefix_tokens: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.arrival_s.size)


@dataclass
class _Rows:
    """Columns accumulated row by row while parsing (plain lists: appending is cheap)."""

    arrival: list[float]
    prompt: list[int]
    output: list[int]
    session: list[int] | None = None
    prefix: list[int] | None = None
    hashes: list[tuple[int, ...]] | None = None
    skipped: int = 0
    prefix_tokens: list[int] | None = None


TraceParse = Callable[[Path, str], _Rows]


@dataclass(frozen=True)
class TraceParser:
    """One trace format: its parser and, for CSV formats, the header columns it needs
    (also how ``format: auto`` recognises it)."""

    parse: TraceParse
    columns: tuple[str, ...] = ()


def _resolve(path: str, base_dir: Path | None, field: str) -> Path:
    """Resolve a user path against the scenario's folder and check that it is a file."""
    p = Path(path).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    if not p.is_file():
        where_from = (
            f"the scenario's folder {base_dir}" if base_dir is not None else "the working directory"
        )
        raise TraceError(
            f"file not found: {p}" if not p.exists() else f"not a file: {p}",
            where=field,
            fix=f"check the path; a relative path is resolved against {where_from}",
        )
    return p


#: Where a trace row is: (file label, 1-based line). The "file:line" text is only built
#: when an error is raised, which keeps the per-row cost of large traces low.
Loc = tuple[str, int]

_FIX_ROW = "fix or remove this row"


def _where(loc: Loc) -> str:
    return f"{loc[0]}:{loc[1]}"


def _number(text: str, column: str, loc: Loc) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise TraceError(
            f"column {column!r} has {text.strip()!r}, expected a number",
            where=_where(loc),
            fix=_FIX_ROW,
        )
    return value


def _tokens(text: str | float, column: str, loc: Loc, minimum: int = 1) -> int:
    """A whole token count >= ``minimum`` ("12" and "12.0" are accepted)."""
    try:
        value = int(text)  # str or an already-checked whole float
    except ValueError:
        f = _number(str(text), column, loc)
        if not f.is_integer():
            raise TraceError(
                f"column {column!r} has {str(text).strip()!r}, expected a whole number of tokens",
                where=_where(loc),
                fix=_FIX_ROW,
            ) from None
        value = int(f)
    if value < minimum:
        raise TraceError(
            f"column {column!r} is {value}; token counts must be >= {minimum}",
            where=_where(loc),
            fix=f"{_FIX_ROW} (every request needs at least one prompt and one output token)",
        )
    return value


def _optional_id(text: str, column: str, loc: Loc) -> int:
    """An optional integer id; blank means "none" (-1)."""
    text = text.strip()
    if not text:
        return -1
    try:
        return int(text)
    except ValueError:
        raise TraceError(
            f"column {column!r} has {text!r}, expected an integer id or blank",
            where=_where(loc),
            fix=_FIX_ROW,
        ) from None


def _csv_header(reader: Any, label: str, fmt: str, required: tuple[str, ...]) -> dict[str, int]:
    """Read the header row; return column name -> index, or explain what is missing."""
    header = next(reader, None)
    while header is not None and not any(c.strip() for c in header):
        header = next(reader, None)
    if header is None:
        raise TraceError("the file is empty", where=label, fix="point to a non-empty trace")
    cols = {name.strip(): i for i, name in enumerate(header)}
    missing = [c for c in required if c not in cols]
    if missing:
        raise TraceError(
            f"missing column(s) {', '.join(missing)} for format {fmt!r}; expected columns "
            f"{', '.join(required)}; found {', '.join(cols) or 'none'}",
            where=_where((label, reader.line_num)),
            fix="fix the header row, or set workload.arrival.format to the file's format",
        )
    return cols


def _csv_rows(reader: Any, label: str, width: int) -> Iterator[tuple[Loc, list[str]]]:
    """Yield (location, fields) per non-empty data row, checking it is wide enough."""
    for row in reader:
        if not any(row) or (len(row) == 1 and not row[0].strip()):  # a blank line
            continue
        if len(row) < width:
            raise TraceError(
                f"row has {len(row)} fields, the header needs at least {width}",
                where=_where((label, reader.line_num)),
                fix=_FIX_ROW,
            )
        yield (label, reader.line_num), row


def _open_text(path: Path) -> IO[str]:
    # utf-8-sig drops a byte-order mark that spreadsheet exports put before the header.
    return path.open(newline="", encoding="utf-8-sig")


def _parse_plain_csv(path: Path, label: str) -> _Rows:
    required = ("arrival_s", "prompt_tokens", "output_tokens")
    with _open_text(path) as f:
        reader = csv.reader(f)
        cols = _csv_header(reader, label, "csv", required)
        ia, ip, io = (cols[c] for c in required)
        isess, ipre = cols.get("session_id"), cols.get("prefix_id")
        iptok = cols.get("prefix_tokens")
        if iptok is not None and ipre is None:
            raise TraceError(
                "column 'prefix_tokens' needs a 'prefix_id' column: it says how long the shared "
                "prefix named by prefix_id is",
                where=_where((label, reader.line_num)),
                fix="add a prefix_id column (equal ids mean equal prefix text), or drop prefix_tokens",
            )
        out = _Rows(
            [],
            [],
            [],
            session=[] if isess is not None else None,
            prefix=[] if ipre is not None else None,
            prefix_tokens=[] if iptok is not None else None,
        )
        used = [i for i in (ia, ip, io, isess, ipre, iptok) if i is not None]
        for loc, row in _csv_rows(reader, label, max(used) + 1):
            out.arrival.append(_number(row[ia], "arrival_s", loc))
            out.prompt.append(_tokens(row[ip], "prompt_tokens", loc))
            out.output.append(_tokens(row[io], "output_tokens", loc))
            if out.session is not None:
                out.session.append(_optional_id(row[isess], "session_id", loc))
            if out.prefix is not None:
                out.prefix.append(_optional_id(row[ipre], "prefix_id", loc))
            if out.prefix_tokens is not None:
                text = row[iptok].strip()
                out.prefix_tokens.append(_tokens(text, "prefix_tokens", loc) if text else 0)
    return out


_AZURE_TIME = re.compile(
    r"\s*(\d{4}-\d{2}-\d{2})[ T](\d{1,2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"\s*(?:Z|([+-])(\d{2}):?(\d{2}))?\s*$"
)


def _azure_seconds(text: str, days: dict[str, int], loc: Loc) -> tuple[int, float]:
    """Parse ``2023-11-16 18:15:46.6805900`` (7 fractional digits, which datetime cannot
    read on Python 3.10) into (whole seconds since 0001-01-01 UTC, fraction); exact to
    the last digit. An optional ``Z`` or ``+hh:mm`` suffix is honoured."""
    m = _AZURE_TIME.match(text)
    day = None
    if m is not None:
        ymd, hh, mm, ss, digits, sign, oh, om = m.groups()
        day = days.get(ymd)
        if day is None:
            try:
                day = days[ymd] = date.fromisoformat(ymd).toordinal()
            except ValueError:
                day = None
    if m is None or day is None:
        raise TraceError(
            f"column 'TIMESTAMP' has {text.strip()!r}, expected a time like "
            "'2023-11-16 18:15:46.6805900'",
            where=_where(loc),
            fix=_FIX_ROW,
        )
    whole = day * 86400 + int(hh) * 3600 + int(mm) * 60 + int(ss)
    if sign:  # local time with a UTC offset: convert to UTC
        offset = int(oh) * 3600 + int(om) * 60
        whole -= offset if sign == "+" else -offset
    return whole, int(digits) / 10 ** len(digits) if digits else 0.0


def _parse_azure(path: Path, label: str) -> _Rows:
    required = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
    whole: list[int] = []
    out = _Rows([], [], [])
    days: dict[str, int] = {}
    with _open_text(path) as f:
        reader = csv.reader(f)
        cols = _csv_header(reader, label, "azure", required)
        it, ip, io = (cols[c] for c in required)
        for loc, row in _csv_rows(reader, label, max(it, ip, io) + 1):
            sec, frac = _azure_seconds(row[it], days, loc)
            whole.append(sec)
            out.arrival.append(frac)
            out.prompt.append(_tokens(row[ip], "ContextTokens", loc))
            out.output.append(_tokens(row[io], "GeneratedTokens", loc))
    if whole:
        # Subtract whole seconds as integers first: absolute epoch floats would lose the
        # sub-microsecond digits.
        rel = np.asarray(whole, dtype=np.int64) - whole[0]
        out.arrival = (rel + np.asarray(out.arrival, dtype=np.float64)).tolist()
    return out


def _parse_burstgpt(path: Path, label: str) -> _Rows:
    required = ("Timestamp", "Request tokens", "Response tokens")
    out = _Rows([], [], [])
    with _open_text(path) as f:
        reader = csv.reader(f)
        cols = _csv_header(reader, label, "burstgpt", required)
        it, ip, io = (cols[c] for c in required)
        for loc, row in _csv_rows(reader, label, max(it, ip, io) + 1):
            ts = _number(row[it], "Timestamp", loc)
            response = _tokens(row[io], "Response tokens", loc, minimum=0)
            if response == 0:  # BurstGPT logs failed requests with no response tokens
                out.skipped += 1
                continue
            out.arrival.append(ts)
            out.prompt.append(_tokens(row[ip], "Request tokens", loc))
            out.output.append(response)
    return out


def _json_number(obj: dict, key: str, loc: Loc) -> float:
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TraceError(
            f"{key!r} is {json.dumps(value)}, expected a number",
            where=_where(loc),
            fix="fix or remove this line",
        )
    return float(value)


def _parse_mooncake(path: Path, label: str) -> _Rows:
    required = ("timestamp", "input_length", "output_length")
    out = _Rows([], [], [], prefix=[], hashes=[])
    any_hashes = False
    json_fix = "each line must be one JSON object"
    with path.open(encoding="utf-8-sig") as f:
        for line_no, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            loc = (label, line_no)
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as e:
                raise TraceError(
                    f"invalid JSON ({e.msg}, column {e.colno})", where=_where(loc), fix=json_fix
                ) from None
            if not isinstance(obj, dict):
                raise TraceError("line is not a JSON object", where=_where(loc), fix=json_fix)
            missing = [k for k in required if k not in obj]
            if missing:
                raise TraceError(
                    f"missing key(s) {', '.join(missing)}; expected keys "
                    f"{', '.join(required)}[, hash_ids]",
                    where=_where(loc),
                    fix="fix this line, or set workload.arrival.format to the file's format",
                )
            out.arrival.append(_json_number(obj, "timestamp", loc) / 1000.0)  # ms -> s
            for key, dest in (("input_length", out.prompt), ("output_length", out.output)):
                value = _json_number(obj, key, loc)
                if not value.is_integer():
                    raise TraceError(
                        f"{key!r} is {value}, expected a whole number of tokens",
                        where=_where(loc),
                        fix="fix or remove this line",
                    )
                dest.append(_tokens(value, key, loc))
            hashes = obj.get("hash_ids", [])
            if not isinstance(hashes, list) or not all(
                isinstance(h, int) and not isinstance(h, bool) for h in hashes
            ):
                raise TraceError(
                    "'hash_ids' must be a list of integers",
                    where=_where(loc),
                    fix="fix or remove this line",
                )
            any_hashes = any_hashes or "hash_ids" in obj
            out.hashes.append(tuple(hashes))
            out.prefix.append(hashes[0] if hashes else -1)
    if not any_hashes:
        out.hashes = out.prefix = None
    return out


#: Trace format name (as in ``workload.arrival.format``) -> parser. Register new formats
#: here; ``format: auto`` tries the CSV ones in this order by their header columns.
TRACE_PARSERS: dict[str, TraceParser] = {
    "csv": TraceParser(_parse_plain_csv, ("arrival_s", "prompt_tokens", "output_tokens")),
    "azure": TraceParser(_parse_azure, ("TIMESTAMP", "ContextTokens", "GeneratedTokens")),
    "burstgpt": TraceParser(_parse_burstgpt, ("Timestamp", "Request tokens", "Response tokens")),
    "mooncake": TraceParser(_parse_mooncake),
}


def sniff_trace_format(path: Path, label: str | None = None) -> str:
    """Guess a trace's format: JSON lines are Mooncake; CSVs are told apart by header."""
    label = label or str(path)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return "mooncake"
    with _open_text(path) as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            if line.lstrip().startswith("{"):
                return "mooncake"
            header = {c.strip() for c in next(csv.reader([line]))}
            csv_formats = {n: p.columns for n, p in TRACE_PARSERS.items() if p.columns}
            for name, columns in csv_formats.items():
                if set(columns) <= header:
                    return name
            # A partial match is most likely that format with a column misspelt or missing.
            best = max(csv_formats, key=lambda n: len(header & set(csv_formats[n])))
            missing = [c for c in csv_formats[best] if c not in header]
            if len(missing) < len(csv_formats[best]):
                raise TraceError(
                    f"missing column(s) {', '.join(missing)} for format {best!r}; expected "
                    f"columns {', '.join(csv_formats[best])}",
                    where=_where((label, line_no)),
                    fix="fix the header row, or set workload.arrival.format to the file's format",
                )
            known = "; ".join(f"{n}: {','.join(c)}" for n, c in csv_formats.items())
            raise TraceError(
                f"cannot tell the trace format from the header {line.strip()!r}",
                where=_where((label, line_no)),
                fix=f"set workload.arrival.format, or use one of these headers: {known}; "
                "or JSON lines (mooncake)",
            )
    raise TraceError("the file is empty", where=label, fix="point to a non-empty trace")


def read_trace(path: Path | str, fmt: str = "auto", *, label: str | None = None) -> Trace:
    """Parse a trace file into arrays: sorted by time (stable), first arrival at t = 0.

    Out-of-order timestamps are sorted, not rejected (real logs are often written by
    several workers). ``label`` names the file in error messages (default: the path).
    """
    path = Path(path)
    label = label or str(path)
    if not path.is_file():
        raise TraceError(
            f"file not found: {path}",
            where=label,
            fix="check the path; a relative path is resolved against the scenario file's folder",
        )
    try:
        if fmt == "auto":
            fmt = sniff_trace_format(path, label)
        if fmt not in TRACE_PARSERS:
            raise TraceError(
                f"unknown trace format {fmt!r}",
                where=label,
                fix=f"use one of: auto, {', '.join(TRACE_PARSERS)}",
            )
        rows = TRACE_PARSERS[fmt].parse(path, label)
    except UnicodeDecodeError as e:
        raise TraceError(
            f"not a UTF-8 text file ({e.reason} at byte {e.start})",
            where=label,
            fix="point to the CSV/JSONL trace itself (decompress it first if needed)",
        ) from None
    if not rows.arrival:
        extra = f" ({rows.skipped} failed requests skipped)" if rows.skipped else ""
        raise TraceError(
            f"the trace has no requests{extra}", where=label, fix="point to a non-empty trace"
        )
    if rows.skipped:
        logger.warning(
            "%s: skipped %d failed request(s) with 0 response tokens", label, rows.skipped
        )

    arrival = np.asarray(rows.arrival, dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    arrival = arrival[order]
    arrival -= arrival[0]

    def column(values: list[int] | None) -> np.ndarray | None:
        return None if values is None else np.asarray(values, dtype=np.int64)[order]

    hashes = None
    if rows.hashes is not None:
        hashes = tuple(rows.hashes[i] for i in order.tolist())
    return Trace(
        path=path,
        format=fmt,
        arrival_s=arrival,
        prompt_tokens=column(rows.prompt),
        output_tokens=column(rows.output),
        session_id=column(rows.session),
        prefix_id=column(rows.prefix),
        hash_ids=hashes,
        skipped_rows=rows.skipped,
        prefix_tokens=column(rows.prefix_tokens),
    )


def read_length_column(path: Path | str, column: str, *, label: str | None = None) -> np.ndarray:
    """Read one column of whole token counts (each >= 1) from a CSV with a header row."""
    path = Path(path)
    label = label or str(path)
    try:
        with _open_text(path) as f:
            reader = csv.reader(f)
            cols = _csv_header(reader, label, "csv", (column,))
            ic = cols[column]
            values = [
                _tokens(row[ic], column, loc) for loc, row in _csv_rows(reader, label, ic + 1)
            ]
    except UnicodeDecodeError as e:
        raise TraceError(
            f"not a UTF-8 text file ({e.reason} at byte {e.start})",
            where=label,
            fix="point to a CSV file",
        ) from None
    if not values:
        raise TraceError(
            f"column {column!r} has no values", where=label, fix="point to a non-empty CSV"
        )
    return np.asarray(values, dtype=np.int64)


__all__ = [
    "CLOSED_LOOP_REQUESTS_PER_CLIENT",
    "DEFAULT_NUM_REQUESTS",
    "TRACE_PARSERS",
    "ArrivalConfig",
    "ClosedLoopArrival",
    "ClosedLoopWorkload",
    "ConstantArrival",
    "EmpiricalLength",
    "FixedLength",
    "GammaArrival",
    "LengthConfig",
    "LognormalLength",
    "NormalLength",
    "OpenLoopWorkload",
    "PoissonArrival",
    "Trace",
    "TraceArrival",
    "TraceParser",
    "UniformLength",
    "WorkloadConfig",
    "build_workload",
    "read_length_column",
    "read_trace",
    "sample_lengths",
    "sniff_trace_format",
]
