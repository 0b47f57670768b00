"""Model inputs (GL-free): arrays given to a Pipeline, checked; and the files `glcnn run` /
`glcnn diff` read them from, `.npy` arrays and images of any mode.

Arrays (`checked_input`): (C, H, W) or (1, C, H, W), any real dtype, any strides; bool,
complex, strings, objects, NaN/Inf and values beyond float32's range (checked after the
conversion to float32) are refused with a ShapeError; so are `.npy` files holding them.

Images become (C, H, W) float32 in [0, 1] for a model taking C = 1, 3 or 4 channels:

| image mode                  | becomes                                                |
|-----------------------------|--------------------------------------------------------|
| RGB, CMYK, YCbCr, P, ...    | RGB / 255 (palette images through their palette)       |
| RGBA, LA, PA, P with alpha  | RGBA / 255; a 1- or 3-channel model drops alpha (noted) |
| L, 1                        | grey / 255                                             |
| I;16, I;16B, I (16-bit)     | grey / 65535 (not clipped to 8 bits)                   |
| F, I beyond 0..65535        | refused: the value range is unknown, use .npy          |

Grey feeds a 3-channel model as three equal channels; colour feeds a 1-channel model as
luma (ITU-R 601: 0.299 R + 0.587 G + 0.114 B). Images of another size are resized
bilinearly (noted on stderr). Images larger than `glcnn.limits.MAX_IMAGE_PIXELS` (64 MP)
are refused from their header, before they are decoded.
"""

import math
import sys
import warnings
from pathlib import Path

import numpy as np

from .errors import ShapeError, quote
from .limits import MAX_IMAGE_PIXELS, memory_budget, mib
from .npy import read_header

# Image files glcnn reads (glcnn run, diff, the viewer's folder source), in the order messages
# list them.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")
_SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N", "I")
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)


def read_npy(path: Path, expected: tuple | None = None) -> np.ndarray:
    """A `.npy` file as float32, its header checked before any data is read: plain numbers,
    not truncated, within the memory budget and, given `expected`, as many values.

    Args:
        expected: the model input's (C, H, W); the array must hold C·H·W values (its shape
            is checked in full by `checked_input`).
    Raises:
        ShapeError: unreadable, truncated, too large, the wrong size, or not a plain
            numeric array.
    """
    try:
        with open(path, "rb") as stream:
            shape, dtype = read_header(stream, str(path), ShapeError)
            available = path.stat().st_size - stream.tell()
        _check_npy_size(path, shape, dtype, available, expected)
        return as_float32(np.load(path, allow_pickle=False), str(path))
    except (OSError, ValueError) as exc:
        raise ShapeError(f"{path}: not a readable .npy array ({exc})") from None


def _check_npy_size(path: Path, shape, dtype, available: int, expected) -> None:
    count = math.prod(shape)
    if expected is not None and count != math.prod(expected):
        raise ShapeError(f"{path}: its header declares shape {shape} ({count:,} values); the "
                         f"model input is {tuple(expected)} ({math.prod(expected):,} values)")
    if count * dtype.itemsize > available:
        raise ShapeError(f"{path}: truncated .npy file (its header declares {shape} "
                         f"{dtype}, more than the {available} bytes that follow)")
    if count * max(dtype.itemsize, 4) > memory_budget():
        raise ShapeError(f"{path}: its header declares {shape} {dtype}, "
                         f"{mib(count * max(dtype.itemsize, 4))} as float32, over the memory "
                         f"budget of {mib(memory_budget())} (GLCNN_MEMORY_BUDGET)")


