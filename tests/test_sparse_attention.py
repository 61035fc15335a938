"""DeepSeek Sparse Attention (DeepSeek-V3.2): the indexer's shapes and parameters, its key
cache beside the MLA latent, and attention costs that stop growing with the context past
top-k while the indexer's own scores keep growing linearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulator.api import load
from simulator.cost.config import RooflineEfficiency
from simulator.cost.ops import (
    IterationShape,
    ShardedModel,
    attn_decode_op,
    indexer_decode_op,
    indexer_prefill_op,
    iteration_ops,
    sparse_prefill_ops,
)
from simulator.cost.roofline import RooflineTimer
from simulator.errors import CatalogError
from simulator.hardware import get_gpu
from simulator.memory import kv_bytes_per_token_per_gpu, plan_memory, weight_bytes_per_gpu
from simulator.models import MODEL_CATALOG, ModelSpec, get_model, load_hf_config
from simulator.simulation import Simulation

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"

# https://huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp/blob/main/config.json (shape keys)
V32_CONFIG = {
    "_name_or_path": "deepseek-ai/DeepSeek-V3.2", "architectures": ["DeepseekV32ForCausalLM"],
    "model_type": "deepseek_v32", "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
    "moe_layer_freq": 1, "index_topk": 2048, "index_n_heads": 64, "index_head_dim": 128,
    "vocab_size": 129280, "max_position_embeddings": 163840, "tie_word_embeddings": False,
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
}
V3 = MODEL_CATALOG["deepseek-v3"]
V32 = MODEL_CATALOG["deepseek-v3.2"]
INDEXER = 1536 * 64 * 128 + 7168 * (128 + 64) + 2 * 128  # wq_b, wk + weights_proj, k_norm


def _sharded(model: ModelSpec, tp: int = 8, kv: str = "bf16") -> ShardedModel:
    return ShardedModel.build(model, tp, 1, "fp8", "fp8", kv, 8)


def test_parameter_count_adds_the_indexers_to_deepseek_v3():
    assert V32.indexer_params == INDEXER == 13_959_424
    assert V32.param_count == V3.param_count + 61 * INDEXER == 671_877_929_216
    assert V32.active_param_count == V3.active_param_count + 61 * INDEXER
    assert V32.param_count / 1e9 == pytest.approx(V32.published_params_b, rel=0.002)
    assert V3.indexer_params == 0


def test_catalog_lookup_by_release_names():
    for name in ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-ai/DeepSeek-V3.2", "deepseek-ai/DeepSeek-V3.2-Speciale",
                 "deepseek-v3.2"):
        assert get_model(name).name == "deepseek-v3.2"
    assert get_model("deepseek-ai/DeepSeek-V3.1-Terminus").name == "deepseek-v3"


def test_config_json_loads_into_the_catalog_entry(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(V32_CONFIG))
    spec = load_hf_config(path, name="deepseek-v3.2")
    keep = {"name", "hf_id", "aliases", "published_params_b", "published_active_params_b"}
    assert spec.model_dump(exclude=keep) == V32.model_dump(exclude=keep)
    # A deepseek_v32 config must name its indexer.
    path.write_text(json.dumps({k: v for k, v in V32_CONFIG.items() if k != "index_topk"}))
    with pytest.raises(Exception, match="index_topk"):
        load_hf_config(path)


def test_an_indexer_needs_mla_with_a_q_latent():
    with pytest.raises(ValueError, match="indexer"):
        ModelSpec.model_validate({**V3.model_dump(), "index_topk": 2048})
    with pytest.raises(ValueError, match="q_lora_rank"):
        ModelSpec.model_validate({**V32.model_dump(), "q_lora_rank": 0})


def test_kv_bytes_per_token_hold_the_latent_and_the_indexer_keys():
    # bf16: the 576-wide latent (1,152 B) and the indexer's 128 FP8 values + an fp32 scale (132 B).
    assert V32.indexer_key_bytes(2) == V32.indexer_key_bytes(1) == 132
    assert V32.kv_bytes_per_token(2) == 61 * (576 * 2 + 132) == 78_324
    # fp8 is vLLM's fp8_ds_mla: 512 FP8 + 4 fp32 scales + 64 bf16 RoPE values = 656 B.
    assert V32.kv_bytes_per_token(1) == 61 * (656 + 132) == 48_068
    assert V3.kv_bytes_per_token(2) == 61 * 576 * 2  # V3 unchanged
    # Shared by all heads: every TP rank caches all of it; PP splits the layers.
    assert kv_bytes_per_token_per_gpu(V32, "bf16", 8, 1) == 78_324
    assert kv_bytes_per_token_per_gpu(V32, "fp8", 8, 2) == 31 * 788
    assert _sharded(V32, kv="fp8").latent_bytes == 656


def test_memory_plan_sizes_blocks_by_the_larger_token_and_replicates_the_indexer():
    args = dict(tp=8, pp=1, weight_dtype="fp8", kv_dtype="bf16", utilization=0.9, runtime_reserve_gib=2.0,
                block_size=64, max_batched_tokens=8192, max_num_seqs=256, max_model_len=32768)
    gpu = get_gpu("h200")
    v3, v32 = plan_memory(V3, gpu, **args), plan_memory(V32, gpu, **args)
    assert v32.kv_bytes_per_token == 78_324
    assert v32.num_blocks == int(v32.kv_gib * 1024**3 // (64 * 78_324))
    assert v32.capacity_tokens < v3.capacity_tokens * 70_272 / 78_324
    # Each rank holds every indexer (vLLM's ReplicatedLinear), not an eighth of them.
    extra = weight_bytes_per_gpu(V32, "fp8", 8, 1) - weight_bytes_per_gpu(V3, "fp8", 8, 1)
    assert extra == pytest.approx(61 * INDEXER, rel=1e-9)


def test_decode_attention_stops_growing_past_top_k_while_v3_grows():
    sm3, sm32 = _sharded(V3), _sharded(V32)
    n = 32
    v3 = [attn_decode_op(n, n * c, sm3) for c in (4096, 32768)]
    v32 = [attn_decode_op(n, n * c, sm32) for c in (4096, 32768)]
    assert v32[0].bytes == v32[1].bytes and v32[0].flops == v32[1].flops
    assert v32[0].shape[1] == n * 2048
    assert v3[1].bytes > 7 * v3[0].bytes
    timer = RooflineTimer(get_gpu("h200"), RooflineEfficiency())
    assert timer.op_time(v32[1]) < timer.op_time(v3[1]) / 10


def test_indexer_scores_are_linear_in_context_for_decode_and_quadratic_for_prefill():
    sm = _sharded(V32)
    n = 16
    a, b = indexer_decode_op(n, n * 4095, sm), indexer_decode_op(n, n * 8191, sm)  # 4,096 and 8,192 keys each
    assert b.flops == 2 * a.flops == 2 * 2 * n * 4096 * 64 * 128
    key_bytes = n * 4096 * (132 + 8)  # keys, logits written and read back by the top-k
    assert b.bytes - a.bytes == pytest.approx(key_bytes)
    assert a.count == 61 and a.dtype == "fp8"
    one, two = indexer_prefill_op(((4096, 0),), sm), indexer_prefill_op(((8192, 0),), sm)
    assert two.flops == 4 * one.flops == 4 * 2 * 4096 * 2048 * 64 * 128


def test_below_top_k_attention_costs_what_v3_does_plus_the_indexer():
    runs = {}
    for name in ("deepseek-v3", "deepseek-ai/DeepSeek-V3.2"):
        sim = Simulation(load(BENCH, [f"model.name={name}", "parallelism.tp=8", "hardware.gpu=h200",
                                      "model.max_model_len=32768"]))
        runs[name] = sim.pools["serve"].cost
    v3, v32 = runs["deepseek-v3"], runs["deepseek-ai/DeepSeek-V3.2"]
    t = v32.timer.op_time
    for n, ctx in ((1, 100), (32, 2047), (8, 1500)):
        idx = indexer_decode_op(n, n * ctx, v32.sharded)
        assert v32._decode_attention_exact(n, n * ctx) == pytest.approx(
            v3._decode_attention_exact(n, n * ctx) + t(idx) * idx.count, rel=1e-12)
    for chunks in (((2048, 0),), ((1000, 1048),), ((512, 0), (300, 700))):
        idx = indexer_prefill_op(chunks, v32.sharded)
        assert v32.prefill_attention_time(chunks) == pytest.approx(
            v3.prefill_attention_time(chunks) + t(idx) * idx.count, rel=1e-12)
    # Past top-k prefill runs sparse MLA, timed by the roofline as the tables lack it.
    names = [op.name for op in sparse_prefill_ops(((2049, 0),), v32.sharded)]
    assert names == ["sparse_mla_prefill", "indexer_prefill"]
    assert v32.timer.source_of(sparse_prefill_ops(((4096, 0),), v32.sharded)[0]) == "roofline-default"


def test_sparse_prefill_work_is_capped_at_top_k_per_query():
    sm = _sharded(V32)
    short, long = (sparse_prefill_ops(((q, 0),), sm)[0] for q in (16384, 32768))
    # Past the first 2,048 tokens each query attends to 2,048: twice the queries, a bit over twice the work.
    assert long.flops / short.flops == pytest.approx((32768 - 1024) / (16384 - 1024))
    assert short.family == "attn_sparse" and short.shape[2] == 64  # 16 heads per rank padded to 64


def test_iteration_lists_the_indexer_ops():
    sm = _sharded(V32)
    names = [o.name for o in iteration_ops(IterationShape(40, 9, 8, 8 * 5000, ((32, 4000),)), sm)]
    for name in ("indexer_wq_b", "indexer_wk_weights", "indexer_rope_quant", "indexer_prefill",
                 "sparse_mla_prefill", "attn_decode", "indexer_decode"):
        assert names.count(name) == 1, name
    assert "indexer_decode" not in [o.name for o in iteration_ops(IterationShape(40, 9, 8, 8 * 5000), _sharded(V3))]


def test_closed_loop_past_top_k_completes_conserves_tokens_and_frees_kv():
    sim = Simulation(load(BENCH, ["model.name=deepseek-ai/DeepSeek-V3.2-Exp", "parallelism.tp=8",
                                  "hardware.gpu=h200", "model.max_model_len=32768", "memory.block_size=64",
                                  "workload.arrival.concurrency=8", "workload.num_requests=24",
                                  "workload.prompt_tokens.value=6000", "workload.output_tokens.value=64"]))
    result = sim.run()
    req = result.requests
    assert (req["status"] == "completed").all() and len(req) == 24
    assert int(req["output_tokens"].sum()) == 24 * 64
    assert int(req["prompt_tokens"].sum()) == 24 * 6000
    for engine in (e for rep in sim.replicas for e in rep.engines):
        kv = engine.scheduler.kv
        assert kv.used == 0
        assert kv.peak_used <= kv.total and kv.peak_used >= 8 * -(-6000 // 64)


def test_explain_labels_the_sparse_ops_as_roofline(capsys):
    from simulator.cli import app

    with pytest.raises(SystemExit) as done:
        app(["explain", str(BENCH), "--set", "model.name=deepseek-ai/DeepSeek-V3.2", "--set", "parallelism.tp=8",
             "--set", "hardware.gpu=h200", "--set", "model.max_model_len=32768", "--context", "32000",
             "--prefill", "8192", "--batch", "16"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("│ ")}
    for name in ("indexer_decode", "indexer_prefill"):
        assert "roofline-default" in rows[name]
    assert any(n.startswith("sparse_mla_pref") and "roofline-default" in r for n, r in rows.items())


def test_the_summary_names_the_kernels_no_table_times():
    """Under the tables a DSA model's sparse MLA and indexer are still roofline estimates;
    the run says so instead of reading as measured, and a dense model's line is unchanged."""
    from simulator.simulation import Simulation

    bench = Path(__file__).resolve().parents[1] / "scenarios" / "benchmark-concurrency.yaml"
    v32 = Simulation(load(bench, ["model.name=deepseek-v3.2", "parallelism.tp=8"]))
    assert v32.kernel_times.endswith("; roofline estimates for sparse MLA, DSA indexer (no table times them)")
    dense = Simulation(load(bench, []))
    assert "roofline estimates" not in dense.kernel_times
    roofline = Simulation(load(bench, ["model.name=deepseek-v3.2", "parallelism.tp=8", "cost_model.backend=roofline"]))
    assert roofline.kernel_times == "roofline (datasheet peaks x cost_model.efficiency)"


