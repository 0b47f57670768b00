"""The `glcnn` command (contract in DESIGN.md §4).

    glcnn run  MODEL INPUT [-o OUT] [--precision fp32|fp16] [--input-size H W]
    glcnn info MODEL [--precision fp32|fp16] [--input-size H W]
    glcnn view MODEL [--source synthetic|camera|VIDEO|DIR] [--frames N] [--screenshot F]
    glcnn diff MODEL INPUT [--against onnxruntime|numpy|tfjs-outputs DIR]
                           [--precision fp32|fp16|u8] [--png DIR]
    glcnn bench MODEL [--against onnxruntime,torch] [--runs N] [--warmup N] [--budget S]
                      [--precision fp32|fp16|u8] [--input NPY] [--input-size H W] [--json FILE]

INPUT/OUT: .npy or image. A model with open input sizes runs at INPUT's own size (an image
is not resized) unless `--input-size H W` fixes it (an image is then resized to it).
Errors print one line on stderr and exit with status 2 (a traceback with GLCNN_DEBUG set).
`glcnn diff` exits with 0 when every layer is within the precision's tolerance and 1 when
a layer diverged or no layer could be compared (so scripts and CI can gate on it).
"""

import argparse
import sys
from pathlib import Path

import numpy as np

from . import debug
from .errors import GlcnnError, ShapeError
from .inputs import IMAGE_SUFFIXES, read_image, read_npy
from .npy import read_header
from .runtime.precision import TOLERANCE


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="glcnn", description="Run CNNs in GLSL shaders.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a model on a .npy array or an image")
    run.add_argument("model", help="model file (.onnx or glcnn .npz)")
    run.add_argument("input", help=".npy in the model's layout (NCHW float32) or an image")
    run.add_argument("-o", "--output", help="write the first output (.npy or image)")
    run.add_argument("--precision", default="fp32", choices=list(TOLERANCE),
                     help="u8 uses the model's calibrated ranges, or calibrates on INPUT")
    _add_input_size(run, "(default: INPUT's own size); an image is resized to it")
    info = sub.add_parser("info", help="layers, shapes, params, FLOPs, texture memory")
    info.add_argument("model")
    info.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    _add_input_size(info, "to show the layers at")
    view = sub.add_parser("view", help="live window: input | output | a layer | its filters")
    view.add_argument("model")
    view.add_argument("--source", default="synthetic",
                      help="synthetic (default), camera, camera:N, a video file or a folder")
    view.add_argument("--layer", help="layer shown first (default: the first)")
    view.add_argument("--size", type=int, nargs=2, metavar=("W", "H"),
                      help="run a fully convolutional model at this input size")
    view.add_argument("--frames", type=int, help="render N frames, then exit")
    view.add_argument("--screenshot", help="save the last frame as this PNG")
    _add_diff_parser(sub)
    _add_bench_parser(sub)
    return parser


def _add_input_size(command, purpose: str) -> None:
    command.add_argument("--input-size", type=int, nargs=2, metavar=("H", "W"),
                         help=f"size for a model whose input sizes are open, {purpose}")


def _add_diff_parser(sub) -> None:
    diff = sub.add_parser("diff", help="per-layer error against a reference; exit 1 if a "
                                       "layer diverged or none was compared")
    diff.add_argument("model", help="model file (.onnx or glcnn .npz)")
    diff.add_argument("input", help=".npy in the model's layout (NCHW float32) or an image")
    diff.add_argument("--against", nargs="+", metavar="REF",
                      help="onnxruntime | numpy | tfjs-outputs DIR (default: onnxruntime "
                           "for .onnx when installed, else numpy)")
    diff.add_argument("--precision", default="fp32", choices=list(TOLERANCE))
    diff.add_argument("--png", metavar="DIR",
                      help="write glcnn | reference | |difference| images per layer")


def _add_bench_parser(sub) -> None:
    bench = sub.add_parser("bench", help="timings vs onnxruntime / torch, per layer and total")
    bench.add_argument("model", help="model file (.onnx, glcnn .npz or TF.js model.json)")
    bench.add_argument("--against", metavar="IMPL[,IMPL]",
                       help="also time onnxruntime (.onnx only) and/or torch, comma-separated")
    bench.add_argument("--runs", type=int, default=30, help="timed runs per measurement (max)")
    bench.add_argument("--warmup", type=int, default=5, help="untimed runs before them")
    bench.add_argument("--budget", type=float, default=3.0,
                       help="seconds after which a measurement stops (at least 3 runs)")
    bench.add_argument("--precision", default="fp32", choices=list(TOLERANCE))
    bench.add_argument("--input", metavar="NPY", help="input .npy in the model's layout "
                       "(default: seeded random in the model's input range)")
    _add_input_size(bench, "to time it at (default: the --input array's size)")
    bench.add_argument("--json", metavar="FILE", help="write every raw number here")


def read_input(path: Path, shape, value_range) -> np.ndarray:
    """A float32 array from `.npy` (as stored), or an image of any mode converted to
    (C, H, W) = `shape` and scaled from [0, 1] to `value_range` (see glcnn.inputs)."""
    if path.suffix.lower() == ".npy":
        return read_npy(path, shape)
    if path.suffix.lower() not in IMAGE_SUFFIXES:
        raise ShapeError(f"{path}: input must be .npy or an image ({', '.join(IMAGE_SUFFIXES)})")
    lo, hi = value_range
    return read_image(path, shape) * (hi - lo) + lo