def read_image(path: Path, shape) -> np.ndarray:
    """An image file as (C, H, W) float32 in [0, 1] for a model input of `shape`.

    Raises:
        ShapeError: unreadable image, a mode whose range is unknown, or C not 1, 3 or 4.
    """
    c, h, w = shape
    if c not in (1, 3, 4):
        raise ShapeError(f"{path}: model input has {c} channels; images give 1, 3 or 4, "
                         "use .npy")
    pixels = _unit_pixels(_open(path), path)
    pixels = _match_channels(pixels, c, path)
    if pixels.shape[:2] != (h, w):
        print(f"glcnn: resizing {path.name} from {pixels.shape[1]}x{pixels.shape[0]} to the "
              f"model's {w}x{h}", file=sys.stderr)
        pixels = _resize(pixels, (w, h))
    return np.ascontiguousarray(pixels.transpose(2, 0, 1), np.float32)


def _open(path: Path):
    from PIL import Image, UnidentifiedImageError
    try:
        with warnings.catch_warnings():  # glcnn's own cap below is lower than Pillow's
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(path)
        width, height = image.size
        if width * height > MAX_IMAGE_PIXELS:
            image.close()
            raise ShapeError(f"{path}: image of {width}×{height} ({width * height / 1e6:.0f} "
                             f"MP) is over glcnn's cap of {MAX_IMAGE_PIXELS / 1e6:.0f} MP "
                             "decoded pixels; resize it first")
        image.load()
    except (OSError, ValueError, UnidentifiedImageError, Image.DecompressionBombError) as exc:
        raise ShapeError(f"{path}: cannot read image ({exc})") from None
    return image


def _unit_pixels(image, path) -> np.ndarray:
    """(H, W, 1 | 3 | 4) float32 in [0, 1] from a PIL image of any mode."""
    if image.mode in _SIXTEEN_BIT:
        values = np.asarray(image).astype(np.float32)
        if values.min() < 0 or values.max() > 65535:
            raise ShapeError(f"{path}: 32-bit integer image with values outside 0..65535; "
                             "its range is unknown, give the input as .npy")
        return values[..., None] / 65535.0
    if image.mode == "F":
        raise ShapeError(f"{path}: 32-bit float image; its value range is unknown, give the "
                         "input as .npy")
    alpha = "A" in image.mode or "a" in image.mode or "transparency" in image.info
    target = "RGBA" if alpha else "L" if image.mode in ("L", "1") else "RGB"
    try:
        converted = image.convert(target)
    except ValueError as exc:
        raise ShapeError(f"{path}: cannot convert image mode {image.mode} ({exc})") from None
    values = np.asarray(converted, np.float32) / 255.0
    return values.reshape(*values.shape[:2], -1)


def _match_channels(pixels: np.ndarray, c: int, path) -> np.ndarray:
    """Grey, RGB or RGBA pixels as `c` channels (see the module table)."""
    have = pixels.shape[2]
    if have == 4 and c != 4:
        print(f"glcnn: ignoring the alpha channel of {path.name}", file=sys.stderr)
        pixels, have = pixels[..., :3], 3
    if have == c:
        return pixels
    if c == 1:
        return (pixels[..., :3] @ _LUMA)[..., None]
    rgb = np.repeat(pixels, 3, axis=2) if have == 1 else pixels
    return rgb if c == 3 else np.concatenate([rgb, np.ones_like(rgb[..., :1])], axis=2)


def _resize(pixels: np.ndarray, size) -> np.ndarray:
    """Bilinear resize of float (H, W, C) to `size` = (width, height), channel by channel."""
    from PIL import Image
    planes = [np.asarray(Image.fromarray(np.ascontiguousarray(pixels[..., i], np.float32))
                         .resize(size, Image.BILINEAR)) for i in range(pixels.shape[2])]
    return np.stack(planes, axis=2)


