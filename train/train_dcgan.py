"""Train the small DCGAN generator on synthetic "coloured shapes" images that glcnn ships.

The generator is the PyTorch DCGAN tutorial generator (an ``nn.Sequential`` named ``main``,
z (nz, 1, 1) -> (3, 64, 64) in [-1, 1]) at a small width, nz=32 and ngf=16, so that it runs
in real time on a CPU rasteriser. The training images are drawn on the fly in numpy: 64x64
RGB, a plain dark background with 1-3 filled circles, squares and upright triangles of random
size, position and saturated colour, rendered at 2x and area-downsampled (anti-aliased edges).
Nothing is downloaded.

    python train/train_dcgan.py [--steps N] [--out weights/dcgan_shapes.npz] [--seed 0]

Training follows the tutorial (Adam, betas (0.5, 0.999), batch 64, generator lr 2e-4,
non-saturating BCE loss) with three changes that were needed to get shapes out of a ~10 min
single-thread budget: the discriminator has the tutorial's layout but spectral normalisation
instead of BatchNorm (see ``Discriminator``), its learning rate is 4e-4, and the exported
generator is an exponential moving average of G's weights (decay 0.995) whose BatchNorm
statistics are recomputed at the end.

At the end the script exports that generator (eval mode, BatchNorm running statistics) with
``glcnn.save(glcnn.graph.models.dcgan_generator(nz=32, ngf=16, weights=..., fuse=False), out)``,
writes a 4x4 grid of samples to ``demos/data/dcgan_samples.png``, prints simple statistics
comparing generated, real and random-noise images, and checks the exported file against the
torch generator with glcnn's numpy reference evaluator (no GPU needed).
"""

import argparse
import colorsys
import copy
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch_models import DCGANGenerator as Generator

REPO = Path(__file__).resolve().parents[1]
SIZE = 64          # output resolution of the tutorial generator (4 -> 8 -> 16 -> 32 -> 64)
SUPERSAMPLE = 2    # shapes are rasterised at 2x and averaged down 2x2 for soft edges
BACKGROUND = (0.0, 0.15)   # grey level range of the plain dark background, in [0, 1]
RADIUS = (6.0, 15.0)       # shape "radius" (half the side of a square) in output pixels
BG_THRESHOLD = 0.3         # a pixel whose max channel is below this counts as background


# ----------------------------------------------------------------------------- data

def _grid():
    n = SIZE * SUPERSAMPLE
    c = (np.arange(n, dtype=np.float32) + 0.5) / SUPERSAMPLE  # pixel centres, output units
    return c[None, :], c[:, None]  # x (1, n), y (n, 1)


_X, _Y = _grid()


def _shape_mask(kind, x, y, cx, cy, r, angle):
    """Boolean coverage mask at pixel centres x (1, w), y (h, 1) (output-pixel units)."""
    dx, dy = x - cx, y - cy
    if kind == 0:  # circle
        return dx * dx + dy * dy <= r * r
    if kind == 1:  # axis-aligned square of side 2r
        return (np.abs(dx) <= r) & (np.abs(dy) <= r)
    # triangle: equilateral, circumradius 1.2 r, pointing up and tilted by up to +-20 degrees
    R = 1.2 * r
    mask = np.ones((y.shape[0], x.shape[1]), bool)
    for k in range(3):
        # outward normal of the edge opposite vertex k (vertex directions: up +- 120 degrees);
        # the edge lies at the inradius R/2 from the centre
        a = angle + np.pi / 2 + np.pi + 2 * np.pi * k / 3
        nx, ny = np.cos(a), -np.sin(a)  # image y axis points down
        mask &= dx * nx + dy * ny <= R / 2
    return mask


