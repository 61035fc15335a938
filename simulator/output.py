"""Writes a run's files: summary.json, requests.csv, iterations.csv and the report.

Files are written to a temporary sibling folder and moved into place at the end, so an
interrupted or failed run never leaves a half-written output folder behind.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from simulator.errors import ServesimError
from simulator.simulation import SimulationResult


def folder_name(name: str) -> str:
    """A scenario's or plan's name as a folder name. The name is the file's own text, so
    anything but letters, digits, dots, dashes and underscores becomes a dash: a
    `name: ../x` or `name: /tmp/x` stays inside reports/."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "run"


def default_output_dir(name: str) -> Path:
    """reports/<name>-<timestamp>."""
    return Path("reports") / f"{folder_name(name)}-{time.strftime('%Y%m%d-%H%M%S')}"


def claim_free(final: Path) -> Path:
    """`final`, or the first of final-2, final-3, ... that no one holds, created empty at once
    so that two runs started in the same second never write into one folder."""
    make_dirs(final.parent, named=final)
    path, n = final, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = final.with_name(f"{final.name}-{n}")
        except OSError as exc:
            raise ServesimError(f"cannot create the folder: {exc.strerror or exc}", where=str(path),
                                fix="choose another folder for --output-dir") from None


# Files servesim writes into an output folder; only a folder holding nothing else is replaced.
OWN_FILES = {"summary.json", "requests.csv", "iterations.csv", "report.html", "scenario.yaml",
             "validation.json", "validation.csv", "validation.html", "compare.json", "compare.csv", "compare.html"}


#: The figures servesim writes beside them: a run's report, validate's and compare's pages,
#: and a plan's. Any other PNG in the folder is the user's, and the folder is not replaced.
OWN_FIGURES = re.compile(
    r"(?:(?:ttft|tpot|e2e)_distribution|throughput|queue_length|kv_utilization|batch_size|compare"
    r"|pareto_cost_latency|pareto_throughput|max_rate_vs_gpus|(?:scatter|cdf|curves)_[A-Za-z0-9._-]+)\.png")


def check_creatable(final: Path, option: str = "--output-dir") -> None:
    """Refuse a path whose folders cannot be made, before any work is done: a parent that
    is a file, or a folder this user may not write into. `option`: where the path came from."""
    ancestor = final.parent.absolute()
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ServesimError(f"{ancestor} is a file, so no folder can be made below it", where=str(final),
                            fix=f"pass a folder path to {option}")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ServesimError(f"no permission to create folders in {ancestor}", where=str(final),
                            fix=f"choose a folder you can write to for {option}")


def make_dirs(path: Path, named: Path | None = None) -> None:
    """mkdir -p, with an OS refusal (read-only disk, quota) as a clean error that names
    `named` (the folder the user asked for, when `path` is its staging copy)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ServesimError(f"cannot create the folder: {exc.strerror or exc}", where=str(named or path),
                            fix="choose another folder for --output-dir") from None


def check_output_dir(final: Path, option: str = "--output-dir") -> None:
    """Refuse to overwrite anything that is not a previous servesim output folder, and a
    path that cannot be created. `option`: where the path came from (`--output-dir`, or a
    scenario's `output.dir`), which the fix names."""
    if final.exists() and not final.is_dir():
        raise ServesimError("the output path exists and is a file", where=str(final),
                            fix=f"pass a folder path to {option}")
    if final.is_dir():
        foreign = [p.name for p in final.iterdir() if p.name not in OWN_FILES and not OWN_FIGURES.fullmatch(p.name)]
        if foreign:
            shown = ", ".join(sorted(foreign)[:5])
            raise ServesimError(f"the output folder holds files servesim did not write ({shown})",
                                where=str(final), fix=f"choose a new or empty folder for {option}")
    else:
        check_creatable(final, option)


def publish(tmp: Path, final: Path) -> None:
    """Move a fully written temporary folder into place, replacing an old output folder
    (an empty one, a claim of `claim_free`, is replaced by the rename itself)."""
    check_output_dir(final)
    if final.is_dir() and any(final.iterdir()):
        shutil.rmtree(final)
    tmp.replace(final)


def staging_dir(final: Path) -> Path:
    """A fresh temporary sibling of `final`, so nothing half-written ever appears there."""
    check_output_dir(final)
    make_dirs(final.parent)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    make_dirs(tmp, named=final)
    return tmp


def _clean(obj):
    """JSON-safe: NaN/inf become null (strict JSON readers reject NaN)."""
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_json(path: Path, obj) -> None:
    """Strict JSON (NaN and inf as null), indented: summary, validation and compare files."""
    path.write_text(json.dumps(_clean(obj), indent=2, sort_keys=False) + "\n")


@contextmanager
def staged(final: Path, unique: bool = False) -> Iterator[tuple[Path, Path]]:
    """(a temporary sibling of the output folder to write into, the output folder): moved
    into place when the block ends, removed if it fails, so no half-written output folder
    ever appears. `unique` (a default, timestamped folder): never replace one that exists,
    take the next free name instead."""
    if final.is_symlink():  # write where the link points: the link itself is not replaced
        final = final.resolve()
    if unique:
        final = claim_free(final)
    tmp = None
    try:
        tmp = staging_dir(final)
        yield tmp, final
        publish(tmp, final)
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if unique:
            with contextlib.suppress(OSError):  # only while still the empty claim
                final.rmdir()
        raise


def write_outputs(result: SimulationResult, out_dir: str | Path | None = None, *,
                  report: bool | None = None, iterations_csv: bool | None = None) -> Path:
    """Write every output file of a run into `out_dir` (atomically) and return it.

    Without `out_dir`, the scenario's `output.dir`, else reports/<name>-<timestamp>/ under
    the working directory (-2, -3, ... when taken). A folder holding files servesim did not
    write is refused (ServesimError), never overwritten."""
    sc = result.scenario.scenario
    report = sc.output.report if report is None else report
    iterations_csv = sc.output.iterations_csv if iterations_csv is None else iterations_csv
    auto = out_dir is None and not sc.output.dir
    final = Path(out_dir) if out_dir is not None else (
        Path(sc.output.dir) if sc.output.dir else default_output_dir(result.scenario.name))
    with staged(final, unique=auto) as (tmp, final):
        write_json(tmp / "summary.json", result.summary)
        result.requests.to_csv(tmp / "requests.csv", index=False, float_format="%.6f")
        if iterations_csv:
            result.iterations.to_csv(tmp / "iterations.csv", index=False, float_format="%.6f")
        (tmp / "scenario.yaml").write_text(result.scenario.text)
        if report:
            from simulator.report import write_report

            write_report(tmp, result.summary, result.requests, result.iterations,
                         title=f"servesim: {result.scenario.name}", scenario_yaml=result.scenario.text)
    return final
