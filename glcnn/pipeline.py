"""Compile a Graph onto a GL context and run it: one fragment-shader pass per op.

`Pipeline(graph)` allocates every texture once (tensors whose live ranges do not overlap
share a texture), compiles each distinct program once, and records one pass per op.
`run()` then only uploads the input, binds, draws and (optionally) reads back.
"""

import os
import time
from collections import defaultdict
from dataclasses import dataclass

import moderngl
import numpy as np

from .context import Context
from .errors import GlcnnError, ShapeError, TextureSizeError
from .graph import Graph
from .layout import Atlas, pack, unpack
from .ops import Op, build_ops
from .summary import table

PRECISIONS = {"fp32": "f4", "fp16": "f2"}
_DTYPE_BYTES = {"f4": 4, "f2": 2}


@dataclass
class Pass:
    """Everything one op needs at run time, resolved at compile time."""

    op: Op
    program: moderngl.Program
    vao: moderngl.VertexArray
    fbo: moderngl.Framebuffer
    inputs: list[tuple[str, str]]  # (sampler, tensor name)
    weights: list[tuple[str, moderngl.Texture]]
    uniforms: dict


class Pipeline:
    """A compiled model.

    Args:
        graph: the network (see glcnn.graph / glcnn.builder).
        ctx: a glcnn.Context, a moderngl.Context to share, or None for headless EGL.
        precision: storage of activations, "fp32" (RGBA32F) or "fp16" (RGBA16F);
            arithmetic is float32 either way.
        keep: tensor names that must keep their own texture so `texture(name)` stays
            valid after `run()`; "all" keeps every tensor (the viewer and `diff` do this).
    Raises:
        GlcnnError subclasses naming the layer: unsupported op, bad weights, shapes,
        textures larger than GL_MAX_TEXTURE_SIZE, shader compile errors.
    """

    def __init__(self, graph: Graph, ctx=None, precision: str = "fp32", keep=()):
        if precision not in PRECISIONS:
            raise GlcnnError(f"precision {precision!r} unknown; expected one of "
                             f"{', '.join(PRECISIONS)}")
        self.ctx = ctx if isinstance(ctx, Context) else Context(ctx)
        self.graph, self.precision = graph, precision
        self.ops, self.shapes = build_ops(graph)
        self._check_sizes()
        keep = set(self.shapes) if keep == "all" else set(keep)
        self.textures, self._owner = self._allocate(keep)
        self.passes = [self._make_pass(op) for op in self.ops]
        self.timings: dict[str, float] = {}

    # --- compile -----------------------------------------------------------------------
    def _check_sizes(self):
        limit = self.ctx.max_texture_size
        for name, shape in self.shapes.items():
            if max(Atlas.of(shape).size) > limit:
                raise TextureSizeError(f"tensor {name!r} of shape {shape} needs a "
                                       f"{Atlas.of(shape).size} texture; this GL allows "
                                       f"{limit}×{limit} ({self.ctx.renderer})")
        for op in self.ops:
            for sampler, data in op.all_textures().items():
                if max(data.shape[:2]) > limit:
                    raise TextureSizeError(f"layer {op.node.name!r}: weight texture {sampler} "
                                           f"needs {data.shape[1]}×{data.shape[0]} texels; "
                                           f"this GL allows {limit}×{limit}")

    def _new_texture(self, shape) -> moderngl.Texture:
        tex = self.ctx.gl.texture(Atlas.of(shape).size, 4, dtype=PRECISIONS[self.precision])
        tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
        return tex

    def _allocate(self, keep):
        """One texture per tensor, recycling those whose last reader has already run."""
        pinned = keep | set(self.graph.inputs) | set(self.graph.outputs)
        last_use = {t: i for i, node in enumerate(self.graph.nodes) for t in node.inputs}
        textures = {name: self._new_texture(self.shapes[name]) for name in self.graph.inputs}
        owner = {id(tex): name for name, tex in textures.items()}
        free = defaultdict(list)
        for i, node in enumerate(self.graph.nodes):
            size = Atlas.of(self.shapes[node.name]).size
            reusable = free[size] if node.name not in pinned else []
            textures[node.name] = reusable.pop() if reusable else self._new_texture(
                self.shapes[node.name])
            owner[id(textures[node.name])] = node.name
            for t in set(node.inputs):
                if last_use[t] == i and t not in pinned:
                    free[Atlas.of(self.shapes[t]).size].append(textures[t])
        return textures, owner

    def _make_pass(self, op: Op) -> Pass:
        name = op.node.name
        program = self.ctx.program(op.shader, op.all_defines(), name)
        weights = []
        for sampler, data in op.all_textures().items():
            tex = self.ctx.gl.texture((data.shape[1], data.shape[0]), 4,
                                      np.ascontiguousarray(data, np.float32).tobytes(), dtype="f4")
            tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
            weights.append((sampler, tex))
        inputs = list(zip(op.all_samplers(), op.node.inputs))
        uniforms = dict(op.all_uniforms())
        uniforms["u_out"] = Atlas.of(self.shapes[name]).shape_uniform
        for sampler, tensor in inputs:
            uniforms[sampler + "_shape"] = Atlas.of(self.shapes[tensor]).shape_uniform
        uniforms = {k: v for k, v in uniforms.items() if k in program}  # drop optimised-out
        fbo = self.ctx.gl.framebuffer(color_attachments=[self.textures[name]])
        vao = self.ctx.gl.vertex_array(program, [])
        return Pass(op, program, vao, fbo, inputs, weights, uniforms)

    # --- run ---------------------------------------------------------------------------
    def run(self, inputs=None, readback: bool = True, **named):
        """Run the network.

        Args:
            inputs: one array (C, H, W) or (1, C, H, W) for a single-input model, or a
                dict name -> array. Keyword arguments name inputs too.
            readback: False skips the download; results stay in `texture(name)`.
        Returns:
            The output as float32 numpy (with a leading batch axis if the input had one,
            in the model file's own shape, e.g. (1, F) for an ONNX classifier),
            a dict name -> array for several outputs, or None without readback.
        Raises:
            ShapeError: an input of the wrong shape, naming the input and both shapes.
        """
        self.ctx.check_thread()
        feeds = self._feeds(inputs, named)
        batched = any(np.ndim(v) == 4 for v in feeds.values())
        for name, value in feeds.items():
            self.upload(name, value)
        self.execute()
        if not readback:
            return None
        outs = {n: self._own_layout(n) if batched else self.read(n) for n in self.graph.outputs}
        return outs[self.graph.outputs[0]] if len(outs) == 1 else outs

    def _own_layout(self, name: str) -> np.ndarray:
        """Output `name` in the model file's own shape (e.g. ONNX (1, F)), else (1, C, H, W)."""
        y = self.read(name)
        own = self.graph.meta.get("onnx_output_shapes", {}).get(name)
        return y.reshape(own) if own and int(np.prod(own)) == y.size else y[None]

    def execute(self) -> None:
        """Draw every pass on whatever the input textures hold (no upload, no readback).

        For inputs written on the GPU, e.g. a camera frame pre-processed by the viewer into
        `texture(input_name)`.
        """
        self.ctx.check_thread()
        debug = _debug()
        for p in self.passes:
            start = time.perf_counter() if debug else 0.0
            self._draw(p)
            if debug:
                self._debug_pass(p, start, debug)

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

    def upload(self, name: str, value) -> None:
        """Write a (C, H, W) or (1, C, H, W) array into input texture `name`."""
        expected = tuple(self.graph.inputs[name])
        x = np.asarray(value)
        own = tuple(self.graph.meta.get("onnx_input_shapes", {}).get(name, ()))
        if own and x.shape == own:  # e.g. an ONNX (1, F) vector input
            x = x.reshape(expected)
        if x.ndim == 4 and x.shape[0] == 1:
            x = x[0]
        if x.shape != expected:
            raise ShapeError(f"input {name!r} has shape {np.shape(value)}; expected "
                             f"{expected} or {(1, *expected)} (NCHW, batch 1)")
        if not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
            raise ShapeError(f"input {name!r} has dtype {x.dtype}; expected real numbers")
        dtype = np.float32 if self.precision == "fp32" else np.float16
        self.textures[name].write(pack(x.astype(np.float32)).astype(dtype).tobytes())

    def _draw(self, p: Pass) -> None:
        unit = 0
        for sampler, tensor in p.inputs:
            self.textures[tensor].use(unit)
            p.program[sampler].value = unit
            unit += 1
        for sampler, tex in p.weights:
            tex.use(unit)
            p.program[sampler].value = unit
            unit += 1
        for key, value in p.uniforms.items():
            p.program[key].value = value
        p.fbo.use()
        p.vao.render(moderngl.TRIANGLES, vertices=3)

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

        Raises:
            GlcnnError: unknown name, or its texture was recycled for a later tensor
                (compile with keep=[name] or keep="all").
        """
        if name not in self.textures:
            raise GlcnnError(f"no tensor named {name!r}; tensors: {', '.join(self.shapes)}")
        if self._owner.get(id(self.textures[name]), name) != name:
            raise GlcnnError(f"tensor {name!r} shares its texture with later layers; "
                             f"create the Pipeline with keep=[{name!r}] or keep='all'")
        return self.textures[name]

    def read(self, name: str) -> np.ndarray:
        """Download tensor `name` as float32 (C, H, W)."""
        tex = self.texture(name)
        dtype = np.float32 if self.precision == "fp32" else np.float16
        data = np.frombuffer(tex.read(), dtype).reshape(tex.height, tex.width, 4)
        return unpack(data.astype(np.float32), self.shapes[name])

    def weight_texture(self, layer: str, sampler: str = "u_weights") -> moderngl.Texture:
        """The weight texture `sampler` of `layer` (e.g. a conv's filter grid)."""
        for p in self.passes:
            if p.op.node.name == layer:
                for s, tex in p.weights:
                    if s == sampler:
                        return tex
                raise GlcnnError(f"layer {layer!r} has no weight texture {sampler!r}; "
                                 f"it has {[s for s, _ in p.weights]}")
        raise GlcnnError(f"no layer named {layer!r}")

    # --- lifetime and printing -------------------------------------------------------------
    def release(self) -> None:
        """Free every GL object this pipeline created (programs stay in the context cache)."""
        self.ctx.park()
        for p in self.passes:
            p.vao.release()
            p.fbo.release()
            for _, tex in p.weights:
                tex.release()
        for tex in {id(t): t for t in self.textures.values()}.values():
            tex.release()
        self.passes, self.textures = [], {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def texture_bytes(self) -> int:
        """Bytes of all activation and weight textures this pipeline holds."""
        unique = {id(t): t for t in self.textures.values()}
        unique.update({id(t): t for p in self.passes for _, t in p.weights})
        return sum(t.width * t.height * 4 * _DTYPE_BYTES[t.dtype] for t in unique.values())

    def summary(self) -> str:
        """Per-layer table (see glcnn.summary) plus the memory actually allocated."""
        footer = (f"allocated {self.texture_bytes() / 2**20:.2f} MiB of textures with reuse "
                  f"on {self.ctx.renderer}")
        return table(self.ops, self.shapes, self.precision, footer)

    def __repr__(self):
        return (f"Pipeline({len(self.passes)} passes, inputs={self.graph.inputs}, "
                f"outputs={self.graph.outputs}, {self.precision})")


def _debug() -> int:
    try:
        return int(os.environ.get("GLCNN_DEBUG", "0"))
    except ValueError:
        return 0
