"""benchmarks/first_round_share.py, which docs/fidelity.md's Known gaps cite: it splits a
closed-loop row's predicted mean TTFT into the first round and the rest exactly."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("first_round_share", ROOT / "benchmarks" / "first_round_share.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_the_first_round_share_and_the_rest_make_up_the_predicted_mean(tmp_path):
    src = tmp_path / "sweep.csv"
    src.write_text("system,model,precision,tp_size,isl,osl,concurrency,ttft_ms,tpot_ms\n"
                   "h200_sxm,meta-llama/Llama-3.1-70B,fp8,8,1024,128,4,80.0,8.0\n"
                   "h200_sxm,meta-llama/Llama-3.1-70B,fp8,8,1024,128,32,150.0,10.0\n")
    frame = _tool().first_round_rows(src, ROOT / "scenarios" / "benchmark-concurrency.yaml")
    assert list(frame["clients"]) == [4, 32]
    rounds = 10  # validate's default: ten requests per client
    for row in frame.itertuples():
        n = row.clients * rounds
        assert row.first_round_share + row.rest_mean * (n - row.clients) / n == pytest.approx(row.predicted)
        assert row.gap == pytest.approx(row.measured - row.predicted)
    # Every client sends at once: the first round of 32 queues behind its own prefills, so
    # its mean is longer than the later rounds' and grows with the clients.
    many = frame.iloc[1]
    assert many.first_round_share * rounds > many.rest_mean
    assert many.first_round_share > frame.iloc[0].first_round_share
