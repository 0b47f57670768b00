"""The PyTorch twins of glcnn.graph.models, with the same state_dict names (torch only).

One home for the training scripts, the parity tests and the benchmark.
"""

import torch
import torch.nn.functional as F
from torch import nn


class Autoencoder(nn.Module):
    """glcnn.graph.models.autoencoder: 3 -> 64 -> 256 channels at 1/4 resolution and back to 3."""

    def __init__(self):
        super().__init__()
        self.enc1 = nn.Conv2d(3, 64, 4, stride=2, padding=1)
        self.enc2 = nn.Conv2d(64, 256, 4, stride=2, padding=1)
        self.dec1 = nn.ConvTranspose2d(256, 64, 4, stride=2, padding=1)
        self.dec2 = nn.ConvTranspose2d(64, 3, 4, stride=2, padding=1)

    def forward(self, x):
        x = F.relu(self.enc1(x))
        x = F.relu(self.enc2(x))
        x = F.relu(self.dec1(x))
        return torch.sigmoid(self.dec2(x))


class DCGANGenerator(nn.Module):
    """The PyTorch DCGAN tutorial generator; module names main.0 ... main.13 as in
    glcnn.graph.models.dcgan_generator."""

    def __init__(self, nz=100, ngf=64, nc=3):
        super().__init__()
        chans, layers = [nz, ngf * 8, ngf * 4, ngf * 2, ngf], []
        for i in range(4):
            stride, pad = (1, 0) if i == 0 else (2, 1)
            layers += [nn.ConvTranspose2d(chans[i], chans[i + 1], 4, stride, pad, bias=False),
                       nn.BatchNorm2d(chans[i + 1]), nn.ReLU(True)]
        layers += [nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh()]
        self.main = nn.Sequential(*layers)

    def forward(self, z):
        return self.main(z)
