"""GPUs and links: what each accelerator offers the cost and memory models (`spec`), the
interconnects (`links`) and the cited catalog with name lookup (`catalog`)."""

from __future__ import annotations

from simulator.hardware.catalog import GPU_CATALOG, get_gpu, list_gpus
from simulator.hardware.links import LINKS
from simulator.hardware.spec import TENSOR_DTYPES, GPUSpec, LinkSpec, canonical_dtype

__all__ = ["GPU_CATALOG", "LINKS", "TENSOR_DTYPES", "GPUSpec", "LinkSpec", "canonical_dtype",
           "get_gpu", "list_gpus"]
