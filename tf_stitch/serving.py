"""Running stitched graphs where tf_stitch's Python is not imported: the op library's path, the
hint a converted SavedModel carries, and `saved_model_cli` with the op loaded.

A process loads the op with `tf.load_op_library(path)` (Python) or `TF_LoadLibrary(path,
status)` (TensorFlow's C API; C++ and other languages), `path` being what
`tf_stitch.op_library_path()` or `tf-stitch op-library` gives. The library needs nothing else
from tf_stitch: a converted SavedModel's nodes carry their kernels' binaries (and sources).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tf_stitch.version import __version__

HINT_DIR = "assets.extra"  # TensorFlow Serving's folder for files besides the model
HINT_NAME = "tf_stitch.txt"


def op_library_path() -> str:
    """The StitchedKernel op library this process uses (the one packaged with tf_stitch when
    it fits this TensorFlow, else the cache's, built first if needed)."""
    from tf_stitch.runtime import op_library

    op_library.load()
    path = op_library.loaded_path()
    assert path is not None  # load() succeeded
    return str(path)


def hint_text() -> str:
    """What a converted SavedModel says about the op it needs."""
    return (
        f"This SavedModel was converted by tf_stitch {__version__}: its graphs run\n"
        "StitchedKernel ops, which TensorFlow loads from tf_stitch's op library.\n"
        "\n"
        "Python: `pip install tf_stitch`, then `import tf_stitch` before loading the model.\n"
        "saved_model_cli: `tf-stitch saved-model-cli run --dir ...` (the same flags).\n"
        "Elsewhere (TensorFlow's C API, C++, a process without tf_stitch): load the file that\n"
        "`tf-stitch op-library` prints with TF_LoadLibrary(path, status) or\n"
        "tf.load_op_library(path) before loading the model.\n"
        "Without it TensorFlow says: Op type not registered 'StitchedKernel'.\n"
    )


def write_hint(saved_model_dir: Path) -> None:
    """Writes the hint into a SavedModel being written (`assets.extra/tf_stitch.txt`)."""
    folder = saved_model_dir / HINT_DIR
    folder.mkdir(exist_ok=True)
    (folder / HINT_NAME).write_text(hint_text(), encoding="utf-8")


def saved_model_cli(args: list[str]) -> int:
    """TensorFlow's `saved_model_cli` with `args`, the op library loaded first."""
    from tensorflow.python.tools import saved_model_cli as cli

    op_library_path()
    sys.argv = ["saved_model_cli", *args]
    try:
        cli.main()
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0
