"""`simulate validate`: replay measured benchmarks and report prediction errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from simulator.config import ModelConfig, load_scenario, override_behind
from simulator.errors import ServesimError
from simulator.output import check_output_dir, default_output_dir, staged, write_json
from simulator.validation.measured import parse_length_ratio, read_measured
from simulator.validation.measurement import MeasuredSet
from simulator.validation.precision import follow_model_id, model_id_overrides
from simulator.validation.report import write_validation_report
from simulator.validation.runner import RunPrediction, sets_field, validate
from simulator.validation.scoring import prediction_table, runs_frame, score
from simulator.validation.versions import check_version, version_overrides


def run_validation(paths: list[Path], scenario: Path, overrides: list[str], out_dir: Path | None,
                   *, rounds: int = 10, length_ratio: float | str | None = None, recipes: bool = True,
                   engine_version: str | None = None,
                   progress: Callable[[int, int], None] | None = None, workers: int = 1) -> tuple[dict, Path]:
    """Validate measurements against the base scenario; write the output folder atomically.

    engine_version: the vLLM release of runs whose file does not name one (versions.py)."""
    engine_version = check_version(engine_version, "--engine-version")
    base = load_scenario(scenario, overrides)  # fail early on a bad base scenario
    if out_dir is not None:  # and on an output folder that cannot be written, or holds an input
        check_output_dir(Path(out_dir))
        _check_inputs_outside(paths, Path(out_dir))
    length_ratio = parse_length_ratio(length_ratio)
    measured, followed = prepare_measured(paths, base, overrides, rounds=rounds, length_ratio=length_ratio,
                                          recipes=recipes, engine_version=engine_version)
    preds = validate(measured, scenario, overrides, progress=progress, workers=workers)
    _require_one_simulated(preds, overrides, followed)
    result = score(measured, preds, base.scenario.slo.model_dump())
    result["scenario"] = str(scenario)
    result["overrides"] = list(overrides)
    result["inputs"] = [str(p) for p in paths]
    if followed:
        result["model_from_file"] = followed
    if measured.kind == "sweep":
        result["length_ratio"] = "auto" if length_ratio is None else length_ratio
    final = out_dir or default_output_dir(f"validate-{base.name}")
    with staged(final, unique=out_dir is None) as (tmp, final):
        write_json(tmp / "validation.json", result)
        prediction_table(measured, preds).to_csv(tmp / "validation.csv", index=False)
        write_validation_report(tmp, result, runs_frame(preds), preds, f"servesim validation: {base.name}")
    return result, final


def prepare_measured(paths: list[Path], base, overrides: list[str], *, rounds: int = 10,
                     length_ratio: float | None = None, recipes: bool = True,
                     engine_version: str | None = None) -> tuple[MeasuredSet, dict[str, str]]:
    """The measured runs with every setting validate gives them before simulating (the
    model a file names, a server sized to the clients, the release's defaults), and the
    models followed from the files. `base` is the loaded base scenario."""
    measured = read_measured(paths, rounds=rounds, length_ratio=length_ratio, recipes=recipes,
                             engine_version=engine_version)
    named = sets_field(overrides, "model", "model.name", "model.config_json")
    followed = {} if named else _follow_model_ids(measured, base.scenario.model, base.scenario.hardware.gpu)
    _servers_sized_to_clients(measured, base.scenario)
    release_defaults(measured, base.scenario.scheduler.policy, overrides, engine_version,
                     engine=base.scenario.cost_model.engine)
    note_replaced_settings(measured, overrides)
    return measured, followed


def note_replaced_settings(measured: MeasuredSet, overrides: list[str]) -> None:
    """Say where the user's --set replaces a setting the measurement gave its run (a sweep
    row's GPU, model, TP or lengths; a launch recipe's flag): the --set wins, as it does
    over the base scenario, but the run's label and launch flags still describe the row,
    so the note and the flags line name what was simulated instead."""
    keys = {o.split("=", 1)[0].strip(): o.strip() for o in overrides if "=" in o}
    if not keys:
        return
    for run in measured.runs:
        hits = [(a.strip(), set_) for a in run.overrides for k, set_ in keys.items()
                if _same_field(a.split("=", 1)[0].strip(), k)]
        if not hits:
            continue
        replaced = list(dict.fromkeys(a for a, _ in hits))
        by = sorted({set_ for _, set_ in hits})
        note = f"--set {', --set '.join(by)} replaces the run's own {', '.join(replaced)}"
        run.note = f"{run.note}; {note}" if run.note else note
        flags = [a for a in replaced if run.launch_flags and a in run.launch_flags]
        if flags:
            run.launch_flags = f"{run.launch_flags}; replaced by --set: {', '.join(flags)}"


def _same_field(a: str, b: str) -> bool:
    """Whether two assignment paths write the same setting, or one holds the other."""
    return a == b or a.startswith(f"{b}.") or b.startswith(f"{a}.")


def _check_inputs_outside(paths: list[Path], out_dir: Path) -> None:
    """Refuse an output folder that holds an input: writing it replaces the folder, and
    the measurements (a previous validation.csv validated again) would be lost."""
    folder = out_dir.resolve()
    for path in paths:
        if path.exists() and (path.resolve() == folder or folder in path.resolve().parents):
            raise ServesimError("the output folder holds an input file; writing it would replace that input",
                                where=str(path), fix="pass another --output-dir, or move the input out first")


def _require_one_simulated(preds: list[RunPrediction], overrides: list[str] = (), followed: dict | None = None) -> None:
    """With no run simulated there is nothing to score: say why instead of writing an
    empty report. The first reason stands for all when they are the same, and names the
    `--set` that wrote its field (`model.name: unknown model ...`)."""
    if not preds:  # the readers refuse a file without runs; this keeps scoring off an empty frame
        raise ServesimError("no measured run to simulate", fix="pass a file with at least one measured run")
    if any(p.error is None for p in preds):
        return
    reasons = {p.error for p in preds}
    first = preds[0].error
    named = override_behind(first.partition(": ")[0], overrides)
    if named is not None:
        head, _, rest = first.partition("\n")
        first = f"{head} [from {named}]" + (f"\n{rest}" if rest else "")
    run = preds[0].run
    if not first.startswith(run.label):  # say which run, and of which file
        first = f"{run.label} ({run.source}): {first}"
    if run.label in (followed or {}):  # not the scenario's model: say where this one came from
        first += (f"\n  (the run simulates {followed[run.label]}, the model its file's model_id names; "
                  "--set model.name=... chooses another)")
    more = "" if len(reasons) == 1 else f" (and {len(reasons) - 1} other reason(s); see each run with fewer inputs)"
    raise ServesimError(f"no run could be simulated ({len(preds)} of {len(preds)} failed){more}; the first:\n{first}")


def _servers_sized_to_clients(measured: MeasuredSet, base) -> None:
    """Sweep rows run a server whose max_num_seqs is the row's concurrency, unless the base
    scenario sets one: the sweeps' source records the server's batch size as the
    concurrency (aiconfigurator's `batch_size`; InferenceMAX launches vLLM with
    `--max-num-seqs $CONC`). With that many clients it changes no schedule, only the
    memory vLLM's profiling pass reserves for the sampler, and so the KV cache.

    vLLM refuses a max_num_seqs above the token budget, so a server that ran had one no
    larger: under vllm-v1 the pin is at most the budget the row names (a launch recipe's)
    or, failing that, the GPU's default budget, the least the server can have had."""
    scheduler = base.scheduler
    if measured.kind != "sweep" or not hasattr(scheduler, "max_num_seqs") or scheduler.max_num_seqs is not None:
        return
    for run in measured.runs:
        if run.concurrency and not run.error:
            bound = _least_budget(run.overrides, base) if scheduler.policy == "vllm-v1" else None
            seqs = run.concurrency if bound is None else min(run.concurrency, bound)
            run.overrides = [*run.overrides, f"scheduler.max_num_seqs={seqs}"]


def _least_budget(run_overrides: list[str], base) -> int | None:
    """The smallest token budget a vllm-v1 run can have: the one its overrides or the base
    name, else the GPU's default (turning chunked prefill off only raises it)."""
    from simulator.cost.releases import parse_version
    from simulator.errors import CatalogError
    from simulator.hardware import get_gpu
    from simulator.scheduler.vllm_v1 import vllm_default_limits

    named = [a.partition("=")[2] for a in run_overrides if a.startswith("scheduler.max_num_batched_tokens=")]
    if named:
        try:
            return int(named[-1])
        except ValueError:
            return None
    if base.scheduler.max_num_batched_tokens is not None:
        return base.scheduler.max_num_batched_tokens
    gpus = [a.partition("=")[2] for a in run_overrides if a.startswith("hardware.gpu=")]
    try:
        gpu = get_gpu(gpus[-1] if gpus else base.hardware.gpu)
    except CatalogError:  # the run is skipped with the catalog's reason when it is simulated
        return None
    releases = [a.partition("=")[2].strip("'\"") for a in run_overrides if a.startswith("cost_model.engine_version=")]
    release = parse_version(releases[-1]) if releases else parse_version(base.cost_model.engine_version)
    return vllm_default_limits(gpu.name, gpu.usable_memory_gib, release)[0] if gpu is not None else None


def release_defaults(measured: MeasuredSet, policy: str, overrides: list[str], default: str | None,
                     engine: str = "vllm-v1") -> None:
    """Runs measured with an older vLLM run with its defaults where they differ from the
    base scenario's (versions.py); the user's --set still wins."""
    user_set_async = sets_field(overrides, "scheduler", "scheduler.async_scheduling")
    user_set_release = sets_field(overrides, "cost_model", "cost_model.engine_version")
    user_set_reserve = sets_field(overrides, "scheduler", "scheduler.reserve_full_prompt")
    for run in measured.runs:
        run.engine_version = run.engine_version or default or run.recipe_version
        # A launch recipe that passed --async-scheduling set it, whatever the release's default.
        recipe_async = sets_field(run.overrides, "scheduler.async_scheduling")
        extra, note = version_overrides(run.engine_version, policy, user_set_async or recipe_async,
                                        user_set_release, engine=engine, user_set_reserve=user_set_reserve)
        run.overrides = [*run.overrides, *extra]
        if note:
            run.note = f"{run.note}; {note}" if run.note else note


def _follow_model_ids(measured: MeasuredSet, base_model: ModelConfig, gpu: str) -> dict[str, str]:
    """Runs whose file names another catalog model simulate that model, and a quantised
    checkpoint of the scenario's own model (`...-FP8` under a bf16 scenario) its precision.

    Only when the user has not named one with --set: the file's model_id is then the best
    evidence of what was measured, and the base scenario's model is a template default.
    A model_id outside the catalog keeps the scenario's model, and the run says so, as it
    does a precision taken from the checkpoint's name (precision.follow_model_id).
    """
    followed = {}
    for run in measured.runs:
        follow = follow_model_id(run.model_id, base_model, gpu)
        run.overrides = [*follow.overrides, *run.overrides]
        if follow.model:
            followed[run.label] = follow.model
        if follow.note:
            run.note = f"{run.note}; {follow.note}" if run.note else follow.note
    return followed


__all__ = ["MeasuredSet", "RunPrediction", "model_id_overrides", "read_measured", "run_validation", "score", "validate"]
