"""TF_STITCH_DUMP_DIR: the graph after each pass, the plan (decisions, groups), the kernels and a
runnable repro."""

from __future__ import annotations

import os
from pathlib import Path

from tf_stitch.graph.io import graph_to_graph_def
from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import PassContext

_REPRO = '''"""Runs the optimized graph dumped by tf_stitch on random inputs: python repro.py"""
import numpy as np
import tensorflow as tf

import tf_stitch.runtime.op_library as op_library

op_library.load()
graph_def = tf.compat.v1.GraphDef()
graph_def.ParseFromString(open(__file__.replace("repro.py", "optimized.pb"), "rb").read())
INPUTS = {inputs!r}
OUTPUTS = {outputs!r}
with tf.Graph().as_default() as g:
    tf.graph_util.import_graph_def(graph_def, name="")
    feeds = {{}}
    for name in INPUTS:
        t = g.get_tensor_by_name(name)
        dims = t.shape.as_list() if t.shape.rank is not None else [2]  # any rank is accepted
        shape = [d if d is not None else 2 for d in dims]
        feeds[t] = np.random.default_rng(0).standard_normal(shape).astype(t.dtype.as_numpy_dtype)
    with tf.compat.v1.Session(graph=g) as sess:
        values = sess.run([g.get_tensor_by_name(n) for n in OUTPUTS], feeds)
        for name, value in zip(OUTPUTS, values):
            print(name, value.shape, value.dtype, float(np.abs(value).mean()))
'''


class Dumper:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def from_env() -> Dumper | None:
        path = os.environ.get("TF_STITCH_DUMP_DIR")
        return Dumper(Path(path)) if path else None

    def graph(self, index: int, name: str, graph: Graph) -> None:
        text = str(graph_to_graph_def(graph))
        (self.root / f"{index:02d}_{name}.pbtxt").write_text(text)

    def finish(self, graph: Graph, ctx: PassContext) -> None:
        (self.root / "plan.txt").write_text("\n".join(str(r) for r in ctx.records) + "\n")
        if ctx.plan and ctx.plan.groups:  # which ops each group has (the stitch pass's plan)
            groups = [f"group {g.id}: {', '.join(g.names)}" for g in ctx.plan.groups]
            (self.root / "groups.txt").write_text("\n".join(groups) + "\n")
        for k in ctx.kernels:
            (self.root / f"{k.name}.cc").write_text(k.source)
        (self.root / "optimized.pb").write_bytes(graph_to_graph_def(graph).SerializeToString())
        inputs = [str(r) for r in graph.inputs]
        outputs = [str(r) for r in graph.outputs]
        (self.root / "repro.py").write_text(_REPRO.format(inputs=inputs, outputs=outputs))
