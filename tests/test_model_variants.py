"""Architectures beyond dense GQA: latent attention (DeepSeek-V3, Kimi-K2), sliding-window
layers and expert-only quantisation (gpt-oss), shared experts and dense-first layers, and
the GPU- and checkpoint-aware precision mapping of sweep rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.api import load, run
from simulator.cost.ops import (
    ShardedModel,
    attn_decode_op,
    attn_prefill_op,
    token_ops,
    windowed_work,
)
from simulator.memory import (
    activation_bytes_per_gpu,
    kv_bytes_per_token_per_gpu,
    weight_bytes_per_gpu,
)
from simulator.models import get_model, load_hf_config
from simulator.simulation import Simulation
from simulator.validation.precision import precision_overrides

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"


def _sharded(name: str, tp: int = 1, **dtypes) -> ShardedModel:
    d = {"weight_dtype": "bf16", "activation_dtype": "bf16", "kv_dtype": "bf16", **dtypes}
    return ShardedModel.build(get_model(name), tp, 1, d["weight_dtype"], d["activation_dtype"],
                              d["kv_dtype"], 8, d.get("expert_weight_dtype"))


# ------------------------------------------------------------------ latent attention (MLA)

def test_mla_caches_one_latent_per_token_and_layer_on_every_tp_rank():
    model = get_model("deepseek-v3")
    per_token = 61 * (512 + 64) * 2  # layers x (kv_lora_rank + rope dim) x bf16
    for tp in (1, 2, 8):
        assert kv_bytes_per_token_per_gpu(model, "bf16", tp, 1) == per_token
    # A GQA model of similar size splits its KV heads across ranks instead.
    llama = get_model("llama-3.1-405b")
    assert kv_bytes_per_token_per_gpu(llama, "bf16", 8, 1) == kv_bytes_per_token_per_gpu(llama, "bf16", 1, 1) / 8


def test_mla_decode_reads_the_latent_once_for_all_heads():
    sm = _sharded("deepseek-v3", tp=8)
    n, ctx = 32, 4000
    op = attn_decode_op(n, n * ctx, sm)
    kv_len = n * ctx + n
    latent_bytes = kv_len * (512 + 64) * 2
    assert latent_bytes <= op.bytes < 1.05 * latent_bytes  # plus queries and outputs
    # 16 heads per GPU share it: FLOPs grow with heads, bytes do not.
    wide = attn_decode_op(n, n * ctx, _sharded("deepseek-v3", tp=1))
    assert wide.flops == pytest.approx(8 * op.flops)
    assert wide.bytes < 1.5 * op.bytes


def test_mla_projections_replicate_the_low_rank_part_and_shard_the_heads():
    ops1 = {o.name: o for o in token_ops(64, _sharded("kimi-k2", tp=1))}
    ops8 = {o.name: o for o in token_ops(64, _sharded("kimi-k2", tp=8))}
    assert ops8["q_a_kv_a_proj"].flops == ops1["q_a_kv_a_proj"].flops  # replicated
    for name in ("q_b_proj", "mla_kv_b", "o_proj"):
        assert ops8[name].flops == pytest.approx(ops1[name].flops / 8)
    # kv_b maps the 512 latent to 64 heads x (128 key + 128 value).
    assert ops1["mla_kv_b"].shape == (64, 64 * 256, 512)


def test_shared_experts_and_dense_first_layers_are_costed_on_their_own_layers():
    sm = _sharded("deepseek-v3")
    assert sm.moe_passes == 58 and sm.dense_passes == 3
    ops = {o.name: o for o in token_ops(8, sm)}
    assert ops["fused_moe"].count == 58
    assert ops["shared_expert_gate_up"].count == 58
    assert ops["shared_expert_gate_up"].shape == (8, 2 * 2048, 7168)
    assert ops["dense_gate_up"].count == 3
    assert ops["dense_gate_up"].shape == (8, 2 * 18432, 7168)


def test_mla_model_runs_closed_loop_with_tokens_conserved_and_kv_freed():
    result = run(BENCH, ["model.name=deepseek-v3", "parallelism.tp=8", "workload.arrival.concurrency=8",
                         "workload.num_requests=16", "workload.prompt_tokens.value=1024",
                         "workload.output_tokens.value=32", "cost_model.backend=roofline"])
    req = result.requests
    assert (req["status"] == "completed").all()
    assert int(req["output_tokens"].sum()) == 16 * 32
    assert 0 < result.summary["kv_cache"]["peak_utilization"] <= 1.0


# ------------------------------------------------------------------ sliding window (gpt-oss)

@given(st.integers(1, 4096), st.integers(0, 8192), st.integers(1, 2048))
def testwindowed_work_is_causal_below_the_window_and_capped_above(q, c, w):
    work = windowed_work(q, c, w)
    assert work <= q * (c + q / 2.0) + 1e-6  # never more than unwindowed causal attention
    assert work <= q * w + 1e-6  # each query sees at most w keys
    if c + q <= w:
        assert work == pytest.approx(q * (c + q / 2.0))
    if c >= w:
        assert work == q * w
    assert windowed_work(q, c + 1, w) >= work - 1e-6  # more context never means less work


def test_sliding_layers_read_a_window_not_the_whole_context():
    sm = _sharded("gpt-oss-120b")
    assert sm.window == 128 and sm.window_passes == 18
    short = attn_decode_op(8, 8 * 100, sm)
    long = attn_decode_op(8, 8 * 100_000, sm)
    # Half of the layers stop growing past the window: ~half the bytes of a full model.
    full = attn_decode_op(8, 8 * 100_000, ShardedModel(**{**sm.__dict__, "window": 0, "window_passes": 0}))
    assert long.bytes == pytest.approx(full.bytes / 2, rel=0.01)
    assert short.bytes < long.bytes
    # Prefill past the window: the sliding half does q*w work instead of q*(c + q/2).
    pre = attn_prefill_op(((4096, 0),), sm)
    unwindowed = 4096 * 2048.0
    expected = 0.5 * unwindowed + 0.5 * windowed_work(4096, 0, 128)
    assert pre.flops == pytest.approx(4.0 * expected * sm.heads * sm.head_dim)


def test_only_full_attention_layers_size_the_kv_cache():
    model = get_model("gpt-oss-120b")
    assert kv_bytes_per_token_per_gpu(model, "bf16", 1, 1) == 18 * 2 * 8 * 64 * 2


# ------------------------------------------------------------------ expert-only quantisation

@pytest.mark.parametrize(("name", "weights", "experts", "published_gb"), [
    # Published checkpoint sizes: gpt-oss-120b's MXFP4 release 65.3 GB (OpenAI's model card
    # says it fits one 80 GB GPU); Kimi-K2-Thinking's INT4 release ~594 GB.
    ("gpt-oss-120b", "bf16", "fp4", 65.3),
    ("kimi-k2", "bf16", "int4", 594.0),
])
def test_quantised_weights_count_their_scale_factors(name, weights, experts, published_gb):
    got = weight_bytes_per_gpu(get_model(name), weights, 1, 1, expert_weight_dtype=experts) / 1e9
    assert got == pytest.approx(published_gb, rel=0.02)


@pytest.mark.parametrize(("name", "tp", "seqs", "measured_gib"), [
    # "Peak activation memory" that vLLM logged on H100 at 8192 batched tokens
    # (llm-d/llm-d-benchmark config_explorer/empirical-vllm-memory-results.md; vLLM 0.6 at its
    # default 256 sequences: vllm-project/vllm#10511, Llama-3-8B, same vocabulary).
    ("llama-3.1-8b", 1, 1024, 4.76),
    ("llama-3.1-70b", 2, 1024, 4.84),
    ("qwen3-0.6b", 1, 1024, 5.56),
    ("qwen3-32b", 1, 1024, 5.64),
    ("gpt-oss-20b", 1, 1024, 7.38),
    ("llama-3.1-8b", 1, 256, 1.26),
])
def test_profiling_peak_is_the_sampler_run_vllm_logs(name, tp, seqs, measured_gib):
    """The profiling pass's peak is the dummy sampler run on max_num_seqs x vocabulary, not
    the forward pass; it sets how much memory the KV cache loses."""
    got = activation_bytes_per_gpu(get_model(name), tp, 8192, seqs) / 2**30
    assert got == pytest.approx(measured_gib, abs=0.1)


@pytest.mark.parametrize(("name", "tp", "weights", "experts", "logged_kv_gib"), [
    # vLLM's "Available KV cache memory" on H100 80GB at its defaults (0.9 utilisation, 8192
    # batched tokens, 1024 sequences), from llm-d-benchmark's empirical vLLM memory results,
    # given the memory outside PyTorch those runs logged (0.13-0.14 GiB; 0.55 at TP2).
    ("llama-3.1-8b", 1, "bf16", None, 51.38),
    ("qwen3-32b", 1, "bf16", None, 4.45),
    ("llama-3.1-70b", 2, "fp8", None, 32.0),
    ("gpt-oss-20b", 1, "bf16", "fp4", 50.28),
    ("qwen3-0.6b", 1, "bf16", None, 64.45),
])
def test_memory_plan_matches_vllms_logged_kv_cache(name, tp, weights, experts, logged_kv_gib):
    from simulator.hardware import get_gpu
    from simulator.memory import plan_memory
    plan = plan_memory(get_model(name), get_gpu("h100-sxm"), tp=tp, pp=1, weight_dtype=weights,
                       kv_dtype="bf16", expert_weight_dtype=experts, utilization=0.9,
                       runtime_reserve_gib=0.55 if tp > 1 else 0.14, block_size=16, max_batched_tokens=8192,
                       max_num_seqs=1024, max_model_len=4096)
    assert plan.kv_gib == pytest.approx(logged_kv_gib, abs=0.15)


def test_gpt_oss_120b_on_one_h100_keeps_the_kv_cache_vllm_logs():
    """llm-d-benchmark's run logs 64.38 GiB of weights loaded but still 3.33 GiB of KV cache
    (more than 71.26 - 64.38 - 7.38 - 0.13 allows): the checkpoint-size plan (60.7 GiB) is what
    the KV budget loses. Holding the MXFP4 scales twice, as the load figure suggests, would
    leave none (docs/fidelity.md, GPUStack section)."""
    from simulator.hardware import get_gpu
    from simulator.memory import plan_memory
    plan = plan_memory(get_model("gpt-oss-120b"), get_gpu("h100-sxm"), tp=1, pp=1, weight_dtype="bf16",
                       kv_dtype="bf16", expert_weight_dtype="fp4", utilization=0.9, runtime_reserve_gib=0.14,
                       block_size=16, max_batched_tokens=8192, max_num_seqs=1024, max_model_len=4096)
    assert plan.kv_gib == pytest.approx(3.33, abs=0.35)


def test_a_model_vllm_cannot_start_does_not_fit_by_as_much():
    """llm-d-benchmark's Llama-3.3-70B FP8 on one H100: 67.72 GiB of weights, and vLLM refuses
    to start with -1.44 GiB left for the KV cache; the plan refuses by the same margin."""
    import re

    from simulator.errors import DoesNotFitError
    from simulator.hardware import get_gpu
    from simulator.memory import plan_memory
    with pytest.raises(DoesNotFitError) as exc:
        plan_memory(get_model("llama-3.1-70b"), get_gpu("h100-sxm"), tp=1, pp=1, weight_dtype="fp8",
                    kv_dtype="bf16", utilization=0.9, runtime_reserve_gib=0.14, block_size=16,
                    max_batched_tokens=8192, max_num_seqs=1024, max_model_len=4096)
    text = str(exc.value)
    weights = float(re.search(r"weights \(per GPU\)\s+(-?[\d.]+) GiB", text).group(1))
    kv = float(re.search(r"KV cache\s+(-?[\d.]+) GiB", text).group(1))
    assert weights == pytest.approx(67.72, abs=0.15)
    assert kv == pytest.approx(-1.44, abs=0.15)


def test_mxfp4_experts_are_padded_to_the_serving_kernels_tile():
    """vLLM's MXFP4 MoE on Blackwell rounds each expert's intermediate and hidden widths up to
    256 (gpt-oss: 2880 -> 3072; 360 per GPU at TP8 -> 512); Marlin on Ampere rounds the
    intermediate to 128 and the hidden width to 256 (2880 -> 2944 x 3072; 360 -> 384 at TP8);
    Hopper plans keep the checkpoint."""
    from simulator.hardware import get_gpu
    from simulator.memory import plan_memory
    model = get_model("gpt-oss-120b")
    kw = dict(pp=1, weight_dtype="bf16", kv_dtype="bf16", expert_weight_dtype="fp4", utilization=0.9,
              runtime_reserve_gib=1.0, block_size=16, max_batched_tokens=8192, max_num_seqs=64,
              max_model_len=4096)
    experts = model.expert_param_count * 4.25 / 8
    checkpoint = weight_bytes_per_gpu(model, "bf16", 1, 1, "fp4") / 2**30
    for tp, blackwell, marlin in ((1, 3072 * 3072 / 2880**2, 2944 * 3072 / 2880**2),
                                  (8, 512 * 3072 / (360 * 2880), 384 * 3072 / (360 * 2880))):
        h200 = plan_memory(model, get_gpu("h200"), tp=tp, **kw).weights_gib
        assert h200 == pytest.approx(checkpoint / tp, rel=1e-9)
        for gpu, growth in (("b200", blackwell), ("a100-80gb", marlin)):
            got = plan_memory(model, get_gpu(gpu), tp=tp, **kw).weights_gib
            assert (got - h200) * 2**30 == pytest.approx(experts * (growth - 1) / tp, rel=1e-6)
    # vLLM 0.10.1 still ran Marlin on Hopper: "Model loading took 65.9651 GiB" on one H100
    # (vllm-project/vllm#23278).
    marlin = weight_bytes_per_gpu(model, "bf16", 1, 1, "fp4", (128, 256)) / 2**30
    assert marlin == pytest.approx(65.97, rel=0.005)


def test_nvfp4_and_int4_weights_carry_their_scales():
    """NVFP4: an FP8 scale per 16 values (4.5 bits); GPTQ/AWQ INT4: a 16-bit scale per 128."""
    model = get_model("llama-3.1-70b")
    head = model.vocab_size * model.hidden_size * 2 * 2.0
    body = model.param_count - model.vocab_size * model.hidden_size * 2
    assert weight_bytes_per_gpu(model, "fp4", 1, 1) == pytest.approx(body * 4.5 / 8 + head)
    assert weight_bytes_per_gpu(model, "int4", 1, 1) == pytest.approx(body * (0.5 + 2 / 128) + head)
    assert weight_bytes_per_gpu(model, "fp8", 1, 1) == pytest.approx(body * 1.0 + head)


def test_expert_only_quantisation_stores_experts_in_their_format_and_the_rest_in_bf16():
    model = get_model("gpt-oss-120b")
    experts = model.expert_param_count
    assert experts / model.param_count > 0.95
    got = weight_bytes_per_gpu(model, "bf16", 1, 1, expert_weight_dtype="fp4")
    # MXFP4: 4 bits plus an 8-bit scale per 32 values.
    assert got == pytest.approx(experts * 4.25 / 8 + (model.param_count - experts) * 2.0)
    sm = _sharded("gpt-oss-120b", expert_weight_dtype="fp4")
    ops = {o.name: o for o in token_ops(1, sm)}
    assert ops["fused_moe"].dtype == "bf16"  # W4A16: dequantised in the kernel
    assert ops["fused_moe"].shape[-1] == "w4a16"
    assert ops["qkv_proj"].bytes > 2 * 2880 * 5120  # attention weights stay 16-bit


@pytest.mark.parametrize(("prec", "model", "gpu", "expected"), [
    # MXFP4 experts of gpt-oss: bf16 elsewhere, on any GPU.
    ("fp4", "openai/gpt-oss-120b", "h100_sxm", ("bf16", "bf16", "bf16", "fp4")),
    ("fp4", "openai/gpt-oss-120b", "b200_sxm", ("bf16", "bf16", "bf16", "fp4")),
    ("int4", "moonshotai/Kimi-K2.5", "h200_sxm", ("bf16", "bf16", "bf16", "int4")),
    # Kimi and MiniMax in fp4 are NVIDIA's NVFP4 checkpoints, which leave attention in
    # bf16 (their quantisation_config ignores every self_attn) and carry FP8 KV scales.
    ("fp4", "moonshotai/Kimi-K2.5", "b200_sxm", ("bf16", "fp4", "fp8", "fp4")),
    ("fp4", "nvidia/MiniMax-M2.5-NVFP4", "b300_sxm", ("bf16", "fp4", "fp8", "fp4")),
    ("fp4", "MiniMaxAI/MiniMax-M2.5", "h200_sxm", ("bf16", "bf16", "fp8", "fp4")),
    # Qwen3's NVFP4 checkpoint quantises attention as well.
    ("fp4", "nvidia/Qwen3-235B-A22B-NVFP4", "b200_sxm", ("fp4", "fp4", "fp8", "null")),
    # NVFP4 on Blackwell tensor cores; weight-only on Hopper, which has no FP4 cores.
    ("fp4", "meta-llama/Llama-3.1-70B", "b200_sxm", ("fp4", "fp4", "fp8", "null")),
    ("fp4", "meta-llama/Llama-3.1-70B", "h100_sxm", ("fp4", "bf16", "fp8", "null")),
    ("fp8", "openai/gpt-oss-120b", "h100_sxm", ("fp8", "fp8", "fp8", "null")),
    # Publishers' block-FP8 checkpoints carry no KV scales: the KV cache stays bf16.
    # Llama has none; its FP8 is NVIDIA's ModelOpt checkpoint, FP8 KV included.
    ("fp8", "Qwen/Qwen3-235B-A22B-FP8", "h200_sxm", ("fp8", "fp8", "bf16", "null")),
    ("fp8", "MiniMaxAI/MiniMax-M2.5", "b200_sxm", ("fp8", "fp8", "bf16", "null")),
    ("fp8", "deepseek-ai/DeepSeek-R1", "h200_sxm", ("fp8", "fp8", "bf16", "null")),
    ("fp8", "nvidia/Llama-3.1-8B-Instruct-FP8", "h200_sxm", ("fp8", "fp8", "fp8", "null")),
    # Unknown names keep the plain mapping; the row is reported unsimulatable later.
    ("fp8", "acme/unknown-model", "h200_sxm", ("fp8", "fp8", "fp8", "null")),
])
def test_precision_mapping_follows_the_checkpoint_and_the_gpu(prec, model, gpu, expected):
    got = precision_overrides(prec, model, gpu)
    assert [o.split("=", 1)[1] for o in got] == list(expected)


def test_experts_only_nvfp4_runs_attention_in_bf16_and_experts_on_fp4_cores():
    """An unquantised layer quantises no activations: with bf16 weights the attention GEMMs
    stay bf16 even though the experts take FP4 activations (W4A4 MoE kernel rows)."""
    sm = _sharded("minimax-m2", tp=4, activation_dtype="fp4", kv_dtype="fp8", expert_weight_dtype="fp4")
    assert sm.gemm_dtype == "bf16" and sm.weight_bytes == 2.0
    assert sm.expert_gemm_dtype == "fp4"
    moe = next(op for op in token_ops(4, sm) if op.name == "fused_moe")
    assert moe.shape[-1] == "fp4" and moe.dtype == "fp4"
    assert [op.dtype for op in token_ops(4, sm) if op.name == "qkv_proj"] == ["bf16"]


def test_minimax_qk_norm_all_reduces_its_variance_across_tp_ranks():
    """MiniMax-M2 normalises all of q (and all of k) at once: under TP every layer sums the
    per-token fp32 variances over the ranks; Qwen3's per-head norm needs no collective."""
    def by_name(sm):
        return {op.name: op for op in token_ops(16, sm)}

    tp4 = by_name(_sharded("minimax-m2", tp=4))
    ar = tp4["qk_norm_allreduce"]
    assert ar.family == "allreduce" and ar.count == 62 and ar.bytes == 16 * 2 * 4.0
    assert ar.shape[1] == 4 and tp4["qk_norm"].kernels == 2
    assert "qk_norm_allreduce" not in by_name(_sharded("minimax-m2", tp=1))
    qwen = by_name(_sharded("qwen3-32b", tp=4))
    assert "qk_norm" in qwen and "qk_norm_allreduce" not in qwen
    assert "qk_norm" not in by_name(_sharded("llama-3.1-70b", tp=4))


