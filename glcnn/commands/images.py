"""Input and output files of `glcnn run` / `diff` / `bench` (GL-free): pre-processing of
images and `.npy` arrays on the way in, image outputs on the way out.

An image input (glcnn.inputs.read_image: [0, 1], resized, C channels) becomes, per channel c,
the same as the viewer's shaders/preprocess.glsl does on the GPU:

    x[c] = (v[order[c]] - mean[c]) / std[c]
    v = p · (hi - lo) + lo    (p in [0, 1]; lo, hi: the model's input_range, default 0, 1)
    v = p · 255 · S           (with --scale S instead: raw 0..255 pixel values times S)

order swaps R and B with --bgr (or channel_order "bgr" in the model's meta); mean and std
come from --mean / --std, else the model's meta "mean" / "std", else 0 and 1. A `.npy` input
is used as stored: NCHW, or NHWC with --layout nhwc; a uint8 array is fed as its raw 0..255
values (noted on stderr). An image output maps --output-range LO..HI (default the model's
output_range, else 0..1) to 0..255; the values it clips are counted and reported.
"""

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import GlcnnError, ShapeError
from ..inputs import IMAGE_SUFFIXES, read_image, read_npy
from ..npy import read_header


@dataclass
class Preprocess:
    """Pre-processing flags of the glcnn command (None: the model's meta, else the default)."""

    mean: tuple | None = None
    std: tuple | None = None
    scale: float | None = None
    bgr: bool = False
    layout: str = "nchw"

    @classmethod
    def from_args(cls, args) -> "Preprocess":
        """The flags of a parsed command line (those the command lacks: defaults)."""
        return cls(getattr(args, "mean", None), getattr(args, "std", None),
                   getattr(args, "scale", None), getattr(args, "bgr", False),
                   getattr(args, "layout", None) or "nchw")


def numbers(text: str) -> tuple[float, ...]:
    """argparse type of --mean / --std / --output-range: "0.5,0.5,0.5" as floats.

    Raises:
        ValueError: a part that is not a finite number (argparse reports it).
    """
    values = tuple(float(part) for part in text.split(","))
    if not values or not all(np.isfinite(values)):
        raise ValueError(text)
    return values


def read_input(path: Path, shape, meta: dict, prep: Preprocess | None = None) -> np.ndarray:
    """The (C, H, W) float32 input of shape `shape` = (C, H, W) read from `path`: a `.npy`
    array (as stored, NCHW or NHWC by `prep.layout`) or an image pre-processed as the module
    docstring says, by `prep` and the model's `meta`.

    Raises:
        ShapeError: unreadable file, the wrong size, another suffix; GlcnnError: a --mean /
            --std with as many values as neither 1 nor C, a std of 0, or image flags
            (mean, std, scale, bgr) given for a .npy array.
    """
    prep = prep or Preprocess()
    if path.suffix.lower() == ".npy":
        given = [flag for flag, value in (("--mean", prep.mean), ("--std", prep.std),
                                          ("--scale", prep.scale), ("--bgr", prep.bgr or None))
                 if value is not None]
        if given:
            raise GlcnnError(f"{' '.join(given)}: for image inputs; {path.name} is a .npy "
                             "array, fed as stored")
        return _read_npy(path, shape, meta, prep.layout)
    if path.suffix.lower() not in IMAGE_SUFFIXES:
        raise ShapeError(f"{path}: input must be .npy or an image ({', '.join(IMAGE_SUFFIXES)})")
    pixels = read_image(path, shape)
    if (prep.bgr or meta.get("channel_order") == "bgr") and shape[0] >= 3:
        pixels[[0, 2]] = pixels[[2, 0]]
    if prep.scale is not None:
        values = pixels * np.float32(255 * prep.scale)
    else:
        lo, hi = meta.get("input_range", (0, 1))
        values = pixels * np.float32(hi - lo) + np.float32(lo)
    mean = _per_channel(prep.mean if prep.mean is not None else meta.get("mean"), shape[0],
                        "--mean", 0.0)
    std = _per_channel(prep.std if prep.std is not None else meta.get("std"), shape[0],
                       "--std", 1.0)
    if not np.all(std != 0):
        raise GlcnnError(f"--std {std.ravel().tolist()}: a standard deviation of 0")
    return ((values - mean) / std).astype(np.float32)


