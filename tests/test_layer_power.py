"""calibration/power.py: prefill attention's sustained fraction and the collective wait's
power, measured by `simulate calibrate` on a GPU and used by the calibrated back end."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibration.power import (
    BIG_KERNELS,
    IDLE_LABEL,
    KernelPair,
    LayerDims,
    fit_wait_power,
    kernel_pairs,
    measure_layer_power,
)
from calibration.sustained import SequenceRun
from simulator.cost import CostModelConfig, kernel_times_source
from simulator.cost.sustained import power_relief
from simulator.hardware import get_gpu


def _pairs(q: float, share: float, f0s: tuple[float, ...]) -> list[KernelPair]:
    """What a GPU whose waits draw q of the limit would measure, capped at the burst speed."""
    return [KernelPair(f"k{i}", share, f0, min(1.0, f0 * power_relief(share, q))) for i, f0 in enumerate(f0s)]


@given(q=st.floats(0.0, 0.95), share=st.floats(0.05, 0.4))
def test_the_fit_recovers_the_wait_power_that_made_the_pairs(q, share):
    f0s = (0.72, 0.85, 0.88)
    pairs = _pairs(q, share, f0s)
    fit = fit_wait_power(pairs)
    if all(p.capped for p in pairs):
        assert fit is None  # every kernel back at its burst speed: q is only bounded
        return
    assert fit is not None
    q_fit, rms = fit
    assert rms < 1e-3
    # Any q giving the same uncapped fractions fits as well; those fractions must agree.
    for p in pairs:
        if not p.capped:
            assert min(1.0, p.f0 * power_relief(share, q_fit)) == pytest.approx(p.f, rel=2e-3)


def test_the_h200_measurement_is_reproduced_from_its_own_pairs():
    """Item 30's TP2 copy run on the H200 (share 0.15; gate/up 0.90 -> 0.95, attention 0.72
    -> 0.78) fits near the catalog's 0.58."""
    pairs = [KernelPair("gate_up GEMM", 0.15, 0.90, 0.95), KernelPair("down GEMM", 0.15, 0.90, 0.97),
             KernelPair("attention", 0.15, 0.72, 0.78)]
    q, rms = fit_wait_power(pairs)
    assert 0.4 < q < 0.75 and rms < 0.03


def test_no_throttling_or_only_capped_kernels_measure_nothing():
    assert fit_wait_power([KernelPair("k", 0.15, 1.0, 1.0), KernelPair("j", 0.15, 0.99, 1.0)]) is None
    assert fit_wait_power([KernelPair("k", 0.3, 0.9, 1.0)]) is None
    assert fit_wait_power([]) is None


def test_pairs_take_the_faster_burst_and_the_idle_share_of_the_waited_pass():
    base = SequenceRun(["qkv GEMM", "attention", "o GEMM", "gate_up GEMM", "down GEMM"],
                       [10.0, 20.0, 5.0, 40.0, 20.0], [11.0, 28.0, 5.5, 45.0, 22.0])
    waited = SequenceRun(["qkv GEMM", "attention", "o GEMM", IDLE_LABEL, "gate_up GEMM", "down GEMM", IDLE_LABEL],
                         [10.0, 19.0, 5.0, 9.0, 42.0, 20.0, 9.0], [10.5, 25.0, 5.2, 10.0, 39.0, 21.0, 10.0])
    pairs = {p.kernel: p for p in kernel_pairs(base, waited)}
    assert set(pairs) == set(BIG_KERNELS)
    share = 20.0 / sum(waited.steady_us)  # the idle kernels are 10 + 10 µs of it
    assert all(p.share == pytest.approx(share) for p in pairs.values())
    assert pairs["attention"].f0 == pytest.approx(19.0 / 28.0) and pairs["attention"].f == pytest.approx(19.0 / 25.0)
    assert pairs["gate_up GEMM"].f == 1.0 and pairs["gate_up GEMM"].capped


