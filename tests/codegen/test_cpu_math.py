"""Tests for ``tf_stitch/codegen/cpu_math.h``.

A small C++ driver is compiled against the header with the system ``c++``.  It applies
every ``ts_*`` function to float32 inputs read from a file and writes the outputs back.
The tests check

* accuracy against float64 references (numpy / ``math``) over ~1.3e6 inputs covering the
  whole float range, for an optimised FMA build and for a portable build without FMA
  contraction;
* special values (NaN, +-inf, +-0, overflow, underflow, domain errors) against
  TensorFlow's CPU ops;
* that ``-fopt-info-vec-optimized`` reports every ``ts_*`` loop as vectorized.

``pytest -m slow -s`` additionally prints a throughput comparison with scalar libm.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
HEADER_DIR = REPO_ROOT / "tf_stitch" / "codegen"
FIT_SCRIPT = REPO_ROOT / "tools" / "fit_math_coeffs.py"
FUNCS = ("exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "erfc", "softplus")
COMMON_FLAGS = ["-std=c++17", "-fno-math-errno", "-fno-trapping-math"]
NATIVE_FLAGS = ["-O3", *COMMON_FLAGS, "-fopenmp-simd", "-march=native"]
PORTABLE_FLAGS = ["-O2", *COMMON_FLAGS, "-ffp-contract=off"]

FLT_MIN = float(np.finfo(np.float32).tiny)
FLT_MAX = float(np.finfo(np.float32).max)
MAX_ULP = 4.0
# erfc's requirement is a relative error <= 4e-7 for results >= 1e-30; it is checked for
# every normal result.
ERFC_MAX_REL = 4e-7
# TensorFlow's softplus threshold, log(FLT_EPSILON) + 2 evaluated in float32.
SOFTPLUS_THRESHOLD = float(np.float32(math.log(2.0**-23)) + np.float32(2.0))
# Max distance (ulps) tolerated between our results and TF's for ordinary values: TF's
# own Eigen approximations (tanh, erf, sigmoid, ...) are a few ulps off.
TF_ORDINARY_ULP = 8.0

# function -> (scalar libm expression to compare with, benchmark input range).
BENCH_RANGES: dict[str, tuple[str, float, float]] = {
    "exp": ("expf(v)", -80.0, 80.0),
    "expm1": ("expm1f(v)", -10.0, 10.0),
    "log": ("logf(v)", 1e-3, 1e3),
    "log1p": ("log1pf(v)", -0.9, 100.0),
    "tanh": ("tanhf(v)", -5.0, 5.0),
    "sigmoid": ("1.0f / (1.0f + expf(-v))", -20.0, 20.0),
    "erf": ("erff(v)", -4.0, 4.0),
    "erfc": ("erfcf(v)", -4.0, 10.0),
    "softplus": ("log1pf(expf(v))", -20.0, 20.0),
}

DRIVER_PRELUDE = """\
#include "cpu_math.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using LoopFn = void (*)(const float*, float*, long);
struct Entry { const char* name; LoopFn fn; float lo; float hi; };
"""

LOOP_TEMPLATE = (
    "__attribute__((noinline)) void loop_{name}(const float* __restrict in, "
    "float* __restrict out, long n) {{ for (long i = 0; i < n; ++i) {{ "
    "const float v = in[i]; out[i] = {expr}; }} }}"
)

DRIVER_MAIN = """\
static std::vector<float> read_floats(const char* path) {
  std::vector<float> data;
  FILE* f = std::fopen(path, "rb");
  if (!f) return data;
  float buf[4096];
  size_t got;
  while ((got = std::fread(buf, sizeof(float), 4096, f)) > 0) {
    data.insert(data.end(), buf, buf + got);
  }
  std::fclose(f);
  return data;
}

static int run_eval(const char* in_path, const char* out_path) {
  const std::vector<float> in = read_floats(in_path);
  std::vector<float> out(in.size());
  FILE* f = std::fopen(out_path, "wb");
  if (!f) return 1;
  for (const Entry& e : kTsEntries) {
    e.fn(in.data(), out.data(), static_cast<long>(in.size()));
    std::fwrite(out.data(), sizeof(float), out.size(), f);
  }
  std::fclose(f);
  return 0;
}

