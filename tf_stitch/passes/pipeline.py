"""The optimization pipeline, top to bottom.

Debug switches: TF_STITCH_DEBUG=1 prints the node-count change of each pass, =2 adds the fusion
groups and every decision's reason, =3 the graph after each pass, =4 the generated kernels.
TF_STITCH_DUMP_DIR=DIR writes the graph after each pass, the plan, the kernels and a runnable
repro of the optimized graph there.
"""

from __future__ import annotations

import os
import sys
from collections import Counter

from tf_stitch.codegen.compilers import Compilers
from tf_stitch.fusion.loop_dims import loop_seeds
from tf_stitch.graph.ir import Graph
from tf_stitch.graph.list_shapes import ListElements
from tf_stitch.passes.base import Options, Pass, PassContext
from tf_stitch.passes.batch_matmuls import batch_matmuls
from tf_stitch.passes.batched_weight_grads import batched_weight_grads
from tf_stitch.passes.broadcast_grads import broadcast_grads
from tf_stitch.passes.broadcast_likes import broadcast_likes
from tf_stitch.passes.colocations import drop_dangling_colocations
from tf_stitch.passes.common_subexpressions import eliminate_common_subexpressions
from tf_stitch.passes.concat_grads import concat_grads
from tf_stitch.passes.constant_views import fold_constant_views
from tf_stitch.passes.control_deps import drop_pure_control_deps
from tf_stitch.passes.dead_accumulators import drop_dead_accumulators
from tf_stitch.passes.decompose_add_n import decompose_add_n
from tf_stitch.passes.decompose_batch_norm import decompose_batch_norm
from tf_stitch.passes.decompose_bias_add import decompose_bias_add
from tf_stitch.passes.decompose_gradients import decompose_gradients
from tf_stitch.passes.decompose_softmax import decompose_softmax
from tf_stitch.passes.dump import Dumper
from tf_stitch.passes.fetch_names import keep_fetch_names
from tf_stitch.passes.fill_likes import fill_likes
from tf_stitch.passes.fold_channel_scales import fold_channel_scales
from tf_stitch.passes.fold_constants import fold_constants
from tf_stitch.passes.forward_writes import forward_writes
from tf_stitch.passes.identities import forward_identities
from tf_stitch.passes.invariant_accumulators import give_invariants_once
from tf_stitch.passes.live_batch_norms import live_batch_norms
from tf_stitch.passes.loop_bodies import optimize_loop_bodies
from tf_stitch.passes.nchw_layout import nchw_layout
from tf_stitch.passes.outline import outline
from tf_stitch.passes.pack_views import pack_views
from tf_stitch.passes.packed_accumulators import pack_accumulators
from tf_stitch.passes.pointwise_matmuls import pointwise_matmuls
from tf_stitch.passes.prune import prune
from tf_stitch.passes.push_slices import push_slices
from tf_stitch.passes.refresh_shapes import refresh_shapes
from tf_stitch.passes.restore_bias_adds import restore_bias_adds
from tf_stitch.passes.scale_live_filters import scale_live_filters
from tf_stitch.passes.sibling_calls import sibling_calls
from tf_stitch.passes.slice_grads import slice_grads
from tf_stitch.passes.slice_views import slice_views
from tf_stitch.passes.split_slices import split_slices
from tf_stitch.passes.static_reshape import static_reshape
from tf_stitch.passes.stitch import stitch
from tf_stitch.passes.sum_of_products import sum_of_products
from tf_stitch.passes.transpose_views import transpose_views
from tf_stitch.passes.twin_counters import merge_twin_counters
from tf_stitch.passes.unit_reductions import unit_reductions
from tf_stitch.passes.view_copies import rejoin_view_copies, view_copies

