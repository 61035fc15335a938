"""Workload generation: arrival statistics, determinism, lengths, trace parsing, validation."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import numpy as np
import pytest
from conftest import CHATBOT, cli
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from simulator.errors import ConfigError, TraceError
from simulator.workload import (
    CLOSED_LOOP_REQUESTS_PER_CLIENT,
    DEFAULT_NUM_REQUESTS,
    TRACE_PARSERS,
    ClosedLoopWorkload,
    EmpiricalLength,
    LognormalLength,
    OpenLoopWorkload,
    TraceArrival,
    WorkloadConfig,
    build_workload,
    read_trace,
    sample_lengths,
)

LENGTHS = {
    "prompt_tokens": {"type": "lognormal", "mean": 512, "std": 256},
    "output_tokens": {"type": "uniform", "min": 16, "max": 256},
}


def workload(arrival: dict, **kw) -> WorkloadConfig:
    """A synthetic-arrival config with default lengths (overridable via kw)."""
    return WorkloadConfig.model_validate({"arrival": arrival, **LENGTHS, **kw})


def open_loop(cfg: WorkloadConfig, base_dir: Path | None = None) -> OpenLoopWorkload:
    w = build_workload(cfg, base_dir)
    assert isinstance(w, OpenLoopWorkload)
    return w


def trace_cfg(path: Path | str, **arrival) -> WorkloadConfig:
    return WorkloadConfig.model_validate(
        {"arrival": {"type": "trace", "path": str(path), **arrival}}
    )


# --------------------------------------------------------------------------- arrivals


def test_poisson_mean_gap_and_cv():
    w = open_loop(workload({"type": "poisson", "rate": 8.0}, num_requests=20000))
    gaps = np.diff(w.arrival_s)
    assert w.arrival_s[0] == 0.0
    assert len(w) == 20000
    assert gaps.mean() == pytest.approx(1 / 8.0, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.03)


@pytest.mark.parametrize("burstiness", [0.5, 4.0])
def test_gamma_burstiness_sets_cv(burstiness):
    cfg = workload({"type": "gamma", "rate": 5, "burstiness": burstiness}, num_requests=20000)
    gaps = np.diff(open_loop(cfg).arrival_s)
    assert gaps.mean() == pytest.approx(1 / 5, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / np.sqrt(burstiness), rel=0.05)


def test_constant_is_exact():
    w = open_loop(workload({"type": "constant", "rate": 4}, num_requests=10))
    np.testing.assert_array_equal(w.arrival_s, np.arange(10) / 4)


def test_default_request_count():
    assert len(build_workload(workload({"type": "poisson", "rate": 1}))) == DEFAULT_NUM_REQUESTS


@pytest.mark.parametrize(
    "arrival",
    [
        {"type": "poisson", "rate": 50},
        {"type": "gamma", "rate": 50, "burstiness": 0.3},
        {"type": "constant", "rate": 50},
    ],
)
def test_duration_is_a_prefix_of_the_count_sequence(arrival):
    by_time = open_loop(workload(arrival, duration_s=20.0))
    by_count = open_loop(workload(arrival, num_requests=5000))
    k = len(by_time)
    assert by_time.arrival_s[-1] < 20.0 <= by_count.arrival_s[k]
    assert k == pytest.approx(1000, rel=0.2)
    np.testing.assert_array_equal(by_time.arrival_s, by_count.arrival_s[:k])
    np.testing.assert_array_equal(by_time.prompt_tokens, by_count.prompt_tokens[:k])


def test_duration_and_count_whichever_first():
    arrival = {"type": "constant", "rate": 10}
    assert len(build_workload(workload(arrival, duration_s=2.0, num_requests=5))) == 5
    assert len(build_workload(workload(arrival, duration_s=2.0, num_requests=500))) == 20


def test_duration_guard_against_runaway_sizes():
    with pytest.raises(ConfigError, match="duration_s"):
        build_workload(workload({"type": "poisson", "rate": 1e6}, duration_s=1e6))


def test_closed_loop_workload():
    cfg = workload({"type": "closed_loop", "concurrency": 4, "think_time_s": 0.5}, num_requests=7)
    w = build_workload(cfg)
    assert isinstance(w, ClosedLoopWorkload)
    assert (w.concurrency, w.think_time_s, len(w), w.duration_s) == (4, 0.5, 7, None)
    timed = build_workload(workload({"type": "closed_loop", "concurrency": 3}, duration_s=60))
    assert len(timed) == 3 * CLOSED_LOOP_REQUESTS_PER_CLIENT
    assert timed.duration_s == 60.0
    # Closed and open loop share the length streams: same seed, same lengths.
    same = open_loop(workload({"type": "poisson", "rate": 1}, num_requests=7))
    np.testing.assert_array_equal(w.prompt_tokens, same.prompt_tokens)


def test_open_loop_iter_requests_and_read_only():
    w = open_loop(workload({"type": "constant", "rate": 2}, num_requests=3))
    reqs = list(w.iter_requests(first_id=10))
    assert [r.id for r in reqs] == [10, 11, 12]
    assert [r.arrival for r in reqs] == [0.0, 0.5, 1.0]
    assert reqs[0].prompt_tokens == w.prompt_tokens[0] and reqs[0].session_id == -1
    with pytest.raises(ValueError):
        w.arrival_s[0] = 1.0


# ------------------------------------------------------------------------ determinism


def test_same_seed_bit_identical_and_different_seed_differs():
    arrival = {"type": "gamma", "rate": 3, "burstiness": 0.7}
    a = open_loop(workload(arrival, num_requests=500, seed=7))
    b = open_loop(workload(arrival, num_requests=500, seed=7))
    c = open_loop(workload(arrival, num_requests=500, seed=8))
    for name in ("arrival_s", "prompt_tokens", "output_tokens"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes()
        assert not np.array_equal(getattr(a, name), getattr(c, name))


def test_changing_rate_keeps_lengths_and_rescales_arrivals():
    slow = open_loop(workload({"type": "poisson", "rate": 2}, num_requests=300, seed=3))
    fast = open_loop(workload({"type": "poisson", "rate": 8}, num_requests=300, seed=3))
    np.testing.assert_array_equal(slow.prompt_tokens, fast.prompt_tokens)
    np.testing.assert_array_equal(slow.output_tokens, fast.output_tokens)
    np.testing.assert_allclose(slow.arrival_s, 4 * fast.arrival_s, rtol=1e-12)


# ---------------------------------------------------------------------------- lengths


def lengths(spec: dict, n: int = 20000, seed: int = 0) -> np.ndarray:
    cfg = WorkloadConfig.model_validate(
        {"arrival": {"type": "constant", "rate": 1}, "prompt_tokens": spec, "output_tokens": spec}
    )
    assert cfg.prompt_tokens is not None
    out = sample_lengths(cfg.prompt_tokens, n, np.random.default_rng(seed))
    assert out.dtype == np.int64 and out.min() >= 1
    return out


def test_fixed_and_uniform():
    assert set(lengths({"type": "fixed", "value": 7}).tolist()) == {7}
    assert set(lengths({"type": "uniform", "min": 3, "max": 5}).tolist()) == {3, 4, 5}


def test_normal_and_lognormal_respect_clip():
    x = lengths({"type": "normal", "mean": 100, "std": 80, "min": 20, "max": 150})
    assert x.min() == 20 and x.max() == 150
    y = lengths({"type": "lognormal", "mean": 100, "std": 300, "min": 5, "max": 400})
    assert y.min() == 5 and y.max() == 400
    assert lengths({"type": "normal", "mean": -50, "std": 1}).max() == 1  # min defaults to 1


def test_lognormal_mean_and_std_are_in_tokens():
    x = lengths({"type": "lognormal", "mean": 512, "std": 256}, n=50000)
    assert x.mean() == pytest.approx(512, rel=0.02)
    assert x.std() == pytest.approx(256, rel=0.05)
    mu, sigma = LognormalLength(type="lognormal", mean=512, std=256).log_params()
    assert np.exp(mu + sigma**2 / 2) == pytest.approx(512)


def test_empirical_values_weights_and_csv(tmp_path):
    x = lengths({"type": "empirical", "values": [10, 20, 30], "weights": [1, 0, 3]})
    assert set(x.tolist()) == {10, 30}
    assert (x == 30).mean() == pytest.approx(0.75, abs=0.02)
    (tmp_path / "lens.csv").write_text("id,n\n1,5\n2,9\n")
    cfg = WorkloadConfig.model_validate(
        {
            "arrival": {"type": "poisson", "rate": 1},
            "prompt_tokens": {"type": "empirical", "path": "lens.csv", "column": "n"},
            "output_tokens": {"type": "fixed", "value": 1},
            "num_requests": 200,
        }
    )
    assert set(open_loop(cfg, tmp_path).prompt_tokens.tolist()) == {5, 9}
    with pytest.raises(TraceError, match=r"workload\.prompt_tokens\.path"):
        build_workload(cfg, tmp_path / "elsewhere")


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "uniform", "min": 9, "max": 3},
        {"type": "normal", "mean": 10, "std": 1, "min": 9, "max": 3},
        {"type": "lognormal", "mean": 10, "std": 1, "min": 9, "max": 3},
        {"type": "lognormal", "mean": 0, "std": 1},
        {"type": "fixed", "value": 0},
        {"type": "empirical"},
        {"type": "empirical", "values": [1, 2], "path": "x.csv", "column": "n"},
        {"type": "empirical", "values": [1, 2], "weights": [1.0]},
        {"type": "empirical", "values": [0, 2]},
        {"type": "empirical", "path": "x.csv"},
    ],
)
def test_bad_length_specs_rejected(spec):
    with pytest.raises(ValidationError):
        WorkloadConfig.model_validate(
            {
                "arrival": {"type": "poisson", "rate": 1},
                "prompt_tokens": spec,
                "output_tokens": spec,
            }
        )


def test_empirical_path_needs_a_pool():
    cfg = EmpiricalLength(type="empirical", path="x.csv", column="n")
    with pytest.raises(ValueError):
        cfg.sample(3, np.random.default_rng(0))


# ----------------------------------------------------------------------------- traces

CSV_TRACE = "arrival_s,prompt_tokens,output_tokens,session_id,prefix_id\n" + "".join(
    f"{t},{p},{o},{s},{x}\n"
    for t, p, o, s, x in [(10.0, 100, 10, 1, ""), (12.0, 200, 20, 1, 7), (11.0, 300, 30, 2, 7)]
)
AZURE_TRACE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.6805900,374,44\n"
    "2023-11-16 18:15:50.9951690,396,109\n"
    "2023-11-16 18:16:00.0000000,879,55\n"
)
BURSTGPT_TRACE = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "5,ChatGPT,472,18,490,Conversation log\n"
    "45,ChatGPT,1087,0,1087,Conversation log\n"
    "118,GPT-4,417,276,693,Conversation log\n"
)
MOONCAKE_TRACE = "".join(
    json.dumps(r) + "\n"
    for r in [
        {"timestamp": 1000, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47]},
        {"timestamp": 1500, "input_length": 700, "output_length": 8, "hash_ids": [46]},
        {"timestamp": 3000, "input_length": 10, "output_length": 1, "hash_ids": []},
    ]
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_trace_sorted_rebased_with_ids(tmp_path):
    write(tmp_path, "t.csv", CSV_TRACE)
    w = open_loop(trace_cfg("t.csv"), tmp_path)  # relative path -> base_dir
    np.testing.assert_array_equal(w.arrival_s, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(w.prompt_tokens, [100, 300, 200])
    np.testing.assert_array_equal(w.output_tokens, [10, 30, 20])
    np.testing.assert_array_equal(w.session_id, [1, 2, 1])
    np.testing.assert_array_equal(w.prefix_id, [-1, 7, 7])


def test_unsorted_ties_keep_file_order(tmp_path):
    path = write(tmp_path, "t.csv", "arrival_s,prompt_tokens,output_tokens\n2,1,1\n1,2,1\n1,3,1\n")
    t = read_trace(path)
    np.testing.assert_array_equal(t.prompt_tokens, [2, 3, 1])
    assert t.session_id is None and t.prefix_id is None


def test_azure_trace(tmp_path):
    w = open_loop(trace_cfg(write(tmp_path, "azure.csv", AZURE_TRACE)))
    np.testing.assert_allclose(w.arrival_s, [0.0, 4.314579, 13.31941], atol=1e-9)
    np.testing.assert_array_equal(w.prompt_tokens, [374, 396, 879])
    np.testing.assert_array_equal(w.output_tokens, [44, 109, 55])


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # Midnight rollover, 7 fractional digits.
        (["2023-11-16 23:59:59.9000000", "2023-11-17 00:00:00.1000000"], [0.0, 0.2]),
        # ISO "T", UTC offsets and no fraction are converted to one UTC clock.
        (["2024-05-10T00:00:01.5+01:00", "2024-05-09 23:00:03Z"], [0.0, 1.5]),
    ],
)
def test_azure_timestamp_variants(tmp_path, rows, expected):
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{r},5,5\n" for r in rows)
    t = read_trace(write(tmp_path, "azure.csv", text), "azure")
    np.testing.assert_allclose(t.arrival_s, expected, atol=1e-9)


def test_burstgpt_skips_failed_requests(tmp_path):
    w = open_loop(trace_cfg(write(tmp_path, "burst.csv", BURSTGPT_TRACE + "130,ChatGPT,0,12,12,API log\n")))
    np.testing.assert_array_equal(w.arrival_s, [0.0, 113.0])
    np.testing.assert_array_equal(w.prompt_tokens, [472, 417])
    np.testing.assert_array_equal(w.output_tokens, [18, 276])
    assert w.skipped_rows == 2 and w.trace_rows == 2  # no response, or no request


@pytest.mark.parametrize("name, text", [
    ("azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.5+00:00,500,20\n"
                  "2024-05-10 00:00:01.2+00:00,500,0\n2024-05-10 00:00:02+00:00,300,10\n"),
    ("mc.jsonl", MOONCAKE_TRACE.replace('"output_length": 8', '"output_length": 0')),
])
def test_a_failed_request_in_a_public_trace_is_left_out_and_counted(tmp_path, name, text):
    """Azure and Mooncake log failed requests with 0 generated tokens, as BurstGPT does:
    one such row among millions is left out and counted, not a stop for the whole file."""
    w = open_loop(trace_cfg(write(tmp_path, name, text)))
    assert w.skipped_rows == 1 and w.trace_rows == w.arrival_s.size == 2
    assert (w.output_tokens > 0).all()


def test_a_trace_cut_by_the_scenarios_request_count_says_so(tmp_path, capsys):
    """A scenario's num_requests, kept when its arrival is switched to a trace, replays only
    the trace's first rows: summary.json counts them and the terminal says what cut it."""
    rows = "".join(f"{0.01 * i},{100 + i},5\n" for i in range(40))
    path = write(tmp_path, "t.csv", "arrival_s,prompt_tokens,output_tokens\n" + rows)
    assert cli("run", CHATBOT, "--set", f"workload.arrival={{type: trace, path: {path}}}",
               "--set", "~workload.prompt_tokens", "--set", "~workload.output_tokens",
               "--set", "workload.num_requests=30", "-q", "--no-report", "-o", tmp_path / "out") == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["trace"] == {"rows": 40, "replayed": 30, "skipped_failed_rows": 0,
                                "cut_by": ["workload.num_requests: 30"], "unused_columns": []}
    err = " ".join(capsys.readouterr().err.split())
    assert "replayed 30 of the trace's 40 requests, cut by workload.num_requests: 30" in err
    assert "--set '~workload.num_requests'" in err


