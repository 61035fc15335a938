"""Base class for every user-facing config: strict types, unknown fields rejected."""

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Strict pydantic model: no silent coercion, no unknown fields, immutable."""

    # No inf or NaN in any field: an infinite rate, price or SLO limit passes every bound
    # and then breaks the run (or the plan) after all the work is done.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)
