"""Each batching policy, router and parallelism knob does what DESIGN.md §4-§5 says."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (
    PAGED_POLICIES,
    POLICY_NAMES,
    closed_loop,
    constant,
    cost_model_of,
    engines,
    fixed,
    poisson,
    prefill_shape,
    scenario,
    simulate,
    time_limit,
    uniform,
)

from simulator.cost import COST_BACKENDS, CostModelConfig, IterationCostModel, ShardedModel
from simulator.cost.ops import IterationShape
from simulator.errors import ServesimError
from simulator.hardware import get_gpu
from simulator.models import get_model


# -- batching comparison -----------------------------------------------------------------
def saturated(policy: str, **sched) -> dict:
    return scenario(policy, arrival=poisson(50.0), prompt=fixed(512), output=uniform(16, 512),
                    num_requests=300, sched=sched)


def test_throughput_static_lt_dynamic_lt_continuous():
    thr = {}
    for policy, sched in (("static", {"max_batch_size": 16}),
                          ("dynamic", {"max_batch_size": 16, "max_wait_ms": 50.0}),
                          ("continuous", {"max_num_seqs": 16})):
        _, res = simulate(saturated(policy, **sched))
        assert (res.requests["status"] == "completed").all()
        thr[policy] = res.summary["throughput"]["output_tokens_per_s"]
    assert thr["static"] < thr["dynamic"] < thr["continuous"]
    # Iteration-level batching refills the freed slots: a large gain, not a rounding error.
    assert thr["continuous"] > 1.3 * thr["dynamic"]


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_batch_never_exceeds_its_size_limit(policy):
    limit = 6
    key = "max_batch_size" if policy in ("static", "dynamic") else "max_num_seqs"
    _, res = simulate(saturated(policy, **{key: limit}))
    assert res.iterations["num_seqs"].max() == limit


def test_vllm_v0_iterations_are_all_prefill_or_all_decode():
    d = scenario("vllm-v0", arrival=poisson(30.0), prompt=uniform(16, 1500),
                 output=uniform(1, 200), num_requests=200, sched={"max_num_batched_tokens": 2048},
                 max_model_len=2048)
    _, res = simulate(d)
    it = res.iterations
    assert ((it["prefill_tokens"] == 0) | (it["decode_tokens"] == 0)).all()
    assert (it["prefill_tokens"] > 0).any() and (it["decode_tokens"] > 0).any()
    assert it["prefill_tokens"].max() <= 2048


@pytest.mark.parametrize("budget", [64, 512])
def test_vllm_v1_iterations_stay_within_token_budget(budget):
    d = scenario("vllm-v1", arrival=poisson(30.0), prompt=uniform(16, 1500),
                 output=uniform(1, 200), num_requests=200,
                 sched={"max_num_batched_tokens": budget})
    _, res = simulate(d)
    it = res.iterations
    total = it["prefill_tokens"] + it["decode_tokens"]
    assert total.max() == budget  # saturated: some iterations fill the budget exactly
    # Chunked prefill piggybacks prompt chunks on running decodes (Sarathi-Serve).
    assert ((it["prefill_tokens"] > 0) & (it["decode_tokens"] > 0)).any()


@pytest.mark.parametrize(("policy", "sched"), [
    ("vllm-v1", {"max_num_batched_tokens": 512, "enable_chunked_prefill": False}),
    ("vllm-v0", {"max_num_batched_tokens": 512}),
])
def test_whole_prompt_budget_below_max_model_len_is_refused(policy, sched):
    """Without chunking, a sequence recomputed after a preemption runs prompt + output in
    one iteration; a budget below max_model_len could leave it stuck forever. vLLM refuses
    to start; so does servesim, naming the field and the fix."""
    d = scenario(policy, prompt=fixed(300), num_requests=3, sched=sched, max_model_len=2048)
    with pytest.raises(ServesimError, match="max_num_batched_tokens=512 is below max_model_len=2048") as exc:
        simulate(d)
    assert exc.value.where == "scheduler.max_num_batched_tokens" and "at least 2048" in exc.value.fix


def test_vllm_v1_without_chunking_rejects_prompts_over_max_model_len():
    d = scenario("vllm-v1", prompt=fixed(600), num_requests=3, max_model_len=512,
                 sched={"max_num_batched_tokens": 512, "enable_chunked_prefill": False})
    _, res = simulate(d)
    assert (res.requests["status"] == "rejected").all()


def small_cache(policy: str) -> dict:
    return scenario(policy, arrival=poisson(20.0), prompt=uniform(16, 1000),
                    output=uniform(1, 400), num_requests=200, kv_tokens=4096, max_model_len=2048)


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_small_kv_cache_preempts_only_paged_policies(policy):
    sim, res = simulate(small_cache(policy))
    assert (res.requests["status"] == "completed").all()
    preemptions = int(res.requests["preemptions"].sum())
    assert preemptions == res.summary["preemptions"]
    if policy in PAGED_POLICIES:
        assert preemptions > 0
        assert sum(e.scheduler.preemptions for e in engines(sim)) == preemptions
    else:  # reservation up front: never preempts
        assert preemptions == 0
    assert res.summary["kv_cache"]["peak_utilization"] <= 1.0



def test_vllm_v0_rejects_prompts_the_watermark_never_admits():
    # 128 blocks, watermark 1 block: a 2040-token prompt (128 blocks) can never be admitted.
    d = scenario("vllm-v0", kv_tokens=2048, max_model_len=2048, arrival=constant(1.0),
                 prompt={"type": "empirical", "values": [2040, 100]}, output=fixed(1),
                 num_requests=8)
    _, res = simulate(d)
    req = res.requests
    big = req["prompt_tokens"] == 2040
    assert big.any() and (~big).any()
    assert (req.loc[~big, "status"] == "completed").all()
    assert (req.loc[big, "status"] == "rejected").all()
    assert not req["reject_reason"].str.contains("deadlock").any()

# -- dynamic and static batching ---------------------------------------------------------
def test_dynamic_dispatches_lone_request_after_max_wait():
    """A second request 10 s later: the first waits max_wait_ms alone, then runs."""
    wait_ms, prompt = 200.0, 256
    d = scenario("dynamic", arrival=constant(0.1), prompt=fixed(prompt), output=fixed(1),
                 num_requests=2, sched={"max_batch_size": 4, "max_wait_ms": wait_ms})
    s = cost_model_of(d).iteration_time(prefill_shape(prompt))
    _, res = simulate(d)
    first = res.requests.iloc[0]
    assert first["ttft_ms"] == pytest.approx(wait_ms + s * 1e3, rel=1e-9)


def test_dynamic_dispatches_full_batch_without_waiting():
    prompt = 256
    d = scenario("dynamic", arrival=constant(1000.0), prompt=fixed(prompt), output=fixed(1),
                 num_requests=8, sched={"max_batch_size": 4, "max_wait_ms": 10_000.0})
    cost = cost_model_of(d)
    _, res = simulate(d)
    batch = cost.iteration_time(IterationShape(4 * prompt, 4, 0, 0, ((prompt, 0),) * 4))
    first = res.requests.iloc[0]
    # The 4th request arrives at 3 ms and completes the batch: no 10 s wait.
    assert first["ttft_ms"] == pytest.approx(3.0 + batch * 1e3, rel=1e-9)
    assert list(res.iterations["num_seqs"][:2]) == [4, 4]


def test_dynamic_last_request_also_waits_max_wait():
    wait_ms, prompt = 200.0, 256
    d = scenario("dynamic", arrival=constant(0.1), prompt=fixed(prompt), output=fixed(1),
                 num_requests=2, sched={"max_batch_size": 4, "max_wait_ms": wait_ms})
    s = cost_model_of(d).iteration_time(prefill_shape(prompt))
    _, res = simulate(d)
    last = res.requests.iloc[1]
    assert last["ttft_ms"] == pytest.approx(wait_ms + s * 1e3, rel=1e-9)


def test_static_waits_for_a_full_batch_and_flushes_the_rest():
    prompt = 128
    d = scenario("static", arrival=constant(1.0), prompt=fixed(prompt), output=fixed(8),
                 num_requests=6, sched={"max_batch_size": 4})
    cost = cost_model_of(d)
    _, res = simulate(d)
    req = res.requests
    assert (req["status"] == "completed").all()
    batch_prefill = cost.iteration_time(IterationShape(4 * prompt, 4, 0, 0, ((prompt, 0),) * 4))
    # The first request waits for the 4th arrival (t = 3 s), then the padded prefill.
    assert req.iloc[0]["ttft_ms"] >= 3000.0
    assert req.iloc[0]["ttft_ms"] == pytest.approx(3000.0 + batch_prefill * 1e3, rel=1e-9)
    # The last two never make a full batch: they go once no more requests can arrive.
    assert list(res.iterations["num_seqs"]) == [4] * 8 + [2] * 8


@pytest.mark.parametrize("policy", ["static", "dynamic"])
def test_batch_policies_reject_requests_they_can_never_reserve(policy):
    # pp=2 splits 128 blocks into 64 per engine (1024 tokens); 1000 + 25 = 1025 tokens.
    d = scenario(policy, pp=2, kv_tokens=2048, max_model_len=2048, arrival=poisson(2.0),
                 prompt={"type": "empirical", "values": [1000, 100]}, output=fixed(25),
                 num_requests=10, sched={"max_batch_size": 2})
    with time_limit(3.0):
        _, res = simulate(d)
    req = res.requests
    big = req["prompt_tokens"] == 1000
    assert big.any() and (~big).any()
    assert (req.loc[~big, "status"] == "completed").all()
    assert (req.loc[big, "status"] == "rejected").all()
    assert not req["reject_reason"].str.contains("deadlock").any()


def test_a_static_batch_reserves_its_padded_cache():
    """A padded batch's cache is rows × (longest prompt + longest output): the batch stops
    taking requests where that padded cache no longer fits, and never exceeds it."""
    d = scenario("static", arrival=poisson(50.0), prompt=uniform(64, 1024), output=uniform(8, 128),
                 num_requests=80, kv_tokens=8192, sched={"max_batch_size": 16})
    _, res = simulate(d)
    it, req = res.iterations, res.requests
    assert (req["status"] == "completed").all()
    total = int(it["kv_blocks_total"].iloc[0])
    # A batch's requests share their first token's time; its prefill holds the padded cache.
    first = (req["arrival_s"] + req["ttft_ms"] / 1e3).round(9)
    prefills = it[it["prefill_tokens"] > 0].reset_index(drop=True)
    batches = [g for _, g in req.groupby(first, sort=True)]
    assert len(batches) == len(prefills) > 1
    for batch, (_, step) in zip(batches, prefills.iterrows(), strict=True):
        padded = len(batch) * -(-(batch["prompt_tokens"].max() + batch["output_tokens"].max()) // 16)
        assert step["kv_blocks_used"] == padded <= total
    # Finished rows keep their padded KV until the batch ends (generate() returns at once):
    # every step of a batch holds what its prefill reserved.
    batch_of_step = (it["prefill_tokens"] > 0).cumsum()
    assert (it.groupby(batch_of_step)["kv_blocks_used"].nunique() == 1).all()


# -- routers -------------------------------------------------------------------------------
def test_round_robin_assigns_request_i_to_replica_i_mod_n():
    d = scenario("vllm-v1", arrival=poisson(30.0), num_requests=90, replicas=3)
    _, res = simulate(d)
    req = res.requests
    assert (req["replica"] == req["request_id"] % 3).all()


def test_least_outstanding_balances_under_load():
    d = scenario("vllm-v1", arrival=poisson(40.0), prompt=uniform(64, 2048),
                 output=uniform(16, 512), num_requests=300, replicas=3,
                 router="least_outstanding")
    _, res = simulate(d)
    counts = res.requests["replica"].value_counts().reindex(range(3), fill_value=0)
    assert counts.max() - counts.min() <= 0.15 * 100, counts.to_dict()


def test_least_outstanding_breaks_ties_to_lowest_index():
    """Requests that finish before the next arrives leave every replica idle: replica 0."""
    d = scenario("vllm-v1", arrival=constant(1.0), prompt=fixed(64), output=fixed(4),
                 num_requests=10, replicas=3, router="least_outstanding")
    _, res = simulate(d)
    assert (res.requests["replica"] == 0).all()


def test_replicas_serve_independent_shares():
    """Two replicas under round robin take (almost) half the time of one at saturation."""
    durations = []
    for replicas in (1, 2):
        d = scenario("vllm-v1", arrival=poisson(1000.0), prompt=fixed(256), output=fixed(128),
                     num_requests=400, replicas=replicas)
        _, res = simulate(d)
        durations.append(res.summary["duration_s"])
    assert durations[1] < 0.6 * durations[0]


# -- parallelism ---------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["vllm-v0", "vllm-v1"])
def test_pipeline_parallel_latency_and_throughput(policy):
    base = {"prompt": fixed(512), "output": fixed(128)}
    _, lone1 = simulate(scenario(policy, num_requests=1, **base))
    _, lone2 = simulate(scenario(policy, num_requests=1, pp=2, **base))
    # A lone request crosses every stage (plus the activation send): never faster.
    assert lone2.requests.iloc[0]["ttft_ms"] >= lone1.requests.iloc[0]["ttft_ms"]
    assert lone2.requests.iloc[0]["e2e_ms"] >= lone1.requests.iloc[0]["e2e_ms"]
    # Saturated: two stages work on different micro-batches; twice the GPUs, more throughput.
    heavy = {"arrival": poisson(1000.0), "num_requests": 600, **base}
    _, sat1 = simulate(scenario(policy, **heavy))
    _, sat2 = simulate(scenario(policy, pp=2, **heavy))
    assert (sat2.requests["status"] == "completed").all()
    assert (sat2.summary["throughput"]["output_tokens_per_s"]
            > 1.3 * sat1.summary["throughput"]["output_tokens_per_s"])


def test_vllm_v1_runs_a_pipeline_as_one_scheduler_over_the_whole_cache():
    """vLLM v1 under PP: one engine core whose batch queue holds a micro-batch per stage, and
    one KV cache (each stage's GPUs hold their layers' KV of every sequence), where vLLM v0
    ran a virtual engine per stage with a share each."""
    heavy = {"arrival": poisson(1000.0), "num_requests": 300, "prompt": fixed(512), "output": fixed(128)}
    sim, res = simulate(scenario("vllm-v1", pp=2, **heavy))
    assert len(engines(sim)) == 1 and engines(sim)[0].depth == 2
    it, kv = res.iterations, res.summary["kv_cache"]
    assert "virtual_engine" not in it.columns and "virtual_engine" not in res.requests.columns
    assert res.summary["config"]["virtual_engines"] == 1
    assert kv["blocks_per_replica"] == sim.memory.num_blocks == set(it["kv_blocks_total"]).pop()
    # At most two micro-batches in flight, and at times exactly two.
    start = it["start_s"].to_numpy()
    end = np.sort(start + it["duration_ms"].to_numpy() * 1e-3)
    in_flight = np.arange(1, len(start) + 1) - np.searchsorted(end, start + 1e-9, side="right")
    assert in_flight.max() == 2


def test_vllm_v0_pipeline_runs_virtual_engines_with_a_share_each():
    base = {"prompt": fixed(512), "output": fixed(128)}
    heavy = {"arrival": poisson(1000.0), "num_requests": 600, **base}
    sim2, sat2 = simulate(scenario("vllm-v0", pp=2, **heavy))
    assert len(engines(sim2)) == 2 and all(len(rep.engines) == 2 for rep in sim2.replicas)
    _, sat1 = simulate(scenario("vllm-v0", **heavy))
    assert sat2.summary["config"]["virtual_engines"] == 2
    # Each virtual engine's rows are its own: named, in time order, within its KV share;
    # a run without PP has no such column.
    it, req = sat2.iterations, sat2.requests
    assert set(it["virtual_engine"]) == set(req["virtual_engine"]) == {0, 1}
    for _, rows in it.groupby(["replica", "virtual_engine"]):
        assert rows["start_s"].is_monotonic_increasing
        assert (rows["kv_blocks_used"] <= rows["kv_blocks_total"]).all()
    assert "virtual_engine" not in sat1.iterations.columns and "virtual_engine" not in sat1.requests.columns
    # The replica's capacity is what its engines hold together (blocks // pp each).
    per_engine = set(it["kv_blocks_total"])
    kv = sat2.summary["kv_cache"]
    assert len(per_engine) == 1 and kv["blocks_per_replica"] == 2 * per_engine.pop()
    assert kv["capacity_tokens"] == kv["blocks_per_replica"] * kv["block_size"]


def _pp_trace_dict(tmp_path, rows: str, pp: int, policy: str = "vllm-v0", budget: int = 8192) -> dict:
    trace = tmp_path / f"pp{pp}-{policy}.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)
    return {"model": {"name": "llama-3.1-8b", "max_model_len": 8192}, "hardware": {"gpu": "h100-sxm"},
            "parallelism": {"pp": pp}, "scheduler": {"policy": policy, "max_num_batched_tokens": budget},
            "workload": {"arrival": {"type": "trace", "path": str(trace)}}, "output": {"report": False}}


def _pp_trace_run(tmp_path, rows: str, pp: int, policy: str = "vllm-v0", budget: int = 8192):
    return simulate(_pp_trace_dict(tmp_path, rows, pp, policy, budget))[1]


def test_pipeline_stages_hold_one_micro_batch_at_a_time(tmp_path):
    """vLLM v0: two prompts arriving together go to the two virtual engines, but the second
    leaves the first stage only when the first has: its TTFT is 1.5 passes, not one
    (DESIGN.md §5). vLLM v1's one scheduler batches them into one micro-batch instead."""
    alone = _pp_trace_run(tmp_path, "0,1000,2\n", 2)
    lone = alone.requests["ttft_ms"].iloc[0]
    pass_ms = alone.iterations["duration_ms"].iloc[0]  # the prefill's pass over both stages
    both = _pp_trace_run(tmp_path, "0,1000,2\n0,1000,2\n", 2).requests["ttft_ms"].sort_values().to_numpy()
    assert both[0] == pytest.approx(lone, rel=1e-9)
    assert both[1] - both[0] == pytest.approx(0.5 * pass_ms, rel=1e-6)
    v1 = _pp_trace_run(tmp_path, "0,1000,2\n0,1000,2\n", 2, "vllm-v1")
    first = v1.iterations.iloc[0]
    assert first["prefill_tokens"] == 2000 and first["num_seqs"] == 2
    assert list(v1.requests["ttft_ms"]) == pytest.approx([first["duration_ms"]] * 2, rel=1e-9)


