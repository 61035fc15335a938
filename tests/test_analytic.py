"""Cases with a closed-form answer: a lone request is exactly its iterations' cost-model
times; chunked prefill sums its chunks; queues match M/D/1 and D/D/1 theory.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import (
    constant,
    cost_model_of,
    decode_shape,
    fixed,
    poisson,
    prefill_shape,
    scenario,
    simulate,
)

from simulator.cost.ops import IterationShape

P, OUT = 300, 40
REL = 1e-9

LONE = {
    "vllm-v1": {},
    "vllm-v0": {},
    "continuous": {},
    "dynamic": {"max_wait_ms": 0.0},
    "static": {"max_batch_size": 1},
}


def lone(policy: str, prompt: int = P, output: int = OUT, **sched) -> dict:
    return scenario(policy, arrival=poisson(1.0), prompt=fixed(prompt), output=fixed(output),
                    num_requests=1, sched={**LONE[policy], **sched})


@pytest.mark.parametrize("fast_forward", [True, False])
@pytest.mark.parametrize("policy", list(LONE))
def test_lone_request_is_its_iterations(policy, fast_forward):
    d = lone(policy)
    cost = cost_model_of(d)
    _, res = simulate(d, fast_forward=fast_forward)
    r = res.requests.iloc[0]
    assert r["status"] == "completed" and r["arrival_s"] == 0.0
    # The prefill starts an idle engine: under vLLM v1's async scheduling (the default) only
    # later iterations hide their CPU work behind the GPU's.
    prefill = cost.iteration_time(prefill_shape(P), from_idle=True)
    steps = cost.decode_step_times(1, P, OUT - 1)
    assert r["ttft_ms"] == pytest.approx(prefill * 1e3, rel=REL)
    assert r["e2e_ms"] - r["ttft_ms"] == pytest.approx(sum(steps) * 1e3, rel=REL)
    assert r["tpot_ms"] == pytest.approx(np.mean(steps) * 1e3, rel=REL)
    # ITL of a lone request: its OUT−1 gaps, whose mean is its TPOT.
    assert res.summary["itl_ms"]["mean"] == pytest.approx(r["tpot_ms"], rel=REL)
    assert res.summary["itl_ms"]["p50"] == pytest.approx(np.median(steps) * 1e3, rel=REL)
    # The iteration log is the same story: one prefill, then OUT−1 single decodes.
    it = res.iterations
    assert len(it) == OUT
    assert list(it["prefill_tokens"]) == [P] + [0] * (OUT - 1)
    assert list(it["decode_tokens"]) == [0] + [1] * (OUT - 1)
    np.testing.assert_allclose(it["duration_ms"], np.array([prefill, *steps]) * 1e3, rtol=REL)


def test_decode_step_times_match_single_iterations():
    """The vectorised stretch times equal one iteration_time per step (fast-forward's basis)."""
    cost = cost_model_of(lone("vllm-v1"))
    for seqs, ctx, k in ((1, 300, 50), (7, 7 * 1000 + 13, 33), (64, 64 * 2048, 5), (3, 90, 2)):
        steps = cost.decode_step_times(seqs, ctx, k)
        assert len(steps) == k
        single = [cost.iteration_time(IterationShape(seqs, seqs, seqs, ctx + j * seqs, ()))
                  for j in range(k)]
        np.testing.assert_allclose(steps, single, rtol=1e-12)
        assert (np.diff(steps) >= 0).all()  # a longer KV read is never faster
    assert cost.decode_step_times(1, 300, 1)[0] == pytest.approx(
        cost.iteration_time(decode_shape(300)), rel=1e-12)


def test_single_token_request_has_no_tpot():
    d = lone("vllm-v1", output=1)
    cost = cost_model_of(d)
    _, res = simulate(d)
    r = res.requests.iloc[0]
    assert r["ttft_ms"] == pytest.approx(cost.iteration_time(prefill_shape(P), from_idle=True) * 1e3, rel=REL)
    assert r["e2e_ms"] == r["ttft_ms"]
    assert math.isnan(r["tpot_ms"])
    assert res.summary["tpot_ms"]["mean"] is None and res.summary["itl_ms"]["mean"] is None


@pytest.mark.parametrize("prompt", [2000, 1536, 513])
def test_chunked_prefill_sums_its_chunks(prompt):
    budget = 512
    d = lone("vllm-v1", prompt=prompt, output=3, max_num_batched_tokens=budget)
    cost = cost_model_of(d)
    _, res = simulate(d)
    r = res.requests.iloc[0]
    chunks, done = [], 0
    while done < prompt:
        q = min(budget, prompt - done)
        chunks.append((q, done))
        done += q
    expected = sum(cost.iteration_time(prefill_shape(q, c, emit=(c + q == prompt)), from_idle=(c == 0))
                   for q, c in chunks)
    assert r["ttft_ms"] == pytest.approx(expected * 1e3, rel=REL)
    it = res.iterations
    assert list(it["prefill_tokens"][: len(chunks)]) == [q for q, _ in chunks]
    assert (it["prefill_tokens"] + it["decode_tokens"] <= budget).all()
    decodes = cost.decode_step_times(1, prompt, 2)
    assert r["e2e_ms"] - r["ttft_ms"] == pytest.approx(sum(decodes) * 1e3, rel=REL)


def test_static_batch_is_padded_to_longest_prompt_and_output(tmp_path):
    """Two requests at t=0 in one static batch: the prefill is 2 × the longest prompt, and
    every decode runs both rows at the padded context until the longest output is done."""
    trace = tmp_path / "two.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,5\n0,300,10\n")
    d = scenario("static", sched={"max_batch_size": 2})
    d["workload"] = {"arrival": {"type": "trace", "path": str(trace)}}
    cost = cost_model_of(d)
    _, res = simulate(d)
    short, long_ = res.requests.iloc[0], res.requests.iloc[1]
    prefill = cost.iteration_time(IterationShape(600, 2, 0, 0, ((300, 0), (300, 0))))
    decode = [cost.iteration_time(IterationShape(2, 2, 2, 2 * (300 + j), ())) for j in range(9)]
    assert short["ttft_ms"] == pytest.approx(prefill * 1e3, rel=REL)
    assert long_["ttft_ms"] == pytest.approx(prefill * 1e3, rel=REL)
    assert long_["e2e_ms"] == pytest.approx((prefill + sum(decode)) * 1e3, rel=REL)
    assert short["e2e_ms"] == pytest.approx((prefill + sum(decode[:4])) * 1e3, rel=REL)
    it = res.iterations
    assert list(it["prefill_tokens"]) == [600] + [0] * 9
    assert list(it["decode_tokens"]) == [0] + [2] * 9  # padded rows keep decoding


