"""`thread_cpu`: trace lines matched to threads by pool, busy time against the threads' CPU
clocks, each span's CPU time (recorded fixtures), and the clocks read for real."""

from __future__ import annotations

import threading
import time

import pytest

from tf_stitch.profiler.measure import thread_cpu
from tf_stitch.profiler.measure.thread_cpu import UNNAMED, Reading
from tf_stitch.profiler.trace.spans import Span

COMPUTE, EIGEN, CALLER = "tf_Compute/-8446390324", "tf_numa_-1_Eigen/4718663690", "python"


def test_pool_of_a_line() -> None:
    assert thread_cpu.pool_of(COMPUTE) == "tf_Compute"
    assert thread_cpu.pool_of("tf_numa_-1_Eigen/12") == "tf_numa_-1_Eigen"
    assert thread_cpu.pool_of("python") == "python"
    assert thread_cpu.pool_of("my/pool") == "my/pool"  # no id: the whole name


def test_threads_are_matched_to_pools_by_their_os_names() -> None:
    names = {1: "python", 2: "tf_Compute", 3: "tf_Compute", 4: "python", 5: "python"}
    cpu = {1: 7, 2: 10, 3: 20, 4: 30, 5: 40}
    pools = {"python", "tf_Compute", "tf_numa_-1_Eigen"}
    # The caller's thread is the step markers' pool; threads named for no pool (TensorFlow's
    # intra-op workers keep the process's name) go to the pools no thread is named for.
    got = thread_cpu.pool_cpu(cpu, names, pools, caller_tid=1, caller="python")
    assert got == {"python": 7, "tf_Compute": 30, UNNAMED: 70}
    assert thread_cpu.key_of("tf_numa_-1_Eigen", got, "python") == UNNAMED
    # OS names are cut to 15 characters
    long = thread_cpu.pool_cpu({9: 5}, {9: "tf_numa_-1_Eige"}, {"tf_numa_-1_Eigen"}, 1, "python")
    assert long == {"tf_numa_-1_Eigen": 5}


def _step() -> list[Span]:
    return [
        Span("model", "m", "step", 0, 100),
        Span("layer", "dense", "layer", 0, 100, parent=0),
        Span("op", "dense/MatMul", "MatMul", 0, 100, parent=1, thread=COMPUTE),
        Span("op", "dense/Relu", "Relu", 100, 120, parent=1, thread=COMPUTE),
        Span("library", "Eigen", "Eigen", 20, 70, parent=2, thread=EIGEN),
    ]


def test_span_cpu_is_its_own_time_times_its_pools_share_plus_its_library_work() -> None:
    spans = _step()
    before = Reading({1: 0, 2: 0, 3: 0}, {1: "python", 2: "tf_Compute", 3: "python"})
    after = Reading({1: 5, 2: 56, 3: 80}, before.names)
    step = thread_cpu.attribute(spans, before, after, 1, "python", {COMPUTE, EIGEN})
    # tf_Compute: busy 70 ns (MatMul's 100 less its 50 of library work, Relu's 20), 56 on CPU
    assert step.busy_ns == {"tf_Compute": 70.0, UNNAMED: 50.0}
    assert step.on_cpu("tf_Compute") == pytest.approx(0.8)
    assert step.on_cpu(UNNAMED) == 1.0  # capped: the workers spin between regions
    matmul, relu, library = spans[2], spans[3], spans[4]
    assert library.cpu_ns == pytest.approx(50.0)
    assert matmul.cpu_ns == pytest.approx(50 * 0.8 + 50.0)  # every thread it used
    assert relu.cpu_ns == pytest.approx(16.0)
    assert spans[0].cpu_ns is None and spans[1].cpu_ns is None  # not on a thread
    summary = thread_cpu.summary([step, step])
    assert summary["tf_Compute"] == {"busy_ns": 70.0, "cpu_ns": 56.0, "on_cpu": 0.8}
    assert summary["all"]["on_cpu"] == pytest.approx((56 + 50) / 120)


def test_a_line_that_is_not_a_host_thread_gets_no_cpu_time() -> None:
    spans = _step()
    reading = Reading({2: 0}, {2: "tf_Compute"})
    thread_cpu.attribute(spans, reading, reading, 1, "python", {COMPUTE})
    assert spans[4].cpu_ns is None  # its line is not among the host's
    assert spans[2].cpu_ns == 0.0  # a pool that used no CPU in the step


def test_the_clocks_are_read_for_every_thread() -> None:
    clocks = thread_cpu.Clocks()
    if not clocks.available:
        pytest.skip("no per-thread CPU clocks here")
    tid: list[int] = []
    done = threading.Event()

    def spin() -> None:  # 30 ms of this thread's CPU time, however busy the machine
        tid.append(threading.get_native_id())
        end = time.thread_time() + 0.03
        while time.thread_time() < end:
            pass
        done.wait(10)

    worker = threading.Thread(target=spin, name="spinner")
    before = clocks.read()
    worker.start()
    while not tid:
        time.sleep(0.001)
    time.sleep(0.001)
    deadline = time.monotonic() + 10
    after = clocks.read()
    while after is not None and after.cpu_ns.get(tid[0], 0) < 30_000_000:
        assert time.monotonic() < deadline
        time.sleep(0.005)
        after = clocks.read()
    done.set()
    worker.join()
    assert before is not None and after is not None
    assert threading.get_native_id() in after.cpu_ns
    used = thread_cpu.used(before, after)
    assert tid[0] not in used  # it started after the first reading
    assert after.cpu_ns[tid[0]] >= 30_000_000
    assert all(v >= 0 for v in used.values())
