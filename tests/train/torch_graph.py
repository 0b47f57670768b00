"""A glcnn Graph of trainable layers run by PyTorch autograd (float64): the reference the
training tests compare gradients, losses and weights with."""

import numpy as np
import torch
import torch.nn.functional as F

from glcnn.ops.resize import unfused_resize

ACTIVATIONS = {
    "Relu": lambda z, a: torch.relu(z),
    "LeakyRelu": lambda z, a: F.leaky_relu(z, a.get("alpha", 0.01)),
    "Sigmoid": lambda z, a: torch.sigmoid(z),
    "Tanh": lambda z, a: torch.tanh(z),
    "Elu": lambda z, a: F.elu(z, a.get("alpha", 1.0)),
}
LOSSES = {"mse": F.mse_loss, "l1": F.l1_loss, "bce": F.binary_cross_entropy}


def _symmetric(a) -> tuple[int, int]:
    pt, pl, pb, pr = a.get("pads", (0, 0, 0, 0))
    assert (pt, pl) == (pb, pr), "symmetric pads only"
    return pt, pl


def _pool(graph, node, values):
    a, x = node.attrs, values[node.inputs[0]]
    geometry = dict(kernel_size=tuple(a["kernel_shape"]), stride=tuple(a.get("strides", (1, 1))),
                    padding=_symmetric(a), ceil_mode=bool(a.get("ceil_mode", 0)))
    if node.op == "MaxPool":
        return F.max_pool2d(x, dilation=tuple(a.get("dilations", (1, 1))), **geometry)
    return F.avg_pool2d(x, count_include_pad=bool(a.get("count_include_pad", 0)), **geometry)


def _resize(graph, node, values):
    """F.interpolate: nearest (ONNX asymmetric + floor), bilinear (align_corners or
    pytorch_half_pixel), to the size the node's `sizes` or `scales` give."""
    a, x = node.attrs, values[node.inputs[0]]
    size = [int(v) for v in a["sizes"][-2:]] if "sizes" in a else \
        [int(n * float(s)) for n, s in zip(x.shape[2:], a["scales"][-2:])]
    upsample = node.op == "Upsample"  # ONNX's defaults: asymmetric, floor
    coordinates = a.get("coordinate_transformation_mode", "asymmetric" if upsample else None)
    if a.get("mode", "nearest") == "nearest":
        assert coordinates == "asymmetric" and a.get("nearest_mode", "floor" if upsample
                                                     else None) == "floor"
        return F.interpolate(x, size=size, mode="nearest")
    assert coordinates in ("align_corners", "pytorch_half_pixel")
    return F.interpolate(x, size=size, mode="bilinear",
                         align_corners=coordinates == "align_corners")


def _concat(graph, node, values):
    count = len(node.inputs) - bool(node.attrs.get("residual"))
    return torch.cat([values[t] for t in node.inputs[:count]], dim=int(node.attrs.get("axis", 1)))


def _flatten(graph, node, values):
    x = values[node.inputs[0]]
    keep = node.op == "Reshape" and list(node.attrs["shape"])[1:] == list(x.shape[1:])
    return x if keep else x.reshape(len(x), -1, 1, 1)


SHAPING = {"MaxPool": _pool, "AveragePool": _pool, "Resize": _resize, "Upsample": _resize,
           "Concat": _concat,
           "Flatten": _flatten, "Reshape": _flatten, "Gemm": lambda g, n, v: g._gemm(n, v)}


class TorchGraph:
    """`graph`'s weights as leaf tensors ("layer.weight", "layer.bias") and its forward pass."""

    def __init__(self, graph):
        self.graph = graph
        self.params = {}
        for node in graph.nodes:
            if node.op == "Gemm":  # nn.Linear's weight (N, K) and bias (N,)
                b = np.asarray(node.weights["B"], np.float64)
                w = b if node.attrs.get("transB", 0) else b.T
                self.params[f"{node.name}.weight"] = _leaf(w)
                if "C" in node.weights:
                    c = np.asarray(node.weights["C"], np.float64).reshape(-1)
                    self.params[f"{node.name}.bias"] = _leaf(np.broadcast_to(c, w.shape[:1]))
                continue
            if "W" in node.weights:
                self.params[f"{node.name}.weight"] = _leaf(node.weights["W"])
            if "B" in node.weights:
                self.params[f"{node.name}.bias"] = _leaf(node.weights["B"])

    def forward(self, x) -> tuple[torch.Tensor, dict]:
        """The output for batch `x` (N, C, H, W), and every tensor (grads retained)."""
        values = {name: torch.as_tensor(np.asarray(x), dtype=torch.float64)
                  for name in self.graph.inputs}
        for node in self.graph.nodes:
            values[node.name] = self._node(node, values)
            values[node.name].retain_grad()
        return values[self.graph.outputs[0]], values

    def _node(self, node, values):
        a, x = node.attrs, values[node.inputs[0]]
        if node.op in ACTIVATIONS:
            return ACTIVATIONS[node.op](x, a)
        if node.op == "Add" and a.get("upsample"):  # glcnn.graph.fuse_resize: Resize, then Add
            resize = unfused_resize(a["upsample"], "upsample", node.inputs[1])
            z = x + _resize(self, resize, values)
        elif node.op == "Add":
            z = x + values[node.inputs[1]]
        elif node.op in SHAPING:
            z = SHAPING[node.op](self, node, values)
            if a.get("residual") and not node.residual_after_activation:
                z = z + values[node.inputs[-1]]
        else:
            w, b = self.params[f"{node.name}.weight"], self.params.get(f"{node.name}.bias")
            pt, pl, pb, pr = a.get("pads", (0, 0, 0, 0))
            assert (pt, pl) == (pb, pr), "symmetric pads only"
            geometry = dict(stride=tuple(a.get("strides", (1, 1))), padding=(pt, pl),
                            dilation=tuple(a.get("dilations", (1, 1))), groups=a.get("group", 1))
            if a.get("input_upsample"):  # glcnn.graph.fuse_resize: Resize, then this Conv;
                name = f"{node.name}/input_upsample"  # its tensor is the Trainer's (unfused)
                resize = unfused_resize(a["input_upsample"], name, node.inputs[0])
                x = values[name] = _resize(self, resize, values)
                x.retain_grad()
            if node.op == "Conv":
                z = F.conv2d(x, w, b, **geometry)
            else:
                z = F.conv_transpose2d(x, w, b, output_padding=tuple(a.get("output_padding",
                                                                           (0, 0))), **geometry)
            if a.get("residual") and not node.residual_after_activation:
                z = z + values[node.inputs[-1]]
        act = a.get("activation")
        y = ACTIVATIONS[act["op"]](z, act) if act else z
        return y + values[node.inputs[-1]] if node.residual_after_activation else y

    def _gemm(self, node, values):
        x = values[node.inputs[0]]
        w, b = self.params[f"{node.name}.weight"], self.params.get(f"{node.name}.bias")
        return F.linear(x.reshape(len(x), -1), w, b).reshape(len(x), -1, 1, 1)

    def loss(self, x, target, loss="mse"):
        y, values = self.forward(x)
        return LOSSES[loss](y, torch.as_tensor(np.asarray(target), dtype=torch.float64)), values


def _leaf(array) -> torch.Tensor:
    return torch.tensor(np.asarray(array, np.float64), requires_grad=True)


def relative_error(got, want) -> float:
    """max |got - want| / max |want|: the error of a whole gradient tensor."""
    want = np.asarray(want, np.float64)
    return float(np.abs(np.asarray(got, np.float64) - want).max() / max(np.abs(want).max(), 1e-30))
