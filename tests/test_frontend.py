"""The API server in front of the engines (simulator/frontend.py): a lone request's closed
form, vLLM's micro-batched tokeniser, the one-by-one tokeniser of older engines, and
properties that hold for any arrivals."""

from __future__ import annotations

from itertools import pairwise

import pytest
import simpy
import yaml
from conftest import cost_model_of, fixed, poisson, prefill_shape, scenario, simulate
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cost.config import ENGINES, CostModelConfig
from simulator.frontend import ApiServer
from simulator.request import Request
from simulator.validation import run_validation

PER_TOKEN_US, LATENCY_MS = 1.3, 10.0


def released(arrivals: list[tuple[float, int]], engine: str = "vllm-v1", **costs) -> list[float]:
    """Release time of each (arrival s, prompt tokens) request from an ApiServer alone."""
    env = simpy.Environment()
    config = CostModelConfig(engine=engine, **costs)
    out: dict[int, float] = {}
    server = ApiServer(env, config, lambda req: out.__setitem__(req.id, env.now))

    def send(i: int, at: float, prompt: int):
        yield env.timeout(at)
        server.submit(Request(i, at, prompt, 1))

    for i, (at, prompt) in enumerate(arrivals):
        env.process(send(i, at, prompt))
    env.run()
    assert sorted(out) == list(range(len(arrivals)))  # each released exactly once
    return [out[i] for i in range(len(arrivals))]


def test_lone_request_pays_window_tokenising_and_hand_off():
    """A lone request's TTFT is its prefill plus vLLM's 2 ms batching window, its own
    tokenising and the hand-off latency: nothing else waits."""
    prompt = 3000
    d = scenario(arrival=poisson(1.0), prompt=fixed(prompt), output=fixed(4), num_requests=1)
    d["cost_model"] = {"frontend_us_per_token": PER_TOKEN_US, "frontend_latency_ms": LATENCY_MS}
    _, res = simulate(d)
    prefill = cost_model_of(d).iteration_time(prefill_shape(prompt), from_idle=True)
    window = ENGINES["vllm-v1"].tokenizer_window_ms
    expected = prefill * 1e3 + window + prompt * PER_TOKEN_US * 1e-3 + LATENCY_MS
    assert res.requests.iloc[0]["ttft_ms"] == pytest.approx(expected, rel=1e-9)


def test_defaults_leave_the_engine_alone():
    """With every frontend cost at its default of zero there is no window either: a lone
    request's TTFT is exactly its prefill iteration (tests/test_analytic.py relies on it)."""
    d = scenario(arrival=poisson(1.0), prompt=fixed(500), output=fixed(4), num_requests=1)
    _, res = simulate(d)
    prefill = cost_model_of(d).iteration_time(prefill_shape(500), from_idle=True)
    assert res.requests.iloc[0]["ttft_ms"] == pytest.approx(prefill * 1e3, rel=1e-9)


def test_prompts_that_arrive_together_leave_together():
    """Up to 32 prompts reaching an idle tokeniser within its window form one batch, encoded
    in parallel: all leave when the longest is done. A full batch does not wait for the end
    of its window. The 33rd waits for the next batch."""
    per_token = PER_TOKEN_US * 1e-6
    arrivals = [(0.0, 1000 + 10 * i) for i in range(33)]
    out = released(arrivals, frontend_us_per_token=PER_TOKEN_US)
    first = 1310 * per_token  # full at once: the batch's longest prompt, no window
    assert out[:32] == pytest.approx([first] * 32)
    # The 33rd was queued during the first batch: it opens the next window when that ends.
    assert out[32] == pytest.approx(first + 0.002 + 1320 * per_token)


def test_a_prompt_inside_the_window_joins_the_batch():
    per_token = PER_TOKEN_US * 1e-6
    out = released([(0.0, 1000), (0.0015, 4000), (0.0025, 1000)], frontend_us_per_token=PER_TOKEN_US)
    batch_end = 0.002 + 4000 * per_token
    assert out[:2] == pytest.approx([batch_end, batch_end])  # the second arrived inside the window
    assert out[2] == pytest.approx(batch_end + 0.002 + 1000 * per_token)  # after it: next batch


@pytest.mark.parametrize("engine", ["vllm-0.2", "distserve"])
def test_older_engines_tokenise_one_prompt_at_a_time(engine):
    per_token = PER_TOKEN_US * 1e-6
    out = released([(0.0, 2000), (0.0, 1000), (0.0, 3000)], engine, frontend_us_per_token=PER_TOKEN_US)
    assert out == pytest.approx([2000 * per_token, 3000 * per_token, 6000 * per_token])


