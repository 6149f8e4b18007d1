"""XSP's analyses, each a pure function over a profile's tables (`Profile.spans`, `.ops`,
`.meta`) in a file of its own, gathered here:

- `latency_by_batch(metas)`: latency and throughput across batch sizes;
- `top_k(profile.table(level), k)`: the slowest layers, ops or kernels and their share;
- `type_distribution(profile.table("layer"), meta["layer_types"])`: layer types by count and time;
- `layer_variance(spans)`: each layer's spread over the iterations;
- `kernels_per_layer(spans)`, `kernels_by_name(spans, latency)`, `launches_per_step(spans)`;
- `op_flops`, `op_costs(ops)`, `executed_costs(ops, executed_types(op_spans))`: analytic FLOPs
  and bytes from shapes, Grappler's fused ops included;
- `op_roofline(op_spans, costs, peaks)`, `layer_roofline(...)`: intensity, achieved and
  attainable FLOP/s, memory- or compute-bound against measured peaks (`profiler/measure/peaks.py`);
- `fusion_effect(before_spans, before_meta, after_spans, after_meta)`: what tf_stitch changed.

`ProfileAnalysis(profile)` (`facade.py`, also `tf_stitch.ProfileAnalysis`) runs each of them on
one profile, its tables wired in.
"""

from tf_stitch.profiler.analyses.batch_latency import latency_by_batch
from tf_stitch.profiler.analyses.facade import ProfileAnalysis
from tf_stitch.profiler.analyses.flops import executed_costs, executed_types, op_costs, op_flops
from tf_stitch.profiler.analyses.fusion_effect import fusion_effect
from tf_stitch.profiler.analyses.kernels import (
    kernels_by_name,
    kernels_per_layer,
    launches_per_step,
)
from tf_stitch.profiler.analyses.layer_variance import layer_variance
from tf_stitch.profiler.analyses.roofline import layer_roofline, op_roofline, ridge_point
from tf_stitch.profiler.analyses.top_k import top_k
from tf_stitch.profiler.analyses.type_distribution import type_distribution

__all__ = [
    "ProfileAnalysis",
    "executed_costs",
    "executed_types",
    "fusion_effect",
    "kernels_by_name",
    "kernels_per_layer",
    "latency_by_batch",
    "launches_per_step",
    "layer_roofline",
    "layer_variance",
    "op_costs",
    "op_flops",
    "op_roofline",
    "ridge_point",
    "top_k",
    "type_distribution",
]
