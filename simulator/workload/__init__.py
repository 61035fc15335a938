"""Workloads: when requests arrive and how long their prompts and outputs are.

A scenario's ``workload`` section is validated into :class:`WorkloadConfig`, and
:func:`build_workload` turns it into plain numpy arrays before the simulation starts:

- open-loop traffic (Poisson, gamma, constant, trace replay) becomes an
  :class:`OpenLoopWorkload` with one arrival time and two lengths per request;
- closed-loop traffic (N clients that each wait for their previous reply) becomes a
  :class:`ClosedLoopWorkload`: arrival times depend on the simulated latency, so only the
  lengths can be drawn up front.

Randomness is split into three independent streams (arrivals, prompt lengths, output
lengths) derived from one seed. The same seed gives bit-identical arrays, and changing
only the arrival rate leaves the sampled lengths unchanged (common random numbers), so
two configurations are compared on the same requests.

Arrival semantics follow vLLM's benchmark client: gamma gaps with shape ``burstiness``
and scale ``1/(rate*burstiness)``, the first request sent at t = 0.
"""


from __future__ import annotations

from simulator.workload.arrivals import (
    ArrivalConfig,
    ClosedLoopArrival,
    ConstantArrival,
    GammaArrival,
    PoissonArrival,
    RampArrival,
    TraceArrival,
)
from simulator.workload.config import SharedPrefixConfig, WorkloadConfig
from simulator.workload.defaults import CLOSED_LOOP_REQUESTS_PER_CLIENT, DEFAULT_NUM_REQUESTS
from simulator.workload.generate import (
    ClosedLoopWorkload,
    OpenLoopWorkload,
    build_workload,
    prompt_content,
)
from simulator.workload.lengths import (
    EmpiricalLength,
    FixedLength,
    LengthConfig,
    LognormalLength,
    NormalLength,
    UniformLength,
    sample_lengths,
)
from simulator.workload.traces import (
    TRACE_PARSERS,
    Trace,
    TraceParser,
    read_length_column,
    read_trace,
    sniff_trace_format,
)

__all__ = [
    "CLOSED_LOOP_REQUESTS_PER_CLIENT",
    "DEFAULT_NUM_REQUESTS",
    "TRACE_PARSERS",
    "ArrivalConfig",
    "ClosedLoopArrival",
    "ClosedLoopWorkload",
    "ConstantArrival",
    "EmpiricalLength",
    "FixedLength",
    "GammaArrival",
    "LengthConfig",
    "LognormalLength",
    "NormalLength",
    "OpenLoopWorkload",
    "PoissonArrival",
    "RampArrival",
    "SharedPrefixConfig",
    "Trace",
    "TraceArrival",
    "TraceParser",
    "UniformLength",
    "WorkloadConfig",
    "build_workload",
    "prompt_content",
    "read_length_column",
    "read_trace",
    "sample_lengths",
    "sniff_trace_format",
]