def render_image(rng):
    """One image, float32 (64, 64, 3) in [0, 1]."""
    f = SUPERSAMPLE
    img = np.empty((SIZE * f, SIZE * f, 3), np.float32)
    img[:] = rng.uniform(*BACKGROUND)
    for _ in range(rng.integers(1, 4)):
        kind = rng.integers(3)
        r = rng.uniform(*RADIUS)
        margin = 1.2 * r if kind == 2 else r  # keeps the whole shape inside the image
        cx, cy = rng.uniform(margin, SIZE - margin, size=2)
        angle = rng.uniform(-np.pi / 9, np.pi / 9)
        colour = colorsys.hsv_to_rgb(rng.uniform(), rng.uniform(0.75, 1.0), rng.uniform(0.8, 1.0))
        # rasterise only the shape's bounding box of the supersampled grid
        x0, x1 = int(max(0, (cx - margin - 1) * f)), int(min(SIZE * f, (cx + margin + 1) * f))
        y0, y1 = int(max(0, (cy - margin - 1) * f)), int(min(SIZE * f, (cy + margin + 1) * f))
        mask = _shape_mask(kind, _X[:, x0:x1], _Y[y0:y1], cx, cy, r, angle)
        img[y0:y1, x0:x1][mask] = colour  # later shapes occlude earlier ones
    # area downsample f x f (a sum of strided views; much faster than reshape().mean())
    out = sum(img[i::f, j::f] for i in range(f) for j in range(f))
    return out * np.float32(1 / (f * f))


def sample_batch(rng, batch):
    """A batch of real images as a float32 tensor (B, 3, 64, 64) in [-1, 1]."""
    x = np.stack([render_image(rng) for _ in range(batch)])
    return torch.from_numpy(x * 2 - 1).permute(0, 3, 1, 2).contiguous()


# ----------------------------------------------------------------------------- models

def weights_init(m):
    """The tutorial's initialisation: conv weights N(0, 0.02), BatchNorm gamma N(1, 0.02)."""
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


class Discriminator(nn.Module):
    """The tutorial discriminator's layout (4x4 stride-2 convs, LeakyReLU 0.2); returns logits.

    norm="batch" is the tutorial exactly (bias-free convs + BatchNorm). It does not train on
    this data: with separate real and fake batches, BatchNorm removes whatever the fake batch
    has in common (e.g. its overall brightness), so D tells the batches apart by G's texture
    while G gets almost no gradient towards the data; in our runs D's loss fell to 0.001 and
    G stayed a grey blur. The default norm="spectral" drops BatchNorm, gives the convs biases
    and wraps them in spectral normalisation, which keeps D from saturating.
    """

    def __init__(self, ndf=16, nc=3, norm="spectral"):
        super().__init__()
        chans = [nc, ndf, ndf * 2, ndf * 4, ndf * 8]
        layers = []
        for i in range(4):
            conv = nn.Conv2d(chans[i], chans[i + 1], 4, 2, 1, bias=norm != "batch")
            layers.append(self._init(conv, norm))
            if norm == "batch" and i > 0:
                bn = nn.BatchNorm2d(chans[i + 1])
                weights_init(bn)
                layers.append(bn)
            layers.append(nn.LeakyReLU(0.2, True))
        layers.append(self._init(nn.Conv2d(chans[4], 1, 4, 1, 0, bias=norm != "batch"), norm))
        self.main = nn.Sequential(*layers)

    @staticmethod
    def _init(conv, norm):
        """Tutorial init (N(0, 0.02)), biases 0; done before any spectral-norm wrapping."""
        weights_init(conv)
        if conv.bias is not None:
            nn.init.zeros_(conv.bias)
        return nn.utils.parametrizations.spectral_norm(conv) if norm == "spectral" else conv

    def forward(self, x):
        return self.main(x).view(-1)


# ----------------------------------------------------------------------------- evaluation

def to_unit(x):
    """(B, 3, H, W) tensor in [-1, 1] -> numpy (B, H, W, 3) in [0, 1]."""
    return ((x.detach().cpu().numpy().transpose(0, 2, 3, 1) + 1) / 2).clip(0, 1)


