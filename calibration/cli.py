"""`simulate calibrate`: measure this machine's kernels, inspect profiles, import NVIDIA's.

    simulate calibrate --model llama-3.1-8b --tp 1,2,4,8 --out profiles/mine.json
    simulate calibrate show h100_sxm-vllm
    simulate calibrate compare mine.json --against h100_sxm-vllm
    simulate calibrate import-aiconfigurator --system h100_sxm --backend vllm --out x.json

torch is imported only inside the measuring command, so `simulate` itself (and
`show`, `import-aiconfigurator`) work on machines without it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from calibration.profile import (
    CalibrationError,
    Profile,
    check_writable,
    load_profile,
    profile_json,
    save_profile,
    staged_file,
)
from simulator.terminal import PlainProgress, make_console

# The smallest prefill chunk measured (calibration.grid.PREFILL_Q[0]); a smaller --token-budget
# would leave prefill attention without a single row. Not imported: grid pulls in the cost model.
MIN_TOKEN_BUDGET = 16

calibrate_app = typer.Typer(
    help="Measure kernels on this machine into a calibration profile (`--model ... --out ...`), "
    "or inspect (`show`), compare (`compare`) and import (`import-aiconfigurator`) profiles.",
    invoke_without_command=True,
)
console = make_console()
err_console = make_console(stderr=True)


def _models(names: list[str] | None, scenario: Path | None) -> tuple[list, list[int] | None]:
    """The models to measure (each once) and the scenario's TP degrees, if a scenario is given."""
    from simulator.errors import CatalogError
    from simulator.models import get_model

    out, tps = [], None
    for item in names or []:
        for name in (n.strip() for n in item.split(",")):
            if not name:
                continue
            try:
                out.append(get_model(name))
            except CatalogError as exc:  # its `where` is the scenario field; here it is the option
                raise CatalogError(exc.message, where="--model", fix="use a name from `simulate list models`, "
                                   "or --scenario FILE for a model described by its config.json") from None
    if scenario is not None:
        from simulator.config import load_scenario
        from simulator.simulation import resolve_model

        loaded = load_scenario(scenario)
        sc = loaded.scenario
        out.append(resolve_model(sc, loaded.base_dir))
        # A disaggregated scenario runs its pools' TP degrees; `parallelism` is then unused.
        pools = sc.disaggregation
        tps = sorted({pools.prefill.tp, pools.decode.tp}) if pools else [sc.parallelism.tp]
    if not out:
        raise CalibrationError("no model to derive shapes from", where="simulate calibrate",
                               fix="pass --model NAME (repeatable, or comma-separated) or --scenario FILE")
    return list({m.name: m for m in out}.values()), tps


def _parse_tp(tp: str) -> list[int]:
    try:
        vals = sorted({int(v) for v in tp.split(",") if v.strip()})
    except ValueError:
        vals = []
    if not vals or min(vals) < 1:
        raise CalibrationError(f"bad --tp {tp!r}", where="--tp", fix="give positive integers, e.g. --tp 1,2,4,8")
    return vals


def with_fit(profile: Profile) -> Profile:
    """The profile with cross-validated per-family fit errors in its metadata."""
    from simulator.cost.calibrated import cross_validate

    fits = cross_validate(profile)
    return profile.model_copy(update={"metadata": profile.metadata.model_copy(update={"fit": fits})})