def test_vllm_v1_pipelines_a_long_prompts_chunks(tmp_path):
    """vLLM v1 counts a chunk's tokens as computed when it schedules them, so a prompt's next
    chunk follows the previous one into the next micro-batch: with a micro-batch per stage in
    flight, an 8,000-token prompt's four chunks cross two stages in the closed form of a
    two-stage pipeline (each stage takes half of its chunk's pass, in order), not in four
    whole passes as one virtual engine would take them."""
    sim, res = simulate(_pp_trace_dict(tmp_path, "0,8000,3\n", 2, "vllm-v1", budget=2048))
    it = res.iterations
    chunks = it[it["prefill_tokens"] > 0]
    assert list(chunks["prefill_tokens"]) == [2048, 2048, 2048, 1856]
    # Each chunk's pass, from the cost model at its context; half on each stage.
    stage = [sim.cost.iteration_time(prefill_shape(q, c, emit=q == 1856), from_idle=c == 0) / 2
             for q, c in ((2048, 0), (2048, 2048), (2048, 4096), (1856, 6144))]
    # Stage 0 takes the chunks back to back, except that the third is scheduled only when
    # the first lands (two in flight); stage 1 follows stage 0.
    s0_end, s1_end = [], []
    scheduled = [0.0, 0.0]
    for i, t in enumerate(stage):
        if i >= 2:
            scheduled.append(s1_end[i - 2])
        start0 = max(scheduled[i], s0_end[-1] if s0_end else 0.0)
        s0_end.append(start0 + t)
        s1_end.append(max(s0_end[-1], s1_end[-1] if s1_end else 0.0) + t)
    assert res.requests["ttft_ms"].iloc[0] == pytest.approx(s1_end[-1] * 1e3, rel=1e-9)
    v0 = _pp_trace_run(tmp_path, "0,8000,3\n", 2, "vllm-v0", budget=8192)
    assert res.requests["ttft_ms"].iloc[0] < v0.requests["ttft_ms"].iloc[0] * 4


