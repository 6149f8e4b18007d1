"""Installs tf_stitch (the optimizer, runtime and profiler) and its TensorBoard plugin."""

from setuptools import find_packages, setup

setup(
    name="tf_stitch",
    version="0.1.0",
    description="Deep kernel fusion and across-stack profiling for TensorFlow",
    python_requires=">=3.11",
    packages=find_packages(include=["tf_stitch", "tf_stitch.*", "tb_plugin", "tb_plugin.*"]),
    package_data={
        "tf_stitch.runtime": ["*.cc", "*.h"],
        "tf_stitch.codegen": ["*.h"],
        "tf_stitch.profiler": ["xla_gpu_targets/*.txtpb"],
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
    extras_require={"dev": ["pytest", "ruff", "mypy", "hypothesis", "scipy", "playwright"]},
    entry_points={
        "console_scripts": ["tf-stitch = tf_stitch.cli:main"],
        "tensorboard_plugins": ["tf_stitch = tb_plugin.plugin:TfStitchPlugin"],
    },
)
