"""Import NVIDIA's published per-op tables (aiconfigurator-core, Apache-2.0) as a profile.

aiconfigurator-core ships measured kernel latencies per system under
``aiconfigurator_core/systems/data/<system>/<family>/<backend>/<version>/*.parquet``.
The tables and their units, as read here (checked against physics: a 32768x65536x12288
bf16 GEMM at ~60 ms is ~880 TFLOP/s, an 8-GPU 512 MB all-reduce at ~2.1 ms is ~450 GB/s
bus bandwidth):

- ``gemm/<backend>/<v>/gemm_perf.parquet``: gemm_dtype, m, n, k, latency [ms].
- ``attention/<backend>/<v>/context_attention_perf.parquet``: batch_size, isl, num_heads,
  num_key_value_heads, head_dim, kv_cache_dtype, window_size, latency [ms]; causal
  prefill of `isl` fresh tokens per sequence (no prior context).
- ``attention/<backend>/<v>/generation_attention_perf.parquet``: same columns; one token
  per sequence over a KV of isl + step tokens (isl is 1), latency [ms].
- ``comm/nccl/<nccl version>/nccl_perf.parquet``: op_name, nccl_dtype, num_gpus,
  message_size [elements, not bytes], latency [ms]; all_gather's size is the gathered
  output, as in nccl-tests.
- ``comm/<backend>/<v>/custom_allreduce_perf.parquet``: the framework's own all-reduce
  (vLLM: CUDA-graph and eager variants), message_size [elements], latency [ms].

The package is an optional extra (``pip install -e '.[aiconfigurator]'``); its data
directory is found without importing the package (its compiled core is not needed).
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from typing import get_args

from calibration.profile import (
    CalibrationError,
    MethodInfo,
    Profile,
    ProfileMetadata,
    make_table,
    round_sig,
)
from simulator.cost.ops import MLA_LATENT_HALF as MLA_DECODE_HEAD_DIM
from simulator.models.spec import MoeRouting

PACKAGE = "aiconfigurator_core"
LICENSE_NOTE = ("Data: NVIDIA aiconfigurator-core {version} (Apache-2.0), "
                "Copyright (c) 2025-2026 NVIDIA CORPORATION & AFFILIATES.")
# fp8 = per-tensor scaled (Cutlass); nvfp4 = W4A4 with FP8 block scales (Blackwell only).
_GEMM_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "nvfp4": "fp4"}
_ATTN_DTYPES = {"bfloat16": "bf16", "float16": "fp16"}  # the attention math (query, output)
# KV-cache formats kept: fp8 rows time vLLM's FP8-KV kernels (FA3 quantises the query and
# runs in FP8), which are not simply the bf16 kernel at half the bytes.
_KV_DTYPES = {**_ATTN_DTYPES, "fp8": "fp8"}
_COMM_DTYPES = {"half": ("bf16", 2), "bfloat16": ("bf16", 2), "float16": ("fp16", 2)}
_COMM_OPS = {"all_reduce": "allreduce", "all_gather": "allgather"}
_MS_TO_US = 1000.0
# Fused-MoE weight formats -> ops.moe_table_dtype labels. Per-tensor fp8 is kept only for
# expert shapes without block-scaled fp8 rows (the checkpoints served are block-scaled).
_MOE_DTYPES = {"bfloat16": "bf16", "fp8_block": "fp8", "fp8": "fp8", "nvfp4": "fp4",
               "w4a16_mxfp4": "w4a16", "int4_wo": "w4a16"}
# Token-to-expert routings of the MoE rows kept: the power laws aiconfigurator's own estimates
# read (alpha 1.2 for its generic MoE family, 1.01 for DeepSeek-style ones; models.spec.
# MoeRouting says which model reads which). Its "balanced" rows are left out: real routers
# are imbalanced.
MOE_ROUTINGS = get_args(MoeRouting)
# Expert-parallel rows kept: up to 16 GPUs in one MoE group (two 8-GPU nodes), which keeps
# each shipped file within 6 MB (B200's, the largest, 5.5 MB with both routings).
MAX_EP = 16

# What ships in calibration/profiles/: the shapes the catalog's models need (N, K >= 512;
# head_dim 128 in every head layout, head_dim 64 in the GQA-4/8 layouts of gpt-oss and
# Llama-3.2-1B), every measured M up to 32k on a log-spaced subset.
SHIP_GEMM_M = frozenset({1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 160, 192, 256, 384, 512, 768, 1024,
                         1536, 2048, 3072, 4096, 8192, 16384, 32768})
SHIP_MIN_NK = 512
SHIP_HEAD_DIMS = frozenset({128})
SHIP_NARROW_HEADS = (64, frozenset({4, 8}))  # head_dim, query heads per KV head


def _shipped_heads(df):
    """Rows of the shipped attention subset (see SHIP_HEAD_DIMS, SHIP_NARROW_HEADS)."""
    dim, groups = SHIP_NARROW_HEADS
    gqa = df["num_heads"] // df["num_key_value_heads"]
    narrow = (df["head_dim"] == dim) & gqa.isin(groups) & (df["num_heads"] % df["num_key_value_heads"] == 0)
    return df["head_dim"].isin(SHIP_HEAD_DIMS) | narrow


def package_root() -> Path:
    """The installed aiconfigurator_core directory, located without importing it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CalibrationError("aiconfigurator-core is not installed", where="simulate calibrate import-aiconfigurator",
                               fix="pip install aiconfigurator-core (NVIDIA's tables; in a servesim checkout: "
                                   "pip install -e '.[aiconfigurator]')")
    return Path(next(iter(spec.submodule_search_locations)))


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aiconfigurator-core")
    except PackageNotFoundError:
        return "unknown"