def test_sweep_rows_for_new_models_and_gpus_are_simulated(tmp_path):
    """Measured values are placeholders: the test checks each row is predicted, and that
    the same model decodes faster on B200 than on H100 (more bandwidth)."""
    from simulator.validation import run_validation

    src = tmp_path / "sweep.csv"
    src.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms\n"
                   "h100_sxm,openai/gpt-oss-120b,fp4,1,1024,64,4,100.0,10.0\n"
                   "b200_sxm,openai/gpt-oss-120b,fp4,1,1024,64,4,100.0,10.0\n"
                   "h200_sxm,moonshotai/Kimi-K2.5,int4,8,1024,64,4,100.0,10.0\n"
                   "b300_sxm,MiniMaxAI/MiniMax-M2.5,fp8,4,1024,64,4,100.0,10.0\n"
                   "h200_sxm,deepseek-ai/DeepSeek-R1,fp8,8,1024,64,4,100.0,10.0\n")
    result, _ = run_validation([src], BENCH, [], tmp_path / "out", rounds=2)
    assert result["skipped"] == []
    runs = result["per_run"]
    assert all(math.isfinite(r["pred_tpot_ms"]) and r["pred_tpot_ms"] > 0 for r in runs)
    assert runs[1]["pred_tpot_ms"] < runs[0]["pred_tpot_ms"]


