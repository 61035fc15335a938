"""The `simulate` command line: a thin layer over `simulator.api`.

`simulate SCENARIO.yaml` is shorthand for `simulate run SCENARIO.yaml`. User errors are
printed as one message (where, what, fix) with exit status 2, never a traceback.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from calibration.cli import calibrate_app
from simulator.errors import ServesimError
from simulator.formatting import natural_key, percent, significant
from simulator.layout_text import pool_layout
from simulator.plan.cli import plan_cmd
from simulator.terminal import PlainProgress, make_console, widen_piped_help

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="servesim: simulate LLM inference serving. `simulate SCENARIO.yaml` runs a scenario.")
list_app = typer.Typer(help="List catalog entries.", no_args_is_help=True)
app.add_typer(list_app, name="list")
app.add_typer(calibrate_app, name="calibrate")
app.command("plan")(plan_cmd)


def _print_version(value: bool) -> None:
    if value:
        from simulator import __version__

        console.print(f"servesim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                                help="print servesim's version and exit")] = False) -> None:
    """servesim: simulate LLM inference serving. `simulate SCENARIO.yaml` runs a scenario."""


console = make_console()
err_console = make_console(stderr=True)
widen_piped_help()

PROGRESS_AFTER_S = 1.5


class LazyProgress:
    """A progress bar that appears only once a run has taken longer than PROGRESS_AFTER_S."""

    def __init__(self, label: str, enabled: bool = True, unit: str = "requests"):
        self.label = label
        self.enabled = enabled
        self.unit = unit
        self.start = time.perf_counter()
        self.bar: Progress | None = None
        self.task = None
        self.plain: PlainProgress | None = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if not err_console.is_terminal:  # a log: a line now and then, not a bar nobody sees
            if self.plain is None:
                self.plain = PlainProgress(err_console, self.label, self.unit)
            self.plain(done, total)
            return
        if self.bar is None:
            if time.perf_counter() - self.start < PROGRESS_AFTER_S:
                return
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                TextColumn("{task.completed}/{task.total} " + self.unit),
                                TimeElapsedColumn(), console=err_console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total)
        self.bar.update(self.task, completed=done, total=max(total, done))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _fmt(v, unit: str = "") -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{significant(v)}{unit}"
    return f"{v}{unit}"


def trace_notes(trace: dict | None) -> tuple[str, ...]:
    """What of a replayed trace the run left out: its rows past a limit, and its failed rows
    (summary.json's `trace` keeps the counts)."""
    if not trace:
        return ()
    notes = []
    if trace["replayed"] < trace["rows"]:
        cut = "; ".join(trace["cut_by"]) or "the scenario's limits"
        hint = (" (drop it with --set '~workload.num_requests' to replay the whole file)"
                if any(c.startswith("workload.num_requests") for c in trace["cut_by"]) else "")
        notes.append(f"replayed {trace['replayed']:,} of the trace's {trace['rows']:,} requests, cut by {cut}{hint}")
    if trace["skipped_failed_rows"]:
        notes.append(f"left out {trace['skipped_failed_rows']:,} failed request(s) of the trace (0 prompt or "
                     "output tokens)")
    notes += [f"did not use the trace's {unused}" for unused in trace.get("unused_columns", ())]
    return tuple(notes)


def rejection_lines(req: dict, shown: int = 3) -> list[str]:
    """Why requests were turned away, a line per cause (an example of each)."""
    groups = req.get("rejected_reasons") or []
    lines = [f"  rejected {g['count']:,}× e.g. {g['reason']}" for g in groups[:shown]]
    if len(groups) > shown:
        lines.append(f"  rejected {sum(g['count'] for g in groups[shown:]):,}× for {len(groups) - shown} "
                     "other reason(s): see reject_reason in requests.csv")
    if groups and not req["completed"]:
        lines.append("  no request completed: the latency table above is empty")
    return lines


def print_summary(summary: dict, out_dir: Path | None) -> None:
    cfg = summary.get("config", {})
    req = summary["requests"]
    thr = summary["throughput"]
    dis = summary.get("disaggregation")
    if dis:  # the report's notation: replicas × TP·PP(·DP·EP) per pool
        layout = " + ".join(f"{role} {dis[role]['replicas']}× {pool_layout(dis[role], cfg.get('gpu'))}"
                            for role in ("prefill", "decode"))
        title = f"{summary['scenario']}: {cfg.get('model')} on {cfg.get('gpu')}, {layout}, {cfg.get('scheduler')}"
    else:
        dp, ep = cfg.get("dp", 1), cfg.get("ep", 1)
        extra = (f", DP{dp}" if dp > 1 else "") + (f", EP{ep}" if ep > 1 else "")
        title = (f"{summary['scenario']}: {cfg.get('model')} on {cfg.get('gpu')}, {cfg.get('replicas')}× "
                 f"TP{cfg.get('tp')}·PP{cfg.get('pp')}{extra}, {cfg.get('scheduler')}")
    console.print(title, highlight=False)  # its own line: a table title would wrap at the table's width
    table = Table()
    table.add_column("metric")
    for col in ("mean", "p50", "p90", "p95", "p99"):
        table.add_column(col, justify="right")
    for key, label in (("ttft_ms", "TTFT ms"), ("tpot_ms", "TPOT ms"), ("itl_ms", "ITL ms"), ("e2e_ms", "E2E ms")):
        s = summary[key]
        table.add_row(label, *(_fmt(s[c]) for c in ("mean", "p50", "p90", "p95", "p99")))
    console.print(table)
    kv = summary["kv_cache"]
    good = summary["goodput"]
    lines = [
        f"requests   {req['completed']} completed, {req['rejected']} rejected, over {summary['duration_s']:.1f} s",
        f"throughput {_fmt(thr['requests_per_s'])} req/s, {_fmt(thr['input_tokens_per_s'])} input tok/s, "
        f"{_fmt(thr['output_tokens_per_s'])} output tok/s",
        f"KV cache   {kv['capacity_tokens']:,} tokens per "
        f"{'decode ' if dis else ''}"
        f"{'DP rank' if summary['config'].get('dp', 1) > 1 else 'instance' if dis else 'replica'}"
        + (f" ({summary['config']['virtual_engines']} virtual engines, a share each), peak "
           f"{percent(kv['peak_utilization'], 0)} of a share used" if summary["config"].get("virtual_engines", 1) > 1
           else f", peak {percent(kv['peak_utilization'], 0)} used")
        + (f", {percent(kv['prefix_cache_hit_rate'], 0)} of prompt tokens from the prefix cache"
           if kv.get("prefix_cache_hit_rate") else "")
        + (f", each running sequence also holding {kv['state_blocks_per_sequence']} blocks of "
           f"{'windows and compressor state' if summary['config'].get('compressed_attention') else 'recurrent state'}"
           if kv.get("state_blocks_per_sequence") else "")
        + (f", each running sequence also holding up to {kv['window_blocks_per_sequence']} blocks of its "
           "sliding-window layers" if kv.get("window_blocks_per_sequence") else "")
        + (", no prefix caching (vLLM's default for hybrid models)"
           if kv.get("state_blocks_per_sequence") and summary["config"].get("prefix_caching") is False else ""),
    ]
    lines[1:1] = rejection_lines(req)
    if summary.get("preemptions"):  # a full KV cache: worth a line, with how it gave up blocks
        n, swaps = summary["preemptions"], summary.get("swaps", 0)
        how = ", ".join(p for p in (f"{swaps} swapped to host memory" if swaps else "",
                                    f"{n - swaps} recomputed" if n - swaps else "") if p)
        lines.append(f"preempted  {n:,} time{'' if n == 1 else 's'} ({how})")
    if dis:
        lines.append(f"KV moves   {_fmt(dis['kv_transfer']['ms']['mean'])} ms mean, "
                     f"{_fmt(dis['kv_transfer']['ms']['p99'])} ms p99 over "
                     f"{', '.join(dis['kv_transfer']['links'])}"
                     + ("; decode pulls (distserve)"
                        if dis["kv_transfer"].get("protocol") == "distserve" else ""))
    from simulator.metrics import slo_set  # here, not at the top: pandas would slow `--help` 2x

    if slo_set(summary):
        lines.append(f"SLO        {percent(good['slo_attainment'])} attainment, goodput {_fmt(good['requests_per_s'])} req/s")
    cost = summary.get("cost", {})
    if cost.get("usd_per_million_output_tokens") is not None:
        gpus = cost["gpus"]
        lines.append(f"cost       {gpus} GPU{'' if gpus == 1 else 's'}, ${cost['usd_per_hour']:.2f}/h, "
                     f"${cost['usd_per_million_output_tokens']:.2f} per M output tokens")
    if summary.get("config", {}).get("kernel_times"):
        lines.append(f"kernels    {summary['config']['kernel_times']}")
    if summary.get("config", {}).get("api_server"):
        lines.append(f"API server {summary['config']['api_server']} (cost_model.frontend_*)")
    lines.append(f"simulated  {summary['iterations']:,} iterations in {summary['sim_wall_s']:.2f} s wall")
    if out_dir is not None:
        written = [f for f in ("report.html", "summary.json", "requests.csv", "iterations.csv")
                   if (out_dir / f).is_file()]
        lines.append(f"output     {out_dir}/  ({', '.join(written)})")
    console.print("\n".join(lines))


def print_warnings(warnings: tuple[str, ...]) -> None:
    for warning in warnings:
        err_console.print(f"warning: {warning}", highlight=False)


@app.command("run")
def run_cmd(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML file")],
    set_: Annotated[list[str] | None, typer.Option("--set", metavar="PATH=VALUE", help="override a field: dotted.path=value, or ~dotted.path to remove one (repeatable)")] = None,
    output_dir: Annotated[Path | None, typer.Option("--output-dir", "-o", help="where to write results; default reports/<scenario>-<timestamp>/")] = None,
    no_report: Annotated[bool, typer.Option("--no-report", help="skip report.html and PNG figures")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no table, no progress bar")] = False,
) -> None:
    """Simulate one scenario and write summary.json, requests.csv, iterations.csv and report.html."""
    from simulator import api
    from simulator.output import check_output_dir

    loaded = api.load(scenario, set_ or [])
    print_warnings(loaded.warnings)
    if output_dir is not None:  # a bad folder is reported before the run, not after it
        check_output_dir(output_dir)
    elif loaded.scenario.output.dir:
        check_output_dir(Path(loaded.scenario.output.dir), option=f"output.dir in {loaded.path or 'the scenario'}")
    progress = LazyProgress(f"simulating {loaded.name}", enabled=not quiet)
    try:
        result = api.run(loaded, progress=progress)
    finally:
        progress.close()
    out = api.write_outputs(result, output_dir, report=False if no_report else None)
    print_warnings(trace_notes(result.summary.get("trace")))
    if not quiet:
        try:
            print_summary(result.summary, out)
        except KeyboardInterrupt:  # the files are complete: say so, not "no output was written"
            err_console.print(f"interrupted while printing; the run's files are complete in {out}/")
            raise SystemExit(INTERRUPTED) from None


@app.command("compare")
def compare_cmd(
    scenario: Annotated[Path, typer.Argument(help="base scenario YAML file")],
    variant: Annotated[list[str] | None, typer.Option(
        "--variant", metavar="'NAME: PATH=VALUE; ...'", help="a variant: 'NAME: dotted.path=value; other.path=value' (the base with these "
                                "edits), or another scenario file (repeatable)")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", metavar="PATH=VALUE", help="override a field of the base and of every variant: dotted.path=value, or ~dotted.path to remove one (repeatable)")] = None,
    output_dir: Annotated[Path | None, typer.Option("--output-dir", "-o", help="default reports/compare-<scenario>-<timestamp>/")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no table, no progress bar; the files only")] = False,
) -> None:
    """Run a scenario and its variants with the same requests; print each metric side by side, with its change."""
    from simulator.compare import build_variants, run_comparison, write_comparison
    from simulator.output import check_output_dir, default_output_dir

    variants = build_variants(scenario, set_ or [], variant or [])
    for v in variants:
        print_warnings(v.loaded.warnings)
    final = output_dir or default_output_dir(f"compare-{variants[0].loaded.name}")
    check_output_dir(final)  # a bad folder is reported before the runs, not after them
    progress = LazyProgress("comparing", enabled=not quiet, unit="variants")
    try:
        comparison = run_comparison(variants, progress=progress)
    finally:
        progress.close()
    out = write_comparison(comparison, final, unique=output_dir is None)
    if quiet:
        return
    console.print(_comparison_table(comparison))
    for v in variants[1:]:
        console.print(f"{v.name}: {v.changes(variants[0])}", highlight=False)
        if (unlike := v.unlike(variants[0])) is not None:
            console.print(f"[yellow]warning[/yellow] {unlike}", highlight=False)
    console.print(f"output     {out}/  (compare.html, compare.json, compare.csv, compare.png)")


def _comparison_table(comparison) -> Table:
    """Metrics down, variants across; each variant's change against the base, green where
    it is better and red where it is worse."""
    from simulator.compare import marked_change, shown, unit_label

    names = [v.name for v in comparison.variants]
    table = Table(title=f"{comparison.variants[0].loaded.name}: base and {len(names) - 1} variant(s)",
                  title_justify="left")
    table.add_column("metric")
    for n in names:
        table.add_column(n, justify="right")
    for r in comparison.rows():
        cells = []
        for v, change in zip(r["values"], r["change_pct"], strict=True):
            text = shown(v, r["unit"])
            judged, said = marked_change(change, r["values"][0], v, r["lower_is_better"], r["unit"])
            if cells and judged:
                colour = {"better": "green", "worse": "red"}.get(judged, "default")
                text += f" [{colour}]({said})[/]"
            cells.append(text)
        table.add_row(r["metric"] + unit_label(r["unit"]), *cells)
    return table


@app.command("validate")
def validate_cmd(
    measured: Annotated[list[Path], typer.Argument(metavar="MEASURED", help="measured results: per-request CSV(s), a sweep CSV, a vLLM bench JSON, InferenceX results (agg_bmk.json or its API's rows), or a folder (its .csv/.json/.jsonl files, in any case; vLLM's *.pytorch.json side files are skipped)")],
    scenario: Annotated[Path, typer.Option("--scenario", "-s", help="base scenario: model, GPU, scheduler, SLOs")],
    set_: Annotated[list[str] | None, typer.Option("--set", metavar="PATH=VALUE", help="override a field of the base scenario: dotted.path=value, or ~dotted.path to remove one (repeatable)")] = None,
    output_dir: Annotated[Path | None, typer.Option("--output-dir", "-o", help="default reports/validate-<scenario>-<timestamp>/")] = None,
    rounds: Annotated[int, typer.Option(min=1, help="closed-loop sweeps: requests per client in each simulated run")] = 10,
    length_ratio: Annotated[str, typer.Option(
        help="closed-loop sweeps: lengths are uniform from ratio x isl/osl up to isl/osl; 1 = fixed; auto = "
             "0.8 (the InferenceMAX/InferenceX harness) on its isl/osl grid, fixed elsewhere")] = "auto",
    recipes: Annotated[bool, typer.Option(
        "--recipes/--no-recipes",
        help="closed-loop sweeps: rows on a known harness's isl/osl grid (InferenceX: 1024/1024, 1024/8192, "
             "8192/1024; aiconfigurator's gap analysis: isl 1000-8000 x osl 100-2000) also get the server "
             "flags and release that harness launched their model, GPU and precision with (KV dtype, batch "
             "budget, memory fraction; docs/fidelity.md); each run's line says which")] = True,
    engine_version: Annotated[str | None, typer.Option(
        "--engine-version",
        help="the vLLM release the measurements were taken with, where the files do not say (a sweep "
             "CSV may carry it per row: engine_version, vllm_version or backend_version, read as written; rows of "
             "different releases are separate configurations). A run of an "
             "older release is simulated with that release's defaults (before 0.14: no async "
             "scheduling), its kernels, and the launch recipe its harness's script had then")] = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", "-j", min=1,
        help="runs simulated in parallel processes; default one per CPU, as many as free memory holds")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no tables, no progress bar; the files only")] = False,
) -> None:
    """Simulate measured benchmarks under SCENARIO and report the prediction error."""
    from simulator.validation import run_validation
    from simulator.validation.consistency import consistency_hint
    from simulator.validation.occupancy import occupancy_hint
    from simulator.validation.scoring import BREAKDOWNS, mismatch_hint
    from simulator.workers import default_workers

    progress = LazyProgress("validating", enabled=not quiet, unit="runs")
    try:
        result, out = run_validation(measured, scenario, set_ or [], output_dir, rounds=rounds,
                                     length_ratio=length_ratio, recipes=recipes,
                                     engine_version=engine_version, progress=progress,
                                     workers=workers or default_workers())
    finally:
        progress.close()
    if quiet:  # the tables go, but a run that was not simulated is still said (stderr)
        _print_skipped(result)
        return
    skipped = len(result.get("skipped", []))
    counted = f"{result['runs'] - skipped} run(s)" + (f", {skipped} skipped," if skipped else "")
    console.print(f"validation: {counted} against {scenario}", highlight=False)
    table = Table()
    for col in ("metric", "rows", "n", "MAPE %", "mean signed %", "max |err| %"):
        table.add_column(col, justify="right" if col not in ("metric", "rows") else "left")
    for m, blocks in result["metrics"].items():
        for scope, b in blocks.items():
            if scope == "below_cliff" and "cliffs" not in result:
                continue  # cliffs are defined on sweeps only; the row would repeat "all"
            table.add_row(m, scope, str(b["n"]), _fmt(b["mape"]), _fmt(b["mean_signed_pct"]), _fmt(b["max_abs_pct"]))
    console.print(table)
    if "cliffs" in result:
        c = result["cliffs"]
        console.print(f"KV cliffs: {c['measured']} measured, {c['predicted']} predicted, {c['both']} both, "
                      f"{c['missed']} missed, {c['false_alarms']} false alarms")
    for column in BREAKDOWNS:
        if result.get(f"by_{column}"):
            console.print(_breakdown_table(result[f"by_{column}"], column, BREAKDOWNS[column]))
    if result.get("slo") and result["slo"]["runs"]:
        worst = result["slo"]["max_abs_diff_points"]
        console.print(f"SLO attainment: worst difference {worst:.1f} points over {len(result['slo']['runs'])} run(s)")
    for used in result.get("launch_flags", []):
        console.print(f"launch flags for {used['runs']} run(s): {used['flags']}", highlight=False)
    for line in _grouped_notes(result.get("notes", [])):
        console.print(line, highlight=False)
    _print_skipped(result)
    for m, d in result.get("per_request", {}).items():
        console.print(f"per request {m}: median |err| {d['median_abs_pct']:.1f}%, p90 {d['p90_abs_pct']:.1f}%")
    if result.get("kernel_times"):
        # One line per source: a source's own text may hold "; " (its sustained rate, a kernel note).
        for i, source in enumerate(result["kernel_times"]):
            console.print(f"{'kernels' if i == 0 else '':<11}{source}", highlight=False)
    for i, server in enumerate(result.get("api_server", [])):
        console.print(f"{'API server' if i == 0 else '':<11}{server} (cost_model.frontend_*)", highlight=False)
    for run, model in result.get("model_from_file", {}).items():
        console.print(f"{run}: simulated as {model}, the model its file names "
                      "(--set model.name=... to choose another)", highlight=False)
    for hint in (mismatch_hint(result), occupancy_hint(result.get("kv_occupancy")),
                 consistency_hint(result.get("consistency"))):
        if hint:
            console.print(hint, highlight=False)
    console.print(f"output     {out}/  (validation.html, validation.json, validation.csv, figures *.png)")


def _print_skipped(result: dict) -> None:
    for skipped in result.get("skipped", []):
        err_console.print(f"skipped {skipped['run']}: {skipped['error'].splitlines()[0]}", highlight=False)


def _grouped_notes(notes: list[dict]) -> list[str]:
    """One terminal line per distinct note: a sweep's release rule or a recipe's consequence
    repeats on every row it touches, so the runs that share a note are counted and the first
    is named (validation.json keeps the note of every run)."""
    runs_by_note: dict[str, list[str]] = {}
    for noted in notes:
        runs_by_note.setdefault(noted["note"], []).append(noted["run"])
    return [f"{runs[0]}: {note}" if len(runs) == 1 else f"{len(runs)} runs (first: {runs[0]}): {note}"
            for note, runs in runs_by_note.items()]


def _breakdown_table(parts: list[dict], column: str, heading: str) -> Table:
    """Sweep errors per value of one column (the CLI's view of validation.json's by_<column>)."""
    table = Table(title=f"by {heading}: MAPE and bias (mean signed error) in %, TTFT below the measured KV "
                        "cliffs; cliffs measured/predicted", title_justify="left")
    table.add_column(heading, overflow="fold")
    for col in ("n", "TTFT", "bias", "TPOT", "bias", "cliffs"):
        table.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    for f in parts:
        ttft, tpot = f["ttft_ms_below_cliff"], f["tpot_ms"]
        # The org prefix of a Hugging Face id (`meta-llama/`) only costs width here.
        name = " ".join(w.rsplit("/", 1)[-1] for w in f[column].split(" ")) if column == "family" else f[column]
        table.add_row(name, str(f["runs"]), _fmt(ttft["mape"]), _fmt(ttft["mean_signed_pct"]),
                      _fmt(tpot["mape"]), _fmt(tpot["mean_signed_pct"]),
                      f"{f['cliffs_measured']}/{f['cliffs_predicted']}")
    return table


@app.command("explain")
def explain_cmd(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML file")],
    set_: Annotated[list[str] | None, typer.Option("--set", metavar="PATH=VALUE", help="override a field: dotted.path=value, or ~dotted.path to remove one (repeatable)")] = None,
    batch: Annotated[int | None, typer.Option(help="decode step: sequences in the batch (default: 32, or fewer to fit the KV cache)")] = None,
    context: Annotated[int | None, typer.Option(help="decode step: tokens of context per sequence (default: 2048, or less to fit max_model_len)")] = None,
    prefill: Annotated[int | None, typer.Option(help="prefill: prompt tokens of one lone prefill (default: 2048, or less to fit max_model_len)")] = None,
) -> None:
    """Where one iteration's time goes, op by op: a decode step and a lone prefill."""
    from simulator import api
    from simulator.explain import explain

    loaded = api.load(scenario, set_ or [])
    print_warnings(loaded.warnings)
    try:
        e = explain(loaded, batch=batch, context=context, prefill=prefill)
    except ServesimError as exc:
        if str(exc.where or "").startswith("--"):  # one of explain's own options
            raise
        raise api.naming_the_file(exc, loaded) from None
    d_total, p_total = sum(e.decode.values()), sum(e.prefill.values())
    table = Table(title=f"{scenario}: {e.layout}", title_justify="left", caption_justify="left",
                  caption=f"{e.decode_label}; {e.prefill_label}. Sums over all pipeline stages."
                  + "".join(f"\n{n}." for n in e.notes))
    for col in ("op", "decode ms", "%", "prefill ms", "%", "time from"):
        table.add_column(col, justify="left" if col in ("op", "time from") else "right",
                         overflow="fold" if col == "time from" else "ellipsis")
    for name, dt, pt in e.rows():
        table.add_row(name, "" if dt is None else f"{dt * 1e3:.3f}", "" if dt is None else f"{100 * dt / d_total:.1f}",
                      "" if pt is None else f"{pt * 1e3:.3f}", "" if pt is None else f"{100 * pt / p_total:.1f}",
                      e.sources.get(name, ""))
    table.add_row("total", f"{d_total * 1e3:.3f}", "100.0", f"{p_total * 1e3:.3f}", "100.0", "", style="bold")
    console.print(table)


def _numeric(cell: str) -> bool:
    return cell.replace(".", "", 1).replace("/", "", 1).isdigit()


def names_table(rows: list[tuple[str, ...]], *columns: str, fold: tuple[str, ...] = (),
                caption: str | None = None) -> Table:
    """A catalog listing that stays whole in 80 columns or a pipe: names and numbers are
    never cut or wrapped (the first column is what a scenario types); only the `fold`
    columns (descriptions) wrap."""
    table = Table(box=None, pad_edge=False, padding=(0, 1, 0, 0), header_style="bold underline", caption=caption,
                  caption_justify="left")
    for i, col in enumerate(columns):
        whole = col not in fold
        # A folded column still keeps its longest word whole.
        widest = max(len(col), *(len(r[i]) if whole else max(map(len, r[i].split()), default=0) for r in rows))
        table.add_column(col, no_wrap=whole, min_width=widest,
                         overflow="fold", justify="right" if all(map(_numeric, (r[i] for r in rows))) else "left")
    for r in rows:
        table.add_row(*r)
    return table


@list_app.command("gpus")
def list_gpus() -> None:
    """GPUs in the catalog, and the kernel tables `cost_model.backend: auto` times each with."""
    from simulator.cost.calibrated import NoShippedProfileError, shipped_profile_for
    from simulator.hardware import GPU_CATALOG

    def peak(g, dtype: str) -> str:
        return f"{g.peak_tflops[dtype]:.5g}" if g.peak_tflops.get(dtype) else "—"  # no such tensor cores

    rows = []
    for g in sorted(GPU_CATALOG.values(), key=lambda g: natural_key(g.name)):
        try:
            tables = shipped_profile_for(g)
        except NoShippedProfileError:
            tables = "— (roofline)"
        rows.append((g.name, f"{g.memory_gb:g}", f"{g.hbm_tbps:g}", peak(g, "bf16"), peak(g, "fp8"),
                     f"{g.cost_per_gpu_hour:.2f}", tables, g.display_name))
    console.print(names_table(rows, "name", "GB", "TB/s", "bf16", "fp8", "$/h", "kernel tables", "GPU",
                              fold=("GPU",),
                              caption="GB: memory; TB/s: HBM bandwidth; bf16, fp8: dense TFLOP/s; "
                                      "$/h: per GPU (hardware.cost_per_gpu_hour overrides)"))


@list_app.command("models")
def list_models() -> None:
    """Models in the catalog."""
    from simulator.models import MODEL_CATALOG

    rows = []
    for m in sorted(MODEL_CATALOG.values(), key=lambda m: natural_key(m.name)):
        ffn = f"{m.num_experts}×{m.moe_ffn_size} top-{m.experts_per_token}" if m.is_moe else str(m.ffn_size)
        if m.is_moe and m.num_shared_experts:
            ffn += f" +{m.num_shared_experts} shared"
        rows.append((m.name, f"{m.param_count / 1e9:.1f}", str(m.num_layers), str(m.hidden_size),
                     f"{m.num_heads}/{m.num_kv_heads}", _attention_kind(m),
                     str(m.max_position_embeddings), ffn))
    console.print(names_table(rows, "name", "params B", "layers", "hidden", "heads", "attention", "max len",
                              "ffn", fold=("attention", "ffn"),
                              caption="heads: query/KV heads; attention: window N on k/L: k of the L layers "
                                      "attend to the last N tokens (linear, Mamba2 on k/L: k of them are those "
                                      "mixers); ffn: width, or experts × width"))


def _attention_kind(m) -> str:
    """What sizes a model's KV cache and attention: MLA's latent, a sliding window, linear
    attention layers, sparse selection; else multi-query (MQA), grouped-query (GQA) or
    multi-head (MHA)."""
    if m.compressed:  # DeepSeek-V4
        c = m.compressed
        return f"MQA, window {c.window}, CSA {c.csa_layers}/HCA {c.hca_layers} of {m.num_layers}"
    if m.is_mla:
        kind = f"MLA (latent {m.kv_lora_rank})"
    else:
        kind = "MHA" if m.num_kv_heads == m.num_heads else "MQA" if m.num_kv_heads == 1 else "GQA"
    if m.is_sparse:
        kind += ", sparse"
    if m.sliding_layers:
        kind += f", window {m.sliding_window} on {m.sliding_layers}/{m.num_layers}"
    if m.mixer_free_layers:
        kind += f" on {m.attention_layers}/{m.num_layers}"
    if m.linear_layers:
        mixer = "Mamba2" if m.linear_kind == "mamba2" else "linear"
        kind += f", {mixer} on {m.linear_layers}/{m.num_layers}"
    return kind


@list_app.command("policies")
def list_policies() -> None:
    """Batching policies and routers."""
    from simulator.router import ROUTERS
    from simulator.scheduler import POLICIES

    for name, pol in POLICIES.items():
        knobs = ", ".join(k for k in pol.config.model_fields if k != "policy")
        console.print(f"[bold]{name}[/bold]: {knobs}")
    console.print(f"routers: {', '.join(ROUTERS)}")


def _argv_with_default_command(argv: list[str]) -> list[str]:
    """`simulate X.yaml ...` means `simulate run X.yaml ...`."""
    commands = {"run", "list", "--help", "-h", "--version"} | {c.name for c in app.registered_commands if c.name} \
        | {g.name for g in app.registered_groups if g.name}
    # Any other leading option is run's (`simulate -q X.yaml`): the top level has no others.
    if argv and argv[0] not in commands:
        _refuse_mistyped_command(argv[0], commands)
        return ["run", *argv]
    return argv


def _refuse_mistyped_command(word: str, commands: set[str]) -> None:
    """`simulate rnu x.yaml` is a mistyped command, not a scenario named `rnu`: said as such
    rather than as run's usage error about an extra argument."""
    import difflib

    if word.startswith("-") or Path(word).suffix or "/" in word or Path(word).exists():
        return
    close = difflib.get_close_matches(word, sorted(c for c in commands if not c.startswith("-")), n=1, cutoff=0.6)
    if close:
        raise ServesimError(f"unknown command {word!r}; did you mean {close[0]!r}?",
                            fix=f"simulate {close[0]} ...; `simulate --help` lists the commands")


# The shell's status for a run stopped by SIGINT.
INTERRUPTED = 130


def main(argv: list[str] | None = None) -> None:
    try:
        args = _argv_with_default_command(list(sys.argv[1:] if argv is None else argv))
        # Out of standalone mode, typer returns an Exit's code instead of exiting: a Ctrl-C
        # comes back as 130, which must not end the process with status 0.
        code = app(args=args, prog_name="simulate", standalone_mode=False)
    except ServesimError as exc:
        err_console.print(Text("error: ", style="bold red") + Text(exc.render()), highlight=False)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        code = INTERRUPTED
    except MemoryError:
        # Outputs are staged, so nothing half-written is left behind.
        err_console.print(Text("error: ", style="bold red") + Text(
            "this run needs more memory than the machine has (a workload of very many requests or "
            "clients, or a measured file that asks for them)\n  fix: lower workload.num_requests, the "
            "duration or the clients; nothing was written"), highlight=False)
        raise SystemExit(2) from None
    except SystemExit:
        raise
    except Exception as exc:
        # Usage errors from click (typer may vendor its own copy, so match by behaviour).
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):
            exc.show()
            raise SystemExit(exc.exit_code) from None
        if type(exc).__name__ != "Abort":
            raise
        # Older typer/click turn a Ctrl-C into Abort.
        code = INTERRUPTED if isinstance(exc.__context__, KeyboardInterrupt) else 1
    if code == INTERRUPTED:
        err_console.print("interrupted; no output was written for the unfinished run")
    if isinstance(code, int) and not isinstance(code, bool) and code != 0:
        raise SystemExit(code)


if __name__ == "__main__":
    main()
