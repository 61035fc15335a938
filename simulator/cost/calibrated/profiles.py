"""Which profile a run uses (`auto`: the one shipped for its GPU), loaded, checked against
the GPU and cached; the COST_BACKENDS factory."""

from __future__ import annotations

from calibration.profile import load_profile, profile_gpu, resolve_profile, shipped_profiles
from simulator.cost.calibrated.timer import CalibratedTimer
from simulator.cost.config import CostModelConfig
from simulator.errors import CatalogError, ConfigError
from simulator.hardware import GPUSpec, get_gpu

_TIMERS: dict[tuple, CalibratedTimer] = {}


class NoShippedProfileError(ConfigError):
    """No profile in calibration/profiles/ was measured on this GPU (a broken one is a
    CalibrationError instead, which `auto` must not hide behind the roofline)."""


def shipped_profile_for(gpu: GPUSpec, backend: str = "vllm") -> str:
    """`hardware.profile: auto`: the shipped profile measured on this GPU (vLLM tables first),
    else on the GPU whose kernels it shares (`kernel_tables_from`)."""
    names = shipped_profiles()
    ordered = sorted(names, key=lambda n: (not n.endswith(f"-{backend}"), n))

    def measured_on(name: str) -> str | None:
        gpu_id = profile_gpu(name)
        return get_gpu(gpu_id).name if gpu_id is not None else None

    def named_for(name: str) -> str | None:
        # Shipped files are named <system>-<backend>; reading one's metadata takes ~0.1 s,
        # so read only those whose name points at the GPU first, and the metadata decides.
        try:
            return get_gpu(name.rsplit("-", 1)[0]).name
        except CatalogError:
            return None

    targets = [t for t in (gpu.name, gpu.kernel_tables_from) if t]
    for by_name in (True, False):  # the second pass reads every profile's metadata
        for target in targets:
            for name in ordered:
                if (not by_name or named_for(name) == target) and measured_on(name) == target:
                    return name
    raise NoShippedProfileError(f"no shipped calibration profile for {gpu.name}", where="hardware.profile",
                      fix=f"shipped: {', '.join(names)}; measure one with `simulate calibrate`, "
                      "or use cost_model.backend: roofline")


def calibrated_backend(gpu: GPUSpec, config: CostModelConfig, profile: str | None) -> CalibratedTimer:
    """COST_BACKENDS factory: load the profile, check it belongs to this GPU, fit once."""
    if not profile:
        raise ConfigError("cost_model.backend: calibrated needs a profile", where="hardware.profile",
                          fix="set hardware.profile to a shipped name (e.g. h100_sxm-vllm) or a profile path")
    if profile == "auto":
        profile = shipped_profile_for(gpu)
    path = resolve_profile(profile).resolve()
    prof = load_profile(path)
    meta = prof.metadata
    if meta.gpu is not None and get_gpu(meta.gpu).name not in (gpu.name, gpu.kernel_tables_from):
        raise ConfigError(
            f"profile {profile!r} was measured on {meta.gpu} ({meta.gpu_name}), but hardware.gpu is {gpu.name}",
            where="hardware.profile",
            fix=f"set hardware.gpu: {meta.gpu}, or use a profile made on {gpu.name}")
    st = path.stat()
    cache_key = (str(path), st.st_mtime_ns, gpu.model_dump_json(), config.efficiency.model_dump_json(),
                 config.overheads().kernel_latency_us, config.sustained_tensor_rate,
                 config.collective_power_relief)
    timer = _TIMERS.get(cache_key)
    if timer is None:
        if len(_TIMERS) >= 8:
            _TIMERS.pop(next(iter(_TIMERS)))
        timer = _TIMERS[cache_key] = CalibratedTimer(prof, gpu, config)
    return timer
