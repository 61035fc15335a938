"""How a user meets calibration: listing and comparing profiles, warnings on a fresh
profile, a profile named beside its scenario, and a grid a short budget still spans."""

from __future__ import annotations

import json

import yaml
from conftest import CHATBOT, cli

from calibration.cli import fit_warnings
from calibration.grid import build_plan
from calibration.profile import PROFILES_DIR, load_profile
from simulator.config import load_scenario
from simulator.models import get_model


def test_show_without_a_name_lists_the_shipped_profiles(capsys):
    assert cli("calibrate", "show") in (0, None)
    out = capsys.readouterr().out
    assert "h100_sxm-vllm" in out and "h200_sxm-measured" in out


def test_compare_takes_the_reference_as_a_second_argument_and_names_absent_families(capsys):
    assert cli("calibrate", "compare", "h100_sxm-measured", "h100_sxm-vllm") in (0, None)
    out = " ".join(capsys.readouterr().out.split())
    assert "not compared (the reference has no rows of the family): elementwise" in out


def test_a_fresh_profile_with_noisy_or_cut_timings_is_flagged():
    profile = load_profile("h100_sxm-vllm")
    assert fit_warnings(profile, 600) == []
    fit = dict(profile.metadata.fit)
    fit["gemm"] = fit["gemm"].model_copy(update={"cv_median_ape_pct": 96.0})
    method = profile.metadata.method.model_copy(update={"truncated": True, "skipped": 40})
    noisy = profile.model_copy(update={"metadata": profile.metadata.model_copy(update={"fit": fit, "method": method})})
    warnings = fit_warnings(noisy, 5)
    assert any("budget cut the grid (40 points not measured)" in w for w in warnings)
    # On a cut (sparse) grid a large held-out error is the grid's, not noise.
    assert any(w.startswith("gemm: held-out error 96% (median) on a sparse grid (cut by the budget)")
               for w in warnings)
    full = noisy.model_copy(update={"metadata": noisy.metadata.model_copy(
        update={"method": method.model_copy(update={"truncated": False, "skipped": 0})})})
    assert fit_warnings(full, 600) == ["gemm: held-out error 96% (median): the timings look noisy; measure on an "
                                       "idle machine"]


def test_a_profile_the_scenario_names_beside_itself_is_found(tmp_path, monkeypatch):
    (tmp_path / "mine.json").write_text((PROFILES_DIR / "h100_sxm-vllm.json").read_text())
    d = yaml.safe_load(CHATBOT.read_text())
    d["hardware"]["profile"], d["cost_model"]["backend"] = "mine.json", "calibrated"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(d))
    monkeypatch.chdir(PROFILES_DIR)  # another folder: the file's relative path is read beside it
    loaded = load_scenario(tmp_path / "s.yaml")
    assert loaded.scenario.hardware.profile == str(tmp_path / "mine.json")
    # Beside the file wins over a file of that name in the working directory (docs: "beside
    # this file, else the working directory").
    d["hardware"]["profile"] = "h200_sxm-vllm.json"  # also in PROFILES_DIR, the working directory
    (tmp_path / "h200_sxm-vllm.json").write_text((PROFILES_DIR / "h100_sxm-vllm.json").read_text())
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(d))
    assert load_scenario(tmp_path / "b.yaml").scenario.hardware.profile == str(tmp_path / "h200_sxm-vllm.json")
    d["cost_model"]["backend"] = "roofline"  # a profile the roofline never reads is said
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(d))
    assert any("is not read: cost_model.backend is roofline" in w for w in load_scenario(tmp_path / "r.yaml").warnings)


def test_the_gemm_grid_measures_both_ends_of_m_for_every_shape_first():
    plan = build_plan([get_model("llama-3.1-8b")], [1])
    shapes = {(n, k) for _, n, k, _ in plan.gemm}
    first = plan.gemm[:2 * len(shapes)]
    assert {(n, k) for _, n, k, _ in first} == shapes
    assert {m for m, *_ in first} == {min(m for m, *_ in plan.gemm), max(m for m, *_ in plan.gemm)}
    assert json.dumps(plan.gemm)  # plain data, for the run's progress


