"""Decoders that name their config keys their own way: Falcon, BLOOM, GPT-J, MPT,
StarCoder, StarCoder2, Phi-2, Cohere's Command R/R+/A, DBRX, Qwen1.5-MoE, DeepSeekMoE and
Phi-3.5-MoE. Serving papers and older benchmarks use several (Splitwise: BLOOM-176B;
Sarathi-Serve: Falcon-180B; MLPerf Inference: GPT-J-6B). BLOOMZ shares BLOOM's shapes.

Each entry is the architecture keys of the model's config.json on the Hugging Face Hub (the
repository's, or a copy carrying its `_name_or_path`, as noted), read by the same code that
reads a user's config.json (hf_classic.py), so the catalog and `model.config_json` cannot
disagree. The catalog tests check each parameter count against the published size.
"""

from __future__ import annotations

from typing import Any

from simulator.models.hf_classic import DENSE_FAMILIES, MOE_FAMILIES
from simulator.models.spec import ModelSpec, with_moe_routing

# Each entry's config keys, by catalog name: what a config.json of that model holds.
CONFIGS: dict[str, dict[str, Any]] = {}


def _from_config(name: str, hf_id: str, published_b: float, cfg: dict[str, Any], *,
                 active_b: float | None = None, aliases: tuple[str, ...] = ()) -> ModelSpec:
    CONFIGS[name] = cfg
    read = {**DENSE_FAMILIES, **MOE_FAMILIES}[cfg["model_type"]]
    fields = with_moe_routing(read(cfg, f"catalog entry {name}"), cfg["model_type"])
    return ModelSpec(name=name, hf_id=hf_id, published_params_b=published_b, published_active_params_b=active_b,
                     aliases=aliases, **fields)


