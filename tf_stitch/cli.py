"""`tf-stitch ...`: the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def _demo(args: argparse.Namespace) -> int:
    from tf_stitch import demo

    result = demo.run(
        batch=args.batch,
        seq_len=args.seq_len,
        rounds=args.rounds,
        export_dir=None if args.no_export else args.export,
    )
    return 0 if result.outputs_match else 1


def _read_graph_def(path: str) -> bytes:
    """The bytes of a GraphDef file; a missing or empty file is bad input (exit status 2)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{path}: no such file")
    data = p.read_bytes()
    if not data:
        raise ValueError(f"{path}: the file is empty, not a GraphDef")
    return data


def _fraction(value: str) -> float:
    """A relative half-width: "3%" or "0.03"."""
    try:
        number = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a fraction or a percentage: {value!r}") from None
    if not 0.0 < number < 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100%: {value!r}")
    return number


def _count(minimum: int) -> Any:
    """An argparse type: an int of at least `minimum`."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
        if number < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}: {value!r}")
        return number

    return parse


def _outputs(value: str | None) -> list[str] | None:
    return [s for s in value.split(",") if s] if value else None


def _optimize(args: argparse.Namespace) -> int:
    import tf_stitch
    from tf_stitch.runtime.cache import atomic_write

    out = Path(args.output)
    if out.exists() and not args.overwrite:
        raise ValueError(f"{out} exists (pass --overwrite to replace it)")
    graph_def = tf_stitch.optimize(_read_graph_def(args.input), outputs=_outputs(args.outputs))
    atomic_write(out, graph_def.SerializeToString())
    kernels = sum(1 for n in graph_def.node if n.op == "StitchedKernel")
    print(f"tf-stitch: wrote {out} ({kernels} stitched kernels, {len(graph_def.node)} nodes)")
    return 0


def _convert(args: argparse.Namespace) -> int:
    from tf_stitch.convert import command

    return command.run(args)


def _explain(args: argparse.Namespace) -> int:
    import tf_stitch

    print(tf_stitch.explain(_read_graph_def(args.input), outputs=_outputs(args.outputs)))
    return 0


def _bench(args: argparse.Namespace) -> int:
    from tf_stitch.bench import run_bench

    doc = run_bench(
        _outputs(args.workloads),
        args.out,
        rounds=args.rounds,
        gpu_target=None if args.no_xla_gpu else args.gpu,
        small=args.small,
    )
    if doc["failed"]:
        return 1
    mismatched = [n for n, r in doc["workloads"].items() if not r["outputs_match"]]
    return 1 if mismatched else 0


def _optimized_for(model: Any, inputs: list[Any]) -> Any:
    import tensorflow as tf

    import tf_stitch

    specs = [tf.TensorSpec.from_tensor(x) for x in inputs]
    if hasattr(model, "layers") and hasattr(model, "inputs"):  # a Keras model
        return tf_stitch.optimize(model, input_signature=specs)
    return tf_stitch.optimize(tf.function(model).get_concrete_function(*specs))


def _profile(args: argparse.Namespace) -> int:
    import tf_stitch
    from tf_stitch.profiler.models import load_for_profiling
    from tf_stitch.profiler.trace.spans import LEVELS

    model, inputs, name = load_for_profiling(args.model, args.batch)
    if args.optimize:
        model, name = _optimized_for(model, inputs), f"{name} (tf_stitch)"
    levels = tuple(_outputs(args.levels) or LEVELS)
    try:
        result = tf_stitch.profile(
            model,
            inputs,
            levels=levels,
            steps=args.steps,
            warmup=args.warmup,
            logdir=args.logdir,
            run_name=args.run_name,
            model_name=name,
            otlp_endpoint=args.otlp_endpoint,
            min_confidence=args.min_confidence,
            time_limit=args.time_limit,
        )
    except tf_stitch.ProfileError as e:
        print(f"tf-stitch: {e}", file=sys.stderr)
        return 1
    print(result.summary())
    if args.logdir:
        print(
            f"wrote the profile to {args.logdir} (run {result.meta['run']}); "
            f"view it with: tensorboard --logdir {args.logdir}"
        )
    return 0


def _characterize(args: argparse.Namespace) -> int:
    from tf_stitch.characterize.campaign import characterize
    from tf_stitch.characterize.shards import parse_shard

    if args.report_only:  # after the shards: the report of whatever they wrote
        from tf_stitch.characterize.report import write_report

        if args.no_report:
            raise ValueError("--report-only and --no-report contradict each other")
        written = write_report(args.logdir, Path(args.report))
        print(f"tf-stitch characterize: report of {args.logdir} in {written}/index.html")
        return 0
    shard = parse_shard(args.shard)
    if args.shard == "auto":
        print(f"tf-stitch characterize: shard {shard[0]}/{shard[1]} (the scheduler's)")
    models = "all" if args.models == "all" else _outputs(args.models) or []
    batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    result = characterize(
        models,
        batch_sizes=batch_sizes,
        logdir=args.logdir,
        report=None if args.no_report else args.report,
        shard=shard,
        jobs=args.jobs,
        steps=args.steps,
        warmup=args.warmup,
        optimize=not args.no_optimize,
        otlp_endpoint=args.otlp_endpoint,
        timeout=args.timeout,
    )
    ran, failed = len(result["ran"]), len(result["failed"])
    print(
        f"tf-stitch characterize: {ran - failed} profiled, {failed} failed, "
        f"{len(result['skipped'])} skipped (done before)"
    )
    return 1 if failed else 0


def _run(args: argparse.Namespace) -> int:
    """Runs a Python script as `python SCRIPT ARGS...` would, with tf_stitch.enable() on."""
    import runpy
    import traceback

    from tf_stitch import hook

    script = Path(args.script)
    if not script.is_file():
        raise ValueError(f"{script}: no such file")
    hook.enable()
    sys.argv = [str(script), *args.args]
    sys.path.insert(0, str(script.resolve().parent))
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def _op_library(args: argparse.Namespace) -> int:
    from tf_stitch.serving import op_library_path

    print(op_library_path())
    return 0


def _saved_model_cli(args: argparse.Namespace) -> int:
    print(SAVED_MODEL_CLI_HELP)
    return 0


SAVED_MODEL_CLI_HELP = """usage: tf-stitch saved-model-cli {show,run,scan,...} ARGS

