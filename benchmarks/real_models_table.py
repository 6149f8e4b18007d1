"""The README's table of `benchmarks/real_models.py` runs, and the issue's targets over them.

    python benchmarks/real_models_table.py run1.json [run2.json ...]
        [--xla-gpu-from benchmarks/xla_gpu_counts.json]

Reads the `--json` files of one or more runs (a model measured twice keeps its later run),
prints when and where they ran, one Markdown row per model and the targets over all of them.
XLA:GPU's counts depend on the model and XLA only: for a run made with `--no-xla-gpu`,
`--xla-gpu-from` takes them from earlier runs' compiles (marked † in the table; a model the
run did compile keeps its own count, and one that differs from the file is an error).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tf_stitch.bench.measure import Measurement
from tf_stitch.profiler.measure.stability import Estimate
from tf_stitch.profiler.measure.timing import Latency

HEADER = (
    "| model | TF | TF GPU | XLA:CPU | XLA:GPU | tf_stitch GPU | tf_stitch CPU | TF ms "
    "| XLA:CPU ms | tf_stitch ms | vs TF [95%] | max err |"
)


def measurement(d: dict[str, Any]) -> Measurement:
    """A Measurement back from the JSON real_models.py wrote."""
    fields = dict(d)
    fields["latency"] = {
        k: Latency(**{**v, "times_ms": tuple(v.get("times_ms", ()))})
        for k, v in d["latency"].items()
    }
    fields["ratio"] = Estimate(**d["ratio"]) if d.get("ratio") else None
    return Measurement(**fields)


def load(paths: list[str]) -> tuple[list[str], dict[str, Measurement]]:
    """(each run's date and machine, the models' results in order)."""
    runs: list[str] = []
    results: dict[str, Measurement] = {}
    for path in paths:
        try:
            payload = json.loads(Path(path).read_text())
            runs.append(f"{payload['date']} on {payload['machine']} ({path})")
            for name, d in payload["results"].items():
                results.pop(name, None)
                results[name] = measurement(d)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"{path}: not a real_models.py --json file ({e})") from e
    return runs, results


def fill_xla_gpu(results: dict[str, Measurement], path: str) -> set[str]:
    """Fills XLA:GPU's count from `path` where a run has none; returns the models filled.
    Raises SystemExit where a run's own count differs from the file's."""
    try:
        counts: dict[str, int] = json.loads(Path(path).read_text())["counts"]
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit(f"{path}: not an XLA:GPU counts file ({e})") from e
    filled = set()
    for name, m in results.items():
        known, own = counts.get(name), m.xla_gpu_best()
        if own is not None:
            if known is not None and known != own:
                raise SystemExit(f"{name}: XLA:GPU counted {own} in this run, {known} in {path}")
        elif known is not None:
            m.kernels["xla_gpu_triton"] = m.kernels["xla_gpu_cublas"] = known
            filled.add(name)
    return filled


def markdown_row(name: str, m: Measurement, filled: bool = False) -> str:
    k, lat = m.kernels, m.latency

    def n(v: int | None) -> str:
        return "-" if v is None else str(v)

    def ms(v: str) -> str:
        x = lat[v]
        return f"{x.median_ms:.2f} ({x.min_ms:.2f}–{x.max_ms:.2f})"

    r = m.ratio
    vs = "-" if r is None else f"{r.value:.2f} [{r.low:.2f}–{r.high:.2f}]"
    if m.confirm_rounds:
        vs += f" ({m.confirm_rounds} rounds alone)"
    cells = [
        name,
        n(k["tf"]),
        n(k["tf_gpu"]),
        n(k["xla_cpu"]),
        n(m.xla_gpu_best()) + ("†" if filled else ""),
        n(k["tf_stitch_gpu"]),
        n(k["tf_stitch_cpu"]),
        ms("TensorFlow"),
        ms("XLA:CPU"),
        ms("tf_stitch"),
        vs,
        f"{m.max_abs_error:.1e}" + ("" if m.outputs_match else " MISMATCH"),
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> int:
    from benchmarks.real_models import targets

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+", help="files written by real_models.py --json")
    parser.add_argument("--xla-gpu-from", help="XLA:GPU counts of earlier runs (JSON)")
    args = parser.parse_args()
    runs, results = load(args.json)
    filled = fill_xla_gpu(results, args.xla_gpu_from) if args.xla_gpu_from else set()
    for run in runs:
        print(f"- {run}")
    print()
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    for name, m in results.items():
        print(markdown_row(name, m, name in filled))
    if filled:
        print(f"\n† XLA:GPU's count from {args.xla_gpu_from} ({len(filled)} models)")
    print()
    for line in targets(results):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