@calibrate_app.callback()
def calibrate(
    ctx: typer.Context,
    model: Annotated[list[str] | None, typer.Option("--model", "-m", metavar="MODEL", help="catalog model(s) whose shapes to measure; repeat or comma-separate")] = None,
    scenario: Annotated[Path | None, typer.Option("--scenario", help="take the model and TP degree(s) from a scenario file (disaggregated: both pools')")] = None,
    tp: Annotated[str | None, typer.Option("--tp", help="tensor-parallel degrees whose per-GPU shapes to measure, e.g. 1,2,4,8 (default: the scenario's, else 1)")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="profile file to write (the PNG goes next to it)")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="tiny grid: a smoke test that finishes in seconds, even on CPU")] = False,
    budget_s: Annotated[float, typer.Option("--budget-s", min=0, help="stop measuring after this many seconds")] = 600.0,
    device: Annotated[str, typer.Option("--device", help="auto (cuda when available, else cpu) | cuda | cpu")] = "auto",
    token_budget: Annotated[int, typer.Option("--token-budget", min=MIN_TOKEN_BUDGET, help="largest GEMM M / prefill chunk to measure")] = 8192,
    repeats: Annotated[int | None, typer.Option("--repeats", min=10, help="timed samples per point (>= 10)")] = None,
    cpu_threads: Annotated[int | None, typer.Option("--cpu-threads", min=1, help="torch threads for a CPU run")] = None,
    lock_clocks: Annotated[int | None, typer.Option("--lock-clocks", help="pin the SM clock to this MHz during the run (needs root; reset after)")] = None,
    graph_below_us: Annotated[float, typer.Option("--graph-below-us", min=0, help="time CUDA kernels faster than this back to back in a CUDA graph over L2-overflowing operand copies; 0: every point one call after an L2 flush")] = 300.0,
    sustained_s: Annotated[float, typer.Option("--sustained-s", min=0, help="GPU runs: seconds of back-to-back GEMMs per dtype and shape (4 runs), and of a prefill layer without and with all-reduce waits (2 runs), to measure the rates kept under the power limit; 0: skip (set aside from --budget-s)")] = 6.0,
) -> None:
    """Measure kernels and write a calibration profile plus a roofline PNG."""
    if ctx.invoked_subcommand is not None:
        return
    if out is None:
        raise CalibrationError("--out is required to run the benchmarks", where="simulate calibrate",
                               fix="e.g. simulate calibrate --model llama-3.1-8b --tp 1,2 --out my-gpu.json "
                               "(or a subcommand: show, compare, import-aiconfigurator)")
    from calibration.bench import pick_device, require_torch

    # Every input is checked before the (long) measurement, the output path included, and
    # those that need no torch before torch is looked for.
    models, scenario_tps = _models(model, scenario)
    tps = _parse_tp(tp) if tp is not None else (scenario_tps or [1])
    out = check_writable(out, option="--out")
    if device not in ("auto", "cuda", "cpu"):
        raise CalibrationError(f"unknown device {device!r}", where="--device", fix="use auto, cuda or cpu")
    torch = require_torch()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from calibration.bench import run_benchmarks
    from calibration.grid import build_plan

    kind = pick_device(torch, device).type
    plan = build_plan(models, tps, quick=quick, device=kind, token_budget=token_budget)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as bar:
        task = bar.add_task("measuring", total=None)  # the run counts its points as it plans them

        plain = PlainProgress(err_console, "measuring", "grid points")

        def progress(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done, total=total, description=f"measuring {label[:60]}")
            if not err_console.is_terminal:  # a log: no bar is drawn there
                plain(done, total, label[:60])

        profile = run_benchmarks(plan, device=kind, budget_s=budget_s, quick=quick, repeats=repeats,
                                 lock_clock_mhz=lock_clocks, cpu_threads=cpu_threads,
                                 graph_below_us=graph_below_us, sustained_s=sustained_s, progress=progress)
    m = profile.metadata.method
    if not profile.tables:  # an empty profile would silently time every op by the roofline
        if m.skipped:
            raise CalibrationError(f"nothing was measured: the {budget_s:g} s budget ran out before the first "
                                   f"of {m.skipped} grid points; no profile written", where="--budget-s",
                                   fix="give the run more time, e.g. --budget-s 60 (with --quick on a CPU)")
        failed = [f"{k}: {v}" for k, v in profile.metadata.not_measured.items()
                  if " " in k and k.split(" ")[0] in ("gemm", "attn_prefill", "attn_decode", "elementwise")]
        why = "; ".join(failed[:2])
        raise CalibrationError(f"nothing was measured, every grid point failed ({why}); no profile written",
                               where="simulate calibrate", fix="try --quick or a smaller --token-budget")
    profile = with_fit(profile)
    png = _write_outputs(profile, out)
    try:
        show_profile(profile, str(out))
        note = f", budget ran out: {m.skipped} points skipped" if m.truncated else ""
        console.print(f"wrote {out} and {png} ({m.elapsed_s:.1f} s of measurement{note})")
        for warning in fit_warnings(profile, budget_s):
            err_console.print(f"warning: {warning}", highlight=False)
    except KeyboardInterrupt:  # the files are complete: say so, not "no output was written"
        err_console.print(f"interrupted while printing; the profile is complete at {out}")
        raise SystemExit(130) from None


