"""Kernels of older vLLM releases (simulator/cost/releases.py): FA3's FP8 decode attention
before its decode tiles were tuned ran at the BF16 kernel's speed, and large TP all-reduces
before symmetric-memory all-reduce ran on NCCL."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from simulator.api import load
from simulator.cost.ops import token_ops
from simulator.cost.releases import (
    CUSTOM_ALLREDUCE_BUFFER_BYTES,
    release_allreduce,
    untuned_fp8_decode,
)
from simulator.errors import ConfigError
from simulator.hardware import get_gpu
from simulator.simulation import Simulation
from simulator.validation import run_validation

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"
FAST = ["cost_model.backend=roofline"]


def _sim(*sets: str) -> Simulation:
    return Simulation(load(BENCH, [*FAST, *sets]))


@pytest.mark.parametrize(("gpu", "version", "kv", "untuned"), [
    ("h200", "0.10.2", "fp8", True),
    ("h100-sxm", "0.11.0", "fp8", True),  # head_dim 128 was tuned from 0.11.1
    ("h200", "0.11.1", "fp8", False),
    ("h200", "0.19.0", "fp8", False),
    ("h200", None, "fp8", False),  # no release named: the tables' own
    ("h200", "0.10.2", "bf16", False),  # a BF16 cache ran the BF16 kernel anyway
    ("b200", "0.10.2", "fp8", False),  # Blackwell runs FlashInfer, not FA3
    ("l40s", "0.10.2", "fp8", False),
])
def test_which_layouts_ran_the_untuned_fp8_decode_kernel(gpu, version, kv, untuned):
    sim = _sim(f"hardware.gpu={gpu}", f"model.kv_dtype={kv}", "parallelism.tp=4")
    assert untuned_fp8_decode(sim.sharded, get_gpu(gpu), version) is untuned


def test_head_dim_64_was_tuned_a_release_earlier_and_mla_is_untouched():
    sim = _sim("model.name=gpt-oss-120b", "model.kv_dtype=fp8", "model.expert_weight_dtype=fp4",
               "model.weight_dtype=bf16", "model.activation_dtype=bf16")
    assert sim.sharded.head_dim == 64
    h200 = get_gpu("h200")
    assert untuned_fp8_decode(sim.sharded, h200, "0.10.2")
    assert not untuned_fp8_decode(sim.sharded, h200, "0.11.0")
    mla = _sim("model.name=deepseek-v3", "model.kv_dtype=fp8", "parallelism.tp=8")
    assert mla.sharded.kv_lora and not untuned_fp8_decode(mla.sharded, h200, "0.10.2")


def test_an_older_release_times_fp8_decode_attention_as_bf16_but_keeps_the_fp8_cache():
    """Decode attention takes the BF16 cache's time; the KV capacity stays the FP8 cache's;
    nothing else in the step changes."""
    old = _sim("model.kv_dtype=fp8", "cost_model.engine_version='0.10.2'")
    new = _sim("model.kv_dtype=fp8")
    bf16 = _sim("model.kv_dtype=bf16")
    n, ctx = 64, 64 * 4096
    assert old.cost.decode_attention_time(n, ctx) == pytest.approx(bf16.cost.decode_attention_time(n, ctx))
    assert old.cost.decode_attention_time(n, ctx) > 1.5 * new.cost.decode_attention_time(n, ctx)
    assert old.memory.capacity_tokens == new.memory.capacity_tokens > 1.9 * bf16.memory.capacity_tokens
    assert old.cost.token_time(n) == new.cost.token_time(n)
    # The stretch path (vectorised under the roofline) agrees with the single step.
    steps = old.cost.decode_step_times(n, ctx, 8)
    assert steps[0] == pytest.approx(old.cost.decode_step_times(n, ctx, 1)[0])
    assert "BF16 kernel's speed" in old.kernel_times and "BF16" not in new.kernel_times


@pytest.mark.parametrize("value", ["0.1", "'latest'"])
def test_a_release_that_is_not_a_release_number_is_refused_with_the_fix(value):
    with pytest.raises(ConfigError) as err:
        load(BENCH, [f"cost_model.engine_version={value}"])
    text = err.value.render()
    assert "engine_version" in text and ("quote" in text or "MAJOR.MINOR" in text)


def test_the_users_release_wins_over_the_harness_recipe(tmp_path):
    """An InferenceMAX Llama row takes its template's v0.10.2; --engine-version (and a row's
    own version column) name another release, which then decides the kernel."""
    src = tmp_path / "sweep.csv"
    src.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms,vllm_version\n"
                   "h200_sxm,meta-llama/Llama-3.1-70B,fp8,8,1024,8192,16,80.0,10.0,\n"
                   "h200_sxm,meta-llama/Llama-3.1-70B,fp8,8,1024,8192,16,80.0,10.0,0.19.0\n")
    _, out = run_validation([src], BENCH, FAST, tmp_path / "a", rounds=1)
    recipe, own = pd.read_csv(out / "validation.csv")["pred_tpot_ms"]
    assert recipe > own * 1.02
    _, out = run_validation([src], BENCH, FAST, tmp_path / "b", rounds=1, engine_version="0.19.0")
    named, own = pd.read_csv(out / "validation.csv")["pred_tpot_ms"]
    assert named == pytest.approx(own)


def test_explain_times_and_names_the_older_kernel():
    """`simulate explain` sums to the run's step time under the older kernel, and says why."""
    from simulator.cost.ops import IterationShape
    from simulator.explain import explain

    sets = [*FAST, "model.kv_dtype=fp8", "cost_model.engine_version=0.10.2"]
    e = explain(load(BENCH, sets), batch=32, context=4096, prefill=1024)
    cost = Simulation(load(BENCH, sets)).cost
    assert sum(e.decode.values()) == pytest.approx(cost.iteration_time(IterationShape(32, 32, 32, 32 * 4096)))
    assert e.decode["attn_decode"] == pytest.approx(cost.decode_attention_time(32, 32 * 4096))
    assert any("BF16 kernel's speed" in n and "0.10.2" in n for n in e.notes)
    assert not any("BF16" in n for n in explain(load(BENCH, FAST), batch=32, context=4096, prefill=1024).notes)


