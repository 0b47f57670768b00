"""`glcnn run`: a model on one input file, or on every image of a folder through one
pipeline (compiled once), writing each output under the image's stem."""

import sys
import time
from pathlib import Path

import numpy as np

from ..errors import GlcnnError, ShapeError
from ..npy import read_header
from ..runtime.pipeline import Pipeline
from .diff import calibrate_if_needed
from .images import Preprocess, read_input, write_output
from .progress import bar, compiling

# Images a folder run takes (lower-case suffixes; other files in the folder are ignored).
FOLDER_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")


def load_for_input(model, input_path, input_size=None):
    """The optimised graph of `model` for input file `input_path`: at `input_size` if given,
    else, when the model's input sizes are open, at the input's own size (a .npy array's
    shape, an image's pixels)."""
    from ..importers import open_inputs
    from ..importers.prepared import load_optimized
    from ..runtime.open_size import spatial_size
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


def folder_images(folder: Path) -> list[Path]:
    """The images of `folder` (FOLDER_SUFFIXES, any case), sorted by name.

    Raises:
        GlcnnError: none there, or two sharing a stem (their outputs would collide).
    """
    files = sorted(p for p in folder.iterdir()
                   if p.is_file() and p.suffix.lower() in FOLDER_SUFFIXES)
    if not files:
        raise GlcnnError(f"{folder}: no images ({', '.join(FOLDER_SUFFIXES)}) in the folder")
    stems = [p.stem for p in files]
    twins = sorted({s for s in stems if stems.count(s) > 1})
    if twins:
        raise GlcnnError(f"{folder}: images {twins} share a stem; their outputs would "
                         "overwrite each other")
    return files


def output_range(args, meta: dict) -> tuple[float, float]:
    """--output-range, else the model's output_range, else (0, 1)."""
    value = getattr(args, "output_range", None) or meta.get("output_range", (0, 1))
    if len(value) != 2 or not value[0] < value[1]:
        raise GlcnnError(f"--output-range {','.join(map(str, value))}: expected LO,HI with "
                         "LO < HI")
    return tuple(value)


def cmd_run(args) -> None:
    """`glcnn run MODEL INPUT [-o OUT]`, or `glcnn run MODEL DIR -o OUTDIR`."""
    if Path(args.input).is_dir():
        return run_folder(args)
    graph = load_for_input(args.model, args.input, args.input_size)
    name, shape = next(iter(graph.inputs.items()))
    x = read_input(Path(args.input), shape, graph.meta, Preprocess.from_args(args))
    model = _compile(graph, args, {name: x})
    y = _first_output(model, {name: x})
    print(f"{Path(args.model).name}: {tuple(x.shape)} -> {tuple(y.shape)}  "
          f"min {y.min():.4g} max {y.max():.4g} mean {y.mean():.4g}  ({model.ctx.renderer})")
    if args.output:
        target = Path(args.output)
        y = y if target.suffix.lower() == ".npy" else _channels_first(y, graph.meta)
        write_output(target, y, output_range(args, graph.meta))
        print(f"wrote {args.output}")


def _compile(graph, args, sample: dict) -> Pipeline:
    """The Pipeline of `graph` (calibrated on `sample` for u8 without ranges), with a
    compile progress bar."""
    if calibrate_if_needed(graph, args.precision, sample):
        print("glcnn run: the model has no u8 ranges; calibrated them on this input "
              "(glcnn.calibrate + glcnn.save store them)", file=sys.stderr)
    with compiling(graph, args.quiet):
        return Pipeline(graph, precision=args.precision)


def _first_output(model: Pipeline, feeds: dict) -> np.ndarray:
    y = model.run(feeds)
    return y if isinstance(y, np.ndarray) else y[model.graph.outputs[0]]


def run_folder(args) -> None:
    """Every image of folder `args.input` through one pipeline, compiled for the first
    image's size (`--input-size` for open sizes; other sizes are resized), each output
    written to `args.output`/STEM.png (1 or 3 channels) or STEM.npy. Closes with a line
    "N images in S s (X images/s)"; clipped image outputs are summed up in one warning."""
    files = folder_images(Path(args.input))
    if not args.output:
        raise GlcnnError(f"{args.input} is a folder: give -o OUTDIR for the outputs")
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GlcnnError(f"{out}: cannot make the output folder ({exc})") from None
    graph = load_for_input(args.model, files[0], args.input_size)
    if len(graph.inputs) != 1:
        raise GlcnnError(f"folder runs take one-input models; {args.model} has "
                         f"{list(graph.inputs)}")
    name, shape = next(iter(graph.inputs.items()))
    prep, value_range = Preprocess.from_args(args), output_range(args, graph.meta)
    model = _compile(graph, args, {name: read_input(files[0], shape, graph.meta, prep)})
    start, clipped = time.perf_counter(), []
    with bar(len(files), "images", args.quiet, unit="image") as progress:
        for file in files:
            y = _first_output(model, {name: read_input(file, shape, graph.meta, prep)})
            image = _is_image(_channels_first(y, graph.meta))
            y = _channels_first(y, graph.meta) if image else y
            target = out / (file.stem + (".png" if image else ".npy"))
            clipped.append(write_output(target, y, value_range, warn=False))
            progress.update(1)
    seconds = time.perf_counter() - start
    _warn_clipped(clipped, value_range)
    print(f"{len(files)} images in {seconds:.2f} s ({len(files) / seconds:.1f} images/s), "
          f"outputs in {out}")


def _channels_first(y: np.ndarray, meta: dict) -> np.ndarray:
    """An output in a channels-last model's own layout (TF.js (1, H, W, C)) as (1, C, H, W),
    to be written as an image; others as they are."""
    return y.transpose(0, 3, 1, 2) if meta.get("layout") == "NHWC" and y.ndim == 4 else y


def _is_image(y: np.ndarray) -> bool:
    """An output written as an image: (.., C, H, W) with C = 1 or 3 and more than one pixel."""
    return y.ndim >= 3 and y.shape[-3] in (1, 3) and y.shape[-2] * y.shape[-1] > 1


def _warn_clipped(fractions: list, value_range) -> None:
    touched = [f for f in fractions if f > 0]
    if touched:
        print(f"glcnn: warning: writing {len(touched)} of {len(fractions)} image outputs "
              f"clipped values outside {value_range[0]:g}..{value_range[1]:g} "
              f"({100 * sum(fractions) / len(fractions):.1f} % of all values); "
              "--output-range LO,HI sets the values mapped to 0..255", file=sys.stderr)
