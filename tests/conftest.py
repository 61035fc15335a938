"""Shared helpers for the simulator tests: small scenario dicts and a run helper.

The scenarios are deliberately small (Llama-3.1-8B on one H100, a few hundred requests)
so the whole suite stays fast; `kv_tokens` forces a tiny KV cache to provoke preemption.
"""

from __future__ import annotations

import contextlib
import json
import signal
from pathlib import Path

import pytest

from simulator import api
from simulator.cost.ops import IterationShape
from simulator.simulation import Simulation, SimulationResult

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
CHATBOT = SCENARIOS / "chatbot.yaml"

#: Every batching policy and the ones with paged, on-demand KV (they can preempt).
POLICY_NAMES = ("static", "dynamic", "continuous", "vllm-v0", "vllm-v1")
PAGED_POLICIES = ("vllm-v0", "vllm-v1")


# ModelSpec fields a config.json does not carry (the catalog's names and published sizes):
# left out where a loaded config is compared with its catalog entry.
CATALOG_ONLY_FIELDS = frozenset({"name", "hf_id", "aliases", "published_params_b", "published_active_params_b"})


def write_config(tmp_path: Path, cfg: dict) -> Path:
    """A Hugging Face config.json of `cfg` under tmp_path."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def cli(*args) -> int:
    """Run `simulate ARGS` in-process; the exit status (0 when main returns normally)."""
    from simulator.cli import main

    try:
        main([str(a) for a in args])
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def fixed(value: int) -> dict:
    return {"type": "fixed", "value": value}


def uniform(lo: int, hi: int) -> dict:
    return {"type": "uniform", "min": lo, "max": hi}


def poisson(rate: float) -> dict:
    return {"type": "poisson", "rate": rate}


def constant(rate: float) -> dict:
    return {"type": "constant", "rate": rate}


def closed_loop(concurrency: int) -> dict:
    return {"type": "closed_loop", "concurrency": concurrency}


def scenario(
    policy: str = "vllm-v1",
    *,
    arrival: dict | None = None,
    prompt: dict | None = None,
    output: dict | None = None,
    num_requests: int = 100,
    seed: int = 0,
    sched: dict | None = None,
    tp: int = 1,
    pp: int = 1,
    replicas: int = 1,
    dp: int = 1,
    router: str = "round_robin",
    kv_tokens: int | None = None,
    block_size: int = 16,
    model: str = "llama-3.1-8b",
    max_model_len: int = 4096,
    gpu: str = "h100-sxm",
    slo: dict | None = None,
) -> dict:
    """A scenario dict with small, overridable defaults."""
    memory: dict = {"block_size": block_size}
    if kv_tokens is not None:
        memory["kv_cache_tokens"] = kv_tokens
    d = {
        "model": {"name": model, "max_model_len": max_model_len},
        "hardware": {"gpu": gpu},
        "parallelism": {"tp": tp, "pp": pp, "replicas": replicas, "dp": dp},
        "scheduler": {"policy": policy, **(sched or {})},
        "router": {"policy": router},
        "memory": memory,
        "workload": {
            "arrival": arrival or poisson(5.0),
            "prompt_tokens": prompt or fixed(128),
            "output_tokens": output or fixed(32),
            "num_requests": num_requests,
            "seed": seed,
        },
    }
    if slo:
        d["slo"] = slo
    return d


def simulate(d: dict, *, fast_forward: bool = True) -> tuple[Simulation, SimulationResult]:
    """Run a scenario dict and keep the Simulation (engines, KV managers, cost model)."""
    sim = Simulation(api.load(data=d))
    return sim, sim.run(fast_forward=fast_forward)


def cost_model_of(d: dict):
    """The iteration cost model a scenario would use, without running it."""
    return Simulation(api.load(data=d)).cost


def prefill_shape(p: int, prior: int = 0, emit: bool = True) -> IterationShape:
    """A lone prefill (or chunk) of p new tokens after `prior` tokens of context."""
    return IterationShape(p, 1 if emit else 0, 0, 0, ((p, prior),))


def decode_shape(context: int) -> IterationShape:
    """A lone decode of one sequence whose KV holds `context` tokens."""
    return IterationShape(1, 1, 1, context, ())


@contextlib.contextmanager
def time_limit(seconds: float):
    """Fail (TimeoutError) instead of hanging when a simulation never ends."""

    def _raise(*_):
        raise TimeoutError(f"simulation did not finish within {seconds} s")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def engines(sim: Simulation):
    return [e for rep in sim.replicas for e in rep.engines]


@pytest.fixture
def chatbot_path() -> Path:
    return CHATBOT
