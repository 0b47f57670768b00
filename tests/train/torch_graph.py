"""A glcnn Graph of trainable layers run by PyTorch autograd (float64): the reference the
training tests compare gradients, losses and weights with."""

import numpy as np
import torch
import torch.nn.functional as F

ACTIVATIONS = {
    "Relu": lambda z, a: torch.relu(z),
    "LeakyRelu": lambda z, a: F.leaky_relu(z, a.get("alpha", 0.01)),
    "Sigmoid": lambda z, a: torch.sigmoid(z),
    "Tanh": lambda z, a: torch.tanh(z),
    "Elu": lambda z, a: F.elu(z, a.get("alpha", 1.0)),
}
LOSSES = {"mse": F.mse_loss, "l1": F.l1_loss, "bce": F.binary_cross_entropy}


class TorchGraph:
    """`graph`'s weights as leaf tensors ("layer.weight", "layer.bias") and its forward pass."""

    def __init__(self, graph):
        self.graph = graph
        self.params = {}
        for node in graph.nodes:
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
        if node.op == "Add":
            z = x + values[node.inputs[1]]
        else:
            w, b = self.params[f"{node.name}.weight"], self.params.get(f"{node.name}.bias")
            pt, pl, pb, pr = a.get("pads", (0, 0, 0, 0))
            assert (pt, pl) == (pb, pr), "symmetric pads only"
            geometry = dict(stride=tuple(a.get("strides", (1, 1))), padding=(pt, pl),
                            dilation=tuple(a.get("dilations", (1, 1))), groups=a.get("group", 1))
            if node.op == "Conv":
                z = F.conv2d(x, w, b, **geometry)
            else:
                z = F.conv_transpose2d(x, w, b, output_padding=tuple(a.get("output_padding",
                                                                           (0, 0))), **geometry)
            if a.get("residual"):
                z = z + values[node.inputs[1]]
        act = a.get("activation")
        return ACTIVATIONS[act["op"]](z, act) if act else z

    def loss(self, x, target, loss="mse"):
        y, values = self.forward(x)
        return LOSSES[loss](y, torch.as_tensor(np.asarray(target), dtype=torch.float64)), values


def _leaf(array) -> torch.Tensor:
    return torch.tensor(np.asarray(array, np.float64), requires_grad=True)


def relative_error(got, want) -> float:
    """max |got - want| / max |want|: the error of a whole gradient tensor."""
    want = np.asarray(want, np.float64)
    return float(np.abs(np.asarray(got, np.float64) - want).max() / max(np.abs(want).max(), 1e-30))
