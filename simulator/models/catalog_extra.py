"""More open models that vLLM benchmarks name: earlier generations and other labs' releases.

Each entry copies the shape keys of the model's config.json on the Hugging Face Hub (read
from the repository or from copies that carry its `_name_or_path`), and its parameter count
is checked against the published size (Hugging Face's count, or the model card's where it
gives one) by the catalog tests. Features the simulator does not cost apart are noted where
they matter: ALiBi in place of RoPE, fused QKV tensors of the same total shape, post-norms.
"""

from __future__ import annotations

from simulator.models.spec import ModelSpec, moe_routing_for


def _dense(name: str, hf_id: str, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int,
           context: int, published_b: float, head_dim: int = 128, aliases: tuple[str, ...] = (),
           **extra) -> ModelSpec:
    """A decoder of identical layers with a gated (SwiGLU/GeGLU) MLP, the common case here."""
    return ModelSpec(name=name, hf_id=hf_id, num_layers=layers, hidden_size=hidden, num_heads=heads,
                     num_kv_heads=kv_heads, head_dim=head_dim, ffn_size=ffn, gated_mlp=True, vocab_size=vocab,
                     max_position_embeddings=context, published_params_b=published_b, aliases=aliases, **extra)


DENSE_MODELS: list[ModelSpec] = [
    # Qwen1.5 (model_type qwen2: biases on q, k and v; full multi-head attention except 32B).
    _dense("qwen1.5-7b", "Qwen/Qwen1.5-7B", 32, 4096, 32, 32, 11008, 151936, 32768, 7.72, qkv_bias=True),
    _dense("qwen1.5-14b", "Qwen/Qwen1.5-14B", 40, 5120, 40, 40, 13696, 152064, 32768, 14.2, qkv_bias=True),
    _dense("qwen1.5-32b", "Qwen/Qwen1.5-32B", 64, 5120, 40, 8, 27392, 152064, 32768, 32.5, qkv_bias=True),
    _dense("qwen1.5-72b", "Qwen/Qwen1.5-72B", 80, 8192, 64, 64, 24576, 152064, 32768, 72.3, qkv_bias=True),
    # DeepSeek-R1-Distill-Qwen-1.5B: Qwen2.5-Math-1.5B's shapes, untied (Qwen2.5-1.5B ties).
    _dense("deepseek-r1-qwen-1.5b", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 28, 1536, 12, 2, 8960,
           151936, 131072, 1.78, qkv_bias=True),
    # Ministral-8B-Instruct-2410: its config's sliding_window (32,768) spans the whole context.
    _dense("ministral-8b", "mistralai/Ministral-8B-Instruct-2410", 36, 4096, 32, 8, 12288, 131072, 32768, 8.02),
    # Phi-4-mini-instruct: tied 200,064-token vocabulary; 3,836,021,760 parameters.
    _dense("phi-4-mini", "microsoft/Phi-4-mini-instruct", 32, 3072, 24, 8, 8192, 200064, 131072, 3.836,
           tied_embeddings=True),
    # Gemma (model_type gemma): heads of 256 (heads x 256 exceeds the width), GeGLU, tied.
    _dense("gemma-7b", "google/gemma-7b", 28, 3072, 16, 16, 24576, 256000, 8192, 8.54, head_dim=256,
           tied_embeddings=True),
    _dense("gemma-2b", "google/gemma-2b", 18, 2048, 8, 1, 16384, 256000, 8192, 2.51, head_dim=256,
           tied_embeddings=True),
    # Falcon3 (LlamaForCausalLM): 12 query and 4 KV heads of 256.
    _dense("falcon3-10b", "tiiuae/Falcon3-10B-Base", 40, 3072, 12, 4, 23040, 131072, 32768, 10.3, head_dim=256),
    _dense("falcon3-7b", "tiiuae/Falcon3-7B-Base", 28, 3072, 12, 4, 23040, 131072, 32768, 7.46, head_dim=256),
    # InternLM2.5 (model_type internlm2: one fused wqkv of the same total shape, no biases).
    _dense("internlm2.5-7b", "internlm/internlm2_5-7b", 32, 4096, 32, 8, 14336, 92544, 32768, 7.74,
           aliases=("internlm/internlm2_5-7b-chat",)),
    # OLMo 2 (model_type olmo2): norms after attention and the MLP rather than before, and
    # one RMSNorm over all of q and one over all of k, which vLLM gathers across TP ranks.
    _dense("olmo-2-7b", "allenai/OLMo-2-1124-7B", 32, 4096, 32, 32, 11008, 100352, 4096, 7.30,
           qk_norm_spans_heads=True),
    _dense("olmo-2-13b", "allenai/OLMo-2-1124-13B", 40, 5120, 40, 40, 13824, 100352, 4096, 13.7,
           qk_norm_spans_heads=True),
    # DeepSeek LLM and DeepSeek Coder (LlamaForCausalLM).
    _dense("deepseek-llm-7b", "deepseek-ai/deepseek-llm-7b-base", 30, 4096, 32, 32, 11008, 102400, 4096, 6.91),
    _dense("deepseek-llm-67b", "deepseek-ai/deepseek-llm-67b-base", 95, 8192, 64, 8, 22016, 102400, 4096, 67.4),
    _dense("deepseek-coder-6.7b", "deepseek-ai/deepseek-coder-6.7b-base", 32, 4096, 32, 32, 11008, 32256, 16384,
           6.74),
    _dense("deepseek-coder-33b", "deepseek-ai/deepseek-coder-33b-base", 62, 7168, 56, 8, 19200, 32256, 16384, 33.3),
    # Code Llama 7B and 13B: Llama 2's shapes with 16 more tokens and 16,384 positions.
    _dense("codellama-7b", "codellama/CodeLlama-7b-hf", 32, 4096, 32, 32, 11008, 32016, 16384, 6.74,
           aliases=("meta-llama/CodeLlama-7b-hf",)),
    _dense("codellama-13b", "codellama/CodeLlama-13b-hf", 40, 5120, 40, 40, 13824, 32016, 16384, 13.0,
           aliases=("meta-llama/CodeLlama-13b-hf",)),
    # GLM-4-9B (model_type chatglm): 2 KV groups, q/k/v biases, a padded 151,552 vocabulary.
    _dense("glm-4-9b", "THUDM/glm-4-9b", 40, 4096, 32, 2, 13696, 151552, 131072, 9.40, qkv_bias=True,
           aliases=("zai-org/glm-4-9b-chat", "THUDM/glm-4-9b-chat-hf")),
    # Baichuan 2 (fused W_pack QKV): the 13B uses ALiBi, the 7B RoPE; neither has biases.
    _dense("baichuan2-7b", "baichuan-inc/Baichuan2-7B-Base", 32, 4096, 32, 32, 11008, 125696, 4096, 7.51),
    _dense("baichuan2-13b", "baichuan-inc/Baichuan2-13B-Base", 40, 5120, 40, 40, 13696, 125696, 4096, 13.9),
    # Yi-1.5 9B and 6B (the 34B keeps Yi-34B's shapes).
    _dense("yi-1.5-9b", "01-ai/Yi-1.5-9B", 48, 4096, 32, 4, 11008, 64000, 4096, 8.83),
    _dense("yi-1.5-6b", "01-ai/Yi-1.5-6B", 32, 4096, 32, 4, 11008, 64000, 4096, 6.06),
]


