"""The `glcnn` command (contract in DESIGN.md §4).

    glcnn [--version] [-q] COMMAND ...
    glcnn run  MODEL INPUT|DIR [-o OUT|OUTDIR] [--precision fp32|fp16|u8] [--input-size H W]
               [--mean R,G,B] [--std R,G,B] [--scale S] [--bgr] [--layout nchw|nhwc]
               [--output-range LO,HI]
    glcnn info MODEL [--precision fp32|fp16] [--input-size H W]
    glcnn view MODEL [--source synthetic|camera|VIDEO|DIR] [--frames N] [--screenshot F]
               [--train [training options]]
    glcnn train MODEL [--source SOURCE] [--steps N] [--seconds S] [--batch B] [--lr LR]
                [--optimizer adam|adamw|sgd] [--save OUT.npz] [--from-scratch] [--no-window]
    glcnn diff MODEL INPUT [--against onnxruntime|numpy|tfjs-outputs DIR]
                           [--precision fp32|fp16|u8] [--png DIR] [pre-processing flags]
    glcnn bench MODEL [--against onnxruntime,torch] [--runs N] [--warmup N] [--budget S]
                      [--precision fp32|fp16|u8] [--input NPY|IMAGE] [--input-size H W]
                      [--json FILE] [pre-processing flags]

MODEL: an .onnx file, a glcnn .npz, a TF.js model.json or the folder holding it, or the short
name of a model glcnn ships (`glcnn.importers.shipped_models`), e.g. `autoencoder`.
INPUT/OUT: .npy or image; pre- and post-processing in glcnn.commands.images. A model with
open input sizes runs at INPUT's own size (an image is not resized) unless `--input-size H W`
fixes it (an image is then resized to it). Progress bars (compile, bench, diff, folders) go
to stderr when it is a terminal, unless -q/--quiet.
Errors print one line on stderr and exit with status 2 (a traceback with GLCNN_DEBUG set).
`glcnn diff` exits with 0 when every layer is within the precision's tolerance and 1 when
a layer diverged or no layer could be compared (so scripts and CI can gate on it).
"""

import argparse
import sys
from importlib import metadata
from pathlib import Path

import numpy as np

from . import debug
from .commands import images
from .commands.run import cmd_run, load_for_input
from .commands.train import add_options as add_training_options
from .errors import GlcnnError, ShapeError
from .importers import model_path, shipped_models
from .inputs import IMAGE_SUFFIXES, channels_last, read_npy
from .runtime.precision import TOLERANCE

__all__ = ["cmd_run", "load_for_input", "main", "read_input", "write_output"]
FORMATS = "an .onnx file, a glcnn .npz, a TF.js model.json or the folder holding it"


def _model_help() -> str:
    names = ", ".join(shipped_models())
    return FORMATS + (f", or a shipped model by name ({names})" if names else "")


def _version() -> str:
    try:
        return metadata.version("glcnn")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="glcnn", description="Run CNNs in GLSL shaders.")
    parser.add_argument("--version", action="version", version=f"glcnn {_version()}")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bars (they are drawn only when stderr is a terminal)")
    quiet = argparse.ArgumentParser(add_help=False)  # -q after the command too
    quiet.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                       help="no progress bars")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", parents=[quiet], help="run a model on a .npy array, an image "
                         "or a folder of images")
    run.add_argument("model", help=f"the model: {_model_help()}")
    run.add_argument("input", help=".npy in the model's layout (NCHW float32; --layout), an "
                     "image, or a folder: every image in it through one pipeline")
    run.add_argument("-o", "--output", help="write the first output (.npy or image); for a "
                     "folder, OUTDIR for STEM.png (image outputs) or STEM.npy")
    run.add_argument("--precision", default="fp32", choices=list(TOLERANCE),
                     help="u8 uses the model's calibrated ranges, or calibrates on INPUT")
    _add_input_size(run, "(default: INPUT's own size); an image is resized to it")
    _add_preprocessing(run)
    run.add_argument("--output-range", type=images.numbers, metavar="LO,HI",
                     help="output values mapped to 0..255 in an image (default: the model's "
                          "output_range, else 0,1); values outside are clipped, with a warning")
    info = sub.add_parser("info", parents=[quiet],
                          help="layers, shapes, params, FLOPs, texture memory")
    info.add_argument("model", help=f"the model: {_model_help()}")
    info.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    _add_input_size(info, "to show the layers at")
    _add_view_parser(sub, quiet)
    train = sub.add_parser("train", parents=[quiet], help="train the model to reconstruct a "
                           "source's frames, in the live window")
    train.add_argument("model", help=f"the model: {_model_help()}")
    add_training_options(train, view=False)
    _add_diff_parser(sub, quiet)
    _add_bench_parser(sub, quiet)
    return parser


