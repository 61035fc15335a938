"""Replicas, and the disaggregated prefill/decode cluster that moves requests between pools.

Colocated serving routes each request to one `Replica`. Disaggregated serving
(`DisaggregatedCluster`) routes it to a prefill instance; the prompt's KV then moves to a
decode instance (chosen by the same router policy), which admits the request once its KV
has arrived and it has blocks for it. Under vLLM's KV connectors (`protocol: connector`)
the client's first token comes from the decode instance, which recomputes the last prompt
token; under DistServe's migration (`protocol: distserve`) from the prefill instance.
"""

from __future__ import annotations

from collections.abc import Callable

import simpy

from simulator.engine import Engine
from simulator.kv_transfer import KVTransfer
from simulator.request import Request
from simulator.router import RouterConfig, make_router


class Replica:
    """A model copy: one engine, or one per pipeline stage's micro-batch (vLLM v0's virtual engines)."""

    def __init__(self, index: int, engines: list[Engine]):
        self.index = index
        self.engines = engines
        self.inbound = 0  # requests whose KV is on its way here (disaggregated decode)

    @property
    def outstanding(self) -> int:
        return sum(e.outstanding for e in self.engines) + self.inbound

    def submit(self, req: Request) -> None:
        req.replica = self.index
        # vLLM's PP engine hands a new request to the virtual engine with the least work.
        engine = min(self.engines, key=lambda e: e.outstanding) if len(self.engines) > 1 else self.engines[0]
        engine.submit(req)


class DisaggregatedCluster:
    """Prefill pool → KV transfer → decode pool, one SimPy process per transfer.

    Instance indices are global: prefill instances first, then decode instances, so
    `Request.replica` and the iteration log's `replica` name one instance unambiguously.
    """

    def __init__(self, env: simpy.Environment, prefill: list[Replica], decode: list[Replica],
                 transfer: KVTransfer, router: RouterConfig,
                 on_finish: Callable[[Request], None], on_reject: Callable[[Request, str], None]):
        self.env = env
        self.prefill = prefill
        self.decode = decode
        self.transfer = transfer
        self.prefill_router = make_router(router)
        # Decode instances receive the KV with the request: no cache to be near, so load decides.
        self.decode_router = make_router(router if router.policy != "prefix_affinity"
                                         else RouterConfig(policy="least_outstanding"))
        self.on_finish = on_finish
        self.on_reject = on_reject
        # `distserve` protocol: the decode instance copies the KV itself (roles.py), and
        # tells us when, so that the prefill side's copy is freed then.
        self.pulled = transfer.protocol == "distserve"
        for rep in prefill:
            for engine in rep.engines:
                engine.on_finish = self._prefill_done_at(engine)
                engine.scheduler.finishes_one_token_requests = self.pulled
        self._source: dict[int, tuple[Engine, int]] = {}
        if self.pulled:
            for rep in decode:
                for engine in rep.engines:
                    engine.scheduler.on_migrated = self._migrated

    @property
    def instances(self) -> list[Replica]:
        return [*self.prefill, *self.decode]

    def route(self, req: Request) -> None:
        """An arrival: refuse it now if the decode pool never could serve it, else prefill."""
        reason = self.decode[0].engines[0].scheduler.admission_error(req)
        if reason is not None:
            self.on_reject(req, f"decode pool: {reason}")
            return
        self.prefill[self.prefill_router.choose(self.prefill, req)].submit(req)

    def _prefill_done_at(self, engine: Engine) -> Callable[[Request], None]:
        def done(req: Request) -> None:
            if req.status == "transferring":
                if self.pulled:
                    self._hand_off(req, engine)
                else:
                    self.env.process(self._move(req, engine))
            else:  # a one-token request finishes at the prefill instance
                self.on_finish(req)
        return done

    def _hand_off(self, req: Request, source: Engine) -> None:
        """Queue the request at a decode instance at once; its KV stays here until pulled."""
        d = self.decode_router.choose(self.decode, req)
        req.prefill_replica = req.replica
        req.kv_transfer_s = self.transfer.seconds(req.prompt_tokens, req.replica, d)
        self._source[req.id] = (source, source.scheduler.hold_for_pull(req))
        self.decode[d].submit(req)

    def _migrated(self, req: Request) -> None:
        """A decode instance has copied the KV: free the prefill side's blocks."""
        source, held = self._source.pop(req.id)
        source.scheduler.end_pull(held)
        source.wake()

    def _move(self, req: Request, source: Engine):
        """Hold the prefill KV for the transfer, then free it and queue at a decode instance."""
        d = self.decode_router.choose(self.decode, req)
        target = self.decode[d]
        req.prefill_replica = req.replica
        seconds = self.transfer.seconds(req.prompt_tokens, req.replica, d)
        req.kv_transfer_s = seconds
        req.discard_first_token()  # no client saw it; a TPOT bound must not start from it
        target.inbound += 1
        yield self.env.timeout(seconds)
        target.inbound -= 1
        source.scheduler.finish_transfer(req)
        source.wake()
        req.first_token_from_decode()
        target.submit(req)
