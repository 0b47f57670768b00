"""The `glcnn` command (contract in DESIGN.md §4).

    glcnn run  MODEL INPUT [-o OUT] [--precision fp32|fp16]   INPUT/OUT: .npy or image
    glcnn info MODEL [--precision fp32|fp16]
    glcnn view MODEL [--source synthetic|camera|VIDEO|DIR] [--frames N] [--screenshot F]

Errors print one line on stderr and exit with status 2 (a traceback with GLCNN_DEBUG set).
"""

import argparse
import os
import sys
from pathlib import Path

import numpy as np

from .errors import GlcnnError, ShapeError

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="glcnn", description="Run CNNs in GLSL shaders.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a model on a .npy array or an image")
    run.add_argument("model", help="model file (.onnx or glcnn .npz)")
    run.add_argument("input", help=".npy in the model's layout (NCHW float32) or an image")
    run.add_argument("-o", "--output", help="write the first output (.npy or image)")
    run.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    info = sub.add_parser("info", help="layers, shapes, params, FLOPs, texture memory")
    info.add_argument("model")
    info.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    view = sub.add_parser("view", help="live window: input | output | a layer | its filters")
    view.add_argument("model")
    view.add_argument("--source", default="synthetic",
                      help="synthetic (default), camera, camera:N, a video file or a folder")
    view.add_argument("--layer", help="layer shown first (default: the first)")
    view.add_argument("--size", type=int, nargs=2, metavar=("W", "H"),
                      help="run a fully convolutional model at this input size")
    view.add_argument("--frames", type=int, help="render N frames, then exit")
    view.add_argument("--screenshot", help="save the last frame as this PNG")
    return parser


def read_input(path: Path, shape, value_range) -> np.ndarray:
    """A (C, H, W) float32 array from `.npy`, or an image resized to `shape` and scaled."""
    if path.suffix.lower() == ".npy":
        try:
            return np.load(path, allow_pickle=False).astype(np.float32)
        except (OSError, ValueError) as exc:
            raise ShapeError(f"{path}: not a readable .npy array ({exc})") from None
    if path.suffix.lower() not in IMAGE_SUFFIXES:
        raise ShapeError(f"{path}: input must be .npy or an image ({', '.join(IMAGE_SUFFIXES)})")
    from PIL import Image, UnidentifiedImageError
    try:
        image = Image.open(path)
        image.load()
    except (OSError, UnidentifiedImageError) as exc:
        raise ShapeError(f"{path}: cannot read image ({exc})") from None
    c, h, w = shape
    if c not in (1, 3):
        raise ShapeError(f"{path}: model input has {c} channels; images give 1 or 3, use .npy")
    image = image.convert("L" if c == 1 else "RGB")
    if image.size != (w, h):
        print(f"glcnn: resizing {path.name} from {image.size[0]}x{image.size[1]} to the "
              f"model's {w}x{h}", file=sys.stderr)
        image = image.resize((w, h), Image.BILINEAR)
    lo, hi = value_range
    x = np.asarray(image, np.float32).reshape(h, w, c).transpose(2, 0, 1) / 255.0
    return x * (hi - lo) + lo


def write_output(path: Path, y: np.ndarray, value_range) -> None:
    """Save `y` as float32 .npy, or as an image mapping `value_range` to 0..255."""
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


def cmd_run(args) -> None:
    import glcnn
    model = glcnn.load(args.model, precision=args.precision)
    name, shape = next(iter(model.graph.inputs.items()))
    meta = model.graph.meta
    x = read_input(Path(args.input), shape, meta.get("input_range", (0, 1)))
    y = model.run({name: x})
    y = y if isinstance(y, np.ndarray) else y[model.graph.outputs[0]]
    print(f"{Path(args.model).name}: {tuple(x.shape)} -> {tuple(y.shape)}  "
          f"min {y.min():.4g} max {y.max():.4g} mean {y.mean():.4g}  ({model.ctx.renderer})")
    if args.output:
        write_output(Path(args.output), y, meta.get("output_range", (0, 1)))
        print(f"wrote {args.output}")


def cmd_info(args) -> None:
    from .importers import load_graph
    from .ops import build_ops
    from .passes import optimize
    from .summary import table
    graph = optimize(load_graph(args.model))
    ops, shapes = build_ops(graph)
    print(f"{args.model}: inputs {graph.inputs} -> outputs "
          f"{ {o: shapes[o] for o in graph.outputs} }")
    print(table(ops, shapes, args.precision))


def cmd_view(args) -> None:
    from .importers import load_graph
    from .passes import optimize
    from .sources import open_source
    from .viewer import Viewer
    graph = optimize(load_graph(args.model))
    name, (c, h, w) = next(iter(graph.inputs.items()))
    if args.size:
        w, h = args.size
        graph.inputs[name] = (c, h, w)
    viewer = Viewer(graph, open_source(args.source, size=(w, h)), layer=args.layer)
    try:
        viewer.run(frames=args.frames, screenshot=args.screenshot)
    finally:
        viewer.close()


def main(argv=None) -> int:
    """Entry point of the `glcnn` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        {"run": cmd_run, "info": cmd_info, "view": cmd_view}[args.command](args)
    except GlcnnError as exc:
        if os.environ.get("GLCNN_DEBUG"):
            raise
        print(f"glcnn {args.command}: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
