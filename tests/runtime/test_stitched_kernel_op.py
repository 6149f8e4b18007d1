"""The StitchedKernel op with real, hand-written kernels compiled by `compile_kernel`."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from tf_stitch.runtime import integrity, op_library, prebuilt
from tf_stitch.runtime.kernel_compiler import compile_kernel, kernel_key, kernel_path

# y[s0, 5] = x[s0, 5] + 1; one unit is one row.
ADD_ONE = r"""
#include <cstdint>
extern "C" int ts_abi_version(void) { return 1; }
extern "C" void ts_run(const void* const* in, void* const* out, const int64_t* symbols,
                       int64_t begin, int64_t end) {
  const float* x = static_cast<const float*>(in[0]);
  float* y = static_cast<float*>(out[0]);
  for (int64_t i = begin * 5; i < end * 5; ++i) y[i] = x[i] + 1.0f;
}
"""

# sum[s0, s1] = a[s0, s1] + b[s1] (broadcast); rowsum[s0] (float64) = sum over the row of sum.
BIAS_ROWSUM = r"""
#include <cstdint>
extern "C" int ts_abi_version(void) { return 1; }
extern "C" void ts_run(const void* const* in, void* const* out, const int64_t* symbols,
                       int64_t begin, int64_t end) {
  const float* a = static_cast<const float*>(in[0]);
  const float* b = static_cast<const float*>(in[1]);
  float* sum = static_cast<float*>(out[0]);
  double* rowsum = static_cast<double*>(out[1]);
  const int64_t cols = symbols[1];
  for (int64_t r = begin; r < end; ++r) {
    double acc = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      sum[r * cols + c] = a[r * cols + c] + b[c];
      acc += sum[r * cols + c];
    }
    rowsum[r] = acc;
  }
}
"""

# No inputs: out[6] (int64) = i * i, all in a single unit (unit_dims = []).
SQUARES = r"""
#include <cstdint>
extern "C" int ts_abi_version(void) { return 1; }
extern "C" void ts_run(const void* const* in, void* const* out, const int64_t* symbols,
                       int64_t begin, int64_t end) {
  int64_t* y = static_cast<int64_t*>(out[0]);
  for (int64_t i = 0; i < 6; ++i) y[i] = i * i;
}
"""

# ADD_ONE over a flat range (one unit per element), counting its ts_run calls.
COUNTING_ADD_ONE = r"""
#include <atomic>
#include <cstdint>
static std::atomic<int64_t> calls{0};
extern "C" int64_t ts_test_calls(void) { return calls.load(); }
extern "C" int ts_abi_version(void) { return 1; }
extern "C" void ts_run(const void* const* in, void* const* out, const int64_t* symbols,
                       int64_t begin, int64_t end) {
  calls.fetch_add(1);
  const float* x = static_cast<const float*>(in[0]);
  float* y = static_cast<float*>(out[0]);
  for (int64_t i = begin; i < end; ++i) y[i] = x[i] + 1.0f;
}
"""

NO_RUN = r"""
extern "C" int ts_abi_version(void) { return 1; }
"""

ABI_TWO = r"""
#include <cstdint>
extern "C" int ts_abi_version(void) { return 2; }
extern "C" void ts_run(const void* const*, void* const*, const int64_t*, int64_t, int64_t) {}
"""

UNCOMPILED_KEY = "0" * 64


@pytest.fixture(scope="session")
def op_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cache that holds the op library, shared by the whole test session."""
    return tmp_path_factory.mktemp("op_library_cache")


@pytest.fixture(scope="session")
def ops(op_cache: Path) -> ModuleType:
    """The op library, built once per test session into `op_cache` (even when another test
    already loaded it into this process from another cache)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TF_STITCH_CACHE_DIR", str(op_cache))
        op_library.build()
        return op_library.load()


@pytest.fixture(autouse=True)
def kernel_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh kernel cache for every test."""
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def add_one_attrs(key: str = UNCOMPILED_KEY, **overrides: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "Tout": [tf.float32],
        "kernel_name": "add_one",
        "cache_key": key,
        "source": ADD_ONE,
        "input_ranks": [2],
        "input_dims": [-1, 5],
        "output_ranks": [2],
        "output_dims": [-1, 5],
        "unit_dims": [-1],
        "unit_cost": 20,
    }
    attrs.update(overrides)
    return attrs