def test_mooncake_trace(tmp_path):
    w = open_loop(trace_cfg(write(tmp_path, "mc.jsonl", MOONCAKE_TRACE)))
    np.testing.assert_allclose(w.arrival_s, [0.0, 0.5, 2.0])
    np.testing.assert_array_equal(w.prompt_tokens, [6955, 700, 10])
    np.testing.assert_array_equal(w.output_tokens, [52, 8, 1])
    assert w.hash_ids == ((46, 47), (46,), ())
    np.testing.assert_array_equal(w.prefix_id, [46, 46, -1])


def test_mooncake_without_hashes_and_requests_carry_ids(tmp_path):
    text = '{"timestamp": 0, "input_length": 3, "output_length": 2}\n'
    t = read_trace(write(tmp_path, "mc.jsonl", text))
    assert t.hash_ids is None and t.prefix_id is None
    w = open_loop(trace_cfg(write(tmp_path, "t.csv", CSV_TRACE)))
    reqs = list(w.iter_requests())
    assert [(r.session_id, r.prefix_id) for r in reqs] == [(1, -1), (2, 7), (1, 7)]


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        (CSV_TRACE, "csv"),
        (AZURE_TRACE, "azure"),
        (BURSTGPT_TRACE, "burstgpt"),
        (MOONCAKE_TRACE, "mooncake"),
    ],
)
def test_auto_sniffs_format(tmp_path, text, fmt):
    assert read_trace(write(tmp_path, "trace.txt", text)).format == fmt
    assert len(read_trace(write(tmp_path, "explicit.txt", text), fmt)) >= 2


