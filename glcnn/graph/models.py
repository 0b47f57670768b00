"""Reference architectures built with the Builder (weights: PyTorch state_dict names).

- `autoencoder`: the 32×32 webcam autoencoder (fully convolutional, any size divisible by 4):
  Conv 4×4 s2 3→64, ReLU, Conv 4×4 s2 64→256, ReLU, ConvTranspose back 256→64→3, Sigmoid.
- `dcgan_generator`: the PyTorch DCGAN tutorial generator, z (nz, 1, 1) → (3, 64, 64):
  ConvTranspose + BatchNorm + ReLU ×4, then ConvTranspose + Tanh. Its module names follow
  the tutorial's `main` Sequential: main.0, main.1, main.3, main.4, ... main.12.
"""

from .builder import Builder
from .graph import Graph
from .passes import optimize


def autoencoder(size=(32, 32), weights=None) -> Graph:
    """The autoencoder for (3, H, W) inputs in [0, 1]; layers enc1, enc2, dec1, dec2.

    Args:
        size: (H, W), or one int for a square input; each divisible by 4.
        weights: a PyTorch state_dict (dict or `.npz` path: "enc1.weight", ...), as for
            `glcnn.load_state_dict`. The shipped weights/autoencoder.npz is a whole native
            model: open it with `glcnn.load`.
    """
    height, width = (size, size) if isinstance(size, int) else size
    b = Builder()
    x = b.input("image", (3, height, width))
    h = b.conv(x, 64, 4, stride=2, padding=1, activation="Relu", name="enc1")
    h = b.conv(h, 256, 4, stride=2, padding=1, activation="Relu", name="enc2")
    h = b.conv_transpose(h, 64, 4, stride=2, padding=1, activation="Relu", name="dec1")
    y = b.conv_transpose(h, 3, 4, stride=2, padding=1, activation="Sigmoid", name="dec2")
    return b.build([y], weights, meta={"input_range": [0, 1], "output_range": [0, 1]})


def dcgan_generator(nz: int = 100, ngf: int = 64, nc: int = 3, weights=None,
                    fuse: bool = True) -> Graph:
    """The DCGAN generator; with `fuse`, BatchNorm and ReLU fold into the transposed convs."""
    b = Builder()
    h = b.input("z", (nz, 1, 1))
    channels = [ngf * 8, ngf * 4, ngf * 2, ngf]
    for i, c in enumerate(channels):
        first = i == 0
        h = b.conv_transpose(h, c, 4, stride=1 if first else 2, padding=0 if first else 1,
                             bias=False, name=f"main.{3 * i}")
        h = b.batchnorm(h, name=f"main.{3 * i + 1}")
        h = b.activation(h, "Relu", name=f"main.{3 * i + 2}")
    h = b.conv_transpose(h, nc, 4, stride=2, padding=1, bias=False, name="main.12")
    y = b.activation(h, "Tanh", name="main.13")
    graph = b.build([y], weights, meta={"output_range": [-1, 1]})
    return optimize(graph) if fuse else graph
