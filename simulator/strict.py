"""Base class for every user-facing config: strict types, unknown fields rejected."""

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Strict pydantic model: no silent coercion, no unknown fields, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
