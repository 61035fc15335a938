"""The calibration profile: one versioned JSON file of measured kernel times.

A profile holds, per op family of `simulator/cost/ops.py`, a table of rows
(shape columns, dtype, median_us, p10_us, p90_us, samples) plus the metadata that says
where the numbers came from. Tables are stored column-named but row-major
(``{"columns": [...], "rows": [[...], ...]}``) so that a 40k-row profile stays a small,
diffable, round-trippable file. The format is documented in calibration/README.md.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from functools import cache, lru_cache
from pathlib import Path
from typing import Literal, NamedTuple, get_args

from pydantic import Field, ValidationError, model_validator

from simulator.errors import CatalogError, ServesimError
from simulator.models.spec import MoeRouting
from simulator.strict import StrictModel

SCHEMA_VERSION = 1
PROFILES_DIR = Path(__file__).resolve().parent / "profiles"

# Shape columns per op family, in row order; every table ends with STAT_COLUMNS.
FAMILY_COLUMNS: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k", "dtype"),
    # `batch` sequences, each with `q_len` new tokens over `prior_ctx` cached tokens (causal).
    "attn_prefill": ("batch", "q_len", "prior_ctx", "heads", "kv_heads", "head_dim", "dtype"),
    # `batch` sequences with one query token each over `ctx_len` KV tokens (the new one included).
    "attn_decode": ("batch", "ctx_len", "heads", "kv_heads", "head_dim", "dtype"),
    # One fused MoE MLP: `tokens` routed to `topk` of `experts` experts of width `inter` per
    # GPU (the model's intermediate size / TP; the whole width under expert parallelism),
    # the experts split over `ep` GPUs (1: every GPU holds a slice of each), tokens routed
    # as `routing` says (models.spec.MoeRouting); `dtype` is ops.moe_table_dtype's label.
    "moe": ("tokens", "hidden", "inter", "topk", "experts", "ep", "routing", "dtype"),
    # `bytes` = bytes read + written by the kernel.
    "elementwise": ("kind", "bytes", "dtype"),
    # Gated DeltaNet's recurrence per layer: `kind` prefill (the chunked delta rule over
    # `seqs` sequences of `tokens` new tokens each) or decode (one recurrent step and the
    # conv-state update for each of `seqs` sequences; `tokens` 1); heads are per GPU.
    "linear_attn": ("kind", "seqs", "tokens", "k_heads", "v_heads", "k_dim", "v_dim"),
    # `bytes` = the message as ops.py counts it (all-gather: the gathered output).
    "allreduce": ("bytes", "ranks", "link", "impl", "dtype"),
    "allgather": ("bytes", "ranks", "link", "impl", "dtype"),
    "p2p": ("bytes", "ranks", "link", "impl", "dtype"),
}
STAT_COLUMNS = ("median_us", "p10_us", "p90_us", "samples")
MOE_COLUMNS_BEFORE_EP = ("tokens", "hidden", "inter", "topk", "experts", "dtype")
MOE_COLUMNS_BEFORE_ROUTING = ("tokens", "hidden", "inter", "topk", "experts", "ep", "dtype")
# What the rows of a profile written before the routing column were measured under.
ROUTING_BEFORE_THE_COLUMN = "power_law_1.01"
_TEXT_COLUMNS = frozenset({"dtype", "kind", "link", "impl", "routing"})
_ZERO_OK = frozenset({"prior_ctx"})


class CalibrationError(ServesimError):
    """A calibration profile, benchmark run or import cannot proceed (bad input, missing extra)."""


class FamilyTable(StrictModel):
    """Rows of one op family; `columns` must equal the family's schema columns."""

    columns: tuple[str, ...]
    rows: list[list[int | float | str | None]]

    def as_records(self) -> list[dict]:
        return [dict(zip(self.columns, r, strict=True)) for r in self.rows]