def test_trace_format_literal_matches_registry():
    literal = typing.get_args(TraceArrival.model_fields["format"].annotation)
    assert set(literal) == {"auto", *TRACE_PARSERS}


def test_rate_and_length_scale(tmp_path):
    path = write(tmp_path, "t.csv", CSV_TRACE)
    base = open_loop(trace_cfg(path))
    fast = open_loop(trace_cfg(path, rate_scale=2))
    np.testing.assert_array_equal(fast.arrival_s, base.arrival_s / 2)
    short = open_loop(trace_cfg(path, length_scale=0.01))
    np.testing.assert_array_equal(short.prompt_tokens, [1, 3, 2])
    np.testing.assert_array_equal(short.output_tokens, [1, 1, 1])  # never below 1


def test_a_huge_length_scale_clips_instead_of_wrapping(tmp_path):
    path = write(tmp_path, "t.csv", CSV_TRACE)
    huge = open_loop(trace_cfg(path, length_scale=1e20))
    assert (huge.prompt_tokens == 2**53).all() and (huge.output_tokens > 0).all()


@pytest.mark.parametrize(("name", "text", "words"), [
    ("big.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,2\n1,99999999999999999999,3\n",
     "big.csv:3: column 'prompt_tokens' is 99999999999999999999, more tokens than any model takes"),
    ("big.csv", "arrival_s,prompt_tokens,output_tokens\n0,1e30,2\n", "more tokens than any model takes"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 100, "output_length": 5, "hash_ids": [99999999999999999999999]}\n',
     "'hash_ids' must be a list of 64-bit integers"),
])
def test_trace_values_past_int64_are_clean_errors(tmp_path, name, text, words):
    with pytest.raises(TraceError) as err:
        read_trace(write(tmp_path, name, text))
    assert words in err.value.render()