def qwen25_vl_encoder_params(width: int, ffn: int, out: int, depth: int = 32) -> int:
    """Qwen2.5-VL's vision tower, from its vision_config: the 14x14x2 patch embedding (no
    bias), `depth` blocks of two RMSNorms, qkv and output projections and a gated SiLU MLP,
    all with biases, and the merger: an RMSNorm and a two-layer MLP from the 2x2-merged width
    to the text model's hidden size `out`. 676.6M for the 7B, whose count (8.29B) it matches."""
    block = 2 * width + 4 * width * width + 4 * width + 3 * width * ffn + 2 * ffn + width
    merged = 4 * width
    merger = width + merged * merged + merged + merged * out + out
    return 3 * 2 * 14 * 14 * width + depth * block + merger


def _qwen25_vl(text: ModelSpec, size: str, ffn: int, published_b: float) -> ModelSpec:
    """A Qwen2.5-VL release: the Qwen2.5 text model of that size (128,000 positions) plus its
    vision encoder, which a text-only benchmark loads but never runs."""
    return text.model_copy(update={
        "name": f"qwen2.5-vl-{size}", "hf_id": f"Qwen/Qwen2.5-VL-{size.upper()}-Instruct", "aliases": (),
        "max_position_embeddings": 128000, "published_params_b": published_b,
        "encoder_params": qwen25_vl_encoder_params(1280, ffn, text.hidden_size)})


