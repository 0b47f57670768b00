"""Network bending: edit one output channel of a layer live, re-uploading only what changed.

    bender = Bender(pipe)
    bender.zero("enc2", 17)        # output channel 17 of enc2 becomes bias-free zero
    bender.scale("dec1", 3, 2.5)   # or invert(...), replace(layer, channel, filter)
    bender.undo(); bender.reset()  # reset restores bit-identical weights

An edit changes the layer's weights in the graph (the single source of truth), re-packs
that layer's textures and writes only the bounding box of texels that differ.
"""

import numpy as np

from ..errors import GlcnnError, quote
from ..ops import make_op

BENDABLE = ("Conv", "ConvTranspose")


class Bender:
    """Live weight edits on a compiled Pipeline, with an undo stack.

    Args:
        pipe: the Pipeline whose layers to edit.
    """

    def __init__(self, pipe):
        self.pipe = pipe
        self.original: dict[str, dict] = {}
        self.history: list[tuple[str, dict]] = []

    def _pass(self, layer):
        for p in self.pipe.passes:
            if p.op.node.name == layer:
                if p.op.node.op not in BENDABLE:
                    raise GlcnnError(f"layer {quote(layer)} is a {p.op.node.op}; bendable layers "
                                     f"are {', '.join(BENDABLE)}")
                return p
        raise GlcnnError(f"no layer named {quote(layer)}; layers: "
                         f"{', '.join(p.op.node.name for p in self.pipe.passes)}")

    def channels(self, layer) -> int:
        return self.pipe.shapes[self._pass(layer).op.node.name][0]

    def _edit(self, layer, channel, fn, bias_fn=None):
        p = self._pass(layer)
        node = p.op.node
        if not 0 <= channel < self.channels(layer):
            raise GlcnnError(f"layer {quote(layer)} has {self.channels(layer)} output channels; "
                             f"got channel {channel}")
        self.original.setdefault(layer, {k: v.copy() for k, v in node.weights.items()})
        self.history.append((layer, {k: v.copy() for k, v in node.weights.items()}))
        weights = {k: np.array(v, np.float32) for k, v in node.weights.items()}
        index = output_channel_index(node, channel, weights["W"].shape)
        weights["W"][index] = fn(weights["W"][index])
        if "B" in weights:
            weights["B"][channel] = (bias_fn or fn)(weights["B"][channel])
        self._apply(p, weights)

    def scale(self, layer, channel, factor: float):
        """Multiply the filter and bias of output `channel` by `factor`."""
        self._edit(layer, channel, lambda w: w * np.float32(factor))

    def zero(self, layer, channel):
        """Zero the filter and bias of output `channel` (the channel outputs act(0))."""
        self._edit(layer, channel, np.zeros_like)

    def invert(self, layer, channel):
        """Negate the filter and bias of output `channel`."""
        self._edit(layer, channel, np.negative)

    def replace(self, layer, channel, filter_weights, bias=None):
        """Set the filter of output `channel` (shape must match) and optionally its bias."""
        p = self._pass(layer)
        shape = p.op.node.weights["W"][output_channel_index(
            p.op.node, channel, p.op.node.weights["W"].shape)].shape
        new = np.asarray(filter_weights, np.float32)
        if new.shape != shape:
            raise GlcnnError(f"layer {quote(layer)}: replacement filter has shape {new.shape}, "
                             f"expected {shape}")
        keep_or_set = (lambda b: b) if bias is None else (lambda b: np.float32(bias))
        self._edit(layer, channel, lambda w: new, keep_or_set)

    def undo(self):
        """Revert the most recent edit."""
        if self.history:
            layer, weights = self.history.pop()
            self._apply(self._pass(layer), weights)

    def reset(self):
        """Restore every edited layer to its original weights."""
        for layer, weights in self.original.items():
            self._apply(self._pass(layer), weights)
        self.original, self.history = {}, []

    def _apply(self, p, weights):
        old = p.op.all_textures()
        node = p.op.node
        node.weights = {k: np.array(v, np.float32) for k, v in weights.items()}
        p.op = make_op(node, p.op.in_shapes)
        new = p.op.all_textures()
        for sampler, tex in p.weights:
            write_changed(tex, old[sampler], new[sampler])


def output_channel_index(node, channel, shape):
    """Index into W selecting everything that produces output `channel`."""
    if node.op == "Conv":
        return (channel,)
    group = int(node.attrs.get("group", 1))
    cog = shape[1]  # ConvTranspose W: (Ci, Co/group, kh, kw)
    cg = shape[0] // group
    g = channel // cog
    return (slice(g * cg, (g + 1) * cg), channel % cog)


def write_changed(texture, old: np.ndarray, data: np.ndarray) -> int:
    """Write to `texture` (holding `old`) only the bounding box of texels that differ in `data`.

    Returns the number of texels written (0 if nothing changed).
    """
    changed = np.any(old != data, axis=-1)
    if not changed.any():
        return 0
    rows, cols = np.nonzero(changed)
    y0, y1, x0, x1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
    box = np.ascontiguousarray(data[y0:y1, x0:x1], np.float32)
    texture.write(box.tobytes(), viewport=(int(x0), int(y0), int(x1 - x0), int(y1 - y0)))
    return int((y1 - y0) * (x1 - x0))
