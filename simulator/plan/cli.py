"""`simulate plan PLAN.yaml`: the capacity-planning command (registered in simulator.cli)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from simulator.terminal import make_console
from simulator.workers import default_workers

console = make_console()
err_console = make_console(stderr=True)


class SweepProgress:
    """A bar over configurations (stderr); each finished one updates it with its label."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar: Progress | None = None
        self.task = None

    def start(self, total: int, reused: int) -> None:
        if reused:
            err_console.print(f"resuming: {reused} of {total} configurations already done")
        if not self.enabled or total == reused:
            return
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("configurations"), TimeElapsedColumn(), TextColumn("eta"),
                            TimeRemainingColumn(), console=err_console, transient=True)
        self.bar.start()
        self.task = self.bar.add_task("planning", total=total, completed=reused)

    def advance(self, rec: dict) -> None:
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=f"planning ({rec['label']})"[:60])

    def check(self, text: str) -> None:
        """A whole-deployment run after the sweep: said, so a full bar does not look stuck."""
        if self.bar is not None:
            self.bar.update(self.task, description=text[:70])
        elif self.enabled:
            err_console.print(text, highlight=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _plan_data(path: Path, overrides: list[str]) -> dict | None:
    """The plan file with --set edits applied (None when there are none)."""
    if not overrides:
        return None
    from simulator.config import apply_override
    from simulator.plan.config import _read_yaml

    data = _read_yaml(path, "plan file")
    for assignment in overrides:
        apply_override(data, assignment)
    return data


def plan_cmd(
    plan: Annotated[Path, typer.Argument(help="plan YAML file (see scenarios/plans/)")],
    output_dir: Annotated[Path | None, typer.Option("--output-dir", "-o", help="default reports/plan-<name>-<timestamp>/")] = None,
    workers: Annotated[int | None, typer.Option("--workers", "-j", min=1, help="parallel searches; default one per CPU, as many as free memory holds")] = None,
    executor: Annotated[str, typer.Option("--executor", help="local (processes) or ray")] = "local",
    address: Annotated[str | None, typer.Option("--address", help="Ray cluster address (with --executor ray); default a local Ray")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="continue a sweep: skip configurations already in results.jsonl")] = False,
    set_: Annotated[list[str] | None, typer.Option("--set", metavar="PATH=VALUE", help="override a plan field: dotted.path=value, or ~dotted.path to remove one (repeatable)")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar, no table")] = False,
) -> None:
    """Find the cheapest deployment that meets an SLO (or the most traffic a budget carries)."""
    from simulator.plan.config import load_plan
    from simulator.plan.infeasible import reason_groups
    from simulator.plan.report import headline, why_it_fits
    from simulator.plan.runner import default_output_dir, run_plan

    loaded = load_plan(plan, data=_plan_data(plan, set_ or []), overrides=set_ or [])
    workers = workers or default_workers()
    if output_dir is None and not resume:  # named now, so an interrupted run can say where it is
        output_dir = default_output_dir(loaded.name)
    progress = SweepProgress(enabled=not quiet)
    t0 = time.perf_counter()
    try:
        outcome = run_plan(loaded, output_dir, executor=executor, workers=workers, address=address, resume=resume,
                           on_start=progress.start, on_result=progress.advance, on_check=progress.check)
    except KeyboardInterrupt:
        progress.close()
        where = f" --output-dir {output_dir}" if output_dir is not None else ""
        err_console.print("interrupted: finished configurations are saved in results.jsonl; "
                          f"rerun with --resume{where} to continue", highlight=False)
        raise SystemExit(130) from None
    finally:
        progress.close()
    rows = outcome.rows
    n_ok = sum(r["status"] == "ok" for r in rows)
    n_bad = sum(r["status"] == "infeasible" for r in rows)
    n_err = sum(r["status"] == "error" for r in rows)
    if not quiet:
        _table(rows, loaded)
        console.print(f"plan {loaded.name}: {len(rows)} configuration{'' if len(rows) == 1 else 's'} "
                      f"({n_ok} searched, {n_bad} infeasible"
                      + (f", {n_err} failed" if n_err else "") + f"); {outcome.searched} computed, "
                      f"{outcome.reused} reused, {time.perf_counter() - t0:,.1f} s with {workers} "
                      f"{'Ray CPU' if executor == 'ray' and not address else 'worker'}{'' if workers == 1 else 's'}")
    groups = reason_groups(rows, outcome.records)
    if groups and (not quiet or not n_ok):
        _print_infeasible(groups)
    best, second = outcome.recommendation, outcome.runner_up
    if best is None:
        _print_slo_misses(rows, outcome.records, loaded)
        console.print(f"recommended: none — {_why_none(groups, n_ok, n_err, loaded, rows)}", soft_wrap=True,
                      markup=False, highlight=False)
    else:
        console.print(f"recommended: {headline(best, loaded)}", soft_wrap=True)
        if best.get("trim_cut_short"):
            console.print(f"             fewer replicas may carry it too: trimming stopped after "
                          f"search.max_refine_runs ({loaded.plan.search.max_refine_runs}) runs; raise it to go on",
                          soft_wrap=True, highlight=False)
        if best.get("rivals_unchecked"):
            n = best["rivals_unchecked"]
            console.print(f"             {n} other deployment{'s' if n > 1 else ''} within the budget went unchecked "
                          f"above its rate: search.max_refine_runs ({loaded.plan.search.max_refine_runs}) ran out; "
                          "raise it to check them", soft_wrap=True, highlight=False)
        if not quiet and best.get("weights_gib_per_gpu") is not None:
            console.print(f"             {why_it_fits(best)}", soft_wrap=True, highlight=False)
        if second is not None:
            console.print(f"runner-up:   {headline(second, loaded)}", soft_wrap=True)
    for r in rows:
        if r["status"] == "error":
            err_console.print(f"[red]failed[/red] {r['label']}: {r['reason']}", highlight=False)
    console.print(f"output       {outcome.out_dir}/  (plan.html, plan.csv, plan.json, results.jsonl"
                  + (", recommended/report.html)" if (outcome.out_dir / "recommended").is_dir() else ")"))


def _print_infeasible(groups) -> None:
    """The infeasible configurations' reasons, grouped (full reasons are in plan.csv)."""
    from simulator.plan.infeasible import summary_lines

    for i, line in enumerate(summary_lines(groups)):
        console.print(f"{'infeasible:' if i == 0 else '':<13}{line}", soft_wrap=True, markup=False, highlight=False)


def _print_slo_misses(rows: list[dict], records: dict[str, dict], loaded, shown: int = 4) -> None:
    """Why the searched configurations missed the SLO (the lowest rate tried and the limit
    it broke); without them the terminal says only that none qualified. Then the fix: the
    latencies the best configuration reached there, which an SLO could ask for."""
    missed = [r for r in rows if r["status"] == "ok" and r.get("reason") and not r.get("max_rate_per_replica")]
    _print_reasons("SLO missed:", missed, shown)
    _print_target_misses(rows, loaded, shown)
    reached = _best_reached(missed, records, loaded.plan.slo)
    if reached:
        limits, label = reached
        console.print(f"{'fix:':<13}relax the SLO to what the closest configuration reached at its lowest "
                      f"rate ({', '.join(limits)} on {label}), or add faster GPUs or more TP to the space"
                      + (" (space.tp, or a pool's tp under space.disaggregation)"
                         if loaded.plan.space.disaggregation is not None or loaded.base.scenario.disaggregation
                         is not None else ""),
                      soft_wrap=True, markup=False, highlight=False)


def _print_reasons(heading: str, rows: list[dict], shown: int) -> None:
    """The first `shown` rows' reasons under one heading, and how many more plan.csv holds."""
    width = max(13, len(heading) + 1)
    for i, r in enumerate(rows[:shown]):
        console.print(f"{heading if i == 0 else '':<{width}}{r['label']}: {r['reason']}",
                      soft_wrap=True, markup=False, highlight=False)
    if len(rows) > shown:
        console.print(f"{'':<{width}}… {len(rows) - shown} more (plan.csv, column reason)", highlight=False)


def _print_target_misses(rows: list[dict], loaded, shown: int) -> None:
    """Configurations that meet the SLO at some rate but whose replica counts cannot carry the
    target (or fit the budget): the target, not the SLO, stopped them; the fix says by how much."""
    short = [r for r in rows if r["status"] == "ok" and r.get("reason") and r.get("max_rate_per_replica")]
    _print_reasons("target missed:", short, shown)
    target = loaded.plan.target
    priced = [r for r in short if r.get("usd_per_gpu_hour") is not None]
    if target.mode != "budget" or not priced:
        return
    from simulator.plan.analysis import allowed_replicas
    from simulator.plan.config import gpus_per_replica

    fewest = min(allowed_replicas(loaded.plan) or [1])  # the smallest deployment the space allows
    cheapest = min(priced, key=lambda r: gpus_per_replica(r) * r["usd_per_gpu_hour"])
    gpus = fewest * gpus_per_replica(cheapest)
    usd = gpus * cheapest["usd_per_gpu_hour"]
    asks = []
    if target.max_usd_per_hour is not None and usd > target.max_usd_per_hour:
        asks.append(f"target.max_usd_per_hour to at least {math.ceil(usd * 100 - 1e-9) / 100:,.2f}")
    if target.max_gpus is not None and gpus > target.max_gpus:
        asks.append(f"target.max_gpus to at least {gpus}")
    if asks:
        what = f"one {cheapest['label']}" if fewest == 1 else f"{fewest} × {cheapest['label']}, space.replicas' fewest"
        console.print(f"{'fix:':<13}raise {' and '.join(asks)} ({what}), or add cheaper GPUs to "
                      "the space", soft_wrap=True, markup=False, highlight=False)


def _best_reached(missed: list[dict], records: dict[str, dict], slo) -> tuple[list[str], str] | None:
    """The SLO the closest configuration met at its lowest rate: for the one needing the
    least relaxation (the largest ratio of reached to limit over the p99 limits it broke,
    the statistic the probes keep), each broken limit's reached value, rounded up so that
    asking for it passes, and the configuration; None when no lowest probe kept its statistics."""
    options = []
    for r in missed:
        probes = (records.get(r["key"]) or {}).get("probes") or []
        if not probes:
            continue
        low = min(probes, key=lambda p: p["rate"])
        broken = {}
        for key, label in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2e_ms", "E2E")):
            lim = getattr(slo, key)
            value = low.get(f"{key.removesuffix('_ms')}_p99_ms")
            if lim is not None and lim.p99 is not None and value is not None and value > lim.p99:
                broken[label] = (value, lim.p99)
        if broken:
            options.append((max(v / limit for v, limit in broken.values()), r["label"], broken))
    if not options:
        return None
    _ratio, label, broken = min(options, key=lambda o: o[:2])
    return [f"p99 {name} {math.ceil(v * 10) / 10:,.1f} ms" for name, (v, _limit) in broken.items()], label


def _why_none(groups, n_ok: int, n_err: int, loaded, rows: list[dict]) -> str:
    """Blame what stopped every configuration: infeasibility, failures, or the SLO."""
    from simulator.plan.infeasible import none_feasible

    if n_ok:
        meeting = sum(bool(r.get("max_rate_per_replica")) for r in rows if r["status"] == "ok")
        if meeting:
            what = "rate" if loaded.plan.target.mode == "rate" else "budget"
            some = "" if meeting == n_ok else f" ({meeting} of {n_ok})"
            return (f"the configurations that meet the SLO{some} all fall outside the target's {what} (target "
                    "missed, above)")
        return f"no configuration meets the target under the SLO ({loaded.plan.slo.describe()})"
    if groups:
        return none_feasible(groups)
    return f"every configuration failed ({n_err} errors, below)" if n_err else "no configuration was searched"


def _table(rows: list[dict], loaded) -> None:
    ranked = [r for r in rows if r["rank"] is not None][:8]
    if not ranked:
        return
    budget = loaded.plan.target.mode == "budget"  # ranked by the rate each carries: shown
    table = Table(title=f"{loaded.name}: configurations that meet the target, best first", title_justify="left",
                  caption="repl: replicas, or disaggregated units; "
                          + ("carries: the whole deployment's req/s (the ranking's key); " if budget else "")
                          + "max req/s: per replica (unit) under the SLO; p99 ms: bounds at the "
                          + ("carried" if budget else "target") + " load per replica",
                  caption_justify="left")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("configuration", overflow="fold", ratio=1)
    for col in ("repl", "GPUs", "$/h", *(("carries",) if budget else ()), "max req/s", "TTFT p99", "TPOT p99"):
        table.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    for r in ranked:
        carried = (f"{r['carried_rps']:.3g}",) if budget else ()
        table.add_row(str(r["rank"]), r["label"], str(r["replicas"]), str(r["gpus"]), f"{r['usd_per_hour']:,.2f}",
                      *carried, f"{r['max_rate_per_replica']:.3g}", _f(r["ttft_p99_ms"], "{:,.0f}"),
                      _f(r["tpot_p99_ms"], "{:,.1f}"))
    console.print(table)


def _f(v, fmt: str) -> str:
    return "—" if v is None else fmt.format(v)