def test_trace_window_and_limits(tmp_path):
    rows = "".join(f"{t},{t + 1},1\n" for t in range(10))
    path = write(tmp_path, "t.csv", "arrival_s,prompt_tokens,output_tokens\n" + rows)
    w = open_loop(trace_cfg(path, start_s=3.5, max_requests=4))
    np.testing.assert_array_equal(w.arrival_s, [0, 1, 2, 3])
    np.testing.assert_array_equal(w.prompt_tokens, [5, 6, 7, 8])
    cfg = WorkloadConfig.model_validate(
        {"arrival": {"type": "trace", "path": str(path), "rate_scale": 2}, "duration_s": 2.0}
    )
    assert len(build_workload(cfg)) == 4  # t = 0, 0.5, 1, 1.5
    cfg = WorkloadConfig.model_validate(
        {"arrival": {"type": "trace", "path": str(path)}, "num_requests": 3}
    )
    assert len(build_workload(cfg)) == 3
    with pytest.raises(ConfigError, match="start_s"):
        build_workload(trace_cfg(path, start_s=100))


@pytest.mark.parametrize(
    ("name", "text", "line", "needle"),
    [
        ("t.csv", "arrival_s,prompt_tokens,output_tokens\n1,2,3\n2,abc,3\n", 3, "prompt_tokens"),
        ("t.csv", "arrival_s,prompt_tokens,output_tokens\n1,2,3\n\n2,2,0\n", 4, ">= 1"),
        ("t.csv", "arrival_s,prompt_tokens,output_tokens\nnan,2,3\n", 2, "arrival_s"),
        ("t.csv", "arrival_s,prompt_tokens,output_tokens\n1,2.5,3\n", 2, "whole number"),
        ("t.csv", "arrival_s,prompt_tokens,output_tokens\n1,2\n", 2, "fields"),
        ("t.csv", "arrival_s,prompt_tokens\n1,2\n", 1, "output_tokens"),
        ("a.csv", AZURE_TRACE + "yesterday,1,1\n", 5, "TIMESTAMP"),
        ("b.csv", BURSTGPT_TRACE + "200,GPT-4,-3,5,2,x\n", 5, "Request tokens"),
        ("m.jsonl", MOONCAKE_TRACE + "{not json}\n", 4, "invalid JSON"),
        ("m.jsonl", '{"timestamp": 1, "input_length": 5}\n', 1, "output_length"),
        ("m.jsonl", '{"timestamp": "x", "input_length": 5, "output_length": 1}\n', 1, "timestamp"),
        ("u.csv", "time,in,out\n1,2,3\n", 1, "cannot tell"),
    ],
)
def test_malformed_traces_name_the_line(tmp_path, name, text, line, needle):
    write(tmp_path, name, text)
    with pytest.raises(TraceError) as err:
        build_workload(trace_cfg(name), tmp_path)
    assert err.value.where == f"{name}:{line}"
    assert needle in err.value.message
    assert f"{name}:{line}" in str(err.value)


