"""Prefix caching under vllm-v1: what is reused, what it saves, what it evicts."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import constant, cost_model_of, fixed, poisson, prefill_shape, scenario, simulate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_invariants import check_fast_forward_equivalent, check_kv, check_tokens

from simulator import api
from simulator.errors import ConfigError, TraceError
from simulator.kv_cache import BlockManager
from simulator.prefix_cache import PrefixCache
from simulator.request import Request
from simulator.workload import read_trace

REL = 1e-9


def spaced(prompt: int, prefix: int, n: int = 2, groups: int = 1, **kw) -> dict:
    """n requests far apart (each runs alone) whose prompts open with `prefix` shared tokens."""
    d = scenario("vllm-v1", arrival=constant(0.2), prompt=fixed(prompt), output=fixed(8),
                 num_requests=n, **kw)
    d["workload"]["shared_prefix"] = {"tokens": prefix, "groups": groups}
    return d


@pytest.mark.parametrize("fast_forward", [True, False])
def test_a_cached_prefix_is_not_prefilled_again(fast_forward):
    """The second request reads 800 tokens from the cache: its TTFT is one prefill of the
    other 200 after 800 tokens of context, as the cost model times it."""
    d = spaced(1000, 800)
    cost = cost_model_of(d)
    sim, res = simulate(d, fast_forward=fast_forward)
    r = res.requests
    assert list(r["cached_tokens"]) == [0, 800]
    assert r["ttft_ms"][0] == pytest.approx(cost.iteration_time(prefill_shape(1000), from_idle=True) * 1e3, rel=REL)
    assert r["ttft_ms"][1] == pytest.approx(cost.iteration_time(prefill_shape(200, 800), from_idle=True) * 1e3, rel=REL)
    assert list(res.iterations["prefill_tokens"][res.iterations["prefill_tokens"] > 0]) == [1000, 200]
    assert res.summary["kv_cache"]["prefix_cache_hit_rate"] == pytest.approx(800 / 2000)
    kv = sim.replicas[0].engines[0].scheduler.kv
    assert kv.used == 0 and kv.cached == 800 // 16  # the prefix outlives both requests


def test_only_whole_blocks_before_the_last_token_are_reused():
    """A 100-token prefix fills 6 blocks of 16 (96 tokens); a prompt that is all prefix
    still computes its last token, so a 96-token prompt reuses only 80."""
    assert list(simulate(spaced(300, 100, 3))[1].requests["cached_tokens"]) == [0, 96, 96]
    assert list(simulate(spaced(96, 96))[1].requests["cached_tokens"]) == [0, 80]


def test_switched_off_it_is_as_if_nothing_were_shared():
    d = spaced(1000, 800, 5, groups=2)
    d["workload"]["arrival"] = poisson(30.0)
    d["scheduler"]["enable_prefix_caching"] = False
    plain = scenario("vllm-v1", arrival=poisson(30.0), prompt=fixed(1000), output=fixed(8), num_requests=5)
    _, off = simulate(d)
    _, ref = simulate(plain)
    assert (off.requests["cached_tokens"] == 0).all()
    np.testing.assert_array_equal(off.requests["ttft_ms"], ref.requests["ttft_ms"])
    np.testing.assert_array_equal(off.requests["e2e_ms"], ref.requests["e2e_ms"])


def test_each_group_pays_its_prefix_once():
    """Requests in sequence with 3 prefixes: each prefix's first request misses, all others
    hit its 512 tokens; the groups are drawn from the seed."""
    d = spaced(600, 512, 30, groups=3)
    sim, res = simulate(d)
    groups = sim.workload.prefixes.ids
    assert sorted(set(groups.tolist())) == [0, 1, 2]
    first = {int(g): i for i, g in reversed(list(enumerate(groups)))}
    expected = [0 if first[int(g)] == i else 512 for i, g in enumerate(groups)]
    assert list(res.requests["cached_tokens"]) == expected
    again, _ = simulate(d)
    np.testing.assert_array_equal(again.workload.prefixes.ids, groups)


def test_concurrent_requests_share_the_prefix_blocks():
    """Ten requests in one burst: the first admitted computes the prefix, the others (admitted
    in the same step, as vLLM registers a block's hash when it allocates it) reference it, so
    the cache holds the prefix once."""
    d = scenario("vllm-v1", arrival=constant(1e6), prompt=fixed(1000), output=fixed(50), num_requests=10)
    d["workload"]["shared_prefix"] = {"tokens": 960}
    sim, res = simulate(d)
    assert list(res.requests["cached_tokens"]) == [0] + [960] * 9
    peak = sim.replicas[0].engines[0].scheduler.kv.peak_used
    assert peak == 60 + 10 * -(-(40 + 49) // 16)  # one shared prefix + each request's own blocks


def test_unreferenced_prefixes_are_evicted_oldest_first_tail_first():
    kv = BlockManager(10, 16)
    cache = PrefixCache(kv)

    def admit(rid: int, seg: int, prompt: int = 64) -> Request:
        req = Request(rid, 0.0, prompt, 1, prefix=((seg, 64),))
        m = cache.match(req)
        cache.acquire(req, m)
        need = -(-prompt // 16) - req.block_count
        kv.allocate(need)
        req.block_count += need
        cache.publish(req, prompt)
        return req

    a, b = admit(0, 1), admit(1, 2)
    assert kv.used == 8 and a.shared_blocks == 4
    for req in (a, b):
        kv.release(cache.release(req))
    assert (kv.used, kv.cached) == (0, 8)
    kv.allocate(4)  # two blocks are empty; two more come from the tail of segment 1, the oldest
    assert (kv.used, kv.cached) == (4, 6)
    assert cache.match(Request(2, 0.0, 80, 1, prefix=((2, 64),))).shared_blocks == 4
    assert cache.match(Request(3, 0.0, 80, 1, prefix=((1, 64),))).shared_blocks == 2
    kv.release(4)
    c = admit(4, 1, prompt=80)  # recomputes segment 1's evicted tail, and caches it again
    assert (c.num_computed, c.shared_blocks) == (32, 4)
    kv.release(cache.release(c))
    assert (kv.used, kv.cached) == (0, 8)
    assert cache.match(Request(5, 0.0, 80, 1, prefix=((1, 64),))).shared_blocks == 4


def test_a_preempted_request_finds_its_own_blocks_again():
    """Recompute preemption under prefix caching: the victim's computed blocks stay cached
    (vLLM caches every full block), so readmitted it recomputes only what was evicted."""
    d = scenario("vllm-v1", arrival=poisson(40.0), prompt=fixed(600), output=fixed(300),
                 num_requests=60, kv_tokens=4096, seed=3)
    sim, on = simulate(d)
    d["scheduler"]["enable_prefix_caching"] = False
    _, off = simulate(d)
    assert on.requests["preemptions"].sum() > 0
    hits = sum(e.scheduler.kv.prefix_cache.hit_tokens for rep in sim.replicas for e in rep.engines)
    assert hits > 0 and (on.requests["cached_tokens"] == 0).all()  # readmissions, not first admissions
    computed = lambda r: int(r.iterations["prefill_tokens"].sum() + r.iterations["decode_tokens"].sum())  # noqa: E731
    assert computed(on) < computed(off)


def test_mooncake_hash_ids_mark_shared_blocks(tmp_path):
    """Equal leading hashes are equal 512-token blocks: the second request reuses two of
    them, and stops at the first hash that differs."""
    rows = [{"timestamp": 0, "input_length": 1600, "output_length": 4, "hash_ids": [7, 8, 9, 10]},
            {"timestamp": 5000, "input_length": 1700, "output_length": 4, "hash_ids": [7, 8, 11, 12]}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    d = scenario("vllm-v1")
    d["workload"] = {"arrival": {"type": "trace", "path": str(path)}}
    _, res = simulate(d)
    assert list(res.requests["cached_tokens"]) == [0, 1024]
    d["workload"]["arrival"]["hash_block_tokens"] = 256
    assert list(simulate(d)[1].requests["cached_tokens"]) == [0, 512]


def test_csv_prefix_columns(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n"
                    "0,500,4,3,320\n10,700,4,3,320\n20,700,4,-1,\n30,400,4,4,320\n")
    t = read_trace(path)
    assert t.prefix_tokens.tolist() == [320, 320, 0, 320]
    d = scenario("vllm-v1")
    d["workload"] = {"arrival": {"type": "trace", "path": str(path)}}
    assert list(simulate(d)[1].requests["cached_tokens"]) == [0, 320, 0, 0]
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,prompt_tokens,output_tokens,prefix_tokens\n0,5,1,3\n")
    with pytest.raises(TraceError, match="prefix_id"):
        read_trace(bad)


def test_shared_prefix_with_a_trace_is_a_clear_error(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,5,1\n")
    d = scenario("vllm-v1")
    d["workload"] = {"arrival": {"type": "trace", "path": str(path)}, "shared_prefix": {"tokens": 4}}
    with pytest.raises(ConfigError) as e:
        api.load(data=d)
    assert "workload.shared_prefix" in str(e.value) and "prefix_tokens" in str(e.value)


def affinity(groups: int, rate: float, max_imbalance: int | None = None, n: int = 120) -> dict:
    d = scenario("vllm-v1", arrival=poisson(rate), prompt=fixed(1200), output=fixed(40),
                 num_requests=n, replicas=3, router="prefix_affinity")
    d["workload"]["shared_prefix"] = {"tokens": 1000, "groups": groups}
    if max_imbalance is not None:
        d["router"]["max_imbalance"] = max_imbalance
    return d


def test_prefix_affinity_keeps_each_prefix_on_one_replica():
    """At light load every request of a prefix goes where that prefix was first served, so
    each prefix is prefilled once in the whole deployment, where round robin prefills it
    on every replica."""
    sim, res = simulate(affinity(3, 5.0))
    req = res.requests.assign(group=sim.workload.prefixes.ids)
    assert (req.groupby("group")["replica"].nunique() == 1).all()
    assert (req["cached_tokens"] == 0).sum() == 3
    d = affinity(3, 5.0)
    d["router"]["policy"] = "round_robin"
    spread = simulate(d)[1].requests
    assert (spread["cached_tokens"] == 0).sum() > 3


def test_prefix_affinity_gives_way_to_load():
    """One prefix and a burst: with max_imbalance 0 the requests spread as least-outstanding
    would spread them; with a loose bound they all stay on the prefix's replica."""
    tight = simulate(affinity(1, 500.0, max_imbalance=0))[1].requests
    loose = simulate(affinity(1, 500.0, max_imbalance=1000))[1].requests
    assert tight["replica"].nunique() == 3
    assert loose["replica"].nunique() == 1
    plain = scenario("vllm-v1", arrival=poisson(500.0), prompt=fixed(1200), output=fixed(40),
                     num_requests=120, replicas=3, router="prefix_affinity")
    balanced = dict(plain, router={"policy": "least_outstanding"})
    np.testing.assert_array_equal(simulate(plain)[1].requests["replica"],
                                  simulate(balanced)[1].requests["replica"])


SESSIONS = """arrival_s,prompt_tokens,output_tokens,session_id
0,500,100,1
10,800,50,1
20,300,20,1
30,400,10,2
30.01,900,10,2
40,1000,30,1
"""


def test_a_conversation_turn_reuses_the_previous_turn_context(tmp_path):
    """Session 1: turn 2 extends turn 1's 600 tokens (592 in whole blocks; the answer's
    last token never had its KV computed); turn 3 is shorter than that context, so it
    starts afresh, and turn 4 extends turn 3. Session 2's second turn arrives before the
    first has finished: nothing to reuse yet."""
    path = tmp_path / "s.csv"
    path.write_text(SESSIONS)
    d = scenario("vllm-v1")
    d["workload"] = {"arrival": {"type": "trace", "path": str(path)}}
    sim, res = simulate(d)
    assert list(res.requests["cached_tokens"]) == [0, 592, 0, 0, 0, 304]
    kv = sim.replicas[0].engines[0].scheduler.kv
    assert kv.used == 0 and kv.cached == sum(s.blocks for s in kv.prefix_cache.segments.values())
    d["workload"]["arrival"]["length_scale"] = 2.0
    assert list(simulate(d)[1].requests["cached_tokens"]) == [0, 1184, 0, 0, 0, 624]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(1, 900), st.integers(1, 200),
                          st.floats(0.0, 0.5)), min_size=1, max_size=60),
       st.sampled_from([None, 2048, 4096]), st.sampled_from([16, 512, 2048]))