def test_dsa_models_page_their_cache_in_the_64_token_blocks_vllm_requires():
    """vLLM's FlashMLA-sparse kernels need 64-token blocks and vLLM sets that size for
    DeepSeek-V3.2; the simulator does too, refuses another explicit size with the fix, and
    leaves every other model's block size alone."""
    from simulator.errors import ConfigError
    from simulator.simulation import Simulation

    bench = Path(__file__).resolve().parents[1] / "scenarios" / "benchmark-concurrency.yaml"
    v32 = ["model.name=deepseek-v3.2", "parallelism.tp=8", "cost_model.backend=roofline"]
    sim = Simulation(load(bench, v32))
    assert sim.block_size == 64 and sim.memory.block_size == 64
    assert Simulation(load(bench, [*v32, "memory.block_size=64"])).block_size == 64
    with pytest.raises(ConfigError, match="64-token KV blocks") as err:
        Simulation(load(bench, [*v32, "memory.block_size=16"]))
    assert err.value.where == "memory.block_size" and "memory.block_size: 64" in err.value.fix
    assert Simulation(load(bench, ["model.name=deepseek-v3", "parallelism.tp=8"])).block_size == 16


# zai-org/GLM-5-FP8's config.json, shape keys (GLM-5.1's are the same).
GLM5_CONFIG = {
    "_name_or_path": "zai-org/GLM-5-FP8", "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa",
    "hidden_size": 6144, "intermediate_size": 12288, "moe_intermediate_size": 2048, "num_hidden_layers": 78,
    "num_attention_heads": 64, "num_key_value_heads": 64, "head_dim": 64, "q_lora_rank": 2048, "kv_lora_rank": 512,
    "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256, "n_routed_experts": 256,
    "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1,
    "index_topk": 2048, "index_n_heads": 32, "index_head_dim": 128, "vocab_size": 154880,
    "max_position_embeddings": 202752, "tie_word_embeddings": False,
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
}