def test_a_long_prefill_holds_up_the_other_virtual_engines_decode(tmp_path):
    """A decode step on one virtual engine waits at each stage the other's 8,000-token
    prefill holds: one inter-token gap as long as the prefill, where independent engines
    would have kept decoding beside it."""
    res = _pp_trace_run(tmp_path, "0,100,300\n0.5,8000,2\n", 2)
    it = res.iterations
    prefill = it[it["prefill_tokens"] == 8000]["duration_ms"].iloc[0]
    held = it[(it["virtual_engine"] != it.loc[it["prefill_tokens"] == 8000, "virtual_engine"].iloc[0])
              & (it["duration_ms"] > 0.9 * prefill)]
    assert len(held) == 1  # the decode step that met the prefill at the first stage
    assert (it.groupby("virtual_engine")["start_s"].apply(lambda s: s.is_monotonic_increasing)).all()


def _cost(model: str, gpu: str, tp: int) -> IterationCostModel:
    cfg = CostModelConfig()
    g = get_gpu(gpu)
    sharded = ShardedModel.build(get_model(model), tp, 1, "bf16", "bf16", "bf16", 8)
    return IterationCostModel(sharded, COST_BACKENDS["roofline"](g, cfg, None), cfg)


@pytest.mark.parametrize("batch", [1, 32])
def test_tensor_parallel_speeds_up_70b_decode_and_prefill(batch):
    tp1, tp2 = _cost("llama-3.1-70b", "h100-sxm", 1), _cost("llama-3.1-70b", "h100-sxm", 2)
    ctx = batch * 2048
    d1, d2 = tp1.decode_step_times(batch, ctx, 1)[0], tp2.decode_step_times(batch, ctx, 1)[0]
    assert d2 < d1
    # Memory-bound decode: half the weights per GPU, minus the all-reduce cost; not free.
    assert d2 > 0.5 * d1 * 0.9
    assert tp2.iteration_time(prefill_shape(4096)) < tp1.iteration_time(prefill_shape(4096))


