"""`kv_transfer.protocol: distserve`: the decode instance pulls each prompt's KV in its own
loop, as DistServe's decoding stage does (roles.MigratingDecodeRole): the acceptance
threshold, the copy time added to the iteration that carries it, DistServe's admission
check (held blocks counted twice), the prefill side freed only once the copy is done, and
progress where DistServe's own rules would wait forever.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import engines, fixed, poisson, prefill_shape, scenario, simulate, uniform
from test_disaggregation import BW_GBPS, LAT_MS, check_disaggregated, disagg, kv_bytes_per_gpu

from simulator.kv_cache import BlockManager
from simulator.request import Request
from simulator.scheduler.base import ItlSink
from simulator.scheduler.roles import MigratingDecodeRole, role_scheduler
from simulator.scheduler.vllm_v0 import VllmV0Config, VllmV0Scheduler

REL = 1e-9
COPY_S = 0.002


def decode_instance(blocks: int) -> MigratingDecodeRole:
    cls = role_scheduler(VllmV0Scheduler, "decode", "distserve")
    return cls(VllmV0Config(), BlockManager(blocks, 16), 4096, ItlSink(), token_budget=4096, max_num_seqs=256)


def handed_off(i: int, prompt: int, output: int = 50) -> Request:
    """A request whose prefill emitted its first token elsewhere: its prompt's KV exists."""
    req = Request(i, 0.0, prompt, output)
    req.num_computed, req.num_generated, req.kv_transfer_s = prompt, 1, COPY_S
    return req


def test_accepts_while_held_prompts_stay_under_five_percent():
    sched = decode_instance(100)  # 5% = 5 blocks
    pulled = []
    sched.on_migrated = pulled.append
    reqs = [handed_off(i, 64) for i in range(3)]  # 4 blocks each
    for r in reqs:
        assert sched.add(r) is None
    step = sched.schedule(0.0)
    # Held 0 then 4 blocks (< 5): two accepted; at 8 the third waits for the next iteration.
    assert [r for r, _ in step.entries] == reqs[:2] and list(sched.unaccepted) == reqs[2:]
    assert step.copy_s == pytest.approx(2 * COPY_S, rel=REL)
    assert pulled == []  # the prefill side keeps its copy until the iteration has run
    sched.complete(step, 0.05)
    assert pulled == reqs[:2]
    step = sched.schedule(0.05)
    assert [r for r, _ in step.entries] == reqs and step.copy_s == pytest.approx(COPY_S, rel=REL)
    sched.complete(step, 0.1)
    step = sched.schedule(0.1)
    assert step.copy_s == 0.0 and sched.can_fast_forward(step)  # nothing copied: a plain decode


def test_held_blocks_count_twice_in_the_admission_check():
    sched = decode_instance(20)
    first = handed_off(0, 150)  # 10 blocks; its first decode token (151 tokens) fits in them
    sched.add(first)
    sched.complete(sched.schedule(0.0), 0.05)
    assert sched.running == [first] and sched.kv.used == 10
    late = handed_off(1, 80)  # 5 blocks held; its context needs 6
    sched.add(late)
    step = sched.schedule(0.05)
    # 10 (running, at their next token) + 5 (held) + 6 (its own) = 21 > 20: it waits,
    # though 5 blocks are free and it needs one more. Its copy still ran in this iteration.
    assert [r for r, _ in step.entries] == [first] and list(sched.arrived) == [late]
    assert sched.kv.free == 5 and step.copy_s == pytest.approx(COPY_S, rel=REL)
    assert late.block_count == 5 and sched.held_blocks == 5


def test_runs_the_head_where_distserve_would_wait_forever():
    sched = decode_instance(10)
    req = handed_off(0, 96)  # 6 blocks held + 7 for its context > 10, with nothing running
    sched.add(req)
    step = sched.schedule(0.0)
    assert [r for r, _ in step.entries] == [req] and step.copy_s == pytest.approx(COPY_S, rel=REL)
    assert sched.held_blocks == 0 and sched.kv.used == 7


@pytest.mark.parametrize("policy", ["vllm-v0", "vllm-v1"])
def test_lone_request_copy_runs_in_the_decode_iteration(policy):
    """Alone, the request ends as under the connector protocol (prefill, copy, decodes), but the
    copy is the first decode iteration's, which starts when the first token is out."""
    d = scenario(policy, arrival=poisson(1.0), prompt=fixed(300), output=fixed(40), num_requests=1)
    d = disagg(d, bandwidth_gbps=BW_GBPS, latency_ms=LAT_MS, protocol="distserve")
    sim, res = simulate(d)
    transfer = 300 * kv_bytes_per_gpu("llama-3.1-8b", "bf16", 1, 1) / (BW_GBPS * 1e9) + LAT_MS * 1e-3
    prefill = sim.pools["prefill"].cost.iteration_time(prefill_shape(300), from_idle=True)
    steps = sim.pools["decode"].cost.decode_step_times(1, 300, 39, from_idle=True)
    r = res.requests.iloc[0]
    assert r["kv_transfer_ms"] == pytest.approx(transfer * 1e3, rel=REL)
    assert r["e2e_ms"] == pytest.approx((prefill + transfer + sum(steps)) * 1e3, rel=REL)
    it = res.iterations
    assert it["start_s"].iloc[1] == pytest.approx(prefill, rel=REL)
    np.testing.assert_allclose(it["duration_ms"], np.array([prefill, transfer + steps[0], *steps[1:]]) * 1e3,
                               rtol=REL)
    assert res.summary["disaggregation"]["kv_transfer"]["protocol"] == "distserve"


@pytest.mark.parametrize("protocol", ["connector", "distserve"])
def test_prefill_instance_holds_the_kv_until_the_decode_loop_pulls_it(protocol):
    """Five prompts at once, one per iteration on each pool (max_num_seqs 1), a 256-block
    decode cache (5%: 12.8 blocks). A connector frees each prompt's blocks once sent, so the
    prefill instance holds at most two. The decode loop pulls the first, then the second (held
    until the first finishes), and then holds the rest off: they stay on the prefill instance."""
    d = disagg(scenario("vllm-v0", arrival=poisson(1e6), prompt=fixed(1000), output=fixed(100), num_requests=5,
                        sched={"max_num_seqs": 1}, kv_tokens=4096), protocol=protocol)
    sim, res = simulate(d)
    blocks = -(-1000 // 16)
    prefill_peak = engines(sim)[0].scheduler.kv.peak_used  # instances: prefill first
    assert prefill_peak == (2 if protocol == "connector" else 3) * blocks
    assert (res.requests["status"] == "completed").all()
    assert all(e.scheduler.kv.used == 0 for e in engines(sim))


def test_full_decode_cache_throttles_migration_and_everything_completes():
    """Heavy load on a small decode cache, with swapping: held prompts stay near the
    threshold, requests wait to be pulled, and every one completes with all blocks freed."""
    d = disagg(scenario("vllm-v0", arrival=poisson(40.0), prompt=uniform(16, 1000), output=uniform(1, 400),
                        num_requests=150, kv_tokens=4096, max_model_len=2048,
                        sched={"preemption_mode": "swap", "swap_space_gib": 4.0}),
               prefill=(1, 1, 1), decode=(1, 1, 2), protocol="distserve")
    sim, res = simulate(d)
    check_disaggregated(d, sim, res)
    assert (res.requests["status"] == "completed").all()
    decode_it = res.iterations[res.iterations["pool"] == "decode"]
    assert (decode_it["queue_len"] > 0).any()
