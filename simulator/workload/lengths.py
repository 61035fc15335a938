"""Length distributions for prompts and outputs, sampled into whole token counts."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from simulator.strict import StrictModel
from simulator.workload.traces import read_length_column, resolve_path


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
        path = resolve_path(cfg.path, base_dir, f"{field}.path")
        return cfg.sample(n, rng, read_length_column(path, cfg.column, label=cfg.path))
    return cfg.sample(n, rng)
