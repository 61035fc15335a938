"""The aiconfigurator-core importer, on a small fixture in the published tables' schema.

tests/fixtures/aiconfigurator/systems/ mirrors the package's data layout with a few
hundred real rows (make_fixture.py regenerates it). Reading parquet needs pyarrow (in
the `test` and `aiconfigurator` extras); without it these tests skip.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")
import pandas as pd

from calibration import aiconfigurator as aic
from calibration.profile import CalibrationError, load_profile
from simulator.cost.calibrated import score_family
from simulator.hardware import get_gpu

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "aiconfigurator"
DATA = FIXTURE / "systems" / "data"
H100 = DATA / "h100_sxm"


@pytest.fixture(scope="module")
def profile():
    return aic.convert("h100_sxm", "vllm", data_root=DATA)


def test_gemm_rows_keep_16_bit_and_fp8_in_microseconds(profile):
    src = pd.read_parquet(H100 / "gemm" / "vllm" / "0.24.0" / "gemm_perf.parquet")
    rows = profile.tables["gemm"].rows
    assert {r[3] for r in rows} == {"bf16", "fp8"}  # fp8_block (DeepGEMM etc.) dropped
    one = src[(src.m == 1) & (src.n == 4096) & (src.k == 4096) & (src.gemm_dtype == "bfloat16")].latency.iloc[0]
    got = next(r for r in rows if r[:4] == [1, 4096, 4096, "bf16"])
    assert got[4] == pytest.approx(one * 1000.0, rel=1e-3)  # ms -> µs
    assert 5.0 < got[4] < 50.0  # an M=1 4096x4096 bf16 GEMM on an H100 takes ~15 µs
    assert got[5:] == [None, None, None]  # no spread published


def test_attention_rows(profile):
    src = pd.read_parquet(H100 / "attention" / "vllm" / "0.24.0" / "generation_attention_perf.parquet")
    dec = [r for r in profile.tables["attn_decode"].rows if r[4] != aic.MLA_DECODE_HEAD_DIM]  # GQA's own
    pre = profile.tables["attn_prefill"].rows
    # Only full attention (the fixture also has windows); head_dim 128 in every layout and
    # 64 only with 4 or 8 query heads per KV head; bf16 and fp8 KV, each under its label.
    shipped = {(d, dt) for d in (64, 128) for dt in ("bf16", "fp8")}
    assert {(r[4], r[5]) for r in dec} == shipped and {(r[5], r[6]) for r in pre} == shipped
    assert all(r[2] // r[3] in (4, 8) for r in dec if r[4] == 64)
    assert {r[2] for r in pre} == {0}  # context attention has no prior context
    # Decode context = isl + step (isl is 1): steps 2^k - 1 become 2^k tokens.
    assert {r[1] for r in dec} == {int(s) + 1 for s in src.step.unique()}
    sel = src[(src.batch_size == 8) & (src.step == 2047) & (src.head_dim == 128) & (src.kv_cache_dtype == "bfloat16")
              & (src.window_size == 0)]
    row = next(r for r in dec if r[0] == 8 and r[1] == 2048 and r[4] == 128 and r[5] == "bf16")
    assert row[6] == pytest.approx(sel.latency.iloc[0] * 1000.0, rel=1e-3)
    fp8 = src[(src.batch_size == 8) & (src.step == 2047) & (src.head_dim == 128) & (src.kv_cache_dtype == "fp8")
              & (src.window_size == 0) & (src.num_heads == row[2]) & (src.num_key_value_heads == row[3])]
    row8 = next(r for r in dec if r[:5] == row[:5] and r[5] == "fp8")
    assert row8[6] == pytest.approx(fp8.latency.iloc[0] * 1000.0, rel=1e-3)


def test_shipped_head_layouts():
    from calibration.aiconfigurator import _shipped_heads

    df = pd.DataFrame({"head_dim": [128, 128, 64, 64, 64, 64, 256],
                       "num_heads": [40, 64, 64, 32, 64, 16, 32],
                       "num_key_value_heads": [40, 8, 8, 8, 64, 1, 8]})
    assert _shipped_heads(df).tolist() == [True, True, True, True, False, False, False]


def test_collectives_convert_elements_to_bytes(profile):
    src = pd.read_parquet(H100 / "comm" / "nccl" / "2.27.3" / "nccl_perf.parquet")
    ar = profile.tables["allreduce"].rows
    assert {r[3] for r in ar} == {"nccl", "vllm_custom_graph", "vllm_custom_eager"}
    assert {r[3] for r in profile.tables["allgather"].rows} == {"nccl"}
    sel = src[(src.op_name == "all_reduce") & (src.nccl_dtype == "half") & (src.num_gpus == 4)
              & (src.message_size == 4194304)]
    row = next(r for r in ar if r[3] == "nccl" and r[1] == 4 and r[0] == 4194304 * 2)
    # The published table repeats some shapes (two collection runs): their median is kept.
    assert row[5] == pytest.approx(sel.latency.median() * 1000.0, rel=1e-3)


def test_metadata(profile):
    meta = profile.metadata
    assert meta.source == "aiconfigurator:h100_sxm/vllm/0.24.0"
    assert meta.gpu == "h100-sxm" and meta.gpu_name == "NVIDIA H100 80GB HBM3"
    assert meta.versions["vllm"] == "0.24.0" and meta.versions["nccl"] == "2.27.3"
    assert meta.memory_gib == pytest.approx(80.0)
    assert "elementwise" in meta.not_measured
    assert any("milliseconds" in n for n in meta.notes) and any("Apache-2.0" in n for n in meta.notes)


def test_version_choice():
    assert aic.available(DATA) == {"h100_sxm": {"vllm": ["0.20.0", "0.24.0"]}}
    old = aic.convert("h100_sxm", "vllm", "0.20.0", data_root=DATA)
    assert set(old.tables) >= {"gemm"} and "attn_decode" not in old.tables
    assert {tuple(r[:3]) for r in old.tables["gemm"].rows} == {(1, 4096, 4096), (64, 4096, 4096)}


@pytest.mark.parametrize(("args", "field", "listed"), [
    (("h999_sxm", "vllm", None), "--system", "h100_sxm"),
    (("h100_sxm", "trtllm", None), "--backend", "vllm"),
    (("h100_sxm", "vllm", "9.9.9"), "--version", "0.20.0, 0.24.0"),
])
def test_unknown_choices_list_what_exists(args, field, listed):
    with pytest.raises(CalibrationError) as exc:
        aic.convert(*args, data_root=DATA)
    assert exc.value.where == field and listed in exc.value.fix


def test_missing_package_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == aic.PACKAGE else real(name, *a))
    with pytest.raises(CalibrationError, match="not installed") as exc:
        aic.package_root()
    assert ".[aiconfigurator]" in exc.value.fix and "pip install aiconfigurator-core" in exc.value.fix
    assert exc.value.where == "simulate calibrate import-aiconfigurator"  # it printed with no prefix


def test_imported_profile_predicts_held_out_rows(profile):
    rows = profile.tables["gemm"].rows
    train = [r for r in rows if r[0] != 32]
    test = [r for r in rows if r[0] == 32]
    errs = score_family("gemm", train, test, get_gpu("h100-sxm"))
    assert np.median(errs["calibrated"]) < 10.0
    assert np.median(errs["calibrated"]) < np.median(errs["roofline_default"])


def test_cli_import(monkeypatch, tmp_path, capsys):
    from simulator.cli import main

    monkeypatch.setattr(aic, "package_root", lambda: FIXTURE)
    out = tmp_path / "h100.json"
    main(["calibrate", "import-aiconfigurator", "--system", "h100_sxm", "--backend", "vllm", "--out", str(out)])
    prof = load_profile(out)
    assert prof.metadata.fit["gemm"].cv_points > 0
    assert "aiconfigurator:h100_sxm/vllm/0.24.0" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", "import-aiconfigurator", "--system", "nope", "--out", str(out)])
    assert exc.value.code == 2


def test_gated_deltanet_rows_time_the_recurrence_per_phase(profile):
    """Prefill is the chunked delta rule, the median over the models that share a per-GPU
    head count; decode sums the recurrent step and the conv-state update."""
    src = pd.read_parquet(H100 / "linear_attention" / "vllm" / "0.24.0" / "gdn_perf.parquet")
    rows = profile.tables["linear_attn"].rows
    shape = (src.num_k_heads == 2) & (src.num_v_heads == 8)
    chunk = src[shape & (src.kernel_source == "chunk_gated_delta_rule_flashinfer")
                & (src.batch_size == 4) & (src.seq_len == 2048)]
    assert len(chunk) == 2  # Qwen3.5-397B and -122B: the same heads per GPU
    got = next(r for r in rows if r[:7] == ["prefill", 4, 2048, 2, 8, 128, 128])
    assert got[7] == pytest.approx(chunk.latency.median() * 1000.0, rel=1e-3)
    dec = src[shape & (src.phase == "generation") & (src.batch_size == 16)
              & (src.model_name == "Qwen/Qwen3.5-397B-A17B")]
    assert set(dec.kernel_source) == {"fused_recurrent_gated_delta_rule_packed_decode", "causal_conv1d_update"}
    got = next(r for r in rows if r[:7] == ["decode", 16, 1, 2, 8, 128, 128])
    assert got[7] == pytest.approx(dec.latency.sum() * 1000.0, rel=2e-2)  # the two models' median
    assert not any(r[0] == "prefill" and "conv" in str(r) for r in rows)
    assert "causal_conv1d_fn" not in profile.metadata.versions["kernels.linear_attn"]


def test_gated_deltanet_predictions_follow_the_longest_chunk():
    """Shipped H200 table: a lone 8,192-token prompt at 8 value heads per GPU runs its
    chunks one after another (417 µs a layer), four 2,048-token prompts in parallel take a
    quarter of that, and a long chunk beside a short one costs what the long one does."""
    from simulator.cost.calibrated import calibrated_backend
    from simulator.cost.config import CostModelConfig
    from simulator.cost.ops import ShardedModel, linear_decode_op, linear_prefill_op
    from simulator.models import get_model

    timer = calibrated_backend(get_gpu("h200"), CostModelConfig(), "h200_sxm-vllm")
    sm = ShardedModel.build(get_model("qwen3.5-397b-a17b"), 8, 1, "fp8", "fp8", "bf16", 8)
    lone = timer.op_time(linear_prefill_op(((8192, 0),), sm))
    four = timer.op_time(linear_prefill_op(((2048, 0),) * 4, sm))
    uneven = timer.op_time(linear_prefill_op(((8000, 0), (192, 0)), sm))
    assert timer.source_of(linear_prefill_op(((8192, 0),), sm)) == "profile"
    assert lone == pytest.approx(417e-6, rel=0.02)
    assert four < lone / 3
    assert lone * 0.95 < uneven < lone * 1.05
    # The collector allocated a bf16 state: Qwen3-Next's (bf16) decode reads the row as
    # measured; Qwen3.5's float32 state, twice the bytes, reads it scaled by them.
    next_sm = ShardedModel.build(get_model("qwen3-next-80b-a3b"), 4, 1, "bf16", "bf16", "bf16", 8)
    q35_sm = ShardedModel.build(get_model("qwen3.5-35b-a3b"), 4, 1, "bf16", "bf16", "bf16", 8)
    assert (next_sm.lin_k_heads, next_sm.lin_v_heads) == (q35_sm.lin_k_heads, q35_sm.lin_v_heads) == (4, 8)
    row = next(r for r in load_profile("h200_sxm-vllm").tables["linear_attn"].rows
               if r[:7] == ["decode", 512, 1, 4, 8, 128, 128])
    assert timer.op_time(linear_decode_op(512, next_sm)) == pytest.approx(row[7] * 1e-6, rel=1e-6)
    assert 1.5 < timer.op_time(linear_decode_op(512, q35_sm)) / timer.op_time(linear_decode_op(512, next_sm)) < 2.0


def test_mla_decode_rows_come_from_the_kernel_table_in_the_latent_shape(profile):
    """SGLang's MLA decode kernel rows join attn_decode as one 288-wide KV head (the
    576-wide latent's K+V bytes); FA3's FP8-cache rows, ~10x slower than the FlashMLA
    kernel vLLM runs, are dropped."""
    src = pd.read_parquet(H100 / "mla" / "sglang" / "0.5.14" / "generation_mla_perf.parquet")
    assert set(src.kv_cache_dtype) == {"bfloat16", "fp8"}
    mla = [r for r in profile.tables["attn_decode"].rows if r[3:5] == [1, aic.MLA_DECODE_HEAD_DIM]]
    assert {r[5] for r in mla} == {"bf16"}
    one = src[(src.batch_size == 64) & (src.step == 4095) & (src.kv_cache_dtype == "bfloat16")].latency.median()
    got = next(r for r in mla if r[:3] == [64, 4096, 16])
    assert got[6] == pytest.approx(one * 1000.0, rel=1e-3)
    assert "MLA decode attention" in " ".join(profile.metadata.notes)


def test_mla_rows_are_read_but_do_not_refit_the_gqa_roofline():
    """The MLA kernel shares the attn_decode family; the family's fitted roofline, which
    scales GQA rows between shapes, is fitted on the GQA rows alone."""
    from simulator.cost.calibrated.interpolate import FamilyModel
    from simulator.cost.config import CostModelConfig

    rows = load_profile("h200_sxm-vllm").tables["attn_decode"].rows
    gqa = [r for r in rows if r[3:5] != [1, 288]]
    assert len(gqa) < len(rows)
    gpu = get_gpu("h200")
    both, alone = FamilyModel("attn_decode", rows, gpu, CostModelConfig()), FamilyModel("attn_decode", gqa, gpu,
                                                                                        CostModelConfig())
    assert both.fit_info == alone.fit_info


def test_deepseek_decode_attention_reads_the_mla_kernel_rows():
    from simulator.cost.calibrated import calibrated_backend
    from simulator.cost.config import CostModelConfig
    from simulator.cost.ops import ShardedModel, attn_decode_op
    from simulator.models import get_model

    timer = calibrated_backend(get_gpu("h200"), CostModelConfig(), "h200_sxm-vllm")
    sm = ShardedModel.build(get_model("deepseek-v3"), 8, 1, "fp8", "fp8", "bf16", 8)
    op = attn_decode_op(64, 64 * 4095, sm)  # 64 sequences of 4,095 cached tokens, plus the new one
    assert op.shape[1:] == (64 * 4096, 16, 1, 288)
    assert timer.source_of(op) == "profile"
    row = next(r for r in load_profile("h200_sxm-vllm").tables["attn_decode"].rows if r[:6] == [64, 4096, 16, 1, 288, "bf16"])
    assert timer.op_time(op) == pytest.approx(row[6] * 1e-6, rel=1e-6)
