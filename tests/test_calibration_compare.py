"""`simulate calibrate compare`: a profile's kernel times against a reference's, by regime."""

from __future__ import annotations

import pytest
from test_calibration import synthetic_profile

from calibration.compare import compare
from calibration.profile import CalibrationError, Profile, make_table


def _scaled(profile: Profile, factor: float, families: tuple[str, ...]) -> Profile:
    tables = {}
    for fam, table in profile.tables.items():
        if fam in families:
            n = table.columns.index("median_us")
            tables[fam] = make_table(fam, [[*r[:n], r[n] * factor, *r[n + 1:]] for r in table.rows])
    return profile.model_copy(update={"tables": tables})


def test_a_uniformly_slower_profile_reads_that_ratio_in_every_regime():
    ref = synthetic_profile()
    slower = _scaled(ref, 1.25, ("gemm", "attn_decode", "attn_prefill"))
    out = compare(slower, ref)
    assert {r.family for r in out} == {"gemm", "attn_decode", "attn_prefill"}
    for r in out:
        assert r.median == pytest.approx(1.25, rel=1e-6) and r.p10 <= r.median <= r.p90
    gemm = [r.regime for r in out if r.family == "gemm"]
    assert gemm == ["bf16, M ≤ 64", "bf16, M 65–1024", "bf16, M > 1024"]
    assert sum(r.rows for r in out if r.family == "gemm") == len(ref.table("gemm").rows)


def test_profiles_without_a_common_family_are_an_error():
    ref = synthetic_profile()
    only_gemm = _scaled(ref, 1.0, ("gemm",))
    only_decode = _scaled(ref, 1.0, ("attn_decode",))
    with pytest.raises(CalibrationError, match="share no op family"):
        compare(only_gemm, only_decode)


def test_compare_command_prints_the_shipped_measured_profile_against_the_tables(capsys):
    from calibration.cli import compare_cmd

    compare_cmd("h200_sxm-measured", against="h200_sxm-vllm")
    out = capsys.readouterr().out
    assert "bf16, M ≤ 64" in out and "measured ÷ reference" in out


def test_our_measurement_borrows_the_shipped_tables_only_for_what_it_lacks():
    """A GPU profile of ours has no fused-MoE rows and, from one GPU, no collectives: those
    come from the shipped tables of the same GPU; what it measured stays its own."""
    from test_calibration import synthetic_profile

    from calibration.profile import load_profile
    from simulator.cost import CostModelConfig
    from simulator.cost.calibrated import CalibratedTimer, calibrated_backend
    from simulator.cost.ops import Op
    from simulator.hardware import get_gpu

    h200 = get_gpu("h200")
    ours = CalibratedTimer(load_profile("h200_sxm-measured"), h200)
    tables = calibrated_backend(h200, CostModelConfig(), "h200_sxm-vllm")
    allreduce = Op("tp_allreduce", "allreduce", 0.0, 8 * 2**20, 1, (8 * 2**20, 4, "intra"), "bf16")
    assert ours.source_of(allreduce) == "shipped:h200_sxm-vllm"
    assert ours.op_time(allreduce) == tables.op_time(allreduce)
    gemm = Op("gemm", "gemm", 2.0 * 64 * 8192 * 8192, 2.0 * 8192 * 8192, 1, (64, 8192, 8192), "bf16")
    assert ours.source_of(gemm) == "profile" and ours.op_time(gemm) != tables.op_time(gemm)
    # No stand-in for a shipped profile itself, for a CPU profile, or where no tables ship.
    assert tables.shipped_for("allreduce") is None
    assert CalibratedTimer(synthetic_profile(gpu=None, collectives=False), h200).shipped_for("allreduce") is None
    l4 = synthetic_profile(gpu="l4", collectives=False)
    assert CalibratedTimer(l4, get_gpu("l4")).source_of(allreduce) == "roofline-default"


