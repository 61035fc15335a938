"""Nemotron-H hybrids (Mamba2 mixers, separate MLP/MoE layers): shapes read from config.json,
layer counts in the iteration's ops, the per-sequence state, and the scan's cost."""

from __future__ import annotations

import pytest
from conftest import CATALOG_ONLY_FIELDS, write_config

from simulator.api import load
from simulator.cost.config import RooflineEfficiency
from simulator.cost.ops import (
    SSD_CHUNK,
    IterationShape,
    ShardedModel,
    iteration_ops,
    linear_decode_op,
    mamba_prefill_op,
)
from simulator.cost.roofline import RooflineTimer
from simulator.errors import CatalogError
from simulator.hardware import get_gpu
from simulator.memory import sequence_state_bytes_per_gpu
from simulator.models import MODEL_CATALOG, get_model, load_hf_config
from simulator.simulation import Simulation
from tests.test_linear_attention import BENCH, run_hybrid_closed_loop

# nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16's config.json (the shape keys).
NANO_CONFIG = {
    "_name_or_path": "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h", "chunk_size": 128, "conv_kernel": 4, "head_dim": 128, "hidden_size": 2688,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    "intermediate_size": 1856, "mamba_head_dim": 64, "mamba_num_heads": 64, "mamba_ssm_cache_dtype": "float32",
    "max_position_embeddings": 262144, "mlp_hidden_act": "relu2", "moe_intermediate_size": 1856,
    "moe_shared_expert_intermediate_size": 3712, "n_groups": 8, "n_routed_experts": 128, "n_shared_experts": 1,
    "num_attention_heads": 32, "num_experts_per_tok": 6, "num_hidden_layers": 52, "num_key_value_heads": 2,
    "ssm_state_size": 128, "tie_word_embeddings": False, "vocab_size": 131072,
}
NANO = MODEL_CATALOG["nemotron-3-nano"]
H56 = MODEL_CATALOG["nemotron-h-56b"]
KEEP = CATALOG_ONLY_FIELDS | {"native_fp8"}



def test_the_nano_has_its_published_size_and_reads_from_its_config(tmp_path):
    # Model card: 31.6B in total, ~3.2B active (3.6B with the embeddings).
    assert NANO.param_count / 1e9 == pytest.approx(31.6, rel=0.002)
    assert NANO.active_param_count / 1e9 == pytest.approx(3.6, rel=0.01)
    spec = load_hf_config(write_config(tmp_path, NANO_CONFIG))
    assert spec.model_dump(exclude=KEEP) == NANO.model_dump(exclude=KEEP)
    # 52 layers: 23 Mamba2 and 6 attention mixers, 23 MoE blocks after 23 of them.
    assert (spec.num_layers, spec.linear_layers, spec.attention_layers, spec.moe_layers) == (29, 23, 6, 23)
    # The 3,712-wide shared expert is two expert widths; the SSM state is kept in fp32.
    assert (spec.num_shared_experts, spec.linear_ssm_bytes, spec.gated_mlp) == (2, 4.0, False)
    for name in ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"):
        assert get_model(name).name == "nemotron-3-nano"


def test_layers_block_type_reads_as_the_pattern_does(tmp_path):
    letters = {"M": "mamba", "*": "attention", "E": "moe", "-": "mlp"}
    listed = {k: v for k, v in NANO_CONFIG.items() if k != "hybrid_override_pattern"}
    listed["layers_block_type"] = [letters[c] for c in NANO_CONFIG["hybrid_override_pattern"]]
    assert load_hf_config(write_config(tmp_path, listed)).model_dump() == load_hf_config(
        write_config(tmp_path, NANO_CONFIG)).model_dump()


@pytest.mark.parametrize(("update", "says"), [
    ({"hybrid_override_pattern": "M*E-"}, "both MLP and MoE"),
    ({"hybrid_override_pattern": "MEMEQ*E"}, "letters ['Q']"),
    ({"hybrid_override_pattern": "MEME"}, "0 attention"),
    ({"moe_shared_expert_intermediate_size": 1000}, "whole number of expert widths"),
])
def test_configs_it_cannot_model_are_refused_with_the_reason(tmp_path, update, says):
    with pytest.raises(CatalogError, match=r"config\.json") as err:
        load_hf_config(write_config(tmp_path, {**NANO_CONFIG, **update}))
    assert says in str(err.value)


def _count(ops, name: str) -> int:
    return sum(op.count for op in ops if op.name == name)


