"""The model catalog: each entry copies a published config.json (shapes), and `param_count`
is checked against the published size in the tests. Names and Hugging Face ids resolve to
their entry, as do instruct, chat, quantised and dated re-releases of the same shapes."""

from __future__ import annotations

import re

from simulator.catalog import AliasIndex
from simulator.models.catalog_classic import CLASSIC_MODELS, llama_lineage
from simulator.models.catalog_extra import (
    DEEPSEEK_V4_MODELS,
    DENSE_MODELS,
    GEMMA4_MODELS,
    MOE_MODELS,
    step37_flash,
    vision_language_models,
)
from simulator.models.spec import ModelSpec, moe_routing_for

# Catalog. Shapes copied from each model's config.json on the Hugging Face Hub.
# Gemma 3's SigLIP vision encoder, 4B-27B (Gemma 3 technical report, Table 1: 417M).
GEMMA3_VISION_PARAMS = 417_000_000

_MODELS: list[ModelSpec] = [
    # https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json
    ModelSpec(
        name="llama-3.1-8b",
        hf_id="meta-llama/Llama-3.1-8B",
        num_layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=14336,
        gated_mlp=True,
        vocab_size=128256,
        max_position_embeddings=131072,
        published_params_b=8.03,  # model card: 8.03B
        aliases=("meta-llama/Meta-Llama-3.1-8B",),
    ),
    # https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json
    ModelSpec(
        name="llama-3.1-70b",
        hf_id="meta-llama/Llama-3.1-70B",
        num_layers=80,
        hidden_size=8192,
        num_heads=64,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=28672,
        gated_mlp=True,
        vocab_size=128256,
        max_position_embeddings=131072,
        published_params_b=70.6,  # model card: 70.6B
        # Llama 3.3 70B reuses the 3.1 70B architecture unchanged (same config.json shapes).
        aliases=("meta-llama/Meta-Llama-3.1-70B", "meta-llama/Llama-3.3-70B", "llama-3.3-70b"),
    ),
    # https://huggingface.co/meta-llama/Llama-3.1-405B/blob/main/config.json
    ModelSpec(
        name="llama-3.1-405b",
        hf_id="meta-llama/Llama-3.1-405B",
        num_layers=126,
        hidden_size=16384,
        num_heads=128,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=53248,
        gated_mlp=True,
        vocab_size=128256,
        max_position_embeddings=131072,
        published_params_b=405.9,  # model card: 405B (405.9B counted)
        aliases=("meta-llama/Meta-Llama-3.1-405B",),
    ),
    # https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json
    ModelSpec(
        name="llama-2-7b",
        hf_id="meta-llama/Llama-2-7b-hf",
        num_layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=32,
        head_dim=128,
        ffn_size=11008,
        gated_mlp=True,
        vocab_size=32000,
        max_position_embeddings=4096,
        published_params_b=6.74,  # HF parameter count 6.74B
    ),
    # https://huggingface.co/meta-llama/Llama-2-13b-hf/blob/main/config.json
    ModelSpec(
        name="llama-2-13b",
        hf_id="meta-llama/Llama-2-13b-hf",
        num_layers=40,
        hidden_size=5120,
        num_heads=40,
        num_kv_heads=40,
        head_dim=128,
        ffn_size=13824,
        gated_mlp=True,
        vocab_size=32000,
        max_position_embeddings=4096,
        published_params_b=13.0,  # HF parameter count 13.0B
    ),
    # https://huggingface.co/meta-llama/Llama-2-70b-hf/blob/main/config.json
    ModelSpec(
        name="llama-2-70b",
        hf_id="meta-llama/Llama-2-70b-hf",
        num_layers=80,
        hidden_size=8192,
        num_heads=64,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=28672,
        gated_mlp=True,
        vocab_size=32000,
        max_position_embeddings=4096,
        published_params_b=69.0,  # HF parameter count 69.0B
    ),
    # https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json
    ModelSpec(
        name="qwen3-8b",
        native_fp8=True,
        hf_id="Qwen/Qwen3-8B",
        num_layers=36,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=12288,
        gated_mlp=True,
        vocab_size=151936,
        max_position_embeddings=40960,
        qk_norm=True,
        published_params_b=8.19,  # model card: 8.2B (HF count 8.19B)
    ),
    # https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json (64 x 128 != 5120: allowed)
    ModelSpec(
        name="qwen3-32b",
        native_fp8=True,
        hf_id="Qwen/Qwen3-32B",
        num_layers=64,
        hidden_size=5120,
        num_heads=64,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=25600,
        gated_mlp=True,
        vocab_size=151936,
        max_position_embeddings=40960,
        qk_norm=True,
        published_params_b=32.8,  # model card: 32.8B
    ),
    # https://huggingface.co/mistralai/Mistral-7B-v0.3/blob/main/config.json
    # v0.3 shapes (vocab 32768); v0.1/v0.2 are their own entries below (vocab 32000).
    ModelSpec(
        name="mistral-7b",
        hf_id="mistralai/Mistral-7B-v0.3",
        num_layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=14336,
        gated_mlp=True,
        vocab_size=32768,
        max_position_embeddings=32768,
        published_params_b=7.25,  # HF parameter count 7.25B
        aliases=("mistral-7b-v0.3",),
    ),
    # https://huggingface.co/facebook/opt-13b/blob/main/config.json
    # ReLU fc1/fc2 MLP, biases everywhere, pre-LayerNorm, learned positions, tied lm head.
    ModelSpec(
        name="opt-13b",
        hf_id="facebook/opt-13b",
        num_layers=40,
        hidden_size=5120,
        num_heads=40,
        num_kv_heads=40,
        head_dim=128,
        ffn_size=20480,
        gated_mlp=False,
        vocab_size=50272,
        tied_embeddings=True,
        max_position_embeddings=2048,
        attention_bias=True,
        mlp_bias=True,
        norm="layernorm",
        learned_pos_embeddings=True,
        published_params_b=12.85,  # HF parameter count 12.85B
    ),
    # https://huggingface.co/codellama/CodeLlama-34b-hf/blob/main/config.json
    ModelSpec(
        name="codellama-34b",
        hf_id="codellama/CodeLlama-34b-hf",
        num_layers=48,
        hidden_size=8192,
        num_heads=64,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=22016,
        gated_mlp=True,
        vocab_size=32000,
        max_position_embeddings=16384,
        published_params_b=33.7,  # HF parameter count 33.7B
        aliases=("meta-llama/CodeLlama-34b-hf",),
    ),
    # https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json
    ModelSpec(
        name="llama-3.2-1b",
        hf_id="meta-llama/Llama-3.2-1B",
        num_layers=16,
        hidden_size=2048,
        num_heads=32,
        num_kv_heads=8,
        head_dim=64,
        ffn_size=8192,
        gated_mlp=True,
        vocab_size=128256,
        tied_embeddings=True,
        max_position_embeddings=131072,
        published_params_b=1.23,  # model card: 1.23B
    ),
    # https://huggingface.co/meta-llama/Llama-3.2-3B/blob/main/config.json
    ModelSpec(
        name="llama-3.2-3b",
        hf_id="meta-llama/Llama-3.2-3B",
        num_layers=28,
        hidden_size=3072,
        num_heads=24,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=8192,
        gated_mlp=True,
        vocab_size=128256,
        tied_embeddings=True,
        max_position_embeddings=131072,
        published_params_b=3.21,  # model card: 3.21B
    ),
    # https://huggingface.co/Qwen/Qwen3-0.6B/blob/main/config.json
    ModelSpec(
        name="qwen3-0.6b",
        native_fp8=True,
        hf_id="Qwen/Qwen3-0.6B",
        num_layers=28,
        hidden_size=1024,
        num_heads=16,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=3072,
        gated_mlp=True,
        vocab_size=151936,
        tied_embeddings=True,
        max_position_embeddings=40960,
        qk_norm=True,
        published_params_b=0.6,  # model card: 0.6B
    ),
    # https://huggingface.co/Qwen/Qwen3-1.7B/blob/main/config.json
    ModelSpec(
        name="qwen3-1.7b",
        native_fp8=True,
        hf_id="Qwen/Qwen3-1.7B",
        num_layers=28,
        hidden_size=2048,
        num_heads=16,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=6144,
        gated_mlp=True,
        vocab_size=151936,
        tied_embeddings=True,
        max_position_embeddings=40960,
        qk_norm=True,
        published_params_b=1.7,  # model card: 1.7B
    ),
    # https://huggingface.co/Qwen/Qwen3-4B/blob/main/config.json
    ModelSpec(
        name="qwen3-4b",
        native_fp8=True,
        hf_id="Qwen/Qwen3-4B",
        num_layers=36,
        hidden_size=2560,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=9728,
        gated_mlp=True,
        vocab_size=151936,
        tied_embeddings=True,
        max_position_embeddings=40960,
        qk_norm=True,
        published_params_b=4.0,  # model card: 4.0B
    ),
    # https://huggingface.co/Qwen/Qwen3-14B/blob/main/config.json
    ModelSpec(
        name="qwen3-14b",
        native_fp8=True,
        hf_id="Qwen/Qwen3-14B",
        num_layers=40,
        hidden_size=5120,
        num_heads=40,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=17408,
        gated_mlp=True,
        vocab_size=151936,
        max_position_embeddings=40960,
        qk_norm=True,
        published_params_b=14.8,  # model card: 14.8B
    ),
    # XiaomiMiMo/MiMo-7B-Base's config.json (model_type mimo, as carried by aiconfigurator-core
    # 0.12): Qwen2's layer (biases on q, k and v only; vLLM's MiMo subclasses its Qwen2 model)
    # at 36 layers of 4,096, 32 query and 8 KV heads, a 151,680 vocabulary, untied. Hugging
    # Face lists 7.83B, which counts the one MTP layer (a decoder layer and its 8,192 -> 4,096
    # projection: 0.21B at these shapes) that serving without speculative decoding never
    # loads; the figure below is that total without it. The SFT and RL releases keep the shapes.
    ModelSpec(
        name="mimo-7b",
        hf_id="XiaomiMiMo/MiMo-7B-Base",
        num_layers=36,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=11008,
        gated_mlp=True,
        vocab_size=151680,
        max_position_embeddings=32768,
        qkv_bias=True,
        published_params_b=7.62,  # 7.83B on Hugging Face less the 0.21B MTP layer
        aliases=("XiaomiMiMo/MiMo-7B-RL", "XiaomiMiMo/MiMo-7B-SFT", "XiaomiMiMo/MiMo-7B-RL-Zero"),
    ),
    # https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json (bias on q, k, v only)
    ModelSpec(
        name="qwen2.5-7b",
        hf_id="Qwen/Qwen2.5-7B",
        num_layers=28,
        hidden_size=3584,
        num_heads=28,
        num_kv_heads=4,
        head_dim=128,
        ffn_size=18944,
        gated_mlp=True,
        vocab_size=152064,
        max_position_embeddings=131072,
        qkv_bias=True,
        published_params_b=7.61,  # model card: 7.61B
    ),
    # https://huggingface.co/Qwen/Qwen2.5-14B/blob/main/config.json (bias on q, k, v only)
    ModelSpec(
        name="qwen2.5-14b",
        hf_id="Qwen/Qwen2.5-14B",
        num_layers=48,
        hidden_size=5120,
        num_heads=40,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=13824,
        gated_mlp=True,
        vocab_size=152064,
        max_position_embeddings=131072,
        qkv_bias=True,
        published_params_b=14.7,  # model card: 14.7B
    ),
    # https://huggingface.co/Qwen/Qwen2.5-32B/blob/main/config.json (bias on q, k, v only)
    ModelSpec(
        name="qwen2.5-32b",
        hf_id="Qwen/Qwen2.5-32B",
        num_layers=64,
        hidden_size=5120,
        num_heads=40,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=27648,
        gated_mlp=True,
        vocab_size=152064,
        max_position_embeddings=131072,
        qkv_bias=True,
        published_params_b=32.5,  # model card: 32.5B
        # QwQ-32B's config.json has the same shapes (64 layers, 5120 hidden, 40/8 heads,
        # 27648 MLP, 152064 vocabulary); only its context length differs.
        aliases=("Qwen/QwQ-32B",),
    ),
    # https://huggingface.co/Qwen/Qwen2.5-72B/blob/main/config.json (bias on q, k, v only)
    ModelSpec(
        name="qwen2.5-72b",
        hf_id="Qwen/Qwen2.5-72B",
        num_layers=80,
        hidden_size=8192,
        num_heads=64,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=29568,
        gated_mlp=True,
        vocab_size=152064,
        max_position_embeddings=131072,
        qkv_bias=True,
        published_params_b=72.7,  # model card: 72.7B
    ),
    # https://huggingface.co/mistralai/Mistral-Small-24B-Base-2501/blob/main/config.json
    ModelSpec(
        name="mistral-small-24b",
        hf_id="mistralai/Mistral-Small-24B-Base-2501",
        num_layers=40,
        hidden_size=5120,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=32768,
        gated_mlp=True,
        vocab_size=131072,
        max_position_embeddings=32768,
        published_params_b=23.6,  # HF parameter count 23.6B
        # Mistral-Small-3.1/3.2-24B-Instruct's text_config has these shapes; their vision
        # encoder is not modelled (text-only requests do not run it).
        aliases=("mistralai/Mistral-Small-3.1-24B-Instruct-2503", "mistralai/Mistral-Small-3.2-24B-Instruct-2506"),
    ),
    # https://huggingface.co/mistralai/Mistral-Nemo-Base-2407/blob/main/config.json
    ModelSpec(
        name="mistral-nemo-12b",
        hf_id="mistralai/Mistral-Nemo-Base-2407",
        num_layers=40,
        hidden_size=5120,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=14336,
        gated_mlp=True,
        vocab_size=131072,
        max_position_embeddings=1024000,
        published_params_b=12.2,  # HF parameter count 12.2B
    ),
    # --- mixture of experts (every layer's MLP is routed; no shared experts) ---
    # https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json
    ModelSpec(
        name="qwen3-30b-a3b",
        native_fp8=True,
        hf_id="Qwen/Qwen3-30B-A3B",
        num_layers=48,
        hidden_size=2048,
        num_heads=32,
        num_kv_heads=4,
        head_dim=128,
        ffn_size=6144,  # dense width in config.json; unused, every layer is MoE
        gated_mlp=True,
        vocab_size=151936,
        max_position_embeddings=40960,
        qk_norm=True,
        num_experts=128,
        experts_per_token=8,
        moe_routing=moe_routing_for("qwen3_moe"),
        moe_ffn_size=768,
        published_params_b=30.5,  # model card: 30.5B total, 3.3B activated
        published_active_params_b=3.3,
    ),
    # https://huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json
    ModelSpec(
        name="qwen3-235b-a22b",
        native_fp8=True,
        hf_id="Qwen/Qwen3-235B-A22B",
        num_layers=94,
        hidden_size=4096,
        num_heads=64,
        num_kv_heads=4,
        head_dim=128,
        ffn_size=12288,  # unused, every layer is MoE
        gated_mlp=True,
        vocab_size=151936,
        max_position_embeddings=40960,
        qk_norm=True,
        num_experts=128,
        experts_per_token=8,
        moe_routing=moe_routing_for("qwen3_moe"),
        moe_ffn_size=1536,
        published_params_b=235.0,  # model card: 235B total, 22B activated
        published_active_params_b=22.0,
    ),
    # https://huggingface.co/Qwen/Qwen3-Coder-480B-A35B-Instruct/blob/main/config.json
    ModelSpec(
        name="qwen3-coder-480b-a35b",
        native_fp8=True,
        hf_id="Qwen/Qwen3-Coder-480B-A35B-Instruct",
        num_layers=62,
        hidden_size=6144,
        num_heads=96,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=8192,  # unused, every layer is MoE
        gated_mlp=True,
        vocab_size=151936,
        max_position_embeddings=262144,
        qk_norm=True,
        num_experts=160,
        experts_per_token=8,
        moe_routing=moe_routing_for("qwen3_moe"),
        moe_ffn_size=2560,
        published_params_b=480.0,  # model card: 480B total, 35B activated
        published_active_params_b=35.0,
        aliases=("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8",),
    ),
    # https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json
    ModelSpec(
        name="mixtral-8x7b",
        hf_id="mistralai/Mixtral-8x7B-v0.1",
        num_layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=14336,  # unused, every layer is MoE
        gated_mlp=True,
        vocab_size=32000,
        max_position_embeddings=32768,
        num_experts=8,
        experts_per_token=2,
        moe_routing=moe_routing_for("mixtral"),
        moe_ffn_size=14336,
        published_params_b=46.7,  # Mistral AI: 46.7B total, 12.9B active per token
        published_active_params_b=12.9,
        aliases=("mistralai/Mixtral-8x7B-Instruct-v0.1",),
    ),
    # https://huggingface.co/mistralai/Mixtral-8x22B-v0.1/blob/main/config.json
    ModelSpec(
        name="mixtral-8x22b",
        hf_id="mistralai/Mixtral-8x22B-v0.1",
        num_layers=56,
        hidden_size=6144,
        num_heads=48,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=16384,  # unused, every layer is MoE
        gated_mlp=True,
        vocab_size=32000,
        max_position_embeddings=65536,
        num_experts=8,
        experts_per_token=2,
        moe_routing=moe_routing_for("mixtral"),
        moe_ffn_size=16384,
        published_params_b=141.0,  # Mistral AI: 141B total, 39B active per token
        published_active_params_b=39.0,
        aliases=("mistralai/Mixtral-8x22B-Instruct-v0.1",),
    ),
    # https://huggingface.co/MiniMaxAI/MiniMax-M2/blob/main/config.json (M2.1/M2.5/M2.7 keep the
    # architecture). Its per-layer q/k RMSNorm weights (~0.5M params) are not counted.
    ModelSpec(
        name="minimax-m2",
        native_fp8=True,
        released_in_fp8=True,
        nvfp4_experts_only=True,
        qk_norm_spans_heads=True,
        hf_id="MiniMaxAI/MiniMax-M2",
        num_layers=62,
        hidden_size=3072,
        num_heads=48,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=1536,  # unused, every layer is MoE
        gated_mlp=True,
        vocab_size=200064,
        max_position_embeddings=196608,
        num_experts=256,
        experts_per_token=8,
        moe_routing=moe_routing_for("minimax_m2"),
        moe_ffn_size=1536,
        published_params_b=230.0,  # model card: 230B total, 10B activated
        published_active_params_b=10.0,
        aliases=("MiniMaxAI/MiniMax-M2.1", "MiniMaxAI/MiniMax-M2.5", "MiniMaxAI/MiniMax-M2.7"),
    ),
    # https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json: layer_types
    # alternate sliding_attention (window 128) and full_attention; experts carry biases; the
    # checkpoint stores the experts in MXFP4 and everything else in bf16. Its per-head
    # attention-sink logits (64 per layer) are not counted.
    ModelSpec(
        name="gpt-oss-120b",
        hf_id="openai/gpt-oss-120b",
        num_layers=36,
        hidden_size=2880,
        num_heads=64,
        num_kv_heads=8,
        head_dim=64,
        ffn_size=2880,  # unused, every layer is MoE
        gated_mlp=True,
        vocab_size=201088,
        max_position_embeddings=131072,
        attention_bias=True,
        mlp_bias=True,
        num_experts=128,
        experts_per_token=4,
        moe_routing=moe_routing_for("gpt_oss"),
        moe_ffn_size=2880,
        sliding_window=128,
        sliding_layers=18,
        native_expert_dtype="fp4",
        native_expert_bits=4.25,
        published_params_b=116.83,  # model card: 116.83B total, 5.13B active (w/o embedding)
        published_active_params_b=5.13,
    ),
    # https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json
    ModelSpec(
        name="gpt-oss-20b",
        hf_id="openai/gpt-oss-20b",
        num_layers=24,
        hidden_size=2880,
        num_heads=64,
        num_kv_heads=8,
        head_dim=64,
        ffn_size=2880,
        gated_mlp=True,
        vocab_size=201088,
        max_position_embeddings=131072,
        attention_bias=True,
        mlp_bias=True,
        num_experts=32,
        experts_per_token=4,
        moe_routing=moe_routing_for("gpt_oss"),
        moe_ffn_size=2880,
        sliding_window=128,
        sliding_layers=12,
        native_expert_dtype="fp4",
        published_params_b=20.91,  # model card: 20.91B total, 3.61B active
        published_active_params_b=3.61,
    ),
    # --- hybrid linear attention (Gated DeltaNet) ---
    # https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct/blob/main/config.json: 48 layers,
    # full_attention_interval 4 (36 Gated DeltaNet layers, 12 gated attention), 16 q / 2 KV
    # heads of 256 with attn_output_gate, linear 16 key / 32 value heads of 128, conv kernel
    # 4, 512 experts x 512 (top-10) plus a 512-wide shared expert with a sigmoid gate,
    # decoder_sparse_step 1, no mlp_only_layers. The shapes count 79,674,391,296 parameters
    # and 3,874,929,408 activated, the figures Qwen3-Coder-Next's tensors give without the
    # multi-token-prediction layer (unused when serving); Thinking and Coder-Next keep the shapes.
    ModelSpec(
        name="qwen3-next-80b-a3b",
        hf_id="Qwen/Qwen3-Next-80B-A3B-Instruct",
        native_fp8=True,
        num_layers=48,
        hidden_size=2048,
        num_heads=16,
        num_kv_heads=2,
        head_dim=256,
        ffn_size=5120,  # unused, every layer is MoE
        gated_mlp=True,
        vocab_size=151936,
        max_position_embeddings=262144,
        qk_norm=True,
        attn_output_gate=True,
        num_experts=512,
        experts_per_token=10,
        moe_ffn_size=512,
        num_shared_experts=1,
        shared_expert_gate=True,
        linear_layers=36,
        linear_num_key_heads=16,
        linear_num_value_heads=32,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel=4,
        # Model card: "80B in total and 3B activated", rounded ("A3B"): 3.87B activated with
        # the embedding and LM head, 3.25B without.
        published_params_b=80.0,
        published_active_params_b=3.25,
        aliases=("Qwen/Qwen3-Next-80B-A3B-Thinking", "Qwen/Qwen3-Coder-Next"),
    ),
    # --- multi-head latent attention (DeepSeek-V3 architecture) ---
    # https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json. R1 and V3.1 keep
    # the shapes. The multi-token-prediction layer (14B, unused when serving) is not counted.
    ModelSpec(
        name="deepseek-v3",
        native_fp8=True,
        released_in_fp8=True,
        hf_id="deepseek-ai/DeepSeek-V3",
        num_layers=61,
        hidden_size=7168,
        num_heads=128,
        num_kv_heads=128,
        head_dim=128,  # qk_nope_head_dim
        ffn_size=18432,  # the first 3 (dense) layers
        gated_mlp=True,
        vocab_size=129280,
        max_position_embeddings=163840,
        num_experts=256,
        experts_per_token=8,
        moe_ffn_size=2048,
        num_shared_experts=1,
        first_dense_layers=3,
        kv_lora_rank=512,
        q_lora_rank=1536,
        qk_rope_head_dim=64,
        v_head_dim=128,
        published_params_b=671.0,  # technical report: 671B total, 37B activated per token
        published_active_params_b=37.0,
        aliases=("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V3-0324",
                 "deepseek-r1", "nvidia/DeepSeek-R1-NVFP4", "nvidia/DeepSeek-V3.1-NVFP4",
                 # NVIDIA's NVFP4 releases of R1-0528 (InferenceX's FP4 sweeps name the V2)
                 "nvidia/DeepSeek-R1-FP4", "nvidia/DeepSeek-R1-0528-FP4", "nvidia/DeepSeek-R1-0528-FP4-V2"),
    ),
    # https://huggingface.co/moonshotai/Kimi-K2-Instruct/blob/main/config.json (DeepSeek-V3
    # architecture, 64 heads, 384 experts, one dense layer). K2-Thinking and K2.5 keep the
    # text model's shapes and ship INT4 (W4A16) routed experts; K2.5's vision tower is not
    # counted. K2.6 and K2.7-Code keep the shapes too (their config.json as carried by
    # aiconfigurator-core 0.12).
    ModelSpec(
        name="kimi-k2",
        native_fp8=True,
        released_in_fp8=True,
        hf_id="moonshotai/Kimi-K2-Instruct",
        num_layers=61,
        hidden_size=7168,
        num_heads=64,
        num_kv_heads=64,
        head_dim=128,
        ffn_size=18432,
        gated_mlp=True,
        vocab_size=163840,
        max_position_embeddings=262144,
        num_experts=384,
        experts_per_token=8,
        moe_ffn_size=2048,
        num_shared_experts=1,
        first_dense_layers=1,
        kv_lora_rank=512,
        q_lora_rank=1536,
        qk_rope_head_dim=64,
        v_head_dim=128,
        native_expert_dtype="int4",
        native_expert_bits=4.5,
        fp8_releases=("moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2-Instruct-0905", "moonshotai/Kimi-K2-Base"),
        nvfp4_experts_only=True,
        published_params_b=1026.0,  # model card: 1T total (1.026T from the shapes), 32B activated
        published_active_params_b=32.0,
        aliases=("moonshotai/Kimi-K2-Thinking", "moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2-Instruct-0905",
                 "moonshotai/Kimi-K2-Base",
                 "kimi-k2.5", "kimi-k2-thinking", "moonshotai/Kimi-K2.6", "moonshotai/Kimi-K2.7-Code"),
    ),
    # --- earlier and widely benchmarked releases ---
    # OPT (https://huggingface.co/facebook/opt-*/blob/main/config.json; Zhang et al. 2022,
    # Table 1). DistServe and vLLM's papers evaluate 13B, 66B and 175B. 175B was released
    # on request, not on the Hub; its shapes are the paper's.
    *[
        ModelSpec(
            name=f"opt-{size}",
            hf_id=None if size == "175b" else f"facebook/opt-{size}",
            aliases=("facebook/opt-175b",) if size == "175b" else (),
            num_layers=layers,
            hidden_size=hidden,
            num_heads=heads,
            num_kv_heads=heads,
            head_dim=hidden // heads,
            ffn_size=4 * hidden,
            gated_mlp=False,
            vocab_size=50272,
            tied_embeddings=True,
            max_position_embeddings=2048,
            attention_bias=True,
            mlp_bias=True,
            norm="layernorm",
            learned_pos_embeddings=True,
            published_params_b=published,
        )
        # (size, layers, hidden, heads, published size in billions: HF counts where the Hub
        # shows one, else the paper's)
        for size, layers, hidden, heads, published in (
            ("125m", 12, 768, 12, 0.125),
            ("1.3b", 24, 2048, 32, 1.32),
            ("2.7b", 32, 2560, 32, 2.65),
            ("6.7b", 32, 4096, 32, 6.66),
            ("30b", 48, 7168, 56, 30.0),
            ("66b", 64, 9216, 72, 66.0),
            ("175b", 96, 12288, 96, 175.0),
        )
    ],
    # https://huggingface.co/Qwen/Qwen2.5-0.5B (and -1.5B, -3B)/blob/main/config.json: bias on
    # q, k, v; tied embeddings; 32K context.
    *[
        ModelSpec(
            name=f"qwen2.5-{size}",
            hf_id=f"Qwen/Qwen2.5-{size.upper()}",
            num_layers=layers,
            hidden_size=hidden,
            num_heads=heads,
            num_kv_heads=2,
            head_dim=hidden // heads,
            ffn_size=ffn,
            gated_mlp=True,
            vocab_size=151936,
            tied_embeddings=True,
            max_position_embeddings=32768,
            qkv_bias=True,
            published_params_b=published,  # model cards: 0.49B, 1.54B, 3.09B
        )
        for size, layers, hidden, heads, ffn, published in (
            ("0.5b", 24, 896, 14, 4864, 0.49),
            ("1.5b", 28, 1536, 12, 8960, 1.54),
            ("3b", 36, 2048, 16, 11008, 3.09),
        )
    ],
    # https://huggingface.co/microsoft/Phi-3-mini-4k-instruct/blob/main/config.json (fused
    # qkv and gate_up projections: the same matrices, stored together)
    ModelSpec(
        name="phi-3-mini",
        hf_id="microsoft/Phi-3-mini-4k-instruct",
        num_layers=32,
        hidden_size=3072,
        num_heads=32,
        num_kv_heads=32,
        head_dim=96,
        ffn_size=8192,
        gated_mlp=True,
        vocab_size=32064,
        max_position_embeddings=4096,
        published_params_b=3.82,  # model card: 3.8B (HF count 3.82B)
        aliases=("phi-3-mini-4k",),
    ),
    # https://huggingface.co/microsoft/Phi-3-medium-4k-instruct/blob/main/config.json
    ModelSpec(
        name="phi-3-medium",
        hf_id="microsoft/Phi-3-medium-4k-instruct",
        num_layers=40,
        hidden_size=5120,
        num_heads=40,
        num_kv_heads=10,
        head_dim=128,
        ffn_size=17920,
        gated_mlp=True,
        vocab_size=32064,
        max_position_embeddings=4096,
        published_params_b=13.96,  # model card: 14B (HF count 13.96B)
        aliases=("phi-3-medium-4k",),
    ),
    # https://huggingface.co/microsoft/phi-4/blob/main/config.json: Phi-3-medium's body, a
    # 100K vocabulary, 16K context.
    ModelSpec(
        name="phi-4",
        hf_id="microsoft/phi-4",
        num_layers=40,
        hidden_size=5120,
        num_heads=40,
        num_kv_heads=10,
        head_dim=128,
        ffn_size=17920,
        gated_mlp=True,
        vocab_size=100352,
        max_position_embeddings=16384,
        published_params_b=14.66,  # model card: 14B (HF count 14.66B)
    ),
    # https://huggingface.co/mistralai/Mistral-Large-Instruct-2407/blob/main/config.json
    # (2411 keeps the shapes)
    ModelSpec(
        name="mistral-large-2",
        hf_id="mistralai/Mistral-Large-Instruct-2407",
        num_layers=88,
        hidden_size=12288,
        num_heads=96,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=28672,
        gated_mlp=True,
        vocab_size=32768,
        max_position_embeddings=131072,
        published_params_b=122.6,  # model card: 123B (HF count 122.6B)
        aliases=("mistral-large", "mistralai/Mistral-Large-Instruct-2411"),
    ),
    # https://huggingface.co/mistralai/Codestral-22B-v0.1/blob/main/config.json
    ModelSpec(
        name="codestral-22b",
        hf_id="mistralai/Codestral-22B-v0.1",
        num_layers=56,
        hidden_size=6144,
        num_heads=48,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=16384,
        gated_mlp=True,
        vocab_size=32768,
        max_position_embeddings=32768,
        published_params_b=22.2,  # model card: 22.2B
    ),
    # https://huggingface.co/01-ai/Yi-34B/blob/main/config.json (Llama architecture)
    ModelSpec(
        name="yi-34b",
        hf_id="01-ai/Yi-34B",
        num_layers=60,
        hidden_size=7168,
        num_heads=56,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=20480,
        gated_mlp=True,
        vocab_size=64000,
        max_position_embeddings=4096,
        published_params_b=34.39,  # model card: 34B (HF count 34.39B)
    ),
    # https://huggingface.co/ibm-granite/granite-3.3-8b-instruct/blob/main/config.json
    # (GraniteForCausalLM: Llama shapes plus scalar multipliers that cost nothing; tied
    # 49,159-token vocabulary)
    ModelSpec(
        name="granite-3.3-8b",
        hf_id="ibm-granite/granite-3.3-8b-instruct",
        num_layers=40,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=12800,
        gated_mlp=True,
        vocab_size=49159,
        tied_embeddings=True,
        max_position_embeddings=131072,
        published_params_b=8.17,  # HF count of granite-3.x-8b: 8.17B
        # 3.1 and 3.2 differ only by four vocabulary rows (49,155): 16k parameters.
        aliases=("ibm-granite/granite-3.3-8b-base", "ibm-granite/granite-3.2-8b-instruct",
                 "ibm-granite/granite-3.1-8b-instruct", "ibm-granite/granite-3.1-8b-base"),
    ),
    # https://huggingface.co/google/gemma-2-{2b,9b,27b}/blob/main/config.json: tied 256K
    # vocabulary, GeGLU MLP (three matrices), every other layer (the even ones) a 4096-token
    # sliding window. Gemma 2's extra post-norms (2 x hidden per layer) are not counted.
    *[
        ModelSpec(
            name=f"gemma-2-{size}",
            hf_id=f"google/gemma-2-{size}",
            num_layers=layers,
            hidden_size=hidden,
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            ffn_size=ffn,
            gated_mlp=True,
            vocab_size=256000,
            tied_embeddings=True,
            max_position_embeddings=8192,
            sliding_window=4096,
            sliding_layers=(layers + 1) // 2,
            published_params_b=published,  # model cards: 2.61B, 9.24B, 27.2B
        )
        for size, layers, hidden, heads, kv_heads, head_dim, ffn, published in (
            ("2b", 26, 2304, 8, 4, 256, 9216, 2.61),
            ("9b", 42, 3584, 16, 8, 256, 14336, 9.24),
            ("27b", 46, 4608, 32, 16, 128, 36864, 27.2),
        )
    ],
    # https://huggingface.co/meta-llama/Llama-4-Scout-17B-16E-Instruct/blob/main/config.json
    # (text_config; as carried by aiconfigurator-core 0.12): every layer MoE with 16 experts,
    # top-1, plus one shared expert; three of every four layers use chunked local attention
    # over 8192-token chunks (the fourth is global, without RoPE). The vision encoder is not
    # counted. The published 10M-token context needs `model.max_model_len` to serve.
    ModelSpec(
        name="llama-4-scout",
        hf_id="meta-llama/Llama-4-Scout-17B-16E",
        num_layers=48,
        hidden_size=5120,
        num_heads=40,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=16384,
        gated_mlp=True,
        vocab_size=202048,
        max_position_embeddings=10485760,
        num_experts=16,
        experts_per_token=1,
        moe_ffn_size=8192,
        num_shared_experts=1,
        sliding_window=8192,
        sliding_layers=36,
        published_params_b=109.0,  # model card: 109B total (107.8B text), 17B active
        published_active_params_b=17.0,
        aliases=("llama-4-scout-17b-16e",),
    ),
    # https://huggingface.co/deepseek-ai/DeepSeek-V2-Lite/blob/main/config.json: MLA without a
    # low-rank query, 64 routed + 2 shared experts, the first layer dense.
    ModelSpec(
        name="deepseek-v2-lite",
        hf_id="deepseek-ai/DeepSeek-V2-Lite",
        num_layers=27,
        hidden_size=2048,
        num_heads=16,
        num_kv_heads=16,
        head_dim=128,
        ffn_size=10944,
        gated_mlp=True,
        vocab_size=102400,
        max_position_embeddings=163840,
        num_experts=64,
        experts_per_token=6,
        moe_ffn_size=1408,
        num_shared_experts=2,
        first_dense_layers=1,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        v_head_dim=128,
        published_params_b=15.7,  # model card: 15.7B total, 2.4B activated
        published_active_params_b=2.4,
    ),
    # https://huggingface.co/zai-org/GLM-4.5/blob/main/config.json (and GLM-4.5-Air): bias
    # on q, k, v; 96 query and 8 KV heads of 128; routed experts plus one shared, the first
    # layers dense; GLM-4.5 normalises q and k per head. The multi-token-prediction layer
    # is not counted.
    ModelSpec(
        name="glm-4.5",
        hf_id="zai-org/GLM-4.5",
        num_layers=92,
        hidden_size=5120,
        num_heads=96,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=12288,
        gated_mlp=True,
        vocab_size=151552,
        max_position_embeddings=131072,
        qkv_bias=True,
        qk_norm=True,
        num_experts=160,
        experts_per_token=8,
        moe_ffn_size=1536,
        num_shared_experts=1,
        first_dense_layers=3,
        published_params_b=355.0,  # model card: 355B total, 32B active
        published_active_params_b=32.0,
    ),
    ModelSpec(
        name="glm-4.5-air",
        hf_id="zai-org/GLM-4.5-Air",
        num_layers=46,
        hidden_size=4096,
        num_heads=96,
        num_kv_heads=8,
        head_dim=128,
        ffn_size=10944,
        gated_mlp=True,
        vocab_size=151552,
        max_position_embeddings=131072,
        qkv_bias=True,
        num_experts=128,
        experts_per_token=8,
        moe_ffn_size=1408,
        num_shared_experts=1,
        first_dense_layers=1,
        published_params_b=106.0,  # model card: 106B total, 12B active
        published_active_params_b=12.0,
    ),
    # https://huggingface.co/google/gemma-3-{1b,4b,12b,27b}-it/blob/main/config.json
    # (text_config): tied 262K vocabulary, per-head q/k norms, five sliding-window (1024)
    # layers to each global one. 4B-27B carry a SigLIP vision encoder (417M in the Gemma 3
    # technical report, Table 1), loaded but idle in text-only serving.
    *[
        ModelSpec(
            name=f"gemma-3-{size}",
            hf_id=f"google/gemma-3-{size}-pt",
            num_layers=layers,
            hidden_size=hidden,
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            ffn_size=ffn,
            gated_mlp=True,
            vocab_size=262144 if size == "1b" else 262208,
            tied_embeddings=True,
            max_position_embeddings=32768 if size == "1b" else 131072,
            qk_norm=True,
            sliding_window=512 if size == "1b" else 1024,
            sliding_layers=layers - layers // 6,
            encoder_params=0 if size == "1b" else GEMMA3_VISION_PARAMS,
            published_params_b=published,  # model cards: 1B, 4.3B, 12.2B, 27.4B
        )
        for size, layers, hidden, heads, kv_heads, head_dim, ffn, published in (
            ("1b", 26, 1152, 4, 1, 256, 6912, 1.0),
            ("4b", 34, 2560, 8, 4, 256, 10240, 4.3),
            ("12b", 48, 3840, 16, 8, 256, 15360, 12.2),
            ("27b", 62, 5376, 32, 16, 128, 21504, 27.4),
        )
    ],
]