#: A held-out error above this (median, %) means the measurements, not the fit, are off.
NOISY_FIT_PCT = 25.0


def fit_warnings(profile: Profile, budget_s: float) -> list[str]:
    """What makes a fresh profile untrustworthy: a budget that cut the grid (ops beyond the
    measured shapes are extrapolated) and families whose held-out error says the timings
    were noisy (a busy machine, a CPU sharing its cores), or, on a sparse grid (--quick, a
    cut budget), that the grid is too coarse for the error to say."""
    m = profile.metadata.method
    out = []
    if m.truncated:
        out.append(f"the {budget_s:g} s budget cut the grid ({m.skipped} points not measured): shapes beyond "
                   "those measured are extrapolated; give it more time (--budget-s)")
    sparse = m.quick or m.truncated  # few points a family: leaving one out tests interpolation
    spread = _wide_spread(profile)
    if spread is not None:  # the samples themselves say the machine was busy, whatever the grid
        out.append(f"the timings spread widely (p90 over {SPREAD_FACTOR:g}× p10 in {spread:.0%} of rows): the "
                   "machine was busy; measure on an idle one"
                   + (" (on a CPU, with --cpu-threads 1)" if profile.metadata.device_kind == "cpu"
                      and profile.metadata.compute_units != 1 else ""))
    for family, fit in (profile.metadata.fit or {}).items():
        error = fit.cv_median_ape_pct
        if error is None or error <= NOISY_FIT_PCT:
            continue
        if sparse:
            out.append(f"{family}: held-out error {error:.0f}% (median) on a sparse grid ("
                       f"{'--quick' if m.quick else 'cut by the budget'}): a point left out is interpolated "
                       "across wide gaps, so this measures the grid more than the timings; the full grid "
                       "(no --quick, enough --budget-s) says whether they are noisy")
        else:
            out.append(f"{family}: held-out error {error:.0f}% (median): the timings look noisy; measure on an "
                       "idle machine" + (" (on a CPU, with --cpu-threads 1)" if profile.metadata.device_kind == "cpu"
                                         and profile.metadata.compute_units != 1 else ""))
    return out


#: A row whose p90 exceeds its p10 this many times was timed on a busy machine; past
#: SPREAD_SHARE of such rows the profile says so.
SPREAD_FACTOR = 3.0
SPREAD_SHARE = 0.25


def _wide_spread(profile: Profile) -> float | None:
    """The share of measured rows whose samples spread past SPREAD_FACTOR, when it is over
    SPREAD_SHARE; None otherwise (or where no row keeps its p10 and p90)."""
    wide = kept = 0
    for family in profile.tables:
        table = profile.table(family)
        if table is None or "p10_us" not in table.columns:
            continue
        i, j = table.columns.index("p10_us"), table.columns.index("p90_us")
        for row in table.rows:
            lo, hi = row[i], row[j]
            if lo and hi and lo > 0:
                kept += 1
                wide += hi > SPREAD_FACTOR * lo
    share = wide / kept if kept else 0.0
    return share if share > SPREAD_SHARE else None


def _threads(count: int | None) -> str:
    return "? threads" if count is None else f"{count} thread{'s' if count != 1 else ''}"


def _write_outputs(profile: Profile, out: Path) -> Path:
    """The profile and its PNG, each through a staging file: both appear only once both are
    complete, so a Ctrl-C or a full disk never leaves a partial profile at --out."""
    png = out.with_name(out.stem + "-roofline.png")
    try:
        with contextlib.ExitStack() as stack:
            tmp_json = stack.enter_context(staged_file(out))
            tmp_png = stack.enter_context(staged_file(png))  # committed first, the profile last
            tmp_json.write_text(profile_json(profile))
            _plot(profile, tmp_png)
    except OSError as exc:
        raise CalibrationError(f"cannot write the profile: {exc.strerror or exc}", where=f"--out {out}",
                               fix="free disk space, or give --out a path on another disk") from None
    return png


def _plot(profile: Profile, path: Path) -> Path:
    from calibration.plot import roofline_png
    from simulator.cost.calibrated import CalibratedTimer
    from simulator.hardware import get_gpu

    timer = CalibratedTimer(profile, get_gpu(profile.metadata.gpu or "h100-sxm"))
    return roofline_png(profile, timer, path)


