"""Where a run's files go when no --output-dir is given, and files that are not text:
runs started in the same second keep their own folders, a scenario's name cannot place
them outside reports/, and a scenario or model config that is not UTF-8 is an error that
names the file."""

from __future__ import annotations

import json

import pytest
from conftest import CHATBOT, cli

from simulator import api
from simulator.errors import ServesimError
from simulator.models.hf_config import load_hf_config
from simulator.output import default_output_dir, staged


def test_two_runs_in_the_same_second_keep_both_results(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("simulator.output.time.strftime", lambda fmt: "20260101-000000")
    first = api.run(CHATBOT, ["workload.num_requests=20", "workload.seed=1"])
    second = api.run(CHATBOT, ["workload.num_requests=20", "workload.seed=2"])
    out1, out2 = api.write_outputs(first, report=False), api.write_outputs(second, report=False)
    assert out1 != out2 and out2.name == f"{out1.name}-2"
    seeds = [json.loads((o / "scenario.yaml").read_text().split("seed:")[1].split()[0]) for o in (out1, out2)]
    assert seeds == [1, 2]
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == [out1.name, out2.name]


def test_a_failed_write_leaves_no_claimed_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    final = default_output_dir("x")
    with pytest.raises(RuntimeError), staged(final, unique=True) as (tmp, claimed):
        (tmp / "summary.json").write_text("{}")
        assert claimed.is_dir()
        raise RuntimeError("interrupted")
    assert list((tmp_path / "reports").iterdir()) == []


@pytest.mark.parametrize("name", ["../../escaped", "/tmp/abs", "a b/c"])
def test_a_scenario_name_cannot_leave_reports(name):
    path = default_output_dir(name)
    assert path.parent.name == "reports" and len(path.parts) == 2
    assert "/" not in path.name and not path.name.startswith(".")


def test_a_scenario_that_is_not_utf8_names_the_byte(tmp_path, capsys):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(CHATBOT.read_text().replace("name: chatbot", "name: caf\xe9").encode("latin-1"))
    assert cli(str(bad), "-q", "-o", str(tmp_path / "out")) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{bad}: not UTF-8 text" in err and "save the file as UTF-8" in err
    assert not (tmp_path / "out").exists()


LLAMA_CONFIG = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
                "intermediate_size": 14336, "vocab_size": 128256, "num_key_value_heads": 8,
                "max_position_embeddings": 8192}


@pytest.mark.parametrize(("change", "named"), [
    ({"num_attention_heads": 0}, "num_heads"),
    ({"model_type": "gemma3_text", "sliding_window": 512, "sliding_window_pattern": 0, "head_dim": 128},
     "zero or not a number"),
])
def test_a_model_config_with_a_zero_count_is_an_error_not_a_crash(tmp_path, change, named):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA_CONFIG | change))
    with pytest.raises(ServesimError, match=named):
        load_hf_config(config)


def test_a_model_config_that_is_not_utf8_is_named(tmp_path):
    config = tmp_path / "config.json"
    config.write_bytes(json.dumps(LLAMA_CONFIG).encode() + b"\xff")
    with pytest.raises(ServesimError, match="not UTF-8 text"):
        load_hf_config(config)


def test_an_interrupt_after_the_files_are_written_says_they_are_complete(tmp_path, monkeypatch, capsys):
    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("simulator.cli.print_summary", interrupted)
    out = tmp_path / "out"
    assert cli(CHATBOT, "--set", "workload.num_requests=10", "-o", out) == 130
    assert f"the run's files are complete in {out}/" in " ".join(capsys.readouterr().err.split())
    assert (out / "summary.json").is_file()


def _run(out, *sets) -> int:
    return cli(CHATBOT, "--set", "workload.num_requests=5", *sets, "-o", out, "-q", "--no-report")


def test_a_folder_with_the_users_own_pictures_is_not_replaced(tmp_path, capsys):
    """Regression (session-56 audit): any *.png passed for servesim's own figure, and the
    folder, pictures and all, was replaced."""
    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "holiday.png").write_bytes(b"precious")
    assert _run(photos) == 2
    assert (photos / "holiday.png").read_bytes() == b"precious"
    assert "holds files servesim did not write (holiday.png)" in " ".join(capsys.readouterr().err.split())
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / "ttft_distribution.png").write_bytes(b"old figure")  # a previous run's: replaced
    assert _run(ours) == 0 and not (ours / "ttft_distribution.png").exists()


def test_an_output_folder_given_as_a_link_is_written_through(tmp_path):
    """Regression (session-56 audit): a symlinked -o crashed with a traceback after the run."""
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    assert _run(link) == 0 and link.is_symlink()
    assert (real / "summary.json").is_file()
    assert _run(link) == 0  # again, over the previous output
    assert (real / "summary.json").is_file()


def test_a_scenarios_output_dir_is_checked_before_the_run_and_named_in_the_fix(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    assert cli(CHATBOT, "--set", "workload.num_requests=5", "--set", f"output.dir={taken}", "-q") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "fix: choose a new or empty folder for output.dir in" in err
    assert "simulating" not in err
