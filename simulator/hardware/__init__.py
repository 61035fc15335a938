"""GPU catalog: the datasheet figures the cost and memory models are built on.

Adding a GPU is one entry in ``_GPUS``. Every figure carries its source, because a
simulator is only as credible as its constants; figures we could not source are marked
"estimate". Peaks are DENSE (datasheets headline the 2:4-sparsity numbers, twice as
large); achievable throughput is lower and comes from calibration, not from here.
Prices are defaults for cost reports, meant to be overridden by the user.
"""

from __future__ import annotations

from simulator.hardware.catalog import GPU_CATALOG, get_gpu, list_gpus
from simulator.hardware.links import LINKS
from simulator.hardware.spec import TENSOR_DTYPES, GPUSpec, LinkSpec, canonical_dtype

__all__ = ["GPU_CATALOG", "LINKS", "TENSOR_DTYPES", "GPUSpec", "LinkSpec", "canonical_dtype",
           "get_gpu", "list_gpus"]