def test_conversations_keep_the_kv_invariants(rows, kv_tokens, budget):
    """Random multi-turn traces (prompts sometimes extending the previous turn, sometimes
    not; turns overlapping; small caches that evict and preempt): every request settles,
    blocks balance, and fast-forwarding changes nothing."""
    t = 0.0
    lines = ["arrival_s,prompt_tokens,output_tokens,session_id"]
    for sid, p, o, gap in rows:
        t += gap
        lines.append(f"{t},{p},{o},{sid}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.csv"
        path.write_text("\n".join(lines) + "\n")
        d = scenario("vllm-v1", kv_tokens=kv_tokens, max_model_len=2048,
                     sched={"max_num_batched_tokens": budget})
        d["workload"] = {"arrival": {"type": "trace", "path": str(path)}}
        sim, res = simulate(d)
        _, stepped = simulate(d, fast_forward=False)
    assert set(res.requests["status"]) <= {"completed", "rejected"}
    check_tokens(d | {"workload": {"num_requests": len(rows)}}, res.requests, res.iterations, sim)
    check_kv(sim, res.iterations)
    check_fast_forward_equivalent(d, res, stepped)


def test_a_prompt_shorter_than_the_shared_prefix_is_its_own_segment():
    """A 160-token prompt holds 10 of a 300-token prefix's 18 blocks: were it the same
    cached segment as a 278-token prompt's, the segment would have two sizes and its blocks
    would be released twice (found by fuzzing; the run used to raise)."""
    d = scenario("vllm-v1", arrival={"type": "closed_loop", "concurrency": 2},
                 prompt={"type": "empirical", "values": [160, 278]},
                 output={"type": "empirical", "values": [20, 150]},
                 num_requests=3, seed=7, kv_tokens=336, max_model_len=336)
    d["workload"]["shared_prefix"] = {"tokens": 300}
    sim, res = simulate(d)
    assert set(res.requests["status"]) == {"completed"}
    check_kv(sim, res.iterations)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 700), min_size=2, max_size=12), st.integers(16, 600),
       st.sampled_from([None, 720, 1500]), st.sampled_from([16, 32]))