def test_comparing_profiles_of_two_gpus_says_so(capsys):
    assert cli("calibrate", "compare", "h100_sxm-measured", "--against", "h200_sxm-vllm") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "note: the two profiles time different GPUs" in out
    assert cli("calibrate", "compare", "h100_sxm-measured", "--against", "h100_sxm-vllm") == 0
    assert "different GPUs" not in capsys.readouterr().out


def test_a_schema_version_written_as_text_is_named_as_such(tmp_path, capsys):
    raw = json.loads((PROFILES_DIR / "h100_sxm-measured.json").read_text())
    raw["schema_version"] = "1"
    path = tmp_path / "p.json"
    path.write_text(json.dumps(raw))
    assert cli("calibrate", "show", path) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "schema_version must be the number 1, not the string '1'" in err and "Traceback" not in err


def test_a_profile_is_said_to_time_only_its_own_gpus_pools():
    """A disaggregated pool on another GPU reads that GPU's shipped tables, not the named
    profile (regression, session-56 audit: silently)."""
    from conftest import ROOT

    sc = load_scenario(ROOT / "scenarios" / "disaggregated.yaml",
                       ["disaggregation.decode.gpu=h200", "hardware.profile=h100_sxm-vllm",
                        "cost_model.backend=calibrated"])
    (said,) = [w for w in sc.warnings if w.startswith("hardware.profile")]
    assert "the decode pool on h200 reads that GPU's shipped tables" in said
    same = load_scenario(ROOT / "scenarios" / "disaggregated.yaml",
                         ["hardware.profile=h100_sxm-vllm", "cost_model.backend=calibrated"])
    assert not [w for w in same.warnings if w.startswith("hardware.profile")]


def test_samples_that_spread_widely_are_called_noise_even_on_a_quick_grid():
    """Regression (session-56 audit): a --quick run on a busy CPU (GEMMs 100× slow, p10 at a
    fifth of the median) was only told its grid was sparse. The rows' own spread says noise."""
    profile = load_profile("h100_sxm-measured")
    assert not any("spread widely" in w for w in fit_warnings(profile, 600))
    gemm = profile.table("gemm")
    i, j = gemm.columns.index("p10_us"), gemm.columns.index("p90_us")
    rows = [[*r[:i], 1.0, 10.0, *r[j + 1:]] for r in gemm.rows]  # every GEMM row: p90 = 10 × p10
    tables = {**profile.tables, "gemm": gemm.model_copy(update={"rows": rows})}
    method = profile.metadata.method.model_copy(update={"quick": True})
    busy = profile.model_copy(update={"tables": tables,
                                      "metadata": profile.metadata.model_copy(update={"method": method})})
    (said,) = [w for w in fit_warnings(busy, 600) if "spread widely" in w]
    assert "the machine was busy; measure on an idle one" in said


def test_a_profile_from_a_device_off_the_catalog_is_said_to_stand_for_the_scenarios_gpu(tmp_path):
    """A catalog GPU's profile is checked against hardware.gpu (a mismatch is refused); one
    measured elsewhere cannot be, so its use for another GPU is said, not silent."""
    raw = json.loads((PROFILES_DIR / "h100_sxm-measured.json").read_text())
    d = yaml.safe_load(CHATBOT.read_text())
    d["cost_model"]["backend"] = "calibrated"
    for gpu, name, kind, says in ((None, "NVIDIA A10G", "cuda", "a GPU the catalog does not hold"),
                                  (None, "x86_64 (8 threads)", "cpu", "a CPU"),
                                  ("h100-sxm", "NVIDIA H100 80GB HBM3", "cuda", None)):
        raw["metadata"].update(gpu=gpu, gpu_name=name, device_kind=kind)
        (tmp_path / "p.json").write_text(json.dumps(raw))
        d["hardware"]["profile"] = str(tmp_path / "p.json")
        (tmp_path / "s.yaml").write_text(yaml.safe_dump(d))
        found = [w for w in load_scenario(tmp_path / "s.yaml").warnings if "was measured on" in w]
        if says is None:
            assert found == []
        else:
            assert found == [f"hardware.profile {tmp_path / 'p.json'} was measured on {name} ({says}): its kernel "
                             f"times stand for hardware.gpu {d['hardware']['gpu']} unchanged, with "
                             f"{d['hardware']['gpu']}'s memory and links"]
