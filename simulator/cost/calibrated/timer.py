"""CalibratedTimer: op times from a profile's family predictors, with the sustained
tensor-core rate, the DRAM floor and the roofline where the profile is silent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from calibration.profile import FAMILY_COLUMNS, Profile
from simulator.cost.calibrated.families import FAMILIES, FAMILY_ADAPTERS
from simulator.cost.calibrated.interpolate import FamilyModel
from simulator.cost.config import MEASURED_LAUNCH_US, CostModelConfig
from simulator.cost.ops import Op, elementwise
from simulator.cost.roofline import RooflineTimer
from simulator.cost.sustained import (
    SustainedRate,
    carried_over,
    sustained_factor,
    sustained_rates,
    with_measured,
)
from simulator.dtypes import SAME_TENSOR_RATE
from simulator.hardware import GPUSpec, get_gpu

# The Hopper GPUs whose catalog entries measured both the FP8 GEMM and the prefill-attention
# sustained fractions (item 16): their mean ratio is what carried_over applies elsewhere.
HOPPER_MEASURED = ("h100-sxm", "h200")


def hopper_attention_ratio() -> float:
    """Prefill attention's sustained fraction over FP8 GEMMs', averaged over HOPPER_MEASURED
    (0.74/0.83 and 0.71/0.88: 0.85)."""
    gpus = [get_gpu(name) for name in HOPPER_MEASURED]
    return sum(g.sustained_attention_fraction / g.sustained_tensor_fraction["fp8"] for g in gpus) / len(gpus)


def rates_from_tables_only(profile: Profile, gpu: GPUSpec) -> bool:
    """A GPU-timed profile whose sustained rates come from its tables alone: neither the GPU
    catalog nor the profile's own run measured them back to back (carried_over applies)."""
    return profile.metadata.device_kind == "cuda" and not gpu.sustained_tensor_fraction \
        and not profile.metadata.sustained_fraction


def reference_gpu(profile: Profile, template: GPUSpec) -> GPUSpec:
    """The peaks the profile's efficiencies are fitted against.

    A catalog GPU gives its datasheet. A device outside the catalog (a CPU) has none, so
    its best measured throughput stands in for the peaks; links come from `template`.
    """
    if profile.metadata.gpu is not None:
        gpu = get_gpu(profile.metadata.gpu)
        # The scenario's own spec when it is this GPU: it carries any link overrides.
        return template if template.name == gpu.name else gpu
    peaks: dict[str, float] = {}
    gemm = profile.table("gemm")
    if gemm is not None:
        for m, n, k, dt, med, *_ in gemm.rows:
            peaks[dt] = max(peaks.get(dt, 0.0), 2.0 * m * n * k / (med * 1e-6) / 1e12)
    prefill = profile.table("attn_prefill")
    if prefill is not None:
        ad = FAMILY_ADAPTERS["attn_prefill"]
        best = max(ad.eq_op(*ad.split(tuple(r[:7]))).flops / (r[7] * 1e-6) for r in prefill.rows) / 1e12
        peaks["bf16"] = max(peaks.get("bf16", 0.0), best)
    bw = 0.0
    for fam in ("elementwise", "attn_decode"):
        table = profile.table(fam)
        if table is None:
            continue
        ad = FAMILY_ADAPTERS[fam]
        n_shape = len(FAMILY_COLUMNS[fam])
        for r in table.rows:
            key, c = ad.split(tuple(r[:n_shape]))
            bw = max(bw, ad.eq_op(key, c).bytes / (r[n_shape] * 1e-6))
    if "bf16" not in peaks:
        peaks["bf16"] = peaks.get("fp16") or max(peaks.values(), default=0.0) or template.peak_tflops_for("bf16")
    peaks.setdefault("fp16", peaks["bf16"])
    ratio = peaks["bf16"] / template.peak_tflops.get("bf16", peaks["bf16"])
    for dt, v in template.peak_tflops.items():
        peaks.setdefault(dt, v * ratio)
    return template.model_copy(update={
        "name": f"profile:{profile.metadata.gpu_name}",
        "display_name": profile.metadata.gpu_name,
        "peak_tflops": peaks,
        "hbm_tbps": bw / 1e12 if bw > 0 else template.hbm_tbps,
        "num_sms": profile.metadata.compute_units or template.num_sms,
    })


