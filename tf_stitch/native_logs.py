"""TensorFlow's native log lines kept off the terminal of a command-line run.

TensorFlow's C++ code and absl write straight to file descriptor 2 ("All log messages before
absl::InitializeLog() ...", "Could not find cuda drivers ...", Grappler's lines between a
progress bar's): `TF_CPP_MIN_LOG_LEVEL` silences only some of them. While a command runs quietly,
descriptor 2 goes to a temporary file and Python's `sys.stderr` (tf_stitch's messages, progress
bars, tracebacks) to the terminal; if the command fails, the log's last lines are printed after
all, so nothing that explains a failure is lost. `--verbose` leaves everything as it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

TAIL_LINES = 40


@dataclass
class Outcome:
    failed: bool = False  # set by the body: print the log's tail


@contextlib.contextmanager
def quiet_native_logs(verbose: bool) -> Iterator[Outcome]:
    """Runs the body with TensorFlow's native log lines captured (see above), unless `verbose`;
    the body sets `failed` on what it yields where its command failed."""
    outcome = Outcome()
    if verbose:
        yield outcome
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    sys.stderr.flush()
    python_stderr = sys.stderr
    terminal = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)
        if _writes_descriptor_2(python_stderr):  # else it is captured already (a test's)
            sys.stderr = os.fdopen(os.dup(terminal), "w", buffering=1)
        try:
            yield outcome
        except BaseException:
            outcome.failed = True
            raise
        finally:
            if sys.stderr is not python_stderr:
                sys.stderr.close()
                sys.stderr = python_stderr
            os.dup2(terminal, 2)
            os.close(terminal)
            if outcome.failed:
                _print_tail(log)


def _writes_descriptor_2(stream: object) -> bool:
    try:
        return stream.fileno() == 2  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


def _print_tail(log: IO[bytes]) -> None:
    log.seek(0)
    lines = log.read().decode("utf-8", "replace").splitlines()
    if lines:
        print("tf-stitch: TensorFlow's log (--verbose shows it as it comes):", file=sys.stderr)
        for line in lines[-TAIL_LINES:]:
            print(f"  {line}", file=sys.stderr)