MODEL_CATALOG: dict[str, ModelSpec] = {m.name: m for m in _MODELS}


def qwen3_vl_encoder_params(depth: int, width: int, ffn: int, out: int, deepstack: int = 3) -> int:
    """Qwen3-VL's vision tower, from its vision_config: `depth` ViT blocks (qkv and output
    projections, a two-matrix MLP, biases, two LayerNorms), the 16x16x2 patch and the 2304
    position embeddings, and 1 + `deepstack` mergers, each an MLP from the 2x2-merged width
    to the text model's hidden size `out`."""
    block = 4 * width * width + 4 * width + 2 * width * ffn + ffn + width + 4 * width
    merged = 4 * width
    merger = 2 * merged + merged * merged + merged + merged * out + out
    return depth * block + 3 * 2 * 16 * 16 * width + width + 2304 * width + (1 + deepstack) * merger


def _qwen3_vl(text: str, size: str, vision: tuple[int, int, int], published_b: float) -> ModelSpec:
    """A Qwen3-VL release: the Qwen3 text model `text` (same shapes, 256K context) plus its
    vision encoder, which a text-only benchmark loads but never runs."""
    base = MODEL_CATALOG[text]
    depth, width, ffn = vision
    return base.model_copy(update={
        "name": f"qwen3-vl-{size}", "hf_id": f"Qwen/Qwen3-VL-{size.upper()}-Instruct", "aliases": (),
        "max_position_embeddings": 262144, "published_params_b": published_b,
        "encoder_params": qwen3_vl_encoder_params(depth, width, ffn, base.hidden_size)})


