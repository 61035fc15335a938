"""Calibration: profile format, fitting, interpolation, the calibrated back end, the CLI.

The end-to-end test runs the real torch benchmark code on CPU (quick grid), writes a
profile and simulates a scenario with it; the rest uses small synthetic profiles whose
true times are known.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.profile import (
    PROFILES_DIR,
    CalibrationError,
    Profile,
    ProfileMetadata,
    load_profile,
    make_table,
    parse_profile,
    profile_json,
    resolve_profile,
    save_profile,
    shipped_profiles,
)
from simulator.cost import COST_BACKENDS, CostModelConfig, RooflineEfficiency
from simulator.cost.calibrated import (
    FAMILY_ADAPTERS,
    CalibratedTimer,
    calibrated_backend,
    cross_validate,
    fit_roofline,
)
from simulator.cost.ops import Op, ShardedModel, attn_decode_op, attn_prefill_op
from simulator.cost.roofline import RooflineTimer
from simulator.errors import CatalogError, ConfigError, ServesimError
from simulator.hardware import get_gpu
from simulator.models import get_model

H100 = get_gpu("h100-sxm")
GEMM_M = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
GEMM_NK = ((4096, 4096), (6144, 4096), (4096, 14336), (28672, 4096))
DECODE_B = (1, 2, 4, 8, 16, 32, 64)
DECODE_CTX = (128, 512, 1024, 2048, 4096, 8192)
PREFILL_Q = (16, 64, 256, 1024, 4096)
PREFILL_CTX = (0, 1024, 4096)


def _gemm_us(m, n, k):
    """A smooth, monotone stand-in for a measured GEMM: launch + memory + compute."""
    return 4.0 + (2 * m * k + 2 * k * n + 2 * m * n) / 2.8e6 + 2 * m * n * k / 7.0e8


def _decode_us(b, ctx):
    return 10.0 + 2 * b * ctx * 2 * 8 * 128 / 3.0e6 + 0.3 * b


def _prefill_us(b, q, c):
    return 12.0 + b * 4 * q * (c + q / 2) * 32 * 128 / 5.0e8


def synthetic_profile(*, gpu: str | None = "h100-sxm", collectives: bool = True) -> Profile:
    rows = {
        "gemm": [[m, n, k, "bf16", _gemm_us(m, n, k), None, None, 10] for m in GEMM_M for n, k in GEMM_NK],
        "attn_decode": [[b, c, 32, 8, 128, "bf16", _decode_us(b, c), None, None, 10]
                        for b in DECODE_B for c in DECODE_CTX],
        "attn_prefill": [[b, q, c, 32, 8, 128, "bf16", _prefill_us(b, q, c), None, None, 10]
                         for b in (1, 4) for q in PREFILL_Q for c in PREFILL_CTX],
        "elementwise": [["copy", s, "bf16", 3.0 + s / 2.5e6, None, None, 10] for s in (2**p for p in range(12, 30, 2))],
    }
    if collectives:
        rows["allreduce"] = [[s, r, "intra", "nccl", "bf16", 8.0 + r + s / 2e5, None, None, 10]
                             for r in (2, 4) for s in (2**p for p in range(10, 28, 2))]
    meta = ProfileMetadata(gpu_name="NVIDIA H100 80GB HBM3", gpu=gpu, date="2026-01-01T00:00:00Z",
                           source="measured", device_kind="cuda" if gpu else "cpu")
    return Profile(metadata=meta, tables={f: make_table(f, r) for f, r in rows.items()})


@pytest.fixture(scope="module")
def timer() -> CalibratedTimer:
    # The table itself, read back: without H100's measured sustained rate (test_sustained_rate.py).
    return CalibratedTimer(synthetic_profile(), H100, CostModelConfig(sustained_tensor_rate=False))


def _sm(tp: int = 1) -> ShardedModel:
    return ShardedModel.build(get_model("llama-3.1-8b"), tp, 1, "bf16", "bf16", "bf16", 8)


def _gemm(m, n, k, dtype="bf16"):
    return FAMILY_ADAPTERS["gemm"].eq_op((dtype,), (n, k, m))


# -- profile format ------------------------------------------------------------------------
def test_profile_round_trip(tmp_path):
    prof = synthetic_profile()
    path = save_profile(prof, tmp_path / "p.json")
    again = load_profile(path)
    assert again == prof
    assert json.loads(path.read_text())["schema_version"] == 1


def test_truncated_profile_is_a_clear_error(tmp_path):
    path = save_profile(synthetic_profile(), tmp_path / "p.json")
    path.write_text(path.read_text()[:500])
    with pytest.raises(CalibrationError, match="truncated or corrupt"):
        load_profile(path)


def test_wrong_schema_version_is_rejected():
    raw = json.loads(synthetic_profile().model_dump_json())
    raw["schema_version"] = 2
    with pytest.raises(CalibrationError, match="schema_version 2 is not supported"):
        parse_profile(json.dumps(raw))


def test_bad_columns_and_rows_are_rejected():
    raw = json.loads(synthetic_profile().model_dump_json())
    raw["tables"]["gemm"]["columns"][0] = "M"
    with pytest.raises(CalibrationError, match="columns must be"):
        parse_profile(json.dumps(raw))
    raw = json.loads(synthetic_profile().model_dump_json())
    raw["tables"]["gemm"]["rows"][3][4] = -1.0
    with pytest.raises(CalibrationError, match=r"invalid profile: tables.gemm.rows\[3\]: bad median_us"):
        parse_profile(json.dumps(raw))
    # A dtype no op reads (it passed before, and a run failed later naming no file or row).
    raw = json.loads(synthetic_profile().model_dump_json())
    raw["tables"]["gemm"]["rows"][2][3] = "fp7"
    with pytest.raises(CalibrationError, match=r"rows\[2\]: bad dtype 'fp7' \(known: bf16, "):
        parse_profile(json.dumps(raw))
    # A NaN cell: the row and column, not pydantic's union-member labels.
    raw = json.loads(synthetic_profile().model_dump_json())
    raw["tables"]["gemm"]["rows"][0][0] = float("nan")  # json.dumps writes NaN
    with pytest.raises(CalibrationError, match=r"rows\[0\]\[0\]: nan is not a finite number, text or null"):
        parse_profile(json.dumps(raw))


def test_profile_naming_an_unknown_gpu_is_rejected():
    raw = json.loads(synthetic_profile().model_dump_json())
    raw["metadata"]["gpu"] = "tpu-v9"
    with pytest.raises(CatalogError, match="tpu-v9"):
        parse_profile(json.dumps(raw))


def test_unknown_profile_name_lists_shipped_ones():
    with pytest.raises(CalibrationError) as exc:
        resolve_profile("no-such-profile")
    assert "h100_sxm-vllm" in exc.value.fix


# -- shipped profiles -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["h100_sxm-vllm", "h200_sxm-vllm", "a100_sxm-vllm", "b200_sxm-vllm", "l40s-vllm",
                                  "rtx_pro_6000_server-vllm", "gb300-vllm"])
def test_shipped_profiles(name):
    assert name in shipped_profiles()
    path = resolve_profile(name)
    # the shipped subset: expert-parallel MoE under both routings, GDN and MLA decode rows included
    assert path.stat().st_size < 6_000_000
    prof = load_profile(name)
    assert prof.metadata.source.startswith("aiconfigurator:")
    assert any("Apache-2.0" in n for n in prof.metadata.notes)
    for fam in ("gemm", "attn_prefill", "attn_decode", "allreduce"):
        fit = prof.metadata.fit[fam]
        assert fit.cv_points > 0 and fit.cv_median_ape_pct < 10.0
    # Every shape the simulator asks for Llama-3.1-8B/70B at TP 1-8 is answered from data.
    timer = calibrated_backend(get_gpu(prof.metadata.gpu), CostModelConfig(), name)
    for model in ("llama-3.1-8b", "llama-3.1-70b"):
        for tp in (1, 2, 4, 8):
            sm = ShardedModel.build(get_model(model), tp, 1, "bf16", "bf16", "bf16", 8)
            for op in (attn_decode_op(16, 16 * 1000, sm), attn_prefill_op(((512, 0),), sm)):
                assert timer.source_of(op) == "profile"
                assert 0 < timer.op_time(op) < 1.0
    assert "NVIDIA" in (PROFILES_DIR / "NOTICE").read_text()


def test_table_rows_that_ran_from_l2_are_read_at_dram_speed_at_most():
    """L40S decode-attention rows with less KV than its 96 MB L2 ran from cache (up to ~2.8x
    the DRAM rate); a serving step reads KV from DRAM, so the timer floors them there and
    leaves rows far larger than L2 as measured."""
    gpu = get_gpu("l40s")
    timer = calibrated_backend(gpu, CostModelConfig(), "l40s-vllm")
    sm = ShardedModel.build(get_model("llama-3.1-8b"), 1, 1, "bf16", "bf16", "bf16", 8)
    dram = gpu.hbm_tbps * 1e12
    small = attn_decode_op(64, 64 * 256, sm)  # 4 KiB of KV per token per layer: ~68 MB
    assert 60e6 < small.bytes < 80e6
    table = timer.models["attn_decode"].predict(small)
    assert table < 0.8 * small.bytes / dram  # the row beat DRAM
    assert timer.op_time(small) == pytest.approx(small.bytes / dram, rel=1e-9)
    large = attn_decode_op(64, 64 * 2048, sm)  # ~537 MB: from DRAM in the table too
    assert timer.op_time(large) == pytest.approx(timer.models["attn_decode"].predict(large), rel=1e-9)
    assert timer.op_time(large) > large.bytes / dram


def test_a_profiles_gpu_is_read_from_its_metadata_alone(tmp_path):
    from calibration.profile import profile_gpu

    for name in shipped_profiles():
        assert profile_gpu(name) == load_profile(name).metadata.gpu
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CalibrationError):
        profile_gpu(bad)


def test_fp8_kv_attention_reads_the_fp8_kernel_rows():
    """An FP8 KV cache is timed from the FP8-KV kernel's own rows, not the bf16 kernel at half
    the bytes: on H200 (vLLM FA3) a 32 x 4096-token decode measures 103.7 us in fp8 against
    135.3 us in bf16, a 1.3x gain where halving the bytes would claim 2x."""
    timer = calibrated_backend(get_gpu("h200"), CostModelConfig(), "h200_sxm-vllm")
    times = {}
    for kv in ("bf16", "fp8"):
        sm = ShardedModel.build(get_model("llama-3.1-70b"), 1, 1, "fp8", "fp8", kv, 8)
        op = attn_decode_op(32, 32 * 4095, sm)
        assert op.dtype == kv and timer.source_of(op) == "profile"
        times[kv] = timer.op_time(op) * 1e6
    assert times == {"bf16": pytest.approx(135.3), "fp8": pytest.approx(103.7)}
    # A profile without FP8-KV rows (our own microbenchmarks) keeps the bf16 kernel, scaled
    # by the roofline ratio of the smaller KV read.
    prof = load_profile("h200_sxm-vllm").model_copy(deep=True)
    for fam in ("attn_decode", "attn_prefill"):
        table = prof.tables[fam]
        prof.tables[fam] = table.model_copy(update={"rows": [r for r in table.rows if r[table.columns.index("dtype")] != "fp8"]})
    bf16_only = CalibratedTimer(prof, get_gpu("h200"), CostModelConfig())
    sm = ShardedModel.build(get_model("llama-3.1-70b"), 1, 1, "fp8", "fp8", "fp8", 8)
    assert bf16_only.op_time(attn_decode_op(32, 32 * 4095, sm)) * 1e6 < 0.75 * 135.3


def test_nvfp4_gemms_read_the_nvfp4_rows_on_blackwell():
    """W4A4 GEMMs on B200 come from the NVFP4 kernel's rows (1024 x 8192 x 8192: 41.5 us),
    not from the FP4 datasheet peak times the efficiency fitted to bf16/fp8 GEMMs (read as
    measured: the sustained rate is tests/test_sustained_rate.py's)."""
    timer = calibrated_backend(get_gpu("b200"), CostModelConfig(sustained_tensor_rate=False), "b200_sxm-vllm")
    m, n, k = 1024, 8192, 8192
    op = Op("gemm", "gemm", 2.0 * m * n * k, 2.0 * m * k + 0.5 * k * n + 2.0 * m * n, 1, (m, n, k), "fp4")
    assert timer.source_of(op) == "profile"
    assert timer.op_time(op) * 1e6 == pytest.approx(41.53)


def test_profile_for_another_gpu_is_refused():
    with pytest.raises(ConfigError, match="measured on h100-sxm"):
        calibrated_backend(get_gpu("h200"), CostModelConfig(), "h100_sxm-vllm")


def test_calibrated_backend_needs_a_profile():
    assert "calibrated" in COST_BACKENDS
    with pytest.raises(ConfigError, match="needs a profile"):
        COST_BACKENDS["calibrated"](H100, CostModelConfig(), None)


@pytest.mark.parametrize("name", sorted(shipped_profiles()))
def test_shipped_fit_errors_are_todays(name):
    """`calibrate show` prints the stored fit errors, so they must be what today's predictor
    scores on the profile's own rows (6 of 10 profiles had drifted by session 57)."""
    prof = load_profile(name)
    assert cross_validate(prof) == prof.metadata.fit, "stale: run `python -m calibration.refresh_fits`"


# -- fitting ------------------------------------------------------------------------------------
def test_fit_recovers_known_efficiencies():
    true = RooflineTimer(H100, RooflineEfficiency(gemm_compute=0.6, gemm_memory=0.7), 5.0)
    ops = [_gemm(m, n, k) for m in GEMM_M for n, k in GEMM_NK]
    times = np.array([true.op_time(o) for o in ops])
    fitted, info = fit_roofline("gemm", ops, times, H100, RooflineEfficiency(), 3.5)
    assert info["eta_compute"] == pytest.approx(0.6, rel=0.02)
    assert info["eta_memory"] == pytest.approx(0.7, rel=0.02)
    assert info["latency_us"] == pytest.approx(5.0, rel=0.05)
    assert max(abs(fitted.op_time(o) / t - 1) for o, t in zip(ops, times, strict=True)) < 0.02


def test_cross_validation_scores_held_out_rows_only():
    clean = synthetic_profile(collectives=False)
    fits = cross_validate(clean)
    assert fits["gemm"].cv_folds == 5 and fits["gemm"].cv_points == len(clean.tables["gemm"].rows)
    assert fits["gemm"].cv_median_ape_pct < 5.0
    # One corrupted row: a model that had trained on it would reproduce it exactly.
    raw = json.loads(clean.model_dump_json())
    rows = raw["tables"]["attn_decode"]["rows"]
    rows[10][6] *= 5.0
    bad = cross_validate(parse_profile(json.dumps(raw)))["attn_decode"]
    assert bad.cv_p90_ape_pct > fits["attn_decode"].cv_p90_ape_pct + 10


# -- interpolation -------------------------------------------------------------------------------
def test_exact_on_grid_points(timer):
    for fam, table in timer.profile.tables.items():
        ad = FAMILY_ADAPTERS[fam]
        for row in table.rows:
            key, c = ad.split(tuple(row[:-4]))
            assert timer.op_time(ad.eq_op(key, c)) == pytest.approx(row[-4] * 1e-6, rel=1e-9), (fam, row)


def test_simulator_ops_on_grid_points_read_the_profile(timer):
    sm = _sm()
    op = attn_decode_op(8, 8 * 2048 - 8, sm)  # 8 sequences x 2048 KV tokens
    assert timer.op_time(op) == pytest.approx(_decode_us(8, 2048) * 1e-6, rel=1e-9)
    op = attn_prefill_op(((256, 1024),), sm)
    assert timer.op_time(op) == pytest.approx(_prefill_us(1, 256, 1024) * 1e-6, rel=1e-6)


def test_interpolation_tracks_the_truth_between_grid_points(timer):
    errs = [abs(timer.op_time(_gemm(m, n, k)) / (_gemm_us(m, n, k) * 1e-6) - 1)
            for m in (3, 24, 100, 700, 3000) for n, k in GEMM_NK]
    assert max(errs) < 0.05
    sm = _sm()
    for b, ctx in ((3, 700), (20, 3000), (50, 5000)):
        got = timer.op_time(attn_decode_op(b, b * ctx - b, sm))
        assert got == pytest.approx(_decode_us(b, ctx) * 1e-6, rel=0.05)


@settings(max_examples=300, deadline=None)
@given(nk=st.sampled_from([*GEMM_NK, (5120, 4096), (8192, 8192), (20000, 5000)]),
       m1=st.integers(1, 12000), m2=st.integers(1, 12000))
def test_gemm_time_is_monotone_in_m(timer, nk, m1, m2):
    """Inside the measured (N, K) range, at any M (M past the grid extrapolates)."""
    lo, hi = sorted((m1, m2))
    assert timer.op_time(_gemm(lo, *nk)) <= timer.op_time(_gemm(hi, *nk)) * (1 + 1e-12)


def test_extrapolation_is_continuous_at_the_grid_edge(timer):
    for m in (1, 100, 3000):
        edge = timer.op_time(_gemm(m, 28672, 4096))
        assert timer.op_time(_gemm(m, 28673, 4096)) == pytest.approx(edge, rel=1e-3)
        assert timer.op_time(_gemm(m, 4095, 4096)) == pytest.approx(timer.op_time(_gemm(m, 4096, 4096)), rel=1e-3)
    last = timer.op_time(_gemm(GEMM_M[-1], 4096, 4096))
    assert timer.op_time(_gemm(GEMM_M[-1] + 1, 4096, 4096)) == pytest.approx(last, rel=1e-3)
    sm = _sm()
    assert timer.op_time(attn_decode_op(4, 4 * 8193, sm)) == pytest.approx(
        timer.op_time(attn_decode_op(4, 4 * 8191, sm)), rel=1e-3)


@settings(max_examples=200, deadline=None)
@given(b=st.integers(1, 100), c1=st.integers(1, 20000), c2=st.integers(1, 20000))
def test_decode_time_is_monotone_in_context(timer, b, c1, c2):
    lo, hi = sorted((c1, c2))
    sm = _sm()
    t_lo = timer.op_time(attn_decode_op(b, b * lo, sm))
    t_hi = timer.op_time(attn_decode_op(b, b * hi, sm))
    assert t_lo <= t_hi * (1 + 1e-12)


@settings(max_examples=200, deadline=None)
@given(q=st.integers(1, 6000), c1=st.integers(0, 8000), c2=st.integers(0, 8000))
def test_prefill_time_is_monotone_in_prior_context(timer, q, c1, c2):
    lo, hi = sorted((c1, c2))
    sm = _sm()
    assert timer.op_time(attn_prefill_op(((q, lo),), sm)) <= timer.op_time(attn_prefill_op(((q, hi),), sm)) * (1 + 1e-12)


def test_sources_and_fallbacks(timer):
    sm4 = _sm(4)
    # A head layout the profile lacks borrows the nearest one, scaled by the roofline.
    op = attn_decode_op(8, 8 * 1000, sm4)
    assert timer.source_of(op) == "profile-nearest"
    assert 0 < timer.op_time(op) < timer.op_time(attn_decode_op(8, 8 * 1000, _sm()))
    # No data at all for a family: the shipped tables of the GPU stand in where they exist,
    # else the default roofline answers.
    ar = Op("tp_allreduce", "allreduce", 0.0, 1e6, 1, (1e6, 4, "intra"), "bf16")
    assert CalibratedTimer(synthetic_profile(collectives=False), H100).source_of(ar) == "shipped:h100_sxm-vllm"
    no_coll = CalibratedTimer(synthetic_profile(gpu="l4", collectives=False), get_gpu("l4"))
    assert no_coll.source_of(ar) == "roofline-default"
    assert no_coll.op_time(ar) == no_coll.default.op_time(ar)
    # Within the rows (between measured M, N and K) a GEMM reads "profile"; beyond them on
    # any axis (M past the grid's 4,096, N past its 28,672: a cut grid, a vocabulary-wide
    # lm_head) the edge row is held at the roofline's ratio, and the label says so.
    assert timer.source_of(_gemm(300, 6000, 4096)) == "profile"
    assert timer.source_of(_gemm(8192, 4096, 4096)) == "profile-extrapolated"
    assert timer.source_of(_gemm(64, 128256, 4096)) == "profile-extrapolated"
    assert timer.source_of(_gemm(64, 4096, 2048)) == "profile-extrapolated"
    # A dtype without rows (int8 GEMMs): the family's fitted roofline.
    assert timer.source_of(_gemm(64, 4096, 4096, "int8")) == "roofline-fitted"
    assert math.isfinite(timer.op_time(_gemm(64, 4096, 4096, "int8")))
    # Collectives: measured ranks answer; the impl is free unless the op names one.
    assert timer.source_of(Op("ar", "allreduce", 0.0, 1e5, 1, (1e5, 2, "intra"), "bf16")) == "profile"
    assert timer.source_of(Op("ar", "allreduce", 0.0, 1e5, 1, (1e5, 2, "inter"), "bf16")) == "roofline-fitted"


@pytest.mark.parametrize(("gpu", "profile", "standin"), [("h100-sxm", "h100_sxm-vllm", True),
                                                        ("b200", "b200_sxm-vllm", True),
                                                        ("b300", "b300_sxm-vllm", False)])
def test_int8_w8a8_gemms_read_the_fp8_rows_where_the_datasheet_gives_both_one_rate(gpu, profile, standin):
    """The shipped tables have no INT8 rows. vLLM runs W8A8 INT8 through the same CUTLASS
    scaled-mm kernels as FP8, so on a GPU whose INT8 and FP8 peaks are one (Hopper, B200)
    the FP8 rows time it, FLOPs and bytes being the same; B300 cut its INT8 rate to a few
    percent of FP8's, so there the fitted roofline at that peak stays."""
    timer = calibrated_backend(get_gpu(gpu), CostModelConfig(), profile)
    for m in (8, 4096):  # a decode step's weight read and a prefill's compute
        int8, fp8 = _gemm(m, 14336, 4096, "int8"), _gemm(m, 14336, 4096, "fp8")
        if standin:
            assert timer.source_of(int8) == "profile-standin"
            assert timer.op_time(int8) == timer.op_time(fp8)
        else:
            assert timer.source_of(int8) == "roofline-fitted"
            assert timer.op_time(int8) > timer.op_time(fp8)
    if not standin:  # compute-bound, at 153.5 against 4,500 TFLOP/s
        assert timer.op_time(_gemm(4096, 14336, 4096, "int8")) > 10 * timer.op_time(_gemm(4096, 14336, 4096, "fp8"))


# -- the CLI and the end-to-end path ----------------------------------------------------------------
def _main(args: list[str]) -> None:
    from simulator.cli import main

    main(args)


@pytest.fixture(scope="module")
def cpu_profile(tmp_path_factory) -> Path:
    """A real (quick) calibration run on this machine's CPU."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("cal") / "cpu.json"
    _main(["calibrate", "--model", "llama-3.1-8b", "--tp", "8", "--quick", "--device", "cpu",
           "--cpu-threads", "1", "--budget-s", "60", "--out", str(out)])
    return out


def test_quick_cpu_calibration_writes_a_profile(cpu_profile):
    prof = load_profile(cpu_profile)
    meta = prof.metadata
    assert meta.device_kind == "cpu" and meta.source == "measured" and meta.gpu is None
    assert meta.method.timer == "perf_counter" and meta.method.repeats >= 10
    import platform

    from simulator import __version__
    # Provenance: the software that measured, servesim and Python included.
    assert meta.versions["servesim"] == __version__ and meta.versions["python"] == platform.python_version()
    assert meta.versions["torch"] == meta.torch
    for fam in ("gemm", "attn_prefill", "attn_decode", "elementwise"):
        rows = prof.tables[fam].rows
        assert rows, fam
        med, p10, p90, n = rows[0][-4:]
        assert p10 <= med <= p90 and n >= 10
        assert meta.fit[fam].points == len(rows)
    for fam in ("allreduce", "allgather", "p2p"):
        assert fam not in prof.tables and "not measured" in meta.not_measured[fam]
    assert meta.attention_backend["attn_decode"].startswith("sdpa")
    assert cpu_profile.with_name("cpu-roofline.png").stat().st_size > 10_000


def test_simulation_uses_the_calibrated_profile(cpu_profile):
    from simulator import api
    from simulator.simulation import Simulation

    data = {
        "model": {"name": "llama-3.1-8b", "max_model_len": 2048},
        "hardware": {"gpu": "h100-sxm", "profile": str(cpu_profile)},
        "parallelism": {"tp": 8},
        "memory": {"kv_cache_tokens": 4096},
        "cost_model": {"backend": "calibrated"},
        "workload": {"arrival": {"type": "poisson", "rate": 50.0}, "num_requests": 6, "seed": 1,
                     "prompt_tokens": {"type": "fixed", "value": 64},
                     "output_tokens": {"type": "fixed", "value": 8}},
        "output": {"report": False},
    }
    sim = Simulation(api.load(data=data))
    assert sim.cost.timer.name == "calibrated"
    prof = load_profile(cpu_profile)
    # The shape's largest-M row: a smaller M slower than a larger one (CPU timing noise) is
    # capped by the larger one's time (monotone_gemm_rows), so it may not read back as measured.
    first = prof.tables["gemm"].rows[0]
    m, n, k, dt, med = max((r for r in prof.tables["gemm"].rows if r[1:4] == first[1:4]), key=lambda r: r[0])[:5]
    assert sim.cost.timer.op_time(_gemm(m, n, k, dt)) == pytest.approx(med * 1e-6, rel=1e-9)
    calibrated = sim.run().summary
    roofline = api.run(data, overrides=["cost_model.backend=roofline"]).summary
    assert calibrated["requests"]["completed"] == roofline["requests"]["completed"] == 6
    # CPU kernels are orders of magnitude slower than an H100's roofline.
    assert calibrated["tpot_ms"]["p50"] > 10 * roofline["tpot_ms"]["p50"]
    # ... which the summary says, so nobody reads those times as the GPU's.
    assert "a CPU: a development profile" in calibrated["config"]["kernel_times"]


def test_a_tp_that_splits_no_model_is_refused_before_measuring():
    from calibration.grid import build_plan

    with pytest.raises(CalibrationError, match="TP 3 cannot split") as err:
        build_plan([get_model("llama-3.1-8b")], [1, 3], device="cpu")
    assert err.value.where == "--tp"
    # A TP that suits one of several models is measured for that one.
    plan = build_plan([get_model("llama-3.1-8b"), get_model("opt-13b")], [1, 5], device="cpu")
    assert plan.tp == [1, 5]


def test_show_command(capsys):
    _main(["calibrate", "show", "h100_sxm-vllm"])
    out = capsys.readouterr().out
    assert "attn_decode" in out and "aiconfigurator:h100_sxm/vllm" in out
    text = " ".join(out.split())
    assert "fp8 0.82 (76 rows)" in text  # the sustained FP8 GEMM rate
    assert "used instead: bf16 0.85, fp8 0.83" in text and "prefill attention: 0.74" in text  # the catalog's
    _main(["calibrate", "show", "b200_sxm-vllm"])
    text = " ".join(capsys.readouterr().out.split())  # not measured on a B200: carried, and said so
    assert "carried from H100/H200's measurements (not measured on this GPU): bf16 0.79, prefill attention 0.67" in text


def test_calibrate_without_torch_says_how_to_install(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    from calibration.bench import TORCH_MISSING, require_torch

    with pytest.raises(CalibrationError, match="calibration needs torch"):
        require_torch()
    with pytest.raises(SystemExit) as exc:
        _main(["calibrate", "--model", "llama-3.1-8b", "--quick", "--out", str(tmp_path / "x.json")])
    assert exc.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert TORCH_MISSING in err and "pip install torch" in err


def test_a_torch_that_fails_to_load_is_a_clean_error(monkeypatch, tmp_path, capsys):
    """A CUDA wheel without its libraries raises OSError on import: it was a traceback."""
    import builtins

    real_import = builtins.__import__

    def broken(name, *args, **kwargs):
        if name == "torch":
            raise OSError("libtorch_cuda.so: cannot open shared object file")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(builtins, "__import__", broken)
    with pytest.raises(SystemExit) as exc:
        _main(["calibrate", "--model", "llama-3.1-8b", "--quick", "--out", str(tmp_path / "x.json")])
    assert exc.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "torch is installed but failed to load: OSError: libtorch_cuda.so" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_calibrate_needs_out_and_a_model(tmp_path):
    with pytest.raises(SystemExit):
        _main(["calibrate", "--model", "llama-3.1-8b"])
    with pytest.raises(ServesimError, match="no model"):
        from calibration.cli import _models

        _models(None, None)


def test_plan_covers_the_models_projection_shapes():
    from calibration.grid import build_plan

    plan = build_plan([get_model("llama-3.1-8b")], [1, 2], device="cuda")
    nk = {(n, k) for _, n, k, _ in plan.gemm}
    # qkv, o, gate_up, down, lm_head at TP1 and TP2.
    assert {(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096)} <= nk
    assert {(3072, 4096), (4096, 2048), (14336, 4096), (4096, 7168), (64128, 4096)} <= nk
    assert {m for m, *_ in plan.gemm} >= {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192}
    assert {(h, kvh, d) for *_, h, kvh, d in plan.attn_decode} == {(32, 8, 128), (16, 4, 128)}
    quick = build_plan([get_model("llama-3.1-8b")], [1, 2], quick=True, device="cpu")
    assert quick.size() < 60 and max(n for _, n, _, _ in quick.gemm) < 128256


def test_profile_auto_picks_the_shipped_profile_of_the_gpu():
    from simulator.cost.calibrated import shipped_profile_for
    from simulator.errors import ServesimError
    from simulator.hardware import get_gpu

    assert shipped_profile_for(get_gpu("h200")) == "h200_sxm-vllm"
    assert shipped_profile_for(get_gpu("a100-80gb-sxm")) == "a100_sxm-vllm"
    assert shipped_profile_for(get_gpu("rtx-pro-6000")) == "rtx_pro_6000_server-vllm"
    with pytest.raises(ServesimError, match="no shipped calibration profile"):
        shipped_profile_for(get_gpu("l4"))


def test_a_gpu_without_tables_borrows_those_of_its_die():
    """GB200 ships no tables of its own; it runs B200's kernels (same die), not the roofline."""
    from simulator.cost.calibrated import shipped_profile_for
    from simulator.hardware import get_gpu

    gb200 = get_gpu("gb200")
    assert gb200.kernel_tables_from == "b200"
    assert shipped_profile_for(gb200) == "b200_sxm-vllm"
    timer = COST_BACKENDS["auto"](gb200, CostModelConfig(), None)
    assert isinstance(timer, CalibratedTimer) and timer.profile.metadata.gpu == "b200"
    # GB300 has tables of its own, which win over those of its die (B300's).
    assert get_gpu("GB300").kernel_tables_from == "b300"
    assert shipped_profile_for(get_gpu("GB300")) == "gb300-vllm"
    # Borrowing goes one way only: B200 does not accept a profile made on another GPU.
    with pytest.raises(ConfigError, match="measured on h100-sxm"):
        COST_BACKENDS["auto"](get_gpu("b200"), CostModelConfig(), "h100_sxm-vllm")


def test_auto_backend_uses_shipped_tables_where_they_exist():
    from simulator.cost import RooflineTimer
    from simulator.hardware import get_gpu

    auto = COST_BACKENDS["auto"]
    assert isinstance(auto(get_gpu("b200"), CostModelConfig(), None), CalibratedTimer)
    assert auto(get_gpu("b200"), CostModelConfig(), None).profile.metadata.gpu == "b200"
    # No shipped profile for an L4: the roofline, not an error.
    assert isinstance(auto(get_gpu("l4"), CostModelConfig(), None), RooflineTimer)
    # A profile named explicitly still wins, and still has to match the GPU.
    with pytest.raises(ConfigError, match="measured on h100-sxm"):
        auto(get_gpu("h200"), CostModelConfig(), "h100_sxm-vllm")


def test_decode_stretch_under_tables_matches_step_by_step():
    """A fast-forwarded decode stretch times every step as iteration_time times that step
    alone, to the last bit (long stretches, and ones crossing a context octave), so
    fast-forwarding never moves an event."""
    from simulator.cost import IterationCostModel
    from simulator.cost.ops import IterationShape
    from simulator.hardware import get_gpu

    gpu = get_gpu("h200")
    timer = COST_BACKENDS["auto"](gpu, CostModelConfig(), None)
    sm = ShardedModel.build(get_model("llama-3.1-70b"), 2, 1, "fp8", "fp8", "fp8", 16)
    cost = IterationCostModel(sm, timer, CostModelConfig())
    for seqs, ctx, steps in ((1, 100, 500), (37, 37 * 900, 1000), (256, 256 * 3000, 300), (3, 120, 2000)):
        fast = cost.decode_step_times(seqs, ctx, steps)
        alone = [cost.iteration_time(IterationShape(seqs, seqs, seqs, ctx + j * seqs, ())) for j in range(steps)]
        assert fast == alone


_H200_70B_TP2 = None


def _h200_70b_tp2_cost():
    """One cost model for the property below (building the timer takes ~1 s)."""
    global _H200_70B_TP2
    if _H200_70B_TP2 is None:
        from simulator.cost import IterationCostModel

        timer = COST_BACKENDS["auto"](get_gpu("h200"), CostModelConfig(), None)
        sm = ShardedModel.build(get_model("llama-3.1-70b"), 2, 1, "fp8", "fp8", "fp8", 16)
        _H200_70B_TP2 = IterationCostModel(sm, timer, CostModelConfig())
    return _H200_70B_TP2


@settings(max_examples=60, deadline=None)
@given(seqs=st.integers(1, 512), per_seq=st.integers(1, 32_000))
def test_decode_attention_context_knots_match_the_exact_table_time(seqs, per_seq):
    """Table-driven decode attention is read at context knots and interpolated between:
    within 0.1% of evaluating the tables at the exact context."""
    cost = _h200_70b_tp2_cost()
    assert cost._knotted
    ctx = seqs * per_seq + per_seq // 3
    assert cost.decode_attention_time(seqs, ctx) == pytest.approx(cost._decode_attention_exact(seqs, ctx),
                                                                  rel=1e-3)


@settings(max_examples=80, deadline=None)
@given(seqs=st.integers(1, 300), per_seq=st.integers(1, 20_000), steps=st.integers(1, 400))
def test_decode_stretch_reads_the_same_knots_as_single_steps(seqs, per_seq, steps):
    """A stretch looks each context knot up once: the same numbers, to the bit, as reading
    every step alone (including stretches that cross an octave)."""
    cost = _h200_70b_tp2_cost()
    ctx = seqs * per_seq + per_seq // 3
    run = cost._decode_attention_run(seqs, ctx, steps)
    assert run == [cost.decode_attention_time(seqs, ctx + j * seqs) for j in range(steps)]


def test_gemm_table_noise_never_makes_fewer_rows_slower():
    from simulator.cost.calibrated import monotone_gemm_rows

    rows = [[1, 8192, 8192, "fp8", 33.0, None, None, None], [2, 8192, 8192, "fp8", 38.0, None, None, None],
            [4, 8192, 8192, "fp8", 19.0, None, None, None], [64, 8192, 8192, "fp8", 25.0, None, None, None],
            [1, 8192, 8192, "bf16", 24.0, None, None, None], [4, 8192, 8192, "bf16", 23.0, None, None, None]]
    out = {(r[0], r[3]): r[4] for r in monotone_gemm_rows(rows)}
    assert out == {(1, "fp8"): 19.0, (2, "fp8"): 19.0, (4, "fp8"): 19.0, (64, "fp8"): 25.0,
                   (1, "bf16"): 23.0, (4, "bf16"): 23.0}
    # On the shipped B200 table the M=2 and M=16 spikes are capped: a decode batch of 2
    # is no slower than one of 8. FP8 at M=1 is slow on nearly every shape (a kernel
    # choice, not noise), so that one is kept.
    from simulator.hardware import get_gpu

    timer = COST_BACKENDS["auto"](get_gpu("b200"), CostModelConfig(), None)
    sm = ShardedModel.build(get_model("llama-3.1-70b"), 1, 1, "fp8", "fp8", "fp8", 16)
    from simulator.cost import IterationCostModel

    cost = IterationCostModel(sm, timer, CostModelConfig())
    assert cost.token_time(2) <= cost.token_time(8) * 1.001
    assert cost.token_time(1) > cost.token_time(2) * 1.05


def test_gemm_slowdown_shared_by_most_shapes_is_kept():
    """A slow M that most shapes show is the engine's kernel choice (kept); one shape's
    spike is noise (capped)."""
    from simulator.cost.calibrated import monotone_gemm_rows, systematic_gemm_slowdowns

    rows = []
    for i in range(40):
        n = 1024 * (i + 1)
        slow32 = i < 36  # 90% of shapes are slower at M=32 than at M=48 (4σ over 1/2: 82%)
        rows += [[16, n, 4096, "fp8", 10.0, None, None, None], [32, n, 4096, "fp8", 12.0 if slow32 else 10.0, None, None, None],
                 [48, n, 4096, "fp8", 10.5, None, None, None], [64, n, 4096, "fp8", 11.0 if i else 9.0, None, None, None]]
    assert systematic_gemm_slowdowns(rows) == {("fp8", 32)}
    out = {(r[0], r[1]): r[4] for r in monotone_gemm_rows(rows)}
    assert out[(32, 1024)] == 12.0 and out[(32, 2048)] == 12.0  # kept as measured
    assert out[(48, 1024)] == 9.0 and out[(16, 1024)] == 9.0  # the one fast M=64 caps its shape
    assert out[(48, 2048)] == 10.5


def test_show_names_each_cross_validation_used():
    from types import SimpleNamespace

    from calibration.cli import _folds

    big, small = SimpleNamespace(cv_folds=5, cv_points=400), SimpleNamespace(cv_folds=8, cv_points=8)
    assert _folds({"gemm": big}) == "5-fold cross-validation"
    assert _folds({"gemm": big, "p2p": small}) == "5-fold cross-validation, leave-one-out for the smaller families"
    assert _folds({"p2p": small}) == "leave-one-out"


def test_the_summary_names_families_the_profile_does_not_time(tmp_path):
    """A profile without GEMM rows (cut short, edited) used to run silently with GEMMs from
    another source (and crashed on a GPU with a sustained rate); a shipped profile's
    declared gaps (no elementwise rows in aiconfigurator's tables) are not repeated."""
    from simulator import api

    prof = synthetic_profile()
    path = save_profile(prof.model_copy(update={"tables": {k: v for k, v in prof.tables.items() if k != "gemm"}}),
                        tmp_path / "p.json")
    data = {"model": {"name": "llama-3.1-8b", "max_model_len": 2048},
            "hardware": {"gpu": "h100-sxm", "profile": str(path)}, "cost_model": {"backend": "calibrated"},
            "workload": {"arrival": {"type": "poisson", "rate": 5.0}, "num_requests": 4,
                         "prompt_tokens": {"type": "fixed", "value": 64},
                         "output_tokens": {"type": "fixed", "value": 4}}, "output": {"report": False}}
    summary = api.run(data).summary  # a measured H100 profile: the shipped H100 tables fill in
    assert "not in the profile: gemm from h100_sxm-vllm" in summary["config"]["kernel_times"]
    l4 = synthetic_profile(gpu="l4")  # no tables ship for an L4: the roofline fills in
    l4_path = save_profile(l4.model_copy(update={"tables": {k: v for k, v in l4.tables.items() if k != "gemm"}}),
                           tmp_path / "l4.json")
    on_l4 = api.run(data, overrides=["hardware.gpu=l4", f"hardware.profile={l4_path}"]).summary
    assert "not in the profile: gemm from the roofline" in on_l4["config"]["kernel_times"]
    assert "attn_decode" not in summary["config"]["kernel_times"]
    shipped = api.run(data, overrides=["hardware.profile=h100_sxm-vllm"]).summary
    assert "not in the profile" not in shipped["config"]["kernel_times"]


def test_refresh_fits_rewrites_only_the_stored_fit_errors(tmp_path):
    """`python -m calibration.refresh_fits` re-scores a stale profile in place: its fit
    becomes today's, and every other byte of the file (tables, other metadata) stays."""
    from calibration.refresh_fits import refresh

    path = tmp_path / "p.json"
    path.write_text((PROFILES_DIR / "h100_sxm-measured.json").read_text())
    assert not refresh(path)  # current already: untouched
    raw = json.loads(path.read_text())
    raw["metadata"]["fit"]["gemm"]["cv_median_ape_pct"] = 99.0
    stale = profile_json(parse_profile(json.dumps(raw)))
    path.write_text(stale)
    assert refresh(path)
    fresh = path.read_text()
    assert load_profile(path).metadata.fit == cross_validate(load_profile(path))
    tables = stale.index('\n"tables": {')
    assert fresh[fresh.index('\n"tables": {'):] == stale[tables:]
    before, after = json.loads(stale)["metadata"], json.loads(fresh)["metadata"]
    assert {k: v for k, v in before.items() if k != "fit"} == {k: v for k, v in after.items() if k != "fit"}
