"""Frame sources for the viewer: camera, video file, folder of images, synthetic pattern.

Every source yields RGBA uint8 frames (H, W, 4), row 0 at the top, through `read()`;
the viewer uploads each frame once and does all resizing and normalisation on the GPU.
Video and camera decoding use PyAV (`pip install av`), imported only when needed.
"""

import platform
import sys
import warnings
from pathlib import Path

import numpy as np

from ..errors import GlcnnError, quote
from ..inputs import IMAGE_SUFFIXES


class SyntheticSource:
    """A deterministic moving pattern: colour gradients, a bright disc and stripes.

    `frame(i)` is a pure function of i, so tests can recompute any frame.
    """

    name = "synthetic"

    def __init__(self, width: int = 128, height: int = 96):
        self.width, self.height, self.index = width, height, 0

    def frame(self, i: int) -> np.ndarray:
        y, x = np.mgrid[0:self.height, 0:self.width].astype(np.float32)
        u, v, t = x / self.width, y / self.height, i / 30.0
        cx, cy = 0.5 + 0.3 * np.cos(t), 0.5 + 0.3 * np.sin(1.3 * t)
        disc = ((u - cx) ** 2 + (v - cy) ** 2) < 0.02
        stripes = 0.5 + 0.5 * np.sin(20 * (u + v) + 3 * t)
        rgb = np.stack([u, v, 0.5 + 0.5 * np.sin(t) * np.ones_like(u)], -1) * 0.6
        rgb += 0.25 * stripes[..., None] * np.array([1.0, 0.6, 0.2])
        rgb[disc] = (1.0, 0.95, 0.6)
        rgba = np.concatenate([np.clip(rgb, 0, 1), np.ones_like(u)[..., None]], -1)
        return (rgba * 255).round().astype(np.uint8)

    def read(self) -> np.ndarray:
        self.index += 1
        return self.frame(self.index - 1)

    def close(self):
        pass


class FolderSource:
    """Images of a folder in name order, looping.

    Raises:
        GlcnnError: no images; an image that cannot be read or is a decompression bomb
            (every header and the first image are read when the source opens, so such a
            folder is refused before the viewer starts; a later image with broken data is
            refused when it is shown).
    """

    def __init__(self, folder):
        self.paths = sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not self.paths:
            raise GlcnnError(f"{folder}: no images ({', '.join(IMAGE_SUFFIXES)})")
        self.name, self.index = f"folder {folder}", 0
        for path in self.paths[1:]:
            _image(path, decode=False)
        _image(self.paths[0])

    def read(self) -> np.ndarray:
        path = self.paths[self.index % len(self.paths)]
        self.index += 1
        return _image(path)

    def close(self):
        pass


def _image(path: Path, decode: bool = True) -> np.ndarray | None:
    """The image at `path` as RGBA uint8 (or only its header checked, without `decode`).

    Raises:
        GlcnnError: unreadable, or over Pillow's decompression-bomb limit.
    """
    from PIL import Image
    try:
        with warnings.catch_warnings():  # an image near the bomb limit: refused too
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                return np.asarray(image.convert("RGBA")) if decode else None
    except (OSError, ValueError, Image.DecompressionBombWarning,
            Image.DecompressionBombError) as exc:
        raise GlcnnError(f"{path}: cannot read image ({type(exc).__name__}: "
                         f"{str(exc)[:200]})") from None


class VideoSource:
    """A video file (or a camera device) decoded by PyAV; files loop at the end."""

    def __init__(self, path, format=None, loop=True):
        av = _import_av()
        try:
            self.container = av.open(str(path), format=format)
        except (av.error.FFmpegError, OSError) as exc:
            raise GlcnnError(f"cannot open video source {path}: {exc}") from None
        self.path, self.format, self.loop = path, format, loop
        self.name = f"video {path}" if format is None else f"camera {path}"
        self.frames = self.container.decode(video=0)

    def read(self) -> np.ndarray:
        try:
            return next(self.frames).to_ndarray(format="rgba")
        except StopIteration:
            if not self.loop:
                raise GlcnnError(f"{self.name}: no more frames") from None
            self.container.seek(0)
            self.frames = self.container.decode(video=0)
            return next(self.frames).to_ndarray(format="rgba")

    def close(self):
        self.container.close()


def camera(index: int = 0) -> VideoSource:
    """The platform's camera `index` through PyAV (v4l2, avfoundation or dshow)."""
    system = platform.system()
    device, fmt = {"Linux": (f"/dev/video{index}", "v4l2"),
                   "Darwin": (str(index), "avfoundation"),
                   "Windows": ("video=0", "dshow")}.get(system, (None, None))
    if device is None or (system == "Linux" and not Path(device).exists()):
        raise GlcnnError(f"no camera found ({device or system}); use --source synthetic, "
                         "a video file or a folder of images")
    return VideoSource(device, format=fmt, loop=False)


def open_source(spec: str, size=(128, 96)):
    """A source from a CLI spec: "synthetic", "camera", "camera:N", a folder or a video."""
    if spec == "synthetic":
        return SyntheticSource(*size)
    if spec == "camera" or spec.startswith("camera:"):
        return camera(int(spec.partition(":")[2] or 0))
    path = Path(spec)
    if path.is_dir():
        return FolderSource(path)
    if path.is_file():
        return VideoSource(path)
    raise GlcnnError(f"source {quote(spec)} is not 'synthetic', 'camera[:N]', a folder or a file")


def open_source_or_synthetic(spec: str, size=(128, 96)):
    """`open_source(spec)`, falling back (and saying so on stderr) to the synthetic pattern
    when no camera is found, so a demo always starts."""
    try:
        return open_source(spec, size)
    except GlcnnError as exc:
        if not (spec == "camera" or spec.startswith("camera:")):
            raise
        print(f"{exc}\nfalling back to the synthetic source", file=sys.stderr)
        return SyntheticSource(*size)


def _import_av():
    try:
        import av
    except ImportError:
        raise GlcnnError("video and camera sources need PyAV: pip install av") from None
    return av
