"""codegen/sizes.py: run-time sizes as expressions, printed as built, compared simplified."""

from __future__ import annotations

import pytest

from tf_stitch.codegen.sizes import Sym, add, dim, multiply, static

D0, D1 = dim("D0"), dim("D1")


def test_known_sizes_fold_to_ints() -> None:
    assert multiply(3, 4) == 12 and add(3, 4) == 7
    assert multiply(D0, 1) is D0 and multiply(1, D0) is D0
    assert multiply(D0, 0) == 0 and add(D0, 0) is D0 and add(0, D0) is D0


def test_a_product_prints_as_built_and_equals_it_in_any_order() -> None:
    a = multiply(multiply(8, D1), D0)
    b = multiply(D0, multiply(D1, 8))
    assert str(a) == "8*D1*D0" and str(b) == "D0*D1*8"
    assert a == b and hash(a) == hash(b)
    assert a != multiply(8, D1) and multiply(4, D1) != multiply(8, D1)


def test_like_terms_add_up() -> None:
    a = add(multiply(2, D0), add(D0, 3))
    assert a == add(3, multiply(3, D0))
    assert a != add(3, multiply(2, D0))
    assert str(a) == "2*D0+D0+3"


def test_a_sum_is_a_parenthesized_factor() -> None:
    s = multiply(add(D0, 3), 4)
    assert str(s) == "(D0+3)*4"
    assert s == add(multiply(4, D0), 12)


def test_a_symbol_is_never_an_int_and_a_static_size_is_one() -> None:
    assert D0 != 1 and D0 != "D0" and isinstance(D0, Sym)
    assert static(12) == 12
    with pytest.raises(TypeError, match="known only at run time"):
        static(D0)
    with pytest.raises(ValueError, match="C identifier"):
        dim("D0+1")
