"""The SimPy process of one engine: one event per scheduler iteration, never per token.

A decode-only stretch, in which nothing can change the batch until the first
completion or KV block shortage, is advanced in one event (DESIGN.md §7). An arrival
during such a stretch interrupts it: the iterations already finished, and the one in
progress, are applied exactly as stepping would have, and scheduling resumes. Under
async scheduling the arrival also waits out the iteration after that, already scheduled
without it: the stretch's next step, which the stretch runs before it ends.

An attention-DP rank of a MoE model steps in lockstep with its peers (lockstep.py): each
step is one event, priced by the group, with no stretches.

A pipeline-parallel replica under a batch-queue policy (vLLM v1) is one engine that keeps
up to one micro-batch per stage crossing the stages (`_run_queued`); other policies run one
engine per stage, its virtual engines, which share the stages (pipeline.py).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from itertools import accumulate

import simpy

from simulator.cost.model import IterationCostModel
from simulator.lockstep import LockstepGroup
from simulator.metrics import IterationLog
from simulator.pipeline import PipelineStages
from simulator.request import Request
from simulator.scheduler.base import Scheduler


class Engine:
    """One scheduler + KV cache + cost model: a replica, or one pipeline virtual engine (vLLM v0)."""

    def __init__(self, env: simpy.Environment, replica: int, scheduler: Scheduler,
                 cost: IterationCostModel, log: IterationLog,
                 on_finish: Callable[[Request], None], on_reject: Callable[[Request, str], None],
                 *, fast_forward: bool = True, settle_after_finish: bool = False,
                 lockstep: LockstepGroup | None = None, rank: int = 0,
                 stages: PipelineStages | None = None, batch_queue: bool = False):
        self.env = env
        self.replica = replica
        # Its place within the replica, for the records: its attention-DP rank, or its
        # pipeline virtual engine (the two do not combine).
        self.rank = rank
        self.scheduler = scheduler
        # A pipeline-parallel replica's stages, shared with its other virtual engines (or its
        # own other micro-batches): a micro-batch waits for a stage another one holds
        # (pipeline.py), so each iteration is its own event (no decode fast-forward).
        self.stages = stages
        self.cost = cost
        self.log = log
        self.on_finish = on_finish
        self.on_reject = on_reject
        self._idle: simpy.Event | None = None
        self._in_stretch = False
        # Async scheduling: requests that arrived while iteration k ran, held until the
        # scheduling of iteration k + 2 (tagged k; None while a stretch's step is unknown).
        self.async_scheduling = bool(getattr(scheduler.config, "async_scheduling", False))
        self._inbox: list[list] = []
        self._busy = False
        self._steps = 0  # iterations started so far; the running one's number while busy
        self._from_idle = True  # the next iteration starts an idle engine (no CPU overlap)
        self._tag_pending = False
        # An attention-DP rank's steps are its group's passes, one event each.
        self.lockstep = lockstep
        self.fast_forward = fast_forward and lockstep is None
        # Closed loop: after finishing requests, let the replacement sends of this instant
        # arrive (one zero-delay event) before scheduling, so they can join the next step.
        self.settle_after_finish = settle_after_finish
        # vLLM v1 under PP: micro-batches this engine keeps in flight, one per stage (its
        # batch queue). Arrivals join the scheduler at once: the queue already overlaps
        # scheduling with the passes, which is what async scheduling would add.
        self.depth = len(stages.stages) if stages is not None and batch_queue else 1
        if self.depth > 1:
            scheduler.enter_pipeline()
            self.async_scheduling = False
        self.process = env.process(self._run_queued() if self.depth > 1 else self._run())

    @property
    def outstanding(self) -> int:
        return self.scheduler.outstanding + len(self._inbox)

    def submit(self, req: Request) -> None:
        req.rank = self.rank  # the DP rank (or virtual engine) that serves it, for the records
        if self.async_scheduling and self._busy:  # held for the iteration after next
            reason = self.scheduler.admission_error(req)
            if reason is None:
                self._inbox.append([None if self._tag_pending else self._steps, req])
        else:
            reason = self.scheduler.add(req)
        if reason is not None:
            self.on_reject(req, reason)
            return
        self.wake()
        if self._in_stretch:
            self._in_stretch = False
            self.process.interrupt()

    def _release_inbox(self, everything: bool = False) -> None:
        """Hand the scheduler the held requests whose iteration k has been followed by k + 1."""
        keep = []
        for entry in self._inbox:
            if everything or entry[0] + 1 <= self._steps:
                self.scheduler.add(entry[1])  # passes: admission was checked on arrival
            else:
                keep.append(entry)
        self._inbox = keep

    def _stretch_step_known(self, step: int) -> None:
        """The stretch's running iteration is `step`: tag the requests held meanwhile."""
        self._tag_pending = False
        self._steps = step
        for entry in self._inbox:
            if entry[0] is None:
                entry[0] = step

    def wake(self) -> None:
        """Re-run scheduling if idle (a new request, or no more arrivals to wait for)."""
        if self._idle is not None and not self._idle.triggered:
            self._idle.succeed()

    def _idle_wait(self, now: float):
        """Wait for an arrival, or for the scheduler's own wake-up time."""
        self._idle = self.env.event()
        wake_at = self.scheduler.next_wakeup(now)
        if wake_at is None or wake_at <= now:
            yield self._idle
        else:
            yield self._idle | self.env.timeout(max(wake_at - now, 0.0))
        self._idle = None
        self._from_idle = True

    def _run_queued(self):
        """vLLM v1's batch queue (EngineCore.step_with_batch_queue): schedule another
        micro-batch whenever fewer than `depth` are in flight and some work is not already
        in one; otherwise wait for the oldest one's output, which lets its sequences go on.
        Micro-batches cross the stages in order (pipeline.py), so they land oldest first."""
        env = self.env
        sched = self.scheduler
        cost = self.cost
        log = self.log
        kv = sched.kv
        queue: deque = deque()
        while True:
            now = env.now
            step = sched.schedule_more(now) if len(queue) < self.depth else None
            if step is not None:
                sched.launch(step)
                from_idle, self._from_idle = self._from_idle, False
                dt = cost.iteration_time(step.shape, from_idle=from_idle) + step.copy_s
                self._steps += 1
                queue.append((step, now, env.process(self.stages.traverse(dt)), kv.used, sched.queued))
                continue
            if not queue:
                yield from self._idle_wait(now)
                continue
            step, start, crossing, used, queued = queue.popleft()
            yield crossing
            finished = sched.land(step, env.now)
            shape = step.shape
            log.add(self.replica, start, env.now - start, shape.num_tokens - shape.num_decode, shape.num_decode,
                    shape.num_seqs, used, kv.total, queued)
            for req in finished:
                self.on_finish(req)
            if finished and self.settle_after_finish:
                yield env.timeout(0)

    def _run(self):
        env = self.env
        sched = self.scheduler
        cost = self.cost
        log = self.log
        kv = sched.kv
        replica = self.replica
        group = self.lockstep
        # Runs with DP ranks log each row's rank: attention-DP ranks (in lockstep) and a
        # dense model's DP ranks (independent engines, which may fast-forward) alike.
        ranks = log.ranks is not None
        while True:
            if group is not None and group.busy:  # join the next pass, as vLLM's DP ranks do
                group.rest(self)
                yield group.pass_end
                continue
            now = env.now
            if self._inbox:
                self._release_inbox()
            step = sched.schedule(now)
            if step is None and self._inbox:  # nothing else to run: the scheduler sees them now
                self._release_inbox(everything=True)
                step = sched.schedule(now)
            if step is None:
                if group is not None:
                    group.rest(self)
                yield from self._idle_wait(now)
                continue
            shape = step.shape
            k = sched.stretch_limit(step) if (step.decode_only and self.fast_forward and not self._inbox
                                              and self.stages is None) else 1
            self._steps += 1
            self._busy = True
            from_idle, self._from_idle = self._from_idle, False
            if k == 1:
                if group is None:
                    # copy_s: KV copies (host swaps, pulled prompts) the forward pass waits for.
                    dt = cost.iteration_time(shape, from_idle=from_idle) + step.copy_s
                    used, queued = kv.used, sched.queued
                    if self.stages is None:
                        yield env.timeout(dt)
                    else:  # its pass, plus any wait for a stage another micro-batch holds
                        yield from self.stages.traverse(dt)
                        dt = env.now - now
                else:
                    dt = yield group.join(self, shape, from_idle, step.copy_s)
                    used, queued = kv.used, sched.queued
                    yield group.pass_end
                self._busy = False
                finished = sched.complete(step, env.now)
                log.add(replica, now, dt, shape.num_tokens - shape.num_decode, shape.num_decode,
                        shape.num_seqs, used, kv.total, queued)
                if ranks:
                    log.add_rank(self.rank)
            else:
                queued = sched.queued
                durations = cost.decode_step_times(shape.num_decode, shape.decode_context, k, from_idle=from_idle)
                # Each end adds one duration to the last end, as stepping does: summing the
                # durations first rounds differently and can flip a later tie between engines.
                # What stays different is the order of events at one instant, which SimPy
                # breaks by when each was scheduled: the stretch's end is scheduled at its
                # start, where stepping schedules each step's end at that step's start, and an
                # arrival exactly on an inner step boundary is taken as after that step's end.
                # Only exact ties see it (fuzzing: 1 run in ~10,000, two requests swapping
                # virtual engines); matching them would take an event per step, the cost the
                # stretch exists to avoid.
                ends = list(accumulate(durations, initial=now))[1:]
                self._in_stretch = True
                self._tag_pending = True
                first = self._steps
                try:
                    yield env.timeout(ends[-1] - now)
                    n = k
                    self._stretch_step_known(first + n - 1)
                except simpy.Interrupt:
                    # Finished steps plus the one in progress complete; then we reschedule.
                    n = min(bisect_right(ends, env.now) + 1, k)
                    self._stretch_step_known(first + n - 1)
                    yield env.timeout(max(ends[n - 1] - env.now, 0.0))
                    if self.async_scheduling and n < k:
                        # The held arrivals wait out one more iteration, which was scheduled
                        # without them: the stretch's next decode step. Run it here rather
                        # than as a separate event (arrivals meanwhile are held as for any step).
                        self._steps = first + n
                        n += 1
                        yield env.timeout(max(ends[n - 1] - env.now, 0.0))
                self._in_stretch = False
                self._busy = False
                ends = ends[:n]
                ends[-1] = env.now
                finished, kv_steps = sched.complete_stretch(step, ends)
                starts = [now, *ends[:-1]]
                log.add_stretch(replica, starts, durations[:n], shape.num_decode, kv_steps,
                                kv.total, queued)
                if ranks:
                    log.add_rank(self.rank, n)
            for req in finished:
                self.on_finish(req)
            if finished and self.settle_after_finish:
                yield env.timeout(0)
