"""Pad on H and W (ONNX semantics, NCHW, batch 1), negative pads cropping; and on C with a
constant.

Negative pads first crop the input to x' of size (H', W') (as onnxruntime does); the
positive pads (t, l, b, r) then give

    y[c, oy, ox] = x'[c, m(oy − t, H'), m(ox − l, W')]

with m the identity inside [0, n) and, outside it:

| mode     | m(i, n) outside [0, n)                      | notes                         |
|----------|---------------------------------------------|-------------------------------|
| constant | none: y = value                             |                               |
| edge     | clamp(i, 0, n − 1)                          |                               |
| reflect  | −i, or 2(n − 1) − i (the edge not repeated) | pads must be < n (as ORT)     |
| symmetric| −i − 1, or 2n − 1 − i (the edge repeated)    | pads ≤ n; TF's MirrorPad      |
|          |                                             | SYMMETRIC (no ONNX mode)      |
| wrap     | i mod n                                     | any pad                       |

| attribute | default  | meaning                                                       |
|-----------|----------|---------------------------------------------------------------|
| pads      | required | 4D ONNX order [n0, c0, top, left, n1, c1, bottom, right]; the |
|           |          | importer turns the `pads` input of opset ≥ 11 into this       |
| mode      | constant | constant, reflect, symmetric, edge, wrap                      |
| value     | 0.0      | the constant (the importer's name for `constant_value`)       |

Pads on C add channels of the constant (mode constant, C pads ≥ 0: TF graphs pad channels
before a residual add). No weights. Refused: pads on N, negative or non-constant pads on C,
reflect with a pad ≥ the (cropped) size, symmetric with a pad > it.
"""

from ..errors import UnsupportedOpError, quote
from .base import Op, register

MODES = ("constant", "reflect", "symmetric", "edge", "wrap")


@register("Pad")
class Pad(Op):
    shader = "pad.glsl"

    def check(self):
        a = self.node.attrs
        self.mode = a.get("mode", "constant")
        if self.mode not in MODES:
            self.fail(f"mode={quote(self.mode)} unsupported; supported: {MODES}",
                      UnsupportedOpError)
        pads = self.attr_ints("pads", 8, ())
        if pads[0] or pads[4]:
            self.fail(f"pads={list(pads)} pad N; glcnn runs batch 1", UnsupportedOpError)
        self.channels = (pads[1], pads[5])  # (front, back)
        if any(self.channels) and (self.mode != "constant" or min(self.channels) < 0):
            self.fail(f"pads={list(pads)} on C: only added channels of a constant (mode "
                      "'constant', C pads >= 0)", UnsupportedOpError)
        self.begin, self.end = pads[2:4], pads[6:8]  # (top, left), (bottom, right)
        _, h, w = self.in_shapes[0]
        self.extent = tuple(n - max(-b, 0) - max(-e, 0) for n, b, e in
                            zip((h, w), self.begin, self.end))  # after cropping
        if min(self.extent) < 1 or min(self.output_shape()) < 1:
            self.fail(f"pads={list(pads)} leave nothing of {self.in_shapes[0]}")
        if self.mode == "reflect" and any(max(b, e) >= n for b, e, n in
                                          zip(self.begin, self.end, self.extent)):
            self.fail(f"mode='reflect' with pads={list(pads)}: each pad must be smaller than "
                      f"the (cropped) size {self.extent}", UnsupportedOpError)
        if self.mode == "symmetric" and any(max(b, e) > n for b, e, n in
                                            zip(self.begin, self.end, self.extent)):
            self.fail(f"mode='symmetric' with pads={list(pads)}: no pad may exceed the "
                      f"(cropped) size {self.extent}", UnsupportedOpError)

    def output_shape(self):
        return tuple(n + b + e for n, b, e in zip(self.in_shapes[0], (self.channels[0],
                     *self.begin), (self.channels[1], *self.end)))

    def defines(self):
        return {self.mode.upper(): 1} | ({"CHANNEL_PAD": 1} if any(self.channels) else {})

    def uniforms(self):
        (top, left), (h, w) = self.begin, self.extent
        return {"u_pad": (max(left, 0), max(top, 0)), "u_crop": (max(-left, 0), max(-top, 0)),
                "u_extent": (w, h), "u_value": float(self.node.attrs.get("value", 0.0))} | \
            ({"u_channel_pad": self.channels[0]} if any(self.channels) else {})