def _add_input_size(command, purpose: str) -> None:
    command.add_argument("--input-size", type=int, nargs=2, metavar=("H", "W"),
                         help=f"size for a model whose input sizes are open, {purpose}")


def _add_preprocessing(command) -> None:
    """Flags turning an image (or .npy) into the model's input (glcnn.commands.images)."""
    group = command.add_argument_group("pre-processing of image inputs: x = (v - mean) / std, "
                                       "v = pixel in the model's input_range")
    group.add_argument("--mean", type=images.numbers, metavar="R,G,B",
                       help="per-channel mean subtracted after scaling (default: the model's "
                            "meta, else 0); one value for all channels")
    group.add_argument("--std", type=images.numbers, metavar="R,G,B",
                       help="per-channel divisor after the mean (default: the model's meta, "
                            "else 1)")
    group.add_argument("--scale", type=float, metavar="S",
                       help="v = raw 0..255 pixel values times S, instead of input_range")
    group.add_argument("--bgr", action="store_true",
                       help="feed channels as B, G, R (mean/std are in the order fed)")
    group.add_argument("--layout", choices=["nchw", "nhwc"], default="nchw",
                       help="layout of a .npy input (default nchw)")


def _add_view_parser(sub, quiet) -> None:
    view = sub.add_parser("view", parents=[quiet],
                          help="live window: input | output | a layer | its filters")
    view.add_argument("model", help=f"the model: {_model_help()}")
    view.add_argument("--source", default="synthetic",
                      help="synthetic (default), camera, camera:N, a video file or a folder")
    view.add_argument("--layer", help="layer shown first (default: the first)")
    view.add_argument("--size", type=int, nargs=2, metavar=("W", "H"),
                      help="run a fully convolutional model at this input size")
    view.add_argument("--frames", type=int, help="render N frames, then exit")
    view.add_argument("--screenshot", help="save the last frame as this PNG")
    view.add_argument("--labels", metavar="FILE",
                      help="names of a vector output's entries, one per line (class names)")
    add_training_options(view, view=True)


def _add_diff_parser(sub, quiet) -> None:
    diff = sub.add_parser("diff", parents=[quiet],
                          help="per-layer error against a reference; exit 1 if a layer "
                               "diverged or none was compared")
    diff.add_argument("model", help=f"the model: {_model_help()}")
    diff.add_argument("input", help=".npy in the model's layout (NCHW float32) or an image")
    diff.add_argument("--against", nargs="+", metavar="REF",
                      help="onnxruntime | numpy | tfjs-outputs DIR (default: onnxruntime "
                           "for .onnx when installed, else numpy)")
    diff.add_argument("--precision", default="fp32", choices=list(TOLERANCE))
    diff.add_argument("--png", metavar="DIR",
                      help="write glcnn | reference | |difference| images per layer")
    _add_preprocessing(diff)


def _add_bench_parser(sub, quiet) -> None:
    bench = sub.add_parser("bench", parents=[quiet],
                           help="timings vs onnxruntime / torch, per layer and total")
    bench.add_argument("model", help=f"the model: {_model_help()}")
    bench.add_argument("--against", metavar="IMPL[,IMPL]",
                       help="also time onnxruntime (.onnx only) and/or torch, comma-separated")
    bench.add_argument("--runs", type=int, default=30, help="timed runs per measurement (max)")
    bench.add_argument("--warmup", type=int, default=5, help="untimed runs before them")
    bench.add_argument("--budget", type=float, default=3.0,
                       help="seconds after which a measurement stops (at least 3 runs)")
    bench.add_argument("--precision", default="fp32", choices=list(TOLERANCE))
    bench.add_argument("--input", metavar="NPY|IMAGE", help="input .npy in the model's layout, "
                       "or an image read as `run` does (default: seeded random in the "
                       "model's input range)")
    _add_input_size(bench, "to time it at (default: the --input array's size)")
    bench.add_argument("--json", metavar="FILE", help="write every raw number here")
    _add_preprocessing(bench)


def read_input(path: Path, shape, value_range, prep=None) -> np.ndarray:
    """A float32 array from `.npy` (as stored), or an image of any mode converted to
    (C, H, W) = `shape` and scaled from [0, 1] to `value_range` (glcnn.commands.images)."""
    return images.read_input(Path(path), shape, {"input_range": value_range}, prep)