def test_missing_column_lists_expected(tmp_path):
    path = write(tmp_path, "a.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,1\n")
    with pytest.raises(TraceError, match="GeneratedTokens") as err:
        read_trace(path, "azure")
    assert "TIMESTAMP, ContextTokens, GeneratedTokens" in err.value.message


@pytest.mark.parametrize("text", ["", "\n\n", "arrival_s,prompt_tokens,output_tokens\n"])
def test_empty_traces(tmp_path, text):
    with pytest.raises(TraceError, match=r"empty|no requests"):
        read_trace(write(tmp_path, "t.csv", text), "csv")


def test_missing_trace_file(tmp_path):
    with pytest.raises(TraceError) as err:
        build_workload(trace_cfg("nope.csv"), tmp_path)
    assert err.value.where == "workload.arrival.path"
    assert str(tmp_path / "nope.csv") in err.value.message
    assert "scenario" in (err.value.fix or "")
    with pytest.raises(TraceError, match="not found"):
        read_trace(tmp_path / "nope.csv")


# ------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "arrival",
    [
        {"type": "poisson", "rate": -1},
        {"type": "poisson", "rate": 0},
        {"type": "poisson", "rate": float("inf")},
        {"type": "gamma", "rate": 1, "burstiness": 0},
        {"type": "constant", "rate": "5"},  # strict: no string coercion
        {"type": "closed_loop", "concurrency": 0},
        {"type": "closed_loop", "concurrency": 2, "think_time_s": -1},
        {"type": "weibull", "rate": 1},
        {"type": "poisson", "rate": 1, "burstiness": 2},  # unknown field
    ],
)
def test_bad_arrivals_rejected(arrival):
    with pytest.raises(ValidationError):
        workload(arrival)