def bias_attrs(key: str) -> dict[str, Any]:
    return {
        "Tout": [tf.float32, tf.float64],
        "kernel_name": "bias_rowsum",
        "cache_key": key,
        "source": BIAS_ROWSUM,
        "input_ranks": [2, 1],
        "input_dims": [-1, -2, -2],
        "output_ranks": [2, 1],
        "output_dims": [-1, -2, -1],
        "unit_dims": [-1],
        "unit_cost": 50,
        "schedule": "rows of a, one per unit",
    }


def rows(n: int, cols: int = 5) -> np.ndarray:
    return np.arange(n * cols, dtype=np.float32).reshape(n, cols)


# -- the op library --------------------------------------------------------------------------
def test_op_library_is_cached_and_loaded_once(
    ops: ModuleType, op_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TF_STITCH_CACHE_DIR", str(op_cache))
    path = op_library.op_library_path()
    key = path.parent.name
    assert path == op_cache / "ops" / key / "libstitched_kernel_op.so"
    assert len(key) == 64 and path.is_file()
    assert op_library.build() == path  # Already built: nothing to do.
    with ThreadPoolExecutor(max_workers=4) as pool:
        assert set(pool.map(lambda _: op_library.load(), range(8))) == {ops}
    assert op_library.op_library_version() >= 1
    assert callable(ops.stitched_kernel)


def test_op_library_does_not_link_cuda(ops: ModuleType, op_cache: Path) -> None:
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf is not installed")
    libraries = list((op_cache / "ops").glob("*/libstitched_kernel_op.so"))
    assert libraries
    dynamic = subprocess.run(
        [readelf, "-d", str(libraries[0])], capture_output=True, text=True, check=True
    ).stdout
    assert "libtensorflow_framework" in dynamic and "cuda" not in dynamic.lower()


def test_op_library_key_covers_its_build(monkeypatch: pytest.MonkeyPatch) -> None:
    key = op_library.op_library_key()
    monkeypatch.setattr(prebuilt, "BASE_FLAGS", (*prebuilt.BASE_FLAGS, "-DEXTRA"))
    assert op_library.op_library_key() != key


# -- values ------------------------------------------------------------------------------------
def test_add_one_eager(ops: ModuleType) -> None:
    key = compile_kernel(ADD_ONE).key
    (y,) = ops.stitched_kernel([rows(3)], **add_one_attrs(key))
    np.testing.assert_array_equal(y.numpy(), rows(3) + 1)


def test_python_helper_creates_the_op(ops: ModuleType) -> None:
    key = compile_kernel(ADD_ONE).key
    (y,) = op_library.stitched_kernel([rows(2)], **add_one_attrs(key))
    np.testing.assert_array_equal(y.numpy(), rows(2) + 1)


def test_two_inputs_two_outputs_with_broadcast(ops: ModuleType) -> None:
    key = compile_kernel(BIAS_ROWSUM).key
    a = rows(4, 3)
    b = np.array([10, 20, 30], np.float32)
    total, rowsum = ops.stitched_kernel([a, b], **bias_attrs(key))
    assert total.dtype == tf.float32 and rowsum.dtype == tf.float64
    np.testing.assert_array_equal(total.numpy(), a + b)
    np.testing.assert_allclose(rowsum.numpy(), (a + b).sum(axis=1, dtype=np.float64))


def test_no_inputs_and_empty_unit_dims_is_one_unit(ops: ModuleType) -> None:
    key = compile_kernel(SQUARES).key
    (y,) = ops.stitched_kernel(
        [],
        Tout=[tf.int64],
        kernel_name="squares",
        cache_key=key,
        source=SQUARES,
        input_ranks=[],
        input_dims=[],
        output_ranks=[1],
        output_dims=[6],
        unit_dims=[],
        unit_cost=6,
    )
    np.testing.assert_array_equal(y.numpy(), np.arange(6) ** 2)


def test_zero_sized_inputs_and_outputs(ops: ModuleType) -> None:
    add_key = compile_kernel(ADD_ONE).key
    (y,) = ops.stitched_kernel([rows(0)], **add_one_attrs(add_key))
    assert y.shape == (0, 5)
    # Zero columns but three units: the kernel runs on empty rows.
    total, rowsum = ops.stitched_kernel(
        [np.zeros((3, 0), np.float32), np.zeros((0,), np.float32)],
        **bias_attrs(compile_kernel(BIAS_ROWSUM).key),
    )
    assert total.shape == (3, 0)
    np.testing.assert_array_equal(rowsum.numpy(), np.zeros(3))


def test_work_is_split_over_the_thread_pool(ops: ModuleType) -> None:
    compiled = compile_kernel(COUNTING_ADD_ONE)
    n = 1 << 20
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    (y,) = ops.stitched_kernel(
        [x],
        Tout=[tf.float32],
        kernel_name="counting_add_one",
        cache_key=compiled.key,
        source=COUNTING_ADD_ONE,
        input_ranks=[1],
        input_dims=[-1],
        output_ranks=[1],
        output_dims=[-1],
        unit_dims=[-1],
        unit_cost=1000,
    )
    np.testing.assert_array_equal(y.numpy(), x + 1)
    # dlopen of an already loaded path returns the op's own handle, so we can read its counter.
    calls = ctypes.CDLL(str(compiled.path)).ts_test_calls
    calls.restype = ctypes.c_int64
    assert calls() >= 1
    if len(os.sched_getaffinity(0)) > 1:
        assert calls() > 1


# -- one graph, many shapes --------------------------------------------------------------------
def test_varying_leading_dim_with_one_graph(ops: ModuleType) -> None:
    attrs = add_one_attrs(compile_kernel(ADD_ONE).key)

    @tf.function(input_signature=[tf.TensorSpec([None, 5], tf.float32)])
    def add_one(x: tf.Tensor) -> tf.Tensor:
        return ops.stitched_kernel([x], **attrs)[0]

    for n in (1, 4, 0, 33):
        np.testing.assert_array_equal(add_one(rows(n)).numpy(), rows(n) + 1)
    assert add_one.experimental_get_tracing_count() == 1


def test_shape_inference_gives_symbolic_dims(ops: ModuleType) -> None:
    add = add_one_attrs()
    bias = bias_attrs(UNCOMPILED_KEY)
    x_spec = tf.TensorSpec([None, 5], tf.float32)
    (y,) = (
        tf.function(lambda x: ops.stitched_kernel([x], **add)).get_concrete_function(x_spec).outputs
    )
    assert y.shape.as_list() == [None, 5]

    def bias_shapes(a_shape: list[int | None], b_shape: list[int | None]) -> list[list[Any]]:
        fn = tf.function(lambda a, b: ops.stitched_kernel([a, b], **bias))
        concrete = fn.get_concrete_function(
            tf.TensorSpec(a_shape, tf.float32), tf.TensorSpec(b_shape, tf.float32)
        )
        return [t.shape.as_list() for t in concrete.outputs]

    # s1 is known from b alone, s0 from a alone.
    assert bias_shapes([None, None], [4]) == [[None, 4], [None]]
    assert bias_shapes([7, None], [None]) == [[7, None], [7]]
    assert bias_shapes([7, 4], [4]) == [[7, 4], [7]]


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ([None, 4], r"input 0 must have shape \[s0, 5\], got \[\?,4\]"),
        ([None], r"input 0 must have shape \[s0, 5\], got \[\?\]"),
    ],
)
def test_shape_function_rejects_wrong_static_shapes(
    ops: ModuleType, shape: list[int | None], message: str
) -> None:
    fn = tf.function(lambda x: ops.stitched_kernel([x], **add_one_attrs()))
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match=message):
        fn.get_concrete_function(tf.TensorSpec(shape, tf.float32))