def write_output(path: Path, y: np.ndarray, value_range) -> None:
    """Save `y` as float32 .npy, or as an image mapping `value_range` to 0..255 (clipping
    warned about on stderr)."""
    images.write_output(Path(path), y, value_range)


def cmd_info(args) -> None:
    from .importers import open_inputs
    from .importers.prepared import load_optimized
    from .ops import build_ops
    from .runtime.open_size import shown_inputs
    from .runtime.summary import table
    opened = open_inputs(args.model) if args.input_size is None else {}
    if opened:
        print(f"{args.model}: inputs {shown_inputs(opened)}: open sizes, compiled for the size "
              "of each input run; --input-size H W shows the layers at one size")
        return
    graph = load_optimized(args.model, input_size=args.input_size)
    ops, shapes = build_ops(graph)
    print(f"{args.model}: inputs {graph.inputs} -> outputs "
          f"{ {o: shapes[o] for o in graph.outputs} }")
    print(table(ops, shapes, args.precision))


def cmd_train(args) -> None:
    """`glcnn train`, `glcnn view --train`: glcnn.viewer.training with commands.train's parts."""
    from .commands import train
    from .viewer.sources import open_source
    from .viewer.training import Options
    from .viewer.training import train as run
    from .viewer.window import check_screenshot_path
    train.check(args)
    if args.screenshot:
        check_screenshot_path(args.screenshot)
    graph = train.training_graph(args.model, args.size, args.from_scratch, args.seed)
    steps = args.steps if args.steps or args.command == "train" else getattr(args, "frames", None)
    options = Options(train.settings(args), steps, args.seconds, args.batch, args.save,
                      not args.no_window, args.layer, args.screenshot, args.seed)
    with train.reporter(steps, args.quiet) as report:
        result = run(graph, open_source(args.source), options, report)
    print(train.summary(result), file=sys.stderr)


def cmd_view(args) -> None:
    if args.train:
        return cmd_train(args)
    from .importers.prepared import load_optimized
    from .viewer.sources import open_source
    from .viewer.window import Viewer, check_screenshot_path
    if args.screenshot:
        check_screenshot_path(args.screenshot)
    from .importers import open_inputs
    opened = open_inputs(args.model)
    if opened and not args.size:
        raise GlcnnError(f"{args.model} leaves its input sizes open; pass --size W H")
    graph = load_optimized(args.model, input_size=args.size[::-1] if opened else None)
    name, (c, h, w) = next(iter(graph.inputs.items()))
    if args.size:
        w, h = args.size
        graph.inputs[name] = (c, h, w)
    with Viewer(graph, open_source(args.source, size=(w, h)), layer=args.layer,
                labels=args.labels) as viewer:
        viewer.run(frames=args.frames, screenshot=args.screenshot)


def _against(values) -> tuple[str | None, str | None]:
    """`--against` words as (reference, folder).

    Raises:
        GlcnnError: anything but onnxruntime, numpy or tfjs-outputs DIR.
    """
    if not values:
        return None, None
    if values[0] == "tfjs-outputs" and len(values) == 2:
        return values[0], values[1]
    if values[0] in ("onnxruntime", "numpy") and len(values) == 1:
        return values[0], None
    raise GlcnnError(f"--against takes onnxruntime, numpy or tfjs-outputs DIR; got "
                     f"{' '.join(values)!r} (put --against after MODEL INPUT)")


def cmd_diff(args) -> int:
    """Print the per-layer table; 0 when all layers are within tolerance, 1 when one
    diverged or when nothing was compared (one line on stderr: what was looked for)."""
    from .commands.diff import NothingComparedError, format_table
    try:
        report = _diff_report(args)
    except NothingComparedError as exc:
        if debug.level() >= 1:
            raise
        print(f"glcnn diff: error: {error_line(exc)}", file=sys.stderr)
        return 1
    print(format_table(report, args.precision))
    if args.png:
        print(f"wrote per-layer images and index.tsv to {args.png}")
    return 1 if report.first_divergence else 0