def write_output(path: Path, y: np.ndarray, value_range) -> None:
    """Save `y` as float32 .npy, or as an image mapping `value_range` to 0..255."""
    try:
        _write(path, y, value_range)
    except OSError as exc:
        raise GlcnnError(f"{path}: cannot write the output ({exc})") from None


def _write(path: Path, y: np.ndarray, value_range) -> None:
    if path.suffix.lower() == ".npy":
        np.save(path, y.astype(np.float32))
        return
    if path.suffix.lower() not in IMAGE_SUFFIXES:
        raise GlcnnError(f"{path}: output must be .npy or an image ({', '.join(IMAGE_SUFFIXES)})")
    from PIL import Image
    c = y.shape[-3]
    if c not in (1, 3):
        raise GlcnnError(f"output has {c} channels; save it as .npy, not an image")
    lo, hi = value_range
    pixels = np.clip((y.reshape(c, *y.shape[-2:]) - lo) / (hi - lo), 0, 1) * 255
    image = pixels.round().astype(np.uint8).transpose(1, 2, 0)
    Image.fromarray(image[..., 0] if c == 1 else image).save(path)


def load_for_input(model, input_path, input_size=None):
    """The optimised graph of `model` for input file `input_path`: at `input_size` if given,
    else, when the model's input sizes are open, at the input's own size (a .npy array's
    shape, an image's pixels)."""
    from .importers import open_inputs
    from .importers.prepared import load_optimized
    from .runtime.open_size import spatial_size
    opened = open_inputs(model) if input_size is None else {}
    if opened:
        name, dims = next(iter(opened.items()))
        input_size = spatial_size(name, dims, _file_shape(Path(input_path)))
    return load_optimized(model, input_size=input_size)


def _file_shape(path: Path) -> tuple:
    """The shape a .npy file's header declares, or (H, W) of an image as (1, H, W)."""
    if path.suffix.lower() == ".npy":
        try:
            with open(path, "rb") as stream:
                return read_header(stream, str(path), ShapeError)[0]
        except OSError as exc:
            raise ShapeError(f"{path}: not a readable .npy array ({exc})") from None
    from PIL import Image
    try:
        with Image.open(path) as image:  # the header only
            return (1, image.height, image.width)
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise ShapeError(f"{path}: cannot read image ({exc})") from None


def cmd_run(args) -> None:
    from .commands.diff import calibrate_if_needed
    from .runtime.pipeline import Pipeline
    graph = load_for_input(args.model, args.input, args.input_size)
    name, shape = next(iter(graph.inputs.items()))
    meta = graph.meta
    x = read_input(Path(args.input), shape, meta.get("input_range", (0, 1)))
    if calibrate_if_needed(graph, args.precision, {name: x}):
        print("glcnn run: the model has no u8 ranges; calibrated them on this input "
              "(glcnn.calibrate + glcnn.save store them)", file=sys.stderr)
    model = Pipeline(graph, precision=args.precision)
    y = model.run({name: x})
    y = y if isinstance(y, np.ndarray) else y[model.graph.outputs[0]]
    print(f"{Path(args.model).name}: {tuple(x.shape)} -> {tuple(y.shape)}  "
          f"min {y.min():.4g} max {y.max():.4g} mean {y.mean():.4g}  ({model.ctx.renderer})")
    if args.output:
        write_output(Path(args.output), y, meta.get("output_range", (0, 1)))
        print(f"wrote {args.output}")


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


def cmd_view(args) -> None:
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
    with Viewer(graph, open_source(args.source, size=(w, h)), layer=args.layer) as viewer:
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
    from .runtime.pipeline import Pipeline
    against, folder = _against(args.against)
    against = check_against(against, args.model, folder)
    graph = load_for_input(args.model, args.input)
    if len(graph.inputs) != 1:
        raise GlcnnError(f"glcnn diff takes one-input models; {args.model} has "
                         f"{list(graph.inputs)}")
    name, shape = next(iter(graph.inputs.items()))
    x = read_input(Path(args.input), shape, graph.meta.get("input_range", (0, 1)))
    if calibrate_if_needed(graph, args.precision, {name: x}):
        print(f"u8: {args.model} has no stored ranges; calibrated on {args.input}",
              file=sys.stderr)
    with Pipeline(graph, None, args.precision, keep="all") as pipe:
        report = diff_pipeline(pipe, {name: x}, against, args.model, folder, args.png)
        print(f"{Path(args.model).name} against {against} ({args.precision}, "
              f"{pipe.ctx.renderer})")
    return report


def cmd_bench(args) -> None:
    from .commands.bench import Settings, bench, write_json
    from .commands.bench_refs import parse_against
    from .commands.bench_report import format_report
    against = parse_against(args.against)
    if args.input and Path(args.input).suffix.lower() != ".npy":
        raise ShapeError(f"{args.input}: --input takes a .npy array in the model's layout")
    inputs = read_npy(Path(args.input)) if args.input else None
    settings = Settings(args.runs, args.warmup, args.budget)
    report = bench(args.model, inputs, (args.precision,), against, settings,
                   input_size=args.input_size)
    print(format_report(report))
    if args.json:
        write_json(args.json, report)
        print(f"wrote {args.json}")


def error_line(exc: Exception, limit: int = 1500) -> str:
    """The first line of an error, safe for a terminal whatever the message holds: control
    characters escaped (messages quote what files say; this is the last guard) and capped."""
    lines = str(exc).splitlines()
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in (lines[0] if lines else ""))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def main(argv=None) -> int:
    """Entry point of the `glcnn` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        commands = {"run": cmd_run, "info": cmd_info, "view": cmd_view, "diff": cmd_diff,
                    "bench": cmd_bench}
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