static double time_loop(const Entry& e, long n) {
  std::vector<float> in(n), out(n);
  for (long i = 0; i < n; ++i) {
    const double frac = static_cast<double>((i * 2654435761L) % n) / static_cast<double>(n);
    in[i] = static_cast<float>(e.lo + (e.hi - e.lo) * frac);
  }
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    e.fn(in.data(), out.data(), n);
    const auto t1 = std::chrono::steady_clock::now();
    const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
    if (ns < best) best = ns;
  }
  volatile float sink = out[n / 2];
  (void)sink;
  return best / static_cast<double>(n);
}

static int run_bench(long n) {
  for (const Entry& e : kTsEntries) std::printf("ts %s %.4f\\n", e.name, time_loop(e, n));
  for (const Entry& e : kLibmEntries) std::printf("libm %s %.4f\\n", e.name, time_loop(e, n));
  std::printf("base fma %.4f\\n", time_loop(Entry{"fma", loop_base_fma, -1.0f, 1.0f}, n));
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "eval") == 0) return run_eval(argv[2], argv[3]);
  if (argc == 3 && std::strcmp(argv[1], "bench") == 0) return run_bench(std::atol(argv[2]));
  std::fprintf(stderr, "usage: %s eval IN OUT | bench N\\n", argv[0]);
  return 2;
}
"""


@dataclass(frozen=True)
class Build:
    """A compiled driver: executable, compiler diagnostics and the ts loop lines."""

    exe: Path
    diagnostics: str
    loop_lines: dict[str, int]


def driver_source() -> tuple[str, dict[str, int]]:
    """Return the C++ driver source and the (1-based) line of each ``ts_*`` loop."""
    lines = DRIVER_PRELUDE.splitlines()
    loop_lines: dict[str, int] = {}
    for name in FUNCS:
        lines.append(LOOP_TEMPLATE.format(name=f"ts_{name}", expr=f"ts_{name}(v)"))
        loop_lines[name] = len(lines)
    for name, (expr, _, _) in BENCH_RANGES.items():
        lines.append(LOOP_TEMPLATE.format(name=f"libm_{name}", expr=expr))
    lines.append(LOOP_TEMPLATE.format(name="base_fma", expr="v * 1.5f + 0.25f"))
    lines.append(entry_table("kTsEntries", "ts"))
    lines.append(entry_table("kLibmEntries", "libm"))
    return "\n".join(lines) + "\n" + DRIVER_MAIN, loop_lines


def entry_table(table: str, prefix: str) -> str:
    """C++ array of ``Entry`` records for every function, in ``FUNCS`` order."""
    rows = []
    for name in FUNCS:
        _, lo, hi = BENCH_RANGES[name]
        rows.append(f'{{"{name}", loop_{prefix}_{name}, {lo!r}f, {hi!r}f}}')
    return f"static const Entry {table}[] = {{{', '.join(rows)}}};"


def compile_driver(workdir: Path, flags: list[str]) -> Build:
    """Compile the driver with ``flags`` (plus vectorizer diagnostics) into ``workdir``."""
    cxx = shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler (c++) on PATH")
    source, loop_lines = driver_source()
    src = workdir / "driver.cc"
    src.write_text(source)
    exe = workdir / "driver"
    cmd = [cxx, *flags, "-fopt-info-vec-optimized", f"-I{HEADER_DIR}", str(src), "-o", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"compilation failed:\n{proc.stderr}"
    return Build(exe, proc.stdout + proc.stderr, loop_lines)


def run_driver(build: Build, inputs: np.ndarray, workdir: Path) -> dict[str, np.ndarray]:
    """Evaluate every ``ts_*`` function on ``inputs``; return outputs keyed by name."""
    in_path, out_path = workdir / "inputs.bin", workdir / "outputs.bin"
    inputs.astype("<f4").tofile(in_path)
    subprocess.run([str(build.exe), "eval", str(in_path), str(out_path)], check=True)
    out = np.fromfile(out_path, dtype="<f4").reshape(len(FUNCS), len(inputs))
    return dict(zip(FUNCS, out, strict=True))


# --------------------------------------------------------------------------- inputs


def special_inputs() -> np.ndarray:
    """Normal-range inputs with special or boundary results for some function."""
    th = SOFTPLUS_THRESHOLD
    values = [
        *(math.nan, math.inf, -math.inf, 0.0, -0.0, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX),
        *(1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 1e-10, -1e-10, 1e-30, -1e-30, 1e-37, -1e-37),
        *(4.0, -4.0, 9.5, -9.5, 10.0, -10.0, 20.0, -20.0, 100.0, -100.0, 1e30, -1e30),
        *(88.72283, 88.72284, 89.0, -87.3, -88.0, -89.0, -103.0, -104.0, -110.0),
        *(th, -th, -1.5, 3.0, -3.0, 30.0, -30.0, 1e-5, -1e-5),
    ]
    arr = np.array(values, dtype=np.float32)
    base = arr[np.isfinite(arr) & (np.abs(arr) >= 1.0) & (np.abs(arr) < FLT_MAX)]
    up = np.nextafter(base, np.float32(math.inf))
    down = np.nextafter(base, np.float32(-math.inf))
    return np.concatenate([arr, up, down])


def accuracy_inputs() -> np.ndarray:
    """~1.3e6 float32 inputs: log-uniform over +-[1e-38, 3e38], dense grids, specials."""
    rng = np.random.default_rng(20240611)
    mags = np.exp(rng.uniform(math.log(1e-38), math.log(3e38), 1_000_000))
    signs = rng.choice(np.array([-1.0, 1.0]), mags.size)
    grids = [
        np.linspace(-20.0, 20.0, 200_001),  # interesting range of every function
        np.linspace(-104.0, 90.0, 40_001),  # exp / sigmoid under- and overflow
        1.0 + np.linspace(-0.3, 0.3, 20_001),  # log near 1
        -1.0 + np.geomspace(1e-7, 0.5, 20_001),  # log1p near -1
        np.geomspace(1e-38, 1.0, 20_001),  # tiny positive arguments
        np.geomspace(1.5e-45, FLT_MIN, 2_001),  # subnormal arguments (log, erf)
    ]
    parts = [mags * signs, *grids, special_inputs().astype(np.float64)]
    return np.concatenate(parts).astype(np.float32)


# ------------------------------------------------------------------------ references


def _vectorized(fn: Callable[[float], float]) -> Callable[[np.ndarray], np.ndarray]:
    """Lift a scalar ``math`` function to float64 arrays."""
    ufunc = np.frompyfunc(fn, 1, 1)
    return lambda x: ufunc(x).astype(np.float64)


def ref_sigmoid(x: np.ndarray) -> np.ndarray:
    """Exact-in-float64 logistic function."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def ref_softplus(x: np.ndarray) -> np.ndarray:
    """TensorFlow's softplus formula evaluated in float64 (float32 thresholds)."""
    th = SOFTPLUS_THRESHOLD
    mid = np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))
    return np.where(x > -th, x, np.where(x < th, np.exp(x), mid))