CLASSIC_MODELS: list[ModelSpec] = [
    # Falcon (tiiuae): the published configs set no tie_word_embeddings, and transformers and
    # vLLM then tie the head (vLLM's falcon.py says so). Sizes: the cards' 7B and 180B, and for
    # the 40B Hugging Face's 41.8B (its card says 40B), which counts the head the checkpoint
    # stores beside the embeddings: a tied load reads it once, 41.3B.
    # 7B: justinpinkney/falcon-7b ("Duplicate from tiiuae/falcon-7b"; RefinedWebModel keys).
    _from_config("falcon-7b", "tiiuae/falcon-7b", 7.0, {
        "model_type": "falcon", "n_embed": 4544, "n_layer": 32, "n_head": 71, "multi_query": True,
        "new_decoder_architecture": False, "parallel_attn": True, "bias": False, "vocab_size": 65024}),
    # 40B: tiiuae/falcon-40b, refs/pr/111 (the in-library checkpoint's config.json).
    _from_config("falcon-40b", "tiiuae/falcon-40b", 41.8, {
        "model_type": "falcon", "hidden_size": 8192, "num_hidden_layers": 60, "num_attention_heads": 128,
        "num_kv_heads": 8, "new_decoder_architecture": True, "parallel_attn": True, "bias": False,
        "vocab_size": 65024}),
    # 180B: copies in spaces/gojiteji/LLM-Comparer and TheBloke/Falcon-180B-GPTQ (max 2,048).
    _from_config("falcon-180b", "tiiuae/falcon-180B", 180.0, {
        "model_type": "falcon", "hidden_size": 14848, "num_hidden_layers": 80, "num_attention_heads": 232,
        "num_kv_heads": 8, "new_decoder_architecture": True, "parallel_attn": True, "bias": False,
        "vocab_size": 65024, "max_position_embeddings": 2048}),
    # BLOOM (ALiBi, an extra LayerNorm after the embeddings): sambanovasystems/BLOOMChat-176B-v1
    # and newsrx/bloomz-7b1 carry the configs; counts from bigscience/bloom's card (exact).
    _from_config("bloom-176b", "bigscience/bloom", 176.247, {
        "model_type": "bloom", "hidden_size": 14336, "n_layer": 70, "n_head": 112, "vocab_size": 250880,
        "seq_length": 2048}, aliases=("bloom", "bigscience/bloomz")),
    _from_config("bloom-7b1", "bigscience/bloom-7b1", 7.069, {
        "model_type": "bloom", "n_embed": 4096, "n_layer": 30, "num_attention_heads": 32, "vocab_size": 250880,
        "seq_length": 2048}, aliases=("bigscience/bloomz-7b1",)),
    # GPT-J (MLPerf Inference's GPT-J-6B): hivemind/gpt-j-6B-8bit's config; card 6,053,381,344.
    _from_config("gpt-j-6b", "EleutherAI/gpt-j-6b", 6.053, {
        "model_type": "gptj", "n_embd": 4096, "n_layer": 28, "n_head": 16, "n_inner": None, "rotary_dim": 64,
        "n_positions": 2048, "vocab_size": 50400, "tie_word_embeddings": False}),
    # MPT (ALiBi, no biases): OpenVINO/mpt-7b-fp16-ov and mosaicml/mpt-30b-chat's configs; the cards'
    # n_parameters 6.7B and 29.95B.
    _from_config("mpt-7b", "mosaicml/mpt-7b", 6.7, {
        "model_type": "mpt", "d_model": 4096, "n_layers": 32, "n_heads": 32, "expansion_ratio": 4,
        "max_seq_len": 2048, "vocab_size": 50432, "no_bias": True}),
    _from_config("mpt-30b", "mosaicml/mpt-30b", 29.95, {
        "model_type": "mpt", "d_model": 7168, "n_layers": 48, "n_heads": 64, "expansion_ratio": 4,
        "max_seq_len": 8192, "vocab_size": 50432, "no_bias": True}),
    # StarCoder (gpt_bigcode: multi-query, learned positions): bigcode/starcoder-co-format's copy.
    _from_config("starcoder", "bigcode/starcoder", 15.5, {
        "model_type": "gpt_bigcode", "n_embd": 6144, "n_layer": 40, "n_head": 48, "multi_query": True,
        "n_inner": 24576, "n_positions": 8192, "vocab_size": 49152}, aliases=("bigcode/starcoderbase",)),
    # StarCoder2-15B (bigcode/starcoder2-15b refs/pr/7; Hugging Face's count 16B): a 4,096-token
    # window on every layer, not entered (hf_classic.starcoder2_fields). The 7B is left out: no
    # published count precise enough to check its shapes against was found.
    _from_config("starcoder2-15b", "bigcode/starcoder2-15b", 16.0, {
        "model_type": "starcoder2", "hidden_size": 6144, "num_hidden_layers": 40, "num_attention_heads": 48,
        "num_key_value_heads": 4, "intermediate_size": 24576, "vocab_size": 49152,
        "max_position_embeddings": 16384, "use_bias": True, "tie_word_embeddings": False,
        "sliding_window": 4096}),
    # Phi-2 (microsoft/phi-2; partial rotary 0.4, attention and MLP off one LayerNorm).
    _from_config("phi-2", "microsoft/phi-2", 2.78, {
        "model_type": "phi", "hidden_size": 2560, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 32, "intermediate_size": 10240, "vocab_size": 51200,
        "max_position_embeddings": 2048, "tie_word_embeddings": False}),
    # Cohere: Command R (c4ai-command-r-v01: multi-head; 08-2024: 8 KV heads, wider MLP),
    # R+ (QK norm) and Command A (cohere2: 4,096-token windows on three layers in four); the
    # cards' 35B, 32B, 104B and 111B.
    _from_config("command-r", "CohereForAI/c4ai-command-r-v01", 35.0, {
        "model_type": "cohere", "hidden_size": 8192, "num_hidden_layers": 40, "num_attention_heads": 64,
        "num_key_value_heads": 64, "intermediate_size": 22528, "vocab_size": 256000,
        "max_position_embeddings": 131072}),
    _from_config("command-r-08-2024", "CohereForAI/c4ai-command-r-08-2024", 32.0, {
        "model_type": "cohere", "hidden_size": 8192, "num_hidden_layers": 40, "num_attention_heads": 64,
        "num_key_value_heads": 8, "intermediate_size": 24576, "vocab_size": 256000,
        "max_position_embeddings": 131072}),
    _from_config("command-r-plus", "CohereForAI/c4ai-command-r-plus", 104.0, {
        "model_type": "cohere", "hidden_size": 12288, "num_hidden_layers": 64, "num_attention_heads": 96,
        "num_key_value_heads": 8, "intermediate_size": 33792, "vocab_size": 256000,
        "max_position_embeddings": 131072, "use_qk_norm": True}),
    _from_config("command-a", "CohereLabs/c4ai-command-a-03-2025", 111.0, {
        "model_type": "cohere2", "hidden_size": 12288, "num_hidden_layers": 64, "num_attention_heads": 96,
        "num_key_value_heads": 8, "intermediate_size": 36864, "vocab_size": 256000,
        "max_position_embeddings": 131072, "sliding_window": 4096, "sliding_window_pattern": 4},
        aliases=("CohereForAI/c4ai-command-a-03-2025",)),
    # DBRX (mlx-community/dbrx-instruct-4bit's config): 16 experts, top 4, clip_qkv (free).
    _from_config("dbrx", "databricks/dbrx-instruct", 132.0, {
        "model_type": "dbrx", "d_model": 6144, "n_layers": 40, "n_heads": 48, "max_seq_len": 32768,
        "vocab_size": 100352, "attn_config": {"kv_n_heads": 8},
        "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4}},
        active_b=36.0, aliases=("databricks/dbrx-base",)),
    # Qwen1.5-MoE-A2.7B: 60 experts of 1,408, top 4, and a gated shared expert of 5,632.
    _from_config("qwen1.5-moe-a2.7b", "Qwen/Qwen1.5-MoE-A2.7B", 14.3, {
        "model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16,
        "num_key_value_heads": 16, "intermediate_size": 5632, "vocab_size": 151936,
        "max_position_embeddings": 8192, "num_experts": 60, "num_experts_per_tok": 4,
        "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632}, active_b=2.7),
    # DeepSeekMoE 16B: 64 experts of 1,408, top 6, 2 shared; layer 0 dense (10,944).
    _from_config("deepseek-moe-16b", "deepseek-ai/deepseek-moe-16b-base", 16.4, {
        "model_type": "deepseek", "hidden_size": 2048, "num_hidden_layers": 28, "num_attention_heads": 16,
        "num_key_value_heads": 16, "intermediate_size": 10944, "vocab_size": 102400,
        "max_position_embeddings": 4096, "n_routed_experts": 64, "num_experts_per_tok": 6,
        "moe_intermediate_size": 1408, "n_shared_experts": 2, "first_k_dense_replace": 1}, active_b=2.8,
        aliases=("deepseek-ai/deepseek-moe-16b-chat",)),
    # Phi-3.5-MoE: 16 experts of 6,400, top 2; LayerNorm and attention biases.
    _from_config("phi-3.5-moe", "microsoft/Phi-3.5-MoE-instruct", 41.9, {
        "model_type": "phimoe", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "intermediate_size": 6400, "vocab_size": 32064,
        "max_position_embeddings": 131072, "num_local_experts": 16, "num_experts_per_tok": 2,
        "attention_bias": True}, active_b=6.6),
]


def llama_lineage(catalog: dict[str, ModelSpec]) -> list[ModelSpec]:
    """Releases with Llama's (or Qwen2's) layer shapes under other names: the original LLaMA
    (huggyllama's configs: multi-head attention, 2,048 positions, untied), Llama Guard 3, Code
    Llama 70B, Qwen2.5-1M, SOLAR and InternLM2.5-20B. Where the shapes equal a catalog entry's,
    that entry is copied and its differences set."""
    def like(base: str, name: str, hf_id: str, published_b: float, **update) -> ModelSpec:
        return catalog[base].model_copy(update={"name": name, "hf_id": hf_id, "aliases": (),
                                                "published_params_b": published_b, **update})

    def llama(name: str, hf_id: str, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int,
              context: int, published_b: float, **extra) -> ModelSpec:
        return ModelSpec(name=name, hf_id=hf_id, num_layers=layers, hidden_size=hidden, num_heads=heads,
                         num_kv_heads=kv_heads, head_dim=hidden // heads, ffn_size=ffn, gated_mlp=True,
                         vocab_size=vocab, max_position_embeddings=context, published_params_b=published_b, **extra)

    return [
        # LLaMA (2023; the paper's Table 2 sizes): 7B and 13B have Llama 2's shapes at 2,048
        # positions; huggyllama/llama-30b and -65b's config.json give the larger two.
        like("llama-2-7b", "llama-7b", "huggyllama/llama-7b", 6.7, max_position_embeddings=2048),
        like("llama-2-13b", "llama-13b", "huggyllama/llama-13b", 13.0, max_position_embeddings=2048),
        llama("llama-30b", "huggyllama/llama-30b", 60, 6656, 52, 52, 17920, 32000, 2048, 32.5),
        llama("llama-65b", "huggyllama/llama-65b", 80, 8192, 64, 64, 22016, 32000, 2048, 65.2),
        # Llama Guard 3 (meta-llama/llama-models' sku_list.py): the 8B has Llama 3.1 8B's shapes;
        # the 1B has Llama 3.2 1B's but an untied head (Hugging Face's count 1.50B).
        like("llama-3.1-8b", "llama-guard-3-8b", "meta-llama/Llama-Guard-3-8B", 8.03),
        like("llama-3.2-1b", "llama-guard-3-1b", "meta-llama/Llama-Guard-3-1B", 1.50, tied_embeddings=False),
        # Code Llama 70B: a 32,016-token vocabulary and 16,384 positions (the base model's config;
        # the Instruct and Python ones, which the name lookup maps here too, give 4,096:
        # meta-llama/codellama#188; set model.max_model_len for them). Hugging Face: 69B.
        llama("codellama-70b", "codellama/CodeLlama-70b-hf", 80, 8192, 64, 8, 28672, 32016, 16384, 69.0,
              aliases=("codellama/CodeLlama-70b-Python-hf",)),
        # Qwen2.5-1M: Qwen2.5 7B/14B's shapes at 1,010,000 positions. Beyond 262,144 tokens vLLM
        # runs their dual-chunk attention with sparse prefill (MInference), which is not modelled:
        # such prompts are costed as dense attention.
        like("qwen2.5-7b", "qwen2.5-7b-1m", "Qwen/Qwen2.5-7B-Instruct-1M", 7.61, max_position_embeddings=1010000),
        like("qwen2.5-14b", "qwen2.5-14b-1m", "Qwen/Qwen2.5-14B-Instruct-1M", 14.7,
             max_position_embeddings=1010000),
        # SOLAR 10.7B: Mistral 7B's layers, depth up-scaled to 48 (Kim et al., 2023).
        llama("solar-10.7b", "upstage/SOLAR-10.7B-v1.0", 48, 4096, 32, 8, 14336, 32000, 4096, 10.7,
              aliases=("upstage/SOLAR-10.7B-Instruct-v1.0",)),
        # InternLM2.5-20B (internlm2: a fused wqkv of Llama's total shape).
        llama("internlm2.5-20b", "internlm/internlm2_5-20b-chat", 48, 6144, 48, 8, 16384, 92544, 32768, 20.0,
              aliases=("internlm/internlm2_5-20b",)),
    ]
