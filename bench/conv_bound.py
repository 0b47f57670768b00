"""What a blocked conv's texel fetches cost on this GL driver: one conv, six variants.

    python bench/conv_bound.py [--kernel 3] [--size 128] [--channels 64] [--runs 15] [--rounds 3]

Runs bench/conv_bound.glsl (the inner loop of glcnn's 1×8 blocked conv, written out by hand)
as a C → C K×K conv (K = 1 or 3), stride 1, pad K div 2, on a size² float32 input:

- fetched: 4 texelFetch of a float32 buffer texture per tap (glcnn's path);
- uniform: one mat4 uniform for every tap and input slice: the same multiply-adds and input
  fetches with no weight fetches (not a real conv: its time is what the weight fetches leave);
- gathered: the weights from a uniform block bound per output slice (one draw per slice),
  read at a loop-dependent offset (the one other GLSL 330 path that fits a whole filter bank);
- blended: one draw per (output slice, input slice) with that pair's K² taps in a mat4[K²]
  uniform read at constant indices, the draws summed by additive blending into the targets;
- computed inputs: weights fetched as glcnn does, the input computed from the pixel's position
  instead of fetched (another made-up conv: the bound without input fetches);
- 4 px × 2 slices (1×1 only): weights fetched, each fragment 4 pixels of 2 output slices
  instead of 8 pixels of one: half the input fetches, twice the weight fetches.

Each result is checked against numpy (the made-up ones against the conv they compute) before
anything is timed; then --rounds rounds time every variant in turn, each the 20th percentile
of --runs draws between two glFinish. Prints the driver, then per variant the first draw
(compile and JIT), the median of the rounds, GFLOP/s and the ratio to "fetched".
"""

import argparse
import sys
import time
from pathlib import Path

import moderngl
import numpy as np

import glcnn
from glcnn.graph.reference_ops import conv
from glcnn.resources import shader_text
from glcnn.runtime.gl import BufferTexture

SHADER = Path(__file__).with_name("conv_bound.glsl")
VERTEX = "#version 330 core\n" + shader_text("fullscreen.vert")  # glcnn's own triangle
PAIRED = "4 px × 2 slices"  # 1×1 only
# variant -> the define that selects it in conv_bound.glsl
VARIANTS = {"fetched": "WEIGHTS_FETCHED", "uniform": "WEIGHTS_UNIFORM",
            "gathered": "WEIGHTS_GATHERED", "blended": "WEIGHTS_BLENDED",
            "computed inputs": "INPUT_COMPUTED", PAIRED: "PAIRED"}


def variants(kernel: int, slices: int) -> list[str]:
    """The variants that apply to a `kernel`×`kernel` conv of `slices` slices."""
    paired = kernel == 1 and slices % 2 == 0
    return [v for v in VARIANTS if v != PAIRED or paired]


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """float64 conv of x (C, H, W) with w (Co, C, K, K), stride 1, pad K div 2: (Co, H, W)
    (glcnn's numpy reference, glcnn.graph.reference_ops.conv)."""
    pad = w.shape[-1] // 2
    return conv(x, w, pads=(pad, pad, pad, pad))


def blocks(w: np.ndarray) -> np.ndarray:
    """w (Co, C, K, K) as the shader's mat4 columns: [so, c slice, tap, in lane, out lane]."""
    co, c, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(co // 4, 4, c // 4, 4, kh * kw).transpose(0, 2, 4, 3, 1),
                                dtype=np.float32)