def test_shape_function_rejects_conflicting_symbols(ops: ModuleType) -> None:
    fn = tf.function(lambda a, b: ops.stitched_kernel([a, b], **bias_attrs(UNCOMPILED_KEY)))
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match=r"input 1 .*\[s1\]"):
        fn.get_concrete_function(
            tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([4], tf.float32)
        )


# -- run-time shape validation -----------------------------------------------------------------
def _run_with_unknown_shapes(ops: ModuleType, attrs: dict[str, Any], *arrays: np.ndarray) -> Any:
    """Runs the op in a graph where shape inference cannot see the shapes."""
    specs = [tf.TensorSpec(None, tf.as_dtype(a.dtype)) for a in arrays]
    fn = tf.function(lambda *xs: ops.stitched_kernel(list(xs), **attrs), input_signature=specs)
    return fn(*arrays)


@pytest.mark.parametrize("in_graph", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((3, 4), r"'add_one': input 0 must have shape \[s0, 5\], got \[3, 4\]"),
        ((15,), r"'add_one': input 0 must have shape \[s0, 5\], got \[15\]"),
        ((3, 5, 1), r"'add_one': input 0 must have shape \[s0, 5\], got \[3, 5, 1\]"),
    ],
)
def test_input_shape_mismatch(
    ops: ModuleType, in_graph: bool, shape: tuple[int, ...], message: str
) -> None:
    attrs = add_one_attrs(compile_kernel(ADD_ONE).key)
    x = np.zeros(shape, np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        if in_graph:
            _run_with_unknown_shapes(ops, attrs, x)
        else:
            ops.stitched_kernel([x], **attrs)


@pytest.mark.parametrize("in_graph", [False, True], ids=["eager", "graph"])
def test_symbol_bound_by_an_earlier_input_must_agree(ops: ModuleType, in_graph: bool) -> None:
    attrs = bias_attrs(compile_kernel(BIAS_ROWSUM).key)
    a, b = rows(3, 4), np.zeros(5, np.float32)
    message = (
        r"'bias_rowsum': input 1 must have shape \[s1\] \(s1 = 4 from input 0 dim 1\), got \[5\]"
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        if in_graph:
            _run_with_unknown_shapes(ops, attrs, a, b)
        else:
            ops.stitched_kernel([a, b], **attrs)


# -- attribute validation ----------------------------------------------------------------------
BAD_ATTRS = [
    ({"input_dims": [-1]}, r"input_ranks \[2\] do not add up to the 1 entries of input_dims"),
    ({"output_dims": [-1, 5, 1]}, r"output_ranks \[2\] do not add up to the 3 entries"),
    ({"input_ranks": [-1], "input_dims": []}, r"negative rank"),
    ({"input_ranks": [2, 1], "input_dims": [-1, 5, 3]}, r"Tin has 1 types but input_ranks has 2"),
    ({"output_ranks": [2, 0]}, r"Tout has 1 types but output_ranks has 2"),
    ({"cache_key": "0" * 63}, r"cache_key must be 64 lowercase hex characters"),
    ({"cache_key": "A" * 64}, r"cache_key must be 64 lowercase hex characters"),
    ({"cache_key": "../" * 21 + "x"}, r"cache_key must be 64 lowercase hex characters"),
    ({"unit_cost": -1}, r"unit_cost must be >= 0, got -1"),
    (
        {"output_dims": [-2, 5]},
        r"symbol s1 used by output 0 \[s1, 5\] does not appear in any input",
    ),
    ({"unit_dims": [-1, -3]}, r"symbol s2 used by unit_dims \[s0, s2\] does not appear"),
    ({"output_dims": [-(1 << 40), 5]}, r"symbol index \d+ exceeds the limit"),
    ({"block_rows": 0}, r"block_rows must be >= 1, got 0"),
    ({"block_rows": -7}, r"block_rows must be >= 1, got -7"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_ATTRS)
def test_bad_attrs_fail_kernel_construction(
    ops: ModuleType, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"'add_one': .*{message}"):
        ops.stitched_kernel([rows(2)], **add_one_attrs(**overrides))


@pytest.mark.parametrize(("overrides", "message"), BAD_ATTRS)
def test_bad_attrs_fail_graph_construction(
    ops: ModuleType, overrides: dict[str, Any], message: str
) -> None:
    fn = tf.function(lambda x: ops.stitched_kernel([x], **add_one_attrs(**overrides)))
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match=message):
        fn.get_concrete_function(tf.TensorSpec([None, 5], tf.float32))


# -- kernel libraries --------------------------------------------------------------------------
def test_missing_library_then_compiled(ops: ModuleType) -> None:
    key = kernel_key(ADD_ONE)
    path = kernel_path(key)
    # TensorFlow caches constructed kernels by attrs (across tests too): a unique name
    # makes sure this op is constructed here, against this test's cache directory.
    attrs = add_one_attrs(key, kernel_name="add_one_not_compiled_yet")
    message = (
        rf"compiled kernel {key} for add_one_not_compiled_yet is not in {path}.*"
        r"tf_stitch\.runtime\.ensure_compiled\(graph_def\)"
    )
    with pytest.raises(tf.errors.FailedPreconditionError, match=message):
        ops.stitched_kernel([rows(2)], **attrs)
    # A failed construction is not cached: once compiled, the same op works.
    assert compile_kernel(ADD_ONE).key == key
    (y,) = ops.stitched_kernel([rows(2)], **attrs)
    np.testing.assert_array_equal(y.numpy(), rows(2) + 1)


def test_missing_library_in_a_graph(ops: ModuleType) -> None:
    with pytest.raises(tf.errors.FailedPreconditionError, match="is not in"):
        _run_with_unknown_shapes(ops, add_one_attrs(), rows(2))


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (NO_RUN, r"symbol ts_run not found in .*\.so: .*undefined symbol: ts_run"),
        (ABI_TWO, r"has kernel ABI version 2 but this op .* expects 1"),
    ],
    ids=["no_ts_run", "abi_2"],
)
def test_bad_library(ops: ModuleType, source: str, message: str) -> None:
    key = compile_kernel(source).key
    with pytest.raises(tf.errors.FailedPreconditionError, match=message):
        ops.stitched_kernel([rows(2)], **add_one_attrs(key))


