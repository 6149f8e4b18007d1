"""graph/accumulators.py: a body that only pushes into, or only pops from, a list argument is
told apart from one that reads the list some other way; a body passes a list through."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tf_stitch.graph.accumulators import pass_through, popped_lists, pushed_list, readers

F32 = tf.float32
LIST = tf.TensorSpec([], tf.variant)
X = tf.TensorSpec([3], F32)


def _fdef(fn: object) -> object:
    return tf.function(fn).get_concrete_function(LIST, X).function_def


def _push(handle: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    return tf.raw_ops.TensorListPushBack(input_handle=handle, tensor=x)


def _pop(handle: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.raw_ops.TensorListPopBack(input_handle=handle, element_shape=[3], element_dtype=F32)


def pushes(handle: tf.Tensor, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return _push(handle, x * 2.0), x


def pushes_and_reads(handle: tf.Tensor, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    length = tf.cast(tf.raw_ops.TensorListLength(input_handle=handle), F32)
    return _push(handle, x), x + length


def pushes_twice(handle: tf.Tensor, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return _push(_push(handle, x), x), x


def pops(handle: tf.Tensor, x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    rest, value = _pop(handle)
    return rest, x + value


def test_a_push_is_found_only_where_the_list_is_returned_with_that_push_alone() -> None:
    body = _fdef(pushes)
    assert pushed_list(body, 0) is not None
    assert pushed_list(body, 1) is None  # not a list
    assert pushed_list(_fdef(pushes_and_reads), 0) is None  # its length is read too
    assert pushed_list(_fdef(pushes_twice), 0) is None
    assert popped_lists(body) == []


def test_a_pop_is_found_and_goes_only_once_nothing_reads_what_it_popped() -> None:
    body = _fdef(pops)
    found = popped_lists(body)
    assert len(found) == 1 and found[0][0] == 0
    pop = found[0][1]
    assert readers(body)[f"{pop}:tensor:0"] == 1
    with pytest.raises(ValueError, match="still read"):
        pass_through(body, 0)
    arg = body.signature.input_arg[1].name
    for nd in body.node_def:
        nd.input[:] = [arg if i == f"{pop}:tensor:0" else i for i in nd.input]
    pass_through(body, 0)
    assert body.ret[body.signature.output_arg[0].name] == body.signature.input_arg[0].name
    assert pop not in {nd.name for nd in body.node_def}
