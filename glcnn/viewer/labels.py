"""The words in the viewer's window: two label lines per panel and the status line.

Each function reads a Viewer's state and returns text; glcnn/viewer/overlay.py draws it.
Value ranges come from the per-channel min/max the display already reduced on the GPU
(2·C numbers read back per panel). In a training window with gradients on (`g`), the layer
and filter panels show dL/d(layer) and dL/d(layer.weight) and their labels say so.
"""

from pathlib import Path

from ..errors import GlcnnError, quote
from .bending import BENDABLE

ROLE = {0: "input", 1: "output", 2: "layer"}
KEY_HELP = ("[ ] layer  up/down channel  m mosaic  , . filter input  d colours  space pause  "
            "s save  z i + - bend  u r undo/reset  h help  q quit")


def _shape(shape) -> str:
    return "x".join(str(int(v)) for v in shape)


def _range(lo, hi) -> str:
    return f"range {float(lo):.3g} .. {float(hi):.3g}"


def showing_gradients(viewer) -> bool:
    """Whether the layer and filter panels show gradients (a training window's `g`)."""
    return bool(getattr(viewer, "gradients", False))


def describe_tensor(viewer, index: int, name: str, shape, mode: str, view=None) -> list[str]:
    """Panel `index`'s label lines for tensor `name` drawn in display `mode` (and showing
    only `view` = (x, y, w, h) texels of it)."""
    ranges = viewer.display.ranges(viewer.panel_source(index).texture(name), shape)
    head = f"{ROLE[index]} {name}"
    if index == 2 and showing_gradients(viewer):
        head = f"dL/d {name} (gradient)"
    elif index == 2:
        head += f" [{viewer.pipe.graph.node(name).op}]"
    if mode == "channel":
        head += f"  channel {viewer.channel} of {shape[0]}"
        lo, hi = ranges[viewer.channel]
    else:
        lo, hi = ranges[:, 0].min(), ranges[:, 1].max()
        head += "  all channels" if mode == "mosaic" else ""
    if view is not None:
        head += f"  centre {view[2]}x{view[3]}" + ("  1:1" if index == 1 else "")
    second = f"{_shape(shape)}  {_range(lo, hi)}"
    if index == 1:
        second += _scale_note(viewer.input_shape, shape)
    if viewer.diverging and mode != "image":
        second += "  blue < 0 < red"
    return [head, second]


def _scale_note(input_shape, shape) -> str:
    """ "  2x input" for an upscaler's output (a whole multiple of the input's size)."""
    (_, h, w), (_, oh, ow) = input_shape, shape
    if h > 1 and oh > h and oh % h == 0 and ow == w * (oh // h):
        return f"  {oh // h}x input"
    return ""


def describe_vector(viewer, index: int, name: str, shape, values, kind: str) -> list[str]:
    """Label lines of a vector panel (bars or top-k bars)."""
    span = _range(values.min(), values.max())
    if kind == "top_k":
        named = "names from --labels" if viewer.labels else "no --labels: class numbers"
        return [f"output {name}: top {min(10, len(values))} of {len(values)}", named]
    if index == 0 and viewer.latent is not None:
        return [f"latent {name}: walking, step {viewer.walked - 1}", f"{_shape(shape)}  {span}"]
    if index == 2 and showing_gradients(viewer):
        return [f"dL/d {name} (gradient)  one bar per channel", f"{_shape(shape)}  {span}"]
    return [f"{ROLE[index]} {name}  one bar per channel", f"{_shape(shape)}  {span}"]


def describe_no_gradient(name: str) -> list[str]:
    """Label lines of the layer panel with gradients on, for a layer that has none."""
    return [f"dL/d {name}: no gradient", "the loss does not depend on it"]


def describe_filters(viewer, bank) -> list[str]:
    """Label lines of the filters panel (`bank` None: none drawn)."""
    gradients, layer = showing_gradients(viewer), viewer.layer
    if bank is None and gradients and viewer.pipe.graph.node(layer).op in BENDABLE:
        return [f"filters' gradient: {layer}.weight: none", "the loss does not depend on it"]
    if bank is None:
        return [f"filters: {layer} has none", "[ ] picks a conv layer"]
    head = f"filters {layer}  {bank.kh}x{bank.kw}, {bank.cg} in -> {bank.co} out"
    if gradients:
        head = f"filters' gradient: {layer}.weight ({bank.co} tiles)"
    if bank.rgb:
        return [head, "RGB = input channels 0-2, own range per tile"]
    return [head, f"input ch {bank.in_channel(viewer.in_channel)} of {bank.cg} (, .), "
                  "own range per tile"]


def status_line(viewer) -> str:
    paused = "  PAUSED" if viewer.paused else ""
    keys = KEY_HELP.replace("  h help", "  g gradients  h help") if "g" in viewer.keys \
        else KEY_HELP
    return (f"{viewer.fps:.1f} FPS  model {viewer.model_ms:.1f} ms  {viewer.pipe.precision}"
            f"{paused}  |  {keys}")


def read_labels(path) -> list[str]:
    """Class names from a text file, one per line (blank lines kept as empty names).

    Raises:
        GlcnnError: the file cannot be read as UTF-8 text.
    """
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise GlcnnError(f"--labels {quote(str(path))}: cannot read it ({type(exc).__name__}: "
                         f"{str(exc)[:200]})") from None