def test_tensor_parallel_run_is_faster_end_to_end():
    kw = {"model": "llama-3.1-70b", "arrival": poisson(1.0), "prompt": fixed(512),
          "output": fixed(64), "num_requests": 1, "max_model_len": 4096}
    # (bf16 70B at TP2 leaves ~0.2 GiB of an H100 for the KV cache once vLLM's profiling pass
    # has reserved the sampler's memory for 1024 sequences, so compare TP4 with TP8.)
    _, tp4 = simulate(scenario("vllm-v1", tp=4, **kw))
    _, tp8 = simulate(scenario("vllm-v1", tp=8, **kw))
    assert tp8.requests.iloc[0]["e2e_ms"] < tp4.requests.iloc[0]["e2e_ms"]
    assert tp8.summary["kv_cache"]["capacity_tokens"] > tp4.summary["kv_cache"]["capacity_tokens"]


@pytest.mark.parametrize("concurrency", [1, 8])
def test_closed_loop_throughput_grows_with_concurrency(concurrency):
    d = scenario("vllm-v1", arrival=closed_loop(concurrency), prompt=fixed(256),
                 output=fixed(64), num_requests=64)
    _, res = simulate(d)
    it = res.iterations
    assert it["num_seqs"].max() == concurrency
    if concurrency == 1:
        # One client: requests never overlap.
        req = res.requests.sort_values("arrival_s")
        assert (req["arrival_s"].to_numpy()[1:] >= req["finish_s"].to_numpy()[:-1] - 1e-12).all()
        assert np.isclose(req["arrival_s"].iloc[0], 0.0)