def image_stats(imgs, bins=8):
    """Simple statistics of (B, H, W, 3) images in [0, 1].

    Returns (fraction of background pixels (max channel < BG_THRESHOLD), mean HSV saturation
    of the other pixels, mean absolute difference between horizontally or vertically adjacent
    pixels (flat regions with sharp edges give a small value, noise a large one), normalised
    RGB histogram with bins^3 cells over all pixels).
    """
    mx, mn = imgs.max(-1), imgs.min(-1)
    bg = mx < BG_THRESHOLD
    sat = (mx - mn) / np.maximum(mx, 1e-8)
    fg_sat = float(sat[~bg].mean()) if (~bg).any() else 0.0
    tv = 0.5 * (np.abs(np.diff(imgs, axis=1)).mean() + np.abs(np.diff(imgs, axis=2)).mean())
    idx = np.minimum((imgs * bins).astype(int), bins - 1)
    flat = (idx[..., 0] * bins + idx[..., 1]) * bins + idx[..., 2]
    hist = np.bincount(flat.ravel(), minlength=bins ** 3).astype(np.float64)
    return float(bg.mean()), fg_sat, float(tv), hist / hist.sum()


def quality_report(G, nz, rng, n=256):
    """Print generated vs real vs noise statistics (numpy only; glcnn is not involved)."""
    real = to_unit(sample_batch(rng, n))
    real2 = to_unit(sample_batch(rng, n))
    gen_z = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        gen = to_unit(G(torch.randn(n, nz, 1, 1, generator=gen_z)))
    noise = rng.uniform(0, 1, size=real.shape).astype(np.float32)
    h_real = image_stats(real)[-1]
    print(f"quality, {n} images each (histogram distance: total variation between pooled "
          f"8x8x8-bin RGB histograms and those of {n} other real images; 0 same, 1 disjoint):")
    print(f"  {'':15s} {'bg fraction':>11s} {'fg saturation':>13s} {'neighbour diff':>14s} "
          f"{'hist distance':>13s}")
    rows = {}
    for name, imgs in (("real", real2), ("generated", gen), ("uniform noise", noise)):
        bg, fs, tv, h = image_stats(imgs)
        rows[name] = (bg, fs, tv, 0.5 * float(np.abs(h - h_real).sum()))
        print(f"  {name:15s} {bg:11.3f} {fs:13.3f} {tv:14.4f} {rows[name][3]:13.3f}")
    return rows


def save_grid(G, nz, path, seed=0, rows=4):
    """A rows x rows grid of samples from fixed seeded z, 2 px dark-grey gutters."""
    from PIL import Image

    z = torch.randn(rows * rows, nz, 1, 1, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        imgs = to_unit(G(z))
    pad = 2
    side = rows * SIZE + (rows + 1) * pad
    grid = np.full((side, side, 3), 0.35, np.float32)
    for i, img in enumerate(imgs):
        y, x = divmod(i, rows)
        y0, x0 = pad + y * (SIZE + pad), pad + x * (SIZE + pad)
        grid[y0:y0 + SIZE, x0:x0 + SIZE] = img
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.round(grid * 255).astype(np.uint8)).save(path)


def export(G, nz, ngf, out):
    """Save the generator (eval mode) as a glcnn model file; returns the numpy state dict."""
    import glcnn
    from glcnn.graph import models

    # main.N.weight, main.N.running_mean, ...; glcnn ignores num_batches_tracked anyway
    state = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in G.state_dict().items()
             if not k.endswith("num_batches_tracked")}
    out.parent.mkdir(parents=True, exist_ok=True)
    glcnn.save(models.dcgan_generator(nz=nz, ngf=ngf, weights=state, fuse=False), out)
    return state


