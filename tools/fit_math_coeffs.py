#!/usr/bin/env python3
"""Reproduce the polynomial coefficients used by ``tf_stitch/codegen/cpu_math.h``.

Every polynomial is a near-minimax fit obtained with Lawson's algorithm (iteratively
re-weighted least squares) on Chebyshev nodes, minimising the *relative* error of the
approximated function in float64.  The coefficients are rounded to float32 one at a
time (refitting the rest after each rounding) and printed as the C++ ``constexpr float``
declarations used in the header, lowest degree first.  The derived constants of the
header (ln 2 split, range limits, TF's softplus threshold) are printed as well.

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

# Parameters shared with the header (keep in sync with cpu_math.h).
EXP_REDUCED_HALF_WIDTH = math.log(2.0) / 2.0 * 1.01
LOG_REDUCED_LO = math.sqrt(0.5) - 1.0
LOG_REDUCED_HI = math.sqrt(2.0) - 1.0
TANH_POLY_LIMIT = 0.9
ERF_POLY_LIMIT = 1.0
ERFC_K = 2.0
ERFC_LO = 0.5
ERFC_HI = 10.1


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


def fit_erfc() -> Fit:
    """(x + K) * exp(x^2) * erfc(x) ~= P(t), t = (x - K)/(x + K), x in [0.5, 10.1]."""
    x = chebyshev_nodes(ERFC_LO, ERFC_HI)
    t = (x - ERFC_K) / (x + ERFC_K)
    exact = (x + ERFC_K) * np.exp(x * x) * np.array([math.erfc(v) for v in x])
    basis = powers(t, 8)
    c = fit_rounded(basis, exact, 1.0 / exact)
    err = relative_error(basis @ np.array(c), exact)
    return Fit("kErfcP", c, err, f"(x+K)*exp(x^2)*erfc(x) = P((x-K)/(x+K)), K = {ERFC_K}")


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
        fit_odd("kErfP", math.erf, ERF_POLY_LIMIT, 6, lead=1),
        fit_erfc(),
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
