"""InferenceX's published aggregate (`agg_bmk.json`) read as the sweep CSV it amounts to."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.validation.inferencex_json import INFERENCEX_KEYS
from simulator.validation.measured import read_measured
from simulator.validation.measurement import MeasurementError


def _entry(**over) -> dict:
    """One aggregate entry as InferenceX's workflow writes it (latencies in seconds)."""
    entry = {"hw": "h200", "conc": 8, "image": "vllm/vllm-openai:v0.13.0", "model": "openai/gpt-oss-120b",
             "framework": "vllm", "precision": "fp4", "spec_decoding": "none", "disagg": False, "isl": 1024,
             "osl": 1024, "is_multinode": False, "tp": 2, "ep": 1, "dp_attention": "false",
             "mean_ttft": 0.0587, "mean_tpot": 0.00491, "median_ttft": 0.05}
    entry.update(over)
    return entry


def _write(tmp_path, entries) -> list:
    path = tmp_path / "agg_bmk.json"
    path.write_text(json.dumps(entries))
    return [path]


def test_an_entry_is_a_sweep_row_with_its_release_and_recipe(tmp_path):
    measured = read_measured(_write(tmp_path, [_entry(), _entry(hw="b200-trt", framework="trt",
                                                                image="nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc2")]))
    assert measured.kind == "sweep" and len(measured.runs) == 2
    vllm, trt = measured.runs
    assert vllm.measured == pytest.approx({"ttft_ms": 58.7, "tpot_ms": 4.91})
    assert vllm.concurrency == 8 and (vllm.isl, vllm.osl) == (1024, 1024)
    assert vllm.engine_version == "0.13.0"  # from the image's tag
    assert {"hardware.gpu=h200", "parallelism.tp=2", "model.expert_kernel=marlin"} <= set(vllm.overrides)
    # Another framework: the runner label is dropped from the GPU, no vLLM release or recipe.
    assert "hardware.gpu=b200" in trt.overrides and trt.engine_version is None
    assert "measured on trt" in trt.note and not trt.launch_flags
    assert list(measured.table["system"]) == ["h200", "b200"]


@pytest.mark.parametrize(("over", "reason"), [
    ({"disagg": True}, "disaggregated or multi-node"),
    ({"is_multinode": True}, "disaggregated or multi-node"),
    ({"spec_decoding": "mtp"}, "speculative decoding (mtp)"),
    ({"dp_attention": "true"}, "attention data parallelism"),
])
def test_what_one_aggregated_server_does_not_describe_is_skipped_with_the_reason(tmp_path, over, reason):
    entry = _entry(**over)
    if over.get("disagg"):  # such entries carry prefill/decode sizes instead of `tp`
        del entry["tp"]
    kept, skipped = read_measured(_write(tmp_path, [_entry(), entry])).runs
    assert kept.error is None
    assert reason in skipped.error and "(entry 2)" in skipped.error


def test_an_aggregate_with_nothing_to_replay_is_refused(tmp_path):
    with pytest.raises(MeasurementError, match="none of the 2 entries is a single aggregated server"):
        read_measured(_write(tmp_path, [_entry(disagg=True), _entry(is_multinode=True)]))


def test_an_unreadable_entry_is_reported_like_a_sweep_row(tmp_path):
    good, bad = read_measured(_write(tmp_path, [_entry(), _entry(conc="eight")])).runs
    assert good.error is None
    assert "concurrency is 'eight'" in bad.error and "(entry 2)" in bad.error


def test_a_vllm_bench_result_list_is_not_taken_for_an_aggregate(tmp_path):
    """Only a list of InferenceX entries reads as an aggregate; other JSON keeps its reader."""
    path = tmp_path / "bench.json"
    path.write_text(json.dumps([{"completed": 10}]))
    with pytest.raises(MeasurementError, match="not a benchmark result object"):
        read_measured([path])


# Any cell of an entry may be missing, of the wrong type or out of range: reading the file
# either gives runs (the bad rows skipped with their reason) or one MeasurementError.
_ANY = st.one_of(st.none(), st.booleans(), st.integers(-3, 10_000), st.floats(allow_nan=True),
                 st.text(max_size=8), st.lists(st.integers(), max_size=2))


@st.composite
def _entries(draw):
    entries = []
    for _ in range(draw(st.integers(1, 4))):
        entry = _entry()
        for key in draw(st.lists(st.sampled_from(sorted(entry)), max_size=4, unique=True)):
            if draw(st.booleans()):
                del entry[key]
            else:
                entry[key] = draw(_ANY)
        entries.append(entry)
    return entries


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=_entries())
def test_any_aggregate_reads_or_fails_with_a_measurement_error(tmp_path, entries):
    path = tmp_path / "agg_bmk.json"
    path.write_text(json.dumps(entries))
    complete = any(all(k in e for k in INFERENCEX_KEYS) for e in entries)
    try:
        measured = read_measured([path])
    except MeasurementError as exc:  # read as an aggregate whenever one entry is complete
        assert not complete or "not a benchmark result object" not in str(exc)
        return
    assert complete
    for run in measured.runs:
        assert run.error or (run.overrides and run.concurrency >= 1)


def _api_row(**over) -> dict:
    """A row of InferenceX's dashboard API: a model key, one TP per phase, nested metrics."""
    row = {"hardware": "h200", "framework": "vllm", "model": "gptoss120b", "precision": "fp4",
           "spec_method": "none", "disagg": False, "is_multinode": False, "prefill_tp": 4, "prefill_ep": 1,
           "prefill_dp_attention": False, "prefill_num_workers": 0, "decode_tp": 4, "decode_ep": 1,
           "decode_dp_attention": False, "decode_num_workers": 0, "num_prefill_gpu": 4, "num_decode_gpu": 4,
           "isl": 1024, "osl": 1024, "conc": 16, "image": "vllm/vllm-openai:v0.13.0",
           "metrics": {"mean_ttft": 0.0587, "mean_tpot": 0.00571, "p99_ttft": 0.2},
           "date": "2026-01-02", "run_url": "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/1"}
    row.update(over)
    return row


def test_a_dashboard_api_row_reads_as_the_entry_it_carries(tmp_path):
    agg, split, unknown = read_measured(_write(tmp_path, [
        _api_row(), _api_row(prefill_tp=8, num_prefill_gpu=8), _api_row(model="dsv4"),
    ])).runs
    assert agg.error is None and agg.measured == pytest.approx({"ttft_ms": 58.7, "tpot_ms": 5.71})
    assert agg.engine_version == "0.13.0" and agg.concurrency == 16
    assert {"model.name=openai/gpt-oss-120b", "parallelism.tp=4", "model.expert_kernel=marlin"} <= set(agg.overrides)
    assert "disaggregated" in split.error  # prefill and decode on different TPs
    # A model the catalog lacks keeps its key (validate then skips it with the catalog's reason).
    assert "model.name=dsv4" in unknown.overrides
