"""Transpose of a (1, C, H, W) tensor: any permutation of the last three axes.

y = x.transpose(perm), perm = [0, p1, p2, p3] with {p1, p2, p3} = {1, 2, 3}: output axis i
is input axis perm[i], so y[o1, o2, o3] = x[i1, i2, i3] with i[perm[k]] = o[k].

| attribute | meaning                                                        |
|-----------|----------------------------------------------------------------|
| perm      | 4 NCHW axes, perm[0] = 0 (the batch axis stays first)          |

The shader gathers from the input atlas: perm [0, 1, 3, 2] (H and W swapped) keeps channels
together and reads one texel per output texel; the others read each lane's channel alone.
"""

from ..errors import UnsupportedOpError
from .base import Op, register

AXES = "CHW"


@register("Transpose")
class Transpose(Op):
    shader = "transpose.glsl"

    def check(self):
        perm = [int(v) for v in self.node.attrs.get("perm", ())]
        if len(perm) != 4 or perm[0] != 0 or sorted(perm) != [0, 1, 2, 3]:
            self.fail(f"perm={perm} must be [0, p1, p2, p3], a permutation of the axes C, H, W "
                      "(1, 2, 3) keeping the batch axis 0 first", UnsupportedOpError)
        self.perm = [p - 1 for p in perm[1:]]  # in (C, H, W) terms

    def output_shape(self):
        return tuple(self.in_shapes[0][p] for p in self.perm)

    def defines(self):
        """IN_C, IN_H, IN_W: which output coordinate (0 = channel, 1 = y, 2 = x) indexes each
        input axis."""
        return {f"IN_{AXES[p]}": k for k, p in enumerate(self.perm)}
