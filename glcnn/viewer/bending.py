"""Network bending: edit one output channel of a layer live, re-uploading only what changed.

    bender = Bender(pipe)
    bender.zero("enc2", 17)        # output channel 17 of enc2 becomes bias-free zero
    bender.scale("dec1", 3, 2.5)   # or invert(...), replace(layer, channel, filter)
    bender.undo(); bender.reset()  # reset restores bit-identical weights

An edit reads the layer's weights from the pipeline (`Pipeline.weights`) and gives back the
changed ones (`Pipeline.set_weights`), which writes only the texels that differ: the band of
the filter grid holding that output channel, and one texel of the bias. The Graph the
pipeline was made from is never written; `pipe.graph`, the pipeline's own copy, shows the edits.
"""

import numpy as np

from ..errors import GlcnnError, quote
from ..runtime.weights import write_changed  # noqa: F401  (was defined here; tests import it)

BENDABLE = ("Conv", "ConvTranspose")


class Bender:
    """Live weight edits on a compiled Pipeline, with an undo stack.

    Args:
        pipe: the Pipeline whose layers to edit.
    """

    def __init__(self, pipe):
        self.pipe = pipe
        self.original: dict[str, dict] = {}  # layer -> its weights before its first edit
        self.history: list[tuple[str, dict]] = []  # (layer, its weights before the edit)

    def _node(self, layer):
        """`layer`'s graph node, for its op type and attributes (its weights are the graph's,
        not the pipeline's, and are never read or written here).

        Raises:
            GlcnnError: no such layer, or one that is not BENDABLE.
        """
        nodes = {node.name: node for node in self.pipe.graph.nodes}
        if layer not in nodes:
            bendable = [quote(name) for name, node in nodes.items() if node.op in BENDABLE]
            raise GlcnnError(f"no layer named {quote(layer)}; bendable layers: "
                             f"{', '.join(bendable[:10]) or 'none'}")
        if nodes[layer].op not in BENDABLE:
            raise GlcnnError(f"layer {quote(layer)} is a {nodes[layer].op}; bendable layers "
                             f"are {', '.join(BENDABLE)}")
        return nodes[layer]

    def channels(self, layer) -> int:
        """Output channels of bendable `layer`."""
        self._node(layer)
        return self.pipe.shapes[layer][0]

    def _edit(self, layer, channel, fn, bias_fn=None):
        node = self._node(layer)
        if not 0 <= channel < self.channels(layer):
            raise GlcnnError(f"layer {quote(layer)} has {self.channels(layer)} output channels; "
                             f"got channel {channel}")
        before = self.pipe.weights(layer)
        self.original.setdefault(layer, before)
        self.history.append((layer, before))
        weights = {k: v.copy() for k, v in before.items()}
        index = output_channel_index(node, channel, weights["W"].shape)
        weights["W"][index] = fn(weights["W"][index])
        if "B" in weights:
            weights["B"][channel] = (bias_fn or fn)(weights["B"][channel])
        self._apply(layer, weights, before)

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
        w = self.pipe.weights(layer)["W"]
        shape = w[output_channel_index(self._node(layer), channel, w.shape)].shape
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
            self._apply(layer, weights)

    def reset(self):
        """Restore every edited layer to its original weights."""
        for layer, weights in self.original.items():
            self._apply(layer, weights)
        self.original, self.history = {}, []

    def _apply(self, layer, weights: dict, current: dict | None = None):
        """Give `layer` `weights`, passing on only those that differ from `current` (default:
        the pipeline's now, bit for bit): each set_weights lays the whole layer out again."""
        current = self.pipe.weights(layer) if current is None else current
        for name, value in weights.items():
            if not np.array_equal(value.view(np.uint32), current[name].view(np.uint32)):
                self.pipe.set_weights(layer, name, value)


def output_channel_index(node, channel, shape):
    """Index into W selecting everything that produces output `channel`."""
    if node.op == "Conv":
        return (channel,)
    group = int(node.attrs.get("group", 1))
    cog = shape[1]  # ConvTranspose W: (Ci, Co/group, kh, kw)
    cg = shape[0] // group
    g = channel // cog
    return (slice(g * cg, (g + 1) * cg), channel % cog)
