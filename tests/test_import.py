"""`import tf_stitch` and the command line's help import no TensorFlow; the op is registered as
soon as TensorFlow is imported, before or after tf_stitch; every public name resolves."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tf_stitch


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_importing_tf_stitch_and_every_help_imports_no_tensorflow() -> None:
    code = """
import sys
import tf_stitch
from tf_stitch.cli import main, parser
commands = [[]] + [[c] for c in parser()._subparsers._group_actions[0].choices]
for command in commands:
    try:
        main([*command, "--help"])
    except SystemExit as e:
        assert e.code == 0, (command, e.code)
print(len(commands), "tensorflow" in sys.modules)
"""
    assert _python(code).splitlines()[-1] == "12 False"  # tf-stitch and its 11 commands


@pytest.mark.parametrize("first", ["tf_stitch", "tensorflow"])
def test_the_op_is_registered_once_tensorflow_is_imported(first: str) -> None:
    """So that `tf.saved_model.load` reads a stitched SavedModel after `import tf_stitch`."""
    second = "tensorflow" if first == "tf_stitch" else "tf_stitch"
    code = f"""
import {first}
import {second}
from tensorflow.python.framework import op_def_registry
print(op_def_registry.get("StitchedKernel") is not None)
"""
    assert _python(code).splitlines()[-1] == "True"


def test_every_public_name_resolves_and_optimize_stays_the_function() -> None:
    import tf_stitch.optimize as module_or_function  # the import system sets the attribute

    assert callable(module_or_function) and tf_stitch.optimize.__name__ == "optimize"
    for name in tf_stitch.__all__:
        assert getattr(tf_stitch, name) is not None
    assert sorted(tf_stitch.__all__) == sorted(tf_stitch._EXPORTS)
    assert "count_launches" in dir(tf_stitch)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = tf_stitch.nothing  # type: ignore[attr-defined]
