"""Loops and conditionals whose functions have no stateful op become their stateless versions
(`While` -> `StatelessWhile`, `If` -> `StatelessIf`, `Case` -> `StatelessCase`).

A Keras RNN's loop is a `While` because its body reads variables. Frozen, the reads are
Identities, but the op is still the stateful `While`, and with no resource input left to order
it by, `tf.function`'s automatic control dependencies chain every such op of the graph in
program order: the forward and backward loops of a `Bidirectional` layer, which TensorFlow ran
side by side on the original, ran one after the other (a frozen BiLSTM classifier 1.3x slower
on two cores). Nothing else about the ops changes; a function with any stateful op (random
numbers, prints, variable or queue ops, unknown ops) keeps its op stateful.
"""

from __future__ import annotations

from typing import Any

from tensorflow.python.framework import op_def_registry

from tf_stitch.graph.io import GraphDef
from tf_stitch.graph.library import all_nodes, function_refs

STATELESS = {"While": "StatelessWhile", "If": "StatelessIf", "Case": "StatelessCase"}
_CALLS = ("PartitionedCall", "StatefulPartitionedCall")  # stateful exactly when their function is


def make_control_flow_stateless(graph_def: GraphDef) -> int:
    """Rewrites the op of every While/If/Case in `graph_def` (main graph and functions) whose
    functions are stateless, in place. Returns how many were rewritten."""
    functions = {f.signature.name: f for f in graph_def.library.function}
    known: dict[str, bool] = {}

    def function_is_stateful(name: str) -> bool:
        if name not in known:
            known[name] = True  # a recursive reference is taken as stateful
            function = functions.get(name)
            known[name] = function is None or any(node_is_stateful(n) for n in function.node_def)
        return known[name]

    def node_is_stateful(node: Any) -> bool:
        if node.op in functions:  # a call of a library function by its name
            return function_is_stateful(node.op)
        called = [ref.name for ref in function_refs(node)]
        if any(function_is_stateful(name) for name in called):
            return True
        if node.op in STATELESS or node.op in STATELESS.values() or node.op in _CALLS:
            return False  # as stateful as what they call
        op_def = op_def_registry.get(node.op)
        return op_def is None or op_def.is_stateful

    rewritten = 0
    for node in all_nodes(graph_def):
        if node.op in STATELESS and not any(
            function_is_stateful(r.name) for r in function_refs(node)
        ):
            node.op = STATELESS[node.op]
            rewritten += 1
    return rewritten
