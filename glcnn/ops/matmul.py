"""MatMul: batched matrix products of two activations, or of an activation and a constant.

    y[b, m, n] = Σ_k a[b, m, k] · B[b, k, n]

| form                    | inputs              | weights      | shader       |
|-------------------------|---------------------|--------------|--------------|
| vector × constant       | a (K, 1, 1)         | B (K, N)     | gemm.glsl    |
| tensor × tensor         | a, b                |              | matmul.glsl  |
| tensor × constant       | a                   | B (K, N)     | matmul.glsl  |

The first form is glcnn's dense layer (glcnn/ops/gemm.py): a vector input, no axes
attributes; the output is (N, 1, 1). The others place each operand's batch, row and column
on glcnn axes (0 = C, 1 = H, 2 = W):

| attribute | default   | meaning                                                          |
|-----------|-----------|------------------------------------------------------------------|
| a_axes    | [0, 1, 2] | glcnn axes of a's [batch, row m, column k]                        |
| b_axes    | [0, 1, 2] | glcnn axes of b's [batch, row k, column n] (tensor b only)        |
| out_axes  | [0, 1, 2] | glcnn axes of y's [batch, row m, column n]                        |

So ONNX (1, h, M, K) = glcnn (h, M, K) takes the defaults; a rank-3 (1, M, K) stored as
(M, 1, K) has a_axes [1, 0, 2], stored channels last (K, 1, M) [1, 2, 0]. The batch sizes
must match or one be 1 (broadcast); a constant B has batch 1. Output shape: batch, M and N
placed by out_axes.

An output texel holds 4 consecutive values of the role (batch, m or n) on the output's
channels and loops over k once: per k each operand gives its 4 lanes as one texel when that
role is on its channels too (attention's batch of heads; a sequence's m or n), as 4 scalar
fetches when it is on another axis, or as one scalar when the operand does not depend on the
role (b for m, a for n) or its batch of 1 broadcasts. Sums run in blocks (64 terms, or a
weight row), each summed on its own. The constant B is packed as Bᵀ by `layout.pack_matrix`
(4 consecutive n per texel). Measured on llvmpipe (2 shared cores, median): attention's
(8, 40, 15)·(8, 15, 40) 1.3 ms; a sequence (40, 1, 120) stored (M, 1, K) times B (120, 360)
7.8 ms, where the same product as a 1×1 Conv on the channels-last (120, 1, 40) takes 1.3 ms
(hence the importer's Conv); with each lane computed on its own and scalar fetches (the first
version of this shader) those were 4.0 and 52 ms.
"""

from ..errors import ShapeError, UnsupportedOpError
from ..layout import matrix_grid, matrix_shape, pack_matrix
from .base import register
from .gemm import Gemm

_DEFAULT = (0, 1, 2)


@register("MatMul")
class MatMul(Gemm):
    """Subclasses Gemm for the vector form; the general form overrides what it declares."""

    def check(self):
        a = self.node.attrs
        tensors = len(self.node.inputs) - bool(a.get("residual"))
        self.vector = (tensors == 1 and self.in_shapes[0][1:] == (1, 1)
                       and not {"a_axes", "b_axes", "out_axes"} & set(a))
        if self.vector:
            self.shader = "gemm.glsl"
            super().check()
            return
        self.shader = "matmul.glsl"
        self.axes = {key: self._permutation(key) for key in ("a_axes", "b_axes", "out_axes")}
        batch_a, m, k = (self.in_shapes[0][i] for i in self.axes["a_axes"])
        if tensors == 2:
            batch_b, kb, n = (self.in_shapes[1][i] for i in self.axes["b_axes"])
            self.matrix = None
        elif tensors == 1:
            b = self.weight("B", (None, None))
            (kb, n), batch_b, self.matrix = b.shape, 1, b.T  # (N, K), a view
        else:
            self.fail(f"reads tensors {self.node.inputs}; expected a and b, or a and a constant "
                      "weight B", UnsupportedOpError)
        if kb != k or batch_b not in (1, batch_a) and batch_a != 1:
            self.fail(f"cannot multiply a (batch {batch_a}, {m}×{k}) by b (batch {batch_b}, "
                      f"{kb}×{n}): inner sizes must match, batches match or be 1", ShapeError)
        self.dims = (batch_a, batch_b, k, max(batch_a, batch_b))
        out = [0, 0, 0]
        for axis, size in zip(self.axes["out_axes"], (self.dims[3], m, n)):
            out[axis] = size
        self.out = tuple(out)

    def _permutation(self, key):
        axes = self.attr_ints(key, 3, _DEFAULT)
        if sorted(axes) != [0, 1, 2]:
            self.fail(f"{key}={list(axes)} must be a permutation of the glcnn axes 0, 1, 2",
                      UnsupportedOpError)
        return axes

    def _lane_modes(self) -> dict:
        """How each operand gives the 4 lanes of an output texel (the role, batch, m or n,
        that sits on the output's channels): "VECTOR" (that role on its channels too: one
        fetch), "GATHER" (on another axis: 4 fetches) or None (a scalar for all 4 lanes: the
        operand does not depend on the role, or its batch of 1 broadcasts)."""
        role = self.axes["out_axes"].index(0)
        batch_a, batch_b = self.dims[:2]
        modes, steps = {}, {}
        for name, uses, key, batch in (("A", (0, 1), "a_axes", batch_a),
                                       ("B", (0, 2), "b_axes", batch_b)):
            axis = None
            if role in uses and not (role == 0 and batch == 1):
                axis = self.axes[key][role]  # a: [batch, m, k], b: [batch, k, n]
            if name == "B" and self.matrix is not None:
                axis = 0 if role == 2 else None  # pack_matrix holds 4 n's per texel
            modes[name] = None if axis is None else "VECTOR" if axis == 0 else "GATHER"
            steps[name] = (0, 0, 0) if axis is None else tuple(int(i == axis) for i in range(3))
        return {"modes": modes, "steps": steps}

    @property
    def samplers(self):
        if self.vector or self.matrix is not None:
            return ("u_input",)
        return ("u_input", "u_other")

    def output_shape(self):
        return super().output_shape() if self.vector else self.out

    def defines(self):
        if self.vector:
            return {}
        modes = self._lane_modes()["modes"]
        out = {f"{k}_{v}": 1 for k, v in modes.items() if v is not None}
        return out | ({"CONSTANT_B": 1} if self.matrix is not None else {})

    def textures(self):
        if self.vector:
            return super().textures()
        return {} if self.matrix is None else {"u_weights": pack_matrix(self.matrix)}

    def texture_shapes(self):
        if self.vector:
            return super().texture_shapes()
        return {} if self.matrix is None else {"u_weights": matrix_shape(*self.matrix.shape)}

    def uniforms(self):
        if self.vector:
            return super().uniforms()
        steps = self._lane_modes()["steps"]
        out = {"u_a_axes": self.axes["a_axes"], "u_b_axes": self.axes["b_axes"],
               "u_out_axes": self.axes["out_axes"], "u_a_step": steps["A"],
               "u_b_step": steps["B"], "u_dims": self.dims[:3] + (0,), "u_block": 64}
        if self.matrix is not None:
            out["u_rows"], out["u_block"] = matrix_grid(*self.matrix.shape)
        return out

    def flops(self):
        if self.vector:
            return super().flops()
        c, h, w = self.out
        return 2 * c * h * w * self.dims[2]