def test_fp4_w4a4_runs_on_fp4_tensor_cores_where_the_gpu_has_them():
    from simulator.dtypes import gemm_compute_dtype

    assert gemm_compute_dtype("fp4", "fp4") == "fp4"
    assert gemm_compute_dtype("fp8", "fp8") == "fp8"
    assert gemm_compute_dtype("int4", "bf16") == "bf16"
    # 16-bit weights are an unquantised layer: its activations are not quantised either.
    assert gemm_compute_dtype("bf16", "fp4") == "bf16"
    assert gemm_compute_dtype("bf16", "fp8") == "bf16"
    assert gemm_compute_dtype("fp16", "fp16") == "fp16"


def test_closed_loop_think_times_delay_each_send():
    """Each client waits its think time after a reply before sending again."""

    def run(dist: str):
        arrival = {"type": "closed_loop", "concurrency": 2, "think_time_s": 0.5,
                   "think_time_distribution": dist}
        _, result = simulate(scenario("vllm-v1", arrival=arrival, prompt=fixed(64), output=fixed(8),
                                      num_requests=10))
        return result.requests.sort_values("request_id")

    fixed_think = run("fixed")
    # Fixed: the first two go at t=0; every later send is exactly 0.5 s after a finish.
    assert (fixed_think["arrival_s"].iloc[:2] == 0).all()
    finishes = fixed_think["finish_s"].to_numpy()
    for t in fixed_think["arrival_s"].iloc[2:]:
        assert min(abs(finishes + 0.5 - t)) < 1e-9
    jittered = run("exponential")
    assert (jittered["arrival_s"].iloc[:2] > 0).all()  # even the first sends wait
    again = run("exponential")
    assert jittered["arrival_s"].tolist() == again["arrival_s"].tolist()  # seeded


