"""`simulate calibrate` as a user meets it: bad input, interruptions and what is left on disk.

Each bad input must end in one error naming the option or file, the reason and the fix
(exit status 2, no traceback) before any kernel is timed; an interrupted or failed run
must leave no partial profile at --out. The timing loops are replaced by a stub that
returns a small profile, so nothing here depends on the speed of the machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import calibration.bench as bench
import calibration.cli as cal_cli
from calibration.profile import (
    CalibrationError,
    MethodInfo,
    Profile,
    ProfileMetadata,
    load_profile,
    make_table,
    profile_json,
    save_profile,
)
from simulator.cli import main

ROOT = Path(__file__).resolve().parent.parent


def cpu_profile(**method) -> Profile:
    """A small CPU-measured profile, as `run_benchmarks` returns it (no fit yet)."""
    rows = {
        "gemm": [[m, n, 512, "bf16", 5.0 + m * n / 1e4, 4.0, 6.0, 10] for m in (1, 16, 128) for n in (512, 1024)],
        "attn_decode": [[b, c, 4, 1, 64, "bf16", 8.0 + b * c / 100, 7.0, 9.0, 10] for b in (1, 4) for c in (64, 256)],
        "elementwise": [["copy", s, "bf16", 2.0 + s / 1e5, 1.5, 2.5, 10] for s in (2**16, 2**18, 2**20)],
    }
    meta = ProfileMetadata(gpu_name="Some CPU", gpu=None, device_kind="cpu", compute_units=2,
                           date="2026-01-01T00:00:00Z", source="measured",
                           method=MethodInfo(timer="perf_counter", warmup=2, repeats=10, budget_s=60.0,
                                             elapsed_s=1.0, **method))
    return Profile(metadata=meta, tables={f: make_table(f, r) for f, r in rows.items()})


@pytest.fixture
def no_measuring(monkeypatch):
    """run_benchmarks must not be reached: the input is refused before any timing."""
    pytest.importorskip("torch")

    def fail(*args, **kwargs):
        raise AssertionError("measured before the input was checked")

    monkeypatch.setattr(bench, "run_benchmarks", fail)


@pytest.fixture
def stub_measuring(monkeypatch):
    """run_benchmarks returns a small profile at once; the plan it was given is recorded."""
    pytest.importorskip("torch")
    seen = {}

    def fake(plan, **kwargs):
        seen["plan"] = plan
        return cpu_profile()

    monkeypatch.setattr(bench, "run_benchmarks", fake)
    return seen


def user_error(args: list[str], capsys) -> str:
    """The one-message error of a refused command (exit status 2, no traceback)."""
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert "Traceback" not in err
    return " ".join(err.split())


def squash(text: str) -> str:
    return "".join(text.split())


def measure(out, *extra: str, model: str = "llama-3.1-8b", device: str = "cpu") -> list[str]:
    return ["calibrate", "--model", model, "--quick", "--device", device, "--out", str(out), *extra]


def test_inputs_are_checked_before_torch_is_looked_for(tmp_path, monkeypatch, capsys):
    """Without torch a wrong --model, --device or --out still names itself: the user fixes
    everything in one pass instead of installing torch first to learn of a typo."""
    def no_torch():
        raise cal_cli.CalibrationError("calibration needs torch, which is not installed")

    monkeypatch.setattr(bench, "require_torch", no_torch)
    assert "--model: unknown model 'nosuch'" in user_error(measure(tmp_path / "p.json", model="nosuch"), capsys)
    assert "--device: unknown device 'tpu'" in user_error(measure(tmp_path / "p.json", device="tpu"), capsys)
    assert "is a directory" in user_error(measure(tmp_path), capsys)
    assert "needs torch" in user_error(measure(tmp_path / "p.json"), capsys)


# -- the output path ---------------------------------------------------------------------------
def test_an_out_path_that_cannot_be_written_is_refused_before_measuring(tmp_path, no_measuring, monkeypatch,
                                                                        capsys):
    err = user_error(measure(tmp_path), capsys)  # a directory
    assert squash(f"--out {tmp_path}: is a directory") in squash(err) and "fix: give a file name" in err
    blocker = tmp_path / "file.json"
    blocker.write_text("{}")
    err = user_error(measure(blocker / "x.json"), capsys)  # under a file
    assert squash(f"{blocker} is a file, not a directory") in squash(err)
    # The importer checks too, before minutes of conversion.
    import calibration.aiconfigurator as aic

    monkeypatch.setattr(aic, "convert", lambda *a, **k: pytest.fail("converted before --out was checked"))
    err = user_error(["calibrate", "import-aiconfigurator", "--system", "h100_sxm", "--out", str(tmp_path)], capsys)
    assert "is a directory" in err


def test_a_device_at_out_is_refused_and_a_link_is_written_through(tmp_path, no_measuring, capsys):
    """`--out /dev/null` used to replace the system's /dev/null with a regular file (the
    write moves a staging file onto the path); a link now keeps pointing at its file."""
    err = user_error(measure("/dev/null"), capsys)
    assert "is not a regular file" in err and Path("/dev/null").is_char_device()
    target = tmp_path / "real.json"
    link = tmp_path / "link.json"
    link.symlink_to(target)
    save_profile(cpu_profile(), link)
    assert link.is_symlink() and load_profile(target).metadata.device_kind == "cpu"


def test_a_refused_or_failed_run_leaves_no_new_folders(tmp_path, capsys):
    out = tmp_path / "a" / "b" / "p.json"
    err = user_error(measure(out, "--budget-s", "0"), capsys)
    assert "nothing was measured" in err and list(tmp_path.iterdir()) == []
    save_profile(cpu_profile(), out)  # a write makes them
    assert load_profile(out).metadata.device_kind == "cpu"


def test_an_interrupted_write_leaves_the_old_profile_and_no_partial_file(tmp_path, stub_measuring, monkeypatch,
                                                                        capsys):
    out = tmp_path / "mine.json"
    old = profile_json(cpu_profile())
    out.write_text(old)

    def interrupted(profile, path):  # Ctrl-C while the PNG is drawn, after the JSON was written
        raise KeyboardInterrupt

    monkeypatch.setattr(cal_cli, "_plot", interrupted)
    with pytest.raises(SystemExit) as exc:
        main(measure(out))
    assert exc.value.code == 130
    assert out.read_text() == old  # the earlier profile, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.json"]  # no PNG, no staging files


def test_save_profile_never_leaves_half_a_file(tmp_path, monkeypatch):
    out = tmp_path / "p.json"
    write_text = Path.write_text

    def half_then_interrupt(self, text, *args, **kwargs):
        write_text(self, text[: len(text) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", half_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        save_profile(cpu_profile(), out)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    save_profile(cpu_profile(), out)
    assert load_profile(out).metadata.device_kind == "cpu"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


def test_a_finished_run_writes_the_profile_and_its_png(tmp_path, stub_measuring, capsys):
    out = tmp_path / "sub" / "cpu.json"
    main(measure(out))
    assert load_profile(out).metadata.fit["gemm"].points == 6
    assert (tmp_path / "sub" / "cpu-roofline.png").stat().st_size > 10_000
    assert sorted(p.name for p in out.parent.iterdir()) == ["cpu-roofline.png", "cpu.json"]
    text = " ".join(capsys.readouterr().out.split())
    assert "measured on a CPU (2 threads): a development profile" in text


def test_a_run_that_measured_nothing_writes_nothing(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "b0.json"
    err = user_error(measure(out, "--budget-s", "0"), capsys)
    assert "--budget-s: nothing was measured" in err and "no profile written" in err
    assert not out.exists() and not out.with_name("b0-roofline.png").exists()


# -- the other options --------------------------------------------------------------------------
@pytest.mark.parametrize("option", [["--cpu-threads", "-1"], ["--token-budget", "0"], ["--budget-s", "-5"]])
def test_nonsense_numbers_are_usage_errors(tmp_path, no_measuring, capsys, option):
    with pytest.raises(SystemExit) as exc:
        main(measure(tmp_path / "x.json", *option))
    assert exc.value.code == 2
    assert option[0] in capsys.readouterr().err


def test_token_budget_floor_is_the_smallest_prefill_chunk():
    from calibration.grid import PREFILL_Q

    assert PREFILL_Q[0] == cal_cli.MIN_TOKEN_BUDGET


def test_an_unknown_model_names_the_option(tmp_path, no_measuring, capsys):
    err = user_error(measure(tmp_path / "x.json", model="llama-9"), capsys)
    assert err.startswith("error: --model: unknown model 'llama-9'") and "simulate list models" in err


def test_an_unknown_device_is_refused_before_measuring(tmp_path, no_measuring, capsys):
    err = user_error(measure(tmp_path / "x.json", device="gpu"), capsys)
    assert "--device: unknown device 'gpu'" in err


def test_models_given_twice_are_measured_once():
    models, tps = cal_cli._models(["llama-3.1-8b,llama-3.1-8b", "llama-3.1-8b"], None)
    assert [m.name for m in models] == ["llama-3.1-8b"] and tps is None


def test_a_disaggregated_scenario_measures_its_pools_tp():
    _, tps = cal_cli._models(None, ROOT / "scenarios" / "disaggregated.yaml")
    assert tps == [4]  # its pools' TP, not parallelism.tp (unused there, 1)


def test_an_explicit_tp_overrides_the_scenarios(tmp_path, stub_measuring, capsys):
    scenario = str(ROOT / "scenarios" / "llama70b-tp4-replicas.yaml")
    main(["calibrate", "--scenario", scenario, "--tp", "1", "--device", "cpu", "--out", str(tmp_path / "a.json")])
    assert stub_measuring["plan"].tp == [1]
    main(["calibrate", "--scenario", scenario, "--device", "cpu", "--out", str(tmp_path / "b.json")])
    assert stub_measuring["plan"].tp == [4]


# -- show / compare on the wrong file ------------------------------------------------------------
def test_show_and_compare_say_what_the_wrong_file_is(tmp_path, capsys):
    png = tmp_path / "mine-roofline.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    yaml = tmp_path / "chat.yaml"
    yaml.write_text((ROOT / "scenarios" / "chatbot.yaml").read_text())
    empty = tmp_path / "empty.json"
    empty.write_text("")
    cut = tmp_path / "cut.json"
    cut.write_text(profile_json(cpu_profile())[:300])
    cases = [(png, "a PNG image, not a calibration profile"), (yaml, "not JSON, so not a calibration profile"),
             (empty, "an empty file"), (cut, "not valid JSON")]
    for path, said in cases:
        err = user_error(["calibrate", "show", str(path)], capsys)
        assert squash(f"error: {path}: {said}") in squash(err), err  # rich wraps (and folds long paths)
        assert "fix:" in err
    assert "the profile is truncated or corrupt" in err  # the last case: a cut-off profile
    err = user_error(["calibrate", "compare", "h100_sxm-vllm", "--against", str(png)], capsys)
    assert "a PNG image" in err
    err = user_error(["calibrate", "compare", "h100_sxm-vllm", "--against", "h100"], capsys)
    assert err.startswith("error: --against: calibration profile 'h100' not found")
    err = user_error(["calibrate", "show", str(tmp_path / "nope.json")], capsys)
    assert err.startswith("error: simulate calibrate show: calibration profile")
    assert "hardware.profile" not in err  # not a scenario field here


def test_hardware_profile_errors_still_name_the_field():
    with pytest.raises(CalibrationError) as exc:
        load_profile("no-such-profile")
    assert exc.value.where == "hardware.profile"


def test_show_says_a_profile_is_a_cpus_and_was_cut_short(tmp_path, capsys):
    path = save_profile(cpu_profile(truncated=True, skipped=77), tmp_path / "cpu.json")
    main(["calibrate", "show", str(path)])
    text = " ".join(capsys.readouterr().out.split())
    assert "measured on a CPU (2 threads): a development profile, its kernel times are this CPU's" in text
    assert "timing perf_counter around one call; 2 warm-up, 10 samples" in text
    assert "the 60 s budget ran out: 77 grid points not measured" in text
    assert "(of datasheet)" not in text  # a CPU has none
