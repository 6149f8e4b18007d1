"""codegen/build.py: a plan's kernels lowered, emitted and compiled, or the reason why not."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import tensorflow as tf
from graph_helpers import prepared, spec

from tf_stitch.codegen.build import BuildOptions, build_kernels
from tf_stitch.fusion.decision import RecordKind
from tf_stitch.fusion.planner import Plan, plan_groups
from tf_stitch.graph.ir import Graph
from tf_stitch.runtime.compilers import COMPILERS
from tf_stitch.runtime.kernel_compiler import kernel_key


def _softmax(x: tf.Tensor) -> tf.Tensor:
    e = tf.exp(x - tf.reduce_max(x, -1, keepdims=True))
    return e / tf.reduce_sum(e, -1, keepdims=True)


def _planned() -> tuple[Graph, Plan]:
    graph = prepared(_softmax, spec(None, 12))
    return graph, plan_groups(graph)


def test_a_group_becomes_a_compiled_kernel_named_for_its_scope() -> None:
    graph, plan = _planned()
    built = build_kernels(graph, plan, BuildOptions(), COMPILERS)
    (k,) = built.kernels
    assert not k.error and not built.warnings
    assert k.node_name == f"stitched_{plan.groups[0].id}"
    assert k.key == kernel_key(k.source)
    assert k.attrs["source"] == k.source.encode()  # the op's attributes, encoded
    assert [m.split(" ")[0] for m in k.kernel.members] == plan.groups[0].names
    assert "ts_run" in k.source and k.cuda_source and k.cuda_function


def test_without_compiling_only_the_keys_are_computed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(tmp_path))
    graph, plan = _planned()
    (k,) = build_kernels(graph, plan, BuildOptions(compile=False), COMPILERS).kernels
    assert not k.error and k.key == kernel_key(k.source)
    assert not any(tmp_path.rglob("*.so"))  # nothing compiled
    build_kernels(graph, plan, BuildOptions(), COMPILERS)
    assert any(tmp_path.rglob("*.so"))  # where a compile would have put it


def test_a_kernel_the_compiler_fails_on_is_returned_with_its_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TF_STITCH_CXX", "/bin/false")
    graph, plan = _planned()
    built = build_kernels(graph, plan, BuildOptions(), COMPILERS)
    (k,) = built.kernels  # the rewrite decides: the group stays TensorFlow's
    assert k.error.startswith("its kernel cannot be built") and not k.key


def test_a_group_that_cannot_be_lowered_is_a_codegen_refusal() -> None:
    graph, plan = _planned()
    reversed_order = dataclasses.replace(plan.groups[0], nodes=plan.groups[0].nodes[::-1])
    built = build_kernels(graph, Plan(groups=[reversed_order]), BuildOptions(), COMPILERS)
    assert built.kernels == []
    (record,) = built.records
    assert record.kind is RecordKind.CODEGEN and not record.decision.ok
    assert "read before it is placed" in record.decision.reason
    assert built.warnings == [
        f"tf_stitch: group stitched_{reversed_order.id} stays as TensorFlow ops: "
        f"{record.decision.reason}"
    ]


def test_a_single_op_that_cannot_be_lowered_is_left_quietly() -> None:
    graph, plan = _planned()
    reversed_order = dataclasses.replace(plan.groups[0], nodes=plan.groups[0].nodes[::-1])
    built = build_kernels(graph, Plan(singles=[reversed_order]), BuildOptions(), COMPILERS)
    assert built.kernels == [] and built.records == [] and built.warnings == []


def test_without_nvcc_the_kernels_stay_cpu_only_said_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TF_STITCH_NVCC", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # g++, not nvcc
    graph = prepared(lambda x, y: (_softmax(x), _softmax(y * 2.0)), spec(4, 12), spec(3, 5))
    plan = plan_groups(graph)
    built = build_kernels(graph, plan, BuildOptions(cuda=True), COMPILERS)
    assert len(built.kernels) >= 2
    assert all(k.key and not k.error and not k.cuda_attrs for k in built.kernels)
    (refusal,) = [r for r in built.records if r.kind is RecordKind.CUDA]
    assert refusal.subject == "nvcc" and "nvcc not found" in refusal.decision.reason
    assert len(built.warnings) == 1


def test_a_failing_nvcc_leaves_each_kernel_cpu_only_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TF_STITCH_NVCC", "/bin/false")
    graph, plan = _planned()
    built = build_kernels(graph, plan, BuildOptions(cuda=True), COMPILERS)
    (k,) = built.kernels
    assert k.key and not k.cuda_attrs and k.cuda_unsupported.startswith("nvcc failed")
    assert built.warnings == []