def checked_input(name: str, value, expected: tuple, own: tuple = (),
                  nhwc: bool = False) -> np.ndarray:
    """`value` as a (C, H, W) float32 array, all finite, for input `name`.

    Args:
        expected: the input's (C, H, W).
        own: the model file's own shape of the input (e.g. ONNX (1, F)), also accepted.
        nhwc: the model's own layout is channels-last (TF.js): an array of shape `own`
            (1, H, W, C) is transposed to (C, H, W).
    Raises:
        ShapeError: as for `Pipeline.upload`.
    """
    try:
        x = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nested lists, odd objects
        raise ShapeError(f"input {quote(name)} is not an array ({exc})") from None
    given = x.shape
    if own and x.shape == own:  # e.g. an ONNX (1, F) vector, a TF.js (1, H, W, C) image
        x = x[0].transpose(2, 0, 1) if nhwc and x.ndim == 4 else x.reshape(expected)
    if x.ndim == 4 and x.shape[0] == 1:
        x = x[0]
    if x.shape != expected:
        raise ShapeError(f"input {quote(name)} has shape {given}; expected {expected} or "
                         f"{(1, *expected)} (NCHW, batch 1){_layout_hint(given, expected)}")
    return as_float32(x, f"input {quote(name)}")


def channels_last(meta: dict, name: str) -> bool:
    """Whether model input `name` is channels-last, (1, H, W, C), in the model file while glcnn
    holds it (C, H, W): every input of a TF.js model (meta layout "NHWC") and each ONNX input
    whose NHWC-to-NCHW Transpose glcnn took out (meta channels_last_inputs,
    glcnn.graph.fold_layout)."""
    return meta.get("layout") == "NHWC" or name in meta.get("channels_last_inputs", ())


def own_input(meta: dict, name: str, x: np.ndarray) -> np.ndarray:
    """The (C, H, W) array `x` of input `name` in the model file's own shape (meta
    onnx_input_shapes; without one (1, C, H, W)), e.g. for onnxruntime: transposed to
    (1, H, W, C) where the input is `channels_last`."""
    own = meta.get("onnx_input_shapes", {}).get(name)
    if own and len(own) == 4 and channels_last(meta, name):
        return x.transpose(1, 2, 0).reshape(own)
    return x.reshape(own or (1, *x.shape))


def onnx_as_stored(value, channels_last: bool) -> np.ndarray:
    """An ONNX (1, A, B) tensor as glcnn holds it: (B, 1, A) channels last, else (A, 1, B);
    an ONNX (1, H, W, C) tensor held channels last (fold_layout) as (C, H, W)."""
    if value.ndim == 4 and channels_last and value.shape[0] == 1:
        return value[0].transpose(2, 0, 1)
    if value.ndim != 3 or value.shape[0] != 1:
        return value
    return value[0].T[:, None, :] if channels_last else value[0][:, None, :]


def as_float32(x: np.ndarray, what: str) -> np.ndarray:
    """`x` as float32, refusing what is not real numbers or not finite in float32.

    Raises:
        ShapeError: naming `what`: a bool, complex or non-numeric dtype, NaN or Inf, or
            values beyond float32's range (±3.4e38; 1e300 in float64 would be Inf on the GPU).
    """
    if x.dtype == bool or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise ShapeError(f"{what} has dtype {x.dtype}; expected real numbers "
                         "(float32, or any float or integer type)")
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        nan, inf = int(np.isnan(x).sum()), int(np.isinf(x).sum())
        raise ShapeError(f"{what} holds {nan} NaN and {inf} Inf values; glcnn "
                         "refuses non-finite inputs (they would spread through every layer)")
    with np.errstate(over="ignore"):  # checked just below, instead of a RuntimeWarning
        x32 = x.astype(np.float32)
    if not np.isfinite(x32).all():
        count = int(np.count_nonzero(~np.isfinite(x32)))
        raise ShapeError(f"{what} holds {count} values beyond float32's range (±3.4e38); "
                         "glcnn computes in float32")
    return x32


def array_ndim(value) -> int:
    """np.ndim, or 0 for what is not an array (ragged lists: checked_input reports them)."""
    try:
        return np.ndim(value)
    except (ValueError, TypeError):
        return 0


def _layout_hint(shape: tuple, expected: tuple) -> str:
    c, h, w = expected
    if tuple(shape[-3:]) == (h, w, c) and len(shape) in (3, 4) and c != w:
        return "; this looks channels-last (HWC): transpose it to CHW first"
    return ""
