"""Run configuration searches in parallel: local processes, or tasks on a Ray cluster.

Both executors run the same function (`search.search_config`) on the same JSON-able task
dicts and hand each record to `on_result` as soon as it finishes, so results can be
streamed to disk in completion order. One configuration is one task: its searches are
sequential (each probe depends on the last), and configurations are independent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from simulator.errors import ServesimError
from simulator.plan.search import search_config
from simulator.workers import default_workers

EXECUTORS = ("local", "ray")
OnResult = Callable[[dict], None]


def _failed(task: dict, exc: BaseException) -> dict:
    return {"key": task["key"], "label": task["label"], "params": task["params"], "status": "error",
            "reason": f"{type(exc).__name__}: {exc}"}


def run_local(tasks: list[dict], workers: int, on_result: OnResult) -> None:
    """A process pool (in-process when workers is 1: simpler to debug and profile)."""
    if workers <= 1 or len(tasks) <= 1:
        for t in tasks:
            on_result(search_config(t))
        return
    pool = ProcessPoolExecutor(max_workers=min(workers, len(tasks)))
    try:
        pending = {pool.submit(search_config, t): t for t in tasks}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                task = pending.pop(fut)
                try:
                    rec = fut.result()
                except Exception as exc:  # a worker died (e.g. out of memory): keep going
                    rec = _failed(task, exc)
                    rec["reason"] += " (the worker process died; rerun with --resume to retry)"
                on_result(rec)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def import_ray():
    try:
        import ray
    except ImportError:
        raise ServesimError("the Ray executor needs the `ray` package, which is not installed",
                            where="--executor ray",
                            fix="pip install -e '.[ray]'   (or: pip install 'ray>=2.9'), "
                            "or use the default --executor local") from None
    return ray


def run_ray(tasks: list[dict], workers: int, address: str | None, on_result: OnResult) -> None:
    """Each configuration is one Ray task (1 CPU). Joins a running Ray session if there is
    one, else connects to `address` (a cluster) or starts a local Ray with `workers` CPUs.

    With an address, the simulator's code ships with the job (runtime_env py_modules), so
    cluster nodes need only its dependencies (simpy, numpy, pandas, pydantic, pyyaml).
    """
    ray = import_ray()
    started = False
    if not ray.is_initialized():
        kwargs = {"include_dashboard": False, "logging_level": logging.WARNING}
        try:
            if address:
                import calibration
                import simulator

                mods = [str(Path(m.__file__).parent) for m in (simulator, calibration)]
                ray.init(address=address, runtime_env={"py_modules": mods}, **kwargs)
            else:
                ray.init(num_cpus=max(1, workers), **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ServesimError(f"could not start or reach Ray: {exc}", where="--executor ray",
                                fix="check --address (e.g. ray://head:10001 or auto), or start the "
                                "cluster with `ray start --head`") from None
        started = True
    try:
        remote = ray.remote(num_cpus=1, max_retries=1)(search_config)
        pending = {remote.remote(t): t for t in tasks}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                task = pending.pop(ref)
                try:
                    rec = ray.get(ref)
                except Exception as exc:  # the task or its worker failed: keep going
                    rec = _failed(task, exc)
                on_result(rec)
    finally:
        if started:
            ray.shutdown()


def check_executor(executor: str, address: str | None) -> None:
    """Refuse a bad executor choice before anything is written (a plan's output folder)."""
    if executor not in EXECUTORS:
        raise ServesimError(f"unknown executor {executor!r}", where="--executor",
                            fix=f"use one of: {', '.join(EXECUTORS)}")
    if executor == "local" and address:
        raise ServesimError("--address is for the Ray executor", where="--address",
                            fix="add --executor ray, or drop --address")
    if executor == "ray":
        import_ray()
        if address:
            check_reachable(address)


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Refuse a Ray address nothing answers at, before the plan writes its folder: Ray
    itself retries such an address for minutes, logging from its C++ client."""
    import socket

    hostport = address.removeprefix("ray://")
    if address == "auto" or ":" not in hostport:
        return  # `auto` (a local cluster) and bare hosts are Ray's to resolve
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return
    except ValueError:
        reason = f"port {port!r} is not a number"
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    raise ServesimError(f"cannot reach Ray at {address}: {reason}", where="--address",
                        fix="give the head node's address (ray://HOST:10001 for a Ray client, HOST:6379 for "
                            "the GCS), or start the cluster with `ray start --head`")


def run_tasks(tasks: list[dict], *, executor: str = "local", workers: int | None = None,
              address: str | None = None, on_result: OnResult) -> None:
    workers = workers or default_workers()
    check_executor(executor, address)
    if executor == "local":
        run_local(tasks, workers, on_result)
    else:
        run_ray(tasks, workers, address, on_result)