@calibrate_app.command("show")
def show(profile: Annotated[str | None, typer.Argument(help="profile path or shipped name (e.g. h100_sxm-vllm); "
                                                          "none: list the shipped profiles")] = None) -> None:
    """Summarise a profile: achieved vs datasheet, fit errors per family, provenance."""
    if profile is None:
        _list_shipped()
        return
    prof = load_profile(profile, where="simulate calibrate show")
    if not prof.metadata.fit:
        prof = with_fit(prof)
    show_profile(prof, profile)


def _list_shipped() -> None:
    """The shipped profiles, one line each: name, GPU, source and date."""
    from calibration.profile import shipped_profiles

    table = Table(title="shipped calibration profiles (simulate calibrate show NAME)", title_justify="left")
    for col in ("name", "GPU", "source", "date"):
        table.add_column(col)
    for name in shipped_profiles():
        meta = load_profile(name).metadata
        table.add_row(name, meta.gpu_name or "—", meta.source or "—", (meta.date or "—")[:10])
    console.print(table)


def _achieved(profile: Profile, family: str) -> tuple[str, float | None, str]:
    """Best throughput a family reached: (unit, value, dtype) using the simulator's op accounting."""
    from calibration.plot import _points

    pts = _points(profile, family)
    if not pts:
        return "", None, ""
    if family in ("gemm", "attn_prefill", "moe"):
        best = max(pts, key=lambda p: p[1] / p[3])
        return "TFLOP/s", best[1] / best[3] / 1e12, "bf16" if family == "attn_prefill" else best[0]
    if family in ("attn_decode", "elementwise", "linear_attn"):
        best = max(pts, key=lambda p: p[2] / p[3])
        return "TB/s", best[2] / best[3] / 1e12, ""
    # Collectives: bus bandwidth (nccl-tests' convention), comparable with the link's.
    table = profile.table(family)
    factor = {"allreduce": lambda p: 2 * (p - 1) / p, "allgather": lambda p: (p - 1) / p}.get(family, lambda p: 1.0)
    best = max((r[0] / (r[5] * 1e-6) * factor(r[1]) for r in table.rows), default=0.0)
    return "GB/s bus", best / 1e9, ""


