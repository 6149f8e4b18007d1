"""The README's table of `benchmarks/real_models.py` runs, and the issue's targets over them.

    python benchmarks/real_models_table.py run1.json [run2.json ...]

Reads the `--json` files of one or more runs (a model measured twice keeps its later run),
prints when and where they ran, one Markdown row per model and the targets over all of them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tf_stitch.bench.measure import Measurement
from tf_stitch.profiler.stability import Estimate
from tf_stitch.profiler.timing import Latency

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


def markdown_row(name: str, m: Measurement) -> str:
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
        n(m.xla_gpu_best()),
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
    args = parser.parse_args()
    runs, results = load(args.json)
    for run in runs:
        print(f"- {run}")
    print()
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    for name, m in results.items():
        print(markdown_row(name, m))
    print()
    for line in targets(results):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
