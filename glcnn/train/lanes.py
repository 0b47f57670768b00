"""The passes reading a lane-blocked weight gradient's render targets (conv_grad_weight.glsl
LANE_BLOCK: a texture array) out into the tensors the backward graph names: drawn only where a
gradient is asked for (Trainer._ready); the optimisers read the targets themselves."""

from ..runtime.compiler import Unblock
from ..runtime.gl import layer_framebuffer
from .grad_ops import LANE_UNIFORMS


def lane_pass(ctx, p, compiler) -> Unblock:
    """Point lane-blocked weight-gradient pass `p` (ConvGradWeight.lane_blocked) at the 4 or 8
    layers of a texture array of its own; returns the pass interleaving them into its output
    (conv_grad_weight_lanes.glsl)."""
    size = p.op.lanes_size()
    layers = p.op.lane_layers()
    lanes = compiler.new_image(size, layers, "f4")
    out, p.fbo = p.fbo, layer_framebuffer(ctx, lanes, layers, size)
    program = ctx.program("conv_grad_weight_lanes.glsl", {"CUSTOM_MAIN": 1}, p.op.node.name)
    uniforms = {k: v for k, v in p.op.all_uniforms().items() if k in LANE_UNIFORMS}
    return Unblock(program, ctx.gl.vertex_array(program, []), out, lanes,
                   uniforms | {"u_grad": 0})


def bias_pass(ctx, weight: Unblock, bias_row: tuple[int, int], texture,
              size: tuple[int, int]) -> Unblock:
    """The pass copying the bias gradient that the weight gradient's pass summed into the rows
    of its targets from `bias_row` (ConvGradWeight.sums_bias and bias_row; `weight` is its
    lane_pass) into `texture`, the bias gradient's, whose (width, height) corner `size` it
    holds."""
    program = ctx.program("conv_grad_weight_lanes.glsl", {"CUSTOM_MAIN": 1, "LANE_BIAS": 1},
                          "bias gradient")
    fbo = ctx.gl.framebuffer(color_attachments=[texture])
    fbo.viewport = fbo.scissor = (0, 0, *size)
    return Unblock(program, ctx.gl.vertex_array(program, []), fbo, weight.targets,
                   {"u_bias_row": bias_row, "u_grad": 0})
