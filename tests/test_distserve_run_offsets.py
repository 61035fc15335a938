"""benchmarks/distserve_run_offsets.py, which docs/fidelity.md's Known gaps cite: the eight
DistServe vLLM files replay one workload at eight rates, and the measurements contradict
each other on it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DISTSERVE = ROOT.parent / "shared" / "validation" / "distserve-opt13b-a100-vllm"


def _tool():
    spec = importlib.util.spec_from_file_location("distserve_run_offsets",
                                                  ROOT / "benchmarks" / "distserve_run_offsets.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def _frame(rate: float, ttft: list[float], tpot: list[float], prompts=(100, 200, 300)) -> pd.DataFrame:
    n = len(ttft)
    return pd.DataFrame({"arrival_s": [i / rate for i in range(n)], "prompt_tokens": list(prompts[:n]),
                         "output_tokens": [1, 5, 9][:n], "ttft_ms": ttft, "tpot_ms": tpot})


def test_the_rate_is_read_whole_from_names_with_a_decimal_point():
    tool = _tool()
    assert tool.rate_of(Path("vllm-150-1.5.csv")) == 1.5
    assert tool.rate_of(Path("vllm-400-4.csv")) == 4.0


def test_a_higher_rate_that_measured_faster_is_a_contradiction_and_one_that_did_not_is_not():
    tool = _tool()
    frames = {"vllm-3-1": _frame(1, [100, 110, 120], [0, 20, 30]),
              "vllm-3-2": _frame(2, [150, 160, 170], [0, 40, 50]),
              "vllm-2-3": _frame(3, [120, 130], [0, 45])}   # shorter: the shared prefix is 2
    means = tool.common_prefix_means(frames)
    assert list(means.rate) == [1, 2, 3] and set(means.requests) == {2}
    # TPOT averages only requests with two tokens or more (the first has one).
    assert list(means.tpot_ms) == [20, 40, 45]
    assert list(means.ttft_ms) == [105, 155, 125]
    found = tool.contradictions(means, "ttft_ms")
    assert [(lo, hi) for lo, hi, _ in found] == [("vllm-3-2", "vllm-2-3")]
    assert found[0][2] == pytest.approx(100 * (1 - 125 / 155))
    assert tool.contradictions(means, "tpot_ms") == []


def test_files_that_do_not_share_their_requests_are_refused():
    tool = _tool()
    with pytest.raises(ValueError, match="vllm-3-2"):
        tool.common_prefix_means({"vllm-3-1": _frame(1, [1, 2, 3], [0, 1, 1]),
                                  "vllm-3-2": _frame(2, [1, 2, 3], [0, 1, 1], prompts=(100, 250, 300))})


@pytest.mark.skipif(not DISTSERVE.is_dir(), reason=f"dev set missing: {DISTSERVE}")
def test_the_dev_set_replays_one_workload_and_its_2_req_s_runs_measure_slower_than_2_5():
    tool = _tool()
    files = sorted(DISTSERVE.glob("vllm-*.csv"), key=tool.rate_of)
    means = tool.common_prefix_means({f.name.removesuffix(".csv"): pd.read_csv(f) for f in files})
    assert len(means) == 8 and set(means.requests) == {100}
    by = means.set_index("file")
    # The same 100 requests: both 2 req/s runs measured a longer mean TTFT than the 2.5 req/s
    # run (221 and 217 ms against 192 ms), which no server that slows with load reproduces.
    for two in ("vllm-100-2", "vllm-200-2"):
        assert by.ttft_ms["vllm-250-2.5"] < 0.9 * by.ttft_ms[two]
    assert by.tpot_ms["vllm-250-2.5"] < by.tpot_ms["vllm-200-2"]
    # Everywhere else on that workload the measured means rise with the rate.
    rest = means[~means.file.isin(["vllm-100-2", "vllm-200-2"])]
    assert rest.tpot_ms.is_monotonic_increasing
