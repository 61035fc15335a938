"""Swap preemption under the vLLM v0 policy (`preemption_mode: swap`): a preempted request's
KV goes to host memory and comes back, nothing is recomputed, and the copies cost their
bytes over the GPU's host link."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import cli, engines, fixed, poisson, scenario, simulate, uniform

import simulator.simulation as simulation_module
from simulator.hardware import get_gpu
from simulator.kv_swap import SWAP_LINK_EFFICIENCY, host_swap_blocks, seconds_per_block
from simulator.memory import kv_bytes_per_token_per_gpu
from simulator.models import get_model


def crowded(mode: str, swap_gib: float = 4.0, **kw) -> dict:
    """Many long requests into a small cache: preemptions are certain."""
    return scenario("vllm-v0", arrival=poisson(40), prompt=uniform(100, 1500), output=uniform(50, 400),
                    num_requests=200, kv_tokens=12000, sched={"preemption_mode": mode, "swap_space_gib": swap_gib},
                    **kw)


def computed_tokens(res) -> int:
    it = res.iterations
    return int(it["prefill_tokens"].sum() + it["decode_tokens"].sum())


def needed_tokens(res) -> int:
    done = res.requests[res.requests["status"] == "completed"]
    return int((done["prompt_tokens"] + done["output_tokens"] - 1).sum())


def test_swapped_requests_are_not_recomputed():
    sim, res = simulate(crowded("swap"))
    req = res.requests
    assert (req["status"] == "completed").all()
    assert res.summary["swaps"] > 0 and res.summary["swaps"] == res.summary["preemptions"]
    assert computed_tokens(res) == needed_tokens(res)  # every token's KV computed exactly once
    kv = engines(sim)[0].scheduler.kv
    assert kv.used == 0 and kv.swap_used == 0  # all freed, host and GPU
    assert 0 < kv.swap_peak <= kv.swap_total
    assert kv.swap_moved % 2 == 0  # every block that went out came back


def test_recompute_preemption_recomputes_and_never_swaps():
    sim, res = simulate(crowded("recompute"))
    assert res.summary["preemptions"] > 0 and res.summary["swaps"] == 0
    assert computed_tokens(res) > needed_tokens(res)
    assert engines(sim)[0].scheduler.kv.swap_total == 0


def test_a_full_host_space_falls_back_to_recompute():
    """vLLM aborts when the swap space is full; the simulation recomputes the victim."""
    _, res = simulate(crowded("swap", swap_gib=0.01))  # 5 blocks of 2 MiB: few victims fit
    assert res.summary["preemptions"] > res.summary["swaps"]
    assert (res.requests["status"] == "completed").all()


def test_swap_copies_cost_their_bytes_over_the_host_link(monkeypatch):
    """Requests that all arrive at once are scheduled the same whatever the iteration times:
    the run with priced copies ends later by exactly the copied blocks' time."""
    d = scenario("vllm-v0", arrival={"type": "poisson", "rate": 1e9}, prompt=fixed(16), output=fixed(200),
                 num_requests=6, kv_tokens=16 * 40, max_model_len=512, sched={"preemption_mode": "swap"})
    sim, res = simulate(d)
    kv = engines(sim)[0].scheduler.kv
    assert res.summary["swaps"] > 0 and kv.swap_moved > 0
    monkeypatch.setattr(simulation_module, "seconds_per_block", lambda *args: 0.0)
    _, free = simulate(d)
    per_block = seconds_per_block(16, kv_bytes_per_token_per_gpu(get_model("llama-3.1-8b"), "bf16", 1, 1),
                                  get_gpu("h100-sxm").pcie)
    assert free.summary["swaps"] == res.summary["swaps"]
    end, free_end = res.requests["finish_s"].max(), free.requests["finish_s"].max()
    assert end - free_end == pytest.approx(kv.swap_moved * per_block, rel=1e-9)


def test_swap_space_and_copy_time_follow_the_cache_layout():
    """OPT-13B fp16 at TP1: 819,200 bytes of KV a token, 16-token blocks of 13.1 MB."""
    per_token = kv_bytes_per_token_per_gpu(get_model("opt-13b"), "fp16", 1, 1)
    assert per_token == 2 * 40 * 5120 * 2
    assert host_swap_blocks(16, 16, per_token, 1) == 16 * 1024**3 // (16 * per_token) == 1310
    assert host_swap_blocks(16, 16, per_token, 2) == 655  # a pipeline's stages split it
    assert host_swap_blocks(0, 16, per_token, 1) == 0
    pcie4 = get_gpu("a100-80gb-sxm").pcie
    assert seconds_per_block(16, per_token, pcie4) == pytest.approx(
        16 * per_token / (pcie4.bandwidth_gbps * 1e9 * SWAP_LINK_EFFICIENCY))
    assert 0.4e-3 < seconds_per_block(16, per_token, pcie4) < 0.6e-3  # ~0.5 ms a block at ~26 GB/s


def test_swap_with_fast_forward_matches_stepping():
    d = crowded("swap", pp=2)
    _, fast = simulate(d)
    _, slow = simulate(d, fast_forward=False)
    assert fast.summary["swaps"] > 0
    assert fast.summary["swaps"] == slow.summary["swaps"]
    cols = ["first_token_s", "finish_s"]
    assert (fast.requests[cols].to_numpy() == slow.requests[cols].to_numpy()).all()


def test_swap_mode_is_refused_by_policies_that_do_not_swap():
    from simulator import api
    from simulator.errors import ConfigError
    d = scenario("vllm-v1", sched={"preemption_mode": "swap"})
    with pytest.raises(ConfigError) as err:
        api.load(data=d)
    assert "preemption_mode" in str(err.value)


def test_the_run_summary_says_how_requests_were_preempted(tmp_path, capsys):
    path = tmp_path / "swap.yaml"
    path.write_text(yaml.safe_dump(crowded("swap", swap_gib=0.05)))
    assert cli(path, "-o", tmp_path / "out", "--no-report") == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    n, swaps = summary["preemptions"], summary["swaps"]
    assert 0 < swaps < n  # the small host space fills: the rest are recomputed
    assert f"preempted  {n} times ({swaps} swapped to host memory, {n - swaps} recomputed)" in out


def test_swap_with_attention_data_parallelism_is_one_clean_error(tmp_path, capsys):
    d = scenario("vllm-v0", model="qwen3-30b-a3b", dp=2, num_requests=5, sched={"preemption_mode": "swap"})
    path = tmp_path / "dp.yaml"
    path.write_text(yaml.safe_dump(d))
    assert cli(path, "-o", tmp_path / "out", "--quiet") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "error: scheduler.preemption_mode:" in err and "fix:" in err and "Traceback" not in err
    assert err.count("error:") == 1  # one error; a warning on the roofline default may precede it
    assert not (tmp_path / "out").exists()