def test_the_layer_runs_on_a_cpu_and_say_what_they_found():
    """The bookkeeping on this machine's CPU (no power limit: a CPU says nothing about GPUs)."""
    torch = pytest.importorskip("torch")
    tiny = LayerDims(hidden=64, heads=4, kv_heads=2, head_dim=16, mlp=128)
    found = measure_layer_power(torch, torch.device("cpu"), "bf16", seconds=0.3, rest_s=0.0, tokens=32,
                                dims=tiny, window_s=0.05, clocks=lambda: "n/a")
    assert 0 < found.attention_fraction <= 1.0
    assert "attention fraction" in found.note and "wait of" in found.note
    if found.wait_power is None:
        assert "collective wait power" in found.missing
    else:
        assert 0.0 <= found.wait_power < 1.0 and "q = " in found.note


# A profile made before calibrate's layer-power step, as the shipped ones were until 2026-11-28.
_NO_LAYER_STEP = {"sustained_attention_fraction": None, "collective_wait_power_fraction": None}


def _own(update: dict):
    from calibration.profile import load_profile

    prof = load_profile("h100_sxm-measured")
    return prof.model_copy(update={"metadata": prof.metadata.model_copy(update=update)})


def test_a_profiles_own_layer_measurements_override_the_catalog():
    from simulator.cost.calibrated import CalibratedTimer

    h100 = get_gpu("h100-sxm")
    relief = CostModelConfig(collective_power_relief=True)
    plain = CalibratedTimer(_own(_NO_LAYER_STEP), h100, relief)
    assert plain.attention_sustained.source == "catalog"
    assert plain.attention_sustained.fraction == h100.sustained_attention_fraction
    assert plain.collective_wait_power == h100.collective_wait_power_fraction
    own = CalibratedTimer(_own({"sustained_attention_fraction": 0.6, "collective_wait_power_fraction": 0.3}),
                          h100, relief)
    assert (own.attention_sustained.fraction, own.attention_sustained.source) == (0.6, "profile")
    assert own.collective_wait_power == 0.3
    assert "prefill attention 0.60" in kernel_times_source(own)
    # Without the relief option the wait power stays unused, as the catalog's does.
    assert CalibratedTimer(_own({"collective_wait_power_fraction": 0.3}), h100).collective_wait_power is None


def test_layer_measurements_must_be_fractions():
    from pydantic import ValidationError

    for field, bad in (("sustained_attention_fraction", 0.0), ("sustained_attention_fraction", 1.5),
                       ("collective_wait_power_fraction", 1.0), ("collective_wait_power_fraction", -0.1)):
        with pytest.raises(ValidationError, match=field):
            _own({}).metadata.model_validate(_own({}).metadata.model_dump() | {field: bad})


def test_show_says_whose_layer_measurements_a_profile_uses(tmp_path, capsys):
    from test_calibration import _main

    from calibration.profile import save_profile

    path = save_profile(_own({"sustained_attention_fraction": 0.6, "collective_wait_power_fraction": 0.3}),
                        tmp_path / "own.json")
    _main(["calibrate", "show", str(path)])
    text = " ".join(capsys.readouterr().out.split())
    assert "prefill attention: 0.60 of its burst rate, measured inside a prefill layer in this run" in text
    assert "collective wait: 0.30 of the power limit drawn" in text and "in this run" in text
    _main(["calibrate", "show", str(save_profile(_own(_NO_LAYER_STEP), tmp_path / "older.json"))])
    text = " ".join(capsys.readouterr().out.split())  # a profile from before the step: the catalog's
    assert "prefill attention: 0.74" in text and "collective wait: 0.75" in text and "(GPU catalog)" in text
    _main(["calibrate", "show", "h100_sxm-measured"])  # the shipped run measured both
    text = " ".join(capsys.readouterr().out.split())
    assert "prefill attention: 0.75 of its burst rate, measured inside a prefill layer in this run" in text
    assert "collective wait: 0.63 of the power limit drawn" in text