def vision_language_models(catalog: dict[str, ModelSpec]) -> list[ModelSpec]:
    """Qwen2.5-VL 3B, 7B, 32B and 72B: their text_config repeats Qwen2.5's shapes (3B tied);
    the vision MLP is 3,420 wide (3,456 in the 32B and 72B). Sizes: Hugging Face's counts."""
    return [_qwen25_vl(catalog["qwen2.5-3b"], "3b", 3420, 3.75),
            _qwen25_vl(catalog["qwen2.5-7b"], "7b", 3420, 8.29),
            _qwen25_vl(catalog["qwen2.5-32b"], "32b", 3456, 33.5),
            _qwen25_vl(catalog["qwen2.5-72b"], "72b", 3456, 73.4)]


def _deepseek_v4(name: str, hf_id: str, layers: int, hidden: int, heads: int, q_lora: int, o_groups: int,
                 experts: int, width: int, csa: int, hca: int, topk: int, published_b: float, active_b: float,
                 aliases: tuple[str, ...]) -> ModelSpec:
    """DeepSeek-V4 (models/compressed.py): one 512-wide KV head (64 rotary), a 128-token window
    on every layer, 1,024-wide output latents, 4 residual streams, an indexer of 64 heads of 128;
    every layer MoE (top-6 plus one shared), routed experts released in MXFP4, the rest block FP8."""
    return ModelSpec(name=name, hf_id=hf_id, num_layers=layers, hidden_size=hidden, num_heads=heads, num_kv_heads=1,
                     head_dim=512, ffn_size=width, gated_mlp=True, vocab_size=129280, max_position_embeddings=1048576,
                     q_lora_rank=q_lora, qk_rope_head_dim=64, num_experts=experts, experts_per_token=6,
                     moe_ffn_size=width, num_shared_experts=1, native_fp8=True, released_in_fp8=True,
                     native_expert_dtype="fp4", native_expert_bits=4.25,
                     compressed={"window": 128, "csa_layers": csa, "hca_layers": hca, "topk": topk,
                                 "index_heads": 64, "index_dim": 128, "o_lora_rank": 1024, "o_groups": o_groups,
                                 "hc_mult": 4},
                     published_params_b=published_b, published_active_params_b=active_b, aliases=aliases)


# DeepSeek-V4 (deepseek_v4; aiconfigurator-core 0.12's copies of both config.json files). Flash:
# 43 layers (2 window-only, 21 CSA, 20 HCA), 64 heads, 256 experts of 2,048; Pro: 61 layers (30
# CSA, 31 HCA), 128 heads, 384 experts of 3,072. DeepSeek's sizes: 284B with 13B activated, and
# 1.6T with 49B (these shapes: 1.573T without the MTP layer, 1.599T with it).
DEEPSEEK_V4_MODELS: list[ModelSpec] = [
    _deepseek_v4("deepseek-v4-flash", "deepseek-ai/DeepSeek-V4-Flash", 43, 4096, 64, 1024, 8, 256, 2048, 21, 20,
                 512, 284.0, 13.0, ("nvidia/DeepSeek-V4-Flash-NVFP4", "sgl-project/DeepSeek-V4-Flash-FP8",
                                    "deepseek-ai/DeepSeek-V4-Flash-Base")),
    _deepseek_v4("deepseek-v4-pro", "deepseek-ai/DeepSeek-V4-Pro", 61, 7168, 128, 1536, 16, 384, 3072, 30, 31,
                 1024, 1600.0, 49.0, ("nvidia/DeepSeek-V4-Pro-NVFP4", "sgl-project/DeepSeek-V4-Pro-FP8",
                                      "deepseek-ai/DeepSeek-V4-Pro-Base")),
]


