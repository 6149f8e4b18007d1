"""The op-kind table: every entry is a real TF op, and every fusible op can be emitted."""

from __future__ import annotations

import string

import pytest
from tensorflow.python.framework import op_def_registry

from tf_stitch.codegen import cpu
from tf_stitch.fusion.legality import is_stateful
from tf_stitch.fusion.op_kinds import (
    FUSIBLE_DTYPES,
    INT_OPS,
    OP_TABLE,
    OpKind,
    OpSpec,
    op_kind,
    op_spec,
)

# Elementwise ops the C++ emitter spells by hand instead of through its EXPR table.
SPECIAL_CASED = {"LeakyRelu", "Cast", "Pow", "OnesLike", "ZerosLike"}


def ops_of(kind: OpKind) -> list[str]:
    return sorted(op for op, spec in OP_TABLE.items() if spec.kind is kind)


@pytest.mark.parametrize("op", sorted(OP_TABLE))
def test_every_op_in_the_table_is_a_registered_tensorflow_op(op: str) -> None:
    assert op_def_registry.get(op) is not None, f"{op} is not a TensorFlow op"


@pytest.mark.parametrize("op", sorted(OP_TABLE))
def test_no_op_in_the_table_is_stateful(op: str) -> None:
    assert not is_stateful(op)


@pytest.mark.parametrize("op", ops_of(OpKind.ELEMENTWISE))
def test_every_elementwise_op_has_a_cpu_expression(op: str) -> None:
    """Of float operands, or of integer ones only (bitwise ops, TruncateDiv)."""
    assert op in cpu.EXPR or op in SPECIAL_CASED or op in INT_OPS


def test_the_integer_ops_are_the_ones_the_emitter_spells_for_integers() -> None:
    assert set(cpu.INT_EXPR) == INT_OPS
    for op, code in cpu.INT_EXPR.items():
        fields = {f for _, f, _, _ in string.Formatter().parse(code) if f is not None}
        assert fields - {"T"} == {str(i) for i in range(OP_TABLE[op].data_inputs)}, op


@pytest.mark.parametrize("op", ops_of(OpKind.ELEMENTWISE))
def test_elementwise_data_inputs_match_the_op_def(op: str) -> None:
    op_def = op_def_registry.get(op)
    assert OP_TABLE[op].data_inputs == len(op_def.input_arg)


@pytest.mark.parametrize("op", sorted(cpu.EXPR))
def test_cpu_expressions_use_exactly_the_op_inputs(op: str) -> None:
    fields = {f for _, f, _, _ in string.Formatter().parse(cpu.EXPR[op]) if f is not None}
    assert fields == {str(i) for i in range(OP_TABLE[op].data_inputs)}


def test_every_cpu_expression_belongs_to_an_elementwise_op() -> None:
    extra = [op for op in cpu.EXPR if op_kind(op) is not OpKind.ELEMENTWISE]
    assert extra == []


@pytest.mark.parametrize("op", ops_of(OpKind.REDUCE))
def test_every_reduction_has_an_initial_value_and_a_step(op: str) -> None:
    assert op in cpu.REDUCE_INIT
    assert op in cpu.REDUCE_STEP
    # the reduced tensor comes first; the axes input is a constant
    assert OP_TABLE[op].data_inputs == 1
    assert [a.name for a in op_def_registry.get(op).input_arg] == ["input", "reduction_indices"]
    assert "keep_dims" in {a.name for a in op_def_registry.get(op).attr}


@pytest.mark.parametrize("op", ops_of(OpKind.RESHAPE) + ops_of(OpKind.BROADCAST))
def test_views_and_broadcasts_are_free_and_read_one_tensor(op: str) -> None:
    assert OP_TABLE[op].data_inputs == 1
    assert OP_TABLE[op].cost == 0


def test_ops_outside_the_table_are_opaque() -> None:
    for op in ("Cumsum", "Conv2D", "Einsum", "NoSuchOp", "Placeholder", "Const"):
        assert op_kind(op) is OpKind.OPAQUE
        assert op_spec(op) == OpSpec(OpKind.OPAQUE, 0, 0)


def test_costs_rank_transcendentals_above_divisions_above_arithmetic() -> None:
    assert op_spec("Add").cost < op_spec("RealDiv").cost < op_spec("Exp").cost
    assert op_spec("Rsqrt").cost == op_spec("RealDiv").cost
    assert op_spec("Pow").cost > op_spec("Exp").cost
    assert all(spec.cost >= 1 for spec in OP_TABLE.values() if spec.kind is OpKind.ELEMENTWISE)


def test_fusible_dtypes_are_the_ones_the_emitter_can_spell() -> None:
    assert set(FUSIBLE_DTYPES) <= set(cpu.CTYPE)
    assert "float32" in FUSIBLE_DTYPES