class FamilyFit(StrictModel):
    """How well the fitted model reproduces one family, scored on held-out rows only."""

    points: int = Field(ge=0, description="rows in the table")
    eta_compute: float | None = Field(None, description="fitted fraction of the datasheet tensor peak")
    eta_memory: float | None = Field(None, description="fitted fraction of datasheet HBM bandwidth")
    latency_us: float | None = Field(None, description="fitted fixed cost per call, µs")
    cv_folds: int = Field(0, ge=0, description="k of the k-fold cross-validation")
    cv_points: int = Field(0, ge=0, description="held-out rows scored")
    cv_median_ape_pct: float | None = Field(None, description="calibrated predictor, median |error| %, held out")
    cv_p90_ape_pct: float | None = Field(None, description="calibrated predictor, p90 |error| %, held out")
    roofline_fit_cv_median_ape_pct: float | None = Field(
        None, description="fitted roofline alone, median |error| %, held out")
    default_roofline_median_ape_pct: float | None = Field(
        None, description="roofline with default efficiencies, median |error| % on the same rows")


class MethodInfo(StrictModel):
    """How the numbers were taken (measured profiles) or converted (imported ones)."""

    timer: str = Field("", description="cuda-events | perf_counter | imported")
    warmup: int = Field(0, ge=0)
    repeats: int = Field(0, ge=0)
    l2_flush_mb: float = Field(0.0, ge=0, description="buffer written between samples; 0 = no flush")
    budget_s: float | None = None
    elapsed_s: float | None = None
    truncated: bool = Field(False, description="the time budget ran out before the grid finished")
    skipped: int = Field(0, ge=0, description="grid points not measured because of the budget")
    quick: bool = False
    graph_below_us: float = Field(0.0, ge=0, description="kernels faster than this were timed back to back in a "
                                  "CUDA graph over operand copies that overflow L2; 0 = every point one call at a time")
    rotate_l2_multiple: float | None = Field(None, ge=0, description="those copies' bytes, in multiples of the L2 size")
    graphed_points: int = Field(0, ge=0, description="grid points timed in CUDA graphs")


