"""`tf-stitch bench`: kernels per step against TF, XLA:CPU and XLA:GPU, and CPU latency, on the
deep-stitching workloads (`tf_stitch.workloads`)."""

from tf_stitch.bench.measure import KERNEL_COLUMNS, Measurement, measure_function
from tf_stitch.bench.run import run_bench

__all__ = ["KERNEL_COLUMNS", "Measurement", "measure_function", "run_bench"]