# ------------------------------------------------------------------ Hugging Face configs

GPT_OSS_120B_CONFIG = {  # https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json (shape keys)
    "model_type": "gpt_oss", "num_hidden_layers": 36, "hidden_size": 2880, "num_attention_heads": 64,
    "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 2880, "num_local_experts": 128,
    "num_experts_per_tok": 4, "vocab_size": 201088, "max_position_embeddings": 131072,
    "sliding_window": 128, "tie_word_embeddings": False, "attention_bias": True,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "quantization_config": {"quant_method": "mxfp4"},
}

KIMI_K2_CONFIG = {  # https://huggingface.co/moonshotai/Kimi-K2-Instruct/blob/main/config.json
    "model_type": "kimi_k2", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 64,
    "num_key_value_heads": 64, "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "n_routed_experts": 384, "num_experts_per_tok": 8, "n_shared_experts": 1, "first_k_dense_replace": 1,
    "moe_layer_freq": 1, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 163840, "max_position_embeddings": 262144,
    "tie_word_embeddings": False,
}


@pytest.mark.parametrize(("cfg", "catalog"), [(GPT_OSS_120B_CONFIG, "gpt-oss-120b"), (KIMI_K2_CONFIG, "kimi-k2")])
def test_hf_loader_matches_the_catalog(tmp_path, cfg, catalog):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    spec = load_hf_config(path)
    want = get_model(catalog)
    assert spec.param_count == want.param_count
    assert spec.kv_bytes_per_token(2) == want.kv_bytes_per_token(2)
    assert spec.sliding_layers == want.sliding_layers
    assert spec.native_expert_dtype == ("fp4" if catalog == "gpt-oss-120b" else None)  # K2-Instruct: FP8


