"""Compile a Graph onto a GL context and run it: one fragment-shader pass per op.

`Pipeline(graph)` allocates every texture once (tensors whose live ranges do not overlap
share a texture), compiles each distinct program once, and records one pass per op.
`run()` then only uploads the input, binds, draws and (optionally) reads back.
"""

import contextlib
import functools
import os
import time
from concurrent.futures import ThreadPoolExecutor
from operator import methodcaller

import moderngl
import numpy as np

from .. import debug
from ..errors import ContextError, GlcnnError, ShapeError, quote
from ..graph.graph import Graph
from ..inputs import array_ndim, channels_last, checked_input
from ..layout import Atlas, pack, unpack
from ..limits import check_flops
from ..limits import memory_budget as memory_budget_bytes
from ..ops import build_ops
from . import threads
from .compiler import Compiler, Pass
from .context import Context
from .gl import DTYPE_BYTES, BufferTexture
from .plan import Plan
from .precision import NUMPY_DTYPE, TEXTURE_DTYPE, U8Ranges
from .readback import Readback
from .summary import Views, table
from .weights import Weights

PRECISIONS = TEXTURE_DTYPE
STRATEGIES = ("direct", "blocked")
READBACKS = (True, False, "texture", "async")


def _gl_errors(method):
    """Run `method` on a live pipeline, on its context's thread; a moderngl failure (e.g.
    a released or lost context) becomes a ContextError instead of escaping as moderngl's."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if self.released:
            raise GlcnnError(f"{method.__name__}() on a released Pipeline; compile the model "
                             "again (glcnn.load or glcnn.Pipeline)")
        self.ctx.activate()
        try:
            return method(self, *args, **kwargs)
        except moderngl.Error as exc:
            raise ContextError(f"GL failure in Pipeline.{method.__name__}(): {exc}") from None
    return wrapper


class Pipeline(Views):
    """A compiled model.

    Args:
        graph: the network (see glcnn.graph / glcnn.graph.builder), never written: `graph` is
            the pipeline's own copy (sharing the arrays), which `set_weights` changes.
        ctx: a glcnn.Context, a moderngl.Context to share (e.g. your window's), or None for
            the thread's default headless context (`Context.default()`, shared by every
            pipeline made without `ctx`; the first pipeline's layers choose its rasteriser
            threads on llvmpipe, glcnn.runtime.threads). The pipeline makes its context
            current before each GL call, so pipelines on different contexts may be used in
            any order.
        precision: storage of activations, "fp32" (RGBA32F), "fp16" (RGBA16F) or "u8"
            (RGBA8, range-scaled per channel with graph.meta["u8_ranges"] from
            glcnn.calibrate; normalisation inputs and statistics stay RGBA32F,
            glcnn.runtime.precision.float_tensors); arithmetic is float32 in every mode.
        keep: tensor names that must keep their own texture so `texture(name)` stays
            valid after `run()`; "all" keeps every tensor (the viewer and `diff` do this).
        memory_budget: most bytes of textures this pipeline may allocate (int, or a string
            such as "512M"); None reads GLCNN_MEMORY_BUDGET, default 2 GiB (glcnn.limits).
        strategy: "blocked" runs convs spatially blocked (several output pixels per
            fragment written to multiple render targets, then copied into the output atlas:
            far fewer texture fetches, which is what software rasterisers such as llvmpipe
            pay for), "direct" one output texel per fragment; None reads GLCNN_STRATEGY,
            else the context's choice (`Context.strategy`: blocked on software renderers).
            Both give the same results within the precision's tolerance.
        max_gflop: the compute limit, GFLOP per run (None reads GLCNN_MAX_GFLOP, default
            200; glcnn.limits): a model needing more is refused before anything is allocated.
    Raises:
        GlcnnError subclasses naming the layer: unsupported op, bad weights, shapes,
        textures larger than GL_MAX_TEXTURE_SIZE or than the memory budget (both
        TextureSizeError, raised before anything is allocated), shader compile errors;
        ContextError if the driver fails an allocation (e.g. GL_OUT_OF_MEMORY) or the
        context belongs to another thread. A failed compile leaves no GL object behind.
    """

    def __init__(self, graph: Graph, ctx=None, precision: str = "fp32", keep=(),
                 memory_budget=None, strategy: str | None = None, max_gflop=None):
        if not isinstance(precision, str) or precision not in PRECISIONS:
            raise GlcnnError(f"precision {quote(precision)} unknown; expected one of "
                             f"{', '.join(PRECISIONS)}")
        self.ops, self.shapes = build_ops(graph)  # first: the default context's threads suit them
        check_flops(sum(op.flops() for op in self.ops), max_gflop)
        self.ctx = ctx if isinstance(ctx, Context) else \
            Context.default(self.ops) if ctx is None else Context.wrap(ctx)
        self.ctx.activate()
        threads.check(self.ctx, self.ops)
        self.graph, self.precision = graph, precision
        self.strategy = _strategy(strategy, self.ctx)
        keep = _keep(keep, self.shapes)
        self.plan = Plan(graph, self.ops, self.shapes, self.ctx, precision, self.strategy, keep)
        self.u8 = U8Ranges(graph.meta.get("u8_ranges", {}), self.shapes,
                           self.plan.float_tensors) if precision == "u8" else None
        self.blocking, self.blocked_tensors = self.plan.blocking, self.plan.blocked_tensors
        self.plan.check_sizes(memory_budget_bytes(memory_budget))
        compiler = Compiler(self.ctx, self.plan, self.shapes, precision, self.u8)
        self.passes, self._ranges = [], None
        self.textures, self._owner = compiler.textures, compiler.owner  # filled as made
        self._scratch, self._input_buffers = compiler.scratch, compiler.input_buffers
        self._pbos: dict[str, moderngl.Buffer] = {}
        self.released, self.timings, self._runs = False, {}, 0
        try:
            # Weight textures are laid out on two threads (numpy copies, without the GIL)
            # while this thread allocates, compiles and uploads the layers before.
            with ThreadPoolExecutor(2) as pool:
                weights = pool.map(methodcaller("all_textures"), self.ops)
                self._ranges = compiler.ranges_texture()
                compiler.allocate(self.plan.texture_of)
                for name in graph.outputs:  # run(readback="async") downloads into these
                    tex = self.textures[name]
                    self._pbos[name] = self.ctx.gl.buffer(
                        reserve=tex.width * tex.height * 4 * DTYPE_BYTES[tex.dtype])
                for op, data in zip(self.ops, weights):
                    self.passes.append(compiler.make_pass(op, data))
            self.ctx.check_error(f"compiling {len(self.ops)} layers")
            self._weights = Weights(graph, self.ops, self.passes)
            self.graph = self._weights.graph  # its own, which set_weights edits, not yours
        except BaseException:
            with contextlib.suppress(moderngl.Error):  # keep the first error, not a lost context's
                self.release()
            raise

    # --- run ---------------------------------------------------------------------------
    @_gl_errors
    def run(self, inputs=None, readback=True, **named):
        """Run the network.

        Args:
            inputs: one array (C, H, W) or (1, C, H, W) for a single-input model, or a
                dict name -> array. Keyword arguments name inputs too.
            readback: True downloads the outputs as numpy; False skips the download (results
                stay in `texture(name)`); "texture" returns the output textures themselves
                (to draw, blit or sample in your own GL code: nothing goes through the CPU);
                "async" starts the download into pixel buffer objects and returns a
                `Readback` whose `result()` maps them later (on a GPU, the copy overlaps
                whatever you do in between).
        Returns:
            The output as float32 numpy (with a leading batch axis if the input had one,
            in the model file's own shape, e.g. (1, F) for an ONNX classifier), a
            moderngl.Texture (layout: glcnn.layout) or a Readback as `readback` asks; a dict
            name -> result for several outputs; None without readback.
        Raises:
            ShapeError: an input of the wrong shape, dtype, or with NaN/Inf (see `upload`).
            ContextError: another thread, or the driver failed (e.g. a lost context).
            GlcnnError: the pipeline was released, or `readback` is none of the above.
        """
        if not isinstance(readback, bool | np.bool_ | str) or readback not in READBACKS:
            raise GlcnnError(f"run(readback={quote(readback)}): expected one of "
                             f"{', '.join(map(repr, READBACKS))}")
        feeds = self._feeds(inputs, named)
        batched = any(array_ndim(v) == 4 for v in feeds.values())
        for name, value in feeds.items():
            self.upload(name, value)
        self.execute()
        self.ctx.check_error("running the model")
        self._runs += 1
        if not readback:
            return None
        if readback == "async":
            return self._start_readback(batched)
        if readback == "texture":
            return self._outputs({n: self.textures[n] for n in self.graph.outputs})
        return self._outputs({n: self.read(n) for n in self.graph.outputs}, batched)

    def _outputs(self, values: dict, batched: bool = False):
        """run()'s result from output name -> value: each array in the model file's own
        layout when the input had a batch axis; the value alone for a one-output model."""
        if batched:
            values = {name: self._own_layout(name, y) for name, y in values.items()}
        return values[self.graph.outputs[0]] if len(values) == 1 else values

    def _start_readback(self, batched: bool) -> "Readback":
        for name in self.graph.outputs:
            self.textures[name].read_into(self._pbos[name])
        return Readback(self, self._runs, batched)

    def _own_layout(self, name: str, y: np.ndarray) -> np.ndarray:
        """Output `name` (read as (C, H, W)) in the model file's own shape (ONNX (1, F), TF.js
        (1, H, W, C) and (1, L, C), ONNX (1, L, C) held as (C, 1, L), ...), else (1, C, H, W)."""
        own, meta = self.graph.meta.get("onnx_output_shapes", {}).get(name), self.graph.meta
        if not own or int(np.prod(own)) != y.size:
            return y[None]
        if meta.get("layout") == "NHWC" and len(own) in (3, 4) or \
                name in meta.get("channels_last_outputs", ()):
            return y.transpose(1, 2, 0).reshape(own)
        return y.reshape(own)

    @_gl_errors
    def execute(self) -> None:
        """Draw every pass on whatever the input textures hold (no upload, no readback).

        For inputs written on the GPU, e.g. a camera frame pre-processed by the viewer into
        `texture(input_name)`.
        """
        level = debug.level()
        for p in self.passes:
            start = time.perf_counter() if level else 0.0
            self.draw(p)
            if level:
                self._debug_pass(p, start, level)

    def draw(self, p: Pass) -> None:
        """Draw pass `p` (one of `passes`) alone, as `execute` draws each; e.g. to time it."""
        p.draw(self.ctx, self.textures, self._ranges)

    def _feeds(self, inputs, named) -> dict:
        feeds = dict(named)
        if isinstance(inputs, dict):
            feeds.update(inputs)
        elif inputs is not None:
            if len(self.graph.inputs) != 1:
                raise ShapeError(f"model has inputs {list(self.graph.inputs)}; pass a dict")
            feeds[next(iter(self.graph.inputs))] = inputs
        missing = set(self.graph.inputs) - set(feeds)
        unknown = set(feeds) - set(self.graph.inputs)
        if missing or unknown:
            raise ShapeError(f"inputs missing: {sorted(missing)}, unknown: {sorted(unknown)}; "
                             f"model inputs are {self.graph.inputs}")
        return feeds

    @_gl_errors
    def upload(self, name: str, value) -> None:
        """Write a (C, H, W) or (1, C, H, W) array into input texture `name`.

        Any real dtype (converted to float32) and any strides (non-contiguous views are
        copied) are accepted.

        Raises:
            ShapeError: an unknown input, another shape (a channels-last array is named as
                such), a non-numeric, boolean or complex dtype, or NaN/Inf values, which are
                refused rather than spread through every layer.
        """
        if name not in self.graph.inputs:
            raise ShapeError(f"no model input named {quote(name)}; inputs: {self.graph.inputs}")
        own = self.graph.meta.get("onnx_input_shapes", {}).get(name, ())
        nhwc = channels_last(self.graph.meta, name)
        x = checked_input(name, value, tuple(self.graph.inputs[name]), tuple(own), nhwc)
        self.textures[name].write(self._encode(name, x).tobytes(),
                                  viewport=(0, 0, *Atlas.of(self.shapes[name]).size))

    def _encode(self, name, x) -> np.ndarray:
        if self.u8 is None or name not in self.u8.ids:  # stored as is
            return pack(x.astype(np.float32)).astype(NUMPY_DTYPE[self.textures[name].dtype])
        return np.round(pack(self.u8.encode(name, x)) * 255).astype(np.uint8)

    def _debug_pass(self, p: Pass, start: float, level: int) -> None:
        self.ctx.gl.finish()
        ms = (time.perf_counter() - start) * 1e3
        self.timings[p.op.node.name] = ms
        line = f"[glcnn] {p.op.node.name:<24} {p.op.op_type:<20} {ms:8.3f} ms"
        if level >= 4:
            y = self.read(p.op.node.name)
            line += (f"  min {y.min():+.4g} max {y.max():+.4g} mean {y.mean():+.4g}"
                     f"  nan {int(np.isnan(y).sum())} inf {int(np.isinf(y).sum())}")
        print(line)

    # --- results -------------------------------------------------------------------------
    def texture(self, name: str) -> moderngl.Texture:
        """The GPU texture holding tensor `name` (layout: glcnn.layout), no readback.

        The atlas sits in its top-left corner; where a side of the atlas is a power of two
        the texture is one or a few texels larger (zeros; see `Compiler.new_image`), which
        `glcnn.layout.unpack` ignores.

        The pipeline's context is made current, so the texture can be used right away; it
        belongs to this pipeline's thread like the pipeline itself.

        Raises:
            GlcnnError: unknown name, its texture was recycled for a later tensor, or it
                stays in a blocked conv's layout (compile with keep=[name] or keep="all").
            ContextError: called from a thread other than the context's.
        """
        if self.released:
            raise GlcnnError(f"texture({quote(name)}) of a released Pipeline")
        self.ctx.activate()
        if name not in self.textures:
            raise GlcnnError(f"no tensor named {quote(name)}; tensors: {', '.join(self.shapes)}")
        if name in self.blocked_tensors:
            raise GlcnnError(f"tensor {quote(name)} stays in the blocked layout its conv wrote "
                             "(the next convs read it in place); create the Pipeline with "
                             f"keep=[{quote(name)}] or keep='all' to get it as a texture")
        if self._owner.get(id(self.textures[name]), name) != name:
            raise GlcnnError(f"tensor {quote(name)} shares its texture with later layers; "
                             f"create the Pipeline with keep=[{quote(name)}] or keep='all'")
        return self.textures[name]

    @_gl_errors
    def read(self, name: str) -> np.ndarray:
        """Download tensor `name` as float32 (C, H, W)."""
        return self._from_texels(name, self.texture(name).read())

    def _from_texels(self, name: str, raw: bytes) -> np.ndarray:
        """Tensor `name` as float32 (C, H, W) from the bytes of its texture."""
        tex = self.textures[name]
        data = np.frombuffer(raw, NUMPY_DTYPE[tex.dtype])
        data = data.reshape(tex.height, tex.width, 4).astype(np.float32)
        if self.u8 is None or name not in self.u8.ids:  # stored as is
            return unpack(data, self.shapes[name])
        return self.u8.decode(name, unpack(data / 255.0, self.shapes[name]))

    def weight_texture(self, layer: str, sampler: str = "u_weights") -> moderngl.Texture:
        """The weight texture `sampler` of `layer` (e.g. a conv's filter grid), its layout in
        the top-left corner (the op's `all_texture_shapes()` gives its size; the texture may
        be larger, as `texture` says). A conv's filters are a `glcnn.runtime.gl.BufferTexture`
        (the same layout row by row in a buffer texture; it has `write` and `read` as a
        moderngl.Texture) unless they hold more texels than the GL allows in one.

        Raises:
            GlcnnError: no such layer or sampler. ContextError: another thread.
        """
        self.ctx.activate()
        for p in self.passes:
            if p.op.node.name == layer:
                for s, tex in p.weights:
                    if s == sampler:
                        return tex
                raise GlcnnError(f"layer {quote(layer)} has no weight texture {quote(sampler)}; "
                                 f"it has {[s for s, _ in p.weights]}")
        raise GlcnnError(f"no layer named {quote(layer)}")

    def weight_layout(self, layer: str, sampler: str = "u_weights") -> tuple[int, int, int]:
        """(height, width, 4) of the layout in the corner of `weight_texture(layer, sampler)`.

        Raises:
            GlcnnError: no such layer or sampler.
        """
        return self._weights.layout_shape(layer, sampler)

    # --- weights (glcnn.runtime.weights) ---------------------------------------------------
    def weights(self, layer: str) -> dict[str, np.ndarray]:
        """Copies of the weights `layer` runs with, float32, by name, shaped as its graph node
        holds them (Conv: "W" (Co, Ci/group, kh, kw), "B" (Co,)); `set_weights` changes them.

        Raises:
            GlcnnError: no such layer (some are listed), or the pipeline was released.
        """
        if self.released:
            raise GlcnnError(f"weights({quote(layer)}) of a released Pipeline")
        return self._weights.get(layer)

    @_gl_errors
    def set_weights(self, layer: str, name: str, array) -> int:
        """Replace weight `name` of `layer` (as `weights` gives it) by `array` and re-upload only
        the texels that change (one conv output channel: one band of its filter grid), at any
        precision. Your Graph is never written: `graph`, the pipeline's copy, gets the array.

        Returns:
            The texels written (0 if none changed).
        Raises:
            GlcnnError: no such layer, or the pipeline was released. WeightError: no weight
                `name` (the layer's are listed), or `array` has another shape, a non-numeric
                dtype or NaN/Inf values; the pipeline is then unchanged.
        """
        return self._weights.set(layer, name, array)

    # --- lifetime and printing -------------------------------------------------------------
    def release(self) -> None:
        """Free every GL object this pipeline created (programs stay in the context cache).
        Releasing twice is harmless; any other use afterwards raises GlcnnError."""
        self.ctx.activate()
        self.released = True
        self.ctx.park()
        for p in self.passes:
            p.release()
        for array in self._scratch.values():
            array.release()
        self._scratch.clear()
        for buffer in self._input_buffers.values():
            buffer.release()
        self._input_buffers.clear()
        for pbo in self._pbos.values():
            pbo.release()
        self._pbos.clear()
        for tex in {id(t): t for t in self.textures.values()}.values():
            tex.release()
        if self._ranges is not None:
            self._ranges.release()
            self._ranges = None
        self.passes, self.textures = [], {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def texture_bytes(self) -> int:
        """Bytes of all activation and weight textures this pipeline holds."""
        unique = {id(t): t for t in self.textures.values()}
        unique.update({id(t): t for p in self.passes for _, t in p.weights})
        unique.update({id(t): t for t in self._scratch.values()})
        unique.update({id(t): t for t in self._input_buffers.values()})
        return sum(t.texels * 4 * DTYPE_BYTES[t.dtype] if isinstance(t, BufferTexture) else
                   t.width * t.height * getattr(t, "layers", 1) * 4 * DTYPE_BYTES[t.dtype]
                   for t in unique.values())

    def summary(self) -> str:
        """Per-layer table (see glcnn.runtime.summary) plus the memory actually allocated."""
        footer = (f"allocated {self.texture_bytes() / 2**20:.2f} MiB of textures with reuse "
                  f"on {self.ctx.renderer}; strategy {self.strategy}"
                  f" ({len(self.blocking)} of {len(self.ops)} layers blocked, "
                  f"{sum(p.input_buffer is not None for p in self.passes)} reading their input "
                  f"from a buffer texture, {len(self.blocked_tensors)} tensors read in place "
                  "without an unblock pass)")
        return table(self.ops, self.shapes, self.precision, footer)

    def __repr__(self):
        return (f"Pipeline({len(self.passes)} passes, inputs={self.graph.inputs}, "
                f"outputs={self.graph.outputs}, {self.precision})")


def _keep(keep, shapes: dict) -> set:
    """`keep` ("all", or tensor names) as a set of tensor names.

    Raises:
        GlcnnError: anything else (a number, a string other than "all", non-string names).
    """
    if isinstance(keep, str) and keep == "all":
        return set(shapes)
    names = list(keep) if isinstance(keep, list | tuple | set | frozenset) else None
    if names is None or not all(isinstance(n, str) for n in names):
        raise GlcnnError(f"keep={quote(keep)}: expected 'all' or a list of tensor names")
    return set(names)


def _strategy(strategy: str | None, ctx: Context) -> str:
    strategy = strategy or os.environ.get("GLCNN_STRATEGY") or ctx.strategy
    if strategy not in STRATEGIES:
        raise GlcnnError(f"strategy {quote(strategy)} unknown; expected one of "
                         f"{', '.join(STRATEGIES)} (Pipeline(strategy=...) or GLCNN_STRATEGY)")
    return strategy

