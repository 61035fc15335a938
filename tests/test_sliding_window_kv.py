"""Sliding-window layers take KV blocks too: vLLM's hybrid KV manager groups them by the
full-attention layer count and gives each group blocks of the one pool for the tokens
still in its window. Before, only the full-attention layers were counted, which let a
Gemma 3 cache hold ~4x the sequences vLLM's does."""

from __future__ import annotations

import pytest
from conftest import POLICY_NAMES, poisson, scenario, simulate, uniform
from test_invariants import check_kv, check_requests, check_timeline

from simulator.memory import MemoryPlan, sliding_window_groups
from simulator.models import get_model


@pytest.mark.parametrize(("model", "pp", "groups", "span"), [
    ("gemma-3-27b", 1, 6, 65),    # 52 windowed / 10 full layers -> 6 groups (the last padded); 1024-token window
    ("gemma-2-9b", 1, 1, 257),    # 21 / 21; 4096-token window: ceil(4095/16) + 1
    ("gpt-oss-120b", 1, 1, 9),    # 18 / 18; 128-token window
    ("llama-4-scout", 1, 3, 513),  # 36 chunked / 12 full; 8192-token chunks
    ("gemma-3-27b", 2, 6, 65),    # per stage: 26 / 5
    ("llama-3.1-8b", 1, 0, 0),    # no window: nothing beside the KV
])
def test_window_groups_follow_vllms_grouping(model, pp, groups, span):
    assert sliding_window_groups(get_model(model), pp, 16) == (groups, span)


def test_a_sequence_holds_its_window_beside_its_kv():
    plan = MemoryPlan(80.0, 0.9, 50.0, 2.0, 0.5, 27.5, 1000.0, 16, num_blocks=10_000, window=(6, 65))
    assert plan.beside(100) == 6 * 7  # shorter than the window: its own blocks, in every group
    assert plan.beside(2048) == 6 * 65  # longer: the window's
    assert plan.sequences_at(2048) == 10_000 // (128 + 390)
    assert plan.holds(10_000 * 16 - 390 * 16) and not plan.holds(10_000 * 16 - 390 * 16 + 1)


def test_gemma3_cache_holds_what_vllms_does():
    """Gemma-3-27B bf16 on one H200: at 2,048 tokens of context each sequence takes 128
    full-attention blocks and 6 x 65 windowed ones, so the cache holds a quarter of the
    sequences the full-attention layers alone would allow."""
    from simulator import api
    from simulator.simulation import Simulation

    plan = Simulation(api.load(data=scenario("vllm-v1", model="gemma-3-27b", gpu="h200", max_model_len=4096))).memory
    assert plan.window == (6, 65)
    assert plan.sequences_at(2048) == plan.num_blocks // (128 + 390)
    assert plan.num_blocks // 128 > 3.9 * plan.sequences_at(2048)


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_small_cache_invariants_with_windows(policy):
    """Every policy on a sliding-window model under KV pressure: requests settle, and the
    windows' blocks stay within the cache and are all freed with the KV's."""
    d = scenario(policy, model="gemma-2-2b", arrival=poisson(40.0), prompt=uniform(16, 600), output=uniform(1, 200),
                 num_requests=120, kv_tokens=6000, max_model_len=2048, replicas=1,
                 sched={"max_batch_size": 8} if policy in ("static", "dynamic") else None)
    sim, res = simulate(d)
    check_requests(d, res.requests)
    check_kv(sim, res.iterations)
    check_timeline(d, res.iterations)
    assert (res.requests["status"] == "completed").all()
    kv = sim.replicas[0].engines[0].scheduler.kv
    assert kv.window_groups == 1 and kv.window_blocks == 257
    assert kv.peak_used > 0


def test_the_run_says_what_the_windows_hold(tmp_path, capsys):
    from conftest import CHATBOT, cli

    assert cli(CHATBOT, "--set", "model.name=gemma-3-12b", "--set", "workload.num_requests=20", "-o",
               tmp_path / "out", "--no-report") == 0
    out = " ".join(capsys.readouterr().out.split())
    # Gemma-3-12B: 40 windowed / 8 full layers -> 5 groups of 65 blocks (1,024-token window)
    assert "each running sequence also holding up to 325 blocks of its sliding-window layers" in out
