"""graph/names.py: the scope nodes share, and names made C identifiers."""

from __future__ import annotations

from tf_stitch.graph.names import c_identifier, common_scope


def test_common_scope_is_the_deepest_scope_every_name_is_under() -> None:
    assert common_scope(["a/b/x", "a/b/y"]) == "a/b/"
    assert common_scope(["a/b/x", "a/c/y"]) == "a/"
    assert common_scope(["a/b/x", "a/b"]) == "a/"  # "a/b" is a node of scope "a"
    assert common_scope(["x", "a/y"]) == ""
    assert common_scope(["a/x"]) == "a/"
    assert common_scope([]) == ""


def test_c_identifier_keeps_letters_and_digits_only() -> None:
    assert c_identifier("encoder/layer_0/stitched_3") == "encoder_layer_0_stitched_3"
    assert c_identifier("a-b.c:0") == "a_b_c_0"
