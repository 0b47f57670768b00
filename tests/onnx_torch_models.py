"""Real CNN architectures in PyTorch, narrow (few channels) but at their usual input sizes,
exported with torch.onnx.export for the ONNX importer tests. Seeded; nothing downloaded."""

import sys
import warnings
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from suite_models import ConvLayer, ResidualBlock, conv_in_relu  # noqa: E402

F = nn.functional


def export(module, example, path, **kwargs):
    """torch.onnx.export (TorchScript exporter, no onnxscript needed) of `module` in eval."""
    module.eval()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(module, (example,), str(path), input_names=["input"],
                          output_names=["output"], dynamo=False, **kwargs)
    return path


def randomize_batchnorm(module, seed=0):
    """Give every BatchNorm non-trivial running statistics (fresh ones are 0 and 1)."""
    gen = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
    return module


def cbr(cin, cout, k=3, s=1, groups=1, act=nn.ReLU6):
    """Conv (no bias) → BatchNorm → activation, "same" padding."""
    return [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout), act()]


# --- MobileNetV2 -----------------------------------------------------------------------------
class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        mid = cin * expand
        self.residual = stride == 1 and cin == cout
        self.body = nn.Sequential(*cbr(cin, mid, 1), *cbr(mid, mid, 3, stride, mid),
                                  nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    """Depthwise separable blocks, ReLU6, residual adds, global pool, linear, softmax."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            *cbr(3, 8, 3, 2), InvertedResidual(8, 8, 1, 1), InvertedResidual(8, 12, 2, 4),
            InvertedResidual(12, 12, 1, 4), InvertedResidual(12, 20, 2, 4),
            InvertedResidual(20, 20, 1, 4), *cbr(20, 48, 1))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(48, classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return torch.softmax(self.classifier(x.view(x.size(0), -1)), dim=1)


# --- fast neural style (Johnson et al.) ----------------------------------------------------------
def fast_style(c=8):
    """The transformer network of the benchmark suite (its blocks), narrow and with two
    residual blocks instead of five: reflect pad, InstanceNorm, nearest upsampling."""
    return nn.Sequential(*conv_in_relu(3, c, 9), *conv_in_relu(c, 2 * c, 3, 2),
                         *conv_in_relu(2 * c, 4 * c, 3, 2),
                         *[ResidualBlock(4 * c) for _ in range(2)],
                         *conv_in_relu(4 * c, 2 * c, 3, upsample=True),
                         *conv_in_relu(2 * c, c, 3, upsample=True), ConvLayer(c, 3, 9))


# --- U-Nets ------------------------------------------------------------------------------------
class Pix2PixUNet(nn.Module):
    """pix2pix generator, 4 levels: strided conv + LeakyReLU down, ConvTranspose + BN + ReLU
    up, Concat skips, Tanh."""

    def __init__(self, c=8):
        super().__init__()
        widths, cin = [c, 2 * c, 4 * c, 4 * c], 3
        self.down = nn.ModuleList()
        for i, w in enumerate(widths):
            norm = [nn.BatchNorm2d(w)] if 0 < i < len(widths) - 1 else []
            self.down.append(nn.Sequential(nn.Conv2d(cin, w, 4, 2, 1, bias=False), *norm,
                                           nn.LeakyReLU(0.2)))
            cin = w
        self.up = nn.ModuleList()
        for w in reversed(widths[:-1]):
            self.up.append(nn.Sequential(nn.ConvTranspose2d(cin, w, 4, 2, 1, bias=False),
                                         nn.BatchNorm2d(w), nn.ReLU()))
            cin = 2 * w
        self.last = nn.Sequential(nn.ConvTranspose2d(cin, 3, 4, 2, 1), nn.Tanh())

    def forward(self, x):
        skips = []
        for layer in self.down:
            x = layer(x)
            skips.append(x)
        for layer, skip in zip(self.up, reversed(skips[:-1])):
            x = torch.cat([layer(x), skip], 1)
        return self.last(x)


class BilinearUNet(nn.Module):
    """U-Net: max-pool down, bilinear upsampling, Concat skips."""

    def __init__(self, c=8):
        super().__init__()
        self.enc = nn.ModuleList([nn.Sequential(*cbr(cin, cout, act=nn.ReLU))
                                  for cin, cout in ((3, c), (c, 2 * c), (2 * c, 4 * c))])
        self.dec = nn.ModuleList([nn.Sequential(*cbr(cin, cout, act=nn.ReLU))
                                  for cin, cout in ((6 * c, 2 * c), (3 * c, c))])
        self.out = nn.Conv2d(c, 2, 1)

    def forward(self, x):
        skips = []
        for i, layer in enumerate(self.enc):
            x = layer(F.max_pool2d(x, 2) if i else x)
            skips.append(x)
        for layer, skip in zip(self.dec, reversed(skips[:-1])):
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            x = layer(torch.cat([x, skip], 1))
        return self.out(x)


# --- generators, super-resolution, ResNet --------------------------------------------------------
def dcgan(nz=16, ngf=8):
    """The DCGAN generator: z (nz, 1, 1) → 64×64 RGB, ConvTranspose + BN + ReLU, Tanh."""
    def up(cin, cout):
        return [nn.ConvTranspose2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU(True)]
    return nn.Sequential(nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
                         nn.BatchNorm2d(ngf * 8), nn.ReLU(True), *up(ngf * 8, ngf * 4),
                         *up(ngf * 4, ngf * 2), *up(ngf * 2, ngf),
                         nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())


def espcn(r=3):
    """Shi et al.'s sub-pixel super-resolution: conv, tanh, conv to r² channels, PixelShuffle."""
    return nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.Tanh(),
                         nn.Conv2d(16, 8, 3, padding=1), nn.Tanh(),
                         nn.Conv2d(8, r * r, 3, padding=1), nn.PixelShuffle(r))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(*cbr(cin, cout, 3, stride, act=nn.ReLU),
                                  nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(cout))
        self.skip = nn.Sequential() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return F.relu(self.body(x) + self.skip(x))


def resnet(c=8, classes=10):
    """ResNet-18-style: 7×7 stem, max pool, basic blocks with 1×1 downsampling, pool, linear."""
    return nn.Sequential(*cbr(3, c, 7, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1),
                         BasicBlock(c, c, 1), BasicBlock(c, 2 * c, 2),
                         BasicBlock(2 * c, 4 * c, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(4 * c, classes))


# name -> (module factory, input shape, export kwargs). MobileNet is exported without
# PyTorch's constant folding, so the importer sees the raw Shape/Gather/... arithmetic and
# unfolded BatchNorms.
MODELS = {
    "mobilenet_v2": (MobileNetV2, (1, 3, 224, 224), {"do_constant_folding": False}),
    "fast_style": (fast_style, (1, 3, 256, 256), {}),
    "pix2pix_unet": (Pix2PixUNet, (1, 3, 256, 256), {}),
    "bilinear_unet": (BilinearUNet, (1, 3, 128, 128), {}),
    "dcgan_generator": (dcgan, (1, 16, 1, 1), {}),
    "espcn": (espcn, (1, 1, 96, 96), {}),
    "resnet": (resnet, (1, 3, 224, 224), {}),
}