# Kimi-K3's MoonViT-V2 tower and projector, loaded but idle in text-only serving, from its
# vision_config: a 14 x 14 patch conv (602,112), a 64 x 64 position grid (4,194,304), 27
# layers of 14,682,112 (q, k, v 1,024 -> 1,536, o back, a 4,096-wide two-matrix MLP, two
# RMSNorms), a final norm (1,024), and the 4,096 -> 4,096 -> 7,168 merger with its norm
# (46,144,512). The card's 401M is the tower alone.
KIMI_K3_VISION_PARAMS = 602_112 + 4_194_304 + 27 * 14_682_112 + 1_024 + 46_144_512

MOE_MODELS: list[ModelSpec] = [
    # DeepSeek-V2 (and V2.5, the same file's shapes): MLA of 128 heads on a 1,536-wide q
    # latent and a 512 + 64 KV latent; layer 0 dense (12,288), then 160 experts of 1,536
    # (top-6) and 2 shared. The V2 report: 236B total, 21B activated.
    ModelSpec(name="deepseek-v2", hf_id="deepseek-ai/DeepSeek-V2", num_layers=60, hidden_size=5120, num_heads=128,
              num_kv_heads=128, head_dim=128, ffn_size=12288, gated_mlp=True, vocab_size=102400,
              max_position_embeddings=163840, num_experts=160, experts_per_token=6, moe_ffn_size=1536,
              num_shared_experts=2, first_dense_layers=1, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64,
              v_head_dim=128, published_params_b=236.0, published_active_params_b=21.0,
              aliases=("deepseek-ai/DeepSeek-V2-Chat", "deepseek-ai/DeepSeek-V2.5", "deepseek-ai/DeepSeek-V2.5-1210",
                       "deepseek-v2.5")),
    # GLM-4.7-Flash (model_type glm4_moe_lite; aiconfigurator-core's copy of its config):
    # MLA of 20 heads (192 + 64 query/key, 256 value) on a 768-wide q latent; layer 0 dense
    # (10,240), then 64 experts of 1,536 (top-4) and one shared. The card's 30B-A3B gives no
    # activated count beyond the tag: these shapes activate 3.27B without the embeddings.
    ModelSpec(name="glm-4.7-flash", hf_id="zai-org/GLM-4.7-Flash", num_layers=47, hidden_size=2048, num_heads=20,
              num_kv_heads=20, head_dim=192, ffn_size=10240, gated_mlp=True, vocab_size=154880,
              max_position_embeddings=202752, num_experts=64, experts_per_token=4, moe_ffn_size=1536,
              num_shared_experts=1, first_dense_layers=1, kv_lora_rank=512, q_lora_rank=768, qk_rope_head_dim=64,
              v_head_dim=256, published_params_b=30.0),
    # Qwen2-57B-A14B (qwen2_moe): every layer 64 experts of 2,560 (top-8) plus a 20,480-wide
    # shared expert (8 expert widths) behind a sigmoid gate; q/k/v biases.
    ModelSpec(name="qwen2-57b-a14b", hf_id="Qwen/Qwen2-57B-A14B", num_layers=28, hidden_size=3584, num_heads=28,
              num_kv_heads=4, head_dim=128, ffn_size=18944, gated_mlp=True, vocab_size=151936,
              max_position_embeddings=131072, qkv_bias=True, num_experts=64, experts_per_token=8, moe_ffn_size=2560,
              num_shared_experts=8, shared_expert_gate=True, moe_routing=moe_routing_for("qwen2_moe"),
              published_params_b=57.4, published_active_params_b=14.0),
    # Hunyuan-A13B: every layer 64 experts of 3,072 (top-8) plus one shared; per-head q/k
    # norms; tied 128,167-token vocabulary. The card: 80B total, 13B activated.
    ModelSpec(name="hunyuan-a13b", hf_id="tencent/Hunyuan-A13B-Instruct", num_layers=32, hidden_size=4096,
              num_heads=32, num_kv_heads=8, head_dim=128, ffn_size=3072, gated_mlp=True, vocab_size=128167,
              tied_embeddings=True, max_position_embeddings=32768, qk_norm=True, num_experts=64, experts_per_token=8,
              moe_ffn_size=3072, num_shared_experts=1, published_params_b=80.0, published_active_params_b=13.0),
    # ERNIE-4.5-21B-A3B (ernie4_5_moe): layer 0 dense (12,288), then 64 experts of 1,536
    # (top-6) and 2 shared; tied vocabulary. 21.8B in all.
    ModelSpec(name="ernie-4.5-21b-a3b", hf_id="baidu/ERNIE-4.5-21B-A3B-PT", num_layers=28, hidden_size=2560,
              num_heads=20, num_kv_heads=4, head_dim=128, ffn_size=12288, gated_mlp=True, vocab_size=103424,
              tied_embeddings=True, max_position_embeddings=131072, num_experts=64, experts_per_token=6,
              moe_ffn_size=1536, num_shared_experts=2, first_dense_layers=1, published_params_b=21.8,
              published_active_params_b=3.0, aliases=("baidu/ERNIE-4.5-21B-A3B-Base-PT",)),
    # OLMoE-1B-7B-0924: every layer 64 experts of 1,024 (top-8); one RMSNorm over all of q
    # and one over all of k. 6.92B total, 1.28B active.
    ModelSpec(name="olmoe-1b-7b", hf_id="allenai/OLMoE-1B-7B-0924", num_layers=16, hidden_size=2048, num_heads=16,
              num_kv_heads=16, head_dim=128, ffn_size=1024, gated_mlp=True, vocab_size=50304,
              max_position_embeddings=4096, qk_norm_spans_heads=True, num_experts=64, experts_per_token=8,
              moe_ffn_size=1024, published_params_b=6.92, published_active_params_b=1.28,
              aliases=("allenai/OLMoE-1B-7B-0924-Instruct",)),
    # Granite 4.0-H-Small (granitemoehybrid): 36 Mamba2 and 4 attention (NoPE) mixers, each
    # followed by 72 SwiGLU experts of 768 (top-10) and a 1,536-wide shared expert; Mamba2 of
    # 128 heads of 64, one B/C group of state 128, conv 4; tied vocabulary. IBM's card: 32B
    # total, 9B active (32,188,252,160 and 8,784,035,840 counted from the checkpoint).
    ModelSpec(name="granite-4.0-h-small", hf_id="ibm-granite/granite-4.0-h-small", num_layers=40, hidden_size=4096,
              num_heads=32, num_kv_heads=8, head_dim=128, ffn_size=768, gated_mlp=True, vocab_size=100352,
              tied_embeddings=True, max_position_embeddings=131072, num_experts=72, experts_per_token=10,
              moe_ffn_size=768, num_shared_experts=2, linear_kind="mamba2", linear_layers=36,
              linear_num_key_heads=1, linear_key_head_dim=128, linear_num_value_heads=128, linear_value_head_dim=64,
              linear_conv_kernel=4, published_params_b=32.19, published_active_params_b=8.78,
              aliases=("ibm-granite/granite-4.0-h-small-base",)),
    # MiMo-V2-Flash (mimo_v2_flash; aiconfigurator-core 0.12's copy of its config.json): 39
    # sliding-window layers (128 tokens, 8 KV heads) and 9 full-attention layers (4 KV heads),
    # 64 query heads throughout, 192-wide queries and keys and 128-wide values; layer 0 dense
    # (16,384), then 256 experts of 2,048 (top-8), no shared expert. Released in block FP8.
    # Xiaomi's card: 309B total, 15B active (the three MTP layers, idle in plain serving, aside).
    ModelSpec(name="mimo-v2-flash", hf_id="XiaomiMiMo/MiMo-V2-Flash", num_layers=48, hidden_size=4096,
              num_heads=64, num_kv_heads=8, head_dim=192, v_head_dim=128, ffn_size=16384, gated_mlp=True,
              vocab_size=152576, max_position_embeddings=262144, sliding_window=128, sliding_layers=39,
              global_num_heads=64, global_num_kv_heads=4, global_head_dim=192, num_experts=256,
              experts_per_token=8, moe_ffn_size=2048, first_dense_layers=1, native_fp8=True, released_in_fp8=True,
              published_params_b=309.0, published_active_params_b=15.0,
              aliases=("XiaomiMiMo/MiMo-V2-Flash-Base",)),
    # Step-3.5-Flash (step3p5; vLLM's step3p5.py reads these keys, NVIDIA Megatron-Bridge's
    # step35 bridge and the model's rendered config give the values): 45 layers, every fourth
    # from the first full attention (64 query heads), the 33 others a 512-token window with 96
    # query heads (attention_other_setting), 8 KV heads of 128 throughout; a sigmoid gate per
    # head on the output (g_proj), per-head q/k norms; layers 0-2 dense (11,264), then 288
    # experts of 1,280 (top-8) and one shared. StepFun's card: 196.81B, ~11B active; the three
    # MTP layers (0.81B each) are not counted.
    ModelSpec(name="step-3.5-flash", hf_id="stepfun-ai/Step-3.5-Flash", num_layers=45, hidden_size=4096,
              num_heads=96, num_kv_heads=8, head_dim=128, ffn_size=11264, gated_mlp=True, vocab_size=128896,
              max_position_embeddings=262144, qk_norm=True, attn_head_gate=True, sliding_window=512,
              sliding_layers=33, global_num_heads=64, global_num_kv_heads=8, global_head_dim=128, num_experts=288,
              experts_per_token=8, moe_ffn_size=1280, num_shared_experts=1, first_dense_layers=3,
              published_params_b=196.81, published_active_params_b=11.0, aliases=("stepfun-ai/Step-3.5-Flash-FP8",)),
    # MiniMax-M3 (minimax_m3; aiconfigurator-core 0.12's copy of its config.json, the sparse
    # attention as vLLM's minimax_m3 model and transformers' modular_minimax_m3_vl read it): 60
    # layers of GQA (64 query heads, 4 KV heads of 128, per-head q/k norms); layers 0-2 dense
    # attention and a dense MLP (12,288), layers 3-59 block-sparse attention (an indexer of 4
    # heads of 128 and one key head picks 16 blocks of 128 tokens per query) and 128 experts of
    # 3,072 (top-4) with one shared. The Hub's tensor count: 427.0B, with a vision tower these
    # text shapes leave out (~0.8B); the MTP modules are not counted.
    ModelSpec(name="minimax-m3", hf_id="MiniMaxAI/MiniMax-M3", num_layers=60, hidden_size=6144, num_heads=64,
              num_kv_heads=4, head_dim=128, ffn_size=12288, gated_mlp=True, vocab_size=200064,
              max_position_embeddings=1048576, qk_norm=True, num_experts=128, experts_per_token=4,
              moe_ffn_size=3072, num_shared_experts=1, first_dense_layers=3, index_n_heads=4, index_head_dim=128,
              index_topk=2048, sparse_block_size=128, indexer_layers=57, published_params_b=427.0,
              published_active_params_b=23.0, aliases=("nvidia/MiniMax-M3-NVFP4",)),
    # Kimi-K3 (kimi_k3 wrapping a kimi_linear text tower; aiconfigurator-core 0.12's copy of its
    # config.json, the layers as vLLM's kimi_k3 model builds them): 93 layers, 69 of Kimi Delta
    # Attention (96 heads of 128, conv 4, fp32 state) and 24 of MLA (96 heads, q latent 1,536,
    # KV latent 512 + 64, values 128) with a sigmoid output gate (g_proj, hidden -> 96 x 128);
    # layer 0 dense (33,792), then 896 experts of 3,072 (top-16) computed on a 3,584-wide latent
    # (down and up projections around them) plus two shared experts on the hidden state. The
    # routed experts ship in MXFP4 (an E8M0 scale per 32), all else 16-bit. Moonshot's report:
    # 2.78T in all, 104.2B activated (the lm_head counted, the input embedding not).
    ModelSpec(name="kimi-k3", hf_id="moonshotai/Kimi-K3", num_layers=93, hidden_size=7168, num_heads=96,
              num_kv_heads=96, head_dim=128, ffn_size=33792, gated_mlp=True, vocab_size=163840,
              max_position_embeddings=1048576, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64,
              v_head_dim=128, attn_output_gate=True, num_experts=896, experts_per_token=16, moe_ffn_size=3072,
              num_shared_experts=2, first_dense_layers=1, moe_latent_size=3584, linear_kind="kda",
              linear_layers=69, linear_num_key_heads=96, linear_num_value_heads=96, linear_key_head_dim=128,
              linear_value_head_dim=128, linear_conv_kernel=4, linear_ssm_bytes=4.0, native_expert_dtype="fp4",
              native_expert_bits=4.25, encoder_params=KIMI_K3_VISION_PARAMS, published_params_b=2780.0,
              published_active_params_b=104.2),
]