def test_glm5_is_deepseek_sparse_attention_at_its_own_shapes(tmp_path):
    """GLM-5's glm_moe_dsa config loads as the catalog entry: the report's 744B total and
    40B activated, an indexer of 32 heads per layer, 192-wide query/key and 256-wide value heads."""
    glm = MODEL_CATALOG["glm-5"]
    for name in ("zai-org/GLM-5", "zai-org/GLM-5-FP8", "nvidia/GLM-5-NVFP4", "zhipuai/GLM-5", "zai-org/GLM-5.1"):
        assert get_model(name) is glm
    assert glm.param_count / 1e9 == pytest.approx(744.0, rel=0.001)
    assert glm.is_sparse and (glm.index_n_heads, glm.head_dim, glm.v_head_dim) == (32, 192, 256)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GLM5_CONFIG))
    keep = {"name", "hf_id", "aliases", "published_params_b", "published_active_params_b", "nvfp4_experts_only",
            "released_in_fp8"}  # this file is the -FP8 repository's; the entry names the bf16 one
    assert load_hf_config(path).model_dump(exclude=keep) == glm.model_dump(exclude=keep)


GLM52_INDEXERS = ["full"] * 3 + (["shared"] * 3 + ["full"]) * 18 + ["shared"] * 3  # its config's 78 entries


