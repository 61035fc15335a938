"""The API server in front of the engines: what a request spends there before an engine sees it.

A client's TTFT starts when it sends. The server first parses the request (serial: one event
loop, `cost_model.frontend_ms_per_request`), then tokenises the prompt text
(`frontend_us_per_token`), then hands it on (HTTP and process hops: a plain latency,
`frontend_latency_ms`). Tokenising runs on one executor thread. vLLM from 0.10 batches it
(`AsyncMicrobatchTokenizer`, vllm#19334): the first prompt to reach an idle tokeniser opens
a short window, prompts that arrive inside it join (up to a batch size), and the batch is
encoded in one call of the fast tokeniser's batch encode, which runs its prompts in
parallel, so the batch lasts as long as its longest prompt. The next batch forms only after
this one is done. Older engines tokenise one prompt at a time (batch 1, no window). The
engine generation's entry in `simulator/cost/config.py` says which.

One server stands in front of all replicas (a deployment with a server per replica tokenises
on as many threads); at ~1.3 ms for a batch of 1k-token prompts it is far from busy at the
rates a replica serves, so the difference does not show.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import simpy

from simulator.cost.config import CostModelConfig
from simulator.request import Request


def lone_request_delay(config: CostModelConfig, prompt_tokens: int) -> float:
    """Seconds a request that finds the server idle spends there before an engine sees it."""
    engine = config.overheads()
    tokenising = config.frontend_us_per_token * 1e-6 * prompt_tokens
    window = engine.tokenizer_window_ms * 1e-3 if tokenising and engine.tokenizer_batch > 1 else 0.0
    return config.frontend_ms_per_request * 1e-3 + window + tokenising + config.frontend_latency_ms * 1e-3


def describe_api_server(config: CostModelConfig) -> str | None:
    """One line for run summaries and `explain`: what a request spends in the API server, so
    a reader can tell the engine's TTFT from the server's; None when every cost is zero."""
    engine = config.overheads()
    parts = []
    if config.frontend_ms_per_request:
        parts.append(f"{config.frontend_ms_per_request:g} ms parsing (one at a time)")
    if config.frontend_us_per_token:
        batching = (f"in batches of up to {engine.tokenizer_batch} within {engine.tokenizer_window_ms:g} ms"
                    if engine.tokenizer_batch > 1 else "one prompt at a time")
        parts.append(f"tokenising {config.frontend_us_per_token:g} µs a prompt token, {batching}")
    if config.frontend_latency_ms:
        parts.append(f"{config.frontend_latency_ms:g} ms hand-off")
    return "; ".join(parts) or None


class ApiServer:
    """Releases each request to `deliver` once the server's parse, tokenise and hand-off are done."""

    def __init__(self, env: simpy.Environment, config: CostModelConfig, deliver: Callable[[Request], None]):
        engine = config.overheads()
        self.env = env
        self.deliver = deliver
        self.parse_s = config.frontend_ms_per_request * 1e-3
        self.per_token_s = config.frontend_us_per_token * 1e-6
        self.latency_s = config.frontend_latency_ms * 1e-3
        self.max_batch = engine.tokenizer_batch
        self.window_s = engine.tokenizer_window_ms * 1e-3
        self._parser_free = 0.0
        self._waiting: deque[Request] = deque()
        self._busy_until = 0.0  # the batch being encoded ends then
        self._wake_pending = False  # a callback at `_busy_until` is scheduled
        self._window: int | None = None  # the open window's number, None while none is open
        self._windows_opened = 0

    @property
    def active(self) -> bool:
        """False when every cost is zero: requests then go straight to the engines."""
        return bool(self.parse_s or self.per_token_s or self.latency_s)

    def submit(self, req: Request) -> None:
        now = self.env.now
        if not self.parse_s:
            self._tokenise(req)
            return
        self._parser_free = max(now, self._parser_free) + self.parse_s
        self._later(self._parser_free - now, lambda: self._tokenise(req))

    def _tokenise(self, req: Request) -> None:
        if not self.per_token_s:
            self._hand_off([req])
            return
        self._waiting.append(req)
        if self.env.now < self._busy_until:  # encoding: the next batch forms when it ends
            if not self._wake_pending:
                self._wake_pending = True
                self._later(self._busy_until - self.env.now, self._encoder_free)
        elif self._window is None:
            self._open_window()
        elif len(self._waiting) >= self.max_batch:
            self._encode()

    def _open_window(self) -> None:
        if len(self._waiting) >= self.max_batch or not self.window_s:
            self._encode()
            return
        self._windows_opened += 1
        self._window = number = self._windows_opened
        self._later(self.window_s, lambda: self._window == number and self._encode())

    def _encode(self) -> None:
        self._window = None
        batch = [self._waiting.popleft() for _ in range(min(self.max_batch, len(self._waiting)))]
        encoding_s = max(r.prompt_tokens for r in batch) * self.per_token_s
        self._busy_until = self.env.now + encoding_s
        if self._waiting and not self._wake_pending:  # more than a batch was waiting
            self._wake_pending = True
            self._later(encoding_s, self._encoder_free)
        # One event per batch for its end and hand-off together; an event for the encoder
        # coming free only when a request is waiting for it.
        self._hand_off(batch, encoding_s)

    def _encoder_free(self) -> None:
        self._wake_pending = False
        if self.env.now < self._busy_until:  # another batch began at this instant
            if self._waiting:
                self._wake_pending = True
                self._later(self._busy_until - self.env.now, self._encoder_free)
        elif self._waiting and self._window is None:
            self._open_window()

    def _hand_off(self, batch: list[Request], after_s: float = 0.0) -> None:
        def deliver_all() -> None:
            for req in batch:
                self.deliver(req)
        if after_s + self.latency_s:
            self._later(after_s + self.latency_s, deliver_all)
        else:
            deliver_all()

    def _later(self, delay: float, action: Callable[[], object]) -> None:
        # A timeout with a callback: one event, where a process takes three (start, wait, end).
        self.env.timeout(delay).callbacks.append(lambda _event: action())