def _mid_decode_arrival(async_scheduling: bool, fast_forward: bool = True):
    """Request 0 decodes 300 tokens alone; request 1 arrives 0.5 s later, mid-iteration.
    No CPU overheads, so that both modes time the same iterations (async scheduling also
    hides them, tested below) and only the scheduling delay differs."""
    d = scenario("vllm-v1", arrival=constant(2.0), prompt=fixed(128), output=fixed(300),
                 num_requests=2, sched={"async_scheduling": async_scheduling})
    d["cost_model"] = {"framework_overhead_ms": 0.0, "per_sequence_overhead_us": 0.0}
    _, res = simulate(d, fast_forward=fast_forward)
    it = res.iterations.sort_values("start_s").reset_index(drop=True)
    arrival = float(res.requests.iloc[1]["arrival_s"])
    joined = it.index[(it["prefill_tokens"] > 0) & (it["start_s"] > 0)][0]
    running = it.index[(it["start_s"] < arrival) & (it["start_s"] + it["duration_ms"] / 1e3 > arrival)][0]
    return it, running, joined, res


@pytest.mark.parametrize("fast_forward", [True, False])
def test_async_scheduling_admits_a_mid_iteration_arrival_one_iteration_later(fast_forward):
    """vLLM --async-scheduling plans iteration k+1 while k runs: a request arriving during
    iteration k is first scheduled in k+2; without it, in k+1."""
    _, running, joined, sync = _mid_decode_arrival(False, fast_forward)
    assert joined == running + 1
    it, running, joined, res = _mid_decode_arrival(True, fast_forward)
    assert joined == running + 2
    # The extra wait is the decode iteration in between (to within the one token more of
    # request 0's context that the later prefill iteration carries).
    extra = it.loc[running + 1, "duration_ms"]
    assert res.requests.iloc[1]["ttft_ms"] - sync.requests.iloc[1]["ttft_ms"] == pytest.approx(extra, rel=1e-4)


def test_async_scheduling_hides_the_cpu_work_of_back_to_back_iterations():
    """An iteration that follows another lasts max(GPU, CPU) under async scheduling, and
    GPU + CPU without it; the first iteration after idle pays both either way."""
    def run(async_scheduling: bool, framework_ms: float):
        d = scenario("vllm-v1", arrival=constant(2.0), prompt=fixed(128), output=fixed(50),
                     num_requests=1, sched={"async_scheduling": async_scheduling})
        d["cost_model"] = {"framework_overhead_ms": framework_ms, "per_sequence_overhead_us": 0.0}
        _, res = simulate(d)
        return res.iterations.sort_values("start_s")["duration_ms"].to_numpy()

    gpu = run(False, 0.0)
    np.testing.assert_allclose(run(False, 2.0), gpu + 2.0, rtol=1e-12)
    hidden = run(True, 2.0)
    assert hidden[0] == pytest.approx(gpu[0] + 2.0, rel=1e-12)  # the prefill starts an idle engine
    np.testing.assert_allclose(hidden[1:], np.maximum(gpu[1:], 2.0), rtol=1e-12)
    # CPU work longer than a decode step's GPU time sets the pace.
    cpu_ms = float(gpu[1:].max()) + 1.0
    np.testing.assert_allclose(run(True, cpu_ms)[1:], cpu_ms, rtol=1e-12)