def test_prompts_around_the_shared_prefix_keep_the_kv_invariants(prompts, prefix, kv_tokens, block):
    """Prompts shorter and longer than the shared prefix, small caches: every request
    settles and the blocks balance."""
    d = scenario("vllm-v1", arrival={"type": "closed_loop", "concurrency": 3},
                 prompt={"type": "empirical", "values": prompts}, output=fixed(12),
                 num_requests=3 * len(prompts), kv_tokens=kv_tokens, block_size=block, max_model_len=720)
    d["workload"]["shared_prefix"] = {"tokens": prefix}
    sim, res = simulate(d)
    assert set(res.requests["status"]) <= {"completed", "rejected"}
    check_kv(sim, res.iterations)
    check_fast_forward_equivalent(d, res, simulate(d, fast_forward=False)[1])


def _trace(tmp_path, rows: str, **kw) -> dict:
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens,session_id,prefix_id,prefix_tokens\n" + rows)
    d = scenario("vllm-v1", **kw)
    d["workload"] = {"arrival": {"type": "trace", "path": str(path)}}
    return d


def test_rows_naming_one_prefix_with_different_lengths_keep_the_blocks_balanced(tmp_path):
    """Regression (found by fuzzing): rows with prefix_id 0 of 100, 40 and 200 tokens used
    to share one cached segment of changing size, whose blocks were released twice."""
    d = _trace(tmp_path, "0.5,200,30,-1,0,100\n0.51,200,100,-1,0,40\n0.51,200,30,-1,0,200\n",
               kv_tokens=336, max_model_len=336)
    sim, res = simulate(d)
    assert set(res.requests["status"]) == {"completed"}
    check_kv(sim, res.iterations)


