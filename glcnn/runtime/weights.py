"""Read and replace a compiled pipeline's weights, re-uploading only the texels that change.

`Pipeline.weights`, `Pipeline.set_weights` and `Pipeline.weight_layout` are the public face;
`Weights` does the work, for every op, through the op's own packing: a new array goes into a
copy of the layer's node, `make_op` checks it as at compile time, the new op's `all_textures()`
lays out every weight texture of the layer, and each layout is compared bit for bit with the
one uploaded before. Only the texels that differ are written (`write_changed`): one rectangle
per run of consecutive changed texture rows. One output channel of a conv is one band of kh
texel rows of its filter grid (glcnn.layout.pack_filters), whatever the op's weight axes (a
ConvTranspose's output channels are axis 1 of W), and one texel of its bias.

Copy on write: the pipeline's `graph` is its own Graph (a new node list over the caller's
nodes); an edit puts a new node for the layer in it, holding the pipeline's own read-only copy
of the new array and sharing the others, so the caller's Graph is never written while
`pipe.graph` describes what runs (its reference, `glcnn diff`, `save`). The layouts last
uploaded are kept for each edited layer, so an edit packs the layer once (its first edit packs
the compiled weights too, to compare against).

No region hint: comparing layouts is cheaper than laying them out, which an edit needs anyway
(a 512×512×3×3 bank, 2.4M weights, on 2 cores: 1.5-4 ms to compare, 4-20 ms to pack), and a
hint would have to know where each op puts each weight, which is what its packing encodes.
"""

import dataclasses

import numpy as np

from ..errors import GlcnnError, WeightError, quote
from ..graph.graph import Graph, float32
from ..ops import Op, make_op
from ..ops.base import remember_finite
from .compiler import Pass

LISTED = 10  # layer names an unknown-layer error lists


class Weights:
    """The weights of a compiled pipeline's layers: `get` copies, `set` replaces one.

    Args:
        graph: the graph compiled; `graph` becomes the pipeline's own copy (its node list
            new, the nodes shared until `set` replaces one).
        ops, passes: the pipeline's ops (one per node, in order) and their passes; `set` puts
            a layer's new op into both.
    """

    def __init__(self, graph: Graph, ops: list[Op], passes: list[Pass]):
        self.graph = dataclasses.replace(graph, nodes=list(graph.nodes))
        self.ops, self.passes = ops, passes
        self.index = {op.node.name: i for i, op in enumerate(ops)}
        self.uploaded: dict[str, dict[str, np.ndarray]] = {}  # edited layer -> its layouts

    def get(self, layer: str) -> dict[str, np.ndarray]:
        """Float32 copies of `layer`'s weights by name, shaped as its node holds them."""
        node = self.ops[self.find(layer)].node
        return {name: np.array(value, np.float32) for name, value in node.weights.items()}

    def layout_shape(self, layer: str, sampler: str) -> tuple[int, int, int]:
        """(height, width, 4) of the layout of `layer`'s weight texture `sampler`."""
        shapes = self.ops[self.find(layer)].all_texture_shapes()
        if sampler not in shapes:
            raise GlcnnError(f"layer {quote(layer)} has no weight texture {quote(sampler)}; "
                             f"it has {quote(sorted(shapes))}")
        return tuple(shapes[sampler])

    def set(self, layer: str, name: str, array) -> int:
        """Make `array` weight `name` of `layer` and write the texels it changes.

        Returns:
            The texels written.
        Raises:
            GlcnnError: no such layer. WeightError: see `checked`; or the op refuses the
                new value (e.g. a BatchNormalization var with var + epsilon ≤ 0).
        """
        i = self.find(layer)
        op, p = self.ops[i], self.passes[i]
        node = dataclasses.replace(op.node, weights=op.node.weights | {
            name: checked(op, name, array)})
        new_op = make_op(node, op.in_shapes)
        old, new = self.uploaded.get(layer) or op.all_textures(), new_op.all_textures()
        written = sum(write_changed(tex, old[sampler], new[sampler]) for sampler, tex in p.weights)
        # Uniforms are declared by the op too: any it derives from weights follow them.
        p.uniforms.update((k, v) for k, v in new_op.all_uniforms().items() if k in p.uniforms)
        self.ops[i] = p.op = new_op
        self.graph.nodes[i] = node
        self.uploaded[layer] = new
        return written

    def find(self, layer: str) -> int:
        """The index of `layer` in the pipeline's ops.

        Raises:
            GlcnnError: no such layer, naming the first LISTED.
        """
        if not isinstance(layer, str) or layer not in self.index:
            listed = ", ".join(quote(n) for n in list(self.index)[:LISTED]) + (
                f", ... ({len(self.index)} layers)" if len(self.index) > LISTED else "")
            raise GlcnnError(f"no layer named {quote(layer)}; layers: {listed}")
        return self.index[layer]