def test_async_scheduling_does_not_delay_a_request_to_an_idle_engine():
    d = scenario("vllm-v1", arrival=constant(0.1), prompt=fixed(256), output=fixed(4), num_requests=3)
    _, sync = simulate(d)
    d["scheduler"]["async_scheduling"] = True
    _, asyn = simulate(d)
    np.testing.assert_allclose(asyn.requests["ttft_ms"], sync.requests["ttft_ms"], rtol=1e-12)


def test_a_step_left_empty_by_a_self_preemption_admits_at_once(monkeypatch):
    """vLLM admits nothing in a step that preempted; when the preempted request was all the
    work, its next step follows at once and admits. The scheduler does that in the same
    call: returning no step would leave the engine idle with work queued (a deadlock)."""
    from simulator.kv_cache import BlockManager
    from simulator.request import Request
    from simulator.scheduler.base import ItlSink
    from simulator.scheduler.vllm_v1 import VllmV1Config, VllmV1Scheduler

    sched = VllmV1Scheduler(VllmV1Config(enable_prefix_caching=False), BlockManager(64, 16), 1024, ItlSink(),
                            token_budget=2048, max_num_seqs=8)
    req = Request(0, 0.0, 96, 20)  # six whole blocks: its first decode needs a seventh
    assert sched.add(req) is None
    step = sched.schedule(0.0)
    sched.complete(step, 0.01)
    assert req.num_generated == 1 and list(sched.running) == [req]
    grow = VllmV1Scheduler._grow

    def self_preempt_once(self, r, need):  # as if the request could not grow: it preempts itself
        monkeypatch.setattr(VllmV1Scheduler, "_grow", grow)
        self.running.remove(r)
        self._preempt(r)
        return -1

    monkeypatch.setattr(VllmV1Scheduler, "_grow", self_preempt_once)
    step = sched.schedule(0.02)
    assert step is not None and [r for r, _ in step.entries] == [req]
    assert req.preemptions == 1 and req.status == "running"


def _two_requests(tmp_path, reserve: bool):
    """A 300-token request, then an 800-token one 1 ms later, on a 1,024-token cache with a
    512-token budget: the second's first chunk fits beside the first, its whole prompt not."""
    from simulator import api

    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,300,300\n0.001,800,5\n")
    d = {"model": {"name": "llama-3.1-8b", "max_model_len": 1024}, "hardware": {"gpu": "h100-sxm"},
         "memory": {"kv_cache_tokens": 1024},
         "scheduler": {"policy": "vllm-v1", "max_num_batched_tokens": 512, "max_num_seqs": 4,
                       "async_scheduling": False, "reserve_full_prompt": reserve},
         "workload": {"arrival": {"type": "trace", "path": str(trace)}}, "output": {"report": False}}
    return api.run(d)


def test_admission_reserves_the_whole_prompt_as_vllm_does_from_0_19(tmp_path):
    """vLLM >= 0.19 (scheduler_reserve_full_isl) admits a waiting request only when its
    whole prompt's blocks are free: the 800-token prompt waits for the first request, and
    nobody is preempted. Before 0.19 its first chunk was admitted and it preempted itself."""
    whole = _two_requests(tmp_path, reserve=True)
    chunk = _two_requests(tmp_path, reserve=False)
    assert whole.requests["preemptions"].sum() == 0 and chunk.requests["preemptions"].sum() > 0
    first = whole.iterations.iloc[1]  # after the first request's prefill: decodes alone
    assert first["prefill_tokens"] == 0 and first["decode_tokens"] == 1
    second = whole.requests.set_index("request_id").loc[1]
    assert second["first_token_s"] > whole.requests.set_index("request_id").loc[0]["finish_s"]
    assert (whole.requests["status"] == "completed").all() and (chunk.requests["status"] == "completed").all()


def test_a_measured_release_before_0_19_admits_by_the_chunk():
    from simulator.validation.versions import version_overrides

    assert "scheduler.reserve_full_prompt=false" in version_overrides("0.18.1", "vllm-v1")[0]
    assert "scheduler.reserve_full_prompt=false" not in version_overrides("0.19.0", "vllm-v1")[0]
    assert "scheduler.reserve_full_prompt=false" not in version_overrides("0.11.0", "vllm-v1",
                                                                         user_set_reserve=True)[0]


@pytest.mark.parametrize(("gpu", "release", "limits"), [
    ("b200", "0.28.0", (16384, 1024)),   # >= 160 GiB doubles the budget (0.28's get_batch_defaults)
    ("b200", "0.27.1", (8192, 1024)),
    ("b200", None, (8192, 1024)),        # a release not named: the budget the measured releases had
    ("mi300x", "0.28.0", (16384, 1024)),
    ("h200", None, (8192, 1024)),        # 140 GiB: the 70 GiB tier
    ("a100-80gb-sxm", None, (2048, 256)),
    ("l40s", None, (2048, 256)),
])
def test_vllm_default_budget_follows_memory_and_release(gpu, release, limits):
    from simulator import api
    from simulator.simulation import Simulation

    d = {"model": {"name": "llama-3.1-8b", "max_model_len": 4096}, "hardware": {"gpu": gpu},
         "scheduler": {"policy": "vllm-v1"}, "cost_model": {"backend": "roofline", "engine_version": release},
         "workload": {"arrival": {"type": "poisson", "rate": 1.0}, "num_requests": 1,
                      "prompt_tokens": {"type": "fixed", "value": 64}, "output_tokens": {"type": "fixed", "value": 4}}}
    sim = Simulation(api.load(data=d))
    assert (sim.token_budget, sim.max_num_seqs) == limits