def test_hf_loader_unwraps_a_multimodal_text_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "kimi_k25", "text_config": {
        **KIMI_K2_CONFIG, "quantization_config": {"quant_method": "compressed-tensors"}}}))
    spec = load_hf_config(path, name="k25")
    assert spec.is_mla and spec.native_expert_dtype == "int4"
    assert spec.param_count == get_model("kimi-k2").param_count


def test_memory_plan_of_an_mla_model_on_eight_gpus():
    sim = Simulation(load(BENCH, ["model.name=deepseek-v3", "parallelism.tp=8", "cost_model.backend=roofline"]))
    assert sim.memory.kv_bytes_per_token == 61 * 576 * 2  # the whole latent on every rank
    body = sim.model.param_count - 2 * 129280 * 7168
    assert sim.memory.weights_gib * 2**30 == pytest.approx((body * 1.0 + 2 * 129280 * 7168 * 2.0) / 8)


def test_hf_config_with_block_fp8_quantisation_marks_a_native_fp8_checkpoint(tmp_path):
    from simulator.models import load_hf_config

    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 1024,
           "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8,
           "intermediate_size": 2048, "vocab_size": 1000, "max_position_embeddings": 2048,
           "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert load_hf_config(tmp_path / "config.json").native_fp8
    del cfg["quantization_config"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert not load_hf_config(tmp_path / "config.json").native_fp8


@pytest.mark.parametrize(("name", "tp", "weights", "experts"), [
    ("llama-3.1-70b", 2, "fp8", None),
    ("gpt-oss-120b", 1, "bf16", "fp4"),
    ("qwen3-30b-a3b", 2, "bf16", None),
])
def test_the_decode_floor_reads_what_one_token_passes_through(name, tp, weights, experts):
    """A dense decode step reads the whole weight shard but the input embedding (one row of
    it); a MoE one also skips the routed experts a token does not use (the active share),
    which `plan` reports as the floor."""
    from simulator.hardware import get_gpu
    from simulator.memory import plan_memory
    model = get_model(name)
    plan = plan_memory(model, get_gpu("h100-sxm"), tp=tp, pp=1, weight_dtype=weights, kv_dtype="bf16",
                       expert_weight_dtype=experts, utilization=0.9, runtime_reserve_gib=0.5, block_size=16,
                       max_batched_tokens=8192, max_num_seqs=256, max_model_len=4096)
    embedding = model.vocab_size * model.hidden_size * 2 / tp / 2**30  # 16-bit, split over TP
    if not model.is_moe:
        assert plan.weights_read_per_token_gib == pytest.approx(plan.weights_gib - embedding, rel=1e-9)
        return
    assert plan.weights_read_per_token_gib < plan.weights_gib - embedding
    # Without quantised experts the bytes scale as the parameters (the router aside).
    if experts is None:
        share = (model.active_param_count - model.vocab_size * model.hidden_size) / model.param_count
        assert plan.weights_read_per_token_gib / plan.weights_gib == pytest.approx(share, rel=0.01)
