"""vLLM's Marlin MoE chosen over the default kernel (`model.expert_kernel: marlin`).

InferenceX's gpt-oss scripts for H100/H200 export VLLM_MXFP4_USE_MARLIN=1 from vLLM 0.13.0
on; vLLM 0.12 and later default to OpenAI's Triton MoE on Hopper, earlier releases fell
back to Marlin (no triton_kernels shipped). The shipped profiles carry Marlin's own rows
(label w4a16m) for other models' expert shapes, which run at about half the tensor rate of
gpt-oss's Triton rows at prefill sizes. On Hopper, Marlin at gpt-oss's shape reads that
shape's Triton rows (its memory-bound decode, where InferenceMAX's Marlin runs measured
TPOT within 5% of them), bounded below by Marlin's own compute rate (its prefill); Marlin
also pads the experts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from calibration.profile import load_profile
from simulator.api import load
from simulator.cost.calibrated.families import FAMILY_ADAPTERS
from simulator.cost.ops import IterationShape, moe_table_dtype, token_ops
from simulator.errors import ConfigError
from simulator.simulation import Simulation
from simulator.validation.measured import read_measured

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scenarios" / "benchmark-concurrency.yaml"
GPT_OSS = ["model.name=gpt-oss-120b", "model.weight_dtype=bf16", "model.activation_dtype=bf16",
           "model.expert_weight_dtype=fp4", "hardware.gpu=h200", "cost_model.frontend_latency_ms=0"]


def test_marlin_has_its_own_label_only_for_four_bit_weights_under_16_bit_inputs():
    assert moe_table_dtype("fp4", "bf16", "marlin") == "w4a16m"
    assert moe_table_dtype("fp4", "bf16") == "w4a16"
    assert moe_table_dtype("fp4", "fp8", "marlin") == "w4a8"
    assert moe_table_dtype("bf16", "bf16", "marlin") == "bf16"


@pytest.mark.parametrize("gpu", ["h100_sxm", "h200_sxm"])
def test_the_shipped_hopper_profiles_carry_marlin_rows(gpu):
    profile = load_profile(ROOT / "calibration" / "profiles" / f"{gpu}-vllm.json")
    rows = [r for r in profile.table("moe").rows if r[7] == "w4a16m"]
    assert len(rows) > 400
    assert any("marlin" in k for k in profile.metadata.versions["kernels.moe"].split(", "))


def test_marlin_on_hopper_reads_the_same_shape_rows_and_pads_the_experts():
    """Decode steps (memory-bound) read the default kernel's rows at gpt-oss's shape; a long
    prefill is bounded by Marlin's own compute rate, about half the Triton kernel's."""
    auto = Simulation(load(BENCH, GPT_OSS))
    marlin = Simulation(load(BENCH, [*GPT_OSS, "model.expert_kernel=marlin"]))
    moe = {op.name: op for op in token_ops(64, marlin.sharded)}["fused_moe"]
    assert moe.shape[-1] == "w4a16m" and moe.dtype == "bf16"
    decode = IterationShape(32, 32, 32, 32 * 1024)
    assert marlin.cost.iteration_time(decode) == auto.cost.iteration_time(decode)
    prefill = IterationShape(8192, 1, 0, 0, ((8192, 0),))
    assert 1.5 * auto.cost.iteration_time(prefill) < marlin.cost.iteration_time(prefill)
    assert marlin.cost.iteration_time(prefill) < 2.2 * auto.cost.iteration_time(prefill)
    assert marlin.cost.timer.source_of(moe) == "profile-standin"  # what `simulate explain` prints
    long_moe = {op.name: op for op in token_ops(8192, marlin.sharded)}["fused_moe"]
    assert marlin.cost.timer.source_of(long_moe) == "profile-standin-rate"
    # Marlin pads gpt-oss-120b's experts to 2944 x 3072 (the Triton path keeps 2880 x 2880).
    assert marlin.memory.weights_gib > auto.memory.weights_gib + 4


def _moe_times(sim, tokens):
    model = sim.cost.timer.models["moe"]
    op = {o.name: o for o in token_ops(tokens, sim.sharded)}["fused_moe"]
    return model, op, model.predict(op)


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200"])
def test_marlins_compute_floor_follows_its_own_rows(gpu):
    """The floor: the padded FLOPs at the donor's measured rate (the Marlin shape of the
    nearest hidden size, at the same expert width per GPU and tokens per expert). It never
    lowers a time, binds only where compute does (prefill), and lands between the Triton
    kernel's time and the donor's slowest rate."""
    sets = [*GPT_OSS, f"hardware.gpu={gpu}", "cost_model.sustained_tensor_rate=false"]
    for tp in (2, 8):  # gpt-oss-120b under Marlin's padding needs two H100s
        auto = Simulation(load(BENCH, [*sets, f"parallelism.tp={tp}"]))
        marlin = Simulation(load(BENCH, [*sets, f"parallelism.tp={tp}", "model.expert_kernel=marlin"]))
        for tokens, low, high in ((1, 1.0, 1.0), (16, 1.0, 1.0), (8192, 1.5, 2.4)):
            _, _, t_auto = _moe_times(auto, tokens)
            model, op, t_marlin = _moe_times(marlin, tokens)
            assert low * t_auto <= t_marlin * (1 + 1e-9) and t_marlin <= high * t_auto * (1 + 1e-9), (tp, tokens)
        key, coords = model.adapter.locate(op)
        donor = model.adapter.rate_donor(key, tuple(model.trees), "hopper")
        assert donor == (3584, 16, 896, 1, "w4a16m", "power_law_1.2")  # the same routing as gpt-oss
        point = model.adapter.donor_point(key, coords, donor)
        assert point[0] == {2: 1536, 8: 384}[tp]  # Marlin's padded width per GPU
        assert point[1] == pytest.approx(8192 * 4 / 128 * 896 / 16)  # tokens per expert kept
        rate = model.adapter.eq_op(*model.adapter.padded(key, coords)).flops / t_marlin
        assert 100e12 < rate < 300e12  # Marlin's mma.sync rate on Hopper, not wgmma's


def test_no_floor_where_a_kernel_reads_its_own_rows():
    moe = FAMILY_ADAPTERS["moe"]
    r = "power_law_1.2"
    keys = ((3584, 16, 896, 1, "w4a16m", r), (2880, 4, 128, 1, "w4a16", r))
    assert moe.rate_donor((2880, 4, 128, 1, "w4a16", r), keys, "hopper") is None
    assert moe.rate_donor((2880, 4, 128, 1, "w4a16m", r), keys, "blackwell") is None
    assert moe.rate_donor((2880, 4, 128, 1, "w4a16m", r), keys, "hopper") == (3584, 16, 896, 1, "w4a16m", r)
    assert moe.rate_donor((2880, 4, 128, 2, "w4a16m", r), keys, "hopper") is None  # another EP size
    assert moe.rate_donor((3584, 16, 896, 1, "w4a16m", r), keys, "hopper") is None  # Marlin's own rows
    # Another routing's rows donate only where the wanted one has none.
    both = (*keys, (2880, 4, 128, 1, "w4a16m", "power_law_1.01"))
    assert moe.rate_donor((4096, 8, 128, 1, "w4a16m", r), both, "hopper") == (3584, 16, 896, 1, "w4a16m", r)
    assert moe.rate_donor((4096, 8, 128, 1, "w4a16m", "power_law_1.01"), both, "hopper")[5] == "power_law_1.01"


@pytest.mark.parametrize(("gpu", "release", "kernel"), [
    ("h200", "0.11.2", "marlin"), ("h100-sxm", "0.10.1", "marlin"), ("h200", "0.12.0", "auto"),
    ("h200", "0.18.0", "auto"), ("h200", None, "auto"), ("b200", "0.11.2", "auto"),
])
def test_releases_before_0_12_ran_marlin_on_hopper(gpu, release, kernel):
    """vLLM vendors OpenAI's triton_kernels from 0.12.0 on; before, the wheel and image had
    no copy and gpt-oss's MXFP4 experts fell back to Marlin on Hopper."""
    from simulator.cost.releases import release_expert_kernel
    from simulator.hardware import get_gpu

    assert release_expert_kernel("auto", "fp4", "bf16", get_gpu(gpu), release) == kernel
    assert release_expert_kernel("marlin", "fp4", "bf16", get_gpu(gpu), "0.18.0") == "marlin"
    assert release_expert_kernel("auto", "fp8", "bf16", get_gpu("h200"), "0.11.2") == "auto"
    sets = [*GPT_OSS, f"hardware.gpu={gpu}", "parallelism.tp=2"] + (
        [f"cost_model.engine_version={release}"] if release else [])
    sim = Simulation(load(BENCH, sets))
    moe = {op.name: op for op in token_ops(64, sim.sharded)}["fused_moe"]
    assert (moe.shape[-1] == "w4a16m") == (kernel == "marlin")


