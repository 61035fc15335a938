"""GPUs added to the catalog for names that benchmark files use: H800, H20, A800, GH200,
H100 NVL, L40, RTX A6000, RTX 4090, A10, A30, MI325X, MI350X and MI355X, and the A100's two PCIe
boards. (No V100: vLLM's V1 engine needs
compute capability 8.0, and Volta has no bf16.)

Names resolve (torch device names and short names alike) without stealing any older
alias; the figures keep the datasheet relations between siblings; borrowed kernel tables
point at GPUs with shipped profiles; and a small scenario runs on the new parts.
"""

from __future__ import annotations

import pytest
from conftest import scenario, simulate, time_limit

from simulator.cost import COST_BACKENDS, CostModelConfig, RooflineTimer
from simulator.cost.calibrated import CalibratedTimer, shipped_profile_for
from simulator.errors import CatalogError, ServesimError
from simulator.hardware import GPU_CATALOG, get_gpu

NEW_GPUS = (
    "h800", "h20", "a800-80gb-sxm", "gh200", "gh200-144gb", "h100-nvl", "l40", "rtx-a6000",
    "rtx-4090", "a10", "mi325x", "rtx-pro-6000", "mi355x", "mi350x", "a100-80gb-pcie", "a100-40gb-pcie", "a30",
)  # fmt: skip


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        # torch.cuda.get_device_name() / nvidia-smi / rocminfo spellings
        ("NVIDIA H800", "h800"),
        ("NVIDIA H20", "h20"),
        ("NVIDIA A800-SXM4-80GB", "a800-80gb-sxm"),
        ("NVIDIA GH200 480GB", "gh200"),
        ("NVIDIA GH200 120GB", "gh200"),
        ("NVIDIA GH200 144G HBM3e", "gh200-144gb"),
        ("NVIDIA GH200 144GB HBM3e", "gh200-144gb"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA L40", "l40"),
        ("NVIDIA RTX A6000", "rtx-a6000"),
        ("NVIDIA A30", "a30"),
        ("a30", "a30"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("NVIDIA A10", "a10"),
        ("AMD Instinct MI325X", "mi325x"),
        ("AMD Instinct MI355X", "mi355x"),
        ("AMD Instinct MI350X", "mi350x"),
        ("NVIDIA A100-PCIE-40GB", "a100-40gb-pcie"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
        # short names
        ("h800", "h800"),
        ("H20", "h20"),
        ("a800", "a800-80gb-sxm"),
        ("GH200", "gh200"),
        ("h100_nvl", "h100-nvl"),
        ("L40", "l40"),
        ("A6000", "rtx-a6000"),
        ("rtx a6000", "rtx-a6000"),
        ("4090", "rtx-4090"),
        ("RTX4090", "rtx-4090"),
        ("A10", "a10"),
        ("MI325X", "mi325x"),
        ("MI355X", "mi355x"),
        ("mi350", "mi350x"),
        ("a100_pcie", "a100-80gb-pcie"),
        ("A100-PCIE-40GB", "a100-40gb-pcie"),
        ("a100", "a100-80gb-sxm"),  # the bare name stays the SXM4 board
    ],
)
def test_new_names_resolve(alias, expected):
    assert get_gpu(alias).name == expected


@pytest.mark.parametrize("name", NEW_GPUS)
def test_every_spelling_of_a_new_gpu_resolves_to_it(name):
    gpu = GPU_CATALOG[name]
    for spelling in (gpu.name, gpu.display_name, *gpu.aliases):
        assert get_gpu(spelling).name == name, spelling


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        # Near neighbours of the new short names still go where they went before.
        ("h200", "h200"),
        ("H200", "h200"),
        ("NVIDIA H200", "h200"),
        ("h200_sxm", "h200"),
        ("h100", "h100-sxm"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("H100 PCIe", "h100-pcie"),
        ("a10g", "a10g"),
        ("A10G", "a10g"),
        ("A100", "a100-80gb-sxm"),
        ("a100_sxm", "a100-80gb-sxm"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("L40S", "l40s"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA L4", "l4"),
        ("l4", "l4"),
        ("AMD Instinct MI300X", "mi300x"),
        ("mi300", "mi300x"),
        ("b200_sxm", "b200"),
        ("GB200", "gb200"),
    ],
)
def test_older_names_resolve_as_before(alias, expected):
    assert get_gpu(alias).name == expected


@pytest.mark.parametrize(
    "name",
    ["h2", "h80", "a80", "a1000", "v100", "l400", "gh20", "h20-141gb", "h800-pcie", "mi32"],
)
def test_near_misses_stay_unknown(name):
    """Lookup is exact on the normalised key: a near miss is an error, never a guess."""
    with pytest.raises(CatalogError, match="unknown GPU"):
        get_gpu(name)


def test_the_new_aliases_take_no_older_key():
    older = {n: g for n, g in GPU_CATALOG.items() if n not in NEW_GPUS}
    for name, gpu in older.items():
        for spelling in (gpu.name, gpu.display_name, *gpu.aliases):
            assert get_gpu(spelling).name == name, spelling


# ----------------------------------------------------------------------------- figures

def _same_except(a: str, b: str, *fields: str) -> None:
    da = GPU_CATALOG[a].model_dump(exclude={"name", "display_name", "aliases", "cost_per_gpu_hour",
                                            "kernel_tables_from", *fields})
    db = GPU_CATALOG[b].model_dump(exclude={"name", "display_name", "aliases", "cost_per_gpu_hour",
                                            "kernel_tables_from", *fields})
    assert da == db


def test_h800_is_an_h100_sxm_with_less_nvlink():
    h800, h100 = get_gpu("h800"), get_gpu("h100-sxm")
    # The sustained rates were measured on an H100 SXM only (benchmarks/sustained_gemm.py).
    _same_except("h800", "h100-sxm", "intra_node_link", "sustained_tensor_fraction", "sustained_attention_fraction",
                 "collective_wait_power_fraction")
    assert h800.intra_node_link.bandwidth_gbps == 200 == h100.intra_node_link.bandwidth_gbps * 4 / 9
    assert h800.kernel_tables_from == "h100-sxm"


def test_a800_is_an_a100_80gb_with_less_nvlink():
    a800, a100 = get_gpu("a800"), get_gpu("a100-80gb-sxm")
    _same_except("a800-80gb-sxm", "a100-80gb-sxm", "intra_node_link")
    assert a800.intra_node_link.bandwidth_gbps == 200 < a100.intra_node_link.bandwidth_gbps
    assert a800.kernel_tables_from == "a100-80gb-sxm"
    with pytest.raises(CatalogError, match="no fp8"):
        a800.peak_tflops_for("fp8")


def test_h20_is_a_cut_down_hopper():
    h20, h100 = get_gpu("h20"), get_gpu("h100-sxm")
    assert h20.peak_tflops_for("bf16") == 148 and h20.peak_tflops_for("fp8") == 296
    assert h20.peak_tflops["fp8"] < 0.2 * h100.peak_tflops["fp8"]
    assert h20.hbm_tbps > h100.hbm_tbps and h20.memory_gb > h100.memory_gb
    assert h20.num_sms < h100.num_sms
    assert h20.intra_node_link == h100.intra_node_link  # full 900 GB/s NVLink
    assert h20.kernel_tables_from is None  # its compute differs from every profiled GPU


def test_gh200_variants():
    gh, gh144, h100, h200 = (get_gpu(n) for n in ("gh200", "gh200-144gb", "h100-sxm", "h200"))
    for g in (gh, gh144):
        assert g.peak_tflops == h100.peak_tflops and g.num_sms == h100.num_sms
        assert g.pcie.bandwidth_gbps > h100.pcie.bandwidth_gbps  # NVLink-C2C host link
    assert (gh.memory_gb, gh.hbm_tbps) == (96, 4.0)
    assert (gh144.memory_gb, gh144.hbm_tbps) == (144, 4.9)
    assert gh.kernel_tables_from is None
    assert gh144.kernel_tables_from == "h200"
    assert abs(gh144.hbm_tbps - h200.hbm_tbps) / h200.hbm_tbps < 0.05


def test_h100_nvl_sits_between_pcie_and_sxm():
    nvl, pcie, sxm = get_gpu("h100-nvl"), get_gpu("h100-pcie"), get_gpu("h100-sxm")
    assert pcie.peak_tflops["bf16"] < nvl.peak_tflops["bf16"] < sxm.peak_tflops["bf16"]
    assert nvl.peak_tflops["fp8"] == pytest.approx(2 * nvl.peak_tflops["bf16"], rel=1e-3)
    assert sxm.hbm_tbps < nvl.hbm_tbps and nvl.memory_gb == 94
    assert nvl.intra_node_link == pcie.intra_node_link  # bridges join pairs only


def test_ada_and_ampere_pcie_cards():
    l40, l40s = get_gpu("l40"), get_gpu("l40s")
    assert l40.peak_tflops["bf16"] == pytest.approx(l40s.peak_tflops["bf16"] / 2, rel=0.01)
    assert "fp8" in l40.peak_tflops  # Ada has FP8 tensor cores
    assert (l40.memory_gb, l40.hbm_tbps, l40.num_sms) == (l40s.memory_gb, l40s.hbm_tbps, l40s.num_sms)
    rtx4090 = get_gpu("rtx-4090")
    assert rtx4090.peak_tflops["bf16"] == 165.2  # FP32-accumulate rate, not 330.3
    assert rtx4090.peak_tflops["fp8"] == pytest.approx(2 * rtx4090.peak_tflops["bf16"], rel=1e-3)
    for name in ("a10", "rtx-a6000"):
        with pytest.raises(CatalogError, match="no fp8"):
            get_gpu(name).peak_tflops_for("fp8")
    a10, a10g = get_gpu("a10"), get_gpu("a10g")
    assert (a10.memory_gb, a10.hbm_tbps) == (a10g.memory_gb, a10g.hbm_tbps)
    assert a10.num_sms < a10g.num_sms and a10.peak_tflops["bf16"] > a10g.peak_tflops["bf16"]
    for name in ("l40", "rtx-a6000", "rtx-4090", "a10"):
        assert get_gpu(name).intra_node_link.name.startswith("PCIe")  # no NVSwitch


def test_mi325x_is_an_mi300x_with_more_memory():
    mi325x, mi300x = get_gpu("mi325x"), get_gpu("mi300x")
    _same_except("mi325x", "mi300x", "memory_gb", "usable_memory_gib", "hbm_tbps")
    assert (mi325x.memory_gb, mi325x.hbm_tbps) == (256, 6.0)
    assert mi325x.usable_memory_gib - mi325x.memory_gb == pytest.approx(
        mi300x.usable_memory_gib - mi300x.memory_gb)


def test_cdna4_peaks_round_to_amds_datasheet_figures():
    """AMD's MI355X/MI350X datasheets (dense): FP16/BF16 2.5/2.3 PF, FP8 and INT8 5.0/4.6,
    MXFP4 10.1/9.2, FP32 vector 157.3/144.2 TF; our peaks derive them from CUs and clocks."""
    for name, (half, fp8, fp4, fp32) in {"mi355x": (2.5, 5.0, 10.1, 157.3),
                                         "mi350x": (2.3, 4.6, 9.2, 144.2)}.items():
        peaks = get_gpu(name).peak_tflops
        assert round(peaks["bf16"] / 1e3, 1) == round(peaks["fp16"] / 1e3, 1) == half
        assert round(peaks["fp8"] / 1e3, 1) == round(peaks["int8"] / 1e3, 1) == fp8
        assert round(peaks["fp4"] / 1e3, 1) == fp4
        assert round(peaks["fp32"], 1) == fp32
        assert "tf32" not in peaks  # CDNA4 has no TF32 matrix path
    _same_except("mi350x", "mi355x", "peak_tflops")


@pytest.mark.parametrize("name", NEW_GPUS)
def test_new_entries_are_consistent(name):
    gpu = GPU_CATALOG[name]
    assert 0.85 * gpu.memory_gb / 1.073741824 < gpu.usable_memory_gib <= gpu.memory_gb
    half = gpu.peak_tflops.get("bf16") or gpu.peak_tflops["fp16"]
    assert half > gpu.peak_tflops["fp32"]
    if "bf16" in gpu.peak_tflops and "fp16" in gpu.peak_tflops:
        assert gpu.peak_tflops["bf16"] == gpu.peak_tflops["fp16"]
    if "fp8" in gpu.peak_tflops:
        assert gpu.peak_tflops["fp8"] == pytest.approx(2 * half, rel=0.03)
    assert gpu.cost_per_gpu_hour > 0


# ----------------------------------------------------------------------------- kernel tables

@pytest.mark.parametrize(
    ("name", "profile"),
    [("h800", "h100_sxm-vllm"), ("a800", "a100_sxm-vllm"), ("gh200-144gb", "h200_sxm-vllm")],
)
def test_borrowed_tables_are_shipped(name, profile):
    gpu = get_gpu(name)
    assert gpu.kernel_tables_from is not None
    donor = GPU_CATALOG[gpu.kernel_tables_from]
    assert (donor.vendor, donor.num_sms) == (gpu.vendor, gpu.num_sms)
    assert shipped_profile_for(gpu) == profile
    timer = COST_BACKENDS["auto"](gpu, CostModelConfig(), None)
    assert isinstance(timer, CalibratedTimer) and timer.profile.metadata.gpu == donor.name


def test_gpus_without_tables_fall_back_to_the_roofline():
    h20 = get_gpu("h20")
    with pytest.raises(ServesimError, match="no shipped calibration profile"):
        shipped_profile_for(h20)
    assert isinstance(COST_BACKENDS["auto"](h20, CostModelConfig(), None), RooflineTimer)


# ----------------------------------------------------------------------------- end to end

def _run(d: dict):
    with time_limit(60):
        return simulate(d)


@pytest.mark.parametrize(
    ("gpu", "model", "dtypes"),
    [
        ("h20", "llama-3.1-8b", {}),
        ("h20", "llama-3.1-8b", {"weight_dtype": "fp8", "activation_dtype": "fp8"}),
        ("h800", "llama-3.1-8b", {}),
        ("gh200", "llama-3.1-8b", {}),
        ("a10", "llama-2-7b", {"weight_dtype": "fp16", "activation_dtype": "fp16", "kv_dtype": "fp16"}),
        ("rtx-4090", "llama-3.1-8b", {}),
        ("mi325x", "llama-3.1-8b", {}),
        ("mi355x", "llama-3.1-8b", {"weight_dtype": "fp8", "activation_dtype": "fp8"}),
    ],
)
def test_small_scenario_completes(gpu, model, dtypes):
    d = scenario(gpu=gpu, model=model, num_requests=40, max_model_len=2048)
    d["model"].update(dtypes)
    sim, res = _run(d)
    assert sim.gpu.name == get_gpu(gpu).name
    assert len(res.requests) == 40
    assert (res.requests["status"] == "completed").all()


def test_h20_is_slower_than_h100_on_a_compute_heavy_load():
    """Long prompts are compute bound: H20's ~15% tensor throughput shows in the TTFT."""
    kw = dict(num_requests=20, prompt={"type": "fixed", "value": 2048}, output={"type": "fixed", "value": 4},
              max_model_len=4096)
    _, h20 = _run(scenario(gpu="h20", **kw))
    _, h100 = _run(scenario(gpu="h100-sxm", **kw))
    assert h20.requests["ttft_ms"].mean() > 2 * h100.requests["ttft_ms"].mean()


def test_a100_pcie_boards_are_the_sxm4_dies_on_pcie():
    """Same GA100 tensor peaks and SMs; less HBM bandwidth on the 80 GB board (1,935 against
    2,039 GB/s) and the 40 GB board's 1,555 GB/s; bridged pairs only, so TP talks over PCIe;
    no borrowed kernel tables (their power limits are 300 W and 250 W against 400 W)."""
    for pcie, sxm in (("a100-80gb-pcie", "a100-80gb-sxm"), ("a100-40gb-pcie", "a100-40gb")):
        p, s = get_gpu(pcie), get_gpu(sxm)
        assert p.peak_tflops == s.peak_tflops and p.num_sms == s.num_sms == 108
        assert p.memory_gb == s.memory_gb and p.hbm_tbps <= s.hbm_tbps
        assert p.intra_node_link.name == p.pcie.name == "PCIe Gen4 x16"
        assert p.kernel_tables_from is None
        with pytest.raises(ServesimError):
            shipped_profile_for(p)
    assert get_gpu("a100-80gb-pcie").hbm_tbps == 1.935
