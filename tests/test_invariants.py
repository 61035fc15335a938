"""Properties that hold for every scenario: conservation, causality, KV accounting, and
the exactness of decode fast-forwarding (DESIGN.md §7), checked over random scenarios.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (
    PAGED_POLICIES,
    POLICY_NAMES,
    closed_loop,
    constant,
    engines,
    fixed,
    poisson,
    scenario,
    simulate,
    time_limit,
    uniform,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MAX_MODEL_LEN = 2048
PROPERTY_SETTINGS = settings(max_examples=25, deadline=None,
                             suppress_health_check=[HealthCheck.too_slow])


@st.composite
def scenarios(draw) -> dict:
    policy = draw(st.sampled_from(POLICY_NAMES))
    kind = draw(st.sampled_from(["poisson", "constant", "gamma", "closed_loop", "capped_rate"]))
    rate = draw(st.floats(0.5, 300.0))
    if kind == "poisson":
        arrival = poisson(rate)
    elif kind == "constant":
        arrival = constant(rate)
    elif kind == "gamma":
        arrival = {"type": "gamma", "rate": rate, "burstiness": draw(st.sampled_from([0.3, 1.0, 4.0]))}
    elif kind == "closed_loop":
        arrival = closed_loop(draw(st.integers(1, 24)))
    else:  # issued at a rate, at most N in flight (vLLM --request-rate with --max-concurrency)
        arrival = {**closed_loop(draw(st.integers(1, 24))), "rate": rate}
    p_lo = draw(st.integers(1, 64))
    p_hi = draw(st.sampled_from([64, 400, 1500]))
    o_hi = draw(st.sampled_from([1, 24, 300]))
    sched: dict = {}
    if policy in ("static", "dynamic"):
        sched["max_batch_size"] = draw(st.sampled_from([1, 3, 8, 32]))
    if policy == "dynamic":
        sched["max_wait_ms"] = draw(st.sampled_from([0.0, 5.0, 100.0]))
    if policy in ("continuous", "vllm-v0", "vllm-v1"):
        sched["max_num_seqs"] = draw(st.sampled_from([2, 16, 256]))
    shared = None
    if policy == "vllm-v0" and draw(st.booleans()):  # KV to host memory; a tiny space falls back to recompute
        sched["preemption_mode"] = "swap"
        sched["swap_space_gib"] = draw(st.sampled_from([0.002, 0.05, 4.0]))
    if policy == "vllm-v1":
        sched["max_num_batched_tokens"] = draw(st.sampled_from([48, 512, 2048]))
        # vLLM refuses a budget below max_num_seqs (every running sequence needs a token).
        sched["max_num_seqs"] = min(sched["max_num_seqs"], sched["max_num_batched_tokens"])
        sched["async_scheduling"] = draw(st.booleans())
        if draw(st.booleans()):  # prompts opening with shared text: prefix-cache hits and evictions
            shared = {"tokens": draw(st.sampled_from([5, 40, 700])), "groups": draw(st.integers(1, 4))}
    pp = draw(st.sampled_from([1, 2]))
    kv_choices = [None, 2048, 4096]
    d = scenario(
        policy,
        arrival=arrival,
        prompt=uniform(p_lo, p_hi),
        output=uniform(1, o_hi),
        num_requests=draw(st.integers(1, 120)),
        seed=draw(st.integers(0, 2**16)),
        sched=sched,
        pp=pp,
        replicas=draw(st.integers(1, 3)),
        router=draw(st.sampled_from(["round_robin", "least_outstanding", "prefix_affinity"])),
        # None: the memory plan's (ample) cache; the others force preemption and rejections.
        kv_tokens=draw(st.sampled_from(kv_choices)),
        block_size=draw(st.sampled_from([1, 16, 32])),
        max_model_len=MAX_MODEL_LEN,
    )
    if shared:
        d["workload"]["shared_prefix"] = shared
    return d


def check_requests(d: dict, req) -> None:
    assert len(req) == d["workload"]["num_requests"]
    assert sorted(req["request_id"]) == list(range(len(req)))
    assert set(req["status"]) <= {"completed", "rejected"}
    rejected = req[req["status"] == "rejected"]
    assert (rejected["reject_reason"].str.len() > 0).all()
    done = req[req["status"] == "completed"]
    assert (done["reject_reason"] == "").all()
    assert np.isfinite(done[["first_token_s", "finish_s", "ttft_ms", "e2e_ms"]].to_numpy()).all()
    assert (done["arrival_s"] <= done["first_token_s"]).all()
    assert (done["first_token_s"] <= done["finish_s"]).all()
    assert (done["ttft_ms"] > 0).all()
    assert (done["e2e_ms"] >= done["ttft_ms"]).all()
    # TPOT exists exactly for requests with more than one output token.
    assert (done["tpot_ms"].isna() == (done["output_tokens"] == 1)).all()
    replicas = d["parallelism"]["replicas"]
    assert done["replica"].between(0, replicas - 1).all()


def check_tokens(d: dict, req, it, sim=None, recomputed: int = 0) -> None:
    """Computed tokens, plus those read from the prefix cache, cover every completed
    request's prompt + output − 1 (the last token's KV is never computed); exactly, when
    nothing was recomputed or padded, beyond `recomputed` tokens computed twice by design
    (a disaggregated decode instance's last prompt token)."""
    done = req[req["status"] == "completed"]
    computed = int(it["prefill_tokens"].sum() + it["decode_tokens"].sum())
    if sim is not None:
        computed += sum(e.scheduler.kv.prefix_cache.hit_tokens for e in engines(sim)
                        if e.scheduler.kv.prefix_cache is not None)
    needed = int((done["prompt_tokens"] + done["output_tokens"] - 1).sum()) + recomputed
    assert computed >= needed
    assert (done["cached_tokens"] < done["prompt_tokens"]).all()
    no_recompute = (req["preemptions"] - req["swaps"]).sum() == 0  # a swapped request keeps its KV
    stuck = req["reject_reason"].str.contains("deadlock").any()  # may have run partly
    if d["scheduler"]["policy"] != "static" and no_recompute and not stuck:
        assert computed == needed


def check_kv(sim, it) -> None:
    assert (it["kv_blocks_used"] >= 0).all()
    assert (it["kv_blocks_used"] <= it["kv_blocks_total"]).all()
    for e in engines(sim):
        kv = e.scheduler.kv
        assert kv.used == 0, "KV blocks leaked after every request settled"
        assert kv.swap_used == 0, "host swap blocks leaked after every request settled"
        assert 0 <= kv.peak_used <= kv.total
        assert 0 <= kv.swap_peak <= kv.swap_total
        assert 0 <= kv.cached <= kv.total  # prefix-cached blocks nobody references
        if kv.prefix_cache is not None:
            segments = kv.prefix_cache.segments
            assert all(s.refs == 0 for s in segments.values())
            assert kv.cached == sum(s.blocks for s in segments.values())
        assert not e.scheduler.running and not e.scheduler.waiting and not e.scheduler.swapped


def check_timeline(d: dict, it) -> None:
    """Per replica: one engine's iterations never overlap; pp virtual engines (or dp ranks)
    keep at most that many iterations in flight."""
    pp = d["parallelism"]["pp"] * d["parallelism"].get("dp", 1)
    for _, g in it.groupby("replica", sort=False):
        start = g["start_s"].to_numpy()
        end = start + g["duration_ms"].to_numpy() * 1e-3
        assert (g["duration_ms"] > 0).all()
        if pp == 1:
            # One engine per replica: iterations are logged in order and never overlap.
            assert (np.diff(start) >= 0).all()
            assert (start[1:] >= end[:-1] - 1e-9).all()
        else:
            # pp virtual engines: at most pp iterations of a replica in flight at once.
            order = np.argsort(start, kind="stable")
            s, e = start[order], np.sort(end)
            in_flight = np.arange(1, len(s) + 1) - np.searchsorted(e, s + 1e-9, side="right")
            assert in_flight.max() <= pp


def check_invariants(d: dict, sim, res) -> None:
    """Every request settles, tokens are conserved, the KV cache stays within capacity and
    is freed, and the timeline is monotonic."""
    check_requests(d, res.requests)
    check_tokens(d, res.requests, res.iterations)
    check_kv(sim, res.iterations)
    check_timeline(d, res.iterations)


def check_fast_forward_equivalent(d: dict, a, b) -> None:
    ra, rb = a.requests, b.requests
    assert list(ra["status"]) == list(rb["status"])
    assert list(ra["reject_reason"]) == list(rb["reject_reason"])
    assert (ra["replica"].to_numpy() == rb["replica"].to_numpy()).all()
    assert (ra["preemptions"].to_numpy() == rb["preemptions"].to_numpy()).all()
    for col in ("ttft_ms", "e2e_ms", "tpot_ms"):
        np.testing.assert_allclose(ra[col], rb[col], rtol=0, atol=1e-6, equal_nan=True, err_msg=col)
    ia, ib = a.iterations, b.iterations
    assert len(ia) == len(ib)
    for col in ("prefill_tokens", "decode_tokens", "num_seqs"):
        assert ia[col].sum() == ib[col].sum(), col
    assert a.summary["preemptions"] == b.summary["preemptions"]
    for q in ("mean", "p50", "p99"):
        x, y = a.summary["itl_ms"][q], b.summary["itl_ms"][q]
        assert (x is None) == (y is None)
        if x is not None:
            assert x == pytest.approx(y, rel=1e-9, abs=1e-9)
    if d["parallelism"]["pp"] == 1:
        key = ["replica", "start_s"]
        sa = ia.sort_values(key, kind="stable").reset_index(drop=True)
        sb = ib.sort_values(key, kind="stable").reset_index(drop=True)
        for col in ("replica", "prefill_tokens", "decode_tokens", "num_seqs", "kv_blocks_used",
                    "kv_blocks_total"):
            assert (sa[col].to_numpy() == sb[col].to_numpy()).all(), col
        for col in ("start_s", "duration_ms"):
            np.testing.assert_allclose(sa[col], sb[col], rtol=1e-9, atol=1e-12, err_msg=col)


@PROPERTY_SETTINGS
@given(scenarios())
def test_invariants_and_fast_forward_exactness(d):
    with time_limit(30.0):
        sim, res = simulate(d, fast_forward=True)
    req, it = res.requests, res.iterations
    check_requests(d, req)
    check_tokens(d, req, it, sim)
    check_kv(sim, it)
    check_timeline(d, it)
    assert res.summary["requests"]["completed"] + res.summary["requests"]["rejected"] == len(req)
    with time_limit(30.0):
        _, stepped = simulate(d, fast_forward=False)
    check_fast_forward_equivalent(d, res, stepped)


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_small_cache_invariants_per_policy(policy):
    """A deterministic heavy case per policy: small KV, bursty traffic, two replicas."""
    d = scenario(policy, arrival=poisson(40.0), prompt=uniform(16, 1000), output=uniform(1, 400),
                 num_requests=150, kv_tokens=4096, max_model_len=MAX_MODEL_LEN, replicas=2,
                 sched={"max_batch_size": 8} if policy in ("static", "dynamic") else None)
    sim, res = simulate(d)
    check_invariants(d, sim, res)
    assert (res.requests["status"] == "completed").all()
    if policy in PAGED_POLICIES:
        assert res.requests["preemptions"].sum() > 0
    _, stepped = simulate(d, fast_forward=False)
    check_fast_forward_equivalent(d, res, stepped)


def test_closed_loop_keeps_concurrency_bounded():
    """N clients never have more than N requests outstanding, and every one is answered."""
    d = scenario("vllm-v1", arrival=closed_loop(6), prompt=uniform(16, 400),
                 output=uniform(1, 64), num_requests=120)
    _, res = simulate(d)
    req = res.requests.sort_values("arrival_s")
    assert (req["status"] == "completed").all()
    times = np.sort(np.concatenate([req["arrival_s"], req["finish_s"]]))
    # Outstanding just after each event time: arrivals so far minus completions so far.
    arrived = np.searchsorted(np.sort(req["arrival_s"]), times, side="right")
    finished = np.searchsorted(np.sort(req["finish_s"]), times, side="right")
    assert (arrived - finished).max() <= 6


@pytest.mark.parametrize("rate", [0.5, 20.0, 1e6])
def test_rate_capped_closed_loop(rate):
    """Requests issued at a rate with at most N in flight: none goes out before its issue
    time, N are never exceeded, and the two limits are the open and the closed loop."""
    kw = {"prompt": uniform(16, 400), "output": uniform(1, 64), "num_requests": 120}
    d = scenario("vllm-v1", arrival={**closed_loop(4), "rate": rate}, **kw)
    sim, res = simulate(d)
    req = res.requests.sort_values("request_id")
    assert (req["status"] == "completed").all()
    assert (req["arrival_s"].to_numpy() >= sim.workload.release_s - 1e-12).all()
    times = np.sort(np.concatenate([req["arrival_s"], req["finish_s"]]))
    arrived = np.searchsorted(np.sort(req["arrival_s"]), times, side="right")
    finished = np.searchsorted(np.sort(req["finish_s"]), times, side="right")
    assert (arrived - finished).max() <= 4
    if rate == 0.5:  # far below capacity: every request goes out at its issue time
        _, open_loop = simulate(scenario("vllm-v1", arrival=poisson(rate), **kw))
        ref = open_loop.requests.sort_values("request_id")
        assert np.allclose(req["arrival_s"], ref["arrival_s"]) and np.allclose(req["ttft_ms"], ref["ttft_ms"])
    if rate == 1e6:  # far above: the plain closed loop (issue times a few µs apart)
        _, closed = simulate(scenario("vllm-v1", arrival=closed_loop(4), **kw))
        assert res.summary["duration_s"] == pytest.approx(closed.summary["duration_s"], rel=0.01)


@pytest.mark.parametrize("arrival", [{**closed_loop(4), "rate": 5.0}, {**closed_loop(4), "think_time_s": 2.9}],
                         ids=["rate", "think"])
def test_closed_loop_sends_nothing_at_or_after_duration(arrival):
    """duration_s bounds when requests go out, not when a client decides to send: a
    rate-capped client used to send long after it (32 of 45 requests past a 3 s window at
    5 req/s), and one with a think time sent at 3.017 s."""
    d = scenario("vllm-v1", arrival=arrival, prompt=fixed(128), output=fixed(16), num_requests=200)
    d["workload"]["duration_s"] = 3.0
    sim, res = simulate(d)
    req = res.requests
    assert 0 < len(req) < 200 and (req["arrival_s"] < 3.0).all()
    assert (req["status"] == "completed").all()
    check_kv(sim, res.iterations)
    if "rate" in arrival:  # the issue times before the window all went out
        assert len(req) == int((sim.workload.release_s < 3.0).sum())


def test_fast_forward_iteration_queue_len_matches_stepping():
    d = scenario("vllm-v1", arrival=constant(10.0), prompt=fixed(100), output=fixed(200),
                 num_requests=3, sched={"max_num_seqs": 1})
    _, ff = simulate(d, fast_forward=True)
    _, stepped = simulate(d, fast_forward=False)
    a = ff.iterations.sort_values("start_s", kind="stable")["queue_len"].to_numpy()
    b = stepped.iterations.sort_values("start_s", kind="stable")["queue_len"].to_numpy()
    assert len(a) == len(b)
    assert (a == b).all()


@pytest.mark.parametrize("arrival", [poisson(50.0), closed_loop(4)], ids=["open", "closed"])
def test_every_request_rejected_still_settles(arrival):
    """Prompts longer than max_model_len: each request is rejected with a reason."""
    d = scenario("vllm-v1", arrival=arrival, prompt=fixed(3000), output=fixed(8),
                 num_requests=100, max_model_len=MAX_MODEL_LEN)
    _, res = simulate(d)
    req = res.requests
    assert len(req) == 100 and (req["status"] == "rejected").all()
    assert req["reject_reason"].str.contains("max_model_len").all()
    assert res.summary["requests"]["completed"] == 0
    assert res.summary["throughput"]["requests_per_s"] == 0.0
    assert len(res.iterations) == 0


def test_closed_loop_with_many_rejections_does_not_recurse():
    d = scenario("vllm-v1", arrival=closed_loop(4), prompt=fixed(3000), output=fixed(8),
                 num_requests=1000, max_model_len=MAX_MODEL_LEN)
    _, res = simulate(d)
    assert (res.requests["status"] == "rejected").all() and len(res.requests) == 1000


def test_fast_forward_tie_with_pp_virtual_engines_closed_loop():
    """Regression (found by hypothesis): same-instant completions and replacement sends on
    PP virtual engines must break ties the same way whether decode is fast-forwarded or not."""
    d = {"model": {"name": "llama-3.1-8b", "max_model_len": MAX_MODEL_LEN}, "hardware": {"gpu": "h100-sxm"},
         "parallelism": {"tp": 1, "pp": 2, "replicas": 3},
         "scheduler": {"policy": "continuous", "max_num_seqs": 16},
         "router": {"policy": "round_robin"}, "memory": {"block_size": 1},
         "workload": {"arrival": {"type": "closed_loop", "concurrency": 22},
                      "prompt_tokens": {"type": "uniform", "min": 3, "max": 64},
                      "output_tokens": {"type": "uniform", "min": 1, "max": 24},
                      "num_requests": 24, "seed": 10112}}
    _, fast = simulate(d, fast_forward=True)
    _, stepped = simulate(d, fast_forward=False)
    check_fast_forward_equivalent(d, fast, stepped)


def test_fast_forward_ends_round_as_stepping_does():
    """Regression (found by fuzzing): a stretch's step ends are each the last end plus one
    duration, as stepping computes them; summing the durations first differed in the last
    bit and flipped which PP virtual engine a later closed-loop send tied to."""
    d = {"model": {"name": "opt-125m", "max_model_len": 512}, "hardware": {"gpu": "h200"},
         "parallelism": {"pp": 2}, "scheduler": {"policy": "continuous", "max_num_seqs": 1},
         "workload": {"arrival": {"type": "closed_loop", "concurrency": 3},
                      "prompt_tokens": {"type": "empirical", "values": [143, 125]},
                      "output_tokens": {"type": "fixed", "value": 7}, "num_requests": 250, "seed": 561},
         "output": {"report": False}}
    _, fast = simulate(d, fast_forward=True)
    _, stepped = simulate(d, fast_forward=False)
    check_fast_forward_equivalent(d | {"parallelism": {"pp": 2}}, fast, stepped)


@pytest.mark.parametrize("model, gpu, tp, dtypes, kv_tokens, block", [
    ("deepseek-v4-flash", "b200", 4, {"weight_dtype": "fp8", "expert_weight_dtype": "fp4"}, 40_000, 16),
    ("minimax-m3", "h200", 8, {"weight_dtype": "fp8"}, 16_384, 128),  # the block size vLLM requires for it
    ("mimo-v2-flash", "h200", 4, {"weight_dtype": "fp8"}, 8_192, 16),
    ("step-3.5-flash", "h200", 4, {"weight_dtype": "fp8"}, 8_192, 16),
    ("kimi-k3", "b300", 8, {"expert_weight_dtype": "fp4"}, 8_192, 16),
])
def test_invariants_hold_for_each_newer_attention_kind(model, gpu, tp, dtypes, kv_tokens, block):
    """DeepSeek-V4's per-sequence windows and compressor state, MiniMax-M3's block-sparse
    layers, windowed layers of their own shapes (MiMo-V2-Flash, Step-3.5) and Kimi Delta
    Attention's fp32 state, under a cache small enough to preempt: every request settles,
    tokens are conserved, every block is freed, and fast-forwarding changes nothing."""
    d = scenario("vllm-v1", arrival=poisson(30.0), prompt=uniform(16, 1000), output=uniform(1, 200),
                 num_requests=80, kv_tokens=kv_tokens, max_model_len=MAX_MODEL_LEN, model=model, gpu=gpu, tp=tp,
                 block_size=block)
    d["model"].update(dtypes)
    if model == "kimi-k3":
        d["parallelism"]["expert_parallel"] = True
    sim, res = simulate(d)
    check_requests(d, res.requests)
    check_tokens(d, res.requests, res.iterations, sim)
    check_kv(sim, res.iterations)
    check_timeline(d, res.iterations)
    assert (res.requests["status"] == "completed").all()
    assert res.requests["preemptions"].sum() > 0
    _, stepped = simulate(d, fast_forward=False)
    check_fast_forward_equivalent(d, res, stepped)