def test_each_block_runs_as_often_as_the_model_has_it():
    sm = ShardedModel.build(NANO, 2, 1, "bf16", "bf16", "bf16", 8)
    ops = iteration_ops(IterationShape(64, 8, 4, 4 * 500, ((60, 0),)), sm)
    assert _count(ops, "fused_moe") == _count(ops, "post_attn_norm") == 23
    assert _count(ops, "qkv_proj") == _count(ops, "attn_decode") == _count(ops, "attn_prefill") == 6
    assert _count(ops, "mamba_in_proj") == _count(ops, "mamba_decode") == _count(ops, "mamba_prefill") == 23
    assert _count(ops, "input_norm") == 29
    assert _count(ops, "tp_allreduce") == 52  # one after every block, as vLLM's row-parallel layers end
    assert not any(op.name.startswith(("dense_", "gdn_", "gate_up")) for op in ops)
    dense = ShardedModel.build(H56, 4, 1, "bf16", "bf16", "bf16", 8)
    ops = iteration_ops(IterationShape(8, 8, 8, 8 * 500), dense)
    up = next(op for op in ops if op.name == "gate_up_proj")
    assert (up.count, up.shape[1]) == (54, 32768 // 4)  # squared ReLU: up only, no gate


def test_the_state_a_sequence_holds():
    # Per Mamba2 layer: the conv's last 3 inputs over x, B and C (4,096 + 2 x 8 x 128
    # channels, bf16) and a 64 x 128 state per head in fp32, split by head over TP.
    per_layer = 6144 * 3 * 2 + 64 * 64 * 128 * 4
    assert NANO.linear_state_bytes() == 23 * per_layer
    assert sequence_state_bytes_per_gpu(NANO, 2, 1) == 23 * per_layer / 2
    # The six attention layers alone keep KV: 2 KV heads of 128, K and V.
    assert NANO.kv_bytes_per_token(2) == 6 * 2 * 2 * 128 * 2


def test_the_scan_costs_follow_the_closed_form():
    sm = ShardedModel.build(NANO, 1, 1, "bf16", "bf16", "bf16", 8)
    op = mamba_prefill_op(((1000, 0), (24, 0)), sm)
    chunks = 8 + 1  # 1,000 tokens in chunks of 128, and one short chunk
    intra = 2.0 * SSD_CHUNK * chunks * SSD_CHUNK * (8 * 128 + 64 * 64)
    assert op.flops == pytest.approx(intra + 4.0 * 1024 * 64 * 128 * 64)
    assert (op.family, op.count) == ("mamba2", 23)
    # A decode step reads and writes each sequence's whole state: it grows with the batch.
    one, many = linear_decode_op(1, sm), linear_decode_op(64, sm)
    assert many.bytes == pytest.approx(64 * one.bytes)
    assert one.bytes > 2 * 64 * 64 * 128 * 4
    timer = RooflineTimer(get_gpu("h100-sxm"), RooflineEfficiency())
    assert timer.op_time(many) > timer.op_time(one) > 0


def test_closed_loop_completes_conserves_tokens_and_frees_kv_and_state():
    sim, result = run_hybrid_closed_loop("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 1)
    assert result.summary["kv_cache"]["state_blocks_per_sequence"] > 0
    for engine in (e for rep in sim.replicas for e in rep.engines):
        assert engine.scheduler.kv.used == 0


def test_the_summary_names_the_mamba_scan_as_an_estimate():
    sim = Simulation(load(BENCH, ["model.name=nemotron-3-nano", "hardware.gpu=h200",
                                  "parallelism.tp=1", "model.weight_dtype=bf16", "model.activation_dtype=bf16"]))
    assert "Mamba2 scan" in sim.kernel_times


def test_latent_moe_runs_its_experts_on_the_latent():
    super_ = get_model("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    # 120B in total, 12B active without the input embedding (A12B).
    assert super_.param_count / 1e9 == pytest.approx(120.67, abs=0.01)
    assert (super_.active_param_count - super_.vocab_size * super_.hidden_size) / 1e9 == pytest.approx(12.2, abs=0.05)
    sm = ShardedModel.build(super_, 2, 1, "fp8", "fp8", "fp8", 8)
    ops = iteration_ops(IterationShape(64, 64, 64, 64 * 1000), sm)
    moe = next(op for op in ops if op.family == "moe")
    assert (moe.count, moe.shape[1], moe.shape[2]) == (40, 1024, 2688 // 2)  # latent in, width split by TP
    latent_in = next(op for op in ops if op.name == "moe_latent_in")
    latent_out = next(op for op in ops if op.name == "moe_latent_out")
    assert latent_in.shape == (64, 1024, 4096) and latent_out.shape == (64, 4096, 1024)
    assert latent_in.count == latent_out.count == 40
    shared = next(op for op in ops if op.name == "shared_expert_gate_up")
    assert shared.shape == (64, 2 * 2688 // 2, 4096)  # the shared expert stays on the hidden state
    # The H200 tables time Super's latent experts (FlashInfer's CUTLASS FP8 MoE in vLLM 0.24).
    sim = Simulation(load(BENCH, ["model.name=nemotron-3-super", "hardware.gpu=h200", "parallelism.tp=2",
                                  "model.weight_dtype=fp8", "model.kv_dtype=fp8"]))
    assert sim.batch_pool.cost.timer.source_of(moe) == "profile"


@pytest.mark.parametrize(("model_id", "precision"), [
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "bf16"), ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", "fp8"),
    ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", "fp4")])
def test_each_release_states_its_format(model_id, precision):
    """NVIDIA names the format in every Nemotron 3 release; `-BF16` reads as one too."""
    from simulator.validation.precision import checkpoint_precision

    assert checkpoint_precision(model_id) == precision
