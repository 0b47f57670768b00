"""DepthToSpace, "pixel shuffle" (ONNX semantics, NCHW, batch 1).

(C, H, W) -> (C', H·b, W·b) with C' = C / b², and for i, j < b:

    DCR:  y[c, h·b + i, w·b + j] = x[(i·b + j)·C' + c, h, w]     (ONNX default)
    CRD:  y[c, h·b + i, w·b + j] = x[c·b² + i·b + j, h, w]       (PyTorch PixelShuffle)

| attribute | default  | meaning                      |
|-----------|----------|------------------------------|
| blocksize | required | b ≥ 1; b² must divide C      |
| mode      | DCR      | DCR or CRD                   |

No weights. Each output lane gathers its own input channel (4 scalar fetches per pixel).
"""

from ..errors import ShapeError, UnsupportedOpError, quote
from .base import Op, register


@register("DepthToSpace")
class DepthToSpace(Op):
    shader = "depth_to_space.glsl"

    def check(self):
        a = self.node.attrs
        self.mode = a.get("mode", "DCR")
        if self.mode not in ("DCR", "CRD"):
            self.fail(f"mode={quote(self.mode)} unsupported; supported: DCR, CRD",
                      UnsupportedOpError)
        if "blocksize" not in a or int(a["blocksize"]) < 1:
            self.fail(f"blocksize={a.get('blocksize')} must be given and ≥ 1",
                      UnsupportedOpError)
        self.block = int(a["blocksize"])
        if self.in_shapes[0][0] % self.block**2:
            self.fail(f"{self.in_shapes[0][0]} input channels are not a multiple of "
                      f"blocksize² = {self.block**2}", ShapeError)

    def output_shape(self):
        c, h, w = self.in_shapes[0]
        return (c // self.block**2, h * self.block, w * self.block)

    def defines(self):
        return {self.mode: 1}

    def uniforms(self):
        return {"u_block": self.block}