def verify_export(G, nz, out, count=4, seed=99):
    """Compare glcnn's float64 reference evaluation of the saved file with torch (eval)."""
    import glcnn
    import glcnn.graph.reference

    graph = glcnn.load_graph(out)
    z = torch.randn(count, nz, 1, 1, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        want = G(z).double().numpy()
    worst = 0.0
    for i in range(count):
        got = glcnn.graph.reference.run(graph, {"z": z[i].numpy()})[graph.outputs[0]]
        assert got.shape == want[i].shape, (got.shape, want[i].shape)
        worst = max(worst, float(np.abs(got - want[i]).max()))
    print(f"glcnn reference vs torch (eval) on {count} z: output {tuple(got.shape)}, "
          f"max abs diff {worst:.2e}")
    return worst


# ----------------------------------------------------------------------------- main

def recalibrate_batchnorm(G, nz, batches=50, batch=64, seed=7):
    """Replace G's BatchNorm running statistics with exact averages over fresh z batches.

    The EMA generator's weights never ran a forward pass during training, so the running
    statistics it inherits from G do not match it; glcnn (and eval mode) use these statistics.
    """
    bns = [m for m in G.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average
    g = torch.Generator().manual_seed(seed)
    G.train()
    with torch.no_grad():
        for _ in range(batches):
            G(torch.randn(batch, nz, 1, 1, generator=g))
    for bn in bns:
        bn.momentum = 0.1
    G.eval()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-4, help="generator learning rate")
    p.add_argument("--lr-d", type=float, default=4e-4, help="discriminator learning rate")
    p.add_argument("--d-norm", choices=["spectral", "batch"], default="spectral",
                   help="discriminator normalisation (batch = the tutorial's; see Discriminator)")
    p.add_argument("--ema", type=float, default=0.995,
                   help="decay of the exported moving average of G's weights (0: export G)")
    p.add_argument("--nz", type=int, default=32)
    p.add_argument("--ngf", type=int, default=16)
    p.add_argument("--ndf", type=int, default=16)
    p.add_argument("--out", type=Path, default=REPO / "weights" / "dcgan_shapes.npz")
    p.add_argument("--samples", type=Path, default=REPO / "demos" / "data" / "dcgan_samples.png")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    torch.set_num_threads(1)  # the machine is shared; one thread also keeps runs reproducible
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    G, D = Generator(args.nz, args.ngf), Discriminator(args.ndf, norm=args.d_norm)
    G.apply(weights_init)
    G_ema = copy.deepcopy(G).requires_grad_(False)
    opt_g = torch.optim.Adam(G.parameters(), lr=args.lr, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=args.lr_d, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    ones, zeros = torch.ones(args.batch), torch.zeros(args.batch)

    t0 = time.time()
    run_d = run_g = None
    for step in range(1, args.steps + 1):
        real = sample_batch(rng, args.batch)
        fake = G(torch.randn(args.batch, args.nz, 1, 1))
        # D: maximise log D(x) + log(1 - D(G(z)))
        loss_d = bce(D(real), ones) + bce(D(fake.detach()), zeros)
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        # G: non-saturating loss, maximise log D(G(z))
        loss_g = bce(D(fake), ones)
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        with torch.no_grad():
            for pe, pg in zip(G_ema.parameters(), G.parameters()):
                pe.lerp_(pg, 1 - args.ema)
        ld, lg = loss_d.item(), loss_g.item()
        run_d = ld if run_d is None else 0.95 * run_d + 0.05 * ld
        run_g = lg if run_g is None else 0.95 * run_g + 0.05 * lg
        if step % 200 == 0 or step == args.steps:
            print(f"step {step:5d}  D loss {run_d:.3f}  G loss {run_g:.3f}  "
                  f"elapsed {time.time() - t0:6.1f}s", flush=True)
    print(f"training took {time.time() - t0:.1f} s for {args.steps} steps "
          f"(final running losses: D {run_d:.3f}, G {run_g:.3f})")

    # Eval mode from here on: BatchNorm uses running statistics, as glcnn does.
    if args.ema > 0:
        G = G_ema
        recalibrate_batchnorm(G, args.nz)
    G.eval()
    quality_report(G, args.nz, np.random.default_rng(args.seed + 1))
    save_grid(G, args.nz, args.samples)
    print(f"saved {args.samples}")
    export(G, args.nz, args.ngf, args.out)
    print(f"saved {args.out} ({args.out.stat().st_size} bytes)")
    worst = verify_export(G, args.nz, args.out)
    if worst >= 1e-4:
        raise SystemExit(f"export check failed: max abs diff {worst:.2e} >= 1e-4")


if __name__ == "__main__":
    main()