def test_negative_rate_message_is_clear():
    with pytest.raises(ValidationError, match="greater than 0") as err:
        workload({"type": "poisson", "rate": -2})
    assert err.value.errors()[0]["loc"] == ("arrival", "poisson", "rate")


@pytest.mark.parametrize("missing", ["prompt_tokens", "output_tokens"])
def test_synthetic_arrivals_need_lengths(missing):
    spec = {"arrival": {"type": "poisson", "rate": 1}, **LENGTHS}
    del spec[missing]
    with pytest.raises(ConfigError, match=missing) as err:
        WorkloadConfig.model_validate(spec)
    assert err.value.where == f"workload.{missing}"
    assert "lognormal" in (err.value.fix or "")


def test_trace_rejects_lengths():
    with pytest.raises(ConfigError, match="length_scale"):
        WorkloadConfig.model_validate({"arrival": {"type": "trace", "path": "t.csv"}, **LENGTHS})


@pytest.mark.parametrize("bad", [{"num_requests": 0}, {"duration_s": 0}, {"seed": -1}])
def test_bad_limits_rejected(bad):
    with pytest.raises(ValidationError):
        workload({"type": "poisson", "rate": 1}, **bad)


def _models_in(annotation) -> list[type]:
    """Pydantic model classes anywhere inside a (possibly nested) type annotation."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def test_every_field_is_documented():
    """The README's scenario reference is generated from these descriptions."""
    seen: set[type] = set()
    todo: list[type] = [WorkloadConfig]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"
            todo.extend(_models_in(field.annotation))
    assert len(seen) == 13  # WorkloadConfig + 6 arrivals + 5 length distributions + shared_prefix


