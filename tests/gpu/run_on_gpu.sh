#!/usr/bin/env bash
# The GPU check, as one command, from the repository root:
#
#     bash tests/gpu/run_on_gpu.sh [PREPARED_DIR]
#
# PREPARED_DIR (default tests/gpu/prepared) holds the kernels, inputs and TensorFlow's outputs
# from tests/gpu/prepare.py; if it is missing it is prepared first, which needs TensorFlow and
# nvcc (the repository's .venv). The check itself (check_gpu.py) needs only python3 and the CUDA
# driver: a GPU machine without TensorFlow runs a directory prepared elsewhere. Where there is no
# GPU it prints why and exits 0.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-tests/gpu/prepared}"
if [ ! -f "$dir/manifest.json" ]; then
  python="$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )"
  "$python" tests/gpu/prepare.py "$dir"
fi
exec timeout 280 python3 tests/gpu/check_gpu.py "$dir"