REFERENCES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "tanh": np.tanh,
    "sigmoid": ref_sigmoid,
    "erf": _vectorized(math.erf),
    "erfc": _vectorized(math.erfc),
    "softplus": ref_softplus,
}


def reference(name: str, x: np.ndarray) -> np.ndarray:
    """float64 reference values of function ``name`` at float32 inputs ``x``."""
    with np.errstate(all="ignore"):
        return REFERENCES[name](x.astype(np.float64))


# ---------------------------------------------------------------------- error metrics


def ulp_of(ref: np.ndarray) -> np.ndarray:
    """float32 ulp at |ref| (spacing of the binade containing the exact value)."""
    _, exponent = np.frexp(np.abs(ref))
    return np.ldexp(1.0, np.maximum(exponent - 24, -149))


def ulp_error(y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|y - ref| in float32 ulps of the exact value ``ref``."""
    return np.abs(y.astype(np.float64) - ref) / ulp_of(ref)


@dataclass(frozen=True)
class Masks:
    """Partition of the inputs by the kind of the exact result."""

    nan: np.ndarray
    inf: np.ndarray
    normal: np.ndarray
    subnormal: np.ndarray


def classify(ref: np.ndarray) -> Masks:
    """Split results into NaN, overflowing, normal and subnormal/zero ones."""
    with np.errstate(over="ignore"):
        ref32 = ref.astype(np.float32)
    nan = np.isnan(ref)
    inf = np.isinf(ref32)
    mag = np.abs(ref)
    return Masks(nan, inf, ~nan & ~inf & (mag >= FLT_MIN), ~nan & (mag < FLT_MIN))


def check_common(y: np.ndarray, ref: np.ndarray, masks: Masks) -> None:
    """NaN, overflow and subnormal-range results must match the reference."""
    assert np.isnan(y[masks.nan]).all(), "NaN expected"
    assert not np.isnan(y[~masks.nan]).any(), "unexpected NaN"
    with np.errstate(over="ignore"):
        assert (y[masks.inf] == ref[masks.inf].astype(np.float32)).all(), "overflow mismatch"
    sub_err = np.abs(y[masks.subnormal].astype(np.float64) - ref[masks.subnormal])
    assert (sub_err <= FLT_MIN).all(), "subnormal-range result is off"


def worst(x: np.ndarray, err: np.ndarray) -> str:
    """Describe the worst error and its input, for assertion messages."""
    i = int(np.argmax(err))
    return f"max error {err[i]:.3g} at x = {x[i]!r}"


# -------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def samples() -> np.ndarray:
    """Accuracy test inputs."""
    return accuracy_inputs()


@pytest.fixture(scope="session")
def references(samples: np.ndarray) -> dict[str, np.ndarray]:
    """float64 references for every function on ``samples``."""
    return {name: reference(name, samples) for name in FUNCS}


@pytest.fixture(scope="session")
def native_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """Driver built with the flags generated kernels use (FMA, vectorized)."""
    return compile_driver(tmp_path_factory.mktemp("native"), NATIVE_FLAGS)


@pytest.fixture(scope="session")
def portable_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """Driver built for baseline x86-64/any target without FMA contraction."""
    return compile_driver(tmp_path_factory.mktemp("portable"), PORTABLE_FLAGS)


@pytest.fixture(scope="session")
def outputs(
    request: pytest.FixtureRequest,
    samples: np.ndarray,
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str], dict[str, np.ndarray]]:
    """Outputs of a build (``"native"`` or ``"portable"``) on ``samples``, cached."""
    cache: dict[str, dict[str, np.ndarray]] = {}

    def get(kind: str) -> dict[str, np.ndarray]:
        if kind not in cache:
            build = request.getfixturevalue(f"{kind}_build")
            cache[kind] = run_driver(build, samples, tmp_path_factory.mktemp(f"run_{kind}"))
        return cache[kind]

    return get


@pytest.fixture(scope="session")
def tf_special() -> dict[str, np.ndarray]:
    """TensorFlow's results on ``special_inputs()`` (skips when TF is unavailable)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    tf = pytest.importorskip("tensorflow")
    return tf_outputs(tf, special_inputs())


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("kind", ["native", "portable"])
@pytest.mark.parametrize("name", FUNCS)
def test_accuracy(
    name: str,
    kind: str,
    samples: np.ndarray,
    references: dict[str, np.ndarray],
    outputs: Callable[[str], dict[str, np.ndarray]],
) -> None:
    """Max error <= 4 ulp wherever the exact result is a normal float."""
    y, ref = outputs(kind)[name], references[name]
    masks = classify(ref)
    check_common(y, ref, masks)
    if name == "erfc":
        check_erfc_relative(samples, y, ref)
        return
    err = ulp_error(y[masks.normal], ref[masks.normal])
    assert err.max() <= MAX_ULP, f"ts_{name}: {worst(samples[masks.normal], err)} ulp"


def check_erfc_relative(x: np.ndarray, y: np.ndarray, ref: np.ndarray) -> None:
    """erfc: relative error <= 4e-7 for every normal result."""
    sel = ref >= FLT_MIN
    rel = np.abs(y[sel].astype(np.float64) / ref[sel] - 1.0)
    assert rel.max() <= ERFC_MAX_REL, f"ts_erfc: {worst(x[sel], rel)}"


@pytest.mark.parametrize("name", ["expm1", "log1p", "tanh", "erf"])
def test_tiny_arguments(name: str, native_build: Build, tmp_path: Path) -> None:
    """Functions that behave like ``c*x`` near 0 are accurate to 1 ulp for tiny |x|."""
    mags = np.geomspace(1e-37, 1e-3, 4001)
    x = np.concatenate([mags, -mags, [1e-10, -1e-10]]).astype(np.float32)
    y = run_driver(native_build, x, tmp_path)[name]
    err = ulp_error(y, reference(name, x))
    assert err.max() <= 1.0, f"ts_{name}: {worst(x, err)} ulp"


def test_softplus_threshold(native_build: Build, tmp_path: Path) -> None:
    """The softplus branches switch exactly at TF's thresholds t and -t."""
    th = np.float32(SOFTPLUS_THRESHOLD)
    x = np.array(
        [-th, np.nextafter(-th, np.float32(math.inf)), th, np.nextafter(th, np.float32(-math.inf))],
        dtype=np.float32,
    )
    y = run_driver(native_build, x, tmp_path)["softplus"].astype(np.float64)
    xd = x.astype(np.float64)
    middle = np.log1p(np.exp(xd))
    assert y[0] != x[0], "x == -t must take the log1p(exp(x)) branch"
    assert y[1] == x[1], "x > -t must return x"
    assert ulp_error(y[2:3], middle[2:3])[0] <= 1.0, "x == t must take the log1p branch"
    assert ulp_error(y[3:4], np.exp(xd[3:4]))[0] <= 1.0, "x < t must return exp(x)"
    assert ulp_error(y[3:4], middle[3:4])[0] > 2.0, "exp and log1p branches must differ"


def header_constant(name: str) -> float:
    """Value of ``constexpr float NAME`` in the header."""
    literal = float_constants((HEADER_DIR / "cpu_math_coeffs.h").read_text())[name]
    return float.fromhex(literal.rstrip("f"))


def ulp_window(center: float, count: int) -> np.ndarray:
    """The ``count`` float32 values on each side of ``center`` (and ``center`` itself)."""
    bits = np.array(center, dtype=np.float32).view(np.int32)
    return (bits + np.arange(-count, count + 1, dtype=np.int32)).view(np.float32)


@pytest.mark.parametrize("kind", ["native", "portable"])
def test_erf_erfc_switch_points(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Dense checks where erf/erfc change formula or clamp: accuracy and exact limits."""
    build = request.getfixturevalue(f"{kind}_build")
    small, sat, hi = (header_constant(n) for n in ("kErfSmall", "kErfSat", "kErfcHi"))
    centers = [small, sat, 3.9192, 0.5, 1.0, 2.0, hi]
    x = np.concatenate([ulp_window(c, 2000) for c in centers])
    x = np.concatenate([x, -x]).astype(np.float32)
    out = run_driver(build, x, tmp_path)
    for name in ("erf", "erfc"):
        y, ref = out[name], reference(name, x)
        masks = classify(ref)
        check_common(y, ref, masks)
        err = ulp_error(y[masks.normal], ref[masks.normal])
        assert err.max() <= MAX_ULP, f"ts_{name}: {worst(x[masks.normal], err)} ulp"
    erf = out["erf"]
    assert (erf[np.abs(x) > sat] == np.sign(x[np.abs(x) > sat])).all(), "erf must saturate"
    erfc = out["erfc"]
    assert (erfc[x > hi] == 0.0).all() and (erfc[x < -hi] == 2.0).all()
    assert (erfc[(x > 0) & (x <= hi)] >= FLT_MIN).all(), "erfc is normal up to kErfcHi"


def test_nan_payloads(native_build: Build, tmp_path: Path) -> None:
    """Every NaN (any sign or payload, quiet or signalling) gives NaN, e.g. through
    ts_erfc's integer clamp of |x|."""
    quiet = [0x7FC00000, 0x7FC00001, 0x7FC0FFFF, 0x7FFF0000, 0x7FFFFFFF]
    signalling = [0x7F800001, 0x7FA00000]
    bits = np.array(quiet + signalling, dtype=np.uint32)
    x = np.concatenate([bits, bits | np.uint32(0x80000000)]).view(np.float32)
    out = run_driver(native_build, x, tmp_path)
    for name in FUNCS:
        assert np.isnan(out[name]).all(), f"ts_{name} loses a NaN: {out[name]}"


def tf_outputs(tf: ModuleType, x: np.ndarray) -> dict[str, np.ndarray]:
    """TensorFlow CPU results of every function on ``x``."""
    ops = {name: getattr(tf.math, name) for name in FUNCS}
    with tf.device("/CPU:0"):
        tensor = tf.constant(x, dtype=tf.float32)
        return {name: op(tensor).numpy() for name, op in ops.items()}


def is_special(x: float, value: float) -> bool:
    """Whether TF's ``value`` at ``x`` is a special result that must match exactly."""
    if not math.isfinite(value) or not math.isfinite(x) or x == 0.0:
        return True
    return abs(value) < FLT_MIN or value == x or value in (-1.0, 1.0, 2.0, 0.5)


def same_special(ours: float, theirs: float) -> bool:
    """Exact match, NaN == NaN, and subnormals equal to zero of the same sign."""
    if math.isnan(theirs):
        return math.isnan(ours)
    if abs(theirs) < FLT_MIN:
        return abs(ours) < FLT_MIN and math.copysign(1.0, ours) == math.copysign(1.0, theirs)
    return ours == theirs


@pytest.mark.parametrize("name", FUNCS)
def test_matches_tensorflow(
    name: str, native_build: Build, tf_special: dict[str, np.ndarray], tmp_path: Path
) -> None:
    """Special values equal TF's; ordinary values are within a few ulps of TF's."""
    x = special_inputs()
    ours = run_driver(native_build, x, tmp_path)[name]
    theirs = tf_special[name]
    for xi, a, b in zip(x.tolist(), ours.tolist(), theirs.tolist(), strict=True):
        if is_special(xi, b):
            assert same_special(a, b), f"ts_{name}({xi!r}) = {a!r}, TF gives {b!r}"
        else:
            dist = abs(a - b) / float(ulp_of(np.array(b)))
            assert dist <= TF_ORDINARY_ULP, f"ts_{name}({xi!r}) = {a!r}, TF gives {b!r}"


@pytest.mark.parametrize("name", FUNCS)
def test_vectorized(name: str, native_build: Build) -> None:
    """``-fopt-info-vec-optimized`` reports the loop calling ``ts_<name>`` vectorized."""
    line = native_build.loop_lines[name]
    pattern = rf"driver\.cc:{line}:\d+: optimized: loop vectorized"
    assert re.search(pattern, native_build.diagnostics), (
        f"loop over ts_{name} (driver.cc:{line}) not vectorized:\n{native_build.diagnostics}"
    )


def float_constants(source: str) -> dict[str, str]:
    """``constexpr float NAME = VALUE;`` declarations in C++ ``source``, by name."""
    return dict(re.findall(r"constexpr float (\w+) = ([^;]+);", source))


def test_constants_match_fit_script() -> None:
    """The header's coefficients are exactly those tools/fit_math_coeffs.py prints."""
    proc = subprocess.run(
        [sys.executable, str(FIT_SCRIPT)], capture_output=True, text=True, check=True
    )
    expected = float_constants(proc.stdout)
    actual = float_constants((HEADER_DIR / "cpu_math_coeffs.h").read_text())
    assert len(expected) > 40
    diff = {k: (v, actual.get(k)) for k, v in expected.items() if actual.get(k) != v}
    assert not diff, f"header constants differ from the fit script (printed, header): {diff}"


@pytest.mark.slow
def test_throughput(native_build: Build) -> None:
    """Print ns/element (1M elements, one thread) for ts_* and scalar libm loops.

    Every ts_* loop must beat its scalar libm counterpart (which GCC cannot vectorize
    without -ffast-math) and stay within a small factor of a trivial vectorized loop.
    """
    proc = subprocess.run(
        [str(native_build.exe), "bench", "1000000"], capture_output=True, text=True, check=True
    )
    times = {tuple(line.split()[:2]): float(line.split()[2]) for line in proc.stdout.splitlines()}
    base = times[("base", "fma")]
    print(f"\nplain vectorized loop (x*1.5+0.25): {base:.3f} ns/element")
    print(f"{'function':10s} {'ts ns/el':>9s} {'libm ns/el':>11s} {'speedup':>8s}")
    for name in FUNCS:
        ours, libm = times[("ts", name)], times[("libm", name)]
        print(f"{name:10s} {ours:9.3f} {libm:11.3f} {libm / ours:8.1f}x")
        assert ours < libm, f"ts_{name} slower than scalar libm"
        assert ours < 20 * base + 1.0, f"ts_{name} far slower than a plain vectorized loop"