TensorFlow's saved_model_cli, with its arguments, run with the StitchedKernel op loaded
(a converted SavedModel's ops). `tf-stitch saved-model-cli run --help` lists run's options."""


def _zoo(args: argparse.Namespace) -> int:
    from tf_stitch.zoo import zoo

    entries = zoo().values()
    print(f"{'model':<20}{'family':<20}{'batch':>6}  inputs")
    for e in entries:
        print(f"{e.name:<20}{e.family:<20}{e.batch:>6}  {e.inputs_text()}  {e.description}")
    print(f"{len(entries)} models")
    return 0


def _convert_arguments(p: argparse.ArgumentParser) -> None:
    """`tf-stitch convert`'s arguments (convert/command.py runs it)."""
    p.add_argument("input", help="the SavedModel directory to convert")
    p.add_argument("output", help="where to write the converted SavedModel")
    p.add_argument(
        "--signature",
        action="append",
        help="a signature to convert (repeatable; default: all, the others are copied)",
    )
    p.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=D1,D2,...",
        help="fix an input's shape, e.g. x=1,128 (repeatable; ? for an unknown dim)",
    )
    p.add_argument("--targets", default="cpu,cuda", help="cpu and optionally cuda (nvcc)")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    p.add_argument("--no-check", action="store_true", help="skip the check on random inputs")
    p.add_argument(
        "--check-dim", type=_count(1), default=2, help="size of unknown dims in the check"
    )


