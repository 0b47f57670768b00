"""Optimisers on the GPU: each trained weight's layout is a texture pair (ping-pong) with its
state textures (momentum buffer; Adam's moments), updated by one multiple-render-target pass
of shaders/optim_sgd.glsl or optim_adam.glsl; then the new layout is copied into the
forward pipeline's weight texture and re-laid out (shaders/filter_transpose.glsl) into the
weight texture of the conv computing the layer's input gradient.

These passes are not graph ops: each writes two or three textures at once and reads the
texture it replaces, which the op contract (one output, inputs never written) does not allow.
"""

from dataclasses import dataclass

import moderngl
import numpy as np

from ..errors import GlcnnError, quote
from ..runtime.gl import BufferTexture

OPTIMIZERS = ("sgd", "adam", "adamw")


@dataclass
class Hyper:
    """PyTorch's hyper-parameters of the optimiser `name`."""

    name: str
    lr: float
    momentum: float = 0.0
    nesterov: bool = False
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0

    def check(self) -> None:
        """Raises GlcnnError on an unknown optimiser or a value PyTorch refuses."""
        if self.name not in OPTIMIZERS:
            raise GlcnnError(f"optimizer {quote(self.name)} unknown; expected one of "
                             f"{', '.join(OPTIMIZERS)}")
        b1, b2 = self.betas
        if not (self.lr >= 0 and self.momentum >= 0 and self.eps >= 0 and self.weight_decay >= 0
                and 0 <= b1 < 1 and 0 <= b2 < 1):
            raise GlcnnError(f"optimizer {self.name}: lr={self.lr}, momentum={self.momentum}, "
                             f"eps={self.eps}, weight_decay={self.weight_decay} must be ≥ 0 "
                             f"and betas={self.betas} in [0, 1)")
        if self.nesterov and (self.name != "sgd" or self.momentum <= 0):
            raise GlcnnError("nesterov=True needs optimizer='sgd' with momentum > 0")

    def shader(self) -> tuple[str, dict, int]:
        """(shader, defines, state textures)."""
        if self.name == "sgd":
            return "optim_sgd.glsl", {"NESTEROV": 1} if self.nesterov else {}, 1
        return "optim_adam.glsl", {"ADAMW": 1} if self.name == "adamw" else {}, 2

    def uniforms(self, step: int) -> dict:
        if self.name == "sgd":
            return {"u_sgd": (self.lr, self.momentum, self.weight_decay, 0.0)}
        b1, b2 = self.betas
        return {"u_adam": (self.lr, b1, b2, self.eps),
                "u_step": (self.lr / (1 - b1 ** step), float(np.sqrt(1 - b2 ** step)),
                           self.weight_decay, 0.0)}


