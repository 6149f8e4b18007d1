"""Freezing a ConcreteFunction's variables into constants, keeping its loops and conditionals
functional ops (While, If, Case) for the passes, and lowered by TensorFlow when it runs them.

`convert_variables_to_constants_v2(..., lower_control_flow=False)` marks every control-flow op
`_lower_using_switch_merge=False` so that its own Grappler run leaves them functional. Left that
way, TensorFlow runs each loop iteration as a call of the body function instead of lowering the
loop to Switch/Merge dataflow: a Keras BiLSTM classifier ran 1.8x slower frozen than as the
original function with nothing else changed. The marks are put back as the original had them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2,
)

from tf_stitch.graph.io import GraphDef

CONTROL_FLOW_OPS = frozenset(
    {"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase"}
)
LOWER = "_lower_using_switch_merge"


def freeze(concrete: Any) -> tuple[Any, GraphDef]:
    """The frozen ConcreteFunction of `concrete` and its GraphDef, with lowering restored."""
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=False)
    graph_def = frozen.graph.as_graph_def()
    restore_lowering(graph_def, concrete.graph.as_graph_def())
    return frozen, graph_def


def restore_lowering(graph_def: GraphDef, original: GraphDef) -> int:
    """Sets each control-flow op of `graph_def` (main graph and functions) to be lowered or not
    as the op of the same name in `original` was; ops `original` does not name (renamed by
    inlining) are lowered if any of its control-flow ops was. Returns how many are lowered."""
    marks = {n.name: _lowered(n) for n in _nodes(original) if n.op in CONTROL_FLOW_OPS}
    default = any(marks.values())
    count = 0
    for node in _nodes(graph_def):
        if node.op in CONTROL_FLOW_OPS:
            lowered = marks.get(node.name, default)
            node.attr[LOWER].b = lowered
            count += lowered
    return count


def _lowered(node: Any) -> bool:
    return LOWER in node.attr and node.attr[LOWER].b


def _nodes(graph_def: GraphDef) -> Iterator[Any]:
    yield from graph_def.node
    for function in graph_def.library.function:
        yield from function.node_def
