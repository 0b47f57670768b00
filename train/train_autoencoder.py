"""Train the small convolutional autoencoder whose weights glcnn ships.

The model is fully convolutional (two stride-2 convs down, two stride-2 transposed convs up),
so it is trained on 32x32 patches and then applied to whole images of any size that is a
multiple of 4. Training data are the RGB photos bundled in the scikit-image wheel (no
download); ``coffee`` is held out for evaluation and for the demo images.

    python train/train_autoencoder.py [--steps N] [--out weights/autoencoder.npz] [--seed 0]
"""

import argparse
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch_models import Autoencoder

REPO = Path(__file__).resolve().parents[1]
# Natural RGB photos that ship inside the scikit-image wheel (no pooch download needed).
# ``cat`` is an alias of ``chelsea`` and ``colorwheel`` is synthetic, so both are left out.
TRAIN_IMAGES = [
    "astronaut",
    "chelsea",
    "rocket",
    "immunohistochemistry",
    "hubble_deep_field",
    "retina",
    "stereo_motorcycle",
]
HELDOUT_IMAGE = "coffee"
PATCH = 32




def load_image(name):
    """Return a skimage.data photo as float32 HxWx3 in [0, 1]."""
    import skimage.data  # imported here so that importing Autoencoder needs only torch

    img = getattr(skimage.data, name)()
    if isinstance(img, tuple):  # stereo_motorcycle returns (left, right, disparity)
        img = img[0]
    return img[..., :3].astype(np.float32) / 255.0


def area_downscale(img, f):
    """Average f x f blocks (area resampling), cropping the remainder."""
    h, w = img.shape[0] // f * f, img.shape[1] // f * f
    return img[:h, :w].reshape(h // f, f, w // f, f, 3).mean(axis=(1, 3))


def sample_batch(pyramid, rng, batch):
    """Random 32x32 crops from random images at random scale (1, 1/2, 1/4), random h-flips."""
    out = np.empty((batch, PATCH, PATCH, 3), np.float32)
    for i in range(batch):
        img = pyramid[rng.integers(len(pyramid))][rng.integers(3)]
        y = rng.integers(img.shape[0] - PATCH + 1)
        x = rng.integers(img.shape[1] - PATCH + 1)
        patch = img[y : y + PATCH, x : x + PATCH]
        out[i] = patch[:, ::-1] if rng.random() < 0.5 else patch
    return torch.from_numpy(out).permute(0, 3, 1, 2).contiguous()


def psnr(a, b):
    return float(10 * torch.log10(1.0 / F.mse_loss(a, b)))


def save_demo_images(img, out_dir):
    """coffee_128.png (128x96, cover-resize + center crop) and coffee_32.png (center square)."""
    from PIL import Image

    out_dir.mkdir(parents=True, exist_ok=True)
    pil = Image.fromarray(np.round(img * 255).astype(np.uint8))
    w, h = pil.size
    # Scale so the image covers 128x96, then center-crop. (Scaling to 128 wide alone would
    # give 128x85 for this 3:2 photo, too short for a 96-pixel-high crop.)
    s = max(128 / w, 96 / h)
    rw, rh = round(w * s), round(h * s)
    small = pil.resize((rw, rh), Image.Resampling.BOX)
    left, top = (rw - 128) // 2, (rh - 96) // 2
    small.crop((left, top, left + 128, top + 96)).save(out_dir / "coffee_128.png")
    side = min(w, h)
    left, top = (w - side) // 2, (h - side) // 2
    square = pil.crop((left, top, left + side, top + side))
    square.resize((32, 32), Image.Resampling.BOX).save(out_dir / "coffee_32.png")


def export(model, out, size=(96, 128)):
    """Save as a glcnn model file (graph + weights) sized for the 128x96 demo image."""
    import glcnn
    from glcnn.graph import models

    state = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    glcnn.save(models.autoencoder(size=size, weights=state), out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=4e-3)
    p.add_argument("--out", type=Path, default=REPO / "weights" / "autoencoder.npz")
    p.add_argument(
        "--demo-dir",
        default=str(REPO / "demos" / "data"),
        help="where to write coffee_128.png / coffee_32.png ('' to skip)",
    )
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    torch.set_num_threads(1)  # the machine is shared; one thread also keeps runs reproducible
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    # Scale pyramid per training image so patches see both fine texture and coarse structure.
    pyramid = []
    for name in TRAIN_IMAGES:
        img = load_image(name)
        pyramid.append([img, area_downscale(img, 2), area_downscale(img, 4)])

    model = Autoencoder()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    # Cosine decay: a high learning rate early, small steps at the end for a lower final loss.
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.steps, eta_min=args.lr / 20)
    t0 = time.time()
    running = None
    for step in range(1, args.steps + 1):
        x = sample_batch(pyramid, rng, args.batch)
        loss = F.mse_loss(model(x), x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
        if step % 200 == 0 or step == args.steps:
            print(
                f"step {step:5d}  loss {running:.6f}  elapsed {time.time() - t0:6.1f}s", flush=True
            )

    # Held-out evaluation on the full-resolution image (cropped to a multiple of 4).
    held = load_image(HELDOUT_IMAGE)
    h, w = held.shape[0] // 4 * 4, held.shape[1] // 4 * 4
    x = torch.from_numpy(held[:h, :w]).permute(2, 0, 1)[None].contiguous()
    with torch.no_grad():
        y = model.eval()(x)
        base = F.interpolate(
            F.avg_pool2d(x, 4), scale_factor=4, mode="bilinear", align_corners=False
        )
    print(
        f"held-out '{HELDOUT_IMAGE}' {w}x{h}: model PSNR {psnr(y, x):.2f} dB, "
        f"baseline (4x area down + bilinear up) PSNR {psnr(base, x):.2f} dB"
    )

    args.out.parent.mkdir(parents=True, exist_ok=True)
    export(model, args.out)
    print(f"saved {args.out} ({args.out.stat().st_size} bytes)")
    if args.demo_dir:
        save_demo_images(held, Path(args.demo_dir))
        print(f"saved demo images to {args.demo_dir}")


if __name__ == "__main__":
    main()
