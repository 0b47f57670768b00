"""The plan (glcnn/runtime/plan.py) of a Trainer's backward passes, and how the summing ones
are drawn."""

from ..layout import Atlas
from ..runtime.plan import Plan
from .grad_ops import ConvGradBias, ConvGradWeight, GemmGradWeight, LossSum, rows_chunks

# Input-gradient convs of fewer FLOPs run direct: a blocked pass is two programs to compile
# (the test suite's small convs), and saves little on a small conv.
BLOCKED_MIN_FLOPS = 4_000_000


class BackwardPlan(Plan):
    """The backward passes' plan: every tensor its own texture, weights in a buffer texture
    only where the forward pipeline's are (an input-gradient conv run each step reading its
    layer's filters),
    and only the input-gradient convs of at least BLOCKED_MIN_FLOPS spatially blocked (the
    forward pipeline's strategy)."""

    def _blocking(self):
        flops = {op.node.name: op.flops() for op in self.ops}
        return {name: blocking for name, blocking in super()._blocking().items()
                if flops[name] >= BLOCKED_MIN_FLOPS}

    def buffered(self, op):
        # Not the unfused input-gradient convs drawn on demand: they read the weights of the
        # last step, a 2D texture of its optimiser (Trainer._ready).
        if op.node.name in self.graph.meta.get("on_demand", ()):
            return []
        return super().buffered(op) if op.node.attrs.get("filters_transposed") else []

    def defines(self, op, in_place) -> dict:
        """A weight gradient reads dZ from a buffer texture too where it fits one
        (conv_grad_weight.glsl GRAD_BUFFER; the trainer copies it in before the pass)."""
        defines = super().defines(op, in_place)
        return defines | ({"GRAD_BUFFER": 1} if self.reads_grad_buffer(op) else {})

    def reads_grad_buffer(self, op) -> bool:
        if not isinstance(op, ConvGradWeight):
            return False
        width, height = self.allocated(Atlas.of(self.shapes[op.node.inputs[1]]).size)
        return self.ctx.buffer_fits(width * height)

    def reads_input_buffer(self, op, in_place) -> bool:
        """Weight gradients read the forward input x from a buffer texture (INPUT_BUFFER in
        conv_grad_weight.glsl) where it fits one: 32² autoencoder on llvmpipe, its two
        64↔256-channel weight gradients 43 -> 23 ms each, 6.7 -> 9.6 steps/s at batch 1."""
        if isinstance(op, ConvGradWeight):
            width, height = self.allocated(Atlas.of(self.shapes[op.node.inputs[0]]).size)
            return self.ctx.buffer_fits(width * height)
        return super().reads_input_buffer(op, in_place)


def summed_chunks(op) -> list[tuple[int, int]] | None:
    """Row chunks of a summing pass (the trainer draws it once per chunk, adding into its
    output), None for the others."""
    if isinstance(op, ConvGradWeight | LossSum):
        return rows_chunks(*op.summed())
    if isinstance(op, ConvGradBias):
        _, rows, columns = op.in_shapes[0]
        return rows_chunks(rows, columns)
    if isinstance(op, GemmGradWeight):
        return rows_chunks(1, 1)
    return None