class ProfileMetadata(StrictModel):
    """Provenance: which device, which software, which source, and how good the fit is."""

    gpu_name: str = Field(description="device name as reported (torch / nvidia-smi / source table)")
    gpu: str | None = Field(None, description="catalog GPU name (simulator/hardware/catalog.py); null for CPUs")
    device_kind: Literal["cuda", "cpu"] = "cuda"
    memory_gib: float | None = None
    compute_units: int | None = Field(None, description="SMs (GPU) or CPU cores")
    driver: str | None = None
    cuda: str | None = None
    torch: str | None = None
    attention_backend: dict[str, str] = Field(default_factory=dict, description="prefill/decode kernels used")
    elementwise_impl: dict[str, str] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    date: str
    host: str | None = None
    source: str = Field(description='"measured" or "aiconfigurator:<system>/<backend>/<version>"')
    clocks: dict[str, str] = Field(default_factory=dict)
    method: MethodInfo = Field(default_factory=MethodInfo)
    models: list[str] = Field(default_factory=list)
    tp: list[int] = Field(default_factory=list)
    not_measured: dict[str, str] = Field(default_factory=dict, description="family -> why")
    sustained_fraction: dict[str, float] = Field(
        default_factory=dict, description="dtype -> fraction of its short-burst rate a compute-bound GEMM keeps "
        "when run back to back for seconds on this GPU (calibration/sustained.py); overrides the GPU catalog's")
    sustained_attention_fraction: float | None = Field(
        None, gt=0, le=1, description="fraction of its short-burst rate prefill attention keeps inside a prefill "
        "layer run back to back on this GPU (calibration/power.py); overrides the GPU catalog's")
    collective_wait_power_fraction: float | None = Field(
        None, ge=0, lt=1, description="share of the power limit a collective's wait draws on this GPU, fitted to "
        "how much a prefill layer speeds up with such waits (calibration/power.py); overrides the GPU catalog's")
    fit: dict[str, FamilyFit] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class Profile(StrictModel):
    """A calibration profile (schema_version 1)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    metadata: ProfileMetadata
    tables: dict[str, FamilyTable] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_tables(self) -> Profile:
        for family, table in self.tables.items():
            expected = FAMILY_COLUMNS.get(family)
            if expected is None:
                raise ValueError(f"unknown op family {family!r}; known: {', '.join(FAMILY_COLUMNS)}")
            cols = (*expected, *STAT_COLUMNS)
            if table.columns != cols:
                raise ValueError(f"tables.{family}.columns must be {list(cols)}, got {list(table.columns)}")
            _check_rows(family, table)
        return self

    def table(self, family: str) -> FamilyTable | None:
        t = self.tables.get(family)
        return t if t is not None and t.rows else None


def _check_rows(family: str, table: FamilyTable) -> None:
    """Type and range checks a JSON schema cannot express compactly; names the bad row.
    Column by column, since every run that reads the tables checks their 10^5 rows."""
    names = table.columns
    width = len(names)
    for i, row in enumerate(table.rows):
        if len(row) != width:
            raise ValueError(f"tables.{family}.rows[{i}] has {len(row)} values, expected {width}")
    if not table.rows:
        return
    n_shape = len(FAMILY_COLUMNS[family])
    for j, (name, column) in enumerate(zip(names, zip(*table.rows, strict=True), strict=True)):
        rule = _column_rule(family, name, j < n_shape)
        if not rule.column_passes(column):
            i = next(i for i, v in enumerate(column) if not rule.cell_passes(v))
            raise ValueError(f"tables.{family}.rows[{i}]: bad {name} {column[i]!r}"
                             + (f" (known: {', '.join(rule.known)})" if rule.known else ""))


class _ColumnRule(NamedTuple):
    """What one column's cells must be: of `types`, or None where `none_ok`; text among
    `known` (when given); numbers above `low` (at or above where not `strict`)."""

    types: tuple[type, ...]
    none_ok: bool = False
    low: float | None = None
    strict: bool = False
    known: tuple[str, ...] = ()

    def cell_passes(self, v) -> bool:
        if v is None:
            return self.none_ok
        if not isinstance(v, self.types) or (self.known and v not in self.known):
            return False
        return self.low is None or (v > self.low if self.strict else v >= self.low)

    def column_passes(self, column: tuple) -> bool:
        """Every cell passes, checked at C speed where the cells are plain: exact types
        (a bool in a number column, say, goes cell by cell) and the column's minimum."""
        types = set(map(type, column))
        if not types <= {*self.types, *((type(None),) if self.none_ok else ())}:
            return all(map(self.cell_passes, column))
        values = [v for v in column if v is not None] if type(None) in types else column
        if not values:
            return True
        if self.known:
            return set(values) <= set(self.known)
        if self.low is None:
            return True
        try:
            if sum(values) != sum(values):  # a NaN hides from min()
                return False
        except OverflowError:  # an integer past float range beside floats
            return all(map(self.cell_passes, column))
        low = min(values)
        return low > self.low if self.strict else low >= self.low


@cache
def _column_rule(family: str, name: str, shape: bool) -> _ColumnRule:
    if name == "dtype":
        return _ColumnRule((str,), known=tuple(sorted(_dtype_labels(family))))
    if name == "routing":
        return _ColumnRule((str,), known=get_args(MoeRouting))
    if name in _TEXT_COLUMNS:
        return _ColumnRule((str,))
    if shape or name == "median_us":
        return _ColumnRule((int, float), low=0, strict=name not in _ZERO_OK)
    if name == "samples":
        return _ColumnRule((int,), none_ok=True, low=0, strict=True)
    return _ColumnRule((int, float), none_ok=True, low=0)


@cache
def _dtype_labels(family: str) -> frozenset[str]:
    """The dtype labels a family's rows may carry: the compute dtypes (a fused MoE's also
    its kernel formats, ops.moe_table_dtype); a row with any other label is never read."""
    from simulator.cost.ops import MOE_TABLE_COMPUTE
    from simulator.hardware.spec import TENSOR_DTYPES

    return frozenset(MOE_TABLE_COMPUTE) | frozenset(TENSOR_DTYPES) if family == "moe" else frozenset(TENSOR_DTYPES)