def _read_parquet(path: Path):
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise CalibrationError("reading aiconfigurator tables needs pyarrow",
                               fix="pip install -e '.[aiconfigurator]' (or pip install pyarrow)") from None
    import pandas as pd

    return pd.read_parquet(path)


def _vkey(v: str) -> tuple:
    """Sort key for versions like 0.24.0, 1.3.0rc20, 0.5.6.post2."""
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.\-]|(?<=\d)(?=[a-z])", v))


def _subdirs(p: Path) -> list[str]:
    return sorted((d.name for d in p.iterdir() if d.is_dir()), key=_vkey) if p.is_dir() else []


def available(data_root: Path | None = None) -> dict[str, dict[str, list[str]]]:
    """{system: {backend: [versions with GEMM data]}} found in the package."""
    root = data_root or package_root() / "systems" / "data"
    out: dict[str, dict[str, list[str]]] = {}
    for system in _subdirs(root):
        gemm = root / system / "gemm"
        out[system] = {b: _subdirs(gemm / b) for b in _subdirs(gemm)}
    return out


def _current_version(systems_dir: Path, system: str, backend: str) -> str | None:
    """The package's own 'current' version for (system, backend), if it declares one."""
    path = systems_dir / "query_versions.yaml"
    if not path.is_file():
        return None
    import yaml

    doc = yaml.safe_load(path.read_text()) or {}
    slot = (doc.get("overrides", {}).get(system, {}) or {}).get(backend) or doc.get("defaults", {}).get(backend)
    return str(slot["current"]) if isinstance(slot, dict) and slot.get("current") else None


def resolve(system: str, backend: str, version: str | None,
            data_root: Path | None = None) -> tuple[Path, str]:
    """The system's data directory and the version to read; errors list what exists."""
    root = data_root or package_root() / "systems" / "data"
    avail = available(root)
    if system not in avail:
        raise CalibrationError(f"aiconfigurator has no system {system!r}", where="--system",
                               fix=f"use one of: {', '.join(avail)}")
    versions = avail[system].get(backend)
    if not versions:
        raise CalibrationError(f"aiconfigurator has no {backend!r} data for {system}", where="--backend",
                               fix=f"use one of: {', '.join(b for b, v in avail[system].items() if v)}")
    if version is None:
        current = _current_version(root.parent, system, backend)
        version = current if current in versions else versions[-1]
    elif version not in versions:
        raise CalibrationError(f"aiconfigurator has no {system}/{backend} version {version!r}",
                               where="--version", fix=f"use one of: {', '.join(versions)}")
    return root / system, version