# Families whose compute-bound part runs at the sustained tensor-core rate (sustained.py).
# Prefill attention too: the SM clock the power limit lowers is the chip's, so the
# attention kernels between a long prefill's GEMMs run at it as well; measured inside a
# prefill layer, they slow down more than the GEMMs (GPUSpec.sustained_attention_fraction).
SUSTAINED_FAMILIES = ("gemm", "moe", "attn_prefill")

# Families whose table rows can run from L2 where a serving step reads DRAM (see op_time).
DRAM_FLOOR_FAMILIES = ("gemm", "attn_decode", "moe")

# Families a profile may lack, timed then by the roofline fitted to another family's rows:
# MoE by the GPU's dense GEMM fit (our own microbenchmarks time GEMMs, not fused MoE).
FIT_FROM = {"moe": "gemm"}


class _FamilyModels(Mapping[str, "FamilyModel"]):
    """The profile's per-family models, each fitted when first asked for: a dense model's
    run never pays for the MoE tables (half of a shipped profile's rows)."""

    def __init__(self, profile: Profile, gpu: GPUSpec, config: CostModelConfig):
        self._tables = {fam: t for fam in FAMILIES if (t := profile.table(fam)) is not None}
        self._gpu, self._config = gpu, config
        self._built: dict[str, FamilyModel] = {}

    def __getitem__(self, family: str) -> FamilyModel:
        model = self._built.get(family)
        if model is None:
            table = self._tables[family]  # KeyError for a family the profile lacks
            model = self._built[family] = FamilyModel(family, table.rows, self._gpu, self._config)
        return model

    def __iter__(self):
        return iter(self._tables)

    def __len__(self) -> int:
        return len(self._tables)


def _shipped_stand_in(profile: Profile, gpu: GPUSpec) -> str | None:
    """The shipped profile whose tables fill the families a GPU measurement of ours lacks;
    None for shipped (imported) and CPU profiles, or where no tables ship for the GPU."""
    meta = profile.metadata
    if meta.source != "measured" or meta.device_kind != "cuda":
        return None
    from simulator.cost.calibrated.profiles import NoShippedProfileError, shipped_profile_for

    try:
        return shipped_profile_for(gpu)
    except NoShippedProfileError:
        return None


