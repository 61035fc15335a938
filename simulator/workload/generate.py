"""A validated workload turned into the arrays a simulation replays: arrival times, lengths,
shared prefixes and conversation turns, drawn from independent seeded streams."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.errors import ConfigError
from simulator.request import Request
from simulator.workload.arrivals import (
    ClosedLoopArrival,
    GammaArrival,
    TraceArrival,
    check_implied_count,
    times_before,
)
from simulator.workload.config import WorkloadConfig
from simulator.workload.defaults import CLOSED_LOOP_REQUESTS_PER_CLIENT, DEFAULT_NUM_REQUESTS
from simulator.workload.lengths import sample_lengths
from simulator.workload.traces import Trace, read_trace, resolve_path


def _frozen(a: np.ndarray | None, dtype: type) -> np.ndarray | None:
    """A read-only view (no copy when the dtype already matches; the caller's array
    stays writable)."""
    if a is None:
        return None
    view = np.asarray(a, dtype=dtype).view()
    view.setflags(write=False)
    return view


def scale_lengths(tokens: np.ndarray, scale: float) -> np.ndarray:
    """Token counts times `scale`, rounded, at least 1 (a trace's `length_scale`)."""
    if scale == 1.0:
        return tokens
    return np.clip(np.rint(tokens * scale), 1.0, 2.0**53).astype(np.int64)  # clipped before the cast: no wrap


@dataclass(frozen=True, eq=False)
class SharedPrefixes:
    """Request i's first ``tokens[i]`` prompt tokens are shared text number ``ids[i]``
    (-1: nothing shared). From `shared_prefix` or a csv trace's prefix columns."""

    ids: np.ndarray
    tokens: np.ndarray

    def __len__(self) -> int:
        return int(self.ids.size)

    def window(self, lo: int, hi: int, scale: float = 1.0) -> SharedPrefixes:
        return SharedPrefixes(self.ids[lo:hi], scale_lengths(self.tokens[lo:hi], scale))

    def chain(self, i: int) -> tuple[tuple[int, int], ...] | None:
        pid, tokens = int(self.ids[i]), int(self.tokens[i])
        return None if pid < 0 or tokens <= 0 else ((pid, tokens),)

    def tail(self, i: int) -> int | None:
        return None


@dataclass(frozen=True, eq=False)
class HashedBlocks:
    """Mooncake-style content hashes: entry j of ``hash_ids[i]`` identifies prompt tokens
    [j·block_tokens, (j+1)·block_tokens) of request i, given everything before them."""

    hash_ids: tuple[tuple[int, ...], ...]
    block_tokens: int

    def __len__(self) -> int:
        return len(self.hash_ids)

    def window(self, lo: int, hi: int, scale: float = 1.0) -> HashedBlocks:
        return HashedBlocks(self.hash_ids[lo:hi], max(round(self.block_tokens * scale), 1))

    def chain(self, i: int) -> tuple[tuple[int, int], ...] | None:
        b = self.block_tokens
        hashes = self.hash_ids[i]
        return tuple((h, (j + 1) * b) for j, h in enumerate(hashes)) if hashes else None

    def tail(self, i: int) -> int | None:
        return None


@dataclass(frozen=True, eq=False)
class SessionTurns:
    """Conversations: a turn whose prompt is at least the previous turn's prompt plus answer
    is taken to extend it (a chat client resends the history), so its prompt opens with
    that whole context, which the previous turn leaves cached. Other turns start afresh
    (with ``base``'s shared content, if any)."""

    chains: tuple[tuple[tuple[int, int], ...] | None, ...]
    tails: tuple[int | None, ...]

    @classmethod
    def build(cls, session_id: np.ndarray, prompts: np.ndarray, outputs: np.ndarray,
              base: PromptPrefixes | None) -> SessionTurns:
        last: dict[int, tuple[tuple[tuple[int, int], ...], int, int]] = {}  # chain, context, turn
        chains: list[tuple[tuple[int, int], ...] | None] = []
        tails: list[int | None] = []
        for i, (sid, p, o) in enumerate(zip(session_id.tolist(), prompts.tolist(), outputs.tolist(), strict=True)):
            own = base.chain(i) if base is not None else None
            if sid < 0:
                chains.append(own)
                tails.append(None)
                continue
            prev = last.get(sid)
            turn = prev[2] + 1 if prev else 0
            if prev is not None and p >= prev[1]:
                chain = (*prev[0], (hash((-7, sid, prev[2])), prev[1]))
            else:
                chain = own or ()
            chains.append(chain or None)
            tails.append(hash((-7, sid, turn)))
            last[sid] = (chain, p + o, turn)
        return cls(tuple(chains), tuple(tails))

    def __len__(self) -> int:
        return len(self.chains)

    def chain(self, i: int) -> tuple[tuple[int, int], ...] | None:
        return self.chains[i]

    def tail(self, i: int) -> int | None:
        return self.tails[i]


PromptPrefixes = SharedPrefixes | HashedBlocks | SessionTurns


def prompt_content(prefixes: PromptPrefixes | None, i: int) -> dict:
    """Request i's shared prompt content, as `Request` keyword arguments."""
    if prefixes is None:
        return {}
    return {"prefix": prefixes.chain(i), "prefix_tail": prefixes.tail(i)}


@dataclass(frozen=True, eq=False)
class OpenLoopWorkload:
    """Requests whose arrival times do not depend on the server (rate or trace driven).

    Arrays are read-only and aligned: element i describes request i, in arrival order.
    ``session_id``/``prefix_id`` use -1 for "none" and are None when the source has no
    such column. ``hash_ids`` (Mooncake traces only) are the per-request KV block hashes
    (512-token blocks in the published traces); ``prefix_id`` is then the first hash.
    ``skipped_rows`` counts trace rows dropped as failed requests (0 prompt or output
    tokens); ``trace_rows`` the trace's other rows, of which these requests are a window.
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    session_id: np.ndarray | None = None
    prefix_id: np.ndarray | None = None
    hash_ids: tuple[tuple[int, ...], ...] | None = None
    skipped_rows: int = 0
    prefixes: PromptPrefixes | None = None  # shared prompt content, for prefix caching
    trace_rows: int | None = None
    trace_cut_by: tuple[str, ...] = ()  # the fields that left trace rows out, as `field: value`
    trace_unused: tuple[str, ...] = ()  # the trace's columns the run could not use, and why

    def __post_init__(self) -> None:
        for name, dtype in (
            ("arrival_s", np.float64),
            ("prompt_tokens", np.int64),
            ("output_tokens", np.int64),
            ("session_id", np.int64),
            ("prefix_id", np.int64),
        ):
            object.__setattr__(self, name, _frozen(getattr(self, name), dtype))
        n = self.arrival_s.size
        for name in ("prompt_tokens", "output_tokens", "session_id", "prefix_id", "hash_ids", "prefixes"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise ValueError(f"{name} has {len(value)} entries, arrival_s has {n}")

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    def iter_requests(self, first_id: int = 0) -> Iterator[Request]:
        """Yield one :class:`Request` per row, lazily, so large runs hold only arrays."""
        sid = self.session_id.tolist() if self.session_id is not None else None
        pid = self.prefix_id.tolist() if self.prefix_id is not None else None
        rows = zip(
            self.arrival_s.tolist(),
            self.prompt_tokens.tolist(),
            self.output_tokens.tolist(),
            strict=True,
        )
        for i, (t, p, o) in enumerate(rows):
            yield Request(
                first_id + i,
                t,
                p,
                o,
                session_id=sid[i] if sid is not None else -1,
                prefix_id=pid[i] if pid is not None else -1,
                **prompt_content(self.prefixes, i),
            )


@dataclass(frozen=True, eq=False)
class ClosedLoopWorkload:
    """N clients sending back to back: only lengths are known before the run.

    Request i (in send order, across all clients) uses ``prompt_tokens[i]`` and
    ``output_tokens[i]``. Sending stops when the lengths run out or, if ``duration_s``
    is set, at that simulated time.
    """

    concurrency: int
    think_time_s: float
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    duration_s: float | None
    think_times: np.ndarray | None = None  # per request, seconds before it is sent (jittered clients)
    release_s: np.ndarray | None = None  # per request, earliest send time (issued at a rate)
    prefixes: PromptPrefixes | None = None  # shared prompt content, for prefix caching

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt_tokens", _frozen(self.prompt_tokens, np.int64))
        object.__setattr__(self, "output_tokens", _frozen(self.output_tokens, np.int64))
        object.__setattr__(self, "think_times", _frozen(self.think_times, np.float64))
        object.__setattr__(self, "release_s", _frozen(self.release_s, np.float64))
        if self.prompt_tokens.size != self.output_tokens.size:
            raise ValueError("prompt_tokens and output_tokens differ in length")

    def __len__(self) -> int:
        return int(self.prompt_tokens.size)


def _streams(seed: int) -> tuple[np.random.Generator, ...]:
    """Independent generators: arrivals, prompt lengths, output lengths, think times and
    prefix groups (spawned children do not depend on how many are spawned)."""
    return tuple(np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5))


def _shared_prefixes(cfg: WorkloadConfig, n: int, rng: np.random.Generator) -> SharedPrefixes | None:
    sp = cfg.shared_prefix
    if sp is None:
        return None
    ids = rng.integers(0, sp.groups, n) if sp.groups > 1 else np.zeros(n, dtype=np.int64)
    return SharedPrefixes(ids.astype(np.int64), np.full(n, sp.tokens, dtype=np.int64))


def build_workload(
    cfg: WorkloadConfig, base_dir: Path | str | None = None
) -> OpenLoopWorkload | ClosedLoopWorkload:
    """Generate the requests of ``cfg``; relative file paths are taken from ``base_dir``
    (the scenario file's folder; default: the working directory)."""
    base = Path(base_dir) if base_dir is not None else None
    arrival = cfg.arrival
    if isinstance(arrival, TraceArrival):
        return _build_trace_workload(cfg, arrival, base)

    rng_arrival, rng_prompt, rng_output, rng_think, rng_prefix = _streams(cfg.seed)
    assert cfg.prompt_tokens is not None and cfg.output_tokens is not None

    if isinstance(arrival, ClosedLoopArrival):
        if cfg.num_requests is not None:
            n = cfg.num_requests
        elif cfg.duration_s is not None:
            n = arrival.concurrency * CLOSED_LOOP_REQUESTS_PER_CLIENT
            check_implied_count(n, "workload.arrival.concurrency")
        else:
            n = DEFAULT_NUM_REQUESTS
        return ClosedLoopWorkload(
            concurrency=arrival.concurrency,
            think_time_s=float(arrival.think_time_s),
            prompt_tokens=sample_lengths(
                cfg.prompt_tokens, n, rng_prompt, base, field="workload.prompt_tokens"
            ),
            output_tokens=sample_lengths(
                cfg.output_tokens, n, rng_output, base, field="workload.output_tokens"
            ),
            duration_s=cfg.duration_s,
            think_times=(
                rng_think.exponential(arrival.think_time_s, n)
                if arrival.think_time_distribution == "exponential" and arrival.think_time_s > 0
                else None
            ),
            release_s=(
                GammaArrival(rate=arrival.rate, burstiness=arrival.burstiness).arrival_times(n, None, rng_arrival)
                if arrival.rate is not None
                else None
            ),
            prefixes=_shared_prefixes(cfg, n, rng_prefix),
        )

    n_req = cfg.num_requests
    if n_req is None and cfg.duration_s is None:
        n_req = DEFAULT_NUM_REQUESTS
    t = arrival.arrival_times(n_req, cfg.duration_s, rng_arrival)
    return OpenLoopWorkload(
        arrival_s=t,
        prompt_tokens=sample_lengths(
            cfg.prompt_tokens, t.size, rng_prompt, base, field="workload.prompt_tokens"
        ),
        output_tokens=sample_lengths(
            cfg.output_tokens, t.size, rng_output, base, field="workload.output_tokens"
        ),
        prefixes=_shared_prefixes(cfg, t.size, rng_prefix),
    )


def _build_trace_workload(
    cfg: WorkloadConfig, arrival: TraceArrival, base: Path | None
) -> OpenLoopWorkload:
    """Window, rescale and cut a trace, in that order (see the TraceArrival fields)."""
    path = resolve_path(arrival.path, base, "workload.arrival.path")
    trace = read_trace(path, arrival.format, label=arrival.path)
    t = trace.arrival_s
    lo = int(np.searchsorted(t, arrival.start_s, side="left"))
    hi = t.size
    for limit in (arrival.max_requests, cfg.num_requests):
        if limit is not None:
            hi = min(hi, lo + limit)
    if lo >= t.size:
        raise ConfigError(
            f"start_s = {arrival.start_s} s is after the trace's last request "
            f"(at {t[-1]:.3f} s), so no request is left",
            where="workload.arrival.start_s",
            fix=f"use a start_s below {t[-1]:.3f}",
        )
    cut_by = [f"workload.arrival.start_s: {arrival.start_s}"] if lo else []
    cut_by += [f"{name}: {limit}" for name, limit in (("workload.arrival.max_requests", arrival.max_requests),
                                                       ("workload.num_requests", cfg.num_requests))
               if limit is not None and lo + limit < t.size and hi == lo + limit]
    t = (t[lo:hi] - t[lo]) / arrival.rate_scale
    kept = times_before(t, cfg.duration_s).size
    if kept < t.size:
        cut_by.append(f"workload.duration_s: {cfg.duration_s}")
    hi = lo + kept
    t = t[: hi - lo]

    def window(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else a[lo:hi]

    def scaled(a: np.ndarray) -> np.ndarray:
        return scale_lengths(a[lo:hi], arrival.length_scale)

    prompts, outputs, sessions = scaled(trace.prompt_tokens), scaled(trace.output_tokens), window(trace.session_id)
    prefixes = _trace_prefixes(trace, arrival)
    if prefixes is not None:
        prefixes = prefixes.window(lo, hi, arrival.length_scale)
    if sessions is not None:
        prefixes = SessionTurns.build(sessions, prompts, outputs, prefixes)
    return OpenLoopWorkload(
        arrival_s=t,
        prompt_tokens=prompts,
        output_tokens=outputs,
        session_id=sessions,
        prefix_id=window(trace.prefix_id),
        hash_ids=trace.hash_ids[lo:hi] if trace.hash_ids is not None else None,
        skipped_rows=trace.skipped_rows,
        prefixes=prefixes,
        trace_rows=trace.arrival_s.size,
        trace_cut_by=tuple(cut_by),
        trace_unused=_unused_trace_columns(trace),
    )


def _unused_trace_columns(trace: Trace) -> tuple[str, ...]:
    """Columns a trace gives that mean nothing on their own (said in the run's notes)."""
    if (trace.prefix_id is not None and trace.prefix_tokens is None and trace.hash_ids is None
            and (trace.prefix_id >= 0).any()):
        return ("prefix_id: the prefix cache needs each shared prefix's length too; add a prefix_tokens "
                "column (the request's first prefix_tokens prompt tokens are the text prefix_id names)",)
    return ()


def _trace_prefixes(trace: Trace, arrival: TraceArrival) -> SharedPrefixes | HashedBlocks | None:
    """The shared content a trace marks per request (before any session chaining)."""
    if trace.hash_ids is not None:
        return HashedBlocks(trace.hash_ids, arrival.hash_block_tokens)
    if trace.prefix_id is not None and trace.prefix_tokens is not None:
        return SharedPrefixes(trace.prefix_id, trace.prefix_tokens)
    return None
