#!/usr/bin/env python3
"""Reproduce the polynomial coefficients of ``tf_stitch/codegen/cpu_math_coeffs.h``.

Every polynomial is a near-minimax fit obtained with Lawson's algorithm (iteratively
re-weighted least squares) on Chebyshev nodes, minimising the *relative* error of the
approximated function in float64.  The coefficients are rounded to float32 one at a
time (refitting the rest after each rounding) and printed as the C++ ``constexpr float``
declarations used in the header, lowest degree first.  The rational functions of erf and
erfc are fitted the same way, with Loeb's linearisation (weighted least squares of
``N - f*D``, divided by the previous ``D``) inside the Lawson iteration; their denominator
coefficients are rounded first, then the numerator is refitted for the rounded
denominator.  The derived constants of the header (ln 2 split, range limits, TF's
softplus threshold) are printed as well.

Run ``python tools/fit_math_coeffs.py``; only numpy and the standard library are used and
the output is deterministic.  tests/codegen/test_cpu_math.py checks that the header
carries exactly these values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

NODES = 6000
LAWSON_ITERATIONS = 80

# Parameters shared with the header (keep in sync with cpu_math.h and cpu_math_coeffs.h).
EXP_REDUCED_HALF_WIDTH = math.log(2.0) / 2.0 * 1.01
LOG_REDUCED_LO = math.sqrt(0.5) - 1.0
LOG_REDUCED_HI = math.sqrt(2.0) - 1.0
TANH_POLY_LIMIT = 0.9
# erf(x) = x * (1/4 + N(x^2)/D(x^2)) for |x| <= ERF_SAT (erf rounds to +-1 beyond 3.9192),
# and x + x*P(x^2) (P of degree 1) for |x| < ERF_SMALL.
ERF_SAT = 3.92
ERF_LINEAR = 0.25
ERF_SMALL = 2.0**-7
# erfc(a) = 2^n * c*exp(r) * D(a)/(a*D(a) + N(a)), c = 1/sqrt(pi) in float32, fitted on
# [0, ERFC_FIT_HI] (covers kErfcHi); D(0) = ERFC_D0 puts D(0) and N(0) = ERFC_D0 * c near
# the top of their binades, which lowers their rounding errors for small arguments.
ERFC_FIT_HI = 9.2
ERFC_D0 = 1.75
RATIONAL_ITERATIONS = 150


@dataclass(frozen=True)
class Fit:
    """One fitted polynomial: its C name, coefficients (low degree first) and error."""

    name: str
    coeffs: tuple[float, ...]
    max_rel_error: float
    comment: str


def chebyshev_nodes(lo: float, hi: float, n: int = NODES) -> np.ndarray:
    """Return ``n`` Chebyshev nodes of the first kind mapped onto ``[lo, hi]``."""
    k = np.arange(n, dtype=np.float64)
    return (lo + hi) / 2.0 + (hi - lo) / 2.0 * np.cos(np.pi * (k + 0.5) / n)


def lawson_fit(basis: np.ndarray, target: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Fit ``basis @ c ~= target`` minimising ``max |scale * (basis @ c - target)|``.

    Lawson's algorithm: repeated weighted least squares where each point's weight is
    multiplied by its current absolute error, which converges towards the minimax fit.
    """
    weights = np.full(len(target), 1.0 / len(target))
    coeffs = np.zeros(basis.shape[1])
    for _ in range(LAWSON_ITERATIONS):
        row = np.sqrt(weights) * scale
        coeffs, *_ = np.linalg.lstsq(basis * row[:, None], target * row, rcond=None)
        err = np.abs((basis @ coeffs - target) * scale)
        weights = weights * err
        weights /= weights.sum()
    return coeffs


def powers(t: np.ndarray, degree: int) -> np.ndarray:
    """Vandermonde matrix ``[t**0, ..., t**degree]`` (increasing powers)."""
    return np.vander(t, degree + 1, increasing=True)


def to_f32(value: float) -> float:
    """Round a float64 value to the nearest float32 value."""
    return float(np.float32(value))


def fit_rounded(basis: np.ndarray, target: np.ndarray, scale: np.ndarray) -> tuple[float, ...]:
    """Minimax fit whose coefficients are rounded to float32 one at a time.

    After rounding coefficient ``i`` the remaining ones are refitted with the rounded
    ones held fixed, so later coefficients absorb the rounding error of earlier ones.
    """
    fixed: list[float] = []
    residual = target.copy()
    for i in range(basis.shape[1]):
        coeffs = lawson_fit(basis[:, i:], residual, scale)
        fixed.append(to_f32(coeffs[0]))
        residual = residual - fixed[-1] * basis[:, i]
    return tuple(fixed)


