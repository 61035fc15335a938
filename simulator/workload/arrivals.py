"""Arrival processes: when requests are sent (open-loop rates, bursty gamma gaps, rate ramps,
closed-loop clients, trace replay), following vLLM's benchmark client."""

from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from simulator.errors import ConfigError
from simulator.strict import StrictModel
from simulator.workload.defaults import MAX_IMPLIED_REQUESTS


def _first_at_zero(gaps: np.ndarray) -> np.ndarray:
    """Arrival times for gaps: the first request at t = 0, each next one a gap later."""
    t = np.empty(gaps.size + 1, dtype=np.float64)
    t[0] = 0.0
    np.cumsum(gaps, out=t[1:])
    return t


def times_before(t: np.ndarray, duration_s: float | None) -> np.ndarray:
    """Keep the (sorted) arrivals strictly before ``duration_s``."""
    if duration_s is None:
        return t
    return t[: int(np.searchsorted(t, duration_s, side="left"))]


def gamma_gaps(rng: np.random.Generator, burstiness: float, rate, size: int) -> np.ndarray:
    """Gaps of vLLM's request stream: gamma with shape `burstiness` and mean 1/rate (`rate`
    a number or one per gap). An infinite burstiness is vLLM's evenly spaced stream (its
    `--burstiness inf`, vllm-project/vllm#26941): every gap 1/rate, and no draw taken."""
    if math.isinf(burstiness):
        return np.broadcast_to(1.0 / np.asarray(rate, dtype=np.float64), (size,)).copy()
    return rng.standard_gamma(burstiness, size) / (rate * burstiness)


# A burstiness field: a gamma shape > 0, or .inf for evenly spaced requests (vLLM's inf).
BURSTINESS_INF = "; .inf: evenly spaced, 1/rate apart (vLLM's --burstiness inf)"


def check_implied_count(expected: float, field: str) -> None:
    """Refuse a workload that would pre-generate more than MAX_IMPLIED_REQUESTS requests."""
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
            return times_before(_first_at_zero(self._gaps(rng, n - 1)), duration_s)
        assert duration_s is not None
        expected = self.rate * duration_s
        check_implied_count(expected, "workload.duration_s")
        chunk = int(expected + 6.0 * math.sqrt(expected)) + 16
        parts: list[np.ndarray] = []
        while True:
            parts.append(self._gaps(rng, chunk))
            t = _first_at_zero(np.concatenate(parts))
            if t[-1] >= duration_s:
                return times_before(t, duration_s)


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
        allow_inf_nan=True,  # .inf is vLLM's evenly spaced stream; NaN fails gt=0
        description=(
            "Gamma shape b (> 0, dimensionless). 1 = Poisson; < 1 burstier, > 1 more regular. "
            "Coefficient of variation of the gaps is 1/sqrt(b)" + BURSTINESS_INF + "."
        ),
    )

    def _gaps(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return gamma_gaps(rng, self.burstiness, self.rate, size)


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
            check_implied_count(expected, "workload.duration_s")
            n = math.ceil(expected) + 1
        return times_before(np.arange(n, dtype=np.float64) / self.rate, duration_s)


class RampArrival(StrictModel):
    """Open-loop traffic whose rate climbs over the run (vLLM's ``--ramp-up-strategy``).

    Benchmarks send it to find the rate at which a server saturates."""

    type: Literal["ramp"] = Field(
        "ramp",
        description=(
            "Rate ramp (vLLM --ramp-up-strategy): request i of n is sent at the rate reached at "
            "progress i/(n - 1) and the gap after it drawn at that rate; first request at t = 0."
        ),
    )
    start_rate: float = Field(gt=0, allow_inf_nan=False, description="Rate at the first request, requests per second (> 0).")
    end_rate: float = Field(gt=0, allow_inf_nan=False, description="Rate at the last request, requests per second (> 0).")
    strategy: Literal["linear", "exponential"] = Field(
        "linear", description="linear: the rate grows by equal steps per request; exponential: by equal factors.")
    burstiness: float = Field(
        default=1.0, gt=0, allow_inf_nan=True,
        description="Gamma shape of each gap, as vLLM's --burstiness (1 = Poisson" + BURSTINESS_INF + ").")

    def rates(self, n: int) -> np.ndarray:
        """The rate each of n requests is sent at (vLLM's _get_current_request_rate)."""
        progress = np.arange(n, dtype=np.float64) / max(n - 1, 1)
        if self.strategy == "linear":
            return self.start_rate + (self.end_rate - self.start_rate) * progress
        return self.start_rate * (self.end_rate / self.start_rate) ** progress

    def arrival_times(
        self, n: int | None, duration_s: float | None, rng: np.random.Generator
    ) -> np.ndarray:
        """``n`` arrivals (the ramp spans the request count, as vLLM's spans --num-prompts),
        cut at ``duration_s`` when given."""
        if n is None:
            raise ConfigError("a ramp spans a number of requests, and none is set", where="workload.num_requests",
                              fix="set workload.num_requests (vLLM's --num-prompts)")
        gaps = gamma_gaps(rng, self.burstiness, self.rates(n)[:-1], max(n - 1, 0))
        return times_before(_first_at_zero(gaps), duration_s)


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
        allow_inf_nan=True,
        description="Gamma shape of the gaps between issued requests when `rate` is set (1 = Poisson"
        + BURSTINESS_INF + ").",
    )

    @model_validator(mode="after")
    def _rate_or_think_time(self) -> ClosedLoopArrival:
        if self.rate is not None and self.think_time_s > 0:
            raise ValueError("set either rate (requests issued at a rate, capped at concurrency) "
                             "or think_time_s (clients pause between requests), not both")
        return self


class TraceArrival(StrictModel):
    """Replay of recorded traffic: exact timestamps and lengths from a file (rows out of time
    order are replayed in time order; request ids follow that order; times are shifted so
    the first request arrives at 0 s)."""

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
            "decided by the header. A row of the public traces (azure, burstgpt, mooncake) with 0 "
            "prompt or output tokens is a failed request: left out, and counted in summary.json's "
            "`trace` (rows, replayed, skipped_failed_rows, cut_by, unused_columns)."
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
    PoissonArrival | GammaArrival | ConstantArrival | RampArrival | ClosedLoopArrival | TraceArrival,
    Field(discriminator="type"),
]
