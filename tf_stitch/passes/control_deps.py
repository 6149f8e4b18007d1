"""drop-pure-control-deps: control edges from side-effect-free nodes order nothing; drop them.

A control edge A -> B is dropped when A and all its ancestors are stateless (Grappler's
dependency optimizer does the same). Frozen Keras graphs end in `Identity(out, ^NoOp)` where the
NoOp waits on constant reads: after this pass those edges no longer block fusion. Edges from
lowered control flow (a Switch, Enter, Merge ... upstream) are kept: they put a constant into
its branch or loop frame.
"""

from __future__ import annotations

from tf_stitch.fusion.legality import is_stateful
from tf_stitch.graph.ir import Graph
from tf_stitch.graph.liveness import CONTROL_FLOW_OPS
from tf_stitch.passes.base import PassContext, graph_pass

# Stateless ops whose only effect is to fail: ordering on them is observable.
_CHECKING_OPS = frozenset({"CheckNumerics", "CheckNumericsV2", "EnsureShape"})


@graph_pass("drop-pure-control-deps")
def drop_pure_control_deps(graph: Graph, ctx: PassContext) -> Graph:
    """Drops control edges whose source (and everything upstream of it) has no side effect."""
    out = graph.copy()
    pure: set[str] = set()
    for node in out.topological_order():
        preds = [r.node for r in node.inputs] + node.control_inputs
        if (
            not is_stateful(node.op)
            and node.op not in _CHECKING_OPS
            and node.op not in CONTROL_FLOW_OPS
            and all(p in pure for p in preds)
        ):
            pure.add(node.name)
    for node in out:
        node.control_inputs = [c for c in node.control_inputs if c not in pure]
    return out
