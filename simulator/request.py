"""A request's static description and its mutable serving state, in one slotted object.

Slots keep the per-request footprint small and attribute access fast: the scheduler
touches these fields on every iteration.
"""

from __future__ import annotations

import math


class Request:
    __slots__ = (
        "arrival",
        "block_count",
        "cached_tokens",
        "client",
        "finish_time",
        "first_token_time",
        "id",
        "kv_transfer_s",
        "last_token_time",
        "num_computed",
        "num_generated",
        "output_tokens",
        "preemptions",
        "prefill_replica",
        "prefix",
        "prefix_id",
        "prefix_layout",
        "prefix_published",
        "prefix_refs",
        "prefix_tail",
        "prompt_tokens",
        "rank",
        "reject_reason",
        "replica",
        "session_id",
        "shared_blocks",
        "status",
        "swaps",
    )

    def __init__(
        self,
        id: int,
        arrival: float,
        prompt_tokens: int,
        output_tokens: int,
        session_id: int = -1,
        prefix_id: int = -1,
        client: int = -1,
        prefix: tuple[tuple[int, int], ...] | None = None,
        prefix_tail: int | None = None,
    ):
        self.id = id
        self.arrival = arrival
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.session_id = session_id
        self.prefix_id = prefix_id
        self.client = client
        # Known prompt content for prefix caching: (segment id, end token) pairs, or None.
        self.prefix = prefix
        # A conversation turn: the segment id under which its whole context (prompt and
        # answer) is cached when it finishes, for the session's next turn to reuse.
        self.prefix_tail = prefix_tail
        self.prefix_layout = None  # the cache's per-request key/block layout (see PrefixCache)
        self.prefix_refs: list[int] | None = None  # cached segments this request references
        self.prefix_published = 0  # segments looked up or offered to the cache so far
        self.shared_blocks = 0  # of block_count, the blocks owned by cached segments
        self.cached_tokens = 0  # prompt tokens found in the prefix cache at first admission
        self.replica = -1
        self.rank = 0  # its engine's place in the replica: attention-DP rank or PP virtual engine
        # Disaggregated serving only: the prefill instance, and the KV transfer's duration.
        self.prefill_replica = -1
        self.kv_transfer_s = math.nan
        # num_computed: tokens whose KV is in cache; num_generated: output tokens emitted.
        self.num_computed = 0
        self.num_generated = 0
        self.block_count = 0
        self.preemptions = 0  # of which `swaps` moved the KV to host memory (no recompute)
        self.swaps = 0
        self.first_token_time = math.nan
        self.last_token_time = math.nan
        self.finish_time = math.nan
        self.status = "waiting"
        self.reject_reason = ""

    def discard_first_token(self) -> None:
        """The prefill instance's token never reaches the client under vLLM's KV connectors
        (its proxy asks it for one token and drops it): its time goes when the KV leaves."""
        self.first_token_time = self.last_token_time = math.nan

    def first_token_from_decode(self) -> None:
        """Arrive at a decode instance as vLLM's KV connectors hand a request over (after
        `discard_first_token`): the decode instance recomputes the last prompt token, whose
        KV it does not count as received, and streams every output token from the first."""
        self.num_computed = self.prompt_tokens - 1
        self.num_generated = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    def tokens_to_prefill(self) -> int:
        """Tokens that must be computed before the next output token can be sampled.

        After a recompute preemption, generated tokens become part of the prompt.
        """
        return self.prompt_tokens + self.num_generated - self.num_computed

    def __repr__(self) -> str:
        return (
            f"Request(id={self.id}, arrival={self.arrival:.4f}, prompt={self.prompt_tokens}, "
            f"output={self.output_tokens}, generated={self.num_generated}, status={self.status})"
        )