def test_the_attention_share_diagnostic_reads_each_rows_own_settings(tmp_path):
    """benchmarks/attention_share.py (which docs/fidelity.md cites): a longer context or an
    older release's FP8 decode kernel gives attention a larger share of the step."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("attention_share", ROOT / "benchmarks" / "attention_share.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    src = tmp_path / "sweep.csv"
    src.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms,vllm_version\n"
                   "h200_sxm,meta-llama/Llama-3.1-70B,fp8,4,1024,1024,32,100.0,10.0,0.19.0\n"
                   "h200_sxm,meta-llama/Llama-3.1-70B,fp8,4,1024,8192,32,100.0,10.0,0.19.0\n"
                   "h200_sxm,meta-llama/Llama-3.1-70B,fp8,4,1024,8192,32,100.0,10.0,\n")
    short, long, old = tool.attention_shares(pd.read_csv(src), src, BENCH)
    assert 0 < short < long < old < 1


@pytest.mark.parametrize(("gpu", "version", "tp", "pinned"), [
    ("h200", "0.10.2", 8, True),
    ("h100-sxm", "0.10.2", 2, True),
    ("b200", "0.10.1", 4, True),
    ("h200", "0.11.0", 8, False),  # symmetric-memory all-reduce on by default from here
    ("h200", None, 8, False),  # no release named: the tables' own dispatch
    ("h200", "0.10.2", 1, False),  # nothing to all-reduce
    ("rtx-pro-6000", "0.10.2", 4, False),  # PCIe: no multimem, the tables' rows are its own
    ("a100-80gb-sxm", "0.10.2", 8, False),  # Ampere: no symmetric-memory path in any release
])
def test_which_layouts_ran_nccl_for_large_all_reduces(gpu, version, tp, pinned):
    sim = _sim(f"parallelism.tp={tp}")
    sharded = release_allreduce(sim.sharded, get_gpu(gpu), version)
    assert (sharded.allreduce_nccl_from == CUSTOM_ALLREDUCE_BUFFER_BYTES) is pinned
    assert (sharded is sim.sharded) is not pinned


def test_an_older_release_times_large_all_reduces_by_the_nccl_rows():
    """H200 TP8, 1,024 tokens: each all-reduce moves 16 MiB, which vLLM 0.24 (the tables)
    sends to symmetric memory (87.2 us) and 0.10.2 to NCCL (121.1 us): 160 of them a step.
    A 256-token step's 4 MiB fits the custom all-reduce in both and does not move."""
    sets = ["parallelism.tp=8", "cost_model.backend=auto"]
    old = Simulation(load(BENCH, [*sets, "cost_model.engine_version='0.10.2'"]))
    new = Simulation(load(BENCH, sets))
    [op] = [o for o in token_ops(1024, old.cost.sharded) if o.family == "allreduce" and o.bytes > 1e6]
    assert op.name == "tp_allreduce:nccl" and op.count == 160 and op.bytes == 16 * 2**20
    assert "tp_allreduce" in {o.name for o in token_ops(1024, new.cost.sharded)}
    gap = old.cost.token_time(1024) - new.cost.token_time(1024)
    assert gap == pytest.approx(160 * (121.1 - 87.17) * 1e-6, rel=0.02)
    assert old.cost.token_time(256) == pytest.approx(new.cost.token_time(256))
