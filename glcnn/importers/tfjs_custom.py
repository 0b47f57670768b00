"""Custom TF.js layer classes: glcnn's analogue of TF.js's `tf.serialization.registerClass`.

A layers model naming a class TF.js does not ship (an upscaler's `PixelShuffle2x`,
`MultiplyBeta`) needs that class registered in TF.js before `tf.loadLayersModel`; in glcnn
it needs a builder, registered before `glcnn.load`:

    def multiply_beta(imp, call):
        x = imp.act(call)
        beta = float(call.config.get("beta", 0.2))
        return tfjs.Tensor(imp.emit(call, "Mul", [x.name], weights={"B": [beta]}), x.rank)

    tfjs.register_layer("MultiplyBeta", multiply_beta, emits=("Mul",))

Builders go into tfjs_layers.CONVERTERS and EMITS beside the built-in converters, so the
importer, `check_supported` and the registry tests treat both alike. This module remembers
which classes are custom (`CUSTOM`) and the built-in converter a `replace=True`
registration hides, which `unregister_layer` puts back.
"""

from contextlib import contextmanager
from dataclasses import dataclass

from ..errors import GlcnnError, quote
from ..graph.graph import OP_TYPE
from ..ops import REGISTRY
from . import tfjs_shapes  # noqa: F401  (registers its converters: built-ins are all known)
from .tfjs_layers import CONVERTERS, EMITS
from .tfjs_tensor import Tensor
from .tfjs_topology import Call

HOW = "glcnn.importers.tfjs.register_layer(class_name, build, emits=(glcnn op types...))"


@dataclass
class CustomLayer:
    """A registered builder, called as a converter; checks what `build` emitted and returned."""

    cls: str
    build: object
    emits: tuple[str, ...]

    def __call__(self, imp, call: Call) -> Tensor:
        before = len(imp.nodes)
        try:
            result = self.build(imp, call)
        except GlcnnError:
            raise
        except Exception as exc:  # the builder's own bug, reported as such, not as the file's
            raise GlcnnError(f"{imp.where(call)}: the custom layer builder {self} raised "
                             f"{type(exc).__name__}: {str(exc)[:300]}") from exc
        undeclared = sorted({n.op for n in imp.nodes[before:]} - set(self.emits))
        if undeclared:
            raise GlcnnError(f"{imp.where(call)}: the custom layer builder {self} emitted "
                             f"{undeclared}, not in its emits={self.emits}")
        if not isinstance(result, Tensor) or result.name not in imp.shapes:
            raise GlcnnError(f"{imp.where(call)}: the custom layer builder {self} returned "
                             f"{quote(result)}; it must return a glcnn.importers.tfjs.Tensor "
                             "of a tensor it emitted or read")
        return result

    def __repr__(self):
        return getattr(self.build, "__qualname__", repr(self.build))


CUSTOM: dict[str, CustomLayer] = {}  # class name -> its registered builder
_HIDDEN: dict[str, tuple] = {}  # class name -> (converter, emits) a replace=True hides


