"""The backward ops: gradients as ordinary glcnn ops (one class + one `.glsl` each), GL-free.

A weight gradient is a "tensor" whose atlas *is* the forward op's weight texture layout, so the
optimiser updates weights texel by texel and the viewer draws gradients as filters:

| op               | inputs                 | output                                            |
|------------------|------------------------|---------------------------------------------------|
| ConvGradWeight   | x (forward input), dZ  | dL/dW as (4, S·kh, cols·kw): layout.pack_filters   |
|                  |                        | of the forward conv (its `conv_weights` view)      |
| ConvGradBias     | dZ                     | dL/dB as (4, 1, S): layout.pack_channels           |
| ActivationGrad   | dY, y (forward output) | dZ = dY · f'(z), f' written in terms of y          |
| LossGrad         | y, target              | dL/dy for a mean-reduced MSE / L1 / BCE            |
| LossSum          | y, target              | (4, 1, 1): the loss (sum of terms · u_scale) in R  |
| PoolGrad         | dY, x (forward input)  | dL/dx of a MaxPool / AveragePool, x's shape        |
| ResizeGrad       | dY, x (forward input)  | dL/dx of a nearest / bilinear Resize (its adjoint) |
| GemmGradWeight   | x, dY                  | dL/dW as layout.pack_matrix of the Gemm's (N, K)   |
| GemmGradInput    | dY, the Gemm's weights | dL/dx = Wᵀ dY, (K, 1, 1)                           |

dZ is the gradient of a conv's output before its fused activation. The gradient of a conv's
input is the forward op of the other kind (Conv <-> ConvTranspose) on dZ with the same weight
array (glcnn/train/backward.py); a Concat's input gradients are Slices of dY, a Flatten's a
Rearrange of it (the forward ops). GemmGradInput reads the Gemm's live weight layout as a tensor
input ("weights:L", the forward pipeline's weight texture), since the optimiser rewrites it.

ConvGradWeight, ConvGradBias and LossSum sum over rows `u_rows` = (first, count) of the positions
summed: the trainer draws them in chunks of at most CHUNK_TERMS terms per fragment, adding the
chunks (and the samples of a batch) by blending; GemmGradWeight is drawn once per sample, added
by blending too.
"""

import numpy as np

from ..errors import UnsupportedOpError, quote
from ..graph.graph import Node
from ..layout import Atlas, channels_shape, filters_shape, matrix_grid, matrix_shape
from ..ops.base import GRAD_ACTIVATIONS, Op, make_op, register

CHUNK_TERMS = 4096  # most terms one fragment sums in one draw
# The uniforms of a lane-blocked weight gradient that say how to read its render targets as
# the filter layout (grad_lanes.glsl; ConvGradWeight.uniforms).
LANE_UNIFORMS = ("u_kernel", "u_groups", "u_pairs")
LOSSES = ("mse", "l1", "bce")


def forward_conv(node: Node, x_shape) -> Op:
    """The forward Conv / ConvTranspose op of a gradient node: its geometry attributes and
    weight W, on input shape `x_shape` (what decides the weight layout)."""
    keys = ("strides", "pads", "dilations", "group", "output_padding")
    attrs = {k: node.attrs[k] for k in keys if k in node.attrs}
    forward = Node(node.attrs["forward"], node.name, ["x"], attrs, {"W": node.weights["W"]})
    return make_op(forward, [x_shape])


