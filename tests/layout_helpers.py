"""Helpers for the layout tests: the layout of every fusible node of a traced function."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tf_stitch.fusion.decision import Decision
from tf_stitch.fusion.layout import analyze
from tf_stitch.fusion.layout_types import Layout
from tf_stitch.fusion.op_kinds import op_kind
from tf_stitch.graph import frontends
from tf_stitch.graph.ir import Graph

NOT_MEMBERS = {"Placeholder", "Const", "Identity"}


def graph_of(fn: Callable[..., Any], *specs: tf.TensorSpec) -> Graph:
    return frontends.load(tf.function(fn).get_concrete_function(*specs)).graph


def analyze_all(graph: Graph) -> Layout | Decision:
    """Analyzes the group of every fusible node (the output Identity nodes left out)."""
    members = [n.name for n in graph if n.op not in NOT_MEMBERS and op_kind(n.op) != "opaque"]
    order = {n.name: i for i, n in enumerate(graph.topological_order())}
    return analyze(graph, members, order)


def layout_of(fn: Callable[..., Any], *specs: tf.TensorSpec) -> tuple[Graph, Layout]:
    graph = graph_of(fn, *specs)
    layout = analyze_all(graph)
    assert isinstance(layout, Layout), layout
    return graph, layout


def forbid_reason(fn: Callable[..., Any], *specs: tf.TensorSpec) -> str:
    verdict = analyze_all(graph_of(fn, *specs))
    assert isinstance(verdict, Decision) and not verdict, verdict
    return verdict.reason