@pytest.mark.parametrize("start", [0.0, 49040.537, 312443.281])
def test_a_dynamic_batch_fires_its_wait_hours_into_a_run(tmp_path, start):
    """Regression (session-56 fuzz): readiness tested `now - arrival >= max_wait`, while the
    engine woke at `arrival + max_wait`; far into a run the two round apart, the batch never
    fired and the request was rejected as a deadlock."""
    from simulator import api

    trace = tmp_path / "t.csv"
    trace.write_text(f"arrival_s,prompt_tokens,output_tokens\n0,16,1\n{start + 49040.537},16,1\n")
    d = {"model": {"name": "opt-125m"}, "scheduler": {"policy": "dynamic", "max_wait_ms": 20.0},
         "workload": {"arrival": {"type": "trace", "path": str(trace)}}, "output": {"report": False}}
    req = api.run(d).requests
    assert (req["status"] == "completed").all()
    assert req["ttft_ms"].max() < 25.0  # the 20 ms wait and the step, not the next arrival


def test_a_cache_smaller_than_one_block_per_virtual_engine_is_a_config_error():
    from simulator import api
    from simulator.errors import ConfigError

    d = {"model": {"name": "llama-3.1-8b", "max_model_len": 16}, "parallelism": {"pp": 2},
         "memory": {"block_size": 16, "kv_cache_tokens": 16}, "scheduler": {"policy": "vllm-v0"},
         "workload": {"arrival": {"type": "poisson", "rate": 1.0}, "num_requests": 2,
                      "prompt_tokens": {"type": "fixed", "value": 8}, "output_tokens": {"type": "fixed", "value": 4}},
         "output": {"report": False}}
    with pytest.raises(ConfigError, match="fewer than the 2 pipeline virtual engines") as exc:
        api.run(d)
    assert exc.value.where == "memory.kv_cache_tokens" and "at least 32" in exc.value.fix
    # vLLM v1's one scheduler holds the whole cache: one block serves it.
    d["scheduler"] = {"policy": "vllm-v1"}
    assert (api.run(d).requests["status"] == "completed").all()


def test_vllm_v1_pipeline_counts_sequences_in_flight_toward_max_num_seqs(monkeypatch):
    """vLLM's `running` holds the sequences whose micro-batch is still in flight, and it
    admits nothing once it holds max_num_seqs: the cap is the engine's, not each
    micro-batch's (a session-57 audit found pp x max_num_seqs running)."""
    from simulator.scheduler import vllm_v1

    peak = {}
    launch = vllm_v1.VllmV1Scheduler.launch

    def counting(self, step):
        peak[self] = max(peak.get(self, 0), len(self.running))
        return launch(self, step)

    monkeypatch.setattr(vllm_v1.VllmV1Scheduler, "launch", counting)
    for pp in (2, 4):
        peak.clear()
        d = scenario("vllm-v1", arrival=poisson(100.0), prompt=fixed(64), output=fixed(50), num_requests=40,
                     sched={"max_num_seqs": 2, "max_num_batched_tokens": 512}, pp=pp)
        _, res = simulate(d)
        assert (res.requests["status"] == "completed").all()
        assert list(peak.values()) == [2]  # one scheduler, at the cap and never above it


def test_vllm_v1_pipeline_preempts_the_last_admitted_even_when_it_is_in_flight(tmp_path):
    """Under KV pressure vLLM preempts the last admitted sequence. When that one is in
    flight, the older sequence that needs a block waits for its micro-batch instead of
    preempting itself (the first form preempted the oldest, which then finished last)."""
    rows = "0.0,1000,1000\n0.002,200,1000\n"
    ends = {}
    for pp in (1, 2):
        trace = tmp_path / f"victim{pp}.csv"
        trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)
        d = scenario("vllm-v1", pp=pp, kv_tokens=2048, max_model_len=2048, sched={"max_num_batched_tokens": 512})
        d["workload"] = {"arrival": {"type": "trace", "path": str(trace)}}
        _, res = simulate(d)
        req = res.requests.set_index("request_id")
        assert (req["status"] == "completed").all()
        assert req.loc[0, "preemptions"] == 0 and req.loc[1, "preemptions"] >= 1
        ends[pp] = (req["arrival_s"] + req["e2e_ms"] / 1e3).to_dict()
        assert ends[pp][0] < ends[pp][1]  # the first admitted finishes first, as at pp=1