class CalibratedTimer:
    """Op times from a calibration profile; where it is silent, the shipped tables of the
    GPU (for a profile we measured) or the fitted or default roofline."""

    name = "calibrated"

    def __init__(self, profile: Profile, gpu: GPUSpec, config: CostModelConfig | None = None):
        config = config or CostModelConfig()
        self.profile = profile
        self.gpu = gpu
        self.dram_bytes_per_s = gpu.hbm_tbps * 1e12
        self.reference = reference_gpu(profile, gpu)
        self.default = RooflineTimer(gpu, config.efficiency, config.overheads().kernel_latency_us)
        # Eager engines pay CPU dispatch per kernel on top of the kernel's measured time.
        self.extra_launch = max(0.0, config.overheads().kernel_latency_us - MEASURED_LAUNCH_US) * 1e-6
        self.models = _FamilyModels(profile, self.reference, config)
        gemm = profile.table("gemm")
        rates = {}
        self.attention_sustained: SustainedRate | None = None
        # The share of the power limit a collective's wait draws (the profile's run, else the
        # GPU catalog), where the sustained fractions come from this GPU's own back-to-back
        # runs: None otherwise.
        self.collective_wait_power: float | None = None
        if config.sustained_tensor_rate:
            # The GPU's own measurement, where the catalog has one, for profiles timed on a GPU
            # (a CPU profile's times have nothing to do with a GPU's power limit).
            meta = profile.metadata
            on_gpu = meta.device_kind == "cuda"
            rates = with_measured(sustained_rates(gemm.rows) if gemm is not None else {},
                                  gpu.sustained_tensor_fraction if on_gpu else {}, meta.sustained_fraction)
            carried = None
            if rates_from_tables_only(profile, gpu):  # carry Hopper's measured relations over
                rates, carried = carried_over(rates, hopper_attention_ratio())
            # Prefill attention's own measured fraction replaces its dtype's: this profile's
            # run's (calibration/power.py), else the GPU catalog's, else the carried one.
            if on_gpu and meta.sustained_attention_fraction is not None:
                self.attention_sustained = SustainedRate(meta.sustained_attention_fraction, 0, 0, "profile")
            elif on_gpu and gpu.sustained_attention_fraction is not None:
                self.attention_sustained = SustainedRate(gpu.sustained_attention_fraction, 0, 0, "catalog")
            else:
                self.attention_sustained = carried
            if on_gpu and config.collective_power_relief:
                self.collective_wait_power = (meta.collective_wait_power_fraction
                                              if meta.collective_wait_power_fraction is not None
                                              else gpu.collective_wait_power_fraction)
        # Only the dtypes that measurably slow down: a lookup miss is the common case.
        self.sustained: dict[str, SustainedRate] = {d: r for d, r in rates.items() if r.fraction < 1.0}
        # The lookup by an op's dtype, with the formats that borrow another's rate (FP16 BF16's).
        self._rate_of = self.sustained | {a: self.sustained[b] for a, b in SAME_TENSOR_RATE.items()
                                          if b in self.sustained and a not in self.sustained}
        self._config = config
        # Our own FP8 GEMM rows time torch._scaled_mm alone; vLLM's FP8 linear layer first
        # quantises its 16-bit input (one memory-bound kernel), which NVIDIA's tables time
        # with the GEMM. So a measured profile's FP8 GEMMs get that kernel added.
        self._fp8_input_quant = profile.metadata.source == "measured"
        self._shipped_name = _shipped_stand_in(profile, gpu)
        self._shipped_timer: CalibratedTimer | None = None

    def shipped_for(self, family: str) -> CalibratedTimer | None:
        """For a family our own measurement lacks (fused MoE, collectives on one GPU), the
        shipped tables of the same GPU, when there are any: NVIDIA's measurement of the
        engine's kernel beats a roofline fitted to dense GEMMs or datasheet links."""
        if self._shipped_name is None or family in self.models:
            return None
        if self._shipped_timer is None:
            from simulator.cost.calibrated.profiles import calibrated_backend

            self._shipped_timer = calibrated_backend(self.gpu, self._config, self._shipped_name)
        return self._shipped_timer if family in self._shipped_timer.models else None

    def _sustain(self, op: Op, relief: float = 1.0) -> float:
        """The factor by which `op` runs longer at the sustained rate (1.0 for most ops);
        `relief` scales the fraction up (an iteration's collective waits, power_relief)."""
        rate = self._rate_of.get(op.dtype)
        if op.family == "attn_prefill" and self.attention_sustained is not None:
            rate = self.attention_sustained
        if rate is None or op.family not in SUSTAINED_FAMILIES:
            return 1.0
        gemm = self.models.get("gemm")  # a profile without GEMM rows: the datasheet roofline splits it
        rt = gemm.timer if gemm is not None else self.default
        compute = op.flops / (rt.peak(op.dtype) * rt.eff.gemm_compute)
        memory = op.bytes / (rt.bw * rt.eff.gemm_memory)
        fraction = rate.fraction if relief == 1.0 else min(1.0, rate.fraction * relief)
        return sustained_factor(compute, memory, fraction)

    def _int8_reads_fp8(self, op: Op, model: FamilyModel) -> bool:
        """INT8 W8A8 GEMMs run the same CUTLASS scaled-mm kernels as FP8 ones in vLLM, on the
        same 8-bit tensor cores: where the GPU's datasheet gives the two one rate (Hopper,
        Ada, B200; not B300, whose INT8 is cut) the FP8 rows time them, as the tables have
        no INT8 rows. Elsewhere they take the fitted roofline at the INT8 peak."""
        peaks = self.gpu.peak_tflops
        return (op.dtype == "int8" and op.family == "gemm" and peaks.get("fp8") is not None
                and peaks.get("int8") == peaks["fp8"] and ("fp8",) in model.trees)

    def _donor(self, op: Op) -> FamilyModel | None:
        return self.models.get(FIT_FROM.get(op.family, ""))

    def op_time(self, op: Op, relief: float = 1.0) -> float:
        """`op`'s time; `relief` > 1 raises the sustained fractions (power_relief)."""
        t = self._table_time(op, relief)
        if self._fp8_input_quant and op.family == "gemm" and op.dtype == "fp8":
            m, _, k = op.shape
            t += self._table_time(elementwise("fp8_input_quant", 3.0 * m * k, 1))
        return t

    def _table_time(self, op: Op, relief: float = 1.0) -> float:
        model = self.models.get(op.family)
        if model is None:
            shipped = self.shipped_for(op.family)
            if shipped is not None:
                # The shipped tables' kernel time, at this profile's own sustained rates (a
                # measured profile's come before the tables', calibration/README.md).
                return shipped.op_time(op, relief) / shipped._sustain(op, relief) * self._sustain(op, relief)
            donor = self._donor(op)
            if donor is None:
                return self.default.op_time(op)
            return donor.timer.op_time(op) * self._sustain(op, relief) + self.extra_launch * op.kernels
        t = model.predict(op)
        if t is None:
            if self._int8_reads_fp8(op, model):
                return self._table_time(replace(op, dtype="fp8"), relief)  # same FLOPs and bytes
            return model.timer.op_time(op) * self._sustain(op, relief)
        t *= self._sustain(op, relief)
        if op.family in DRAM_FLOOR_FAMILIES:
            # A table row repeats one kernel on the same operands, so those that fit in L2
            # ran from it (L40S and RTX PRO 6000 rows up to 2.6x the DRAM rate). In a serving
            # step a layer's weights and KV come from DRAM: gigabytes of other layers pass
            # through L2 between two reads. No table time undercuts the DRAM read.
            floor = op.bytes / self.dram_bytes_per_s
            if t < floor:
                t = floor
        if self.extra_launch:
            kernels = RooflineTimer._gemm_kernels(op.dtype) if op.family == "gemm" else op.kernels
            t += self.extra_launch * kernels
        return t

    def source_of(self, op: Op) -> str:
        """Where `op`'s time comes from: profile, profile-standin (the same shape's rows of
        the kernel that stands in for this one), profile-extrapolated (this kernel's rows,
        but the op lies beyond them on some axis: the edge row held at the fitted roofline's
        ratio), profile-standin-rate (this kernel's own compute rate, measured at another
        shape, bounds it: the stand-in's rows are faster), profile-nearest, shipped:<name> (a shipped
        profile standing in for a family ours lacks), roofline-fitted or roofline-default."""
        model = self.models.get(op.family)
        if model is not None and self._int8_reads_fp8(op, model):
            return "profile-standin"
        if model is None:
            if self.shipped_for(op.family) is not None:
                return f"shipped:{self._shipped_name}"
            return "roofline-default" if self._donor(op) is None else "roofline-fitted"
        key, _ = model.adapter.locate(op)
        cands = model.candidates(key)
        if not cands:
            return "roofline-fitted"
        if model.adapter.distance(key, cands[0]) == 0:
            return "profile-extrapolated" if model.outside_rows(op) else "profile"
        if cands[0] not in model.adapter.same_shape_standins(key, model.architecture):
            return "profile-nearest"
        return "profile-standin-rate" if model.floor_binds(op) else "profile-standin"
