"""The standard models of bench/bench_suite.py, in PyTorch (torchvision is not needed).

- `MobileNetV2`: torchvision's architecture at width 1.0, 1000 classes, 224×224 (logits out).
- `TransformerNet`: the fast-neural-style transformer of Johnson et al. as in
  pytorch/examples: 9×9 conv to 32 channels, 3×3 stride-2 convs to 64 and 128, five
  residual blocks, nearest ×2 upsampling + 3×3 conv back to 64 and 32, 9×9 conv to RGB;
  reflection padding, affine InstanceNorm, ReLU.
- `UnetGenerator`: pix2pix's U-Net for 128×128 (unet_128: 7 downsamplings, ngf = 64,
  BatchNorm, no dropout): LeakyReLU(0.2) → 4×4 stride-2 conv [→ BN] down, ReLU → 4×4
  stride-2 ConvTranspose → BN up, Concat skips, Tanh. Activations are not in-place (pix2pix's
  in-place LeakyReLU also rewrites the skip tensor; here the skip is the block's input).
The 32×32 autoencoder and the DCGAN generator are the twins in train/torch_models.py.
"""

import torch
from torch import nn
from torch.nn import functional as F


def seeded(make, seed: int = 0) -> nn.Module:
    """`make()` in eval mode after torch.manual_seed(seed), its BatchNorms given non-trivial
    statistics (bench/tfjs/run_tfjs.py seeds TF.js's copies the same way)."""
    torch.manual_seed(seed)
    model = make()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.normal_(m.bias, 0.0, 0.1)
            m.running_mean.normal_(0.0, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    return model.eval()


# --- MobileNetV2 ----------------------------------------------------------------------------
def conv_bn_relu6(cin, cout, k=3, stride=1, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU6())


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.residual = stride == 1 and cin == cout
        expansion = [conv_bn_relu6(cin, hidden, 1)] if expand != 1 else []
        self.conv = nn.Sequential(*expansion, conv_bn_relu6(hidden, hidden, 3, stride, hidden),
                                  nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2(nn.Module):
    """torchvision.models.mobilenet_v2(width_mult=1.0, num_classes=1000), its init included."""

    # (expansion t, output channels c, repeats n, first stride s), as in the paper's Table 2.
    BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
              (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, classes=1000):
        super().__init__()
        layers, cin = [conv_bn_relu6(3, 32, stride=2)], 32
        for t, c, n, s in self.BLOCKS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        self.features = nn.Sequential(*layers, conv_bn_relu6(cin, 1280, 1))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


# --- fast neural style ---------------------------------------------------------------------------
class ConvLayer(nn.Sequential):
    """[nearest ×2 upsampling →] reflection pad → conv."""

    def __init__(self, cin, cout, k, stride=1, upsample=False):
        up = [nn.Upsample(scale_factor=2, mode="nearest")] if upsample else []
        super().__init__(*up, nn.ReflectionPad2d(k // 2), nn.Conv2d(cin, cout, k, stride))


def conv_in_relu(cin, cout, k, stride=1, upsample=False):
    return [ConvLayer(cin, cout, k, stride, upsample), nn.InstanceNorm2d(cout, affine=True),
            nn.ReLU()]


class ResidualBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(*conv_in_relu(c, c, 3), ConvLayer(c, c, 3),
                                  nn.InstanceNorm2d(c, affine=True))

    def forward(self, x):
        return x + self.body(x)


def transformer_net() -> nn.Sequential:
    """Johnson et al.'s image transformation network (pytorch/examples' TransformerNet)."""
    return nn.Sequential(*conv_in_relu(3, 32, 9), *conv_in_relu(32, 64, 3, 2),
                         *conv_in_relu(64, 128, 3, 2), *[ResidualBlock(128) for _ in range(5)],
                         *conv_in_relu(128, 64, 3, upsample=True),
                         *conv_in_relu(64, 32, 3, upsample=True), ConvLayer(32, 3, 9))


# --- pix2pix U-Net -----------------------------------------------------------------------------
class UnetBlock(nn.Module):
    """pix2pix's UnetSkipConnectionBlock: down, the inner block, up; Concat(x, up) unless
    outermost."""

    def __init__(self, outer, inner, inside=None, cin=None, outermost=False):
        super().__init__()
        self.outermost = outermost
        down = [] if outermost else [nn.LeakyReLU(0.2)]
        down.append(nn.Conv2d(cin or outer, inner, 4, 2, 1, bias=False))
        if inside is not None and not outermost:
            down.append(nn.BatchNorm2d(inner))
        up_in = inner if inside is None else 2 * inner
        up = [nn.ReLU(), nn.ConvTranspose2d(up_in, outer, 4, 2, 1, bias=outermost)]
        up += [nn.Tanh()] if outermost else [nn.BatchNorm2d(outer)]
        self.model = nn.Sequential(*down, *([inside] if inside is not None else []), *up)

    def forward(self, x):
        return self.model(x) if self.outermost else torch.cat([x, self.model(x)], 1)


def unet_128(ngf=64) -> UnetBlock:
    """pix2pix's UnetGenerator(3, 3, num_downs=7, ngf) for 128×128 images."""
    block = UnetBlock(ngf * 8, ngf * 8)
    for _ in range(2):
        block = UnetBlock(ngf * 8, ngf * 8, block)
    for outer in (ngf * 4, ngf * 2, ngf):
        block = UnetBlock(outer, outer * 2, block)
    return UnetBlock(3, ngf, block, cin=3, outermost=True)
