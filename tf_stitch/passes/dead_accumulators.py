"""dead-accumulators: a forward loop stops pushing the values its gradient loop no longer reads.

A loop's gradient pops, at every trip, each forward value its backward step reads, which the
forward loop pushed for it (graph/accumulators.py). Once the backward body is stitched
(passes/loop_bodies.py), some of those values are read no more: the shapes a
`BroadcastGradientArgs` took (resolved statically), a value a kernel recomputes. TensorFlow still
runs the push on every forward trip and Grappler drops only the pop (a Keras LSTM's training
step: 5 of the 15 values pushed per trip, 100 ops per step, for nothing).

For each accumulator whose popped value nobody reads, the pop goes from the gradient body and
the push from the forward body; each returns the list as it got it. Both functions are renamed
(their content changed).
"""

from __future__ import annotations

from collections import Counter

from tf_stitch.fusion.decision import Record, RecordKind, allow
from tf_stitch.graph.accumulators import Library, accumulators
from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import PassContext, graph_pass


@graph_pass("dead-accumulators")
def drop_dead_accumulators(graph: Graph, ctx: PassContext) -> Graph:
    """Removes the push and pop of every accumulator whose popped value is never read."""
    out = graph.copy()
    library = Library(out)
    dead = [a for a in accumulators(out, library) if not a.popped_read]
    if not dead:
        return graph
    edits: dict[str, list[int]] = {}
    for acc in dead:
        edits.setdefault(acc.forward, []).append(acc.index)
        edits.setdefault(acc.backward, []).append(acc.backward_index)
    for loop_name, indices in edits.items():
        library.pass_lists_through(out.node(loop_name), indices)
    out.library = library.serialized()
    for name, n in sorted(Counter(acc.forward for acc in dead).items()):
        ctx.records.append(
            Record(
                f"dead-accumulators {name}",
                allow(f"{n} values its gradient loop never reads are not pushed on every trip"),
                RecordKind.REWRITE,
            )
        )
    return out