@pytest.mark.parametrize("name, gpu", [("h200_sxm-measured", "h200"), ("h100_sxm-measured", "h100-sxm")])
def test_the_shipped_measured_profiles_carry_their_provenance(name, gpu):
    """Our own GPU runs, with what they ran on and how they were timed."""
    from calibration.profile import load_profile

    meta = load_profile(name).metadata
    assert (meta.source, meta.gpu, meta.device_kind) == ("measured", gpu, "cuda")
    assert meta.driver == "580.159.04" and meta.cuda == "13.0" and meta.torch.startswith("2.11.0")
    assert meta.date.startswith("2026-11-28") and meta.models == ["llama-3.1-70b", "llama-3.1-8b", "gpt-oss-120b"]
    assert meta.method.timer == "cuda-events" and meta.method.graph_below_us == 300.0
    assert meta.method.graphed_points > 3000 and not meta.method.truncated
    assert meta.fit["gemm"].cv_median_ape_pct < 5.0 and meta.fit["attn_decode"].cv_median_ape_pct < 5.0
    assert "allreduce" in meta.not_measured  # one GPU: collectives come from the shipped tables
    # Made with the whole method: its own sustained GEMM rates and the layer-power step's fractions.
    own = {"h200_sxm-measured": ({"bf16": 0.87, "fp8": 0.84}, 0.71, 0.58),
           "h100_sxm-measured": ({"bf16": 0.88, "fp8": 0.84}, 0.75, 0.63)}[name]
    assert (meta.sustained_fraction, meta.sustained_attention_fraction, meta.collective_wait_power_fraction) == own
    assert any(n.startswith("sustained: bf16 8192x28672x8192") for n in meta.notes)
    assert any(n.startswith("layer power: Llama-3.1-70B-shaped fp8 prefill layer") for n in meta.notes)


def test_our_fp8_gemms_pay_the_input_quantisation_vllm_runs_before_them():
    """torch._scaled_mm alone is what we time; vLLM quantises the 16-bit input first (one
    memory-bound kernel: 2 bytes read and 1 written per element), which the tables include."""
    from calibration.profile import load_profile
    from simulator.cost import CostModelConfig
    from simulator.cost.calibrated import CalibratedTimer, calibrated_backend
    from simulator.cost.ops import Op, elementwise
    from simulator.hardware import get_gpu

    h200 = get_gpu("h200")
    ours = CalibratedTimer(load_profile("h200_sxm-measured"), h200)

    def gemm(dtype: str) -> Op:
        m, n, k = 32, 8192, 8192
        return Op("gemm", "gemm", 2.0 * m * n * k, 1.0 * n * k, 1, (m, n, k), dtype)

    quant = ours._table_time(elementwise("fp8_input_quant", 3.0 * 32 * 8192, 1))
    assert 1e-6 < quant < 2e-5
    assert ours.op_time(gemm("fp8")) == pytest.approx(ours._table_time(gemm("fp8")) + quant)
    assert ours.op_time(gemm("bf16")) == ours._table_time(gemm("bf16"))
    tables = calibrated_backend(h200, CostModelConfig(), "h200_sxm-vllm")
    assert tables.op_time(gemm("fp8")) == tables._table_time(gemm("fp8"))


def test_a_reference_gpu_without_fp8_compares_the_other_dtypes():
    """The H100 profile's FP8 GEMMs have no A100 counterpart (no FP8 tensor cores): they are
    left out rather than ending the comparison."""
    from calibration.profile import load_profile

    rows = compare(load_profile("h100_sxm-measured"), load_profile("a100_sxm-vllm"))
    gemm = [r.regime for r in rows if r.family == "gemm"]
    assert gemm and not any(g.startswith("fp8") for g in gemm)
    assert any(g.startswith("bf16") for g in gemm)


def test_dtypes_the_reference_never_measured_are_listed_not_ratioed(capsys):
    """A profile with FP8 rows against one without (a CPU's, an A100's) printed FP8 ratios
    against a roofline peak the reference never measured; they are now left out and named."""
    from calibration.compare import unmatched
    from calibration.profile import load_profile
    from simulator.cli import main

    mine, ref = load_profile("h100_sxm-measured"), load_profile("a100_sxm-vllm")
    fp8 = sum(1 for r in mine.tables["gemm"].rows if r[3] == "fp8")
    assert unmatched(mine, ref) == {("gemm", "fp8"): fp8} and fp8 > 0
    assert unmatched(mine, mine) == {}
    main(["calibrate", "compare", "h100_sxm-measured", "--against", "a100_sxm-vllm"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"not compared (the reference has no rows of the dtype): gemm fp8 ({fp8} rows)" in out


def test_fused_moe_regimes_keep_the_routings_apart():
    """The two routings' rows differ most at decode batches, so each is its own regime."""
    from calibration.profile import load_profile

    out = compare(load_profile("b200_sxm-vllm"), load_profile("b300_sxm-vllm"))
    moe = [r.regime for r in out if r.family == "moe"]
    assert "fp4, power law 1.01, tokens ≤ 64" in moe and "fp4, power law 1.2, tokens ≤ 64" in moe
    assert all(", power law 1.01, " in r or ", power law 1.2, " in r for r in moe)
