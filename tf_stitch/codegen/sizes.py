"""Sizes a kernel knows only at run time, as expressions: sums of products of constants and the
sizes of domain axes (`D0`, `D1`, ...), which the kernel binds from its inputs' shapes.

A `Sym` keeps two forms. Its *text* is the C expression as it was built (`8*D1*D0`), which the
emitters print, so that a kernel's source is the same from one lowering to the next. Its *terms*
are the expression simplified (constants multiplied out, like terms added, factors and terms in
order), which `==` and `hash` compare: `8*D1` and `D1*8` are the same size. `multiply` and `add`
fold what is known (`x*1` is `x`, `x*0` is 0, two ints are an int), so a size that is a constant
is always an `int`.
"""

from __future__ import annotations

from collections import Counter

# One term: its constant factor and the axis sizes it multiplies, in order (repeats allowed).
Term = tuple[int, tuple[str, ...]]


class Sym:
    """A size known at run time: a polynomial in the domain's axis sizes (see the module)."""

    __slots__ = ("terms", "text")

    def __init__(self, text: str, terms: tuple[Term, ...]) -> None:
        self.text = text
        self.terms = terms

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Sym({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sym) and self.terms == other.terms

    def __hash__(self) -> int:
        return hash(self.terms)


Size = int | Sym


def dim(name: str) -> Sym:
    """The size of a domain axis, bound at run time (`name` is its C name: `D0`)."""
    if not name.isidentifier():
        raise ValueError(f"a symbolic size is named by a C identifier, not {name!r}")
    return Sym(name, ((1, (name,)),))


def _terms(size: Size) -> tuple[Term, ...]:
    return ((size, ()),) if isinstance(size, int) else size.terms


def _simplified(terms: list[Term]) -> tuple[Term, ...]:
    sums: Counter[tuple[str, ...]] = Counter()
    for coefficient, names in terms:
        sums[tuple(sorted(names))] += coefficient
    return tuple(sorted((c, names) for names, c in sums.items() if c != 0))


def _made(text: str, terms: tuple[Term, ...]) -> Size:
    if not terms:
        return 0
    if len(terms) == 1 and not terms[0][1]:
        return terms[0][0]  # a constant after all
    return Sym(text, terms)


def multiply(a: Size, b: Size) -> Size:
    """`a * b`, folded where either is known."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if a == 1:
        return b
    if b == 1:
        return a
    if a == 0 or b == 0:
        return 0
    product = [(ca * cb, na + nb) for ca, na in _terms(a) for cb, nb in _terms(b)]
    return _made(f"{_factor(a)}*{_factor(b)}", _simplified(product))


def add(a: Size, b: Size) -> Size:
    """`a + b`, folded where either is known."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if a == 0:
        return b
    if b == 0:
        return a
    return _made(f"{a}+{b}", _simplified([*_terms(a), *_terms(b)]))


def _factor(size: Size) -> str:
    """`size` as a factor of a product: a sum in parentheses."""
    text = str(size)
    return f"({text})" if isinstance(size, Sym) and len(size.terms) > 1 else text


def static(size: Size) -> int:
    """`size`, known to be static (a kernel the caller checked has no symbolic sizes)."""
    if not isinstance(size, int):
        raise TypeError(f"size {size} is known only at run time")
    return size
