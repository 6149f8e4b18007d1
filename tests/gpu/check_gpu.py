"""The GPU check: runs the prepared CUDA kernels on an NVIDIA GPU (tests/gpu/run_on_gpu.sh).

    python3 tests/gpu/check_gpu.py PREPARED_DIR [--check-only]

Needs only Python's standard library and the CUDA driver (libcuda.so.1), so that it runs on a
GPU machine without TensorFlow. PREPARED_DIR comes from tests/gpu/prepare.py. For every case:

1. every fused and unfused kernel runs at the small batch and its outputs are compared with
   TensorFlow's (within 2e-4 absolute + 2e-4 relative; NaN where TensorFlow has NaN);
2. at the case's large batch, each kernel is launched 20 times between CUDA events; the table
   gives the median time of the fused kernel(s) against the sum of the unfused kernels' medians
   (every op its own kernel, intermediates in global memory).

Without compute-sanitizer on PATH the memcheck step says so; with it, the checks of step 1 run
again under `compute-sanitizer --tool memcheck`. Without a GPU (no driver, no device) the check
says why and exits 0: there is nothing to check here.
"""

from __future__ import annotations

import array
import ctypes
import json
import math
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BLOCK_THREADS = 256  # codegen/cuda_head.py BLOCK_THREADS, the op's kCudaBlockThreads
MAX_GRID_BLOCKS = 1 << 20
RTOL = 2e-4  # relative, and absolute near zero
# 16-bit outputs: kernels compute in float32 and round once, TensorFlow after every op
TOLERANCE = {"float16": 1e-2, "bfloat16": 6e-2, "float64": 1e-9}
TIMED_LAUNCHES = 20
_TYPECODES = {"float32": "f", "float64": "d", "int32": "i", "int64": "q"}
_ITEMSIZE = {
    "float32": 4,
    "float64": 8,
    "int32": 4,
    "int64": 8,
    "bool": 1,
    "float16": 2,
    "bfloat16": 2,
}
# 0.5 in each format, twice in 32 bits (the timed runs' inputs)
_FILL = {"float32": 0x3F000000, "float16": 0x38003800, "bfloat16": 0x3F003F00}


class Skip(Exception):
    """No GPU to check on: not a failure."""


class CudaError(Exception):
    pass