def test_a_request_that_fits_the_cache_exactly_after_a_full_hit_completes(tmp_path):
    """Regression (found by fuzzing): the second request's whole prompt is cached. It used to
    revive the whole cached segment and add a block for its last token (one block over
    vLLM), so it preempted itself to grow and then waited for an arrival that never came
    (rejected as a deadlock). The readmission itself: test_policies.py."""
    d = _trace(tmp_path, "0.0,4080,10,-1,0,4080\n1.0,4064,10,-1,0,4064\n",
               kv_tokens=4096, max_model_len=4096, block_size=32)
    sim, res = simulate(d)
    assert list(res.requests["status"]) == ["completed", "completed"]
    check_kv(sim, res.iterations)
    # Its hit stops one token short, where vLLM leaves the last cached block free: the
    # request fits the cache exactly and never has to preempt itself.
    assert list(res.requests["cached_tokens"]) == [0, 4032] and res.summary["preemptions"] == 0


def _hybrid(**sched) -> dict:
    """Requests sharing an 800-token prefix on Qwen3-Next (three in four layers Gated DeltaNet)."""
    d = spaced(1000, 800, model="qwen3-next-80b-a3b", tp=4, gpu="h200", sched=sched)
    d["model"]["max_model_len"] = 4096
    return d


def test_a_hybrid_model_leaves_prefix_caching_off_by_default_as_vllm_does():
    """vLLM turns prefix caching off by default for hybrid models (vllm-project/vllm#23716):
    a cached attention prefix cannot restore the linear layers' recurrent state. So the
    second request prefills all 1,000 tokens, exactly as with caching switched off."""
    _, default = simulate(_hybrid())
    _, off = simulate(_hybrid(enable_prefix_caching=False))
    assert list(default.requests["cached_tokens"]) == [0, 0]
    assert list(default.iterations["prefill_tokens"][default.iterations["prefill_tokens"] > 0]) == [1000, 1000]
    np.testing.assert_array_equal(default.requests["ttft_ms"], off.requests["ttft_ms"])
    # the same workload on a dense model does reuse the prefix under the same (default) knobs
    dense = spaced(1000, 800, tp=4, gpu="h200")
    assert list(simulate(dense)[1].requests["cached_tokens"]) == [0, 800]