# Step-3.7-Flash's perception encoder, loaded but idle in text-only serving: the model card's
# 1.8B (198B in all on the 196B language backbone, which is Step-3.5-Flash's).
STEP37_VISION_PARAMS = 1_800_000_000


def step37_flash(catalog: dict[str, ModelSpec]) -> ModelSpec:
    """Step-3.7-Flash: Step-3.5-Flash's text shapes under a vision-language wrapper."""
    return catalog["step-3.5-flash"].model_copy(update={
        "name": "step-3.7-flash", "hf_id": "stepfun-ai/Step-3.7-Flash", "encoder_params": STEP37_VISION_PARAMS,
        "published_params_b": 198.0, "aliases": ("stepfun-ai/Step-3.7-Flash-FP8", "stepfun-ai/Step-3.7-Flash-NVFP4")})


# Gemma 4 (gemma4_text; google/gemma-4-26B-A4B's and nvidia/Gemma-4-31B-IT-NVFP4's config.json
# as carried by aiconfigurator-core 0.12): five sliding-window (1,024) layers of 256-wide heads
# to each full-attention layer of 512-wide heads, whose V comes from the K projection
# (attention_k_eq_v; vLLM still caches V, normalised apart from K, so the cache holds both);
# per-head q/k norms, GeGLU, a tied 262,144 vocabulary. The 26B-A4B runs 128 experts of 704
# (top-8) beside each layer's 2,112-wide dense MLP (three expert widths). Google's sizes:
# 30.7B, and 25.2B with 3.8B active, which these text shapes give; the vision tower, loaded
# but idle in text-only serving, is not counted.
GEMMA4_MODELS: list[ModelSpec] = [
    ModelSpec(name="gemma-4-31b", hf_id="google/gemma-4-31B", num_layers=60, hidden_size=5376, num_heads=32,
              num_kv_heads=16, head_dim=256, ffn_size=21504, gated_mlp=True, vocab_size=262144, tied_embeddings=True,
              max_position_embeddings=262144, qk_norm=True, sliding_window=1024, sliding_layers=50,
              global_num_kv_heads=4, global_head_dim=512, global_k_eq_v=True, published_params_b=30.7,
              aliases=("nvidia/Gemma-4-31B-IT-NVFP4",)),
    ModelSpec(name="gemma-4-26b-a4b", hf_id="google/gemma-4-26B-A4B", num_layers=30, hidden_size=2816,
              num_heads=16, num_kv_heads=8, head_dim=256, ffn_size=2112, gated_mlp=True, vocab_size=262144,
              tied_embeddings=True, max_position_embeddings=262144, qk_norm=True, sliding_window=1024,
              sliding_layers=25, global_num_kv_heads=2, global_head_dim=512, global_k_eq_v=True, num_experts=128,
              experts_per_token=8, moe_ffn_size=704, num_shared_experts=3, published_params_b=25.2,
              published_active_params_b=3.8, aliases=("nvidia/Gemma-4-26B-A4B-NVFP4",)),
]