def _diff_report(args):
    """Run the model keeping every layer and compare each with the reference (a DiffReport)."""
    from .commands.diff import calibrate_if_needed, diff_pipeline
    from .commands.diff_refs import check_against
    from .commands.progress import compiling, waiting
    from .runtime.pipeline import Pipeline
    against, folder = _against(args.against)
    against = check_against(against, args.model, folder)
    graph = load_for_input(args.model, args.input)
    if len(graph.inputs) != 1:
        raise GlcnnError(f"glcnn diff takes one-input models; {args.model} has "
                         f"{list(graph.inputs)}")
    name, shape = next(iter(graph.inputs.items()))
    x = images.read_input(Path(args.input), shape, graph.meta, images.Preprocess.from_args(args))
    if calibrate_if_needed(graph, args.precision, {name: x}):
        print(f"u8: {args.model} has no stored ranges; calibrated on {args.input}",
              file=sys.stderr)
    with compiling(graph, args.quiet):
        pipe = Pipeline(graph, None, args.precision, keep="all")
    with pipe:
        with waiting(f"comparing {len(pipe.ops)} layers with {against}", args.quiet):
            report = diff_pipeline(pipe, {name: x}, against, args.model, folder, args.png)
        print(f"{Path(args.model).name} against {against} ({args.precision}, "
              f"{pipe.ctx.renderer})")
    return report


def cmd_bench(args) -> None:
    from .commands.bench import Settings, bench, write_json
    from .commands.bench_refs import parse_against
    from .commands.bench_report import format_report
    from .commands.progress import steps
    against = parse_against(args.against)
    inputs = _bench_input(args) if args.input else None
    settings = Settings(args.runs, args.warmup, args.budget)
    with steps(3 + 2 * len(against), "bench", args.quiet) as report_progress:
        report = bench(args.model, inputs, (args.precision,), against, settings,
                       input_size=args.input_size, report_progress=report_progress)
    print(format_report(report))
    if args.json:
        write_json(args.json, report)
        print(f"wrote {args.json}")


def _bench_input(args) -> np.ndarray:
    """`glcnn bench --input`: a .npy array as stored (NHWC to NCHW with --layout nhwc), or an
    image read as `glcnn run` reads it, at the model's (or --input-size's) size."""
    path = Path(args.input)
    if path.suffix.lower() == ".npy" and args.layout == "nchw":
        return read_npy(path)
    if path.suffix.lower() != ".npy" and path.suffix.lower() not in IMAGE_SUFFIXES:
        raise ShapeError(f"{path}: --input takes a .npy array or an image "
                         f"({', '.join(IMAGE_SUFFIXES)})")
    graph = load_for_input(args.model, path, args.input_size)
    if len(graph.inputs) != 1:
        raise GlcnnError(f"--input {path}: {args.model} has inputs {list(graph.inputs)}; an "
                         "image or NHWC array feeds one-input models")
    name, shape = next(iter(graph.inputs.items()))
    x = images.read_input(path, shape, graph.meta, images.Preprocess.from_args(args))
    if channels_last(graph.meta, name):  # a TF.js model's own layout, or an NHWC ONNX input
        return x.transpose(1, 2, 0)[None]
    return x[None]  # (1, C, H, W): NCHW, the own layout of ONNX and .npz models


def error_line(exc: Exception, limit: int = 1500) -> str:
    """The first line of an error, safe for a terminal whatever the message holds: control
    characters escaped (messages quote what files say; this is the last guard) and capped."""
    lines = str(exc).splitlines()
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in (lines[0] if lines else ""))
    return text if len(text) <= limit else text[:limit - 3] + "..."


NUMBER_FLAGS = ("--mean", "--std", "--output-range", "--scale")


def _joined(argv) -> list[str]:
    """`--output-range -1,1` as `--output-range=-1,1`: argparse takes a value starting with
    "-" for an option unless it is joined to its flag."""
    argv, out = [str(a) for a in argv], []
    for i, arg in enumerate(argv):
        if i and argv[i - 1] in NUMBER_FLAGS and arg.startswith("-") and out[-1] == argv[i - 1]:
            out[-1] = f"{argv[i - 1]}={arg}"
        else:
            out.append(arg)
    return out


def main(argv=None) -> int:
    """Entry point of the `glcnn` console script; returns the exit status."""
    args = _parser().parse_args(_joined(sys.argv[1:] if argv is None else argv))
    try:
        args.model = str(model_path(args.model))  # a TF.js folder, a shipped model's name
        commands = {"run": cmd_run, "info": cmd_info, "view": cmd_view, "diff": cmd_diff,
                    "bench": cmd_bench, "train": cmd_train}
        status = commands[args.command](args)
    except GlcnnError as exc:
        if debug.level() >= 1:
            raise
        print(f"glcnn {args.command}: error: {error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