# -- queueing theory --------------------------------------------------------------------
MD1_PROMPT = 256


def md1(rate: float, n: int, seed: int, arrival=None) -> dict:
    """Prefill-only requests (one output token), served one at a time: an M/D/1 queue."""
    return scenario("dynamic", arrival=arrival or poisson(rate), prompt=fixed(MD1_PROMPT),
                    output=fixed(1), num_requests=n, seed=seed,
                    sched={"max_batch_size": 1, "max_wait_ms": 0.0})


def service_time() -> float:
    return cost_model_of(md1(1.0, 1, 0)).iteration_time(prefill_shape(MD1_PROMPT))


@pytest.mark.parametrize(("rho", "n", "seeds"), [(0.5, 5000, 4), (0.8, 10000, 5)])
def test_md1_mean_wait_matches_pollaczek_khinchine(rho, n, seeds):
    s = service_time()
    waits = []
    for seed in range(seeds):
        _, res = simulate(md1(rho / s, n, seed))
        req = res.requests
        assert (req["status"] == "completed").all()
        waits.append(req["ttft_ms"].to_numpy() * 1e-3 - s)
    w = np.concatenate(waits)
    assert w.min() >= -1e-12  # nobody is served faster than the service time
    theory = rho * s / (2 * (1 - rho))
    assert w.mean() == pytest.approx(theory, rel=0.10)


def test_dd1_never_queues():
    s = service_time()
    _, res = simulate(md1(0, 200, 0, arrival=constant(0.5 / s)))
    ttft = res.requests["ttft_ms"].to_numpy()
    np.testing.assert_allclose(ttft, s * 1e3, rtol=1e-9)
    it = res.iterations
    assert (it["num_seqs"] == 1).all() and (it["queue_len"] == 0).all()


def test_dd1_overloaded_queue_grows_linearly():
    """Arrivals every S/2 with service S: request i waits i·S/2 (D/D/1 above capacity)."""
    s = service_time()
    _, res = simulate(md1(0, 50, 0, arrival=constant(2.0 / s)))
    req = res.requests.sort_values("request_id")
    i = req["request_id"].to_numpy()
    np.testing.assert_allclose(req["ttft_ms"].to_numpy() * 1e-3, s + i * s / 2, rtol=1e-9)


@pytest.mark.parametrize("gpu_name", ["h20", "h100-sxm", "l4", "a100-80gb-sxm"])
def test_small_batch_gemm_is_a_weight_read(gpu_name):
    """A decode GEMM of one to 16 rows reads its weights and does little else: on every
    GPU, H20 included (compute-starved: a 64-row tile made batch-1 decode compute-bound
    there, 2.6x the weight-read floor), the roofline time is the weight read plus a launch."""
    from simulator.cost.config import RooflineEfficiency
    from simulator.cost.roofline import RooflineTimer
    from simulator.hardware import get_gpu

    gpu = get_gpu(gpu_name)
    eff = RooflineEfficiency()
    timer = RooflineTimer(gpu, eff)
    n, k = 14336, 4096
    for m in (1, 8, 16):
        nbytes = 2.0 * n * k + 2.0 * m * (n + k)
        t = timer.gemm_time(m, n, k, 2.0 * m * n * k, nbytes, "bf16")
        floor = nbytes / (gpu.hbm_tbps * 1e12 * eff.gemm_memory)
        assert t == pytest.approx(floor + timer.latency * timer._gemm_kernels("bf16"), rel=1e-9)