def make_table(family: str, rows: list[list]) -> FamilyTable:
    return FamilyTable(columns=(*FAMILY_COLUMNS[family], *STAT_COLUMNS), rows=rows)


# -- locating, reading, writing ------------------------------------------------------
def shipped_profiles() -> list[str]:
    """Names of the profiles that ship in calibration/profiles/."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.json"))


def resolve_profile(ref: str | os.PathLike, *, where: str = "hardware.profile") -> Path:
    """A profile path from `hardware.profile`: an existing file, else a shipped name.

    Relative paths are relative to the working directory (a scenario file's own relative
    path is first looked for beside the file, simulator/config.py); a bare name such as
    ``h100_sxm-vllm`` means ``calibration/profiles/h100_sxm-vllm.json``. `where` names
    the field or argument the reference came from, for the error.
    """
    p = Path(ref).expanduser()
    if p.is_file():
        return p
    name = str(ref)
    shipped = PROFILES_DIR / f"{name.removesuffix('.json')}.json"
    if os.sep not in name and "/" not in name and shipped.is_file():
        return shipped
    names = shipped_profiles()
    if p.is_dir():
        found = min(p.glob("*.json"), default=None)
        raise CalibrationError(f"calibration profile {name!r} is a folder, not a profile file", where=where,
                               fix="pass one profile JSON" + (f", e.g. {found}" if found else ""))
    raise CalibrationError(
        f"calibration profile {name!r} not found (neither a file from the working directory {Path.cwd()} "
        "nor a shipped profile; a path written in a scenario file is also looked for beside that file)",
        where=where,
        fix=f"give a profile path, or one of the shipped names: {', '.join(names) or '(none)'}; "
        "make one with `simulate calibrate --model NAME --out PATH`",
    )


def load_profile(ref: str | os.PathLike, *, where: str = "hardware.profile") -> Profile:
    """Read and validate a profile by path or shipped name; cached by file identity."""
    path = resolve_profile(ref, where=where).resolve()
    st = path.stat()
    return _load_cached(str(path), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=16)
def _load_cached(path: str, mtime_ns: int, size: int) -> Profile:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CalibrationError(f"cannot read the profile: {exc.strerror or exc}", where=path,
                               fix="check the file's permissions, or give another profile") from None
    return parse_profile(data, where=path)


class ProfileOrigin(NamedTuple):
    """Where a profile was measured: its catalog GPU (None off the catalog), the device's
    own name and kind (cuda or cpu)."""

    gpu: str | None
    gpu_name: str
    device_kind: str


def profile_gpu(ref: str | os.PathLike) -> str | None:
    """The catalog GPU a profile was measured on, from its metadata alone: choosing a
    shipped profile need not validate every table row of every file (~8x faster)."""
    return profile_origin(ref).gpu


def profile_origin(ref: str | os.PathLike) -> ProfileOrigin:
    """`ProfileOrigin` from the metadata alone (see `profile_gpu`)."""
    path = resolve_profile(ref).resolve()
    st = path.stat()
    return _origin_cached(str(path), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=64)
def _origin_cached(path: str, mtime_ns: int, size: int) -> ProfileOrigin:
    try:
        meta = json.loads(Path(path).read_bytes())["metadata"]
        gpu, name, kind = meta.get("gpu"), meta["gpu_name"], meta["device_kind"]
        if isinstance(name, str) and isinstance(kind, str) and (gpu is None or isinstance(gpu, str)):
            return ProfileOrigin(gpu, name, kind)
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    meta = load_profile(path).metadata  # not a profile: the full parse says why
    return ProfileOrigin(meta.gpu, meta.gpu_name, meta.device_kind)


def _add_moe_column(moe: dict, name: str, before: str, value) -> None:
    """Give an older profile's MoE table a column its rows were all measured at `value`."""
    at = moe["columns"].index(before)
    moe["columns"] = [*moe["columns"][:at], name, *moe["columns"][at:]]
    moe["rows"] = [[*r[:at], value, *r[at:]] if isinstance(r, list) else r for r in moe.get("rows", [])]