class Bound:
    """The conv's input, weights and render targets on one glcnn Context (default: a new one)."""

    def __init__(self, size: int, channels: int, ctx: glcnn.Context | None = None, seed: int = 0,
                 kernel: int = 3):
        if channels % 4 or size % 8 or kernel not in (1, 3):
            sys.exit(f"--channels must be a multiple of 4, --size of 8 and --kernel 1 or 3 (got "
                     f"{channels}, {size}, {kernel})")
        self.ctx = ctx or glcnn.Context()
        gl, rng = self.ctx.gl, np.random.default_rng(seed)
        self.size, self.slices, self.kernel = size, channels // 4, kernel
        self.x = rng.standard_normal((channels, size, size)).astype(np.float32)
        self.w = (rng.standard_normal((channels, channels, kernel, kernel)) / channels).astype(
            np.float32)
        self.m = rng.standard_normal((4, 4)).astype(np.float32)  # the uniform variant's block
        self.u_x = (rng.standard_normal(4) / (channels * size * size)).astype(np.float32)
        texels = self.slices * size * size
        self.input = BufferTexture(self.ctx, (size, self.slices * size), texels)
        self.input.buffer.write(self.x.reshape(self.slices, 4, size, size)
                                .transpose(0, 2, 3, 1).tobytes())
        self.packed = blocks(self.w)
        self.weights = BufferTexture(self.ctx, (4, self.packed.size // 16), self.packed.size // 4)
        self.weights.buffer.write(self.packed.tobytes())
        self.block = gl.buffer(self.packed.tobytes())
        self.targets = [gl.texture((self.slices * size // 8, size), 4, dtype="f4")
                        for _ in range(8)]
        self.fbo = gl.framebuffer(self.targets)

    def program(self, variant: str) -> moderngl.Program:
        """conv_bound.glsl compiled for `variant`, its samplers and uniforms set."""
        s, tw = self.size, self.size // (4 if variant == PAIRED else 8)
        defines = (f"#define K {self.kernel}\n#define H {s}\n#define W {s}\n"
                   f"#define SI {self.slices}\n#define TW {tw}\n"
                   f"#define {VARIANTS[variant]} 1\n")
        source = "#version 330 core\n" + defines + "#line 1\n" + SHADER.read_text()
        program = self.ctx.gl.program(vertex_shader=VERTEX, fragment_shader=source)
        fetched = variant in ("fetched", "computed inputs", PAIRED)
        samplers = ({"u_in": 0} if variant != "computed inputs" else {}) | (
            {"u_w": 1} if fetched else {})
        self.ctx.set_uniforms(program, samplers)  # samplerBuffer: moderngl writes it wrongly
        if variant == "computed inputs":
            program["u_x"] = tuple(self.u_x)
        if variant == "uniform":
            program["u_m"] = tuple(self.m.reshape(-1))  # column-major: m[k] is column k
        elif variant == "gathered":
            program["Weights"].binding = 0
        return program

    def draw(self, variant: str, program: moderngl.Program, vao) -> None:
        """One conv into the 8 targets: one draw, or one per output slice (gathered) or per
        slice pair (blended, summed by additive blending)."""
        self.fbo.use()
        self.input.use(0)
        self.weights.use(1)
        tw, per_slice = self.size // 8, self.packed[0].nbytes
        if variant in ("fetched", "uniform", "computed inputs", PAIRED):
            self.fbo.viewport = (0, 0, self.slices * tw, self.size)
            vao.render(moderngl.TRIANGLES, vertices=3)
            return
        if variant == "blended":
            self.fbo.viewport = (0, 0, self.slices * tw, self.size)
            self.fbo.clear()
            self.ctx.gl.enable(moderngl.BLEND)
            self.ctx.gl.blend_func = moderngl.ONE, moderngl.ONE
            for so in range(self.slices):
                self.fbo.viewport = (so * tw, 0, tw, self.size)
                for c in range(self.slices):
                    program["u_c"].value = c
                    program["u_taps"].write(self.packed[so, c].tobytes())
                    vao.render(moderngl.TRIANGLES, vertices=3)
            self.ctx.gl.disable(moderngl.BLEND)
            return
        for so in range(self.slices):
            self.block.bind_to_uniform_block(0, offset=so * per_slice, size=per_slice)
            self.fbo.viewport = (so * tw, 0, tw, self.size)
            vao.render(moderngl.TRIANGLES, vertices=3)

    def result(self, variant: str) -> np.ndarray:
        """The output (C, H, W) from the 8 targets: target j holds pixels x = 8·bx + j of
        slice so; PAIRED: target 4q + j pixels x = 4·bx + j of slice 2·so + q."""
        s, pixels = self.size, 4 if variant == PAIRED else 8
        parts = [np.frombuffer(t.read(), np.float32).reshape(s, -1, s // pixels, 4)
                 for t in self.targets]
        out = np.stack(parts, axis=3)  # (y, so, bx, target, lane)
        out = out.reshape(s, out.shape[1], s // pixels, 8 // pixels, pixels, 4)
        return out.transpose(1, 3, 5, 0, 2, 4).reshape(self.slices * 4, s, s)

    def expected(self, variant: str) -> np.ndarray:
        if variant == "computed inputs":
            c, s = self.slices * 4, self.size
            scale = 1 + np.arange(self.slices * s * s).reshape(self.slices, 1, s, s)
            x = (scale * self.u_x.reshape(1, 4, 1, 1)).reshape(c, s, s)
            return reference(x, self.w)
        if variant != "uniform":
            return reference(self.x, self.w)
        w = np.zeros_like(self.w)  # every (output slice, input slice, tap) block is m
        for so in range(self.slices):
            for c in range(self.slices):
                w[4 * so:4 * so + 4, 4 * c:4 * c + 4] = self.m.T[:, :, None, None]
        return reference(self.x, w)

    def prepare(self, variant: str) -> tuple[moderngl.Program, moderngl.VertexArray, float]:
        """(program, vertex array, ms of its first draw: compile and JIT) of `variant`."""
        start = time.perf_counter()
        program = self.program(variant)
        vao = self.ctx.gl.vertex_array(program, [])
        self.draw(variant, program, vao)
        self.ctx.gl.finish()
        return program, vao, (time.perf_counter() - start) * 1e3

    def error(self, variant: str) -> float:
        """Largest absolute difference of one draw of `variant` from its numpy conv."""
        program, vao, _ = self.prepare(variant)
        vao.release()
        program.release()
        return float(np.abs(self.result(variant) - self.expected(variant)).max())

    def time(self, variant: str, program, vao, runs: int) -> float:
        """20th percentile ms of `runs` draws, each between two glFinish."""
        times = []
        for _ in range(runs):
            self.ctx.gl.finish()
            start = time.perf_counter()
            self.draw(variant, program, vao)
            self.ctx.gl.finish()
            times.append(time.perf_counter() - start)
        return float(np.percentile(times, 20)) * 1e3

    def release(self) -> None:
        """Free the GL objects (the context stays)."""
        self.ctx.park()  # moderngl rebinds the last used framebuffer: not a released one
        for thing in (self.input, self.weights, self.block, self.fbo, *self.targets):
            thing.release()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernel", type=int, default=3, help="K of the K×K conv: 1 or 3")
    parser.add_argument("--size", type=int, default=128, help="input height and width")
    parser.add_argument("--channels", type=int, default=64, help="input and output channels")
    parser.add_argument("--runs", type=int, default=15, help="timed draws per variant and round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of every variant in turn (the host's drift hits all alike)")
    args = parser.parse_args(argv)
    bound = Bound(args.size, args.channels, kernel=args.kernel)
    flops = 2 * args.kernel ** 2 * args.channels ** 2 * args.size ** 2
    k, c = args.kernel, args.channels
    print(f"{bound.ctx.renderer}, {bound.ctx.version}; {k}×{k} conv {c} → {c} at "
          f"{args.size}², {flops / 1e6:.0f} MFLOP")
    prepared = {}
    for variant in variants(k, c // 4):
        program, vao, first = prepared[variant] = bound.prepare(variant)
        error = np.abs(bound.result(variant) - bound.expected(variant)).max()
        if error > 1e-3:
            sys.exit(f"{variant}: max error {error:.3g} against numpy; not timed")
    times = {variant: [] for variant in prepared}
    for _ in range(args.rounds):
        for variant, (program, vao, _) in prepared.items():
            times[variant].append(bound.time(variant, program, vao, args.runs))
    base = np.median(times["fetched"])
    print("| variant | first draw ms | ms (median of rounds) | GFLOP/s | ÷ fetched |\n"
          "|---|---|---|---|---|")
    for variant, (_, _, first) in prepared.items():
        ms = np.median(times[variant])
        print(f"| {variant} | {first:.0f} | {ms:.2f} | {flops / ms / 1e6:.1f} | "
              f"{ms / base:.2f} |")


if __name__ == "__main__":
    main()
