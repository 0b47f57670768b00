"""Compile a pipeline's ops into passes: the textures of its plan, one program, vertex array,
framebuffer and set of uniforms per op, and the weight textures, all made once; `Pass.draw`
then runs one at run time."""

from dataclasses import dataclass

import moderngl
import numpy as np

from ..layout import Atlas, Blocking
from ..ops import Op
from .context import Context
from .gl import DTYPE_BYTES, BufferTexture, TileCopies, layer_framebuffer, nearest_clamped
from .plan import INPUT_BUFFER_DTYPE, Plan, buffer_texels
from .precision import TEXTURE_DTYPE

RANGES_UNIT = 15  # texture unit of the u8 ranges texture (ops use fewer units)


def zero_margin(tex, size: tuple[int, int], layers: int = 0) -> None:
    """Zero the texels of `tex` (a texture, or with `layers` an array) outside its
    (width, height) = `size` corner: a right strip and a bottom strip."""
    width, height = size
    texel = 4 * DTYPE_BYTES[tex.dtype]
    depth = (0, layers) if layers else ()
    strips = ((width, 0, tex.width - width, tex.height), (0, height, width, tex.height - height))
    for x, y, w, h in strips:
        if w > 0 and h > 0:
            viewport = (x, y, *depth[:1], w, h, *depth[1:])
            tex.write(bytes(w * h * max(layers, 1) * texel), viewport=viewport)


@dataclass
class Unblock:
    """The second draw of a spatially blocked pass: render targets -> the output atlas."""

    program: moderngl.Program
    vao: moderngl.VertexArray
    fbo: moderngl.Framebuffer  # the output texture
    targets: moderngl.TextureArray  # the blocked pass's render targets, one per layer (shared)
    uniforms: dict

    def draw(self, ctx) -> None:
        self.targets.use(0)
        ctx.set_uniforms(self.program, self.uniforms)
        self.fbo.use()
        self.vao.render(moderngl.TRIANGLES, vertices=3)


@dataclass
class Pass:
    """Everything one op needs at run time, resolved at compile time."""

    op: Op
    program: moderngl.Program | None  # None: a pass of copies (`copies`)
    vao: moderngl.VertexArray | None
    fbo: moderngl.Framebuffer
    inputs: list[tuple[str, str]]  # (sampler, tensor name)
    weights: list[tuple[str, moderngl.Texture]]
    uniforms: dict
    unblock: Unblock | None = None  # set when the op runs spatially blocked
    input_buffer: BufferTexture | None = None  # u_input, filled from the input before the draw
    copy_input: bool = False  # fill it: an earlier pass has not already copied this tensor
    copies: TileCopies | None = None  # the op runs as copies into fbo's texture (Plan.copies)

    def draw(self, ctx, textures: dict, ranges) -> None:
        """Bind the inputs (tensor name -> texture in `textures`), weights and u8 `ranges`,
        set the uniforms, draw; then the unblock draw, if any. (A pass of copies copies.)"""
        if self.copies is not None:
            self.copies.draw(textures, self.fbo)
            return
        for unit, (_, tensor) in enumerate(self.inputs):
            textures[tensor].use(unit)
        if self.input_buffer is not None:  # u_input: the input atlas, copied now
            if self.copy_input:
                self.input_buffer.copy_from(textures[self.inputs[0][1]])
            self.input_buffer.use(0)
        for unit, (_, tex) in enumerate(self.weights, len(self.inputs)):
            tex.use(unit)
        if ranges is not None and "u_ranges" in self.uniforms:
            ranges.use(RANGES_UNIT)
        ctx.set_uniforms(self.program, self.uniforms)
        self.fbo.use()
        self.vao.render(moderngl.TRIANGLES, vertices=3)
        if self.unblock is not None:
            self.unblock.draw(ctx)

    def release(self) -> None:
        """Free the pass's own GL objects: vertex arrays, framebuffers, weight textures."""
        for obj in (self.vao, self.fbo, *(tex for _, tex in self.weights), self.copies,
                    *((self.unblock.vao, self.unblock.fbo) if self.unblock else ())):
            if obj is not None:
                obj.release()