def _per_channel(values, channels: int, flag: str, default: float) -> np.ndarray:
    """`values` (1 or `channels` numbers; None: `default`) as a (C, 1, 1) float32 array."""
    values = [default] if values is None else list(values)
    if len(values) not in (1, channels):
        raise GlcnnError(f"{flag} gives {len(values)} values; the model input has {channels} "
                         "channels (give 1 or as many as channels)")
    return np.broadcast_to(np.asarray(values, np.float32).reshape(-1, 1, 1),
                           (channels, 1, 1)).copy()


def _read_npy(path: Path, shape, meta: dict, layout: str) -> np.ndarray:
    x = read_npy(path, shape)
    if _npy_dtype(path) == np.uint8:
        lo, hi = meta.get("input_range", (0, 1))
        print(f"glcnn: note: {path.name} is uint8: fed as its raw 0..255 values (the model's "
              f"input range is {lo:g}..{hi:g}); convert it to float32 in that range, or "
              "give the image file", file=sys.stderr)
    if layout == "nchw":
        return x
    c, h, w = shape
    if x.shape[-3:] != (h, w, c) or x.ndim not in (3, 4):
        raise ShapeError(f"{path}: --layout nhwc takes (H, W, C) = {(h, w, c)} or "
                         f"(1, H, W, C); the array is {x.shape}")
    return np.ascontiguousarray(x.reshape(h, w, c).transpose(2, 0, 1))


def _npy_dtype(path: Path):
    with open(path, "rb") as stream:
        return read_header(stream, str(path), ShapeError)[1]


def write_output(path: Path, y: np.ndarray, value_range, warn: bool = True) -> float:
    """Save `y` as float32 .npy, or as an image mapping `value_range` (lo, hi) to 0..255.
    Returns the fraction of values clipped (outside lo..hi; 0 for .npy); when some were and
    `warn`, a warning on stderr gives their percentage and how to choose the range.

    Raises:
        GlcnnError: another suffix, an image of neither 1 nor 3 channels, an unwritable path.
    """
    try:
        clipped = _write(path, y, value_range)
    except OSError as exc:
        raise GlcnnError(f"{path}: cannot write the output ({exc})") from None
    if clipped and warn:
        lo, hi = value_range
        below, above = clipped
        print(f"glcnn: warning: {100 * (below + above) / y.size:.1f} % of the output values "
              f"were clipped writing {path.name} ({below} below {lo:g}, {above} above {hi:g}; "
              f"output range {y.min():.4g}..{y.max():.4g}); --output-range LO,HI sets the "
              "values mapped to 0..255", file=sys.stderr)
    return sum(clipped) / y.size if clipped else 0.0


def _write(path: Path, y: np.ndarray, value_range) -> tuple[int, int] | None:
    if path.suffix.lower() == ".npy":
        np.save(path, y.astype(np.float32))
        return None
    if path.suffix.lower() not in IMAGE_SUFFIXES:
        raise GlcnnError(f"{path}: output must be .npy or an image ({', '.join(IMAGE_SUFFIXES)})")
    from PIL import Image
    c = y.shape[-3]
    if c not in (1, 3):
        raise GlcnnError(f"output has {c} channels; save it as .npy, not an image")
    lo, hi = value_range
    if not lo < hi:
        raise GlcnnError(f"--output-range {lo:g},{hi:g}: LO must be below HI")
    scaled = (y.reshape(c, *y.shape[-2:]) - lo) / (hi - lo)
    image = (np.clip(scaled, 0, 1) * 255).round().astype(np.uint8).transpose(1, 2, 0)
    Image.fromarray(image[..., 0] if c == 1 else image).save(path)
    below, above = int(np.count_nonzero(scaled < 0)), int(np.count_nonzero(scaled > 1))
    return (below, above) if below or above else None