def test_marlin_elsewhere_reads_marlin_rows_of_other_shapes():
    """Off Hopper the default kernel at gpt-oss's shape is another one (FlashInfer's on
    Blackwell), so Marlin keeps its own rows, scaled across shapes: slower at prefill."""
    on_b200 = [*GPT_OSS, "hardware.gpu=b200"]
    auto = Simulation(load(BENCH, on_b200))
    marlin = Simulation(load(BENCH, [*on_b200, "model.expert_kernel=marlin"]))
    prefill = IterationShape(8192, 1, 0, 0, ((8192, 0),))
    assert marlin.cost.iteration_time(prefill) > 1.1 * auto.cost.iteration_time(prefill)


def test_only_hopper_marlin_has_a_same_shape_stand_in():
    moe = FAMILY_ADAPTERS["moe"]
    key = (2880, 4, 128, 1, "w4a16m")
    assert moe.same_shape_standin(key, "hopper") == (2880, 4, 128, 1, "w4a16")
    assert moe.same_shape_standin(key, "blackwell") is None
    assert moe.same_shape_standin((2880, 4, 128, 1, "w4a16"), "hopper") is None


@pytest.mark.parametrize("sets", [
    ["model.name=llama-3.1-8b", "model.expert_kernel=marlin"],
    [*GPT_OSS, "model.expert_weight_dtype=fp8", "model.expert_kernel=marlin"],
])
def test_marlin_refuses_what_it_cannot_run(sets):
    with pytest.raises(ConfigError, match=r"model\.expert_kernel"):
        Simulation(load(BENCH, sets))