def _nccl_dir(sys_dir: Path) -> Path | None:
    """NCCL tables: the version the system file names, else the newest present."""
    base = sys_dir / "comm" / "nccl"
    versions = _subdirs(base)
    if not versions:
        return None
    spec = sys_dir.parent.parent / f"{sys_dir.name}.yaml"
    want = None
    if spec.is_file():
        import yaml

        want = str(((yaml.safe_load(spec.read_text()) or {}).get("misc") or {}).get("nccl_version", ""))
    return base / (want if want in versions else versions[-1])


def _system_spec(sys_dir: Path) -> dict:
    spec = sys_dir.parent.parent / f"{sys_dir.name}.yaml"
    if not spec.is_file():
        return {}
    import yaml

    return yaml.safe_load(spec.read_text()) or {}


def _rows(df, cols: list[str], keep: Callable | None = None) -> list[list]:
    """Median-aggregate duplicate shapes (some tables repeat a shape across kernels/runs)."""
    if keep is not None:
        df = df[keep(df)]
    g = df.groupby(cols, sort=True)["latency_us"].agg(["median", "size"]).reset_index()
    out = []
    for rec in g.itertuples(index=False):
        vals = list(rec)
        shape = [v.item() if hasattr(v, "item") else v for v in vals[: len(cols)]]
        out.append([*shape, round_sig(float(vals[len(cols)])), None, None, None])
    return out


def _kept_moe(df, dtypes):
    """MoE rows of the kept layouts (tensor-parallel experts, pure expert parallelism up to
    MAX_EP), routing and weight formats (`dtypes`: source label -> profile label)."""
    tensor_parallel = df["moe_ep_size"] == 1
    expert_parallel = (df["moe_tp_size"] == 1) & df["moe_ep_size"].between(2, MAX_EP)
    return df[(tensor_parallel | expert_parallel) & df["distribution"].isin(MOE_ROUTINGS)
              & df["moe_dtype"].isin(dtypes)].copy()


def _moe_profile_rows(df, dtypes) -> tuple[list[list], list[str]]:
    """Profile rows (expert width per GPU, microseconds) and the kernels that produced them."""
    df["dtype"] = df["moe_dtype"].map(dtypes)
    df["inter"] = df["inter_size"] // df["moe_tp_size"]
    df["latency_us"] = df["latency"] * _MS_TO_US
    df = df.rename(columns={"num_tokens": "tokens", "hidden_size": "hidden", "num_experts": "experts",
                            "moe_ep_size": "ep", "distribution": "routing"})
    return (_rows(df, ["tokens", "hidden", "inter", "topk", "experts", "ep", "routing", "dtype"]),
            sorted(df["kernel_source"].unique()))


def _table_versions(base: Path, filename: str, at_most: str | None = None) -> list[str]:
    """The version folders under `base` holding `filename`, oldest first (only those at or
    below `at_most` when given)."""
    return [v for v in _subdirs(base) if (base / v / filename).is_file()
            and (at_most is None or _vkey(v) <= _vkey(at_most))]


def _moe_table_versions(sys_dir: Path, backend: str) -> list[str]:
    """The versions with a fused-MoE table for `backend`, oldest first."""
    return _table_versions(sys_dir / "moe" / backend, "moe_perf.parquet")


def _moe_rows(sys_dir: Path, backend: str, version: str) -> tuple[list[list], str, list[str]] | None:
    """Fused-MoE rows of the newest MoE table at or before `version` (else the oldest)."""
    versions = _moe_table_versions(sys_dir, backend)
    if not versions:
        return None
    older = [v for v in versions if _vkey(v) <= _vkey(version)]
    chosen = older[-1] if older else versions[0]
    df = _kept_moe(_read_parquet(sys_dir / "moe" / backend / chosen / "moe_perf.parquet"), _MOE_DTYPES)
    if df.empty:
        return None
    rows, kernels = _moe_profile_rows(df[~_per_tensor_shadowed(df)].copy(), _MOE_DTYPES)
    marlin = df[df["kernel_source"].str.contains("marlin") & df["moe_dtype"].isin(_MARLIN_MOE_DTYPES)]
    if not marlin.empty:
        rows += _moe_profile_rows(marlin.copy(), _MARLIN_MOE_DTYPES)[0]
    return rows, chosen, kernels