def _demo_command(sub: Any) -> None:
    """`tf-stitch demo`."""
    d = sub.add_parser("demo", help="optimize a BERT-style encoder layer and compare with TF/XLA")
    d.add_argument("--batch", type=_count(1), default=4)
    d.add_argument("--seq-len", type=_count(1), default=128)
    d.add_argument("--rounds", type=_count(1), default=10)
    d.add_argument(
        "--export",
        default="tf_stitch_demo/encoder",
        help="save the encoder layer here as a SavedModel (for `tf-stitch convert`)",
    )
    d.add_argument("--no-export", action="store_true", help="do not save the SavedModel")
    d.set_defaults(run=_demo)


def _graph_commands(sub: Any) -> None:
    """`tf-stitch optimize` and `tf-stitch explain` (frozen GraphDefs)."""
    o = sub.add_parser("optimize", help="optimize a frozen GraphDef (.pb)")
    o.add_argument("input")
    o.add_argument("output")
    o.add_argument("--outputs", help="comma-separated output tensor names (default: sinks)")
    o.add_argument("--overwrite", action="store_true")
    o.set_defaults(run=_optimize)
    e = sub.add_parser("explain", help="print the fusion plan of a frozen GraphDef (.pb)")
    e.add_argument("input")
    e.add_argument("--outputs")
    e.set_defaults(run=_explain)


def _bench_command(sub: Any) -> None:
    """`tf-stitch bench`."""
    b = sub.add_parser(
        "bench",
        help="kernels per step vs TF, XLA:CPU and XLA:GPU, and CPU latency, on the workloads",
    )
    b.add_argument("--workloads", help="comma-separated workload names (default: all ten)")
    b.add_argument("--out", default="tf_stitch_bench", help="output directory")
    b.add_argument("--rounds", type=_count(1), default=10, help="interleaved timing rounds")
    b.add_argument("--gpu", choices=("h100", "h200"), default="h100", help="XLA:GPU target")
    b.add_argument("--no-xla-gpu", action="store_true", help="skip the XLA:GPU counts")
    b.add_argument("--small", action="store_true", help="the workloads' small variants")
    b.set_defaults(run=_bench)


