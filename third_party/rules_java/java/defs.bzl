"""The Java rules Bazel's own tools load from `@rules_java` (its JDK toolchains), as Bazel's
built-in rules: this repository stands in for the download (see WORKSPACE). Nothing here is Java.
"""

java_binary = native.java_binary
java_import = native.java_import
java_library = native.java_library
java_runtime = native.java_runtime
java_toolchain = native.java_toolchain