def relative_error(approx: np.ndarray, exact: np.ndarray) -> float:
    """Max relative error of ``approx`` against ``exact``."""
    return float(np.max(np.abs(approx / exact - 1.0)))


def fit_expm1() -> Fit:
    """expm1(r) ~= r + r^2 * Q(r) on |r| <= ln2/2 (Q of degree 5)."""
    r = chebyshev_nodes(-EXP_REDUCED_HALF_WIDTH, EXP_REDUCED_HALF_WIDTH)
    exact = np.expm1(r)
    basis = powers(r, 5) * (r * r)[:, None]
    c = fit_rounded(basis, exact - r, 1.0 / exact)
    err = relative_error(r + basis @ np.array(c), exact)
    return Fit("kExpm1Q", c, err, "expm1(r) = r + r^2*Q(r), |r| <= ln2/2")


def fit_log() -> Fit:
    """log1p(f) ~= f + f^2 * Q(f) on f in [sqrt(1/2)-1, sqrt(2)-1] (Q of degree 8)."""
    f = chebyshev_nodes(LOG_REDUCED_LO, LOG_REDUCED_HI)
    exact = np.log1p(f)
    basis = powers(f, 8) * (f * f)[:, None]
    c = fit_rounded(basis, exact - f, 1.0 / exact)
    err = relative_error(f + basis @ np.array(c), exact)
    return Fit("kLogQ", c, err, "log(1+f) = f + f^2*Q(f), f in [sqrt(.5)-1, sqrt(2)-1]")


def fit_odd(name: str, fn: Callable[[float], float], limit: float, degree: int, lead: int) -> Fit:
    """Fit an odd function on ``(0, limit]`` as ``x + x^lead * P(x^2)``.

    Keeping ``x`` outside the polynomial makes the float32 evaluation exact to first order
    for tiny ``x``, since ``P(0)`` is then only a small correction term.
    """
    x = chebyshev_nodes(1e-4, limit)
    exact = np.array([fn(v) for v in x])
    basis = powers(x * x, degree) * (x**lead)[:, None]
    c = fit_rounded(basis, exact - x, 1.0 / exact)
    err = relative_error(x + basis @ np.array(c), exact)
    return Fit(name, c, err, f"x + x^{lead}*P(x^2), |x| <= {limit}")


