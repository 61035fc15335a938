"""The scenario's `workload` section, validated."""

from __future__ import annotations

from pydantic import Field, model_validator

from simulator.errors import ConfigError
from simulator.strict import StrictModel
from simulator.workload.arrivals import ArrivalConfig, TraceArrival
from simulator.workload.defaults import (
    CLOSED_LOOP_REQUESTS_PER_CLIENT,
    DEFAULT_NUM_REQUESTS,
    MAX_IMPLIED_REQUESTS,
)
from simulator.workload.lengths import LengthConfig

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
            "How requests arrive: poisson, gamma, constant, ramp, closed_loop or trace (selected "
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
        le=MAX_IMPLIED_REQUESTS,  # beyond it the pre-generated requests outgrow memory
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
            # Both at once: a scenario switched to a trace usually sets both.
            names = [n for n in ("prompt_tokens", "output_tokens") if getattr(self, n) is not None]
            if names:
                shown = " and ".join(f"`{n}`" for n in names)
                removals = " ".join(f"--set '~workload.{n}'" for n in names)
                raise ConfigError(
                    f"{shown} cannot be set with a trace arrival: lengths come from the trace file",
                    where=f"workload.{names[0]}",
                    fix=(
                        f"remove {shown} (from the file, or with {removals}); to lengthen "
                        "or shorten requests use "
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