# https://huggingface.co/Qwen/Qwen3-VL-*-Instruct/blob/main/config.json (as carried by
# aiconfigurator-core 0.12): each text_config repeats a Qwen3 model's shapes. Sizes are the
# model cards' (HF counts), which the encoder formula above reproduces to 0.5%.
_QWEN3_VL = [
    _qwen3_vl("qwen3-1.7b", "2b", (24, 1024, 4096), 2.13),
    _qwen3_vl("qwen3-4b", "4b", (24, 1024, 4096), 4.44),
    _qwen3_vl("qwen3-8b", "8b", (27, 1152, 4304), 8.77),
    _qwen3_vl("qwen3-32b", "32b", (27, 1152, 4304), 33.4),
    _qwen3_vl("qwen3-30b-a3b", "30b-a3b", (27, 1152, 4304), 31.1),
    _qwen3_vl("qwen3-235b-a22b", "235b-a22b", (27, 1152, 4304), 236.0),
]
MODEL_CATALOG.update({m.name: m for m in _QWEN3_VL})


def _qwen3_5(size: str, published_b: float, published_active_b: float | None = None, *,
             layers: int, hidden: int, heads: int, kv_heads: int, linear_value_heads: int,
             ffn: int = 0, experts: int = 0, top_k: int = 0, expert_ffn: int = 0,
             hf_id: str = "", aliases: tuple[str, ...] = ()) -> ModelSpec:
    """A Qwen3.5 release: Qwen3-Next's hybrid layers (three Gated DeltaNet to one gated
    attention layer; 16 linear key heads, 128-wide linear heads, conv kernel 4; 256-wide
    attention heads with the output gate), a dense MLP of `ffn` or `experts` routed experts
    plus one gated shared expert of the same width, an untied 248,320-token vocabulary, 256K
    positions, and Qwen3-VL's 27-block vision tower without deepstack mergers (loaded, idle
    in text-only serving). The MTP layer is not counted. Qwen publishes block-scaled -FP8
    checkpoints (weight_block_size [128, 128]) of every size here."""
    moe = {"num_experts": experts, "experts_per_token": top_k, "moe_ffn_size": expert_ffn,
           "num_shared_experts": 1, "shared_expert_gate": True,
           "moe_routing": moe_routing_for("qwen3_5_moe")} if experts else {}
    return ModelSpec(
        name=f"qwen3.5-{size}", hf_id=hf_id or f"Qwen/Qwen3.5-{size.upper()}", aliases=aliases, native_fp8=True,
        num_layers=layers, hidden_size=hidden, num_heads=heads, num_kv_heads=kv_heads, head_dim=256,
        ffn_size=ffn or expert_ffn, gated_mlp=True, vocab_size=248320, max_position_embeddings=262144,
        qk_norm=True, attn_output_gate=True, linear_layers=layers - layers // 4, linear_num_key_heads=16,
        linear_num_value_heads=linear_value_heads, linear_key_head_dim=128, linear_value_head_dim=128,
        linear_conv_kernel=4, linear_ssm_bytes=4.0,  # config.json: mamba_ssm_dtype float32
        encoder_params=qwen3_vl_encoder_params(27, 1152, 4304, hidden, deepstack=0),
        published_params_b=published_b, published_active_params_b=published_active_b, **moe)