def _per_tensor_shadowed(df):
    """Per-tensor FP8 rows of an expert shape that also has block-scaled rows: the
    checkpoints of those models are block-scaled, so those rows time them."""
    shape = ["hidden_size", "topk", "num_experts"]
    blocked = set(map(tuple, df.loc[df["moe_dtype"] == "fp8_block", shape].drop_duplicates().to_numpy().tolist()))
    return (df["moe_dtype"] == "fp8") & df[shape].apply(tuple, axis=1).isin(blocked)


# vLLM's Triton fused MoE for FP8 experts where the default rows time another kernel. On
# Blackwell vLLM picks FlashInfer's TRT-LLM MoE, then DeepGEMM, before Triton
# (`select_fp8_moe_backend`); a run that turns both off (VLLM_USE_FLASHINFER_MOE_FP8=0,
# VLLM_MOE_USE_DEEP_GEMM=0, as InferenceX's MiniMax-M2.5 FP8 B200 script did on vLLM 0.17)
# runs Triton, 1.1-1.3x the TRT-LLM kernel's time at decode batches and 1.5-2x at prefill on
# B200. Those rows are labelled fp8t (`model.expert_kernel: triton`), from the newest table
# whose FP8 rows time Triton. On Hopper Triton is the default under TP: no extra rows.
_TRITON_FP8_MOE_DTYPES = {"fp8_block": "fp8t", "fp8": "fp8t"}


def _is_triton_moe(kernel_source: str) -> bool:
    return kernel_source == "vllm_fused_moe" or "triton" in kernel_source


def _triton_fp8_moe_rows(sys_dir: Path, backend: str, default_version: str) -> tuple[list[list], str, list[str]] | None:
    """FP8 fused-MoE rows of vLLM's Triton kernel, labelled fp8t, where the default table's
    block-scaled rows time another kernel; None where they are Triton already or no table
    has them."""
    def fp8_rows(version):
        df = _kept_moe(_read_parquet(sys_dir / "moe" / backend / version / "moe_perf.parquet"), _TRITON_FP8_MOE_DTYPES)
        return df[~_per_tensor_shadowed(df)]

    default = fp8_rows(default_version)
    # block-scaled checkpoints under TP: where the default already runs Triton (Hopper), no rows
    default = default[(default["moe_ep_size"] == 1) & (default["moe_dtype"] == "fp8_block")]
    if default.empty or default["kernel_source"].map(_is_triton_moe).all():
        return None
    for version in reversed(_moe_table_versions(sys_dir, backend)):
        df = fp8_rows(version)
        if not df.empty and df["kernel_source"].map(_is_triton_moe).all():
            rows, kernels = _moe_profile_rows(df.copy(), _TRITON_FP8_MOE_DTYPES)
            return rows, version, kernels
    return None


# vLLM's Marlin MoE (4-bit weights dequantised to BF16 in the kernel, Ampere-era mma
# instructions) is a choice on Hopper (VLLM_MXFP4_USE_MARLIN=1 for gpt-oss) where another
# kernel is the default. Its rows are also kept apart, labelled w4a16m, so a run that
# selects it is timed by Marlin's own rows (model.expert_kernel).
_MARLIN_MOE_DTYPES = {"w4a16_mxfp4": "w4a16m", "int4_wo": "w4a16m"}


# MXFP4 experts under MXFP8 inputs (W4A8): vLLM runs FlashInfer's TRT-LLM MoE this way on
# Blackwell when VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 (the gpt-oss recipes' setting), a
# switch aiconfigurator's vLLM collector does not turn. Its SGLang tables time the same
# FlashInfer kernel in both forms; their W4A16 rows agree with the vLLM 0.24 ones within
# 6% (median 1%; docs/fidelity.md, item 20), so the W4A8 rows are taken from there.
W4A8_SOURCE_BACKEND = "sglang"
_W4A8_MOE_DTYPES = {"w4a8_mxfp4_mxfp8": "w4a8"}