def rows_chunks(rows: int, row_terms: int) -> list[tuple[int, int]]:
    """(first, count) row ranges of at most CHUNK_TERMS // row_terms rows (at least one)."""
    step = max(1, CHUNK_TERMS // max(1, row_terms))
    return [(r, min(step, rows - r)) for r in range(0, rows, step)]


@register("ConvGradWeight")
class ConvGradWeight(Op):
    """dL/dW of a Conv or ConvTranspose (attribute forward), in the forward op's filter layout.

    Conv:          dW[o, c, ky, kx] = Σ_{oy,ox} dZ[o, oy, ox] · x[g·Cg + c, oy·s − p + ky·d, ..]
    ConvTranspose: dW[ci, j, ky, kx] = Σ_{iy,ix} x[ci, iy, ix] · dZ[g·Cog + j, iy·s − p + ky·d, ..]

    | attribute                             | meaning                                   |
    |---------------------------------------|-------------------------------------------|
    | forward                               | "Conv" or "ConvTranspose"                 |
    | bias_grad                             | its layer's ConvGradBias, if any          |
    | strides, pads, dilations, group, ...  | the forward op's                          |

    Weights: W, the forward weight (shapes only). Output (4, S·kh, cols·kw): texel
    (c·kw + kx, s·kh + ky) holds output channels 4s..4s+3 of input channel c (pack_filters).
    """

    shader = "conv_grad_weight.glsl"
    samplers = ("u_input", "u_grad")

    def check(self):
        if self.node.attrs.get("forward") not in ("Conv", "ConvTranspose"):
            self.fail(f"forward={quote(self.node.attrs.get('forward'))} must be Conv or "
                      "ConvTranspose", UnsupportedOpError)
        self.fwd = forward_conv(self.node, self.in_shapes[0])
        if self.fwd.output_shape() != self.in_shapes[1]:
            self.fail(f"gradient has shape {self.in_shapes[1]}, the forward output is "
                      f"{self.fwd.output_shape()}")

    def transposed(self) -> bool:
        return self.fwd.op_type == "ConvTranspose"

    def output_shape(self):
        ci, co, cg, cog = self.fwd.channels()
        kh, kw = self.fwd.W.shape[2:]
        height, width, _ = filters_shape(co, kh, kw, self.fwd._columns())
        return 4, height, width

    def lane_blocked(self) -> bool:
        """Whether the pass sums 4 input channels per fragment into 4 render targets
        (conv_grad_weight.glsl LANE_BLOCK): when an x texel's 4 lanes are input channels of one
        group. 32² autoencoder, 64↔256-channel gradients: 20-25 -> 4 ms each (llvmpipe)."""
        ci, co, cg, cog = self.fwd.channels()
        return cg > 1 and (self.fwd.group == 1 or (cg % 4 == 0 and cog % 4 == 0))

    def tap_pairs(self) -> tuple[int, int]:
        """(m, P) of the lane-blocked pass: kernel column kx is paired with kx + m, whose
        strided-tensor column at summed column b is kx's at b + 1 (m · dilation = stride;
        m = kw: no pairs), and P fragments a row cover the kw columns of 4 input channels,
        fragment i computing first column kx(i) = (i div m)·2m + i mod m and kx(i) + m."""
        kw, (sx, dx) = self.fwd.W.shape[3], (self.fwd.strides[1], self.fwd.dilations[1])
        m = sx // dx if sx % dx == 0 and sx // dx < kw else kw
        return m, sum(1 for kx in range(kw) if kx // m % 2 == 0)

    def lane_layers(self) -> int:
        """Render targets of the lane-blocked pass: 4 input channels, for 1 or 2 columns."""
        return 8 if self.tap_pairs()[0] < self.fwd.W.shape[3] else 4

    def sums_bias(self) -> bool:
        """Whether the lane-blocked pass also sums the bias gradient (Σ dZ per output slice, in
        layer 0 of an extra row of fragments, `bias_row`): one pass fewer per layer. Not where a
        chunk of a ConvTranspose's summed x rows would reach more than CHUNK_TERMS dZ terms,
        nor for a layer without a bias (no attribute bias_grad)."""
        if not self.lane_blocked() or not self.node.attrs.get("bias_grad"):
            return False
        if not self.transposed():
            return True
        _, rows, columns = self.in_shapes[1]  # dZ
        sy = self.fwd.strides[0]
        return all((min(rows, (r + n) * sy) - min(rows, r * sy)) * columns <= CHUNK_TERMS
                   for r, n in rows_chunks(*self.summed()))

    def bias_row(self) -> tuple[int, int]:
        """(first row, width) of the fragments past the weight layout's that sum the bias
        gradient, output slice s at (s mod width, first row + s div width)."""
        _, height, width = self.output_shape()
        return height, -(-width // (4 * self.fwd.W.shape[3])) * self.tap_pairs()[1]

    def lanes_size(self) -> tuple[int, int]:
        """(width, height) of the render targets of the lane-blocked pass."""
        height, width = self.bias_row()
        if self.sums_bias():  # the rows of the bias gradient's fragments, one per slice
            slices = -(-self.in_shapes[1][0] // 4)
            return width, height + -(-slices // width)
        return width, height

    def defines(self):
        defines = {"TRANSPOSED": 1} if self.transposed() else {}
        if self.lane_blocked():
            defines |= {"LANE_BLOCK": 1, "CUSTOM_MAIN": 1, "BLOCKED_OUTPUT": 1,
                        "BLOCK_X": self.lane_layers(), "BLOCK_Y": 1, "BLOCK_STEP": 1}
            defines |= {"TAP_PAIRS": 1} if self.lane_layers() == 8 else {}
            defines |= {"BIAS_ROW": 1} if self.sums_bias() else {}
        return defines

    def summed(self) -> tuple[int, int]:
        """(rows, columns) of the positions summed: dZ's (Conv) or x's (ConvTranspose)."""
        return self.in_shapes[0 if self.transposed() else 1][1:]

    def uniforms(self):
        ci, co, cg, cog = self.fwd.channels()
        kh, kw = self.fwd.W.shape[2:]
        same = int(self.fwd.group == 1 or cog % 4 == 0)  # the 4 lanes read one input channel
        return {"u_stride": self.fwd.strides[::-1], "u_dilation": self.fwd.dilations[::-1],
                "u_pad": (self.fwd.pads[1], self.fwd.pads[0]), "u_kernel": (kw, kh),
                "u_groups": (cg, cog, same, 0), "u_rows": (0, self.summed()[0]),
                "u_pairs": self.tap_pairs(), "u_bias_row": self.bias_row()}

    def flops(self):
        return 2 * int(np.prod(self.fwd.W.shape)) * int(np.prod(self.summed()))


@register("ConvGradBias")
class ConvGradBias(Op):
    """dL/dB[o] = Σ_{y,x} dZ[o, y, x], laid out as layout.pack_channels: output (4, 1, S).

    No attributes, no weights.
    """

    shader = "conv_grad_bias.glsl"
    samplers = ("u_grad",)

    def output_shape(self):
        return 4, 1, channels_shape(self.in_shapes[0][0])[1]

    def uniforms(self):
        return {"u_rows": (0, self.in_shapes[0][1])}


@register("ActivationGrad")
class ActivationGrad(Op):
    """dZ = dY · f'(z) of an activation y = f(z), from its output y:

    | act (op)  | f'                 |
    |-----------|--------------------|
    | Relu      | y > 0              |
    | LeakyRelu | y > 0 ? 1 : alpha  |
    | Sigmoid   | y (1 − y)          |
    | Tanh      | 1 − y²             |
    | Elu       | y > 0 ? 1 : y + alpha |

    Attribute act: {"op": ..., "alpha": ...} (alpha > 0). Inputs dY, y of one shape.
    """

    shader = "activation_grad.glsl"
    samplers = ("u_grad", "u_input")

    def check(self):
        act = self.node.attrs.get("act")
        if not isinstance(act, dict) or act.get("op") not in GRAD_ACTIVATIONS:
            self.fail(f"no backward pass for activation {quote(act)}; supported: "
                      f"{', '.join(GRAD_ACTIVATIONS)}", UnsupportedOpError)
        self.check_grad_alpha()
        if self.in_shapes[0] != self.in_shapes[1]:
            self.fail(f"gradient {self.in_shapes[0]} and output {self.in_shapes[1]} differ")

    def defines(self):
        return {"GRAD_" + self.node.attrs["act"]["op"].upper(): 1}

    def uniforms(self):
        return {"u_grad_alpha": self.grad_alpha() or 0.0}


class _LossBase(Op):
    samplers = ("u_input", "u_target")

    def check(self):
        if self.node.attrs.get("loss") not in LOSSES:
            self.fail(f"loss {quote(self.node.attrs.get('loss'))} unknown; expected one of "
                      f"{', '.join(LOSSES)}", UnsupportedOpError)
        if self.in_shapes[0] != self.in_shapes[1]:
            self.fail(f"output {self.in_shapes[0]} and target {self.in_shapes[1]} differ")

    def defines(self):
        return {"LOSS_" + self.node.attrs["loss"].upper(): 1}

    def scale(self) -> float:
        """1 / (samples · elements): the mean over a batch of `samples` (attribute)."""
        return 1.0 / (int(self.node.attrs.get("samples", 1)) * int(np.prod(self.in_shapes[0])))


@register("LossGrad")
class LossGrad(_LossBase):
    """dL/dy of a mean-reduced loss, PyTorch's: MSE 2(y − t)·k, L1 sign(y − t)·k, BCE
    (y − t) / max(y(1 − y), 1e-12)·k, with k = 1 / (samples · C·H·W).

    Attributes: loss ("mse" | "l1" | "bce"), samples (batch size, default 1).
    """

    shader = "loss_grad.glsl"

    def uniforms(self):
        return {"u_scale": self.scale()}


@register("LossSum")
class LossSum(_LossBase):
    """The loss of one sample as its share of the batch mean, Σ terms · k (see LossGrad), in R
    of a one-texel (4, 1, 1) output; BCE clamps its logs at −100 as PyTorch does.

    Attributes: as LossGrad.
    """

    shader = "loss_sum.glsl"

    def output_shape(self):
        return 4, 1, 1

    def summed(self) -> tuple[int, int]:
        """(rows, columns) of texels summed: the whole atlas of y."""
        width, height = Atlas.of(self.in_shapes[0]).size
        return height, width

    def uniforms(self):
        return {"u_scale": self.scale(), "u_rows": (0, self.summed()[0])}


def forward_op(node: Node, x_shape) -> Op:
    """The forward op (attribute forward: its type) of a gradient node on input `x_shape`:
    the node's other attributes and weights are the forward op's."""
    attrs = {k: v for k, v in node.attrs.items() if k != "forward"}
    return make_op(Node(node.attrs["forward"], node.name, ["x"], attrs, dict(node.weights)),
                   [x_shape])


class _InputGrad(Op):
    """dL/dx of a forward op without weights, from dY and x (whose shape decides the op's)."""

    samplers = ("u_grad", "u_input")
    forwards: tuple[str, ...] = ()

    def check(self):
        if self.node.attrs.get("forward") not in self.forwards:
            self.fail(f"forward={quote(self.node.attrs.get('forward'))} must be one of "
                      f"{', '.join(self.forwards)}", UnsupportedOpError)
        self.fwd = forward_op(self.node, self.in_shapes[1])
        if self.fwd.output_shape() != self.in_shapes[0]:
            self.fail(f"gradient has shape {self.in_shapes[0]}, the forward output is "
                      f"{self.fwd.output_shape()}")

    def output_shape(self):
        return self.in_shapes[1]


@register("PoolGrad")
class PoolGrad(_InputGrad):
    """dL/dx of a MaxPool or AveragePool (attribute forward; the others are the forward op's):

        dx[c, i] = Σ over outputs o and taps k with o·s − p + k·d = i of dY[c, o] · w(c, o, k)

    MaxPool: w = 1 if k is the window's first maximal tap (PyTorch's tie rule), else 0.
    AveragePool: w = 1 / (the taps of window o the forward divides by: count_include_pad).

    Inputs dY, x (the forward input). No weights. Output: x's shape.
    """

    shader = "pool_grad.glsl"
    forwards = ("MaxPool", "AveragePool")

    def defines(self):
        return self.fwd.defines()

    def uniforms(self):
        return self.fwd.uniforms()

    def flops(self):
        return self.fwd.flops() * (int(np.prod(self.fwd.kernel)) if self.fwd.reduction == "MAX"
                                   else 1)


@register("ResizeGrad")
class ResizeGrad(_InputGrad):
    """dL/dx of a nearest or bilinear Resize (attribute forward; the others the forward op's):
    its adjoint, dx[c, i, j] = Σ_{o, q} a_y(o, i) · a_x(q, j) · dY[c, o, q], a(o, i) the weight
    output o gives input i (nearest: 1 at its tap; linear: 1 − t and t at taps i0, i1).

    Inputs dY, x (the forward input). Weights: u_coords, the forward table (glcnn/ops/resize.py);
    u_span: texel (i, 0) for input column i, (i, 1) for input row i: (first output reading it,
    how many outputs from there may read it, 0, 0).
    """

    shader = "resize_grad.glsl"
    forwards = ("Resize", "Upsample")

    def defines(self):
        return {self.fwd.mode.upper(): 1}  # the forward's, but for its whole-factor form

    def textures(self):
        coords = self.fwd.textures()["u_coords"]
        _, h, w = self.in_shapes[1]
        span = np.zeros((2, max(h, w), 4), np.float32)
        for row, n_in, n_out in ((0, w, self.fwd.size[1]), (1, h, self.fwd.size[0])):
            taps = coords[row, :n_out, :2].astype(np.int64)  # (i0, i1) of each output
            for i in range(n_in):
                readers = np.flatnonzero((taps == i).any(axis=1))
                if readers.size:
                    span[row, i, :2] = readers[0], readers[-1] + 1 - readers[0]
        return {"u_coords": coords, "u_span": span}

    def uniforms(self):
        span = self.textures()["u_span"]
        return {"u_reach": (int(span[0, :, 1].max()), int(span[1, :, 1].max()))}

    def flops(self):
        return self.fwd.flops()


def check_gemm(op: Op) -> None:
    """Training needs Gemm's alpha = beta = 1 (the layout holds B', the bias C: the optimiser
    then updates PyTorch's weight and bias) and a (K, 1, 1) input."""
    a = op.node.attrs
    if op.op_type != "Gemm" or float(a.get("alpha", 1.0)) != 1 or float(a.get("beta", 1.0)) != 1:
        op.fail(f"training needs Gemm with alpha = beta = 1 (has alpha={a.get('alpha', 1.0)}, "
                f"beta={a.get('beta', 1.0)})", UnsupportedOpError)


@register("GemmGradWeight")
class GemmGradWeight(Op):
    """dL/dW of a Gemm y = W x + b (W: its (N, K) matrix B'), dW[n, k] = dY[n] · x[k], in the
    Gemm's weight layout (layout.pack_matrix): output (4, S·R, row), texel (k mod row,
    s·R + k div row) = dW[4s .. 4s+3, k].

    Inputs x (K, 1, 1), dY (N, 1, 1). Weights: B (and transB), the forward Gemm's (shapes only).
    """

    shader = "gemm_grad_weight.glsl"
    samplers = ("u_input", "u_grad")

    def check(self):
        self.fwd = forward_op(self.node, self.in_shapes[0])
        check_gemm(self.fwd)
        if self.fwd.output_shape() != self.in_shapes[1]:
            self.fail(f"gradient has shape {self.in_shapes[1]}, the Gemm's output is "
                      f"{self.fwd.output_shape()}")

    def output_shape(self):
        height, width, _ = matrix_shape(*self.fwd.matrix.shape)
        return 4, height, width

    def uniforms(self):
        rows, row = matrix_grid(*self.fwd.matrix.shape)
        return {"u_row": row, "u_slice_rows": rows}

    def flops(self):
        return int(self.fwd.matrix.size)


@register("GemmGradInput")
class GemmGradInput(Op):
    """dL/dx of a Gemm y = W x + b: dx[k] = Σ_n W[n, k] · dY[n], output (K, 1, 1).

    Inputs dY (N, 1, 1) and the Gemm's weight layout (layout.pack_matrix of W, as a (4, S·R,
    row) tensor: the texture the optimiser writes). Weights: B (and transB), the forward Gemm's
    (its shapes; the numpy reference reads W from them).
    """

    shader = "gemm_grad_input.glsl"
    samplers = ("u_grad", "u_weights")

    def check(self):
        k = self.weight_shape()[1]
        self.fwd = forward_op(self.node, (k, 1, 1))
        check_gemm(self.fwd)
        height, width, _ = matrix_shape(*self.fwd.matrix.shape)
        if self.in_shapes[0] != self.fwd.output_shape() or self.in_shapes[1] != (4, height, width):
            self.fail(f"inputs {self.in_shapes}: expected the gradient {self.fwd.output_shape()} "
                      f"and the weight layout {(4, height, width)}")

    def weight_shape(self) -> tuple[int, int]:
        """(N, K) of the Gemm's matrix."""
        b = self.weight("B", (None, None))
        return b.shape if int(self.node.attrs.get("transB", 0)) else b.shape[::-1]

    def output_shape(self):
        return self.fwd.in_shapes[0]

    def uniforms(self):
        rows, row = matrix_grid(*self.fwd.matrix.shape)
        return {"u_row": row, "u_slice_rows": rows}

    def flops(self):
        return 2 * int(self.fwd.matrix.size)
