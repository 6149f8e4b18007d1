"""A kernel is not where two loops start.

TensorFlow's executor runs cheap ops inline on the thread that made their input, and hands
expensive ones to other threads. Two loops fed by two expensive ops (a Bidirectional layer's
forward and backward Transposes) therefore start on two threads, and each thread then runs its
loop's chain of cheap per-iteration ops (Merge, Switch, TensorListGetItem, ...). A kernel that
produces the inputs of both loops at once (the embedding gather and both transposes) leaves both
chains on one thread: a Keras BiLSTM classifier ran 1.2x slower than TensorFlow with that kernel
and 0.8x without it. So a group whose outputs reach two or more loops within a few ops is left
to TensorFlow.
"""

from __future__ import annotations

from tf_stitch.fusion.legality import Context
from tf_stitch.graph.ir import TensorRef

LOOP_OPS = frozenset({"While", "StatelessWhile"})
HOPS = 4  # ops between a kernel's output and a loop: TensorListFromTensor, Shape, Fill, ...


def loops_started(ctx: Context, members: set[str], outputs: list[TensorRef]) -> list[str]:
    """The loops within `HOPS` ops of `outputs` (outside the group), in the order found."""
    seen = set(members)
    loops: list[str] = []
    frontier = list(outputs)
    for _ in range(HOPS):
        following: list[TensorRef] = []
        for ref in frontier:
            for name in ctx.consumers.get(ref, []):
                if name in seen:
                    continue
                seen.add(name)
                node = ctx.graph.node(name)
                if node.op in LOOP_OPS:
                    loops.append(name)
                else:
                    following.extend(node.output(i) for i in range(len(node.outputs)))
        frontier = following
    return loops