def register_layer(cls: str, build, *, emits, replace: bool = False) -> None:
    """Convert layers of Keras class `cls` with `build`, as TF.js's registerClass makes a
    custom class loadable. Register before loading; the registration is global.

    `build(imp, call)` runs once per layer of class `cls`, in dependency order, and gets
    what a built-in converter gets (glcnn/importers/tfjs_layers.py):

    - `call` (glcnn.importers.tfjs.Call): `.cls`, `.name`, `.config` (the layer's config
      dict from model.json, as its class's getConfig wrote it) and `.inputs` (the names of
      the layers it reads, in order).
    - `imp` (glcnn.importers.tfjs.TfjsImport), of which `build` may use:
      `imp.act(call, i=0)` the Tensor of input i, in glcnn's (C, H, W) order;
      `imp.shape(x)` / `imp.tf_shape(x)` its glcnn (C, H, W) / its TF shape, batch 1;
      `imp.layout` "NHWC" or "NCHW", the model's data format;
      `imp.weight(call, key, shape)` the manifest weight "<layer name>/<key>" (also found
      under a "<model>/" prefix) as float32 numpy in TF's own layout, checked to have
      `shape` (a WeightError names both shapes);
      `imp.emit(call, op, inputs, attrs=None, weights=None, suffix="")` append a glcnn node
      reading the tensors named `inputs`, returning its name;
      `imp.fail(call, message)` raise an UnsupportedOpError naming the file and the layer;
      `imp.channel_axis(call, x, axis)` refuse a TF axis other than the channels.
      `tfjs_layers.finish` / `activate` apply a config's activation (add
      tfjs_layers.ACTIVATION_OPS to `emits`); the importer checks no activation of a custom
      class: its builder owns the whole config.

    What `build` must emit and return: nodes only through `imp.emit`, each of an op type in
    `emits`, with attributes and weights in glcnn's layout as glcnn/ops/*.py documents
    them (a Conv's W is (Co, Ci/group, kh, kw), not Keras's HWIO kernel); the node giving
    the layer's output named after the layer (suffix ""), helper nodes "<layer>/<suffix>".
    It returns `glcnn.importers.tfjs.Tensor(name, rank)` of the layer's output (rank 4 for
    a map, 2 for a vector, as its input), or an input's Tensor itself for an identity.

    Args:
        cls: the class name model.json gives (`class_name`), an identifier.
        build: the builder, as above.
        emits: the glcnn op types (glcnn.ops.REGISTRY) `build` may emit, e.g. ("Mul",).
        replace: allow replacing a registered custom class, or a built-in converter
            (`unregister_layer` puts the built-in back).
    Raises:
        GlcnnError: `cls` is not an identifier, `build` not callable, `emits` not a tuple
            of registered glcnn op types, or `cls` already has a converter (a built-in
            one or a custom one) and `replace` is false. When `build` runs: it raised
            something other than a GlcnnError, emitted an op outside `emits`, or returned
            something other than a Tensor of a known tensor.
    """
    if not isinstance(cls, str) or not OP_TYPE.match(cls):
        raise GlcnnError(f"custom layer class {quote(cls)} is not an identifier")
    if not callable(build):
        raise GlcnnError(f"custom layer {cls}: build {quote(build)} is not callable")
    emits = _checked_emits(cls, emits)
    if cls in CONVERTERS and not replace:
        kind = "a custom layer registered" if cls in CUSTOM else "a built-in TF.js layer"
        raise GlcnnError(f"{cls} is already {kind}; pass replace=True to replace it")
    if cls in CONVERTERS and cls not in CUSTOM:
        _HIDDEN[cls] = CONVERTERS[cls], EMITS[cls]
    CUSTOM[cls] = CONVERTERS[cls] = CustomLayer(cls, build, emits)
    EMITS[cls] = emits


def _checked_emits(cls: str, emits) -> tuple[str, ...]:
    if isinstance(emits, str) or not isinstance(emits, list | tuple | set | frozenset):
        raise GlcnnError(f"custom layer {cls}: emits={quote(emits)} must be a tuple of glcnn "
                         "op types, e.g. ('Mul',)")
    unknown = sorted(str(op) for op in emits if op not in REGISTRY)
    if unknown:
        raise GlcnnError(f"custom layer {cls}: emits names {unknown}, which are not glcnn ops; "
                         f"glcnn has {', '.join(sorted(REGISTRY))}")
    return tuple(emits)


def unregister_layer(cls: str) -> None:
    """Forget custom class `cls` (a built-in converter it replaced comes back).

    Raises:
        GlcnnError: `cls` is not a registered custom class.
    """
    if cls not in CUSTOM:
        raise GlcnnError(f"{quote(cls)} is not a registered custom layer class (registered: "
                         f"{sorted(CUSTOM) or 'none'})")
    del CUSTOM[cls]
    if cls in _HIDDEN:
        CONVERTERS[cls], EMITS[cls] = _HIDDEN.pop(cls)
    else:
        del CONVERTERS[cls], EMITS[cls]


@contextmanager
def custom_layer(cls: str, build, *, emits, replace: bool = False):
    """`register_layer` for the `with` block only (tests); what `cls` had before comes back."""
    before = CUSTOM.get(cls)
    register_layer(cls, build, emits=emits, replace=replace)
    try:
        yield CUSTOM[cls]
    finally:
        unregister_layer(cls)
        if before is not None:
            register_layer(cls, before.build, emits=before.emits, replace=True)