class Cuda:
    """The CUDA driver API through ctypes: one context on device 0."""

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise Skip(f"cannot load the CUDA driver (libcuda.so.1): {e}") from None
        code = self.lib.cuInit(0)
        if code != 0:
            raise Skip(f"cuInit failed: {self.error(code)} (no GPU here?)")
        count = ctypes.c_int()
        self.check(self.lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        if count.value == 0:
            raise Skip("no CUDA device")
        self.device = ctypes.c_int()
        self.check(self.lib.cuDeviceGet(ctypes.byref(self.device), 0), "cuDeviceGet")
        name = ctypes.create_string_buffer(256)
        self.check(self.lib.cuDeviceGetName(name, 256, self.device), "cuDeviceGetName")
        self.name = name.value.decode()
        self.context = ctypes.c_void_p()
        self.check(
            self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), self.device),
            "cuDevicePrimaryCtxRetain",
        )
        self.check(self.lib.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.lib.cuLaunchKernel.argtypes = (
            [ctypes.c_void_p]
            + [ctypes.c_uint] * 7
            + [
                ctypes.c_void_p,
                ctypes.POINTER(ctypes.c_void_p),
                ctypes.POINTER(ctypes.c_void_p),
            ]
        )
        self.lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        self.lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        self.lib.cuMemsetD32_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t]
        self.lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        self.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        self.modules: dict[str, ctypes.c_void_p] = {}

    def error(self, code: int) -> str:
        text = ctypes.c_char_p()
        self.lib.cuGetErrorString(code, ctypes.byref(text))
        return f"{(text.value or b'unknown').decode()} ({code})"

    def check(self, code: int, call: str) -> None:
        if code != 0:
            raise CudaError(f"{call} failed: {self.error(code)}")

    def function(self, fatbin: Path, name: str) -> ctypes.c_void_p:
        module = self.modules.get(str(fatbin))
        if module is None:
            module = ctypes.c_void_p()
            image = fatbin.read_bytes()
            self.check(self.lib.cuModuleLoadData(ctypes.byref(module), image), "cuModuleLoadData")
            self.modules[str(fatbin)] = module
        fn = ctypes.c_void_p()
        self.check(
            self.lib.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()),
            f"cuModuleGetFunction({name})",
        )
        return fn

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 4)), "cuMemAlloc")
        return ptr.value

    def free(self, ptr: int) -> None:
        self.lib.cuMemFree_v2(ptr)

    def upload(self, ptr: int, data: bytes) -> None:
        if data:
            self.check(self.lib.cuMemcpyHtoD_v2(ptr, data, len(data)), "cuMemcpyHtoD")

    def download(self, ptr: int, nbytes: int) -> bytes:
        buf = ctypes.create_string_buffer(nbytes)
        if nbytes:
            self.check(self.lib.cuMemcpyDtoH_v2(buf, ptr, nbytes), "cuMemcpyDtoH")
        return buf.raw

    def fill(self, ptr: int, nbytes: int, pattern: int) -> None:
        self.check(self.lib.cuMemsetD32_v2(ptr, pattern, nbytes // 4), "cuMemsetD32")

    def launch(self, fn: ctypes.c_void_p, grid: int, args: list[Any]) -> None:
        params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        self.check(
            self.lib.cuLaunchKernel(fn, grid, 1, 1, BLOCK_THREADS, 1, 1, 0, None, params, None),
            "cuLaunchKernel",
        )

    def synchronize(self) -> None:
        self.check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")

    def time_ms(self, run: Any, repeats: int) -> float:
        """The median time of `run()` between two CUDA events, in milliseconds."""
        start, stop = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(self.lib.cuEventCreate(ctypes.byref(start), 0), "cuEventCreate")
        self.check(self.lib.cuEventCreate(ctypes.byref(stop), 0), "cuEventCreate")
        times = []
        for _ in range(repeats):
            self.check(self.lib.cuEventRecord(start, None), "cuEventRecord")
            run()
            self.check(self.lib.cuEventRecord(stop, None), "cuEventRecord")
            self.check(self.lib.cuEventSynchronize(stop), "cuEventSynchronize")
            ms = ctypes.c_float()
            self.check(self.lib.cuEventElapsedTime(ctypes.byref(ms), start, stop), "elapsed")
            times.append(ms.value)
        self.lib.cuEventDestroy_v2(start)
        self.lib.cuEventDestroy_v2(stop)
        return statistics.median(times)


# -- host-side helpers (tested without a GPU) -----------------------------------------------------
def resolve(dims: list[int | str], batch: int) -> list[int]:
    return [batch if d == "batch" else int(d) for d in dims]


def grid_size(kernel: dict[str, Any], batch: int) -> int:
    units = math.prod(resolve(kernel["units"], batch))
    if kernel["launch"] == "blocks":
        return max(1, min(units, MAX_GRID_BLOCKS))
    work = units * math.prod(resolve(kernel["row"], batch))
    return max(1, min(-(-work // BLOCK_THREADS), MAX_GRID_BLOCKS))


def values(data: bytes, dtype: str) -> list[float]:
    if dtype == "bool":
        return [float(b != 0) for b in data]
    if dtype == "float16":
        return [v for (v,) in struct.iter_unpack("<e", data)]
    if dtype == "bfloat16":  # the high half of a float32
        return [
            v
            for (v,) in struct.iter_unpack(
                "<f", b"".join(b"\0\0" + data[i : i + 2] for i in range(0, len(data), 2))
            )
        ]
    return array.array(_TYPECODES[dtype], data).tolist()


def max_error(got: list[float], want: list[float], tolerance: float = RTOL) -> float:
    """The largest |got - want| where they disagree beyond tolerance (NaN must meet NaN);
    0 when every element agrees, inf on a NaN mismatch or a length mismatch."""
    if len(got) != len(want):
        return math.inf
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        if math.isnan(w) or math.isnan(g):
            if math.isnan(w) != math.isnan(g):
                return math.inf
            continue
        if math.isinf(w) or math.isinf(g):
            if g != w:
                return math.inf
            continue
        if abs(g - w) > tolerance * (1.0 + abs(w)):
            worst = max(worst, abs(g - w))
    return worst


# -- the check -------------------------------------------------------------------------------------
def _nbytes(t: dict[str, Any], batch: int) -> int:
    return math.prod(resolve(t["dims"], batch)) * _ITEMSIZE[t["dtype"]]


def _run(cuda: Cuda, root: Path, kernel: dict[str, Any], batch: int, inputs: list[bytes] | None):
    """Launches `kernel` at `batch` (inputs given, or filled with 0.5); returns a callable that
    launches it again, the output buffers and a cleanup."""
    fn = cuda.function(root / kernel["fatbin"], kernel["name"])
    buffers = []
    for i, t in enumerate(kernel["inputs"]):
        ptr = cuda.alloc(_nbytes(t, batch))
        if inputs is not None:
            cuda.upload(ptr, inputs[i])
        else:  # 0.5f, or index 0
            cuda.fill(ptr, _nbytes(t, batch), _FILL.get(t["dtype"], 0))
        buffers.append(ptr)
    outputs = [cuda.alloc(_nbytes(t, batch)) for t in kernel["outputs"]]
    if kernel.get("gathers"):  # the error cell: int64[3], zero
        outputs.append(cuda.alloc(24))
        cuda.fill(outputs[-1], 24, 0)
    args: list[Any] = [ctypes.c_uint64(p) for p in buffers + outputs]
    args += [ctypes.c_int64(batch) for _ in range(kernel["symbols"])]
    args += [ctypes.c_int64(0), ctypes.c_int64(math.prod(resolve(kernel["units"], batch)))]
    grid = grid_size(kernel, batch)

    def launch() -> None:
        cuda.launch(fn, grid, args)

    def cleanup() -> None:
        for p in buffers + outputs:
            cuda.free(p)

    return launch, outputs, cleanup


def check_case(cuda: Cuda, root: Path, case: dict[str, Any]) -> float:
    """Runs every kernel of the case at the check batch; the largest error."""
    worst = 0.0
    for kernel in case["fused"] + case["unfused"]:
        inputs = [(root / t["file"]).read_bytes() for t in kernel["inputs"]]
        launch, outputs, cleanup = _run(cuda, root, kernel, case["check_batch"], inputs)
        launch()
        cuda.synchronize()
        if kernel.get("gathers") and cuda.download(outputs[-1], 8) != bytes(8):
            print(f"  {case['name']} {kernel['name']}: an index was reported out of range")
            worst = math.inf
        for ptr, t in zip(outputs, kernel["outputs"], strict=False):
            want = (root / t["file"]).read_bytes()
            got = cuda.download(ptr, len(want))
            tolerance = TOLERANCE.get(t["dtype"], RTOL)
            error = max_error(values(got, t["dtype"]), values(want, t["dtype"]), tolerance)
            if error:
                print(f"  MISMATCH {case['name']} {kernel['name']}: max error {error:.3g}")
            worst = max(worst, error)
        cleanup()
    return worst


def time_case(cuda: Cuda, root: Path, case: dict[str, Any]) -> tuple[float, float]:
    totals = []
    for kernels in (case["fused"], case["unfused"]):
        total = 0.0
        for kernel in kernels:
            launch, _, cleanup = _run(cuda, root, kernel, case["batch"], None)
            launch()
            cuda.synchronize()
            total += cuda.time_ms(launch, TIMED_LAUNCHES)
            cleanup()
        totals.append(total)
    return totals[0], totals[1]


def memcheck(root: Path) -> str:
    tool = shutil.which("compute-sanitizer")
    if tool is None:
        return "memcheck: compute-sanitizer not on PATH, not run"
    cmd = [tool, "--tool", "memcheck", "--error-exitcode", "9"]
    cmd += [sys.executable, __file__, str(root), "--check-only"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    summary = [line for line in result.stdout.splitlines() if "ERROR SUMMARY" in line]
    status = "clean" if result.returncode == 0 else f"FAILED (exit {result.returncode})"
    return f"memcheck: {status}; {summary[-1].strip() if summary else 'no summary'}"


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    root = Path(argv[0])
    check_only = "--check-only" in argv[1:]
    manifest = json.loads((root / "manifest.json").read_text())
    try:
        cuda = Cuda()
    except Skip as e:
        print(f"GPU check skipped: {e}")
        return 0
    started = time.time()
    print(f"# GPU check on {cuda.name}: {len(manifest['cases'])} cases from {root}")
    failures = 0
    rows = []
    for case in manifest["cases"]:
        error = check_case(cuda, root, case)
        failures += error > 0
        if check_only:
            continue
        fused, unfused = time_case(cuda, root, case)
        rows.append((case, error, fused, unfused))
    if not check_only:
        print(
            f"{'case':<24}{'batch':>6}{'kernels f/u':>13}{'fused us':>10}{'unfused us':>12}"
            f"{'speedup':>9}  check"
        )
        for case, error, fused, unfused in rows:
            counts = f"{len(case['fused'])}/{len(case['unfused'])}"
            print(
                f"{case['name']:<24}{case['batch']:>6}{counts:>13}{fused * 1e3:>10.1f}"
                f"{unfused * 1e3:>12.1f}{unfused / fused if fused else math.nan:>8.2f}x  "
                + ("ok" if error == 0 else f"MISMATCH {error:.3g}")
            )
        print(memcheck(root))
    print(f"{failures} case(s) with mismatches; {time.time() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
