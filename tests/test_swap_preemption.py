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
    assert f"error: {path}: scheduler.preemption_mode:" in err and "fix:" in err and "Traceback" not in err
    assert err.count("error:") == 1  # one error; a warning on the roofline default may precede it
    assert not (tmp_path / "out").exists()


def _watch_swaps(monkeypatch):
    """Record each swap preemption's victim against the running requests, each swap-in's
    choice against the swapped queue, and each step that both preempted and swapped in."""
    from simulator.scheduler.vllm_v0 import VllmV0Scheduler as S

    seen = {"victims": [], "swap_ins": [], "both": 0}
    preempt, swap_in, schedule = S._preempt, S._swap_in, S.schedule

    def watched_preempt(self, req):
        seen["victims"].append((req.arrival, max(r.arrival for r in [*self.running, req])))
        preempt(self, req)

    def watched_swap_in(self, entries):
        queue = [r.arrival for r in self.swapped]
        swap_in(self, entries)
        taken = len(queue) - len(self.swapped)
        if taken:
            seen["swap_ins"].append((queue[:taken], sorted(queue)[:taken]))

    def watched_schedule(self, now):
        waiting = {id(r) for r in self.swapped}
        step = schedule(self, now)
        if step is not None and step.preempted and any(id(r) in waiting for r, _ in step.entries):
            seen["both"] += 1
        return step

    monkeypatch.setattr(S, "_preempt", watched_preempt)
    monkeypatch.setattr(S, "_swap_in", watched_swap_in)
    monkeypatch.setattr(S, "schedule", watched_schedule)
    return seen


def test_swap_victims_are_the_latest_arrivals_and_come_back_earliest_first(monkeypatch):
    """vLLM 0.2-0.5.3 sorts `running` and `swapped` by arrival each step: the victim is the
    latest-arrived running request, and swap-in takes the earliest. Regression (session-56
    audit): the queue came back newest first, and a request swapped back in became the
    next victim ahead of later arrivals."""
    seen = _watch_swaps(monkeypatch)
    d = scenario("vllm-v0", arrival={"type": "poisson", "rate": 1e9}, prompt=uniform(16, 64), output=fixed(200),
                 num_requests=6, kv_tokens=16 * 32, max_model_len=512, seed=0, sched={"preemption_mode": "swap"})
    _, res = simulate(d)
    assert (res.requests["status"] == "completed").all()
    assert len(seen["swap_ins"]) >= 2
    assert all(victim == latest for victim, latest in seen["victims"])
    assert all(taken == earliest for taken, earliest in seen["swap_ins"])


def test_a_step_that_preempted_swaps_nothing_in(monkeypatch):
    """vLLM swaps in only in a decode step that preempted nothing, by swap or by recompute
    (a full host space turns swaps into recomputes)."""
    seen = _watch_swaps(monkeypatch)
    _, res = simulate(crowded("swap", swap_gib=0.05))
    assert res.summary["preemptions"] > res.summary["swaps"] > 0
    assert seen["both"] == 0


def test_a_request_that_could_never_be_swapped_back_in_is_refused_up_front(tmp_path):
    """Swap-in needs one block more than the request holds: a request whose full length
    fills the cache to the watermark would, once swapped out, stay out for good, and hold
    every later prompt back (none is admitted while anything is swapped out). Recompute
    mode can still serve it."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,8,100\n0,1564,21\n1.0,50,50\n")
    d = scenario("vllm-v0", kv_tokens=1600, max_model_len=1600, sched={"preemption_mode": "swap"})
    d["workload"] = {"arrival": {"type": "trace", "path": str(trace)}}
    req = simulate(d)[1].requests
    assert list(req["status"]) == ["completed", "rejected", "completed"]
    assert "one more to come back from host memory" in req["reject_reason"][1]
    d["scheduler"]["preemption_mode"] = "recompute"
    assert (simulate(d)[1].requests["status"] == "completed").all()


@pytest.mark.parametrize("gpu", ["gb200", "gb300"])
def test_grace_blackwell_swaps_over_nvlink_c2c_not_pcie(gpu):
    """The GPU's host link on a Grace superchip is NVLink-C2C (as GH200's): swap copies
    cost a fraction of PCIe Gen5's time."""
    link = get_gpu(gpu).pcie
    assert "NVLink-C2C" in link.name
    assert seconds_per_block(16, 131072, link) < seconds_per_block(16, 131072, get_gpu("b200").pcie) / 3


def test_swap_without_host_space_is_warned(tmp_path, capsys):
    d = crowded("swap", swap_gib=0.0)
    d["workload"]["num_requests"] = 20
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    assert cli(path, "-o", tmp_path / "out", "--quiet", "--no-report") == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "swap_space_gib 0: no KV block fits in host memory, so every preemption recomputes" in err