def _profile_command(sub: Any) -> None:
    """`tf-stitch profile`."""
    pr = sub.add_parser(
        "profile",
        help="leveled profile (model, layer, op, library) of a Keras file, SavedModel or workload",
    )
    pr.add_argument("model", help="a .keras/.h5 file, a SavedModel directory or a workload name")
    pr.add_argument(
        "--batch", type=_count(1), default=None, help="batch size (default: the model's)"
    )
    pr.add_argument("--steps", type=_count(1), default=20)
    pr.add_argument("--warmup", type=_count(0), default=5)
    pr.add_argument("--levels", help="comma-separated levels (default: all)")
    pr.add_argument("--logdir", help="write the profile here (TensorBoard logdir)")
    pr.add_argument("--run-name", help="the run's name (default: the time)")
    pr.add_argument("--optimize", action="store_true", help="profile the tf_stitch-optimized model")
    pr.add_argument(
        "--min-confidence",
        type=_fraction,
        help="keep measuring until the latencies' 95%% intervals are this narrow (3%% or 0.03)",
    )
    pr.add_argument(
        "--time-limit", type=float, default=300.0, help="seconds --min-confidence may take"
    )
    pr.add_argument(
        "--otlp-endpoint",
        help="also send the spans over OTLP/HTTP (default: $OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    pr.set_defaults(run=_profile)


def _characterize_command(sub: Any) -> None:
    """`tf-stitch characterize`."""
    c = sub.add_parser(
        "characterize", help="profile a zoo of models, each in its own process, and report"
    )
    c.add_argument("--models", default="all", help="all, or comma-separated names (zoo list)")
    c.add_argument("--batch-sizes", default="1,8,32", help="comma-separated (default 1,8,32)")
    c.add_argument(
        "--logdir",
        default="tf_stitch_characterize/logdir",
        help="TensorBoard logdir for the profiles (any tf.io.gfile path)",
    )
    c.add_argument("--report", default="tf_stitch_characterize/report", help="report folder")
    c.add_argument("--no-report", action="store_true", help="profile only")
    c.add_argument(
        "--report-only",
        action="store_true",
        help="profile nothing: the report of what the logdir holds (after sharded runs)",
    )
    c.add_argument(
        "--shard",
        default="1/1",
        help="I/N: run the I-th of N parts of the zoo; auto: the part a Kubernetes Indexed Job, "
        "a Slurm array or RANK/WORLD_SIZE gives",
    )
    c.add_argument("--jobs", type=int, default=1, help="models profiled at once (default 1)")
    c.add_argument("--steps", type=_count(1), default=10, help="steps per leveled run")
    c.add_argument("--warmup", type=_count(0), default=3)
    c.add_argument("--no-optimize", action="store_true", help="skip the tf_stitch profiles")
    c.add_argument("--timeout", type=float, default=3600, help="seconds per model")
    c.add_argument("--otlp-endpoint", help="also send every profile over OTLP/HTTP")
    c.set_defaults(run=_characterize)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tf-stitch", description="Deep kernel fusion for TensorFlow.")
    p.add_argument(
        "--verbose", action="store_true", help="show TensorFlow's own log lines (hidden by default)"
    )
    sub = p.add_subparsers(dest="command", required=True)
    for add in (
        _demo_command,
        _graph_commands,
        _bench_command,
        _profile_command,
        _characterize_command,
    ):
        add(sub)
    cv = sub.add_parser("convert", help="convert a SavedModel into a stitched SavedModel")
    _convert_arguments(cv)
    cv.set_defaults(run=_convert)
    r = sub.add_parser(
        "run", help="run a Python script with tf_stitch.enable() on: every graph TF runs stitched"
    )
    r.add_argument("script", help="the script, run as `python SCRIPT ARGS...` runs it")
    r.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    r.set_defaults(run=_run)
    ol = sub.add_parser(
        "op-library",
        help="print the op library's path, for tf.load_op_library or TF_LoadLibrary elsewhere",
    )
    ol.set_defaults(run=_op_library)
    sm = sub.add_parser(
        "saved-model-cli",
        help="TensorFlow's saved_model_cli (same arguments) with the StitchedKernel op loaded",
        add_help=False,
    )
    sm.add_argument("-h", "--help", action="store_true", help="this help")
    sm.set_defaults(run=_saved_model_cli)
    z = sub.add_parser("zoo", help="the model zoo: `tf-stitch zoo list`")
    z.add_argument("action", choices=("list",))
    z.set_defaults(run=_zoo)
    return p


def main(argv: list[str] | None = None) -> int:
    """Runs one command; its exit status: 0 done, 1 it failed, 2 bad input."""
    from tf_stitch.native_logs import quiet_native_logs

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["saved-model-cli"] and argv[1:2] not in (["-h"], ["--help"], []):
        from tf_stitch.serving import saved_model_cli

        return saved_model_cli(argv[1:])  # its arguments, output and errors are its own
    args = parser().parse_args(argv)
    if args.command == "run":  # the script's output and errors are its own
        try:
            return _run(args)
        except ValueError as e:
            print(f"tf-stitch: error: {e}", file=sys.stderr)
            return 2
    with quiet_native_logs(args.verbose) as outcome:
        try:
            code = int(args.run(args))
        except (ValueError, TypeError) as e:
            print(f"tf-stitch: error: {e}", file=sys.stderr)
            code = 2
        outcome.failed = code == 1  # a runtime failure: TensorFlow's log follows (native_logs)
    return code


if __name__ == "__main__":
    sys.exit(main())