def _w4a8_moe_rows(sys_dir: Path) -> tuple[list[list], str, list[str]] | None:
    """W4A8 (MXFP4 x MXFP8) fused-MoE rows of the newest SGLang MoE table, labelled w4a8."""
    versions = _moe_table_versions(sys_dir, W4A8_SOURCE_BACKEND)
    if not versions:
        return None
    table = sys_dir / "moe" / W4A8_SOURCE_BACKEND / versions[-1] / "moe_perf.parquet"
    df = _kept_moe(_read_parquet(table), _W4A8_MOE_DTYPES)
    if df.empty:
        return None
    rows, kernels = _moe_profile_rows(df, _W4A8_MOE_DTYPES)
    return rows, versions[-1], kernels


# Gated DeltaNet kernels of gdn_perf.parquet: the chunked delta rule times prefill; decode is
# the recurrent step plus the conv-state update, the two kernels ops.linear_decode_op stands
# for. The prefill conv (causal_conv1d_fn) is left out: ops.py counts it as elementwise
# traffic over every token of the iteration.
_GDN_PREFILL = "chunk_gated_delta_rule"
_GDN_DECODE = ("fused_recurrent_gated_delta_rule", "causal_conv1d_update")
_GDN_SHAPE = ["num_k_heads", "num_v_heads", "head_k_dim", "head_v_dim"]


def _gdn_rows(sys_dir: Path, backend: str, version: str) -> tuple[list[list], str, list[str]] | None:
    """linear_attn rows from the newest gdn_perf table at or below `version`: one row per
    phase, sequences, tokens and per-GPU heads, the median over the models that share them
    (the kernels do not read the model width)."""
    base = sys_dir / "linear_attention" / backend
    versions = _table_versions(base, "gdn_perf.parquet", version)
    if not versions:
        return None
    import pandas as pd

    df = _read_parquet(base / versions[-1] / "gdn_perf.parquet")
    src = df["kernel_source"].astype(str)
    prefill = df[(df["phase"] == "context") & src.str.startswith(_GDN_PREFILL)].copy()
    prefill["kind"] = "prefill"
    decode = df[(df["phase"] == "generation") & src.str.startswith(_GDN_DECODE)]
    # the two decode kernels of one model and shape, summed; a shape missing either is dropped
    per_model = decode.groupby(["model_name", "batch_size", *_GDN_SHAPE])["latency"].agg(["sum", "count"])
    decode = per_model[per_model["count"] == len(_GDN_DECODE)].reset_index().rename(columns={"sum": "latency"})
    decode["kind"], decode["seq_len"] = "decode", 1
    both = pd.concat([prefill, decode], ignore_index=True)
    both = both.groupby(["kind", "batch_size", "seq_len", *_GDN_SHAPE], as_index=False)["latency"].median()
    both["latency_us"] = both["latency"] * _MS_TO_US
    both = both.rename(columns={"batch_size": "seqs", "seq_len": "tokens", "num_k_heads": "k_heads",
                                "num_v_heads": "v_heads", "head_k_dim": "k_dim", "head_v_dim": "v_dim"})
    rows = _rows(both, ["kind", "seqs", "tokens", "k_heads", "v_heads", "k_dim", "v_dim"])
    kernels = sorted(src[src.str.startswith((_GDN_PREFILL, *_GDN_DECODE))].unique())
    return rows, versions[-1], kernels


# MLA decode attention (DeepSeek-V3/R1, Kimi-K2): the kernel alone, from SGLang's
# generation_mla table, as `attn_decode` rows of the latent's shape in ops.py (one KV "head"
# MLA_DECODE_HEAD_DIM wide, whose K and V bytes are the 576-wide latent). vLLM's own tables
# time only the whole attention module (projections included); the context slope of those
# module rows matches these kernel rows to a few percent for a 16-bit cache (FA3's MLA path
# on Hopper, TRT-LLM's on Blackwell, which vLLM runs through FlashInfer), so the kernel is
# the same. FA3's FP8-cache MLA rows are ~10x slower than vLLM's FlashMLA and are dropped.
_MLA_DECODE_SOURCE = "sglang"
_MLA_FP8_MISMATCH = "flash_attention"