def test_asking_for_prefix_caching_on_a_hybrid_model_is_refused_with_the_fix():
    with pytest.raises(ConfigError) as err:
        simulate(_hybrid(enable_prefix_caching=True))
    assert err.value.where == "scheduler.enable_prefix_caching"
    assert "hybrid linear-attention" in err.value.message
    assert "leave scheduler.enable_prefix_caching unset" in err.value.fix


def test_the_hit_rate_counts_only_the_prompts_of_admitted_requests():
    """A refused request never reached the cache: its prompt would dilute the rate."""
    import pandas as pd

    from simulator.simulation import _prefix_hit_rate

    frame = pd.DataFrame({"prompt_tokens": [1000, 1000, 9000], "cached_tokens": [0, 800, 0],
                          "status": ["completed", "completed", "rejected"]})
    assert _prefix_hit_rate(frame) == pytest.approx(800 / 2000)


@pytest.mark.parametrize(("seed", "prompts", "cached"), [(16, [100, 1000, 1000, 1000], [0, 0, 592, 592]),
                                                         (7, [1000, 100, 100, 100], [0, 0, 96, 96])])
def test_a_short_prompt_does_not_cap_the_shared_prefix_for_longer_ones(seed, prompts, cached):
    """A 600-token shared prefix: the first prompt, 100 tokens, holds 6 of its 37 blocks.
    Cached under a key of its own, it no longer fixes the segment at 6 blocks for the
    full-length prompts that follow (they read 37 once one has stored them), and short
    prompts of one length share theirs (found by a workload audit; vLLM's per-block hashes
    would also let the short prompts read the full segment's first 6 blocks)."""
    d = scenario("vllm-v1", arrival={"type": "constant", "rate": 2.0},
                 prompt={"type": "empirical", "values": [100, 1000]}, output=fixed(10),
                 num_requests=4, seed=seed, max_model_len=8192)
    d["workload"]["shared_prefix"] = {"tokens": 600}
    sim, res = simulate(d)
    assert list(res.requests["prompt_tokens"]) == prompts
    assert list(res.requests["cached_tokens"]) == cached
    check_kv(sim, res.iterations)


def test_a_turn_ending_on_a_block_boundary_still_lets_later_turns_reuse_the_history(tmp_path):
    """Regression (session-56 audit): turn 1's context is 112 tokens, 7 whole blocks, of which
    it computed 6 (its answer's last token never had its KV written). Turn 2 reads those 6
    and computes the 7th, which vLLM's hash chain then carries: turn 3 reuses all of turn
    2's context (208 = 13 blocks), turn 4 all of turn 3's (304). Before, the segment stayed
    at 6 blocks and every later turn stopped there (96 tokens)."""
    path = tmp_path / "c.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens,session_id\n"
                    "0,100,12,1\n5,200,10,1\n10,300,10,1\n15,400,10,1\n")
    d = scenario("vllm-v1")
    d["workload"] = {"arrival": {"type": "trace", "path": str(path)}}
    sim, res = simulate(d)
    assert list(res.requests["cached_tokens"]) == [0, 96, 208, 304]
    check_kv(sim, res.iterations)
    kv = sim.replicas[0].engines[0].scheduler.kv
    assert kv.used == 0 and kv.cached == sum(s.blocks for s in kv.prefix_cache.segments.values())