def show_profile(profile: Profile, label: str) -> None:
    from simulator.cost.calibrated import reference_gpu
    from simulator.cost.calibrated.timer import rates_from_tables_only
    from simulator.cost.sustained import sustained_rates
    from simulator.hardware import get_gpu

    meta = profile.metadata
    gpu = reference_gpu(profile, get_gpu(meta.gpu or "h100-sxm"))
    known = meta.gpu is not None
    table = Table(title=f"{label}: {meta.gpu_name}", title_justify="left")
    for col in ("family", "rows", "best achieved (of datasheet)" if known else "best achieved", "η c/m", "lat µs",
                "held-out err med/p90", "roofline err"):
        table.add_column(col, justify="left" if col == "family" else "right")
    for fam, fit in meta.fit.items():
        unit, value, dt = _achieved(profile, fam)
        sheet = None
        if known and unit == "TFLOP/s":
            sheet = gpu.peak_tflops.get(dt or "bf16")
        elif known and unit == "TB/s":
            sheet = gpu.hbm_tbps
        elif known and unit == "GB/s bus":
            sheet = gpu.intra_node_link.bandwidth_gbps
        best = "—" if value is None else f"{value:,.3g} {unit} {dt}".strip()
        if sheet and value is not None:
            best += f" ({value / sheet:.0%} of {sheet:,.4g})"
        eta = "/".join("—" if v is None else f"{v:.2f}" for v in (fit.eta_compute, fit.eta_memory))
        cv = ("—" if fit.cv_median_ape_pct is None
              else f"{fit.cv_median_ape_pct:.1f}%/{fit.cv_p90_ape_pct:.0f}%")
        dft = "—" if fit.default_roofline_median_ape_pct is None else f"{fit.default_roofline_median_ape_pct:.0f}%"
        table.add_row(fam, str(fit.points), best, eta,
                      "—" if fit.latency_us is None else f"{fit.latency_us:.1f}", cv, dft)
    console.print(table)
    attn = "; ".join(f"{k}: {v}" for k, v in meta.attention_backend.items()) or "—"
    lines = [
        f"source     {meta.source}   ({meta.device_kind}, catalog GPU: {meta.gpu or 'none'})",
        *([f"           measured on a CPU ({_threads(meta.compute_units)}): a development profile, its "
           "kernel times are this CPU's, not a GPU's"] if meta.device_kind == "cpu" else []),
        f"software   torch {meta.torch or '—'}, CUDA {meta.cuda or '—'}, driver {meta.driver or '—'}; "
        + ", ".join(f"{k} {v}" for k, v in meta.versions.items() if not k.startswith("kernels.") and k != "torch"),
        f"attention  {attn}",
        f"date       {meta.date}" + (f" on {meta.host}" if meta.host else ""),
    ]
    if meta.clocks:
        lines.append("clocks     " + ", ".join(f"{k} {v}" for k, v in meta.clocks.items()))
    m = meta.method
    if m.timer == "cuda-events":
        graphed = (f"kernels < {m.graph_below_us:g} µs back to back in CUDA graphs over operand copies "
                   f"({m.graphed_points} points), longer ones " if m.graph_below_us else "")
        lines.append(f"timing     {graphed}one call after a {m.l2_flush_mb:g} MB L2 flush; "
                     f"{m.warmup} warm-up, {m.repeats} samples, {m.elapsed_s or 0:.0f} s")
    elif m.timer == "perf_counter":
        lines.append(f"timing     perf_counter around one call; {m.warmup} warm-up, {m.repeats} samples, "
                     f"{m.elapsed_s or 0:.0f} s")
    if m.truncated:
        lines.append(f"           the {m.budget_s or 0:g} s budget ran out: {m.skipped} grid points not measured "
                     "(a coarser grid; more --budget-s fills it in)")
    for fam, why in meta.not_measured.items():
        lines.append(f"not measured: {fam}: {why}")
    gemm = profile.table("gemm")
    if gemm is not None:
        rates = sustained_rates(gemm.rows)
        said = ", ".join(f"{d} {r.fraction:.2f} ({r.long_rows} rows)" for d, r in sorted(rates.items()))
        lines.append(f"sustained  GEMM rate in rows >= 10 ms, of the short rows': {said or 'too few long rows'}"
                     " (docs/fidelity.md item 16)")
    measured, where = meta.sustained_fraction, "in this run"
    if not measured and known and meta.device_kind == "cuda":
        measured, where = gpu.sustained_tensor_fraction, f"for {meta.gpu} (GPU catalog)"
    if measured:
        said = ", ".join(f"{d} {f:.2f}" for d, f in sorted(measured.items()))
        lines.append(f"           measured back to back {where}, used instead: {said}")
    elif gemm is not None and known and rates_from_tables_only(profile, gpu):
        from simulator.cost.calibrated.timer import hopper_attention_ratio
        from simulator.cost.sustained import carried_over

        rates, attention = carried_over(sustained_rates(gemm.rows), hopper_attention_ratio())
        if attention is not None and meta.sustained_attention_fraction is None:
            lines.append(f"           carried from H100/H200's measurements (not measured on this GPU): bf16 "
                         f"{rates['bf16'].fraction:.2f}, prefill attention {attention.fraction:.2f} (fidelity item 32)")
    on_gpu = meta.device_kind == "cuda"
    for label, own, catalog in (
            ("prefill attention", meta.sustained_attention_fraction,
             gpu.sustained_attention_fraction if known else None),
            ("collective wait", meta.collective_wait_power_fraction,
             gpu.collective_wait_power_fraction if known else None)):
        value, where = (own, "in this run") if own is not None else (catalog, f"for {meta.gpu} (GPU catalog)")
        if on_gpu and value is not None:
            what = ("of its burst rate, measured inside a prefill layer" if label == "prefill attention"
                    else "of the power limit drawn, fitted to a prefill layer with and without such waits "
                    "(used with cost_model.collective_power_relief)")
            lines.append(f"           {label}: {value:.2f} {what} {where}")
    if meta.fit:
        lines.append(f"errors are on held-out rows ({_folds(meta.fit)}); η are fractions of "
                     f"{'the datasheet' if known else 'the best measured throughput'}")
    console.print("\n".join(lines))


