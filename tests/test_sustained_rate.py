"""The sustained tensor-core rate: derived from a profile's own long GEMM rows, applied
to the compute-bound part of GEMMs and experts only."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator import api
from simulator.cost import CostModelConfig
from simulator.cost.calibrated import calibrated_backend
from simulator.cost.ops import Op
from simulator.cost.sustained import LONG_US, MIN_LONG_ROWS, sustained_factor, sustained_rates
from simulator.hardware import get_gpu

BENCH = Path(__file__).resolve().parents[1] / "scenarios" / "benchmark-concurrency.yaml"


def _rows(dtype: str, long_slowdown: float, n_long: int = MIN_LONG_ROWS) -> list[list]:
    """Per (N, K): two short rows (0.7 and 1.4 ms) at one rate, one long row (44 ms) at
    `long_slowdown` of it."""
    rate = 1.0e8  # m*n*k per µs
    rows = []
    for i in range(n_long):
        n, k = 8192 + 1024 * i, 8192
        rows += [[m, n, k, dtype, m * n * k / rate] for m in (1024, 2048)]
        rows.append([65536, n, k, dtype, 65536 * n * k / rate / long_slowdown])
    assert all(r[4] < 3000 or r[4] >= LONG_US for r in rows)
    return rows


def test_long_rows_slower_than_short_ones_give_the_fraction():
    rates = sustained_rates(_rows("fp8", 0.8) + _rows("bf16", 1.0))
    assert rates["fp8"].fraction == pytest.approx(0.8)
    assert rates["fp8"].long_rows >= MIN_LONG_ROWS
    assert rates["bf16"].fraction == 1.0


def test_a_slowdown_within_the_noise_or_on_too_few_rows_is_none():
    assert sustained_rates(_rows("fp8", 0.97))["fp8"].fraction == 1.0
    assert "fp8" not in sustained_rates(_rows("fp8", 0.8, n_long=2))


def test_the_shipped_tables_slow_fp8_on_hopper_and_blackwell_only():
    """The kernel-table evidence of docs/fidelity.md item 16, read from the shipped profiles."""
    from calibration.profile import load_profile

    def fractions(profile: str) -> dict[str, float]:
        rates = sustained_rates(load_profile(profile).table("gemm").rows)
        return {d: r.fraction for d, r in rates.items() if r.fraction < 1.0}

    h200 = fractions("h200_sxm-vllm")
    assert set(h200) == {"fp8"} and 0.8 < h200["fp8"] < 0.92
    b200 = fractions("b200_sxm-vllm")
    assert set(b200) == {"fp8", "fp4"} and all(0.7 < f < 0.85 for f in b200.values())
    assert fractions("a100_sxm-vllm") == {}
    assert fractions("rtx_pro_6000_server-vllm") == {}  # no long row slows down
    # Our direct measurement (benchmarks/sustained_gemm.py) agrees with the tables on FP8.
    for gpu, profile in (("h100-sxm", "h100_sxm-vllm"), ("h200", "h200_sxm-vllm")):
        assert fractions(profile)["fp8"] == pytest.approx(get_gpu(gpu).sustained_tensor_fraction["fp8"], abs=0.02)


def test_a_gpus_measured_fraction_overrides_the_tables():
    """H100/H200 BF16 GEMMs slow down too when run for seconds; their tables' long rows
    (timed for well under the ~0.1 s the clocks take to drop) do not show it."""
    timer = calibrated_backend(get_gpu("h200"), CostModelConfig(), "h200_sxm-vllm")
    assert {d: (r.fraction, r.source) for d, r in timer.sustained.items()} == {
        "fp8": (0.88, "catalog"), "bf16": (0.85, "catalog")}
    b200 = calibrated_backend(get_gpu("b200"), CostModelConfig(), "b200_sxm-vllm")
    assert {d: r.source for d, r in b200.sustained.items()} == {"fp8": "tables", "fp4": "tables", "bf16": "carried"}
    assert calibrated_backend(get_gpu("h200"), CostModelConfig(sustained_tensor_rate=False),
                              "h200_sxm-vllm").sustained == {}


def test_a_catalog_fraction_must_be_a_fraction_of_a_known_dtype():
    from pydantic import ValidationError

    h200 = get_gpu("h200")
    for bad in ({"fp8": 1.2}, {"fp8": 0.0}, {"fp4": 0.8}):
        with pytest.raises(ValidationError, match="sustained_tensor_fraction"):
            type(h200).model_validate(h200.model_dump() | {"sustained_tensor_fraction": bad})


@given(compute=st.floats(1e-7, 1.0), memory=st.floats(1e-7, 1.0), fraction=st.floats(0.5, 1.0))
def test_the_factor_lies_between_none_and_the_full_slowdown(compute, memory, fraction):
    f = sustained_factor(compute, memory, fraction)
    assert 1.0 - 1e-12 <= f <= 1.0 / fraction + 1e-12
    if memory >= compute / fraction:  # memory-bound even at the lower clock
        assert f == pytest.approx(1.0)
    if compute >= memory:  # compute-bound: the whole slowdown
        assert f == pytest.approx(1.0 / fraction)


def _gemm(m: int, n: int = 8192, k: int = 8192) -> Op:
    return Op("gemm", "gemm", 2.0 * m * n * k, m * k + k * n + 2.0 * m * n, 1, (m, n, k), "fp8")


def test_prefill_gemms_slow_down_and_decode_gemms_do_not():
    on = calibrated_backend(get_gpu("h200"), CostModelConfig(), "h200_sxm-vllm")
    off = calibrated_backend(get_gpu("h200"), CostModelConfig(sustained_tensor_rate=False), "h200_sxm-vllm")
    fraction = on.sustained["fp8"].fraction
    assert on.op_time(_gemm(8192)) == pytest.approx(off.op_time(_gemm(8192)) / fraction)
    assert on.op_time(_gemm(8)) == off.op_time(_gemm(8))
    bf16 = Op("gemm", "gemm", 2.0 * 8192**3, 3 * 2.0 * 8192**2, 1, (8192, 8192, 8192), "bf16")
    assert on.op_time(bf16) == pytest.approx(off.op_time(bf16) / on.sustained["bf16"].fraction)
    from test_calibration import _sm

    from simulator.cost.ops import attn_decode_op, attn_prefill_op

    # Prefill attention (compute-bound) runs at the lowered clock too, at the fraction
    # measured for it inside a prefill layer; decode attention (memory-bound) keeps its time.
    attn = attn_prefill_op(((8192, 0),), _sm())
    assert on.attention_sustained.fraction == get_gpu("h200").sustained_attention_fraction
    assert on.op_time(attn) == pytest.approx(off.op_time(attn) / on.attention_sustained.fraction)
    decode = attn_decode_op(32, 32 * 4096, _sm())
    assert on.op_time(decode) == off.op_time(decode)


def test_fp16_gemms_slow_down_as_bf16_ones_do():
    """FP16 and BF16 share the tensor cores' datapath and peak: an FP16 model's prefill
    runs at BF16's measured sustained rate (it ran at the burst rate until session 43),
    and the run summary and `explain` name that rate."""
    on = calibrated_backend(get_gpu("h200"), CostModelConfig(), "h200_sxm-vllm")
    off = calibrated_backend(get_gpu("h200"), CostModelConfig(sustained_tensor_rate=False), "h200_sxm-vllm")
    shape = (8192, 8192, 8192)
    fp16 = Op("gemm", "gemm", 2.0 * 8192**3, 3 * 2.0 * 8192**2, 1, shape, "fp16")
    bf16 = Op("gemm", "gemm", 2.0 * 8192**3, 3 * 2.0 * 8192**2, 1, shape, "bf16")
    assert on.op_time(fp16) == pytest.approx(on.op_time(bf16))
    assert on.op_time(fp16) == pytest.approx(off.op_time(fp16) / on.sustained["bf16"].fraction)
    from simulator.cost import sustained_rates_used

    assert set(sustained_rates_used(on, ["fp16"])) == {"bf16"}
    from simulator.explain import explain

    half = ["model.name=llama-3.1-8b"] + [f"model.{f}_dtype=fp16" for f in ("weight", "activation", "kv")]
    report = explain(api.load(BENCH, half), prefill=4096)
    assert any("fp16 (at bf16's rate) kernels" in n for n in report.notes)


def test_prefill_attention_takes_its_own_measured_fraction_where_the_catalog_has_one():
    """Inside a long prefill, attention slows with the lowered SM clock more than the GEMMs
    around it (H100 0.74, H200 0.71 against FP8 GEMMs' 0.83, 0.88); elsewhere, and for a
    CPU-timed profile, it keeps its dtype's fraction (or none)."""
    from test_calibration import _sm, synthetic_profile

    from simulator.cost import kernel_times_source
    from simulator.cost.calibrated import CalibratedTimer
    from simulator.cost.ops import attn_prefill_op

    for gpu in ("h100-sxm", "h200"):
        spec = get_gpu(gpu)
        assert spec.sustained_attention_fraction < min(spec.sustained_tensor_fraction.values())
    h200 = calibrated_backend(get_gpu("h200"), CostModelConfig(), "h200_sxm-vllm")
    assert "prefill attention 0.71" in kernel_times_source(h200)
    b200 = calibrated_backend(get_gpu("b200"), CostModelConfig(), "b200_sxm-vllm")
    # No direct measurement on a B200: Hopper's relation is carried over, and said to be.
    assert b200.attention_sustained.source == "carried" and "prefill attention 0.67 (carried)" in kernel_times_source(b200)
    assert calibrated_backend(get_gpu("h200"), CostModelConfig(sustained_tensor_rate=False),
                              "h200_sxm-vllm").attention_sustained is None
    assert CalibratedTimer(synthetic_profile(gpu=None), get_gpu("h200")).attention_sustained is None
    # A GPU without the attention measurement: prefill attention at its dtype's fraction.
    plain = get_gpu("h200").model_copy(update={"sustained_attention_fraction": None})
    on = calibrated_backend(plain, CostModelConfig(), "h200_sxm-vllm")
    off = calibrated_backend(plain, CostModelConfig(sustained_tensor_rate=False), "h200_sxm-vllm")
    attn = attn_prefill_op(((8192, 0),), _sm())
    assert on.op_time(attn) == pytest.approx(off.op_time(attn) / on.sustained[attn.dtype].fraction)


def test_an_attention_fraction_must_be_a_fraction():
    from pydantic import ValidationError

    h200 = get_gpu("h200")
    for bad in (0.0, 1.2, -0.5):
        with pytest.raises(ValidationError, match="sustained_attention_fraction"):
            type(h200).model_validate(h200.model_dump() | {"sustained_attention_fraction": bad})


def test_a_sequences_kernels_are_timed_at_the_start_and_after_the_load():
    """calibration/sustained.py's measure_sequence on this machine's CPU: the bookkeeping."""
    torch = pytest.importorskip("torch")
    from calibration.sustained import SequenceRun, measure_sequence

    a, b = torch.randn(64, 64), torch.randn(64, 64)
    parts = [("matmul", lambda: a @ b), ("add", lambda: a + b)]
    run = measure_sequence(torch, torch.device("cpu"), parts, seconds=0.3, rest_s=0.0, window_s=0.05,
                           clocks=lambda: "n/a")
    assert run.labels == ["matmul", "add"] and len(run.burst_us) == len(run.steady_us) == 2
    assert all(t > 0 for t in run.burst_us + run.steady_us) and run.windows and run.clocks_before == "n/a"
    assert all(0 < f <= 1.0 for f in run.fractions)
    assert SequenceRun(["x", "y"], [8.0, 10.0], [10.0, 9.0]).fractions == [0.8, 1.0]


def test_a_lone_request_prefills_slower_and_decodes_as_fast():
    """One request alone on 1xH200 (Llama-3.1-70B FP8): TTFT grows by close to the full
    slowdown (its prefill is GEMM-bound), TPOT by < 1% (decode GEMMs are memory-bound)."""
    def run(on: bool) -> dict:
        loaded = api.load(BENCH, [
            "parallelism.tp=1", "workload.arrival.concurrency=1", "workload.num_requests=1",
            f"cost_model.sustained_tensor_rate={str(on).lower()}"])
        return api.run(loaded).summary

    on, off = run(True), run(False)
    fraction = calibrated_backend(get_gpu("h200"), CostModelConfig(), "h200_sxm-vllm").sustained["fp8"].fraction
    ratio = on["ttft_ms"]["mean"] / off["ttft_ms"]["mean"]
    assert 1.0 + 0.6 * (1 / fraction - 1) < ratio < 1 / fraction
    assert on["tpot_ms"]["mean"] == pytest.approx(off["tpot_ms"]["mean"], rel=0.01)


def test_a_profiles_own_measurement_overrides_the_catalog():
    """`simulate calibrate` on a GPU records the fractions it measured; they win."""
    from test_calibration import synthetic_profile

    from simulator.cost.calibrated import CalibratedTimer

    prof = synthetic_profile()
    assert CalibratedTimer(prof, get_gpu("h100-sxm")).sustained["bf16"].source == "catalog"
    own = prof.model_copy(update={"metadata": prof.metadata.model_copy(update={"sustained_fraction": {"bf16": 0.7}})})
    rate = CalibratedTimer(own, get_gpu("h100-sxm")).sustained["bf16"]
    assert (rate.fraction, rate.source) == (0.7, "profile")
    cpu = synthetic_profile(gpu=None)  # a CPU profile: no GPU power limit applies
    assert CalibratedTimer(cpu, get_gpu("h100-sxm")).sustained == {}


def test_the_sustained_measurement_runs_and_reports_a_fraction():
    """calibration/sustained.py on this machine's CPU (tiny GEMM): the bookkeeping, not a GPU finding."""
    torch = pytest.importorskip("torch")
    from calibration.sustained import SustainedRun, measure_sustained, sustained_fractions

    run = measure_sustained(torch, torch.device("cpu"), (64, 128, 128), "bf16", seconds=0.3, rest_s=0.0,
                            window_s=0.05, clocks=lambda: "n/a")
    assert len(run.windows) >= 3 and all(t2 > t1 for (t1, _), (t2, _) in zip(run.windows, run.windows[1:], strict=False))
    assert 0 < run.fraction <= 1.0 and run.burst_us <= run.alone_us and run.clocks_after == "n/a"
    slow = SustainedRun((1, 1, 1), "fp8", 10.0, 10.0, 12.5)
    fast = SustainedRun((2, 2, 2), "fp8", 10.0, 10.0, 10.0)
    assert slow.fraction == 0.8 and sustained_fractions([slow, fast, run])["fp8"] == 0.9


def test_a_tp_layer_with_idle_all_reduces_puts_one_after_o_and_one_after_down():
    """calibration/power.py (sustained_gemm.py --idle-us): the duty-cycle experiment's layer (CPU: the
    composition and the idle part's length, not a GPU finding)."""
    torch = pytest.importorskip("torch")
    import time

    from calibration.power import IDLE_LABEL, layer_parts

    cpu = torch.device("cpu")
    plain = [label for label, _ in layer_parts(torch, cpu, "layer", 16, 8, "bf16", 0)]
    parts = layer_parts(torch, cpu, "layer", 16, 8, "bf16", 0, idle_us=2000)
    labels = [label for label, _ in parts]
    assert IDLE_LABEL not in plain and [x for x in labels if x != IDLE_LABEL] == plain
    assert labels[labels.index("o GEMM") + 1] == IDLE_LABEL and labels[-1] == IDLE_LABEL
    t0 = time.perf_counter()
    parts[labels.index(IDLE_LABEL)][1]()
    assert time.perf_counter() - t0 >= 0.002
    # --idle-copy-mb: the wait starts with a copy moving that traffic, then spins.
    copying = layer_parts(torch, cpu, "layer", 16, 8, "bf16", 0, idle_us=2000, idle_copy_mb=4.0)
    assert [label for label, _ in copying] == labels
    t0 = time.perf_counter()
    copying[labels.index(IDLE_LABEL)][1]()
    assert time.perf_counter() - t0 >= 0.002


def test_a_gpu_measured_only_through_its_tables_carries_hoppers_relations():
    """B200-class GPUs: the tables show FP8 slowing, but no one ran BF16 or attention back to
    back there; H100/H200 measured both, so BF16 takes FP8's rate and prefill attention
    ~0.85 of it, marked as carried. A GPU whose tables show no FP8 slowdown (A100) gets none,
    and one with its own measurement keeps it."""
    from simulator.cost.calibrated.timer import hopper_attention_ratio
    from simulator.cost.sustained import SustainedRate, carried_over

    ratio = hopper_attention_ratio()
    h100, h200 = get_gpu("h100-sxm"), get_gpu("h200")
    assert ratio == pytest.approx((0.74 / 0.83 + 0.71 / 0.88) / 2) and 0.8 < ratio < 0.9
    assert (h100.sustained_attention_fraction, h200.sustained_attention_fraction) == (0.74, 0.71)
    b200 = calibrated_backend(get_gpu("b200"), CostModelConfig(), "b200_sxm-vllm")
    fp8 = b200.sustained["fp8"]
    assert fp8.source == "tables" and fp8.fraction < 0.9
    assert (b200.sustained["bf16"].fraction, b200.sustained["bf16"].source) == (fp8.fraction, "carried")
    assert b200.attention_sustained.source == "carried"
    assert b200.attention_sustained.fraction == pytest.approx(ratio * fp8.fraction, abs=1e-3)
    assert calibrated_backend(get_gpu("a100-sxm"), CostModelConfig(), "a100_sxm-vllm").sustained == {}
    assert calibrated_backend(get_gpu("h200"), CostModelConfig(), "h200_sxm-vllm").sustained["bf16"].source == "catalog"
    # A BF16 rate of the tables' own that is already slower stays; nothing to carry from none.
    slow = {"fp8": SustainedRate(0.8, 9, 9), "bf16": SustainedRate(0.75, 9, 9)}
    assert carried_over(slow, ratio)[0]["bf16"].source == "tables"
    assert carried_over({"bf16": SustainedRate(1.0, 9, 9)}, ratio) == ({"bf16": SustainedRate(1.0, 9, 9)}, None)
    # A profile's own back-to-back measurement on that GPU replaces the carried rates.
    from calibration.profile import load_profile

    prof = load_profile("b200_sxm-vllm")
    own = prof.model_copy(update={"metadata": prof.metadata.model_copy(update={"sustained_fraction": {"bf16": 0.9}})})
    from simulator.cost.calibrated import CalibratedTimer

    timer = CalibratedTimer(own, get_gpu("b200"))
    assert timer.sustained["bf16"].source == "profile" and timer.attention_sustained is None


def test_families_filled_from_shipped_tables_run_at_the_profiles_own_sustained_rate():
    """A measured profile lacks fused-MoE rows, which the GPU's shipped tables fill in; its
    own back-to-back sustained fractions (H100: FP8 0.84) come before the tables' (0.83),
    for those kernels too (regression, session-56 audit: the fill-ins kept the tables')."""
    from simulator.cost.calibrated.profiles import calibrated_backend
    from simulator.cost.config import CostModelConfig
    from simulator.cost.ops import ShardedModel, token_ops
    from simulator.hardware import get_gpu
    from simulator.models import get_model

    timer = calibrated_backend(get_gpu("h100-sxm"), CostModelConfig(), "h100_sxm-measured")
    shipped = timer.shipped_for("moe")
    assert shipped is not None and timer.sustained["fp8"].fraction != shipped.sustained["fp8"].fraction
    sharded = ShardedModel.build(get_model("qwen3-30b-a3b"), 1, 1, "fp8", "fp8", "bf16", 8)
    moe = next(op for op in token_ops(65536, sharded) if op.family == "moe")  # compute-bound
    assert timer.source_of(moe).startswith("shipped:")
    raw = shipped.op_time(moe) / shipped._sustain(moe)
    assert timer.op_time(moe) == pytest.approx(raw * timer._sustain(moe))
    assert timer._sustain(moe) < shipped._sustain(moe)  # a higher fraction: less slowing
