"""How many worker processes to start by default (validation runs, plan searches)."""

from __future__ import annotations

import os

# Peak resident memory of one worker: the kernel-profile tables and one simulated run of
# up to ~10k requests measured at ~0.9 GiB (a 256-client MoE sweep row), with margin.
WORKER_MEMORY_GIB = 1.5


def default_workers() -> int:
    """One worker per CPU, as many as the available memory holds (at least one)."""
    cpus = os.cpu_count() or 1
    try:
        free_gib = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    except (ValueError, OSError, AttributeError):  # not Linux: trust the CPU count
        return cpus
    return max(1, min(cpus, int(free_gib // WORKER_MEMORY_GIB)))
