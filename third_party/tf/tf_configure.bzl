"""`@local_config_tf`: the pip package's TensorFlow as a repository, its headers (with the
defines TensorFlow's own compile flags give) and its framework library; and that Python as the
toolchain the py_test targets run in (`python_toolchain`, registered in WORKSPACE).

The Python that has TensorFlow is `$PYTHON_BIN_PATH`, else the checkout's `.venv`, else
`python3` (the way tensorflow/custom-op's configure script asks the pip package).
"""

_ASK = "; ".join([
    "import tensorflow as tf",
    "print(tf.sysconfig.get_include())",
    "print(tf.sysconfig.get_lib())",
    "print(' '.join(f for f in tf.sysconfig.get_compile_flags() if f.startswith('-D')))",
])

def _tf_impl(ctx):
    venv = ctx.path(Label("//:WORKSPACE")).dirname.get_child(".venv").get_child("bin").get_child("python")
    python = ctx.os.environ.get("PYTHON_BIN_PATH") or (str(venv) if venv.exists else "python3")
    if not python.startswith("/"):
        python = str(ctx.which(python) or fail("no %s on PATH (set PYTHON_BIN_PATH)" % python))
    found = ctx.execute([python, "-c", _ASK])
    if found.return_code != 0:
        fail("TensorFlow is not importable by %s (set PYTHON_BIN_PATH): %s" % (python, found.stderr))
    include, lib, flags = found.stdout.strip().split("\n")[-3:]
    defines = [f[len("-D"):] for f in flags.split(" ") if f]
    ctx.symlink(include, "include")
    ctx.symlink(lib + "/libtensorflow_framework.so.2", "libtensorflow_framework.so.2")
    ctx.file("BUILD", """
load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

cc_library(
    name = "tf_header_lib",
    hdrs = glob(["include/**/*"]),
    defines = {defines},
    includes = ["include"],
    visibility = ["//visibility:public"],
)

cc_library(
    name = "libtensorflow_framework",
    srcs = ["libtensorflow_framework.so.2"],
    visibility = ["//visibility:public"],
)

py_runtime(
    name = "python3",
    interpreter_path = "{python}",
    python_version = "PY3",
)

py_runtime_pair(
    name = "python_runtimes",
    py3_runtime = ":python3",
)

toolchain(
    name = "python_toolchain",
    toolchain = ":python_runtimes",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
""".format(defines = repr(defines), python = python))

tf_configure = repository_rule(
    implementation = _tf_impl,
    environ = ["PYTHON_BIN_PATH"],
    local = True,
)