def _upgrade_moe_table(moe: dict) -> bool:
    """Older MoE tables in today's columns: those written before the `ep` column timed
    tensor-parallel experts only (ep = 1), and those before the `routing` column the
    power-law 1.01 routing. True when the table changed."""
    columns = tuple(moe.get("columns", ()))
    if columns == (*MOE_COLUMNS_BEFORE_EP, *STAT_COLUMNS):
        _add_moe_column(moe, "ep", "dtype", 1)
        columns = tuple(moe["columns"])
    if columns == (*MOE_COLUMNS_BEFORE_ROUTING, *STAT_COLUMNS):
        _add_moe_column(moe, "routing", "dtype", ROUTING_BEFORE_THE_COLUMN)
        return True
    return False


_PROFILE_FIX = ("give the .json file that `simulate calibrate --out` or `simulate calibrate "
                "import-aiconfigurator --out` wrote, or a shipped name (`simulate calibrate show h100_sxm-vllm`)")


def _not_json(data: bytes | str, exc: Exception, where: str) -> CalibrationError:
    """Why a file is not JSON: a cut-off profile reads differently from another kind of file
    (the roofline PNG written next to a profile, a scenario YAML), and the fixes differ."""
    head = (data.encode() if isinstance(data, str) else data).lstrip()[:8]
    if head.startswith(b"\x89PNG"):
        what = "a PNG image, not a calibration profile (the -roofline.png is the profile's plot)"
    elif head[:1] in (b"{", b"["):
        return CalibrationError(f"not valid JSON ({exc}); the profile is truncated or corrupt", where=where,
                                fix="re-run `simulate calibrate` or `simulate calibrate import-aiconfigurator`")
    elif not head:
        what = "an empty file, not a calibration profile"
    else:
        what = "not JSON, so not a calibration profile (a scenario YAML or another kind of file?)"
    return CalibrationError(what, where=where, fix=_PROFILE_FIX)


def parse_profile(data: bytes | str, *, where: str = "<profile>") -> Profile:
    """Validate profile JSON; each failure says what is wrong and how to get a good file."""
    try:
        raw = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _not_json(data, exc, where) from None
    if not isinstance(raw, dict) or "schema_version" not in raw:
        raise CalibrationError("not a calibration profile (JSON without schema_version)", where=where,
                               fix=_PROFILE_FIX)
    version = raw["schema_version"]
    if isinstance(version, str) and version.strip() == str(SCHEMA_VERSION):
        raise CalibrationError(f"schema_version must be the number {SCHEMA_VERSION}, not the string {version!r}",
                               where=where, fix=f'write "schema_version": {SCHEMA_VERSION} (no quotes)')
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise CalibrationError(
            f"profile schema_version {version!r} is not supported (this servesim reads "
            f"version {SCHEMA_VERSION})", where=where,
            fix="re-create the profile with this servesim's `simulate calibrate` / `import-aiconfigurator`")
    try:
        moe = raw.get("tables", {}).get("moe") if isinstance(raw.get("tables"), dict) else None
        if isinstance(moe, dict) and isinstance(moe.get("columns"), list) and _upgrade_moe_table(moe):
            data = json.dumps(raw)
        profile = Profile.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = _profile_location(first["loc"])
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] in ("int_type", "float_type", "string_type", "none_required", "finite_number") and \
                "rows" in first["loc"]:  # a cell of no type a row may hold (pydantic names each union member)
            msg = f"{first.get('input')!r} is not a finite number, text or null"
        raise CalibrationError(f"invalid profile: {loc + ': ' if loc else ''}{msg} ({exc.error_count()} problem(s))",
                               where=where, fix="re-create the profile; see calibration/README.md for the format") from None
    if not any(t.rows for t in profile.tables.values()):
        # Nothing to time with: a run would fall back to other tables while its summary
        # named this profile's GPU and date.
        raise CalibrationError("the profile holds no measured rows (its `tables` are missing or empty)",
                               where=where, fix="re-create the profile; see calibration/README.md for the format")
    gpu = profile.metadata.gpu
    if gpu is not None:
        from simulator.hardware import get_gpu

        try:
            get_gpu(gpu)
        except CatalogError as exc:
            raise CatalogError(f"profile metadata names GPU {gpu!r}, which is not in the catalog",
                               where=where, fix="set metadata.gpu to a catalog name or null; " + (exc.fix or "")) from None
    return profile


