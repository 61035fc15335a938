"""How many requests a workload generates when the scenario does not say."""

#: Requests generated when neither ``num_requests`` nor ``duration_s`` is set (vLLM's
#: ``--num-prompts`` default).
DEFAULT_NUM_REQUESTS = 1000
#: Closed loop with only ``duration_s``: lengths are pre-sampled for this many requests
#: per client. A run that needs more stops sending when they are used up.
CLOSED_LOOP_REQUESTS_PER_CLIENT = 1000
#: Refuse to pre-generate more requests than this from a duration (a typo guard: a rate or
#: duration off by 1000x would otherwise exhaust memory before the run starts).
MAX_IMPLIED_REQUESTS = 100_000_000