def _mla_decode_rows(sys_dir: Path) -> tuple[list[list], str, list[str]] | None:
    """attn_decode rows for MLA's latent from the newest SGLang generation_mla table."""
    base = sys_dir / "mla" / _MLA_DECODE_SOURCE
    versions = _table_versions(base, "generation_mla_perf.parquet")
    if not versions:
        return None
    df = _read_parquet(base / versions[-1] / "generation_mla_perf.parquet")
    keep = (df["mla_dtype"] == "bfloat16") & (
        (df["kv_cache_dtype"] == "bfloat16")
        | ((df["kv_cache_dtype"] == "fp8") & (df["kernel_source"] != _MLA_FP8_MISMATCH)))
    df = df[keep].copy()
    if df.empty:
        return None
    df["batch"] = df["batch_size"]
    df["ctx_len"] = df["isl"] + df["step"]
    df["heads"] = df["num_heads"]
    df["kv_heads"] = 1
    df["head_dim"] = MLA_DECODE_HEAD_DIM
    df["dtype"] = df["kv_cache_dtype"].map(_KV_DTYPES)
    df["latency_us"] = df["latency"] * _MS_TO_US
    rows = _rows(df, ["batch", "ctx_len", "heads", "kv_heads", "head_dim", "dtype"])
    return rows, versions[-1], sorted(df["kernel_source"].unique())


