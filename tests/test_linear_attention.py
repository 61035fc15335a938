"""Hybrid linear-attention models (Gated DeltaNet, Qwen3-Next): shapes, per-sequence state,
its place in the memory plan and the KV pool, and the recurrence's cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.api import load
from simulator.cost.config import RooflineEfficiency
from simulator.cost.ops import (
    DELTA_RULE_CHUNK,
    IterationShape,
    ShardedModel,
    iteration_ops,
    linear_decode_op,
    linear_prefill_op,
)
from simulator.cost.roofline import RooflineTimer
from simulator.hardware import get_gpu
from simulator.memory import kv_bytes_per_token_per_gpu, plan_memory, sequence_state_bytes_per_gpu
from simulator.models import MODEL_CATALOG, get_model, load_hf_config
from simulator.simulation import Simulation

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"

# https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct/blob/main/config.json (shape keys)
QWEN3_NEXT_CONFIG = {
    "_name_or_path": "Qwen/Qwen3-Next-80B-A3B-Instruct", "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next", "decoder_sparse_step": 1, "full_attention_interval": 4, "head_dim": 256,
    "hidden_size": 2048, "intermediate_size": 5120, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "max_position_embeddings": 262144, "mlp_only_layers": [], "moe_intermediate_size": 512,
    "num_attention_heads": 16, "num_experts": 512, "num_experts_per_tok": 10, "num_hidden_layers": 48,
    "num_key_value_heads": 2, "shared_expert_intermediate_size": 512, "tie_word_embeddings": False,
    "vocab_size": 151936,
}
QN = MODEL_CATALOG["qwen3-next-80b-a3b"]


def _sharded(tp: int = 4) -> ShardedModel:
    return ShardedModel.build(QN, tp, 1, "bf16", "bf16", "bf16", 8)


def test_parameter_counts_match_the_released_tensors():
    # The released tensors less the MTP layer: 79,674,391,296 total, 3,874,929,408 activated.
    assert QN.param_count == 79_674_391_296
    assert QN.active_param_count == 3_874_929_408
    assert (QN.linear_layers, QN.attention_layers, QN.kv_layers) == (36, 12, 12)


def test_catalog_lookup_by_release_names():
    for name in ("Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen3-Next-80B-A3B-Thinking",
                 "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8", "qwen3-next-80b-a3b"):
        assert get_model(name).name == "qwen3-next-80b-a3b"


def test_config_json_loads_into_the_catalog_entry(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN3_NEXT_CONFIG))
    spec = load_hf_config(path, name="qwen3-next-80b-a3b")
    keep = {"name", "hf_id", "aliases", "published_params_b", "published_active_params_b", "native_fp8"}
    assert spec.model_dump(exclude=keep) == QN.model_dump(exclude=keep)
    # layer_types, where a config lists them, decide which layers are linear.
    types = (["linear_attention"] * 3 + ["full_attention"]) * 12
    path.write_text(json.dumps({**QWEN3_NEXT_CONFIG, "layer_types": types[:-4] + ["full_attention"] * 4}))
    assert load_hf_config(path).linear_layers == 33


def test_kv_bytes_per_token_come_only_from_the_full_attention_layers():
    # 12 layers x K and V x 2 KV heads x 256 x 2 bytes, not 48 layers' worth.
    assert QN.kv_bytes_per_token(2) == 12 * 2 * 2 * 256 * 2
    # TP4 replicates the 2 KV heads: one per GPU.
    assert kv_bytes_per_token_per_gpu(QN, "bf16", 4, 1) == 12 * 2 * 1 * 256 * 2


def test_state_bytes_per_sequence():
    conv = (2 * 16 * 128 + 32 * 128) * 3  # q, k, v channels x (kernel - 1)
    delta = 32 * 128 * 128  # one key_dim x value_dim matrix per value head
    assert QN.linear_state_elements() == (conv, delta)
    assert QN.linear_state_bytes(2) == 36 * (conv + delta) * 2
    assert sequence_state_bytes_per_gpu(QN, 4, 1) == 36 * (conv + delta) * 2 / 4
    assert sequence_state_bytes_per_gpu(QN, 4, 2) == 18 * (conv + delta) * 2 / 4
    assert sequence_state_bytes_per_gpu(MODEL_CATALOG["qwen3-30b-a3b"], 1, 1) == 0.0


def _plan(model, **kw):
    args = dict(tp=4, pp=1, weight_dtype="bf16", kv_dtype="bf16", utilization=0.9, runtime_reserve_gib=2.0,
                block_size=16, max_batched_tokens=8192, max_num_seqs=256, max_model_len=32768)
    return plan_memory(model, get_gpu("h100-sxm"), **{**args, **kw})


def test_memory_plan_admits_fewer_sequences_as_the_state_grows():
    plan = _plan(QN)
    block_bytes = plan.block_size * plan.kv_bytes_per_token
    assert plan.state_blocks == -(-sequence_state_bytes_per_gpu(QN, 4, 1) // block_bytes) == 51
    stateless = plan.num_blocks // (2048 // 16)
    assert plan.sequences_at(2048) == plan.num_blocks // (2048 // 16 + 51) < stateless
    wider = QN.model_copy(update={"linear_num_value_heads": 64})  # twice the delta-rule state
    wide_plan = _plan(wider)
    assert wide_plan.state_blocks > plan.state_blocks
    assert wide_plan.sequences_at(2048) < plan.sequences_at(2048)
    assert "recurrent state" in plan.table()


def run_hybrid_closed_loop(model: str, tp: int):
    """8 clients send 16 requests of 1,024 + 32 tokens to `model` in bf16 on H100s (roofline);
    every request completes with all its output tokens. Returns the simulation and result."""
    sim = Simulation(load(BENCH, [f"model.name={model}", "hardware.gpu=h100-sxm",
                                  f"parallelism.tp={tp}", "model.weight_dtype=bf16", "model.activation_dtype=bf16",
                                  "workload.arrival.concurrency=8", "workload.num_requests=16",
                                  "workload.prompt_tokens.value=1024", "workload.output_tokens.value=32",
                                  "cost_model.backend=roofline"]))
    result = sim.run()
    req = result.requests
    assert (req["status"] == "completed").all()
    assert int(req["output_tokens"].sum()) == 16 * 32
    return sim, result


def test_closed_loop_completes_conserves_tokens_and_frees_kv_and_state():
    sim, result = run_hybrid_closed_loop("Qwen/Qwen3-Next-80B-A3B-Instruct", 4)
    assert result.summary["kv_cache"]["state_blocks_per_sequence"] == 51
    for engine in (e for rep in sim.replicas for e in rep.engines):
        assert engine.scheduler.kv.state_blocks == 51
        assert engine.scheduler.kv.used == 0
        # 8 sequences of 1,056 tokens at most (66 blocks) plus their states were held at once.
        assert engine.scheduler.kv.peak_used == 8 * (66 + 51)


def test_a_pool_that_holds_states_for_only_some_sequences_queues_the_rest():
    # Room for 3 sequences' KV and state at a time: all 6 complete, 3 at a time.
    sim = Simulation(load(BENCH, ["model.name=qwen3-next-80b-a3b", "hardware.gpu=h100-sxm", "parallelism.tp=4",
                                  "model.weight_dtype=bf16", "model.activation_dtype=bf16",
                                  "model.max_model_len=2048", f"memory.kv_cache_tokens={3 * (66 + 51) * 16}",
                                  "workload.arrival.concurrency=6", "workload.num_requests=6",
                                  "workload.prompt_tokens.value=1024", "workload.output_tokens.value=32",
                                  "cost_model.backend=roofline"]))
    result = sim.run()
    assert (result.requests["status"] == "completed").all()
    kv = sim.replicas[0].engines[0].scheduler.kv
    assert kv.used == 0 and kv.peak_used <= 3 * (66 + 51)


def test_decode_step_time_grows_with_batch_through_the_state_traffic():
    sm = _sharded()
    timer = RooflineTimer(get_gpu("h100-sxm"), RooflineEfficiency())
    times = [timer.op_time(linear_decode_op(b, sm)) for b in (8, 64, 256)]
    assert times[0] < times[1] < times[2]
    # Bandwidth-bound: the state read and write dominate the bytes, and grow linearly with the batch.
    op = linear_decode_op(64, sm)
    state = 8 * 128 * 128 + (2 * 4 * 128 + 8 * 128) * 3
    assert op.bytes == pytest.approx(2 * 64 * state * 2, rel=0.02)
    assert op.count == 36
    names = [o.name for o in iteration_ops(IterationShape(64, 64, 64, 64 * 2048), sm)]
    assert "gdn_decode" in names and "gdn_prefill" not in names
    assert names.count("attn_decode") == 1


def test_chunked_prefill_flops_match_the_closed_form():
    sm = _sharded()
    hv, dk, dv, c = 8, 128, 128, DELTA_RULE_CHUNK
    op = linear_prefill_op(((1000, 0), (64, 500)), sm)
    chunks = -(-1000 // c) + 1
    want = hv * (6 * dk * dv * 1064 + 2 * c * (3 * dk + 2 * dv) * chunks * c)
    assert op.flops == want
    assert op.shape == (1064, 2, 4, hv, dk, dv, 1000) and op.count == 36
    # Linear in tokens: twice the whole chunks, twice the FLOPs.
    assert linear_prefill_op(((2048, 0),), sm).flops == 2 * linear_prefill_op(((1024, 0),), sm).flops


def test_full_attention_runs_on_a_quarter_of_the_layers_with_the_gated_q_projection():
    sm = _sharded()
    assert (sm.attn_layer_passes, sm.linear_passes) == (12, 36)
    ops = {o.name: o for o in iteration_ops(IterationShape(100, 1, 0, 0, ((100, 0),)), sm)}
    assert ops["qkv_proj"].shape == (100, (4 * 2 + 2 * 1) * 256, 2048) and ops["qkv_proj"].count == 12
    assert ops["attn_prefill"].count == 12 and ops["gdn_prefill"].count == 36
    assert ops["gdn_in_proj_qkvz"].shape == (100, (2 * 4 * 128 + 2 * 8 * 128), 2048)
    assert ops["shared_expert_gate"].shape == (100, 1, 2048)


@pytest.mark.parametrize(("gpu", "source"), [("h100-sxm", "profile"), ("a100-80gb-sxm", "roofline-default")])
def test_explain_names_where_the_gated_deltanet_times_come_from(capsys, gpu, source):
    """The shipped H100 profile carries aiconfigurator's vLLM GDN kernel table; the A100's
    does not (none is published), so there the recurrence is a roofline estimate."""
    from simulator.cli import app

    with pytest.raises(SystemExit) as done:
        app(["explain", str(BENCH), "--set", "model.name=Qwen/Qwen3-Next-80B-A3B-Instruct",
             "--set", "model.weight_dtype=bf16", "--set", "model.activation_dtype=bf16",
             "--set", "parallelism.tp=4", "--set", f"hardware.gpu={gpu}"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("│ gdn_")}
    assert f"{source} " in rows["gdn_decode"] and f"{source} " in rows["gdn_prefill"]


@pytest.mark.parametrize(("policy", "extra", "pp", "kv_tokens", "prompt"), [
    # 179 blocks, 53 kept free: a 1,532-token request's 96 blocks and its state's 51 never pass.
    ("vllm-v0", ["scheduler.watermark=0.3"], 1, (128 + 51) * 16, 1500),
    # Two virtual engines of 150 blocks: the 128-block max_model_len reservation and the
    # 51-block state never fit one, though the request's own 66 blocks and state would.
    ("continuous", ["scheduler.kv_reservation=max_model_len"], 2, 300 * 16, 1024),
])
def test_a_request_whose_kv_and_state_never_fit_is_rejected_not_left_waiting(policy, extra, pp, kv_tokens, prompt):
    """Every policy's admission check counts the recurrent state with the KV the request
    reserves (vllm-v0 under its watermark): a request that could never be scheduled is
    refused with the reason; it used to wait forever, and its closed-loop client with it
    (found by fuzzing)."""
    sim = Simulation(load(BENCH, ["model.name=qwen3-next-80b-a3b", "hardware.gpu=h100-sxm", "parallelism.tp=4",
                                  f"parallelism.pp={pp}", "model.weight_dtype=bf16", "model.activation_dtype=bf16",
                                  "model.max_model_len=2048", f"memory.kv_cache_tokens={kv_tokens}",
                                  "~scheduler.async_scheduling", f"scheduler.policy={policy}", *extra,
                                  "workload.arrival.concurrency=2", "workload.num_requests=4",
                                  f"workload.prompt_tokens.value={prompt}", "workload.output_tokens.value=32",
                                  "cost_model.backend=roofline"]))
    req = sim.run().requests
    assert len(req) == 4 and (req["status"] == "rejected").all()
    assert req["reject_reason"].str.contains("KV blocks").all()
    for engine in sim.replicas[0].engines:
        assert engine.scheduler.kv.used == 0


@pytest.mark.parametrize(("gpu", "estimated"), [("a100-80gb-sxm", True), ("h100-sxm", False)])
def test_the_summary_names_the_gated_deltanet_kernels_as_estimates_where_no_table_times_them(gpu, estimated):
    sim = Simulation(load(BENCH, ["model.name=qwen3-next-80b-a3b", f"hardware.gpu={gpu}", "parallelism.tp=4",
                                  "model.weight_dtype=bf16", "model.activation_dtype=bf16"]))
    assert ("roofline estimates for Gated DeltaNet (no table times them)" in sim.kernel_times) is estimated