def _folds(fit: dict) -> str:
    """How the families were cross-validated: small ones leave one row out at a time."""
    loo = {f.cv_folds for f in fit.values() if f.cv_folds and f.cv_folds == f.cv_points}
    kfold = sorted({f.cv_folds for f in fit.values() if f.cv_folds and f.cv_folds != f.cv_points})
    parts = [f"{'/'.join(map(str, kfold))}-fold cross-validation"] if kfold else []
    if loo:
        parts.append("leave-one-out" + (" for the smaller families" if kfold else ""))
    return ", ".join(parts) or "no cross-validation"


@calibrate_app.command("compare")
def compare_cmd(
    profile: Annotated[str, typer.Argument(help="profile to check: a path or shipped name")],
    reference: Annotated[str | None, typer.Argument(help="reference profile, as --against")] = None,
    against: Annotated[str | None, typer.Option("--against", help="reference profile (path or shipped name), e.g. h200_sxm-vllm")] = None,
) -> None:
    """Ratio of each family's kernel times to a reference profile's, regime by regime."""
    from calibration.compare import FAMILIES, compare, unmatched

    if (reference is None) == (against is None):
        raise CalibrationError("give one reference profile" + (", not two" if reference else ""),
                               where="simulate calibrate compare",
                               fix=f"simulate calibrate compare {profile} --against h100_sxm-vllm "
                                   "(or as a second argument)")
    against = against or reference
    mine, ref = load_profile(profile, where="simulate calibrate compare"), load_profile(against, where="--against")
    table = Table(title=f"{profile} / {against}: measured ÷ reference time", title_justify="left")
    for col in ("family", "regime", "rows", "median", "p10", "p90"):
        table.add_column(col, justify="left" if col in ("family", "regime") else "right")
    for r in compare(mine, ref):
        table.add_row(r.family, r.regime, str(r.rows), _ratio(r.median), _ratio(r.p10), _ratio(r.p90))
    console.print(table)
    skipped = unmatched(mine, ref)
    if skipped:
        console.print("not compared (the reference has no rows of the dtype): "
                      + ", ".join(f"{fam} {dtype} ({n} rows)" for (fam, dtype), n in sorted(skipped.items())))
    absent = [(fam, len(mine.table(fam).rows)) for fam in FAMILIES
              if mine.table(fam) is not None and ref.table(fam) is None]
    if absent:
        console.print("not compared (the reference has no rows of the family): "
                      + ", ".join(f"{fam} ({n} rows)" for fam, n in absent))
    console.print(f"{profile}: {mine.metadata.gpu_name}, {mine.metadata.source}, {mine.metadata.date}\n"
                  f"{against}: {ref.metadata.gpu_name}, {ref.metadata.source}, {ref.metadata.date}\n"
                  "each row of the first profile is predicted by the second as a simulation reads it "
                  "(interpolated between its rows, its fitted roofline outside them)")
    if (mine.metadata.gpu or mine.metadata.gpu_name) != (ref.metadata.gpu or ref.metadata.gpu_name):
        console.print(f"note: the two profiles time different GPUs ({mine.metadata.gpu_name} and "
                      f"{ref.metadata.gpu_name}): the ratios hold the hardware's difference, not only the "
                      "kernels' or the method's; check a profile against one of its own GPU")


def _ratio(x: float) -> str:
    """Two decimals near 1, three significant digits far from it (a CPU against an H100)."""
    return f"{x:.2f}" if 0.1 <= x < 100 else f"{x:.3g}"


@calibrate_app.command("import-aiconfigurator")
def import_aiconfigurator(
    system: Annotated[str, typer.Option("--system", help="aiconfigurator system, e.g. h100_sxm, h200_sxm, a100_sxm")],
    out: Annotated[Path, typer.Option("--out", "-o", help="profile file to write")],
    backend: Annotated[str, typer.Option("--backend", help="framework whose kernels were measured: vllm, sglang, trtllm")] = "vllm",
    version: Annotated[str | None, typer.Option("--version", help="framework version; default the package's current one")] = None,
    full: Annotated[bool, typer.Option("--full", help="keep every table row (large file) instead of the dense-model subset")] = False,
) -> None:
    """Convert NVIDIA aiconfigurator-core's per-op tables into a profile."""
    from calibration.aiconfigurator import convert

    out = check_writable(out, option="--out")  # before the conversion, not after it
    profile = with_fit(convert(system, backend, version, full=full))
    path = save_profile(profile, out)
    show_profile(profile, str(path))
    console.print(f"wrote {path}")