# ------------------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None)
@given(
    rate=st.floats(min_value=0.1, max_value=1000, allow_nan=False),
    n=st.integers(min_value=1, max_value=500),
    kind=st.sampled_from(["poisson", "gamma", "constant"]),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_arrivals_sorted_nonnegative_and_sized(rate, n, kind, seed):
    arrival = {"type": kind, "rate": rate}
    if kind == "gamma":
        arrival["burstiness"] = 0.5
    w = open_loop(workload(arrival, num_requests=n, seed=seed))
    assert len(w.arrival_s) == len(w.prompt_tokens) == len(w.output_tokens) == n
    assert w.arrival_s[0] == 0.0
    assert np.all(np.diff(w.arrival_s) >= 0)
    assert np.all(w.prompt_tokens >= 1) and np.all(w.output_tokens >= 1)


def test_an_azure_time_of_day_out_of_range_is_refused(tmp_path):
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 23:59:59,100,10\n2023-11-16 25:61:99,200,20\n"
    with pytest.raises(TraceError, match="expected a time like"):
        read_trace(write(tmp_path, "azure.csv", text), "azure")


def test_a_column_named_twice_is_refused(tmp_path):
    text = "arrival_s,prompt_tokens,output_tokens,prompt_tokens\n0,10,2,20\n"
    with pytest.raises(TraceError, match="prompt_tokens appear more than once"):
        read_trace(write(tmp_path, "t.csv", text))


def test_clients_beyond_the_request_count_change_nothing():
    """A closed loop of a billion clients and 6 requests is the loop of 6 clients: the rest
    never send, and are not walked one by one (such a run took 15 s per 1e8 clients)."""
    from simulator import api

    bench = Path(__file__).resolve().parent.parent / "scenarios" / "benchmark-concurrency.yaml"
    many = api.run(bench, ["workload.num_requests=6", "workload.arrival.concurrency=1000000000"]).summary
    few = api.run(bench, ["workload.num_requests=6", "workload.arrival.concurrency=6"]).summary
    for key in ("ttft_ms", "tpot_ms", "e2e_ms", "requests", "iterations"):
        assert many[key] == few[key]


def test_trace_ids_may_be_any_label(tmp_path):
    """A conversation id is often text (BurstGPT's, a UUID): labels are numbered in order of
    appearance; whole-number ids keep their values."""
    text = ("arrival_s,prompt_tokens,output_tokens,session_id,prefix_id\n0,10,5,conv-a,sys\n1,30,5,conv-b,\n"
            "2,60,5,conv-a,sys\n")
    t = read_trace(write(tmp_path, "s.csv", text), "csv")
    assert t.session_id.tolist() == [0, 1, 0] and t.prefix_id.tolist() == [0, -1, 0]
    numbers = text.replace("conv-a", "7").replace("conv-b", "9").replace("sys", "3")
    t = read_trace(write(tmp_path, "n.csv", numbers), "csv")
    assert t.session_id.tolist() == [7, 9, 7] and t.prefix_id.tolist() == [3, -1, 3]


def test_a_json_array_trace_says_json_lines(tmp_path):
    path = write(tmp_path, "t.json", json.dumps([{"timestamp": 0, "input_length": 5, "output_length": 5}]))
    with pytest.raises(TraceError, match="a JSON array: a JSON trace is one object per line"):
        read_trace(path)
