"""loop-bodies: the bodies of While loops are optimized like the main graph.

A Keras RNN layer runs its time step as a While loop's body function: the input and recurrent
matmuls, the gates and the state update, op by op, every step. Each body of a (Stateless)While
of the graph is turned into a graph (its arguments Placeholders with the loop variables'
shapes), run through the same pipeline (so a loop inside it gets the same in turn), and turned
back into a function under a new name, which the loop then calls; its kernels' matmul tiles
read at most `LOOP_TILE_OPERANDS_BYTES` of weights together. Its arguments are marked with
the classes of unknown sizes they keep on every trip (fusion/loop_dims.py, proven on the graph
before the pipeline changed it), so that its passes know what the graph outside knew. A body
another node also calls, or in which nothing was stitched, is left as it is; one that cannot be
converted stays, with a warning saying why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import tensorflow as tf

from tf_stitch.fusion.cost_model import LOOP_TILE_OPERANDS_BYTES
from tf_stitch.fusion.decision import RecordKind
from tf_stitch.fusion.loop_dims import Seeds, mark_body
from tf_stitch.graph.functions import function_graph, function_uses, original_bodies, with_function
from tf_stitch.graph.ir import FuncRef, Graph
from tf_stitch.graph.list_shapes import ListElements, list_element_shapes
from tf_stitch.passes.base import Options, PassContext

WHILE_OPS = ("While", "StatelessWhile")

Run = Callable[[Graph, Options], tuple[Graph, PassContext]]


def optimize_loop_bodies(
    graph: Graph,
    ctx: PassContext,
    run: Run,
    seeds: Mapping[str, tuple[str, Seeds]],
    found_lists: dict[str, dict[int, ListElements]] | None = None,
) -> Graph:
    """`graph` with the bodies of its loops optimized by `run` (the pipeline); `seeds` are
    the marks `loop_seeds` found for the loops, by name (with the body they were found for).
    The element shapes of each loop's list inputs, as the bodies were, go into `found_lists`."""
    loops = [n for n in graph if n.op in WHILE_OPS and isinstance(n.attrs.get("body"), FuncRef)]
    if not loops:
        return graph
    uses = function_uses(graph)
    out = graph.copy()
    bodies: dict[str, Graph | None] = {}  # as they were: what they push into their lists
    original_body = original_bodies(graph, bodies)

    for loop in loops:
        body = loop.attrs["body"].name
        if uses[body] != 1:
            continue
        shapes = [o.shape for o in loop.outputs]
        try:
            lists = list_element_shapes(graph, loop, original_body)
            if found_lists is not None:
                found_lists[loop.name] = lists
            body_graph = function_graph(out.library, body, shapes, lists)
            marks = seeds.get(loop.name)
            if marks is not None and marks[0] == body and len(body_graph.inputs) == len(shapes):
                body_graph = mark_body(body_graph, marks[1])
            bodies.setdefault(loop.name, body_graph)  # as it was: a later loop may ask
            options = dataclasses.replace(ctx.options, tile_budget=LOOP_TILE_OPERANDS_BYTES)
            optimized, body_ctx = run(body_graph, options)
            if not body_ctx.kernels:
                continue
            out.library, name = with_function(out.library, optimized, body, replaces=body)
        except (ValueError, TypeError, KeyError, tf.errors.OpError) as e:
            message = f"tf_stitch: the body of loop {loop.name} stays as it is: {e}"
            ctx.refuse(RecordKind.REWRITE, f"body of loop {loop.name}", str(e), message)
            continue
        out.node(loop.name).attrs["body"] = FuncRef(name, {})
        ctx.kernels.extend(body_ctx.kernels)
        ctx.records.extend(body_ctx.records)
        ctx.warnings.extend(body_ctx.warnings)
    return out
