"""Gemm and MatMul of a vector by a constant matrix (fully connected layers). MatMul's other
forms (two activations, any axes) are glcnn/ops/matmul.py's, which uses this class for this one.

Gemm:   y[n] = α · Σ_k x[k] · B'[k, n] + β · C[n],  B' = B, or Bᵀ with transB = 1
MatMul: y[n] = Σ_k x[k] · B[k, n]

The input x is glcnn's vector (K, 1, 1), i.e. ONNX's A of shape (1, K) (batch 1); the
output is (N, 1, 1). Flatten a (C, H, W) tensor first (glcnn/ops/flatten.py).

| attribute | default | meaning (Gemm only)                          |
|-----------|---------|----------------------------------------------|
| alpha     | 1.0     | scales x·B'                                  |
| beta      | 1.0     | scales C                                     |
| transA    | 0       | must be 0                                    |
| transB    | 0       | 1: B is stored (N, K)                        |

Weights: B (K, N), or (N, K) with transB = 1; C (Gemm, optional): (), (1,), (N,), (1, 1)
or (1, N), broadcast over N. α·B' is packed by `layout.pack_matrix` (rows wrapped into a
near-square texture: K = 50k fits) and β·C by `pack_channels`, both in float64 first.
One output texel (4 outputs) takes a vec4 of x per step into a mat4 of weights.
Limits: N ≤ 4 × GL_MAX_TEXTURE_SIZE (the bias is one texel row); larger textures raise
TextureSizeError naming the layer when the Pipeline is built.
"""

import numpy as np

from ..errors import UnsupportedOpError, WeightError
from ..layout import channels_shape, matrix_grid, matrix_shape, pack_channels, pack_matrix
from .base import Op, register


@register("Gemm")
class Gemm(Op):
    shader = "gemm.glsl"

    def check(self):
        a = self.node.attrs if self.node.op == "Gemm" else {}
        if int(a.get("transA", 0)):
            self.fail("transA=1 unsupported; the input is a row vector", UnsupportedOpError)
        if len(self.node.inputs) != 1 + bool(self.node.attrs.get("residual")):
            self.fail(f"reads tensors {self.node.inputs}; only the first may be a tensor, "
                      "B and C must be constant weights", UnsupportedOpError)
        k = self.in_shapes[0][0]
        if self.in_shapes[0] != (k, 1, 1):
            self.fail(f"input has shape {self.in_shapes[0]}; expected a vector (K, 1, 1) "
                      "(insert a Flatten)")
        trans, alpha = int(a.get("transB", 0)), float(a.get("alpha", 1.0))
        b = self.weight("B", (None, None))
        w = b if trans else b.T  # (N, K), a view: VGG's fc6 holds 100M weights
        if w.shape[1] != k:
            self.fail(f"input has {k} features; weight B of shape {b.shape} (transB={trans}) "
                      f"expects {w.shape[1]}")
        self.matrix = w if alpha == 1 else (alpha * w.astype(np.float64)).astype(np.float32)
        self.bias = float(a.get("beta", 1.0)) * self._bias(w.shape[0])

    def _bias(self, n):
        if "C" not in self.node.weights:
            return np.zeros(n)
        c = self.weight("C")
        if c.size not in (1, n) or c.ndim > 2 or (c.ndim == 2 and c.shape[0] != 1):
            self.fail(f"bias C has shape {c.shape}; expected (), (1,), ({n},) or (1, {n})",
                      WeightError)
        return np.broadcast_to(c.reshape(-1).astype(np.float64), (n,))

    def output_shape(self):
        return self.matrix.shape[0], 1, 1

    def textures(self):
        return {"u_weights": pack_matrix(self.matrix),
                "u_params": pack_channels(self.bias.astype(np.float32))}

    def texture_shapes(self):
        return {"u_weights": matrix_shape(*self.matrix.shape),
                "u_params": channels_shape(self.matrix.shape[0])}

    def uniforms(self):
        rows, row = matrix_grid(*self.matrix.shape)
        return {"u_row": row, "u_rows": rows}

    def flops(self):
        return 2 * int(self.matrix.size)