def convert(system: str, backend: str = "vllm", version: str | None = None, *, full: bool = False,
            data_root: Path | None = None) -> Profile:
    """Build a profile from one system/backend/version of aiconfigurator's tables.

    `full` keeps every fp16/bf16/fp8 GEMM and every head size; otherwise the shipped
    subset (the catalog's shapes, 1-6 MB) is kept.
    """
    sys_dir, version = resolve(system, backend, version, data_root)
    tables: dict = {}
    devices: set[str] = set()
    kernels: dict[str, list[str]] = {}
    notes = [
        "latency columns are milliseconds in the source tables; converted to microseconds",
        "NCCL/custom all-reduce message_size is an element count (fp16/bf16: 2 bytes each)",
        "p10/p90/samples are not published (null); median_us is the published latency",
    ]

    gemm_path = sys_dir / "gemm" / backend / version / "gemm_perf.parquet"
    if gemm_path.is_file():
        df = _read_parquet(gemm_path)
        devices.update(df["device"].unique())
        df = df[df["gemm_dtype"].isin(_GEMM_DTYPES)].copy()
        kernels["gemm"] = sorted(df["kernel_source"].unique())
        df["dtype"] = df["gemm_dtype"].map(_GEMM_DTYPES)
        df["latency_us"] = df["latency"] * _MS_TO_US
        keep = None if full else (lambda d: d["m"].isin(SHIP_GEMM_M) & (d["n"] >= SHIP_MIN_NK)
                                  & (d["k"] >= SHIP_MIN_NK))
        tables["gemm"] = make_table("gemm", _rows(df, ["m", "n", "k", "dtype"], keep))

    attn_dir = sys_dir / "attention" / backend / version
    for fam, fname, ctx in (("attn_prefill", "context_attention_perf.parquet", False),
                            ("attn_decode", "generation_attention_perf.parquet", True)):
        path = attn_dir / fname
        if not path.is_file():
            continue
        df = _read_parquet(path)
        devices.update(df["device"].unique())
        mask = df["kv_cache_dtype"].isin(_KV_DTYPES) & df["attn_dtype"].isin(_ATTN_DTYPES)
        if "window_size" in df:
            mask &= df["window_size"] == 0
        if "beam_width" in df:
            mask &= df["beam_width"] == 1
        if not full:
            mask &= _shipped_heads(df)
        df = df[mask].copy()
        kernels[fam] = sorted(df["kernel_source"].unique())
        df["dtype"] = df["kv_cache_dtype"].map(_KV_DTYPES)
        df["latency_us"] = df["latency"] * _MS_TO_US
        df = df.rename(columns={"batch_size": "batch", "num_heads": "heads",
                                "num_key_value_heads": "kv_heads"})
        if ctx:
            df["ctx_len"] = df["isl"] + df["step"]
            cols = ["batch", "ctx_len", "heads", "kv_heads", "head_dim", "dtype"]
        else:
            df["q_len"] = df["isl"]
            df["prior_ctx"] = 0
            cols = ["batch", "q_len", "prior_ctx", "heads", "kv_heads", "head_dim", "dtype"]
        tables[fam] = make_table(fam, _rows(df, cols))

    # beside the version's own decode rows only: a version without them keeps none
    mla = _mla_decode_rows(sys_dir) if backend == "vllm" and "attn_decode" in tables else None
    if mla is not None:
        rows, mla_version, mla_kernels = mla
        tables["attn_decode"] = make_table("attn_decode", tables["attn_decode"].rows + rows)
        kernels["attn_decode_mla"] = mla_kernels
        notes.append(f"MLA decode attention (head_dim {MLA_DECODE_HEAD_DIM}, one KV head: the latent) from "
                     f"mla/{_MLA_DECODE_SOURCE}/{mla_version}/generation_mla_perf: the kernel alone, which the "
                     "context slope of vLLM's own MLA module rows matches; FA3's FP8-cache rows left out")

    moe = _moe_rows(sys_dir, backend, version)
    if moe is not None:
        rows, moe_version, moe_kernels = moe
        notes.append(f"fused MoE from moe/{backend}/{moe_version}: expert parallelism 1 to {MAX_EP}, routings "
                     f"{', '.join(MOE_ROUTINGS)}; inter is the expert width per GPU (inter_size / moe_tp_size)")
        w4a8 = _w4a8_moe_rows(sys_dir) if backend == "vllm" else None
        if w4a8 is not None:
            w4a8_rows, w4a8_version, w4a8_kernels = w4a8
            rows, moe_kernels = rows + w4a8_rows, moe_kernels + w4a8_kernels
            notes.append(f"W4A8 (MXFP4 x MXFP8) fused MoE from moe/{W4A8_SOURCE_BACKEND}/{w4a8_version}: the same "
                         "FlashInfer TRT-LLM kernel vLLM runs under VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1")
        triton = _triton_fp8_moe_rows(sys_dir, backend, moe_version)
        if triton is not None:
            triton_rows, triton_version, triton_kernels = triton
            rows, moe_kernels = rows + triton_rows, moe_kernels + triton_kernels
            notes.append(f"FP8 fused MoE on vLLM's Triton kernel (label fp8t, model.expert_kernel: triton) from "
                         f"moe/{backend}/{triton_version}: the kernel vLLM runs with FlashInfer and DeepGEMM MoE "
                         "turned off")
        tables["moe"] = make_table("moe", rows)
        kernels["moe"] = moe_kernels

    gdn = _gdn_rows(sys_dir, backend, version)
    if gdn is not None:
        rows, gdn_version, gdn_kernels = gdn
        tables["linear_attn"] = make_table("linear_attn", rows)
        kernels["linear_attn"] = gdn_kernels
        notes.append(f"Gated DeltaNet from linear_attention/{backend}/{gdn_version}: prefill is the chunked "
                     "delta rule, decode the recurrent step plus the conv-state update; median over the "
                     "Qwen3.5 models sharing a per-GPU head count")

    comm_rows: dict[str, list] = {"allreduce": [], "allgather": []}
    nccl_dir = _nccl_dir(sys_dir)
    nccl_version = nccl_dir.name if nccl_dir else None
    if nccl_dir is not None and (nccl_dir / "nccl_perf.parquet").is_file():
        df = _read_parquet(nccl_dir / "nccl_perf.parquet")
        devices.update(df["device"].unique())
        df = df[df["op_name"].isin(_COMM_OPS) & df["nccl_dtype"].isin(_COMM_DTYPES)].copy()
        for op, fam in _COMM_OPS.items():
            part = df[df["op_name"] == op].copy()
            if part.empty:
                continue
            part["dtype"] = part["nccl_dtype"].map(lambda d: _COMM_DTYPES[d][0])
            part["bytes"] = part["message_size"] * part["nccl_dtype"].map(lambda d: _COMM_DTYPES[d][1])
            part["latency_us"] = part["latency"] * _MS_TO_US
            part["link"] = "intra"
            part["impl"] = "nccl"
            part = part.rename(columns={"num_gpus": "ranks"})
            comm_rows[fam] += _rows(part, ["bytes", "ranks", "link", "impl", "dtype"])
    ar_versions = [v for v in _subdirs(sys_dir / "comm" / backend) if _vkey(v) <= _vkey(version)]
    if ar_versions:
        path = sys_dir / "comm" / backend / ar_versions[-1] / "custom_allreduce_perf.parquet"
        if path.is_file():
            df = _read_parquet(path)
            devices.update(df["device"].unique())
            df = df[df["allreduce_dtype"].isin(_COMM_DTYPES)].copy()
            df["dtype"] = df["allreduce_dtype"].map(lambda d: _COMM_DTYPES[d][0])
            df["bytes"] = df["message_size"] * df["allreduce_dtype"].map(lambda d: _COMM_DTYPES[d][1])
            df["latency_us"] = df["latency"] * _MS_TO_US
            df["link"] = "intra"
            impl_col = "backend" if "backend" in df else "kernel_source"
            df["impl"] = df[impl_col].map(lambda s: f"{backend}_custom_{str(s).rsplit('_', 1)[-1]}".lower())
            df = df.rename(columns={"num_gpus": "ranks"})
            comm_rows["allreduce"] += _rows(df, ["bytes", "ranks", "link", "impl", "dtype"])
            kernels["custom_allreduce"] = sorted(df["kernel_source"].unique())
            notes.append(f"custom all-reduce from comm/{backend}/{ar_versions[-1]}; the simulator takes the "
                         "fastest implementation measured at each size (vLLM switches between them)")
    for fam, rows in comm_rows.items():
        if rows:
            tables[fam] = make_table(fam, sorted(rows, key=lambda r: (r[3], r[1], r[0])))
    if not tables:
        raise CalibrationError(f"no usable tables under {sys_dir} for {backend} {version}",
                               fix="pick another --version or --backend")

    device = sorted(devices)[0] if devices else system
    from simulator.errors import CatalogError
    from simulator.hardware import get_gpu

    try:
        gpu = get_gpu(device).name
    except CatalogError:
        try:
            gpu = get_gpu(system).name
        except CatalogError:
            gpu = None
    spec = _system_spec(sys_dir)
    mem = (spec.get("gpu") or {}).get("mem_capacity")
    pkg_version = package_version()
    meta = ProfileMetadata(
        gpu_name=device, gpu=gpu, device_kind="cuda",
        memory_gib=float(mem) / 2**30 if mem else None,
        attention_backend={f: ", ".join(kernels[f]) for f in ("attn_prefill", "attn_decode") if f in kernels},
        versions={"aiconfigurator-core": pkg_version, backend: version,
                  **({"nccl": nccl_version} if nccl_version else {}),
                  **{f"kernels.{f}": ", ".join(v) for f, v in kernels.items()}},
        date=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        source=f"aiconfigurator:{system}/{backend}/{version}",
        method=MethodInfo(timer="imported"),
        not_measured={"elementwise": "not in aiconfigurator's tables; default roofline",
                      "p2p": "not in aiconfigurator's tables (it models P2P analytically); default roofline"},
        notes=[*notes, ("subset: GEMM N,K >= 512 on a log-spaced M grid, head_dim 128 (--full keeps all)"
                        if not full else "full tables"), LICENSE_NOTE.format(version=pkg_version)],
    )
    return Profile(metadata=meta, tables=tables)
