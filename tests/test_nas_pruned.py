"""Llama-Nemotron's NAS-pruned Llama (Llama-3.3-Nemotron-Super-49B): layers without attention,
per-layer MLP widths, and what they take in the iteration's ops and the KV cache."""

from __future__ import annotations

import json

import pytest

from simulator.api import load
from simulator.cost.ops import IterationShape, ShardedModel, iteration_ops
from simulator.errors import CatalogError
from simulator.models import MODEL_CATALOG, get_model, load_hf_config
from simulator.simulation import Simulation
from tests.test_linear_attention import BENCH

SUPER49 = MODEL_CATALOG["nemotron-super-49b"]
_ATTN = {"n_heads_in_group": 8, "no_op": False, "replace_with_linear": False}
_SKIP = {"n_heads_in_group": None, "no_op": True, "replace_with_linear": False}
# nvidia/Llama-3_3-Nemotron-Super-49B-v1's config.json: 49 attention blocks, 31 without; the
# MLP widths (ffn_mult) of its 80 blocks, counted by value.
_MULTS = [5.25] * 49 + [1.3125] * 10 + [1.0] * 8 + [2.625] * 6 + [0.5] * 6 + [3.28125]
CONFIG = {
    "_name_or_path": "llama_nemotron_super", "architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas",
    "hidden_size": 8192, "num_attention_heads": 64, "num_hidden_layers": 80, "vocab_size": 128256,
    "max_position_embeddings": 131072, "tie_word_embeddings": False, "intermediate_size": None,
    "block_configs": [{"attention": _ATTN if i < 49 else _SKIP, "ffn": {"ffn_mult": m, "no_op": False}}
                      for i, m in enumerate(_MULTS)],
}
KEEP = {"name", "hf_id", "aliases", "published_params_b", "published_active_params_b", "native_fp8"}


def _write(tmp_path, cfg):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_the_49b_has_its_published_size_and_reads_from_its_config(tmp_path):
    assert SUPER49.param_count / 1e9 == pytest.approx(49.87, abs=0.01)
    assert (SUPER49.attention_layers, SUPER49.kv_layers, SUPER49.mixer_free_layers) == (49, 49, 31)
    assert load_hf_config(_write(tmp_path, CONFIG)).model_dump(exclude=KEEP) == SUPER49.model_dump(exclude=KEEP)
    for name in ("nvidia/Llama-3_3-Nemotron-Super-49B-v1", "nvidia/Llama-3_3-Nemotron-Super-49B-v1-FP8"):
        assert get_model(name) is SUPER49


@pytest.mark.parametrize(("block", "says"), [
    ({"attention": {**_ATTN, "replace_with_linear": True}, "ffn": {"ffn_mult": 1.0}}, "one linear layer"),
    ({"attention": _ATTN, "ffn": {"ffn_mult": 1.0, "no_op": True}}, "drop an MLP"),
    ({"attention": {**_ATTN, "n_heads_in_group": 4}, "ffn": {"ffn_mult": 1.0}}, "one GQA grouping"),
])
def test_blocks_it_cannot_model_are_refused(tmp_path, block, says):
    with pytest.raises(CatalogError, match=r"config\.json") as err:
        load_hf_config(_write(tmp_path, {**CONFIG, "block_configs": [block, *CONFIG["block_configs"][1:]]}))
    assert says in str(err.value)


def test_only_the_attention_layers_run_attention_and_keep_kv():
    sm = ShardedModel.build(SUPER49, 2, 1, "bf16", "bf16", "bf16", 8)
    ops = {op.name: op for op in iteration_ops(IterationShape(40, 8, 4, 4 * 500, ((32, 0),)), sm)}
    assert ops["qkv_proj"].count == ops["attn_decode"].count == ops["attn_prefill"].count == 49
    assert ops["input_norm"].count == 49
    assert ops["gate_up_proj"].count == ops["post_attn_norm"].count == 80
    assert ops["tp_allreduce"].count == 49 + 80
    assert SUPER49.kv_bytes_per_token(2) == 49 * 2 * 8 * 128 * 2


def test_a_closed_loop_runs_to_completion():
    sim = Simulation(load(BENCH, ["model.name=nemotron-super-49b", "hardware.gpu=h100-sxm", "parallelism.tp=2",
                                  "model.weight_dtype=bf16", "workload.num_requests=24",
                                  "workload.arrival.concurrency=8", "cost_model.backend=roofline"]))
    req = sim.run().requests
    assert (req["status"] == "completed").all()
    for engine in (e for rep in sim.replicas for e in rep.engines):
        assert engine.scheduler.kv.used == 0