def _profile_location(loc: tuple) -> str:
    """`tables.gemm.rows[0][4]` from pydantic's location, without its union-member tags."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part not in ("int", "float", "str", "none", "bool"):
            out += f".{part}" if out else str(part)
    return out


def _staging_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.part")


@contextlib.contextmanager
def staged_file(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary sibling to write `path` through: it replaces `path` only when the block
    ends normally, so a failed or interrupted (Ctrl-C) write leaves neither a partial file
    at `path` nor a damaged earlier one."""
    path = Path(path)
    tmp = _staging_name(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # only now: a refused or failed run leaves none
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def check_writable(path: str | os.PathLike, *, option: str | None = None) -> Path:
    """`path` as a file this process can create, checked before minutes of measuring or
    converting are spent on it (missing parent directories are created when it is
    written). A symbolic link is written through to the file it names; an existing path
    that is not a regular file (a device such as /dev/null, a pipe) is refused, since the
    write replaces what is there. `option` names the command-line option it came from."""
    out = Path(path).expanduser()
    where = f"{option} {out}" if option else str(out)
    if out.is_symlink():
        out = out.resolve()
    if out.is_dir():
        raise CalibrationError("is a directory, not a profile file", where=where,
                               fix=f"give a file name, e.g. {out / 'my-gpu.json'}")
    if out.exists() and not out.is_file():
        raise CalibrationError("is not a regular file (a device, pipe or socket): writing the profile would "
                               "replace it", where=where, fix="give a file path, e.g. /tmp/my-gpu.json")
    parent = next((d for d in out.parents if d.exists()), None)
    if parent is not None and not parent.is_dir():
        raise CalibrationError(f"{parent} is a file, not a directory", where=where,
                               fix="give a path whose parent directories are directories")
    try:  # a probe in the nearest directory that exists (the folders below it are made later)
        probe = _staging_name((parent or Path.cwd()) / out.name)
        probe.open("w").close()
        probe.unlink()
    except OSError as exc:
        raise CalibrationError(f"cannot create the file: {exc.strerror or exc}", where=where,
                               fix="give a path in a writable directory, e.g. /tmp/my-gpu.json") from None
    return out


def profile_json(profile: Profile) -> str:
    """A profile as compact JSON (one row per line, so diffs stay readable)."""
    head = profile.model_dump(mode="json", exclude={"tables"})
    parts = ["{", f'"schema_version": {profile.schema_version},',
             f'"metadata": {json.dumps(head["metadata"], indent=1)},', '"tables": {']
    fams = list(profile.tables.items())
    for i, (family, table) in enumerate(fams):
        rows = ",\n".join(json.dumps(r, separators=(",", ":")) for r in table.rows)
        parts.append(f'"{family}": {{"columns": {json.dumps(list(table.columns))}, "rows": [\n{rows}\n]}}'
                     + ("," if i < len(fams) - 1 else ""))
    parts.append("}}")
    return "\n".join(parts) + "\n"


def save_profile(profile: Profile, path: str | os.PathLike) -> Path:
    """Write a profile (atomically: a partial file never appears at `path`)."""
    out = check_writable(path)
    try:
        with staged_file(out) as tmp:
            tmp.write_text(profile_json(profile))
    except OSError as exc:
        raise CalibrationError(f"cannot write the profile: {exc.strerror or exc}", where=str(out),
                               fix="free disk space, or write it elsewhere") from None
    return out


def round_sig(x: float | None, digits: int = 4) -> float | None:
    """Round to significant digits: measurement noise is far above the 5th digit."""
    if x is None:
        return None
    return float(f"{x:.{digits}g}")