class Compiler:
    """Makes the GL objects of one pipeline (which releases them): `textures` (tensor name ->
    texture, shared by tensors whose live ranges do not overlap), `owner` (texture id -> the
    last tensor written to it), `scratch` render targets of blocked passes and the `input_buffers`
    of passes that read their input from a buffer texture."""

    def __init__(self, ctx: Context, plan: Plan, shapes: dict, precision: str, u8):
        self.ctx, self.plan, self.shapes, self.precision, self.u8 = ctx, plan, shapes, precision, u8
        self.textures, self.owner = {}, {}
        self.scratch: dict[tuple, moderngl.TextureArray] = {}  # by (size, dtype)
        self.input_buffers: dict[int, BufferTexture] = {}  # by id of the texture copied
        self.buffer_holds: dict[int, str] = {}  # input buffer id -> tensor last copied in

    def weight_texture(self, data: np.ndarray) -> moderngl.Texture:
        """An RGBA32F texture holding the (height, width, 4) layout `data` in its corner, its
        sides never powers of two (layout.texture_side), the margin zero."""
        height, width = data.shape[:2]
        tex = self.ctx.gl.texture(self.plan.allocated((width, height)), 4, dtype="f4")
        tex.write(np.ascontiguousarray(data, np.float32), viewport=(0, 0, width, height))
        zero_margin(tex, (width, height))
        return nearest_clamped(tex)

    def ranges_texture(self):
        if self.u8 is None:
            return None
        data = self.u8.texture_data()
        return nearest_clamped(self.ctx.gl.texture((data.shape[1], data.shape[0]), 4,
                                                   np.ascontiguousarray(data, np.float32),
                                                   dtype="f4"))

    def shape_uniform(self, name: str) -> tuple[int, int, int, int]:
        """The ivec4 shaders address tensor `name` with: (C, H, W, cols | u8 id << 16)."""
        c, h, w, cols = Atlas.of(self.shapes[name]).shape_uniform
        return c, h, w, cols | (self.u8.ids.get(name, 0) << 16 if self.u8 else 0)

    def new_texture(self, name: str) -> moderngl.Texture | moderngl.TextureArray:
        """Storage for tensor `name`: its atlas, or a texture array (`Plan.blocked_tensors`)."""
        kind, size, layers, dtype = self.plan.storage(name)
        return self.new_image(size, layers if kind == "blocked" else 0, dtype)

    def new_image(self, size: tuple[int, int], layers: int = 0, dtype: str | None = None):
        """A texture (layers=0) or texture array of RGBA texels of moderngl `dtype` (default:
        the precision's), sampled NEAREST and clamped, as every shader reads texel centres.

        Its sides are layout.texture_side of `size`'s (no power of two, so llvmpipe compiles
        each program once whatever the tensor sizes); passes draw into the `size` corner
        (`framebuffer`), readers address texels by shape, and the margin stays zero.
        """
        dtype = dtype or TEXTURE_DTYPE[self.precision]
        full = self.plan.allocated(size)
        tex = nearest_clamped(self.ctx.gl.texture_array((*full, layers), 4, dtype=dtype) if layers
                              else self.ctx.gl.texture(full, 4, dtype=dtype))
        zero_margin(tex, size, layers)
        return tex

    def framebuffer(self, name: str) -> moderngl.Framebuffer:
        """A framebuffer drawing into the atlas corner of tensor `name`'s texture."""
        fbo = self.ctx.gl.framebuffer(color_attachments=[self.textures[name]])
        fbo.viewport = fbo.scissor = (0, 0, *Atlas.of(self.shapes[name]).size)
        return fbo

    def allocate(self, plan: dict[str, str]) -> None:
        """The textures of `plan` into `textures` (filled as they are made, so that a
        failure can release them) and `owner`."""
        owner = self.owner
        for name, first in plan.items():
            if first == name:
                self.textures[name] = self.new_texture(name)
            self.textures[name] = self.textures[first]
            owner[id(self.textures[name])] = name
        self.ctx.check_error(f"allocating {len(set(plan.values()))} activation textures")

    def make_pass(self, op: Op, weight_data: dict[str, np.ndarray]) -> Pass:
        name = op.node.name
        if self.plan.copies(op):
            return self.copy_pass(op)
        blocking, blocked = self.plan.blocking.get(name), self.plan.blocked_tensors
        source = blocked.get(op.node.inputs[0]) if op.node.inputs else None
        program = self.ctx.program(op.shader, self.plan.defines(op, blocked), name)
        weights = []
        buffered = self.plan.buffered(op)
        uniforms = dict(op.all_uniforms())
        for sampler, data in weight_data.items():
            if sampler in buffered:  # the layout row by row
                texels = buffer_texels(*data.shape[:2])
                weights.append((sampler, self.ctx.buffer_texture(data, texels)))
                uniforms[sampler + "_width"] = data.shape[1]
            else:
                weights.append((sampler, self.weight_texture(data)))
        inputs = list(zip(op.all_samplers(), op.node.inputs))
        input_buffer, copy_input = None, False
        if self.plan.reads_input_buffer(op, blocked):
            tensor = op.node.inputs[0]
            input_buffer = self.input_buffer(self.textures[tensor])
            uniforms["u_input_width"] = input_buffer.width
            uniforms["u_input_layer"] = input_buffer.width * input_buffer.height
            # Passes are made in run order; a tensor's texture is not rewritten while it has
            # readers left, so its second blocked reader finds it already in the buffer.
            copy_input = self.buffer_holds.get(id(input_buffer)) != tensor
            self.buffer_holds[id(input_buffer)] = tensor
        uniforms["u_out"] = self.shape_uniform(name)
        for sampler, tensor in inputs:
            uniforms[sampler + "_shape"] = self.shape_uniform(tensor)
        if blocking:
            uniforms["u_block"], uniforms["u_bands"] = blocking.uniform, blocking.band_uniform
        if source is not None:
            uniforms["u_in_block"], uniforms["u_in_group"] = source.uniform, source.group
        # Texture units: the inputs', then the weights' (as _draw binds them), u8's ranges.
        samplers = [s for s, _ in inputs] + list(weight_data)
        uniforms |= {s: unit for unit, s in enumerate(samplers)} | {"u_ranges": RANGES_UNIT}
        uniforms = {k: v for k, v in uniforms.items() if k in program}  # drop optimised-out
        vao = self.ctx.gl.vertex_array(program, [])
        buffer = {"input_buffer": input_buffer, "copy_input": copy_input}
        if name in blocked:  # no unblock: the targets are the tensor's layers
            mrt = layer_framebuffer(self.ctx, self.textures[name], blocking.targets, blocking.size)
            return Pass(op, program, vao, mrt, inputs, weights, uniforms, **buffer)
        fbo = self.framebuffer(name)
        if blocking is None:  # a direct pass (input buffer: where its plan reads one)
            return Pass(op, program, vao, fbo, inputs, weights, uniforms, **buffer)
        unblock = self.make_unblock(name, blocking, fbo)
        mrt = layer_framebuffer(self.ctx, unblock.targets, blocking.targets, blocking.size)
        return Pass(op, program, vao, mrt, inputs, weights, uniforms, unblock, **buffer)

    def copy_pass(self, op: Op) -> Pass:
        """The pass of an op that runs as copies of texel rectangles (Plan.copies), clearing
        its output atlas's cells past the last slice."""
        atlas = Atlas.of(self.shapes[op.node.name])
        row_end = atlas.slices % atlas.cols * atlas.width  # where the last row's tiles end
        clears = [(row_end, (atlas.rows - 1) * atlas.height, atlas.size[0] - row_end,
                   atlas.height)] if row_end else []
        copies = TileCopies(self.ctx, list(op.node.inputs), op.tile_copies(), clears)
        inputs = list(zip(op.all_samplers(), op.node.inputs))
        return Pass(op, None, None, self.framebuffer(op.node.name), inputs, [], {},
                    copies=copies)

    def input_buffer(self, texture: moderngl.Texture | moderngl.TextureArray) -> BufferTexture:
        """The buffer texture that `texture` (an atlas, or a blocked tensor's array: all its
        layers) is copied into for the passes reading it as an input buffer (one per texture,
        shared by the tensors that recycle it; float32 for a float16 texture,
        plan.INPUT_BUFFER_DTYPE)."""
        if id(texture) not in self.input_buffers:
            layers = getattr(texture, "layers", 1)
            self.input_buffers[id(texture)] = BufferTexture(
                self.ctx, (texture.width, texture.height),
                texture.width * texture.height * layers, INPUT_BUFFER_DTYPE[texture.dtype])
        return self.input_buffers[id(texture)]

    def make_unblock(self, name: str, blocking: Blocking, out: moderngl.Framebuffer):
        """The copy from `blocking`'s render targets (the layers of a texture array shared by
        every blocked pass of that size: each is read right after it is written) into the atlas
        behind `out`."""
        key = (blocking.size, self.plan.dtype(name))
        if key not in self.scratch:
            self.scratch[key] = self.new_image(blocking.size, self.plan.scratch_sizes()[key],
                                                 key[1])
        program = self.ctx.program("unblock.glsl", blocking.defines | {"CUSTOM_MAIN": 1}, name)
        uniforms = {"u_out": self.shape_uniform(name), "u_block": blocking.uniform,
                    "u_bands": blocking.band_uniform, "u_blocks": 0}
        return Unblock(program, self.ctx.gl.vertex_array(program, []), out,
                       self.scratch[key], uniforms)
