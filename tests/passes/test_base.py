"""passes/base.py: the options, the context every pass shares, and what a pass is."""

from __future__ import annotations

import pytest

from tf_stitch.fusion.decision import RecordKind, allow
from tf_stitch.graph.ir import Graph
from tf_stitch.passes.base import MAX_ON_CHIP_BUDGET, Options, PassContext, graph_pass


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"cuda": 1}, "cuda must be True or False"),
        ({"conv_layout": "NWHC"}, "conv_layout must be one of"),
        ({"kernel_source": "gpu"}, "must be one of"),
        ({"on_chip_budget": 1.5}, "must be an int"),
        ({"on_chip_budget": True}, "must be an int"),
        ({"on_chip_budget": MAX_ON_CHIP_BUDGET + 1}, "must be between 0 and"),
    ],
)
def test_options_refuse_what_they_cannot_mean(settings: dict, error: str) -> None:
    with pytest.raises((TypeError, ValueError), match=error):
        Options(**settings)


def test_a_gpu_is_planned_for_with_cuda_or_a_gpu_layout() -> None:
    assert not Options().gpu
    assert Options(cuda=True).gpu and Options(conv_layout="NCHW").gpu


def test_refuse_records_once_and_warns_each_time() -> None:
    ctx = PassContext()
    for _ in range(2):
        with pytest.warns(RuntimeWarning, match="left to TensorFlow"):
            ctx.refuse(RecordKind.COMPILE, "kernel k", "no compiler", "k: left to TensorFlow")
    assert ctx.warnings == ["k: left to TensorFlow"] * 2
    (record,) = list(ctx.records)
    assert record.kind is RecordKind.COMPILE and not record.decision.ok
    assert ctx.log("group 1", allow("fits")).ok and len(list(ctx.records)) == 2


def test_graph_pass_names_a_function_and_takes_its_summary() -> None:
    @graph_pass("nothing")
    def nothing(graph: Graph, ctx: PassContext) -> Graph:
        """Returns a copy.

        More text that is not the summary."""
        return graph.copy()

    assert nothing.name == "nothing" and nothing.doc == "Returns a copy."
    g = Graph()
    assert nothing.run(g, PassContext()) is not g