def test_the_inferencex_hopper_recipe_selects_marlin_from_vllm_0_13(tmp_path):
    """A row naming vLLM 0.13 or later gets Marlin by the script's switch, and so does a row
    naming no release (the latest script); an older release keeps vLLM's default kernel,
    which for 0.11.2 is Marlin again (the release's own fallback, resolved in the
    simulation: test above)."""
    src = tmp_path / "gptoss.csv"
    src.write_text("system,model,precision,tp_size,isl,osl,concurrency,vllm_version,ttft_ms,tpot_ms\n"
                   + "".join(f"h200_sxm,openai/gpt-oss-120b,fp4,1,8192,1024,4,{v},380,5\n"
                             for v in ("0.18.0", "", "0.11.2")))
    newer, unnamed, older = read_measured([src]).runs
    assert "model.expert_kernel=marlin" in newer.overrides and "model.expert_kernel=marlin" in unnamed.overrides
    assert not any("expert_kernel" in o for o in older.overrides)
    assert all("scheduler.async_scheduling=true" in r.overrides for r in (newer, unnamed, older))


def test_explain_names_marlins_prefill_bound():
    """`simulate explain` shows where an op's time comes from in decode, and in prefill too
    where that differs: Marlin's decode from the stand-in rows, its prefill from its rate."""
    from simulator.explain import explain

    e = explain(load(BENCH, [*GPT_OSS, "model.expert_kernel=marlin", "parallelism.tp=2"]), batch=4, prefill=8192)
    assert e.sources["fused_moe"] == "profile-standin (prefill: profile-standin-rate)"
    assert e.sources["qkv_proj"] == "profile"


def test_the_triton_kernel_can_be_named_for_an_older_release():
    """A vLLM 0.11 install with triton_kernels added by hand ran OpenAI's Triton MoE: naming
    it keeps the default rows (no Marlin padding or rate) whatever the release; elsewhere
    it is refused."""
    old = [*GPT_OSS, "parallelism.tp=2", "cost_model.engine_version=0.11.2"]
    marlin = Simulation(load(BENCH, old))
    triton = Simulation(load(BENCH, [*old, "model.expert_kernel=triton"]))
    current = Simulation(load(BENCH, [*GPT_OSS, "parallelism.tp=2"]))
    prefill = IterationShape(8192, 1, 0, 0, ((8192, 0),))
    assert triton.cost.iteration_time(prefill) == current.cost.iteration_time(prefill)
    assert triton.cost.iteration_time(prefill) < 0.75 * marlin.cost.iteration_time(prefill)
    assert triton.memory.weights_gib == current.memory.weights_gib < marlin.memory.weights_gib
    for sets in ([*GPT_OSS, "hardware.gpu=b200"], ["model.name=llama-3.1-8b"],
                 [*GPT_OSS, "model.expert_weight_dtype=fp8"]):
        with pytest.raises(ConfigError, match=r"model\.expert_kernel"):
            Simulation(load(BENCH, [*sets, "model.expert_kernel=triton"]))