def weighted_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least-squares solution of ``a @ c ~= b`` with column scaling (monomials of x ~ 10)."""
    norms = np.linalg.norm(a, axis=0)
    norms[norms == 0.0] = 1.0
    c, *_ = np.linalg.lstsq(a / norms, b, rcond=None)
    return c / norms


def rational_fit(
    t: np.ndarray,
    target: np.ndarray,
    scale: np.ndarray,
    degrees: tuple[int, int],
    num_fixed: dict[int, float],
    den_fixed: dict[int, float],
) -> tuple[np.ndarray, np.ndarray]:
    """Near-minimax ``N(t)/D(t) ~= target`` minimising ``max |scale * (N/D - target)|``.

    ``degrees`` = (deg N, deg D); coefficients listed in ``num_fixed`` / ``den_fixed``
    (index -> value) are held fixed (``den_fixed`` must fix at least one, which sets the
    normalisation).  Each Lawson iteration solves the linearised weighted least-squares
    problem ``(N - target*D) / D_previous`` for the free coefficients.
    """
    bn, bd = powers(t, degrees[0]), powers(t, degrees[1])
    n_free = [i for i in range(degrees[0] + 1) if i not in num_fixed]
    d_free = [j for j in range(degrees[1] + 1) if j not in den_fixed]
    fixed_n = sum((c * bn[:, i] for i, c in num_fixed.items()), np.zeros_like(t))
    fixed_d = sum((c * bd[:, j] for j, c in den_fixed.items()), np.zeros_like(t))
    lhs = np.hstack([bn[:, n_free], -target[:, None] * bd[:, d_free]])
    rhs = target * fixed_d - fixed_n
    weights = np.full(len(t), 1.0 / len(t))
    den_prev = np.ones_like(t)
    best = (math.inf, np.zeros(degrees[0] + 1), np.zeros(degrees[1] + 1))
    for _ in range(RATIONAL_ITERATIONS):
        row = np.sqrt(weights) * scale / np.abs(den_prev)
        c = weighted_lstsq(lhs * row[:, None], rhs * row)
        num, den = np.zeros(degrees[0] + 1), np.zeros(degrees[1] + 1)
        for i, v in num_fixed.items():
            num[i] = v
        for j, v in den_fixed.items():
            den[j] = v
        num[n_free], den[d_free] = c[: len(n_free)], c[len(n_free) :]
        den_prev = bd @ den
        err = np.abs(scale * ((bn @ num) / den_prev - target))
        if err.max() < best[0]:
            best = (float(err.max()), num, den)
        weights = weights * err
        weights /= weights.sum()
    return best[1], best[2]


def fit_rational_rounded(
    t: np.ndarray,
    target: np.ndarray,
    scale: np.ndarray,
    degrees: tuple[int, int],
    num_fixed: dict[int, float],
    den0: float,
) -> tuple[tuple[float, ...], tuple[float, ...], float]:
    """Rational fit with float32 coefficients: ``(numerator, denominator, max error)``.

    The denominator is normalised by ``D(0) = den0``; its other coefficients are rounded
    one at a time (refitting all remaining ones), then the numerator is refitted for the
    rounded denominator and rounded like a polynomial fit (``fit_rounded``).
    """
    den_fixed = {0: den0}
    for j in range(1, degrees[1] + 1):
        _, den = rational_fit(t, target, scale, degrees, num_fixed, den_fixed)
        den_fixed[j] = to_f32(den[j])
    den_c = tuple(den_fixed[j] for j in range(degrees[1] + 1))
    den_v = powers(t, degrees[1]) @ np.array(den_c)
    basis = powers(t, degrees[0]) / den_v[:, None]
    num: list[float] = []
    residual = target.copy()
    for i in range(degrees[0] + 1):
        if i in num_fixed:
            num.append(num_fixed[i])
        else:
            num.append(to_f32(lawson_fit(basis[:, i:], residual, scale)[0]))
        residual = residual - num[-1] * basis[:, i]
    err = float(np.max(np.abs(scale * (basis @ np.array(num) - target))))
    return tuple(num), den_c, err


def fit_erf() -> list[Fit]:
    """erf(x) ~= x * (1/4 + N(y)/D(y)), y = x^2, |x| <= ERF_SAT; N, D of degree 5.

    Splitting off x/4 keeps N/D small where erf(x)/x is small (large x), so the rounding
    errors of N and D count only in proportion to N/D there.  (For tiny x they count
    almost fully, which is why |x| < ERF_SMALL uses the polynomial kErfS.)  N(0) is
    float32(2/sqrt(pi) - 1/4), D(0) = 1.  Error weight: relative error of erf.
    """
    x = chebyshev_nodes(1e-4, ERF_SAT)
    erf = np.array([math.erf(v) for v in x])
    n0 = to_f32(2.0 / math.sqrt(math.pi) - ERF_LINEAR)
    num, den, err = fit_rational_rounded(x * x, erf / x - ERF_LINEAR, x / erf, (5, 5), {0: n0}, 1.0)
    comment = f"erf(x) = x*(1/4 + N(x^2)/D(x^2)), |x| <= {ERF_SAT}"
    return [Fit("kErfN", num, err, comment), Fit("kErfD", den, err, comment)]


def fit_erfc_exp() -> Fit:
    """c * exp(r) ~= c + c*r + r^2 * Q(r), |r| <= ln2/2, c = float32(1/sqrt(pi)) (Q degree 4)."""
    c = to_f32(1.0 / math.sqrt(math.pi))
    r = chebyshev_nodes(-EXP_REDUCED_HALF_WIDTH, EXP_REDUCED_HALF_WIDTH)
    exact = c * np.exp(r)
    basis = powers(r, 4) * (r * r)[:, None]
    q = fit_rounded(basis, exact - c - c * r, 1.0 / exact)
    err = relative_error(c + c * r + basis @ np.array(q), exact)
    return Fit("kErfcE", (c, c, *q), err, "c*exp(r), c = 1/sqrt(pi), |r| <= ln2/2")


def fit_erfc() -> list[Fit]:
    """exp(a^2) * erfc(a) / c ~= D(a) / (a*D(a) + N(a)), a in [0, ERFC_FIT_HI]; N, D degree 4.

    N/D approximates phi(a) = c / (exp(a^2) erfc(a)) - a, which falls from c to ~1/(2a):
    the rounding errors of N and D enter the result only with weight phi/(a + phi).
    The fit minimises the relative error of the whole fraction.
    """
    c = to_f32(1.0 / math.sqrt(math.pi))
    a = chebyshev_nodes(0.0, ERFC_FIT_HI)
    g = np.exp(a * a) * np.array([math.erfc(v) for v in a]) / c
    num, den, err = fit_rational_rounded(a, 1.0 / g - a, g, (4, 4), {}, ERFC_D0)
    comment = f"exp(a^2)*erfc(a)*sqrt(pi) = D(a)/(a*D(a) + N(a)), a in [0, {ERFC_FIT_HI}]"
    return [Fit("kErfcN", num, err, comment), Fit("kErfcD", den, err, comment)]


def c_literal(value: float) -> str:
    """Format a float32-representable value as a C++ hex-float literal."""
    mantissa, exponent = value.hex().split("p")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}p{exponent}f"


def all_fits() -> list[Fit]:
    """Compute every polynomial used by the header."""
    return [
        fit_expm1(),
        fit_log(),
        fit_odd("kTanhP", math.tanh, TANH_POLY_LIMIT, 6, lead=3),
        fit_odd("kErfS", math.erf, ERF_SMALL, 1, lead=1),
        *fit_erf(),
        fit_erfc_exp(),
        *fit_erfc(),
    ]


def derived_constants() -> list[tuple[str, float, str]]:
    """Non-fitted constants of the header as (name, float32 value, explanation)."""
    ln2 = math.log(2.0)
    ln2_hi = round(ln2 * 2.0**15) / 2.0**15  # 15 significant bits: n * hi exact, |n| < 512
    flt_min = float(np.finfo(np.float32).tiny)
    exp_lo = float(np.float32(math.log(flt_min)))
    if exp_lo < math.log(flt_min):
        exp_lo = float(np.nextafter(np.float32(exp_lo), np.float32(0.0)))
    eps = float(np.finfo(np.float32).eps)
    softplus = float(np.float32(math.log(eps)) + np.float32(2.0))
    return [
        ("kLn2Hi", ln2_hi, "ln 2, high part"),
        ("kLn2Lo", to_f32(ln2 - ln2_hi), "ln 2, low part"),
        ("kLog2e", to_f32(1.0 / ln2), "1 / ln 2"),
        ("kExpLo", exp_lo, "smallest x with exp(x) >= FLT_MIN"),
        ("kErfcHi", erfc_limit(flt_min), "largest x with erfc(x) >= FLT_MIN"),
        ("kErfSmall", ERF_SMALL, "erf(x) = x + x*P(x^2) below"),
        ("kErfSat", to_f32(ERF_SAT), "erf(x) = +-1 above; end of the erf fit"),
        ("kSoftplusThreshold", softplus, "log(FLT_EPSILON) + 2 in float32"),
    ]


def erfc_limit(flt_min: float) -> float:
    """Largest float32 x with erfc(x) >= FLT_MIN (bisection on the float32 bit patterns)."""
    lo = int(np.float32(9.0).view(np.uint32))
    hi = int(np.float32(9.5).view(np.uint32))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        value = float(np.uint32(mid).view(np.float32))
        lo, hi = (mid, hi) if math.erfc(value) >= flt_min else (lo, mid)
    return float(np.uint32(lo).view(np.float32))


def declaration(name: str, value: float) -> str:
    """``constexpr float NAME = LITERAL;`` as written in the header."""
    return f"constexpr float {name} = {c_literal(value)};"


def print_fit(fit: Fit) -> None:
    """Print one fit as C++ constants ``<name>0``, ``<name>1``, ..."""
    print(f"// {fit.comment}; max rel. error of the rounded fit {fit.max_rel_error:.2e}")
    for i, c in enumerate(fit.coeffs):
        print(f"{declaration(f'{fit.name}{i}', c)}  // {c:.9g}")


def main() -> None:
    """Print all fitted coefficients and derived constants as C++ source."""
    for name, value, why in derived_constants():
        print(f"{declaration(name, value)}  // {value:.9g}: {why}")
    for fit in all_fits():
        print_fit(fit)


if __name__ == "__main__":
    main()