class Slot:
    """One trained weight: its layout in textures `current` (read by everyone) and the other
    of the pair (written by the update), its state, and where it is published.

    Args:
        ctx: the glcnn Context. new_image: (size) -> a fresh float32 texture of that layout
            size (Compiler.new_image). data: the (height, width, 4) initial layout.
        grad: the gradient texture (same layout), or with `lanes` (its uniforms
            grad_ops.LANE_UNIFORMS, or for a bias u_bias_row) the texture array of a
            lane-blocked weight gradient (grad_lanes.glsl, optim_inputs.glsl).
        hyper: the optimiser.
        target: the forward pipeline's weight texture (2D or BufferTexture) to copy into.
        rebind: for a 2D target, a function binding a texture in its place in the forward
            pipeline: publish binds the current layout instead of copying it.
    """

    def __init__(self, ctx, new_image, data: np.ndarray, grad, hyper: Hyper, target,
                 lanes: dict | None = None, rebind=None):
        self.ctx, self.hyper, self.grad, self.target = ctx, hyper, grad, target
        self.height, self.width = data.shape[:2]
        self.extra = dict(lanes or {})  # uniforms besides the optimiser's and samplers
        # The weights are read from a buffer target (always equal to `current` after publish).
        self.buffered = isinstance(target, BufferTexture)
        shader, defines, states = hyper.shader()
        if lanes:  # a weight's lane-blocked gradient, or the bias gradient in its extra row
            defines |= {"LANE_BIAS" if "u_bias_row" in lanes else "LANE_GRAD": 1}
        defines |= {"PARAM_BUFFER": 1} if self.buffered else {}
        zeros = np.zeros_like(data)
        self.sets = [[self._image(new_image, data if i == 0 else zeros)]
                     + [self._image(new_image, zeros) for _ in range(states)] for i in range(2)]
        block = {"BLOCKED_OUTPUT": 1, "BLOCK_X": 1 + states, "BLOCK_Y": 1, "BLOCK_STEP": 1,
                 "CUSTOM_MAIN": 1}
        self.program = ctx.program(shader, defines | block, "optimizer")
        self.vao = ctx.gl.vertex_array(self.program, [])
        self.fbos = [self._fbo(texs) for texs in self.sets]
        self.turn = 0  # sets[turn] is current
        self.samplers = ["u_param", "u_grad"] + (["u_buf"] if states == 1 else ["u_m", "u_v"])
        self.extra |= {"u_param_width": self.width} if self.buffered else {}
        self.transposes: list[tuple] = []
        # A 2D target is written from a pixel buffer on the GL side (copy_framebuffer into a
        # texture went through 8 bits per channel on llvmpipe).
        self.rebind = None if self.buffered else rebind
        self.staging = None if self.buffered or rebind else \
            ctx.gl.buffer(reserve=self.width * self.height * 16)

    def _image(self, new_image, data: np.ndarray):
        tex = new_image((self.width, self.height))
        tex.write(np.ascontiguousarray(data, np.float32), viewport=(0, 0, self.width, self.height))
        return tex

    def _fbo(self, textures) -> moderngl.Framebuffer:
        fbo = self.ctx.gl.framebuffer(color_attachments=list(textures))
        fbo.viewport = fbo.scissor = (0, 0, self.width, self.height)
        return fbo

    @property
    def current(self):
        return self.sets[self.turn][0]

    @property
    def previous(self):
        """The layout before the last update (zeros before the first)."""
        return self.sets[1 - self.turn][0]

    @property
    def readable(self):
        """Where the passes read the current weights: the buffer target (equal to `current`
        after each publish; a buffer fetch costs a quarter of a 2D sample), else `current`."""
        return self.target if self.buffered else self.current

    def read(self) -> np.ndarray:
        """The current layout, (height, width, 4) float32."""
        raw = self.fbos[self.turn].read(viewport=(0, 0, self.width, self.height),
                                        components=4, dtype="f4")
        return np.frombuffer(raw, np.float32).reshape(self.height, self.width, 4)

    def add_transpose(self, texture, size: tuple[int, int], uniforms: dict) -> None:
        """Also re-lay the weights out into `texture` ((width, height) = `size` corner) with
        filter_transpose.glsl and `uniforms` (u_map, u_kernel) after each update."""
        # From the buffer target where there is one (a quarter of a 2D sample's cost).
        defines = {"CUSTOM_MAIN": 1} | ({"SOURCE_BUFFER": 1} if self.buffered else {})
        program = self.ctx.program("filter_transpose.glsl", defines, "optimizer")
        if self.buffered:
            uniforms = uniforms | {"u_source_width": self.width}
        fbo = self.ctx.gl.framebuffer(color_attachments=[texture])
        fbo.viewport = fbo.scissor = (0, 0, *size)
        self.transposes.append((program, self.ctx.gl.vertex_array(program, []), fbo,
                                uniforms | {"u_source": 0}))

    def update(self, step: int) -> None:
        """One optimiser step into the other set, which becomes current; then publish."""
        units = [self.readable, self.grad] + self.sets[self.turn][1:]
        for unit, tex in enumerate(units):
            tex.use(unit)
        uniforms = self.hyper.uniforms(step) | {s: i for i, s in enumerate(self.samplers)}
        uniforms |= self.extra
        self.ctx.set_uniforms(self.program, {k: v for k, v in uniforms.items()
                                             if k in self.program})
        self.fbos[1 - self.turn].use()
        self.vao.render(moderngl.TRIANGLES, vertices=3)
        self.turn = 1 - self.turn
        self.publish()

    def publish(self) -> None:
        """Copy the current layout into the pipeline's texture (or bind it there) and the
        transposed ones."""
        source = self.fbos[self.turn]
        if self.rebind is not None:
            self.rebind(self.current)
        elif self.buffered:
            source.read_into(self.target.buffer, viewport=(0, 0, self.width, self.height),
                             components=4, dtype="f4")
        else:
            source.read_into(self.staging, viewport=(0, 0, self.width, self.height),
                             components=4, dtype="f4")
            self.target.write(self.staging, viewport=(0, 0, self.width, self.height))
        for program, vao, fbo, uniforms in self.transposes:
            self.readable.use(0)
            self.ctx.set_uniforms(program, uniforms)
            fbo.use()
            vao.render(moderngl.TRIANGLES, vertices=3)

    def release(self) -> None:
        staging = [self.staging] if self.staging is not None else []
        for obj in [self.vao, *self.fbos, *(t for s in self.sets for t in s), *staging]:
            obj.release()
        for _, vao, fbo, _ in self.transposes:
            vao.release()
            fbo.release()
