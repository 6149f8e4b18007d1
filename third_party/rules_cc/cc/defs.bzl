"""The C++ rules Bazel's own tools load from `@rules_cc`, as Bazel's built-in rules.

Bazel (4.2, Debian's bazel-bootstrap) would download rules_cc for its tools' BUILD files; this
repository stands in for it so that a build needs no network (see WORKSPACE).
"""

cc_binary = native.cc_binary
cc_import = native.cc_import
cc_library = native.cc_library
cc_test = native.cc_test
cc_toolchain = native.cc_toolchain
cc_toolchain_suite = native.cc_toolchain_suite
