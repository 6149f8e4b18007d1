"""Installs tf_stitch (the optimizer, runtime and profiler) and its TensorBoard plugin."""

import importlib.util
import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildWithOpLibrary(build_py):
    """Also builds the StitchedKernel op library against the TensorFlow of the build (pinned
    below, the same as at run time) into `tf_stitch/runtime/_ops/`, so that tf_stitch can run
    stitched graphs and converted SavedModels on a machine without a C++ compiler. Without
    TensorFlow or a compiler here it says so and goes on: the library is then built into the
    cache on first use instead."""

    def run(self) -> None:
        super().run()
        editable = getattr(self, "editable_mode", False)
        root = HERE if editable else Path(self.build_lib)
        target = root / "tf_stitch" / "runtime" / "_ops"
        spec = importlib.util.spec_from_file_location(
            "_tf_stitch_prebuilt", HERE / "tf_stitch" / "runtime" / "prebuilt.py"
        )
        assert spec is not None and spec.loader is not None
        prebuilt = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(prebuilt)
        print("tf_stitch: building the StitchedKernel op library...", file=sys.stderr)
        try:
            prebuilt.build_into(target)
        except (ImportError, RuntimeError) as e:
            print(
                f"tf_stitch: the op library is not prebuilt ({e}); it is built on first use",
                file=sys.stderr,
            )


setup(
    name="tf_stitch",
    version="0.1.0",
    description="Deep kernel fusion and across-stack profiling for TensorFlow",
    python_requires=">=3.11",
    packages=find_packages(include=["tf_stitch", "tf_stitch.*", "tb_plugin", "tb_plugin.*"]),
    package_data={
        "tf_stitch.runtime": ["op/*.cc", "op/*.h", "_ops/*"],
        "tf_stitch.codegen": ["*.h"],
        "tf_stitch.launches": ["xla_gpu_targets/*.txtpb"],
        "tb_plugin": ["static/*"],
    },
    install_requires=[
        "tensorflow==2.21.0",
        "tensorboard",
        "tensorboard-plugin-profile",
        "protobuf",
        "numpy",
        "pandas",
        "opentelemetry-sdk",
        "opentelemetry-exporter-otlp-proto-http",
        "matplotlib",  # the characterization report's figures
    ],
    # scipy: for JAX, installed --no-deps by the README's test command (XLA:GPU counts)
    # playwright: drives Debian's Chromium in the tab's browser test (no browser download)
    extras_require={
        # pyyaml: tests/characterize/test_shards.py parses the README's Kubernetes Job manifest
        "dev": [
            "pytest",
            "pytest-xdist",
            "ruff",
            "mypy",
            "hypothesis",
            "scipy",
            "playwright",
            "pyyaml",
        ],
        # benchmarks/real_models.py: keras_hub's T5 (the other models need only Keras)
        "bench": ["keras-hub==0.32.0"],
    },
    cmdclass={"build_py": BuildWithOpLibrary},
    entry_points={
        "console_scripts": ["tf-stitch = tf_stitch.cli:main"],
        "tensorboard_plugins": ["tf_stitch = tb_plugin.plugin:TfStitchPlugin"],
    },
)