def test_glm52_shares_each_indexer_over_the_next_layers(tmp_path):
    """GLM-5.2's IndexShare: 21 of 78 layers own an indexer (weights, key cache, scoring); the
    schedule reads the same from indexer_types or from index_topk_freq / offset alone."""
    glm5, glm52 = MODEL_CATALOG["glm-5"], MODEL_CATALOG["glm-5.2"]
    assert GLM52_INDEXERS.count("full") == 21 and len(GLM52_INDEXERS) == 78
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**GLM5_CONFIG, "indexer_types": GLM52_INDEXERS, "max_position_embeddings": 1048576}))
    keep = {"name", "hf_id", "aliases", "published_params_b", "published_active_params_b", "nvfp4_experts_only",
            "released_in_fp8"}
    assert load_hf_config(path).model_dump(exclude=keep) == glm52.model_dump(exclude=keep)
    path.write_text(json.dumps({**GLM5_CONFIG, "index_topk_freq": 4, "index_skip_topk_offset": 3}))
    assert load_hf_config(path).indexer_layers == 21
    for name in ("zai-org/GLM-5.2-FP8", "nvidia/GLM-5.3-NVFP4", "zai-org/GLM-5.3"):
        assert get_model(name) is glm52
    assert (glm5.indexed_layers, glm52.indexed_layers) == (78, 21)
    assert glm5.param_count - glm52.param_count == 57 * glm5.indexer_params
    latent = glm5.latent_bytes(2)
    assert glm52.kv_bytes_per_token(2) == 78 * latent + 21 * glm5.indexer_key_bytes(2)
    assert kv_bytes_per_token_per_gpu(glm52, "bf16", 8, 2) == 39 * latent + 11 * glm5.indexer_key_bytes(2)
    # the scoring runs on the indexing layers only, the sparse MLA on all of them
    sm5, sm52 = _sharded(glm5), _sharded(glm52)
    assert (sm5.index_passes, sm52.index_passes) == (78, 21)
    assert indexer_decode_op(8, 8 * 50_000, sm52).count == 21
    assert attn_decode_op(8, 8 * 50_000, sm52).count == attn_decode_op(8, 8 * 50_000, sm5).count == 78


@pytest.mark.parametrize("types, match", [
    (["full"] * 77, "each of the 78 layers"),
    (["full"] * 77 + ["half"], "half"),
    (["shared"] * 78, "no layer runs an indexer"),
])
def test_a_malformed_indexer_schedule_is_refused_with_the_reason(tmp_path, types, match):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**GLM5_CONFIG, "indexer_types": types}))
    with pytest.raises(CatalogError, match=match) as err:
        load_hf_config(path)
    assert "config.json" in err.value.fix


def test_glm5_runs_end_to_end_with_its_sparse_cache():
    sim = Simulation(load(BENCH, ["model.name=zai-org/GLM-5-FP8", "parallelism.tp=8", "workload.num_requests=64",
                                  "workload.arrival.concurrency=16"]))
    res = sim.run()
    assert (res.requests["output_tokens"] == 1024).all() and len(res.requests) == 64
    assert sim.block_size == 64  # vLLM's FlashMLA-sparse block size
    assert "sparse MLA" in sim.kernel_times