# Qwen3.5 / Qwen3.6 (model_type qwen3_5 / qwen3_5_moe, wrapped as *ForConditionalGeneration).
# Totals are the model cards' ("35B in total and 3B activated", ...), which the shapes,
# vision tower included, reproduce to 1.3%; "A3B"-style activated sizes are rounded. A
# survey of the downloaded configs (layers, heads, GDN heads, tie, vision depth) lists the
# Hub's tensor counts, MTP layer included: 27.78B, 35.95B, 125B, 403B; these shapes plus
# one MTP layer (one full-attention layer, its MLP, a 2h x h fc) give the same.
_QWEN3_5 = [
    # https://huggingface.co/Qwen/Qwen3.5-35B-A3B/blob/main/config.json, verbatim in
    # alibaba/InferSim hf_configs/qwen3.5-35B-A3B_config.json; the text shapes recur in other
    # projects' copies of the config and in Qwen3.6-35B-A3B's model card (same architecture).
    _qwen3_5("35b-a3b", 35.0, 3.0, layers=40, hidden=2048, heads=16, kv_heads=2, linear_value_heads=32,
             experts=256, top_k=8, expert_ffn=512),
    # https://huggingface.co/Qwen/Qwen3.5-122B-A10B/blob/main/config.json, field by field in
    # several projects' notes (48 layers, hidden 3072, 32/2 heads, 16/64 linear heads, 256
    # experts x 1024 top-8, shared 1024, vision out 3072); one derives 6,147,409,920
    # non-routed language parameters from it, which these shapes reproduce exactly.
    _qwen3_5("122b-a10b", 122.0, 10.0, layers=48, hidden=3072, heads=32, kv_heads=2, linear_value_heads=64,
             experts=256, top_k=8, expert_ffn=1024),
    # https://huggingface.co/Qwen/Qwen3.5-397B-A17B/blob/main/config.json, verbatim in
    # ai-dynamo/aiconfigurator src/aiconfigurator/model_configs/Qwen--Qwen3.5-397B-A17B_config.json.
    _qwen3_5("397b-a17b", 397.0, 17.0, layers=60, hidden=4096, heads=32, kv_heads=2, linear_value_heads=64,
             experts=512, top_k=10, expert_ffn=1024),
    # https://huggingface.co/Qwen/Qwen3.5-27B/blob/main/config.json, field by field in THUDM/slime
    # scripts/models/qwen3.5-27B.sh (24/4 heads of 256, 64 layers, 5120 x 17408, untied
    # 248,320 vocabulary) and other projects' notes (16/48 linear heads, vision out 5120).
    _qwen3_5("27b", 27.0, layers=64, hidden=5120, heads=24, kv_heads=4, linear_value_heads=48, ffn=17408),
]
# Qwen3.6-27B: the model card's 27B, hidden 5120, 64 layers in 16 x (3 Gated DeltaNet + 1
# gated attention), 248,320 vocabulary; the config survey above gives Qwen3.5-27B's KV heads,
# head width, GDN heads and tensor count (27.78B). Its output_gate_type swish only changes
# the gate's activation.
_QWEN3_5.append(_QWEN3_5[3].model_copy(update={"name": "qwen3.6-27b", "hf_id": "Qwen/Qwen3.6-27B"}))
# Qwen3.6-35B-A3B: the model card repeats Qwen3.5-35B-A3B's layout field by field (40 layers,
# hidden 2048, 32 V / 16 QK linear heads of 128, 16 Q / 2 KV heads of 256, 256 experts x 512,
# 8 routed + 1 shared, 248,320 vocabulary, 262,144 positions), transformers loads both with
# the same classes, and the config survey gives the same tensor count (35.95B).
_QWEN3_5.append(_QWEN3_5[0].model_copy(update={"name": "qwen3.6-35b-a3b", "hf_id": "Qwen/Qwen3.6-35B-A3B"}))
MODEL_CATALOG.update({m.name: m for m in _QWEN3_5})