PIPELINE: tuple[Pass, ...] = (
    drop_pure_control_deps,  # control edges from side-effect-free nodes order nothing
    forward_identities,  # frozen variable reads and StopGradients are plain edges
    eliminate_common_subexpressions,  # the same op of the same inputs is computed once
    forward_writes,  # variable updates: a value assigned, read back by the reads after them
    decompose_softmax,  # Softmax/LogSoftmax -> max, sub, exp, sum, div
    decompose_batch_norm,  # inference FusedBatchNorm -> x * s + t
    decompose_bias_add,  # BiasAdd -> AddV2
    slice_grads,  # AddN of StridedSliceGrads tiling a tensor -> their Pack/ConcatV2
    sum_of_products,  # AddN of a_t^T b_t (a recurrence's weight gradient) -> one MatMul
    decompose_add_n,  # AddN -> AddV2 chain
    decompose_gradients,  # ReluGrad, SigmoidGrad, TanhGrad, BiasAddGrad, ... -> their math
    broadcast_grads,  # Sum over BroadcastGradientArgs the graph decides -> constant axes
    batched_weight_grads,  # Sum of a batched x^T dy over its batch -> one MatMul of the rows
    concat_grads,  # a concatenation's gradient: Slices at offsets known now -> constant bounds
    static_reshape,  # Reshape targets computed from Shape -> constants
    slice_views,  # x[:, None] and friends -> Reshape
    unit_reductions,  # reductions over size-1 axes only (a loss's Prod([batch])) -> Reshape
    transpose_views,  # Transposes that only move size-1 axes -> Reshape
    pack_views,  # Transpose/ReverseV2 of a Pack -> a Pack along the final axis
    batch_matmuls,  # an unrolled RNN's per-step input projections -> one matmul
    split_slices,  # Split/SplitV -> one Slice per piece
    sibling_calls,  # convolutions (matmuls) of one input by a filter's slices -> one call
    push_slices,  # Slice(a + b) -> Slice(a) + Slice(b): slices move up to the matmuls
    fold_constant_views,  # views of constants -> constants
    fold_constants,  # small computations on constants -> constants
    pointwise_matmuls,  # 1x1 convolutions of 1x1 images (squeeze-excite) -> matmuls
    fold_channel_scales,  # conv(x, W) * s + t -> conv(x, W * s) + t: a bias add TF fuses
    live_batch_norms,  # CPU: conv * s + t of live statistics -> FusedBatchNormV3, fused by TF
    scale_live_filters,  # GPU: conv * s + t of live statistics -> conv(x, W * s) + t
    nchw_layout,  # for a GPU: convolutions and the ops after them in NCHW, transposes explicit
    transpose_views,  # again: the transposes of [N, 1, 1, C] operands are views
    fill_likes,  # Fill(Shape(t), c) -> OnesLike(t) / ZerosLike(t): no Shape edge to t
    broadcast_likes,  # BroadcastTo(x, Shape(t)) -> x * OnesLike(t)
    forward_identities,  # again: folded permutations reveal identity Transposes
    eliminate_common_subexpressions,  # again: rewrites made some ops alike
    prune,  # drop what no output needs
    refresh_shapes,  # shape inference again, now that reshape targets are constants
    decompose_gradients,  # again: gradients whose rank only constant reshapes made known
    view_copies,  # a slice read by several stitchable ops -> one copy per reader
    stitch,  # plan the fusion groups (critical path first)
    outline,  # each group -> one StitchedKernel node
    rejoin_view_copies,  # slice copies that joined no kernel -> one slice again
    restore_bias_adds,  # bias adds left to TensorFlow are BiasAdds again (its remapper's pattern)
    prune,  # drop constants only the groups read
    drop_dangling_colocations,  # colocations with nodes that are gone
    keep_fetch_names,  # fetched tensors a pass moved get their requested names back
)


def debug_level() -> int:
    try:
        return int(os.environ.get("TF_STITCH_DEBUG", "0"))
    except ValueError:
        return 0


def run_pipeline(
    graph: Graph, options: Options | None = None, compilers: Compilers | None = None
) -> tuple[Graph, PassContext]:
    """Every pass on `graph`, then on its loops' bodies. `compilers` build the kernels
    (`codegen.compilers`; optimize() gives the runtime's): the outline pass needs them."""
    ctx = PassContext(
        options or Options(), requested_outputs=list(graph.outputs), compilers=compilers
    )
    seeds = loop_seeds(graph)  # proven on the graph as it comes, before passes change it
    level = debug_level()
    dumper = Dumper.from_env()
    for i, p in enumerate(PIPELINE):
        before = len(graph)
        graph = p.run(graph, ctx)
        if level >= 1:
            _print(f"[tf_stitch] {p.name}: {before} -> {len(graph)} nodes {_op_delta(graph)}")
        if level >= 3:
            _print(_graph_text(graph))
        if dumper:
            dumper.graph(i, p.name, graph)
    # the bodies of loops: the same pipeline on each, as a graph of its own
    lists: dict[str, dict[int, ListElements]] = {}
    graph = optimize_loop_bodies(
        graph, ctx, lambda body, o: run_pipeline(body, o, compilers), seeds, lists
    )
    # what the stitched gradient loops read no more, or read the same on every trip, is not
    # saved for them on every trip of the forward loops
    graph = drop_dead_accumulators.run(graph, ctx)
    graph = give_invariants_once.run(graph, ctx)
    # and on a CPU, what a trip saves for them goes as one tensor
    graph = pack_accumulators(graph, ctx, seeds, lists)
    # a loop's trips counted once
    graph = merge_twin_counters.run(graph, ctx)
    if level >= 2:
        for record in ctx.records:
            _print(f"[tf_stitch]   {record}")
    if level >= 4:
        for k in ctx.kernels:
            _print(f"[tf_stitch] kernel {k.name}:\n{k.source}")
    if dumper:
        dumper.finish(graph, ctx)
    return graph, ctx


def _op_delta(graph: Graph) -> str:
    counts = Counter(n.op for n in graph)
    return "(" + ", ".join(f"{op} {n}" for op, n in counts.most_common(4)) + ")"


def _graph_text(graph: Graph) -> str:
    lines = []
    for node in graph:
        ins = ", ".join(str(r) for r in node.inputs)
        shapes = ", ".join(str(o.shape) for o in node.outputs)
        lines.append(f"  {node.name} = {node.op}({ins}) -> {shapes}")
    return "\n".join(lines)


def _print(text: str) -> None:
    print(text, file=sys.stderr)