def test_prefix_affinity_keeps_a_conversation_where_its_first_turn_ran(tmp_path):
    """A conversation's first turn shares nothing yet; its context opens the next turn's
    prompt, so the next turn goes to the replica that holds it (here the idle-looking one
    would be the other replica: a long request keeps replica 0 busy)."""
    path = tmp_path / "s.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens,session_id\n"
                    "0.0,1000,400,\n0.01,1000,10,7\n3.0,1100,10,7\n")
    d = scenario("vllm-v1", replicas=2, router="prefix_affinity")
    d["workload"] = {"arrival": {"type": "trace", "path": str(path)}}
    req = simulate(d)[1].requests
    assert list(req["replica"]) == [0, 1, 1]
    assert list(req["cached_tokens"]) == [0, 0, 1008]


def test_a_prefill_held_for_a_distserve_pull_keeps_its_prefix_referenced_not_cached():
    """Regression (session-56 audit): while a decode instance had yet to pull a prompt's KV,
    its shared prefix blocks were counted both as held and as cached-free, and a later hit
    on them counted them again. Two 1,000-token prompts sharing 800 tokens (50 blocks) hold
    50 + 13 + 13 blocks, with nothing cached-free."""
    d = scenario("vllm-v1", arrival=constant(1000.0), prompt=fixed(1000), output=fixed(200), num_requests=2)
    d["workload"]["shared_prefix"] = {"tokens": 800}
    d["disaggregation"] = {"prefill": {"tp": 1, "replicas": 1}, "decode": {"tp": 1, "replicas": 1},
                           "kv_transfer": {"protocol": "distserve", "bandwidth_gbps": 1.0}}
    seen = []
    from simulator.scheduler import roles

    original = roles.PrefillRole.hold_for_pull

    def hold(self, req):
        held = original(self, req)
        seen.append((self.kv.used, self.kv.cached))
        return held

    roles.PrefillRole.hold_for_pull = hold
    try:
        sim, res = simulate(d)
    finally:
        roles.PrefillRole.hold_for_pull = original
    assert seen == [(63, 0), (76, 0)]
    assert set(res.requests["status"]) == {"completed"}
    kv = sim.cluster.prefill[0].engines[0].scheduler.kv
    assert kv.used == 0 and kv.cached == 50


@pytest.mark.parametrize(("ids", "expected"), [
    (["sys-a", "-1", "-1", ""], [0, -1, -1, -1]),  # text labels: -1 is still "none"
    (["18446744073709551615", "18446744073709551615", "3"], [0, 0, 1]),  # a uint64 hash: a label
    (["-5", "-5", "-1"], [0, 0, -1]),  # signed hashes are labels; only -1 means none
    (["7", "", "7", "-1"], [7, -1, 7, -1]),
])
def test_prefix_ids_are_labels_and_only_blank_or_minus_one_means_none(tmp_path, ids, expected):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens,session_id,prefix_id,prefix_tokens\n"
                    + "".join(f"{i},1000,10,{pid},{pid},800\n" for i, pid in enumerate(ids)))
    t = read_trace(path)
    assert t.prefix_id.tolist() == expected and t.session_id.tolist() == expected


def test_prefix_tokens_zero_means_nothing_shared(tmp_path):
    d = _trace(tmp_path, "0,1000,10,-1,5,0\n1,1000,10,-1,5,0\n")
    assert list(simulate(d)[1].requests["cached_tokens"]) == [0, 0]


def test_a_prefix_id_without_its_length_is_said_to_be_unused(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens,prefix_id\n0,1000,10,5\n1,1000,10,5\n")
    d = scenario("vllm-v1")
    d["workload"] = {"arrival": {"type": "trace", "path": str(path)}}
    res = simulate(d)[1]
    assert list(res.requests["cached_tokens"]) == [0, 0]
    (unused,) = res.summary["trace"]["unused_columns"]
    assert unused.startswith("prefix_id:") and "prefix_tokens" in unused