# https://huggingface.co/meta-llama/Llama-4-Maverick-17B-128E-Instruct/blob/main/config.json
# (text_config; as carried by aiconfigurator-core 0.12): Scout's attention and expert width
# with 128 experts in every other layer (interleave_moe_layer_step 2), each beside one shared
# expert; the other 24 layers keep the dense 16384-wide MLP. Where the dense layers sit does
# not change any cost, so they are entered as first_dense_layers. 1M-token context.
MODEL_CATALOG["llama-4-maverick"] = ModelSpec(**{
    **MODEL_CATALOG["llama-4-scout"].model_dump(),
    "name": "llama-4-maverick", "hf_id": "meta-llama/Llama-4-Maverick-17B-128E",
    "aliases": ("llama-4-maverick-17b-128e",), "max_position_embeddings": 1048576,
    "num_experts": 128, "first_dense_layers": 24,
    "published_params_b": 400.0, "published_active_params_b": 17.0})  # model card: 400B, 17B active

# --- DeepSeek Sparse Attention (MLA over the lightning indexer's top-k tokens) ---
# https://huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp/blob/main/config.json: model_type
# deepseek_v32, DeepSeek-V3's shapes plus index_n_heads 64, index_head_dim 128 and
# index_topk 2048 (DeepSeek's inference/model.py Indexer: wq_b from the 1,536-wide q
# latent, wk and weights_proj from the hidden state, a LayerNorm on the key; vLLM's
# deepseek_v2.py Indexer keeps all three replicated on every TP rank). V3.2 and
# V3.2-Speciale keep the shapes. The indexers add 61 x 13,959,424 = 0.85B parameters to
# V3's 671.0B (the 685B Hugging Face lists counts the 14B MTP layer too, unused when
# serving); the published 671B / 37B activated of the V3 report stay, within the catalog's
# 2% check.
MODEL_CATALOG["deepseek-v3.2"] = ModelSpec(**{
    **MODEL_CATALOG["deepseek-v3"].model_dump(),
    "name": "deepseek-v3.2", "hf_id": "deepseek-ai/DeepSeek-V3.2",
    "aliases": ("deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-ai/DeepSeek-V3.2-Speciale"),
    "index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048})

# GLM-5 (model_type glm_moe_dsa; GlmMoeDsaForCausalLM subclasses vLLM's DeepSeek-V2 model):
# DeepSeek-V3.2's layer design at other shapes, from zai-org/GLM-5's config.json (as carried
# by aiconfigurator-core 0.12) and the GLM-5 technical report's table (arXiv:2602.15763):
# 78 layers of hidden 6144, the first 3 dense (12288), then 256 experts of 2048 with 8
# routed and 1 shared; 64 heads on a 2048-wide q latent and the 512 + 64 KV latent, query
# and key heads of 192 + 64 and value heads of 256; an indexer of 32 heads of 128 choosing
# 2048 tokens; 154,880 vocabulary, 202,752 positions. 744B total and 40B activated (the
# report); these shapes give 743.9B. GLM-5.1 keeps every shape. zai-org ships block-scaled
# FP8 checkpoints (-FP8); NVIDIA's NVFP4 ones leave attention and the indexers in 16-bit
# (their exclude_modules list every self_attn projection).
MODEL_CATALOG["glm-5"] = ModelSpec(
    name="glm-5", hf_id="zai-org/GLM-5", native_fp8=True, nvfp4_experts_only=True,
    aliases=("zai-org/GLM-5-FP8", "nvidia/GLM-5-NVFP4", "zhipuai/GLM-5", "zai-org/GLM-5.1",
             "zai-org/GLM-5.1-FP8", "nvidia/GLM-5.1-NVFP4", "glm-5.1"),
    num_layers=78, hidden_size=6144, num_heads=64, num_kv_heads=64, head_dim=192, ffn_size=12288,
    gated_mlp=True, vocab_size=154880, max_position_embeddings=202752, num_experts=256,
    experts_per_token=8, moe_ffn_size=2048, num_shared_experts=1, first_dense_layers=3,
    kv_lora_rank=512, q_lora_rank=2048, qk_rope_head_dim=64, v_head_dim=256,
    index_n_heads=32, index_head_dim=128, index_topk=2048,
    published_params_b=744.0, published_active_params_b=40.0)

# GLM-5.2 (zai-org/GLM-5.2's config.json, as carried by aiconfigurator-core 0.12; GLM-5.3's is
# the same file): GLM-5's shapes at 1,048,576 positions, with IndexShare: indexer_types
# marks 21 of the 78 layers "full" (the first three, then every fourth from layer 6; the
# index_topk_freq 4 / index_skip_topk_offset 3 schedule) and the rest "shared". vLLM builds
# no indexer on a shared layer (it reuses the last full layer's top-k), so those layers hold
# no indexer weights or key cache and score nothing. 743.4B without the MTP layer.
MODEL_CATALOG["glm-5.2"] = MODEL_CATALOG["glm-5"].model_copy(update={
    "name": "glm-5.2", "hf_id": "zai-org/GLM-5.2", "indexer_layers": 21, "max_position_embeddings": 1048576,
    "aliases": ("zai-org/GLM-5.2-FP8", "nvidia/GLM-5.2-NVFP4", "zai-org/GLM-5.3", "zai-org/GLM-5.3-FP8",
                "nvidia/GLM-5.3-NVFP4", "glm-5.3")})

# Releases with another entry's shapes and their own context length (config.json's
# max_position_embeddings), which sets the default max_model_len.
_CONTEXT_VARIANTS: list[tuple[str, str, str, int, tuple[str, ...]]] = [
    # (shapes of, name, Hugging Face id, context, aliases)
    ("llama-3.1-8b", "llama-3-8b", "meta-llama/Meta-Llama-3-8B", 8192, ()),
    ("llama-3.1-70b", "llama-3-70b", "meta-llama/Meta-Llama-3-70B", 8192, ()),
    ("phi-3-mini", "phi-3.5-mini", "microsoft/Phi-3.5-mini-instruct", 131072,
     ("microsoft/Phi-3-mini-128k-instruct", "phi-3-mini-128k")),
    ("glm-4.5", "glm-4.6", "zai-org/GLM-4.6", 202752, ()),
    # Qwen2.5-Coder's config.json: the Qwen2.5 shapes of the same size, at 32,768 positions.
    ("qwen2.5-7b", "qwen2.5-coder-7b", "Qwen/Qwen2.5-Coder-7B-Instruct", 32768, ()),
    ("qwen2.5-14b", "qwen2.5-coder-14b", "Qwen/Qwen2.5-Coder-14B-Instruct", 32768, ()),
    ("qwen2.5-32b", "qwen2.5-coder-32b", "Qwen/Qwen2.5-Coder-32B-Instruct", 32768, ()),
    # Qwen3-Coder-30B-A3B: Qwen3-30B-A3B's 48 layers and 128 experts (top-8) at 262,144 positions.
    ("qwen3-30b-a3b", "qwen3-coder-30b-a3b", "Qwen/Qwen3-Coder-30B-A3B-Instruct", 262144, ()),
    # Qwen2.5-Math-7B: Qwen2.5-7B's shapes at 4,096 positions.
    ("qwen2.5-7b", "qwen2.5-math-7b", "Qwen/Qwen2.5-Math-7B", 4096, ()),
]
for _base, _name, _hf_id, _context, _aliases in _CONTEXT_VARIANTS:
    MODEL_CATALOG[_name] = MODEL_CATALOG[_base].model_copy(update={
        "name": _name, "hf_id": _hf_id, "max_position_embeddings": _context, "aliases": _aliases})

# Releases with another entry's exact shapes and context length (their config.json differs
# only in token ids or rope settings): distillations, community fine-tunes, re-releases.
_SAME_SHAPE_RELEASES: dict[str, tuple[str, ...]] = {
    "llama-3.1-8b": ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "NousResearch/Hermes-3-Llama-3.1-8B",
                     "nvidia/Llama-3.1-Nemotron-Nano-8B-v1"),
    "llama-3.1-70b": ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "nvidia/Llama-3.1-Nemotron-70B-Instruct-HF",
                      "NousResearch/Hermes-3-Llama-3.1-70B"),
    "llama-2-7b": ("lmsys/vicuna-7b-v1.5",),
    "llama-2-13b": ("lmsys/vicuna-13b-v1.5",),
    "qwen2.5-7b": ("Qwen/Qwen2-7B", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"),
    "qwen2.5-14b": ("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",),
    "qwen2.5-32b": ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",),
    "qwen2.5-72b": ("Qwen/Qwen2-72B",),
    # The small Qwen2.5-Coder sizes keep the base models' 32,768 positions too.
    "qwen2.5-0.5b": ("Qwen/Qwen2.5-Coder-0.5B-Instruct",),
    "qwen2.5-1.5b": ("Qwen/Qwen2.5-Coder-1.5B-Instruct",),
    "qwen2.5-3b": ("Qwen/Qwen2.5-Coder-3B-Instruct",),
    "deepseek-v3": ("deepseek-ai/DeepSeek-V3.1-Terminus",),
    "deepseek-v2-lite": ("deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct", "deepseek-ai/DeepSeek-Coder-V2-Lite-Base"),
    "mistral-7b-v0.1": ("HuggingFaceH4/zephyr-7b-beta",),
    "yi-34b": ("01-ai/Yi-1.5-34B",),
    # GLM-4.7 (aiconfigurator-core's copy of GLM-4.7-FP8's config): GLM-4.6's shapes and context.
    "glm-4.6": ("zai-org/GLM-4.7",),
    # Built on Mistral Small 3.1 (their model cards), whose text model has these shapes.
    "mistral-small-24b": ("mistralai/Devstral-Small-2505", "mistralai/Magistral-Small-2506"),
}
# Mistral 7B before v0.3 (config.json of mistralai/Mistral-7B-v0.1 and -Instruct-v0.2): the
# v0.3 shapes with a 32,000-token vocabulary. v0.1's config also names a 4,096-token window
# on every layer, which v0.2 dropped; it is not entered (the memory plan needs a layer that
# keeps the whole context, and vLLM's treatment of an all-window model changed between
# releases), so v0.1 prompts past 4,096 tokens are costed as full attention.
MODEL_CATALOG["mistral-7b-v0.1"] = MODEL_CATALOG["mistral-7b"].model_copy(update={
    "name": "mistral-7b-v0.1", "hf_id": "mistralai/Mistral-7B-v0.1", "vocab_size": 32000,
    "published_params_b": 7.24, "aliases": ()})
MODEL_CATALOG["mistral-7b-v0.2"] = MODEL_CATALOG["mistral-7b"].model_copy(update={
    "name": "mistral-7b-v0.2", "hf_id": "mistralai/Mistral-7B-Instruct-v0.2", "vocab_size": 32000,
    "published_params_b": 7.24, "aliases": ("mistralai/Mistral-7B-v0.2",)})

# Nemotron-H hybrids (model_type nemotron_h): Mamba2 and GQA attention mixers and squared-ReLU
# MLP or MoE blocks as separate layers (ModelSpec.linear_kind, ffn_free_layers). Shapes from the
# published config.json files (as cached in aiconfigurator-core 0.12's model_configs/).
def _nemotron_h(name: str, hf_id: str, *, blocks: tuple[int, int, int], hidden: int, heads: int, kv_heads: int,
                mamba_heads: int, state: int, context: int, published_b: float, ffn: int = 0,
                experts: tuple[int, int, int, int] | None = None, latent: int = 0, ssm_bytes: float = 2.0,
                published_active_b: float | None = None, aliases: tuple[str, ...] = ()) -> ModelSpec:
    """blocks: (Mamba2, attention, MLP-or-MoE layers); experts: (routed, top-k, width, shared
    widths: the shared expert's width over the routed experts'); latent: the routed experts'
    input width (moe_latent_size), 0 for the hidden size."""
    mamba, attention, ffn_blocks = blocks
    moe = ({"num_experts": experts[0], "experts_per_token": experts[1], "moe_ffn_size": experts[2],
            "num_shared_experts": experts[3], "moe_latent_size": latent} if experts else {})
    return ModelSpec(
        name=name, hf_id=hf_id, aliases=aliases, num_layers=mamba + attention,
        ffn_free_layers=mamba + attention - ffn_blocks, hidden_size=hidden, num_heads=heads, num_kv_heads=kv_heads,
        head_dim=128, ffn_size=ffn or experts[2], gated_mlp=False, vocab_size=131072,
        max_position_embeddings=context, linear_kind="mamba2", linear_layers=mamba, linear_num_key_heads=8,
        linear_key_head_dim=state, linear_num_value_heads=mamba_heads, linear_value_head_dim=64,
        linear_conv_kernel=4, linear_ssm_bytes=ssm_bytes, published_params_b=published_b,
        published_active_params_b=published_active_b, **moe)


_NEMOTRON_H_MODELS = [
    # nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16: hybrid_override_pattern of 23 M, 6 *, 23 E;
    # 128 experts x 1856 (top-6) and a 3712-wide shared expert; mamba_ssm_cache_dtype float32.
    # Model card: 31.6B total, ~3.2B active (3.6B with the embeddings).
    _nemotron_h("nemotron-3-nano", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", blocks=(23, 6, 23),
                hidden=2688, heads=32, kv_heads=2, mamba_heads=64, state=128, context=262144, published_b=31.6,
                experts=(128, 6, 1856, 2), ssm_bytes=4.0, published_active_b=3.2,
                # Nemotron 3.5 Lightning (an NVFP4 release) has these shapes at 1,048,576 positions:
                # set model.max_model_len past 262,144 to serve more.
                aliases=("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B", "nemotron-3-nano-30b-a3b",
                         "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4")),
    # nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8: 40 M, 8 *, 40 E; 512 experts x 2688 (top-22)
    # on a 1,024-wide latent, a 5,376-wide shared expert on the hidden state; 128 mamba heads.
    _nemotron_h("nemotron-3-super", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16", blocks=(40, 8, 40),
                hidden=4096, heads=32, kv_heads=2, mamba_heads=128, state=128, context=262144, published_b=120.0,
                experts=(512, 22, 2688, 2), latent=1024, ssm_bytes=4.0, published_active_b=12.0,
                aliases=("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B", "nemotron-3-super-120b-a12b")),
    # nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16 (layers_block_type): 48 mamba, 12 attention,
    # 48 moe; 512 experts x 5120 (top-22) on a 2,048-wide latent; 256 mamba heads.
    _nemotron_h("nemotron-3-ultra", "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", blocks=(48, 12, 48),
                hidden=8192, heads=64, kv_heads=2, mamba_heads=256, state=128, context=262144, published_b=550.0,
                experts=(512, 22, 5120, 2), latent=2048, ssm_bytes=4.0, published_active_b=55.0,
                aliases=("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B", "nemotron-3-ultra-550b-a55b")),
    # nvidia/Nemotron-H-56B-Base-8K: 54 M, 10 *, 54 MLP layers of 32,768; state 256.
    _nemotron_h("nemotron-h-56b", "nvidia/Nemotron-H-56B-Base-8K", blocks=(54, 10, 54), hidden=8192, heads=64,
                kv_heads=8, mamba_heads=256, state=256, context=8192, published_b=56.0, ffn=32768,
                aliases=("nvidia/Nemotron-H-56B-Instruct-8K",)),
]
MODEL_CATALOG.update({m.name: m for m in _NEMOTRON_H_MODELS})
# nvidia/Llama-3_3-Nemotron-Super-49B-v1 (model_type nemotron-nas): Llama-3.3-70B pruned by
# NAS to 80 layers, 49 of them with attention (64 heads, 8 KV heads of 128) and every one with
# an MLP of its own width (2,816 to 28,672; mean 20,531); 49.87B parameters.
MODEL_CATALOG["nemotron-super-49b"] = ModelSpec(
    name="nemotron-super-49b", hf_id="nvidia/Llama-3_3-Nemotron-Super-49B-v1",
    num_layers=80, mixer_free_layers=31, hidden_size=8192, num_heads=64, num_kv_heads=8, head_dim=128,
    ffn_size=20531, gated_mlp=True, vocab_size=128256, max_position_embeddings=131072,
    published_params_b=49.9, aliases=("llama-3.3-nemotron-super-49b",))

# Earlier generations and other labs' releases (catalog_extra.py).
MODEL_CATALOG.update({m.name: m for m in [*DENSE_MODELS, *MOE_MODELS, *GEMMA4_MODELS, *DEEPSEEK_V4_MODELS,
                                            *vision_language_models(MODEL_CATALOG)]})
MODEL_CATALOG["step-3.7-flash"] = step37_flash(MODEL_CATALOG)
# Decoders with their own config keys, and Llama's lineage under other names (catalog_classic.py).
MODEL_CATALOG.update({m.name: m for m in [*CLASSIC_MODELS, *llama_lineage(MODEL_CATALOG)]})

# aiconfigurator's model names where they leave out what tells a catalog entry apart
# (its sdk model table and sweep CSVs: QWEN3_235B is Qwen3-235B-A22B, QWEN3_480B the Coder).
_AICONFIGURATOR_NAMES = {"qwen3-235b-a22b": ("QWEN3_235B",), "qwen3-coder-480b-a35b": ("QWEN3_480B",),
                         "mixtral-8x7b": ("MOE_Mixtral8x7B",), "mixtral-8x22b": ("MOE_Mixtral8x22B",)}
for _name, _names in _AICONFIGURATOR_NAMES.items():
    MODEL_CATALOG[_name] = MODEL_CATALOG[_name].model_copy(update={"aliases": MODEL_CATALOG[_name].aliases + _names})

for _name, _releases in _SAME_SHAPE_RELEASES.items():
    MODEL_CATALOG[_name] = MODEL_CATALOG[_name].model_copy(
        update={"aliases": MODEL_CATALOG[_name].aliases + _releases})

# Fine-tune suffixes that keep the base model's shapes ("Llama-2-7b-chat-hf").
# Fine-tune and quantised-checkpoint suffixes: same shapes as the base model (the weight
# format is the scenario's model.weight_dtype, not part of the name).
_SAME_SHAPE_TOKENS = frozenset({"instruct", "chat", "hf", "base", "it", "fp8", "fp4", "nvfp4", "bf16",
                                "int4", "int8", "awq", "gptq", "w8a8", "w4a16", "w8a16", "w4a8",
                                "w4afp8", "dynamic", "kv", "thinking", "static", "pertensor", "mxfp4"})
# Neural Magic's and Red Hat's quantised releases end in `-quantized.w8a16` (and w4a16, w8a8).
_QUANTIZED_SUFFIX = re.compile(r"-quantized\.w\d+a\d+$")


def _is_release_date(token: str) -> bool:
    """'0528', '2507': a re-release of the same architecture (DeepSeek-R1-0528, Qwen3-...-2507)."""
    return len(token) == 4 and token.isdigit()


def _key(name: str) -> str:
    """Lookup key ignoring case, org prefix, separators and same-shape fine-tune suffixes."""
    s = _QUANTIZED_SUFFIX.sub("", name.strip().lower().rsplit("/", 1)[-1].removeprefix("meta-"))
    tokens = [t for t in re.split(r"[-_\s]+", s)
              if t and t not in _SAME_SHAPE_TOKENS and not _is_release_date(t)]
    return re.sub(r"[^a-z0-9.]", "", "".join(tokens))


_MODEL_INDEX = AliasIndex(
    "model", MODEL_CATALOG, lambda m: (m.name, m.hf_id or m.name, *m.aliases), _key, cutoff=0.6,
    field="model.name",
    fix="use a name from `simulate list models`, or describe the model by its Hugging Face config.json "
        "(model.config_json: PATH, in place of model.name)")


def list_models() -> list[str]:
    return sorted(MODEL_CATALOG)


def get_model(name: str) -> ModelSpec:
    """Look a model up by catalog name or HF id; instruct/chat variants map to the base."""
    return _MODEL_INDEX.get(name)