def test_library_that_is_not_a_shared_object(ops: ModuleType) -> None:
    key = "ab" * 32
    path = kernel_path(key)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not an ELF file, it is long enough to have a header\n" * 4)
    integrity.record(path)  # (without a digest the op would not even try to load it)
    with pytest.raises(tf.errors.FailedPreconditionError, match=r"dlopen\(.*\) failed: .*"):
        ops.stitched_kernel([rows(2)], **add_one_attrs(key))


# Importing tf_stitch loads the op library installed with the package; building into the
# cache is what a machine without that library (or with another TensorFlow) does.
_LOAD_OP_LIBRARY = """
from tf_stitch.runtime import op_library
module = op_library.load()
assert callable(module.stitched_kernel)
print(op_library.build())
"""


def test_two_processes_build_the_op_library_once(tmp_path: Path) -> None:
    repo_root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "TF_STITCH_CACHE_DIR": str(tmp_path / "fresh"),
        "PYTHONPATH": str(repo_root),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _LOAD_OP_LIBRARY],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [proc.communicate(timeout=300) for proc in procs]
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
    paths = {Path(out.strip()) for out, _ in results}
    assert len(paths) == 1
    (path,) = paths
    assert sum(err.count("building the StitchedKernel op library") for _, err in results) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == [
        ".libstitched_kernel_op.so.lock",
        "libstitched_kernel_op.so",
    ]