def test_parsing_is_serial_and_comes_first():
    """`frontend_ms_per_request` is one event loop's work: simultaneous requests queue for it."""
    out = released([(0.0, 100)] * 3, frontend_ms_per_request=1.0, frontend_latency_ms=5.0)
    assert out == pytest.approx([0.006, 0.007, 0.008])


def reference_release(arrivals: list[tuple[float, int]], max_batch: int, window_s: float,
                      per_token_s: float, latency_s: float) -> list[float]:
    """The same tokeniser as a plain loop over arrivals in order: a batch opens when its first
    prompt finds the encoder free, takes what arrives within the window (closing early when
    full), and the encoder is busy for its longest prompt."""
    order = sorted(range(len(arrivals)), key=lambda i: (arrivals[i][0], i))
    out = [0.0] * len(arrivals)
    free, k = 0.0, 0
    while k < len(order):
        opened = max(arrivals[order[k]][0], free)
        members = [i for i in order[k:] if arrivals[i][0] <= opened + window_s][:max_batch]
        closes = max(opened, arrivals[members[-1]][0]) if len(members) == max_batch else opened + window_s
        free = closes + max(arrivals[i][1] for i in members) * per_token_s
        for i in members:
            out[i] = free + latency_s
        k += len(members)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.0005, 0.001, 0.002, 0.004]) | st.floats(0.0, 0.05),
                          st.integers(1, 20_000)), min_size=1, max_size=80),
       st.sampled_from(["vllm-v1", "vllm-0.2"]))
def test_every_request_leaves_once_as_the_tokeniser_loop_says(arrivals, engine):
    """For any arrivals: each request leaves exactly once (checked in `released`), at the
    time a plain loop over the tokeniser's batches gives, never sooner than its arrival plus
    its own tokenising and the hand-off, and in arrival order (one tokeniser thread, batches
    taken first come first served)."""
    per_token, latency = PER_TOKEN_US * 1e-6, LATENCY_MS * 1e-3
    out = released(arrivals, engine, frontend_us_per_token=PER_TOKEN_US, frontend_latency_ms=LATENCY_MS)
    eng = ENGINES[engine]
    expected = reference_release(arrivals, eng.tokenizer_batch, eng.tokenizer_window_ms * 1e-3, per_token, latency)
    assert out == pytest.approx(expected, abs=1e-12)
    for (at, prompt), leave in zip(arrivals, out, strict=True):
        assert leave >= at + prompt * per_token + latency - 1e-12
    order = sorted(range(len(arrivals)), key=lambda i: (arrivals[i][0], i))
    leaves = [out[i] for i in order]
    assert all(b >= a - 1e-12 for a, b in pairwise(leaves))


def test_run_and_validate_summaries_say_what_the_server_adds(tmp_path):
    """The run summary and the validation result name the API server's costs, so a reader can
    tell the engine's TTFT from the server's; with every cost at zero there is no line."""

    d = scenario(arrival=poisson(5.0), prompt=fixed(200), output=fixed(4), num_requests=5)
    assert simulate(d)[1].summary["config"]["api_server"] is None
    d["cost_model"] = {"frontend_us_per_token": PER_TOKEN_US, "frontend_latency_ms": LATENCY_MS}
    line = simulate(d)[1].summary["config"]["api_server"]
    assert line == "tokenising 1.3 µs a prompt token, in batches of up to 32 within 2 ms; 10 ms hand-off"
    src = tmp_path / "m.csv"
    src.write_text("arrival_s,prompt_tokens,output_tokens,ttft_ms,tpot_ms\n0.0,200,4,50.0,8.0\n0.5,300,4,50.0,8.0\n")
    d["cost_model"]["engine"] = "vllm-0.2"
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump(d))
    result, out = run_validation([src], base, [], tmp_path / "out")
    assert result["api_server"] == ["tokenising 1.3 µs a prompt token, one prompt at a time; 10 ms hand-off"]
    page = (out / "validation.html").read_text()
    assert "one prompt at a time" in page
    assert f"Measured: <code>{src}</code>; base scenario: <code>{base}</code>." in page  # what was compared


def test_explain_adds_the_servers_share_to_a_lone_prefill():
    """`simulate explain` names what a lone request spends in the API server, and the figure
    is the one the simulation gives it (the closed form above)."""
    from simulator import api
    from simulator.explain import explain

    d = scenario(arrival=poisson(1.0), prompt=fixed(2000), output=fixed(4), num_requests=1)
    assert not any("API server" in n for n in explain(api.load(data=d), prefill=2000).notes)
    d["cost_model"] = {"frontend_us_per_token": PER_TOKEN_US, "frontend_latency_ms": LATENCY_MS}
    note = next(n for n in explain(api.load(data=d), prefill=2000).notes if n.startswith("API server"))
    assert f"{2.0 + 2000 * PER_TOKEN_US * 1e-3 + LATENCY_MS:.3f} ms" in note  # window + tokenising + hand-off