def checked(op: Op, name: str, array) -> np.ndarray:
    """`array` as a new value of weight `name` of `op`'s layer: a read-only float32 copy.

    Raises:
        WeightError: naming the layer and the weight: no weight `name` (listing the layer's
            weights), not an array of real numbers (int or float), another shape than the
            weight's, or NaN/Inf values (also values beyond float32's range).
    """
    node = op.node
    where = f"layer {quote(node.name)} ({node.op})"
    if not isinstance(name, str) or name not in node.weights:
        raise WeightError(f"{where} has no weight {quote(name)}; its weights: "
                          f"{', '.join(map(quote, node.weights)) or 'none'}")
    try:
        value = np.asarray(array)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise WeightError(f"{where}: weight {quote(name)} is not an array "
                          f"({type(exc).__name__}: {str(exc)[:100]})") from None
    if value.dtype.kind not in "iuf":
        raise WeightError(f"{where}: weight {quote(name)} has dtype {value.dtype}; expected "
                          "real numbers (int or float)")
    expected = np.shape(node.weights[name])
    if value.shape != expected:
        raise WeightError(f"{where}: weight {quote(name)} has shape {value.shape}, "
                          f"expected {expected}")
    value = np.array(float32(value))  # the pipeline's own copy
    if not np.isfinite(value).all():
        raise WeightError(f"{where}: weight {quote(name)} contains NaN or Inf (or values "
                          "beyond float32)")
    value.flags.writeable = False
    remember_finite(value)  # the op's check need not scan it again
    return value


def write_changed(texture, old: np.ndarray, new: np.ndarray) -> int:
    """Write into `texture`, which holds the (height, width, 4) layout `old` in its corner, the
    texels where layout `new` differs (`changed_boxes`). `texture` is a moderngl.Texture or a
    glcnn.runtime.gl.BufferTexture (for which a rectangle of whole rows is one write).

    Returns:
        The texels written (0 if nothing changed).
    """
    written = 0
    for x, y, w, h in changed_boxes(old, new):
        texture.write(np.ascontiguousarray(new[y:y + h, x:x + w], np.float32),
                      viewport=(x, y, w, h))
        written += w * h
    return written


def changed_boxes(old: np.ndarray, new: np.ndarray) -> list[tuple[int, int, int, int]]:
    """(x, y, w, h) rectangles covering the texels where layout `new` differs from `old` bit
    for bit (0.0 and -0.0 differ, so restored weights are exact): one per run of consecutive
    changed rows, spanning the columns changed in that run."""
    height = old.shape[0]
    old_bits, new_bits = (np.ascontiguousarray(a, np.float32).view(np.uint32).reshape(height, -1)
                          for a in (old, new))
    differs = old_bits != new_bits  # (height, width·4): a whole row compares fastest
    rows = np.flatnonzero(differs.any(axis=1))
    boxes = []
    for run in np.split(rows, np.flatnonzero(np.diff(rows) > 1) + 1) if rows.size else []:
        y0, y1 = int(run[0]), int(run[-1]) + 1
        columns = np.flatnonzero(differs[y0:y1].any(axis=0)) // 4
        boxes.append((int(columns[0]), y0, int(columns[-1] - columns[0]) + 1, y1 - y0))
    return boxes
