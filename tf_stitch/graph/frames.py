"""Whether a graph's lowered loops are well formed: every node in one frame.

A loop lowered to dataflow (Enter, Merge, Switch, NextIteration, Exit) runs its body in a frame
of its own; TensorFlow's executor gives each node the frame of the nodes that feed it (an
Enter's outputs are in the Enter's `frame_name` inside the frame of its input, an Exit's in
the frame around its own) and refuses, when it is created, a node whose inputs come from
different frames ("has inputs from different frames"). That error comes only when the graph is
run, too late to keep the original, so a rewrite that is run inside TensorFlow (tf_stitch.enable)
checks the same rule first.
"""

from __future__ import annotations

from collections import deque
from typing import Any

_ROOT = ""


def frame_problem(graph_def: Any) -> str:
    """'' if every node of `graph_def` (its main graph) has all its inputs, data and control,
    in one frame, as TensorFlow's executor requires; else what is wrong."""
    nodes = {n.name: n for n in graph_def.node}
    outputs: dict[str, list[str]] = {name: [] for name in nodes}
    for node in graph_def.node:
        for source in {_source(i) for i in node.input}:
            if source not in nodes:
                return f"{node.name} reads {source}, which is not in the graph"
            outputs[source].append(node.name)
    parent: dict[str, str] = {_ROOT: _ROOT}  # frame -> the frame around it
    frame: dict[str, str] = {n.name: _ROOT for n in graph_def.node if not n.input}
    queue = deque(frame)
    while queue:
        name = queue.popleft()
        node = nodes[name]
        inside = frame[name]
        if node.op in ("Enter", "RefEnter"):
            child = inside + "/" + node.attr["frame_name"].s.decode()
            if parent.setdefault(child, inside) != inside:
                return f"frame {child} is entered from two frames"
            inside = child
        elif node.op in ("Exit", "RefExit"):
            inside = parent.get(inside, _ROOT)
        for out in outputs[name]:
            known = frame.get(out)
            if known is None:
                frame[out] = inside
                queue.append(out)
            elif known != inside:
                return (
                    f"{out} has inputs from different frames: {name} is in "
                    f"'{inside.lstrip('/')}', another in '{known.lstrip('/')}'"
                )
    return ""


def _source(name: str) -> str:
    return name.lstrip("^").split(":")[0]
